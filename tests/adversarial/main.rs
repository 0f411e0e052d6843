//! The adversarial suite: strata the way real nodes and real users break things, each case
//! with what must hold. Nothing is lost silently, nothing runs away, nothing false is said:
//!
//! - `recordings`: a recording's frame headers damaged bit by bit (the magic, each record's
//!   tag, length and CRC), a length that runs past its frame or the file, files that are no
//!   recording (empty, a device, text);
//! - `times`: a sample's times and figures at the edges of every numeric type, one clock that
//!   jumps a year ahead;
//! - `writers`: two recorders on one file or flight record, a recording or the record's
//!   directory removed while it is written;
//! - `nvml`: NVML failing call by call in the stand-in library, on a plain and a MIG node;
//! - `descriptors`: a job under the agent that closes, replaces or forks over the agent's
//!   descriptors (the agent's own suite's cases, `tests/python/test_descriptors.py`).
//!
//! `cargo test --test adversarial` runs it alone; the test command runs it with every test.

// Tests may panic: `unwrap` and `expect` say which of a test's assumptions failed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod descriptors;
mod nvml;
mod recordings;
mod support;
mod times;
mod writers;

//! strata: where every byte of each NVIDIA GPU's memory goes.
//!
//! Flow (ARCHITECTURE.md, "The flow"): `source` → raw [`sample`] → [`accounting`] (layers) →
//! `history` → `detect` (findings) → views (`ui`, snapshot JSON).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

// The rooms, as ARCHITECTURE.md ("Rooms") names them.

// Collect: what the node and the jobs say, as raw samples.
/// The agents' feeds: finding, trusting and reading their sockets (I/O only).
pub mod feed;
/// The raw node sample, one instant: the one schema of snapshot, record and replay.
pub mod sample;
/// The Source trait and its sources: NVML, the demo node, a recording played back.
pub mod source;

// The model: pure functions from samples to layers, history and findings.
/// A sample split into layers; feeds matched to NVML's processes; sums by owner.
pub mod accounting;
/// The CUDA context: observed, reported, estimated.
pub mod context;
/// Findings: of the instant and from the history.
pub mod detect;
/// Series of each device's and process's figures, in tiers, within a byte budget.
pub mod history;
/// The layers: their order, names and meanings.
pub mod layers;
/// Sample → layers → history → findings: the state carried between samples.
pub mod pipeline;

// The monitor: its state and its drawing.
/// The monitor's state; `app/X.rs` is the state behind key X.
pub mod app;
/// Words and figures shared by the screen and the text exports.
pub mod present;
/// What a replay's source and the monitor share: its clock, seeks, checkpoints.
pub mod replay;
/// Drawing from the state, and nothing else.
pub mod ui;

// Exports: views of an observed instant, and recordings.
/// `strata analyze`: findings over a recording as episodes.
pub mod analyze;
/// `strata export`: a recording as tidy tables.
pub mod export;
/// Recordings written and read (format 1 and format 2).
pub mod recording;
/// The Markdown incident report and its chart.
pub mod report;
/// `strata serve`: Prometheus metrics, and the flight record beside them.
pub mod serve;
/// `strata snapshot`: JSON and text.
pub mod snapshot;

// Acting on the world.
/// `strata doctor`: what this node lets strata see.
pub mod doctor;
/// `strata run` and `strata attach`: the agent put into jobs.
pub mod launch;
/// Sending a signal to a process (the `k` dialog's action).
pub mod process_signal;

// The shell: the command line, the terminal, and shared small things.
/// The command line (clap).
pub mod cli;
/// Builders of samples and feeds for tests and benchmarks.
pub mod fixtures;
/// Man pages and completions from the command line's definition.
pub mod manual;
/// The binary's allocator: out of memory is one line and exit 1.
pub mod oom;
/// The terminal: raw mode, restored on every exit; the signals strata receives.
pub mod terminal;
/// Strings from outside made safe for a terminal.
pub mod text;
/// The monitor's event loop.
pub mod tui;
/// Binary units, `n/a` for unknown, durations.
pub mod units;
/// The build's version, commit, date and feed protocol.
pub mod version;

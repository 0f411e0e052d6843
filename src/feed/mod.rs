//! Allocator feeds (ARCHITECTURE.md, "The feed"; assets/python/PROTOCOL.md).
//!
//! Collecting only: [`hub`] finds agents' sockets (feed dirs, and `/proc/<pid>/root` for jobs
//! in containers), checks who is on the other end, reads their lines with limits, and hands
//! the raw [`crate::sample::feed::FeedRecord`]s to whichever source takes the node sample.
//! Judging them (matching each feed's devices to the processes NVML lists, and whether each
//! can be combined with NVML's instant) is the model's: [`crate::accounting::attach`].

mod candidate;
mod conn;
mod discover;
mod fd;
mod found;
#[doc(hidden)]
pub mod fuzz;
pub(crate) mod hub;
mod kept;
mod limits;
mod listing;
mod names;
mod poller;
pub(crate) mod procfile;
mod protocol;
mod protocol_pool;
mod state;
mod trust;

/// The feed dir rules, for `strata doctor`: the check a dir must pass, and where root looks.
pub(crate) use discover::{open_feed_dir, tmp_feed_dirs};
pub use hub::{FeedConfig, FeedHub, HubAsker};

//! Helpers shared by strata's integration tests: the test binary of `tests/integration/`
//! and those beside it (`tests/*.rs`) take them with `mod common;`, the files of
//! `tests/integration/` with `use crate::common;`.
//!
//! Here: the built binary ([`strata`]), a scratch directory removed on drop ([`Scratch`]), a
//! child process killed on drop ([`Running`]) and a wait for a condition ([`wait_until`]).
//! The submodules hold what one kind of test needs: the fake NVML library ([`fake_nvml`]),
//! Python jobs with the agent ([`feeds`]), tmux panes ([`tmux`]), `strata doctor`
//! ([`doctor`]), `strata serve`'s text format ([`exposition`]), the Grafana dashboard
//! ([`grafana`]), snapshots ([`snapshot`]), the oracles read from a scenario ([`oracle`]),
//! the corpus's scoring ([`corpus`]) and a busy synthetic node ([`busy_node`]).
#![allow(dead_code)]

pub mod busy_node;
pub mod corpus;
pub mod doctor;
pub mod exposition;
pub mod fake_nvml;
pub mod feeds;
pub mod grafana;
pub mod oracle;
mod process;
mod scratch;
pub mod snapshot;
pub mod tmux;

pub use process::{wait_until, Running};
pub use scratch::Scratch;

/// The path of the `strata` binary cargo built for these tests.
pub fn strata() -> &'static str {
    env!("CARGO_BIN_EXE_strata")
}

/// [`strata_command`] with these arguments, run to its end.
pub fn strata_output(args: &[&str]) -> std::process::Output {
    strata_command()
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", strata()))
}

/// A test's path as a command line takes it (the tests' paths are UTF-8).
pub fn utf8(path: &std::path::Path) -> &str {
    path.to_str()
        .unwrap_or_else(|| panic!("not UTF-8: {}", path.display()))
}

/// A command of [`strata`] that takes no NVML library or feed dir from the environment the
/// tests run in (`STRATA_NVML_LIB`, `STRATA_FEED_DIR`).
pub fn strata_command() -> std::process::Command {
    let mut command = std::process::Command::new(strata());
    command
        .env_remove("STRATA_NVML_LIB")
        .env_remove("STRATA_FEED_DIR");
    command
}

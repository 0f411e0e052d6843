//! Helpers shared by strata's integration tests: the test binary of `tests/integration/`
//! and those beside it (`tests/*.rs`) take them with `mod common;`, the files of
//! `tests/integration/` with `use crate::common;`.
//!
//! Here: the built binary ([`strata`]), a scratch directory removed on drop ([`Scratch`]), a
//! child process killed on drop ([`Running`]), a wait for a condition ([`wait_until`]), and a
//! test's skip where this machine lacks what it needs ([`skip`], [`can_mount_tmpfs`]).
//! The submodules hold what one kind of test needs: the fake NVML library ([`fake_nvml`]),
//! Python jobs with the agent ([`feeds`]), tmux panes ([`tmux`]), `strata doctor`
//! ([`doctor`]), `strata serve`'s text format ([`exposition`]), the Grafana dashboards
//! ([`grafana`]), a real Prometheus ([`prometheus`]), a page served by the test ([`page`]),
//! the names in PromQL ([`promql`]), the
//! Prometheus rule files ([`rules`]), snapshots ([`snapshot`]), the oracles read from a
//! scenario ([`oracle`]), the corpus's scoring ([`corpus`]) and a busy synthetic node
//! ([`busy_node`]).
#![allow(dead_code)]

pub mod busy_node;
pub mod corpus;
pub mod doctor;
pub mod exposition;
pub mod fake_nvml;
pub mod feeds;
pub mod grafana;
pub mod oracle;
pub mod page;
mod process;
pub mod prometheus;
pub mod promql;
pub mod rules;
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

/// A test that cannot run here: a failure where the test command requires it (`require`,
/// a `STRATA_REQUIRE_*` variable `tests/all` sets), else one line and the caller returns.
/// The line goes straight to stderr, past the harness's capture: a plain `cargo test`
/// reports a skipped test as `ok`, and the line is what tells it apart.
pub fn skip(require: &str, why: &str) {
    assert!(
        std::env::var_os(require).is_none(),
        "{require} is set, and this test cannot run: {why}"
    );
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    say(&format!(
        "SKIPPED {test}: {why} ({require}=1 makes this a failure)"
    ));
}

/// One line straight to stderr, past the harness's capture: what a run must show even when
/// its tests pass (a skip, a suite's count of skips).
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Whether a small tmpfs can be mounted in a mount namespace of this test's own (root,
/// `unshare -m`), as the disk-full tests do; where not, the test is [`skip`]ped (required by
/// `STRATA_REQUIRE_MOUNTS`) and this says false.
pub fn can_mount_tmpfs() -> bool {
    let probe = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(
            "d=$(mktemp -d) || exit 1; mount -t tmpfs -o size=16k strata-probe \"$d\"; rc=$?; \
             [ $rc -ne 0 ] || umount \"$d\"; rmdir \"$d\"; exit $rc",
        )
        .output();
    let why = match probe {
        Ok(out) if out.status.success() => return true,
        Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
        Err(e) => format!("unshare cannot run: {e}"),
    };
    skip(
        "STRATA_REQUIRE_MOUNTS",
        &format!("no tmpfs in a mount namespace of its own here (root, unshare -m): {why}"),
    );
    false
}

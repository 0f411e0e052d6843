//! Where the output goes: the monitor without a terminal says what to use instead and
//! leaves the terminal alone; a snapshot whose reader has gone stops quietly.

use crate::common;

use common::tmux::Pane;
use common::{strata, strata_command};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Cron, `ssh host strata` without `-t`, a pipe: one line with the hint, status 1, nothing
/// on stdout (no escape sequence, no alternate screen).
#[test]
fn the_monitor_without_a_terminal_says_to_use_snapshot() {
    let out = strata_command()
        .arg("--demo")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(
        err.starts_with("strata: the monitor needs a terminal"),
        "{err}"
    );
    assert!(err.contains("strata snapshot"), "{err}");
    assert!(err.contains("ssh -t"), "{err}");
    assert!(out.stdout.is_empty(), "{:?}", out.stdout);
}

/// In a terminal with stdout redirected (`strata > file`): the same line, and the terminal
/// is left in cooked mode with nothing written to the file.
#[test]
fn stdout_redirected_from_a_terminal_leaves_it_as_it_was() {
    let pane = Pane::start(
        "no-tty-out",
        &format!("{} --demo > \"$(dirname \"$0\")/out\"", strata()),
        100,
        30,
    );
    let (exit, cooked) = pane
        .wait_exit(Duration::from_secs(10))
        .unwrap_or_else(|s| panic!("the monitor did not refuse:\n{s}"));
    let screen = pane.capture();
    assert_eq!(exit, "EXIT=1", "{screen}");
    assert!(cooked, "terminal left raw:\n{screen}");
    assert!(screen.contains("stdout is not one"), "{screen}");
    assert!(screen.contains("strata snapshot"), "{screen}");
    let written = std::fs::read(pane.dir().join("out")).expect("the redirect made the file");
    assert!(
        written.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&written)
    );
}

/// `strata snapshot | head -c 10`: the reader closes the pipe; strata stops at its next
/// write, with status 0 and no "Broken pipe" message. Here the reader is gone before strata
/// writes at all, so the very first write fails.
#[test]
fn a_closed_stdout_pipe_ends_a_snapshot_quietly() {
    for args in [
        vec!["--demo", "snapshot", "--json", "--count", "3"],
        vec!["--demo", "snapshot", "--count", "3"],
    ] {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let out = strata_command()
            .args(&args)
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}

/// The same through a real shell pipeline, where the reader takes a little and then leaves.
#[test]
fn snapshot_into_head_exits_zero_without_a_message() {
    let script = format!(
        "'{}' --demo snapshot --json --count 20 | head -c 10 >/dev/null; echo \"status=${{PIPESTATUS[0]}}\"",
        strata()
    );
    let out = Command::new("bash")
        .args(["-c", &script])
        .env_remove("STRATA_NVML_LIB")
        .output()
        .expect("bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stdout.trim(), "status=0", "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

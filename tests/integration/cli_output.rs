//! Where the output goes: the monitor without a terminal says what to use instead and
//! leaves the terminal alone; a snapshot whose reader has gone stops quietly; a bad recording
//! is refused alike by every command that reads one; an option a command does not take is
//! refused in one line.

use crate::common;

use common::tmux::Pane;
use common::{strata, strata_command, strata_output};
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

/// A recording that is empty, not a recording, or missing: every command that reads one
/// (analyze, its --report-at, export, replay, record --from) exits 1 with one line on
/// stderr naming the file, with a hint, and prints and writes nothing.
#[test]
fn every_command_that_reads_a_recording_refuses_a_bad_one_alike() {
    let scratch = common::Scratch::new("bad-recordings");
    let empty = scratch.write("empty.zst", b"", 0o644);
    let garbage = scratch.write("garbage.jsonl", b"not a sample\n\x00\x01\x02\n", 0o644);
    let missing = scratch.path("missing.zst");
    for (file, what) in [
        (&empty, "empty"),
        (&garbage, "garbage"),
        (&missing, "missing"),
    ] {
        let out_dir = scratch.path(&format!("tables-{what}"));
        let reencoded = scratch.path(&format!("again-{what}.zst"));
        let name = file.file_name().and_then(|n| n.to_str()).expect("name");
        let runs: [Vec<std::ffi::OsString>; 5] = [
            vec!["analyze".into(), file.into()],
            vec![
                "analyze".into(),
                "--report-at".into(),
                "100".into(),
                file.into(),
            ],
            vec![
                "export".into(),
                file.into(),
                "--to".into(),
                "csv".into(),
                out_dir.clone().into(),
            ],
            vec!["replay".into(), file.into()],
            vec![
                "record".into(),
                reencoded.clone().into(),
                "--from".into(),
                file.into(),
            ],
        ];
        for args in runs {
            let out = strata_command()
                .args(&args)
                .current_dir(&scratch.dir)
                .stdin(Stdio::null())
                .output()
                .expect("runs");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{what} {args:?}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{what} {args:?}: {err}");
            assert!(
                err.starts_with("strata: ") && err.contains(name) && err.contains("(hint: "),
                "{what} {args:?}: {err}"
            );
            assert!(out.stdout.is_empty(), "{what} {args:?}: nothing printed");
        }
        assert!(!reencoded.exists(), "{what}: record --from wrote nothing");
        let left = std::fs::read_dir(&out_dir).map(|d| d.count()).unwrap_or(0);
        assert_eq!(left, 0, "{what}: export wrote no table");
    }
    assert!(
        std::fs::read_dir(&scratch.dir)
            .expect("dir")
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("strata-report")),
        "analyze --report-at wrote no report"
    );
}

/// Every command's --help lists only its own options: the demo's and NVML's are the live
/// commands', and one given where it does not belong is refused in one line, status 2.
#[test]
fn a_command_refuses_an_option_it_does_not_take_in_one_line() {
    for (args, option) in [
        (vec!["analyze", "--demo", "x.zst"], "--demo"),
        (
            vec!["--demo", "export", "x.zst", "--to", "csv", "out"],
            "--demo",
        ),
        (vec!["man", "--nvml-lib", "/x"], "--nvml-lib"),
        (vec!["doctor", "--demo"], "--demo"),
        (vec!["replay", "--demo-speed", "3", "x.zst"], "--demo-speed"),
        (vec!["run", "--demo", "--", "python"], "--demo"),
    ] {
        let out = strata_command().args(&args).output().expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(&format!("does not take {option}")), "{err}");
        assert!(out.stdout.is_empty());
    }
    for command in [
        "analyze",
        "export",
        "replay",
        "man",
        "completions",
        "doctor",
    ] {
        let out = strata_command()
            .args([command, "--help"])
            .output()
            .expect("runs");
        let help = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{help}");
        let nvml = if command == "doctor" {
            "--demo-at"
        } else {
            "--nvml-lib"
        };
        for foreign in ["--demo", "--demo-speed", nvml] {
            assert!(
                !help.contains(foreign),
                "{command} --help lists {foreign}:\n{help}"
            );
        }
    }
    // Where it is taken, before or after the command's name.
    for args in [
        vec!["--demo", "snapshot", "--json"],
        vec!["snapshot", "--json", "--demo"],
    ] {
        let out = strata_command().args(&args).output().expect("runs");
        assert_eq!(out.status.code(), Some(0), "{args:?}");
    }
}

/// docs/recording.md's `strata analyze` example is what the two commands it shows print:
/// the lines it quotes are the output's first lines, word for word.
#[test]
fn the_recording_pages_analyze_example_is_what_it_prints() {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/recording.md"))
        .expect("docs/recording.md");
    let block = page
        .split("```")
        .find(|b| b.contains("$ strata analyze demo.jsonl"))
        .expect("the analyze example");
    let quoted: Vec<&str> = block
        .lines()
        .skip_while(|l| !l.starts_with("$ strata analyze"))
        .skip(1)
        .take_while(|l| !l.starts_with("(…"))
        .collect();
    assert!(quoted.len() >= 3, "{block}");
    let scratch = common::Scratch::new("docs-analyze");
    let jsonl = scratch.dir.join("demo.jsonl");
    // The page's first command is the story's: common::snapshot makes it once.
    std::fs::write(&jsonl, common::snapshot::demo_story()).expect("demo.jsonl");
    let analyze = strata_output(&["analyze", common::utf8(&jsonl)]);
    assert!(analyze.status.success(), "{analyze:?}");
    let printed = String::from_utf8_lossy(&analyze.stdout);
    let printed: Vec<&str> = printed.lines().take(quoted.len()).collect();
    assert_eq!(
        printed, quoted,
        "docs/recording.md's example drifted from the output"
    );
    // The count it gives for the rest is the output's.
    let rest = block
        .lines()
        .find(|l| l.starts_with("(…"))
        .expect("the rest's line");
    let findings = String::from_utf8_lossy(&analyze.stdout)
        .lines()
        .filter(|l| !l.starts_with(' ') && l.contains(':'))
        .count()
        - 1;
    let shown = quoted.iter().filter(|l| !l.starts_with(' ')).count() - 1;
    assert!(
        rest.contains(&format!("{} findings more", findings - shown)),
        "{rest}: {findings} findings, {shown} shown"
    );
}

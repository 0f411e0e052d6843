//! Recordings written while something else has them: a second recorder on the same file or
//! flight record, the file or the record's directory removed while it is written. Nothing
//! written is spoiled by the second writer, and no loss is reported as a success.

use crate::common::{strata, Running, Scratch};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a recorder that must end says, and its exit status; it must end within a deadline
/// only a hang reaches.
fn ended(mut child: Running) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut stderr = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .expect("stderr")
                .read_to_string(&mut stderr)
                .expect("stderr");
            return (status.code(), stderr);
        }
        assert!(Instant::now() < deadline, "the recorder did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn recorder(args: &[&str]) -> Running {
    Running::spawn(
        Command::new(strata())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    )
}

/// Waits until `path` exists and holds something.
fn written(path: &Path) {
    crate::common::wait_until(Duration::from_secs(60), "the recording begun", || {
        std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
    });
}

/// Two `strata record` on one file: before, both said "recorded 51 samples" and the file read
/// back as 1 sample and garbage. The second is refused at once, naming the first; the first
/// records as if alone.
#[test]
fn a_second_recorder_on_a_file_is_refused_naming_the_first() {
    let scratch = Scratch::new("adv-two-writers");
    for name in ["two.strata", "two.jsonl"] {
        let path = scratch.path(name);
        let file = path.to_str().expect("path");
        let first = recorder(&[
            "record",
            "--demo",
            "--interval",
            "0.1",
            "--duration",
            "3s",
            file,
        ]);
        let first_pid = first.pid();
        written(&path);
        let second = strata_output_of(&["record", "--demo", "--duration", "1s", file]);
        assert_eq!(second.0, Some(1), "{name}: {}", second.1);
        assert!(
            second.1.contains("another recorder writes it")
                && second.1.contains(&format!("pid {first_pid}, strata"))
                && second.1.contains("(hint: "),
            "{name}: {}",
            second.1
        );
        assert_eq!(second.1.lines().count(), 1, "{name}: {}", second.1);
        let (status, said) = ended(first);
        assert_eq!(status, Some(0), "{name}: {said}");
        // The last line says what was saved: `strata: recorded N samples (...)`.
        let recorded: u64 = said
            .lines()
            .find_map(|l| l.strip_prefix("strata: recorded "))
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name}: {said}"));
        let analysis = crate::common::strata_output(&["analyze", "--json", file]);
        assert_eq!(analysis.status.code(), Some(0), "{name}: read back whole");
        let json: serde_json::Value =
            serde_json::from_slice(&analysis.stdout).expect("analysis JSON");
        assert_eq!(
            json["samples"], recorded,
            "{name}: every sample the first said"
        );
    }
}

fn strata_output_of(args: &[&str]) -> (Option<i32>, String) {
    let out = crate::common::strata_output(args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A flight record's directory removed while it records: before, TERM was answered with
/// "recorded 31 sample(s) into the flight record ring", exit 0, and nothing on disk. The
/// recorder notices at its next sample, says what was lost, and exits 1; a second flight
/// recorder on one directory is refused as a second recorder on a file is.
#[test]
fn a_removed_flight_record_is_said_at_once_and_fails() {
    let scratch = Scratch::new("adv-ring-gone");
    let dir = scratch.path("ring");
    let ring = dir.to_str().expect("path");
    let first = recorder(&[
        "record",
        "--demo",
        "--interval",
        "0.1",
        "--ring",
        "1h",
        ring,
    ]);
    let first_pid = first.pid();
    crate::common::wait_until(Duration::from_secs(60), "a segment", || {
        std::fs::read_dir(&dir).is_ok_and(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("ring-"))
        })
    });
    let second = strata_output_of(&["record", "--demo", "--duration", "1s", "--ring", "1h", ring]);
    assert_eq!(second.0, Some(1), "{}", second.1);
    assert!(
        second.1.contains(&format!(
            "another recorder writes it (pid {first_pid}, strata)"
        )),
        "{}",
        second.1
    );
    std::fs::remove_dir_all(&dir).expect("removed");
    let (status, said) = ended(first);
    assert_eq!(status, Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "the flight record's directory {ring} was removed while it was written"
        )) && said.contains("lost with it"),
        "{said}"
    );
    assert!(
        !said.lines().any(|l| l.starts_with("strata: recorded ")),
        "no success said: {said}"
    );
}

/// A recording's file removed while it is written: the recorder says so at its next sample
/// and exits 1, rather than write on into a file no name leads to.
#[test]
fn a_removed_recording_is_said_at_once_and_fails() {
    let scratch = Scratch::new("adv-file-gone");
    let path = scratch.path("gone.strata");
    let file = path.to_str().expect("path");
    let recording = recorder(&["record", "--demo", "--interval", "0.1", file]);
    written(&path);
    std::fs::remove_file(&path).expect("removed");
    let (status, said) = ended(recording);
    assert_eq!(status, Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "the recording {file} was removed while it was written"
        )),
        "{said}"
    );
}

//! The flight recorder, `strata record --ring DURATION DIR`, on the demo's story played fast
//! (10 story seconds a sample): finished segments of 5 minutes, each readable alone (the one
//! being written up to its last whole sample after a SIGKILL), the ring bounded by its
//! duration, the segments around the demo's OOMs and its zombie context kept past it under
//! names that say so; and a directory that is not strata's refused, nothing in it touched.

use crate::common;

use common::{strata, wait_until, Scratch};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use strata::recording::{Line, Lines};

/// The samples' times of one segment, read alone, and whether it ended cut.
fn segment(path: &Path) -> (Vec<f64>, bool) {
    let mut lines = Lines::open(path).expect("opens");
    let mut times = Vec::new();
    let mut cut = false;
    while let Some((_, line)) = lines.next_line().expect("reads") {
        match line {
            Line::Sample(s) => times.push(s.time),
            Line::Truncated => cut = true,
            other => panic!("{}: {other:?}", path.display()),
        }
    }
    (times, cut)
}

/// The event's time a kept segment's name ends with (`…-20260101-091500.zst`), in unix
/// seconds: the demo's story is on 1 January 2026, UTC.
fn stamp(name: &str) -> f64 {
    let stem = name.trim_end_matches(".zst");
    let (date, time) = stem[stem.len() - 15..].split_at(8);
    assert_eq!(date, "20260101", "{name}");
    let digits = |r: std::ops::Range<usize>| time[1..][r].parse::<f64>().expect("digits");
    1_767_225_600.0 + digits(0..2) * 3600.0 + digits(2..4) * 60.0 + digits(4..6)
}

/// The directory's names, sorted; none while the recorder has not made it yet.
fn names(dir: &Path) -> Vec<String> {
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        other => other.expect("dir"),
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_ring_keeps_its_duration_and_the_evidence_around_an_oom() {
    let scratch = Scratch::new("ring-demo");
    // Not there yet: the recorder makes it.
    let dir = scratch.path("ring");
    let mut child = Command::new(strata())
        .args([
            "record",
            "--demo",
            "--demo-at",
            "300",
            "--demo-speed",
            "100",
        ])
        .args(["--interval", "0.1", "--ring", "20m"])
        .arg(&dir)
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    wait_until(
        Duration::from_secs(10),
        "the recorder to make its directory",
        || dir.exists(),
    );
    // Story 300 s to past 2700 s: the OOMs at 900 s and 1010 s, and 20 minutes after them.
    let start = Instant::now();
    let newest_time = || -> f64 {
        let newest = names(&dir)
            .into_iter()
            .filter(|n| n.starts_with("ring-"))
            .max();
        newest.map_or(0.0, |n| {
            segment(&dir.join(n)).0.last().copied().unwrap_or(0.0)
        })
    };
    let origin = 1_767_258_000.0;
    while newest_time() < origin + 2700.0 {
        assert!(
            start.elapsed() < Duration::from_secs(240),
            "too slow: {:?}",
            names(&dir)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let names = names(&dir);
    assert!(names.contains(&".strata-ring".to_string()), "{names:?}");
    let segments: Vec<&String> = names.iter().filter(|n| n.starts_with("ring-")).collect();
    assert_eq!(
        segments.len() + 1,
        names.len(),
        "nothing but segments: {names:?}"
    );
    let kept: Vec<&&String> = segments.iter().filter(|n| n.contains("-oom-")).collect();
    assert!(!kept.is_empty(), "{names:?}");
    let mut ring_from = f64::INFINITY;
    let mut newest = 0.0f64;
    let mut spans = Vec::new();
    for name in &segments {
        let (times, cut) = segment(&dir.join(name));
        assert!(!times.is_empty(), "{name}");
        let (first, last) = (times[0], *times.last().unwrap());
        assert!(last - first < 300.0, "{name}: one segment's 5 minutes");
        newest = newest.max(last);
        spans.push((first, last));
        // A plain ring segment is `ring-START.zst`; a kept one names its event after START.
        let plain = name.trim_end_matches(".zst").matches('-').count() == 2;
        if plain {
            ring_from = ring_from.min(first);
        } else {
            assert!(!cut, "a kept segment is finished: {name}");
            // Kept: within 30 minutes before to 5 minutes after its event, by the name's
            // stamp (the segment reaching into either end included).
            let at = stamp(name);
            assert!(
                first >= at - 1800.0 - 300.0 && first <= at + 300.0,
                "{name}: from {first}"
            );
        }
    }
    // No plain segment older than the ring's 20 minutes and the segment reaching into them.
    assert!(
        newest - ring_from <= 1200.0 + 300.0,
        "{ring_from} {newest}: {names:?}"
    );
    // The last 20 minutes are all on disk, in plain or kept segments: from the newest
    // backwards, no gap wider than a sample (10 story seconds) until 20 minutes back.
    spans.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut covered_from = newest;
    for (first, last) in spans {
        if last + 10.0 + 1e-6 < covered_from {
            break;
        }
        covered_from = covered_from.min(first);
    }
    assert!(
        covered_from <= newest - 1200.0 + 10.0,
        "covered from {covered_from}, newest {newest}: {names:?}"
    );
    // The OOM of PID 60112 at story 900 s (09:15:00): the segments before it are kept.
    assert!(
        kept.iter().any(|n| n.contains("-oom-60112-20260101-0915")),
        "{names:?}"
    );
}

#[test]
fn a_directory_that_is_not_strata_s_is_refused_and_left_alone() {
    let scratch = Scratch::new("ring-foreign");
    let dir = &scratch.dir;
    std::fs::write(dir.join("notes.txt"), "mine").expect("write");
    std::fs::write(dir.join("ring-20260101-000000.zst"), "not a recording").expect("write");
    let out = Command::new(strata())
        .args(["record", "--demo", "--ring", "1h", "--duration", "5"])
        .arg(dir)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not a strata flight record"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(names(dir), ["notes.txt", "ring-20260101-000000.zst"]);
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).expect("kept"),
        "mine"
    );
}

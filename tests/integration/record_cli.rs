//! `strata record FILE` end to end: the built binary on the demo node, stopped by TERM, by
//! SIGKILL, by --duration, rotating, refusing a bad path, and on a disk that fills (a real
//! small tmpfs in a private mount namespace). Every recording is read back twice: through
//! `strata::recording` (as replay does) and through `strata analyze --json`.

use crate::common;

use common::{strata, Running, Scratch};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use strata::sample::NodeSample;

/// The samples a recording reads back as (either format, through strata's own reader), and
/// whether it ended cut (a compressed frame, or a format-2 record, not finished).
fn read_back(path: &Path) -> (Vec<NodeSample>, bool) {
    let mut lines = strata::recording::Lines::open(path).expect("open");
    let mut samples = Vec::new();
    let mut cut = false;
    while let Ok(Some((_, line))) = lines.next_line() {
        match line {
            strata::recording::Line::Sample(sample) => samples.push(*sample),
            strata::recording::Line::Truncated => cut = true,
            _ => {}
        }
    }
    (samples, cut || lines.cut())
}

/// `strata analyze --json FILE`: (samples, bad lines, truncated).
fn analyze(path: &Path) -> (u64, usize, bool) {
    let out = Command::new(strata())
        .args(["analyze", "--json"])
        .arg(path)
        .output()
        .expect("analyze runs");
    assert!(
        out.status.success(),
        "analyze failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    (
        v["samples"].as_u64().expect("samples"),
        v["bad_lines"].as_array().expect("bad_lines").len(),
        v["truncated"].as_bool().expect("truncated"),
    )
}

/// The demo at 0.05 s a sample, one story second each.
fn start(path: &Path, extra: &[&str]) -> Running {
    Running::spawn(
        Command::new(strata())
            .args([
                "record",
                "--demo",
                "--interval",
                "0.05",
                "--demo-speed",
                "20",
            ])
            .args(extra)
            .arg(path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
}

/// Waits until at least `n` samples read back from the file being written.
fn wait_samples(path: &Path, n: usize) -> usize {
    let start = Instant::now();
    loop {
        if path.exists() {
            let got = read_back(path).0.len();
            if got >= n {
                return got;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "fewer than {n} samples after 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(child: &Child, signo: i32) {
    // SAFETY: a plain kill(2) of the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signo) }, 0);
}

/// Consecutive story seconds: no sample in the middle is missing.
fn assert_consecutive(samples: &[NodeSample], what: &str) {
    for pair in samples.windows(2) {
        let step = pair[1].time - pair[0].time;
        assert!((step - 1.0).abs() < 1e-6, "{what}: a gap of {step} s");
    }
}

/// What `record` says on stderr, and nothing on stdout: what it records, where and how it
/// stops; the devices of its first sample; last, what it saved and why it stopped.
fn assert_said(out: &std::process::Output, name: &str, stopped: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.stdout.is_empty(), "{name}: stdout is clean");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{name}: {stderr}");
    assert!(
        lines[0].starts_with("strata: recording the simulated demo node")
            && lines[0].contains(&format!("/{name} ("))
            && lines[0].contains("every 0.05s")
            && lines[0].contains("Ctrl-C"),
        "{name}: {stderr}"
    );
    assert!(
        lines[1].starts_with("strata: first sample written: 4 GPUs ("),
        "{name}: {stderr}"
    );
    assert!(
        lines[2].contains(name) && lines[2].contains(&format!("saved; {stopped}")),
        "{name}: {stderr}"
    );
    lines[2].to_string()
}

/// TERM (and HUP, INT) finish the frame: every sample written reads back, through the
/// library and through analyze, nothing cut; the exit is 0, and stderr says what was saved.
#[test]
fn term_finishes_the_recording_and_every_sample_reads_back() {
    let scratch = Scratch::new("record-term");
    let dir = &scratch.dir;
    for (name, signo) in [
        ("t.jsonl.zst", libc::SIGTERM),
        ("t.jsonl", libc::SIGHUP),
        ("t.jsonl.gz", libc::SIGINT),
    ] {
        let path = dir.join(name);
        let child = start(&path, &[]);
        let seen = wait_samples(&path, 8);
        signal(&child, signo);
        let out = child.wait_with_output().expect("exits");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {:?} {stderr}", out.status);
        let stopped = match signo {
            libc::SIGTERM => "stopped by TERM",
            libc::SIGHUP => "stopped by HUP",
            _ => "stopped by Ctrl-C (INT)",
        };
        let saved = assert_said(&out, name, stopped);
        let (samples, cut) = read_back(&path);
        assert!(!cut, "{name}: the frame was finished");
        assert!(samples.len() >= seen, "{name}");
        assert!(
            saved.contains(&format!("recorded {} samples", samples.len())),
            "{name}: {stderr}"
        );
        assert_consecutive(&samples, name);
        assert_eq!(
            analyze(&path),
            (samples.len() as u64, 0, false),
            "{name}: analyze reads them all"
        );
    }
}

/// SIGKILL cannot be caught: every sample flushed before it reads back (at most the one in
/// flight is lost), the unfinished frame ends the stream as a cut, and analyze takes the
/// recording as it is. A kill mid-write leaves a piece of a sample: the rest reads back.
#[test]
fn sigkill_loses_at_most_the_sample_in_flight() {
    let scratch = Scratch::new("record-kill");
    let dir = &scratch.dir;
    for name in ["k.zst", "k.jsonl", "k.gz"] {
        let path = dir.join(name);
        let mut child = start(&path, &[]);
        let seen = wait_samples(&path, 6);
        signal(&child, libc::SIGKILL);
        child.wait().expect("killed");
        let (samples, _) = read_back(&path);
        assert!(samples.len() >= seen, "{name}: {} < {seen}", samples.len());
        assert_consecutive(&samples, name);
        let (count, bad, _) = analyze(&path);
        assert_eq!((count, bad), (samples.len() as u64, 0), "{name}");

        // As if killed inside a write: the last few bytes never reached the file.
        let bytes = std::fs::read(&path).expect("read");
        let torn = dir.join(format!("torn-{name}"));
        std::fs::write(&torn, &bytes[..bytes.len() - 5]).expect("write");
        let (kept, _) = read_back(&torn);
        assert!(kept.len() + 1 >= samples.len(), "{name}: all but the last");
        assert_eq!(kept[..], samples[..kept.len()], "{name}");
        let (count, bad, _) = analyze(&torn);
        assert_eq!(
            (count, bad),
            (kept.len() as u64, 0),
            "{name}: the cut is tolerated"
        );
    }
}

#[test]
fn duration_ends_the_recording_cleanly() {
    let scratch = Scratch::new("record-duration");
    let dir = &scratch.dir;
    let path = dir.join("d.zst");
    let started = Instant::now();
    let out = start(&path, &["--duration", "1s"])
        .wait_with_output()
        .expect("exits");
    assert!(out.status.success());
    assert!(started.elapsed() >= Duration::from_secs(1));
    let (samples, cut) = read_back(&path);
    assert!(!cut);
    // 1 s at 0.05 s: about 20 samples (a loaded machine may take fewer).
    assert!((5..=22).contains(&samples.len()), "{}", samples.len());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("(strata.recording/2, zstd)"), "{stderr}");
    assert!(
        stderr.contains("stops after 1s (--duration)"),
        "how it stops: {stderr}"
    );
    let saved = assert_said(&out, "d.zst", "stopped after 1s (--duration)");
    assert!(
        saved.contains(&format!("recorded {} samples", samples.len())),
        "{saved}"
    );
}

/// The first line comes at once, while the recording runs: what, where, how it stops.
#[test]
fn record_says_at_once_what_it_records_and_how_it_stops() {
    let scratch = Scratch::new("record-at-once");
    let path = scratch.dir.join("now.jsonl.zst");
    let mut child = start(&path, &[]);
    let stderr = child.stderr.take().expect("piped");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let first = lines.next().expect("a line").expect("utf-8");
    let second = lines.next().expect("a line").expect("utf-8");
    assert!(
        child.try_wait().expect("status").is_none(),
        "said while it records"
    );
    assert!(
        first.starts_with("strata: recording the simulated demo node (demo ×20) every 0.05s into ")
            && first.contains("now.jsonl.zst (JSON lines, zstd)")
            && first.ends_with("Ctrl-C (or TERM, HUP) stops it, and what was recorded is saved"),
        "{first}"
    );
    assert!(
        second.starts_with("strata: first sample written: 4 GPUs"),
        "{second}"
    );
    signal(&child, libc::SIGTERM);
    let last = lines.next().expect("a line").expect("utf-8");
    assert!(last.contains("saved; stopped by TERM"), "{last}");
    assert!(lines.next().is_none(), "three lines");
    assert!(child.wait().expect("exits").success());
}

/// Past --max-size the file rotates: FILE.1 ... FILE.keep, no more, each a finished
/// recording within the cap (plus the first sample of a frame), the samples in order across
/// them.
#[test]
fn rotation_keeps_readable_bounded_files() {
    let scratch = Scratch::new("record-rotate");
    let dir = &scratch.dir;
    let path = dir.join("r.zst");
    // Room for several samples a file: a frame's first sample carries every owner and hello
    // whole, the later ones refer to it.
    let child = start(&path, &["--max-size", "16K", "--keep", "2"]);
    let rotated = |n| {
        let mut p = path.clone().into_os_string();
        p.push(format!(".{n}"));
        PathBuf::from(p)
    };
    let begun = Instant::now();
    // The file may be between its rename and its successor at any look: count it as empty.
    let samples_now = |p: &Path| {
        strata::recording::open(p)
            .map(|(read, _)| read.split(b'\n').filter(|l| l.is_ok()).count())
            .unwrap_or(0)
    };
    while !rotated(2).exists() || samples_now(&path) < 3 {
        assert!(
            begun.elapsed() < Duration::from_secs(60),
            "no second rotation"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(600));
    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().expect("exits");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("rotated"), "{stderr}");
    assert!(!rotated(3).exists(), "keeps 2");
    // The first sample of a frame is the largest (no history to refer to).
    let first = {
        let probe = dir.join("probe.zst");
        let out = start(&probe, &["--duration", "0.2"])
            .wait_with_output()
            .expect("probe");
        assert!(out.status.success());
        std::fs::metadata(&probe).expect("probe").len()
    };
    let mut all = Vec::new();
    for file in [rotated(2), rotated(1), path.clone()] {
        let len = std::fs::metadata(&file).expect("exists").len();
        assert!(len <= 16 * 1024 + first, "{}: {len}", file.display());
        let (samples, cut) = read_back(&file);
        assert!(!cut, "{} is finished", file.display());
        assert!(!samples.is_empty());
        let (count, bad, truncated) = analyze(&file);
        assert_eq!((count, bad, truncated), (samples.len() as u64, 0, false));
        all.extend(samples);
    }
    assert_consecutive(&all, "across the rotated files");
}

/// A path that cannot be written: one line naming it, with a hint, exit 1, before any
/// sampling (and no file left behind).
#[test]
fn an_unwritable_path_is_refused_before_anything_starts() {
    let scratch = Scratch::new("record-unwritable");
    let dir = &scratch.dir;
    let mut cases = vec![
        (dir.join("missing/r.zst"), "its directory does not exist"),
        (dir.clone(), "it is a directory"),
    ];
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        // Root writes through permissions: only another user can see this refusal.
        let locked = dir.join("locked");
        std::fs::create_dir(&locked).expect("dir");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).expect("chmod");
        cases.push((locked.join("r.zst"), "Permission denied"));
    }
    for (path, cause) in cases {
        let out = Command::new(strata())
            .args(["record", "--demo"])
            .arg(&path)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {stderr}", path.display());
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("strata: cannot record to "), "{stderr}");
        assert!(
            stderr.contains(cause) && stderr.contains("(hint: "),
            "{stderr}"
        );
    }
    assert!(!dir.join("missing").exists());
}

/// A real disk that fills: a 64 KiB (plain) or 24 KiB (zstd) tmpfs in a private mount namespace (root only). The
/// recorder stops with one line and a hint, exit 1; every sample before the error reads
/// back, and the file ends at a whole sample (a compressed frame is ended there, room
/// permitting).
#[test]
fn a_disk_that_fills_keeps_the_recording_so_far_readable() {
    if !common::can_mount_tmpfs() {
        return;
    }
    let scratch = Scratch::new("record-full");
    let dir = &scratch.dir;
    for (name, size) in [("f.jsonl", "64k"), ("f.zst", "24k"), ("f.gz", "32k")] {
        let mount = dir.join(format!("mnt-{name}"));
        std::fs::create_dir_all(&mount).expect("dir");
        let kept = dir.join(format!("kept-{name}"));
        // Inside the namespace: mount, record until the disk is full, copy the file out.
        let script = format!(
            "set -u; mount -t tmpfs -o size={size} tmpfs '{m}' || exit 90; \
             '{strata}' record --demo --interval 0.05 --demo-speed 20 '{m}/{name}'; rc=$?; \
             cp '{m}/{name}' '{kept}'; exit $rc",
            m = mount.display(),
            strata = strata(),
            kept = kept.display(),
        );
        let out = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &script])
            .output()
            .expect("unshare");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(
            out.status.code(),
            Some(90),
            "the tmpfs was not mounted: {stderr}"
        );
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        // What it records and its first sample, then the one line of the error.
        assert_eq!(stderr.lines().count(), 3, "{name}: {stderr}");
        let stderr = stderr.lines().last().unwrap_or_default();
        assert!(
            stderr.starts_with("strata: cannot write the recording ")
                && stderr.contains("No space left on device")
                && stderr.contains("(hint: free space"),
            "{name}: {stderr}"
        );
        // Said once (before: "No space left on device (os error 28): No space left on
        // device (os error 28)", the cause repeated by its chain).
        assert_eq!(
            stderr.matches("No space left on device").count(),
            1,
            "{name}: {stderr}"
        );
        let (samples, _) = read_back(&kept);
        assert!(samples.len() >= 3, "{name}: {}", samples.len());
        assert_consecutive(&samples, name);
        let (count, bad, truncated) = analyze(&kept);
        assert_eq!((count, bad), (samples.len() as u64, 0), "{name}");
        // Plain: cut back to a whole line. Compressed: the frame is ended by hand where its
        // last bytes fit in what the cut freed; where they do not, it reads as cut, after
        // every whole sample.
        if name.ends_with(".jsonl") {
            assert!(!truncated, "{name}: cut back to a whole sample");
        }
    }
}

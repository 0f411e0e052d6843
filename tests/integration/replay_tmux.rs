//! `strata replay` under a real pseudo-terminal: a recording made with
//! `strata snapshot --json --count` plays back with its GPUs, processes and findings; the
//! keys change the speed, move the position and pause the clock; a hostile recording cannot
//! reach the terminal; a bad recording is refused before the terminal is taken.

use crate::common;

use common::tmux::Pane;
use common::{strata, Scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const START: Duration = Duration::from_secs(15);
const KEY: Duration = Duration::from_secs(5);

/// `count` samples of the demo from story second `at`, 10 s apart, as `snapshot` writes them.
fn record(dir: &Path, name: &str, at: u32, count: u32) -> PathBuf {
    let path = dir.join(name);
    let out = Command::new(strata())
        .args([
            "snapshot",
            "--demo",
            "--demo-speed",
            "1",
            "--interval",
            "10",
            "--json",
        ])
        .args(["--demo-at", &at.to_string(), "--count", &count.to_string()])
        .output()
        .expect("runs strata snapshot");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&path, &out.stdout).expect("writes the recording");
    path
}

/// The header's replay words: `replay 09:10:00 UTC · 0s of 39m50s · ×1 …`.
fn header(screen: &str) -> String {
    let first = screen.lines().next().unwrap_or_default();
    first[first.find("replay ").unwrap_or(0)..].to_string()
}

/// The position the header shows (`0s`, `2m40s`).
fn position(screen: &str) -> String {
    let words = header(screen);
    words
        .split(" · ")
        .nth(1)
        .and_then(|p| p.split(" of ").next())
        .unwrap_or_default()
        .to_string()
}

fn wait_header(pane: &Pane, needle: &str) -> String {
    let start = Instant::now();
    loop {
        let screen = pane.capture();
        if header(&screen).contains(needle) {
            return screen;
        }
        assert!(
            start.elapsed() < KEY,
            "the header never said {needle:?}:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn a_snapshot_recording_plays_with_its_gpus_processes_and_findings_and_the_keys_move_it() {
    let scratch = Scratch::new("replay");
    // 40 minutes of the story from 15 minutes in: an OOM, a zombie context.
    let file = record(&scratch.dir, "demo.jsonl", 900, 240);
    let pane = Pane::start(
        "replay",
        &format!("{} replay {}", strata(), file.display()),
        200,
        50,
    );
    let screen = pane
        .wait_for(
            &[
                "replay 09:15:",
                " of 39m50s · ×1",
                "NVIDIA H100 80GB HBM3",
                "3g.40gb",
                "52010",
                "train.py",
                "ran out of memory",
                "no longer exists but its CUDA context",
            ],
            START,
        )
        .unwrap_or_else(|s| panic!("the recording's GPUs, processes and findings:\n{s}"));
    assert!(screen.contains("g/G start/end"), "{screen}");
    // Speed.
    pane.keys(&["+"]);
    wait_header(&pane, "· ×2");
    pane.keys(&["-", "-", "-"]);
    wait_header(&pane, "· ×¼");
    // Seek: to the start, a minute on, two, back one; the end; the start.
    pane.keys(&["g"]);
    wait_header(&pane, "replay 09:15:00 UTC · 0s of 39m50s");
    pane.keys(&["Right"]);
    wait_header(&pane, "· 1m00s of 39m50s");
    pane.keys(&["Right", "Right", "Left"]);
    wait_header(&pane, "· 2m00s of 39m50s");
    pane.keys(&["G"]);
    wait_header(&pane, "· 39m50s of 39m50s · ×¼ ■ end");
    pane.keys(&["g"]);
    wait_header(&pane, "replay 09:15:00 UTC · 0s of 39m50s");
    // At ×64 a sample every 0.16 s: the position moves; paused, it stands still.
    pane.keys(&["+", "+", "+", "+", "+", "+", "+", "+"]);
    wait_header(&pane, "· ×64");
    let moving = position(&pane.capture());
    let start = Instant::now();
    while position(&pane.capture()) == moving {
        assert!(start.elapsed() < KEY, "the replay does not play");
        std::thread::sleep(Duration::from_millis(25));
    }
    pane.keys(&["p"]);
    let paused = wait_header(&pane, "‖ paused");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        position(&pane.capture()),
        position(&paused),
        "paused, the clock stands"
    );
    pane.keys(&["p"]);
    let start = Instant::now();
    while position(&pane.capture()) == position(&paused) {
        assert!(start.elapsed() < KEY, "resumed, the replay does not play");
        std::thread::sleep(Duration::from_millis(25));
    }
    // Home and End still move in the list, not in time.
    pane.keys(&["p", "End"]);
    let before = position(&wait_header(&pane, "‖ paused"));
    pane.keys(&["Home"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(position(&pane.capture()), before);
    pane.keys(&["q"]);
    let (exit, cooked) = pane.wait_exit(KEY).unwrap_or_else(|s| panic!("{s}"));
    assert_eq!(exit, "EXIT=0");
    assert!(cooked);
}

#[test]
fn a_hostile_recording_cannot_reach_the_terminal() {
    let scratch = Scratch::new("replay-hostile");
    let file = record(&scratch.dir, "plain.jsonl", 600, 3);
    let text = std::fs::read_to_string(&file).expect("reads");
    let title = "\u{1b}]2;PWNED\u{7}";
    let hostile: Vec<String> = text
        .lines()
        .map(|line| {
            let mut v: Value = serde_json::from_str(line).expect("json");
            v["host"] = Value::from(format!("node{title}\u{1b}[2J\u{1b}[?1049l"));
            v["gpus"][0]["name"] = Value::from(format!("H100{title}\u{1b}[31mRED"));
            for p in v["processes"].as_array_mut().expect("processes") {
                p["command"] = Value::from(format!("python{title} x\u{1b}c\nrm -rf"));
            }
            v.to_string()
        })
        .collect();
    let path = scratch.dir.join("hostile.jsonl");
    std::fs::write(&path, hostile.join("\n") + "\n").expect("writes");
    let pane = Pane::start(
        "replay-hostile",
        &format!("{} replay {}", strata(), path.display()),
        200,
        50,
    );
    let screen = pane
        .wait_for(&["replay 09:10:00 UTC", "H100", "python"], START)
        .unwrap_or_else(|s| panic!("{s}"));
    assert_ne!(pane.format("#{pane_title}").trim(), "PWNED", "retitled");
    assert!(
        screen.contains("Processes ("),
        "the screen was cleared or left:\n{screen}"
    );
    pane.keys(&["q"]);
    let (exit, cooked) = pane.wait_exit(KEY).unwrap_or_else(|s| panic!("{s}"));
    assert_eq!(exit, "EXIT=0");
    assert!(cooked);
    assert_ne!(pane.format("#{pane_title}").trim(), "PWNED", "retitled");
}

/// One line on stderr, a hint, status 1, and the terminal never taken.
#[test]
fn a_missing_empty_or_sampleless_recording_is_one_line_and_exit_1() {
    let scratch = Scratch::new("replay-bad");
    let empty = scratch.dir.join("empty.jsonl");
    std::fs::write(&empty, "").expect("writes");
    let junk = scratch.dir.join("junk.jsonl");
    std::fs::write(&junk, "not json\n{\"time\": 1}\n").expect("writes");
    let missing = scratch.dir.join("missing.jsonl");
    for (file, says) in [
        (&missing, "cannot read the recording"),
        (&empty, "holds no sample (it is empty)"),
        (
            &junk,
            "holds no sample (2 line(s), 2 not a sample, the last at line 2)",
        ),
    ] {
        let out = Command::new(strata())
            .arg("replay")
            .arg(file)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("strata: ") && stderr.contains(says),
            "{stderr}"
        );
        assert!(stderr.contains("(hint: "), "{stderr}");
        if file != &missing {
            // `strata record` writes format 2: the hint names both formats, as analyze's does.
            assert!(
                stderr.contains("`strata record FILE` (format 2)"),
                "{stderr}"
            );
        }
        assert!(out.stdout.is_empty(), "the terminal was touched");
    }
    // Under a terminal too, before the screen is taken.
    let pane = Pane::start(
        "replay-bad",
        &format!("{} replay {}", strata(), empty.display()),
        100,
        10,
    );
    let (exit, cooked) = pane.wait_exit(KEY).unwrap_or_else(|s| panic!("{s}"));
    assert_eq!(exit, "EXIT=1");
    assert!(cooked);
    assert!(pane.capture().contains("holds no sample"));
}

/// A seek through an hour of samples runs off the UI thread: its progress is shown and keys
/// are answered while it runs (the speed changes in the header before the seek ends).
#[test]
fn keys_are_answered_while_a_long_seek_runs() {
    let scratch = Scratch::new("replay-seek");
    let path = scratch.dir.join("hour.jsonl");
    let out = Command::new(strata())
        .args(["snapshot", "--demo", "--demo-at", "0", "--demo-speed", "1"])
        .args(["--interval", "1", "--json", "--count", "3600"])
        .output()
        .expect("runs strata snapshot");
    assert!(out.status.success());
    std::fs::write(&path, &out.stdout).expect("writes");
    let pane = Pane::start(
        "replay-seek",
        &format!("{} replay {}", strata(), path.display()),
        200,
        50,
    );
    pane.wait_for(&["replay 09:00:0"], START)
        .unwrap_or_else(|s| panic!("{s}"));
    pane.keys(&["G"]);
    let seeking = wait_header(&pane, "⟳ seeking end");
    pane.keys(&["+"]);
    let start = Instant::now();
    loop {
        let screen = pane.capture();
        let words = header(&screen);
        if words.contains("×2") {
            assert!(
                words.contains("⟳ seeking end"),
                "the key was answered only after the seek:\n{seeking}\n{screen}"
            );
            break;
        }
        assert!(start.elapsed() < KEY, "+ not answered:\n{screen}");
        std::thread::sleep(Duration::from_millis(25));
    }
    let start = Instant::now();
    while !header(&pane.capture()).contains("· 59m59s of 59m59s · ×2 ■ end") {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the seek never ended:\n{}",
            pane.capture()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    pane.keys(&["q"]);
    let (exit, cooked) = pane.wait_exit(KEY).unwrap_or_else(|s| panic!("{s}"));
    assert_eq!(exit, "EXIT=0");
    assert!(cooked);
}

//! `strata record OUT --from IN`: a format-1 recording re-encoded into format 2 reads back
//! as the same samples, every field to the bit, for the demo's 20-minute story (from
//! `strata snapshot --json --count`) and for the busy synthetic node of 8 GPUs x 64 fed
//! processes; format 2 re-encoded back to JSON lines too.

use crate::common;

use common::busy_node;
use common::{strata, Scratch};
use std::path::Path;
use std::process::Command;
use strata::recording::{Line, Lines};
use strata::sample::NodeSample;

/// Every sample of a recording as the pipeline reads it (a process's matched feed is
/// derived, so dropped; the older derived form's feeds rebuilt raw), and whether anything
/// but samples was met.
fn read(path: &Path) -> (Vec<NodeSample>, bool) {
    let mut lines = Lines::open(path).expect("opens");
    let mut samples = Vec::new();
    let mut other = false;
    while let Some((_, line)) = lines.next_line().expect("reads") {
        match line {
            Line::Sample(s) => {
                let mut s = *s;
                strata::sample::make_raw(&mut s);
                samples.push(s);
            }
            _ => other = true,
        }
    }
    (samples, other || lines.cut())
}

fn reencode(from: &Path, to: &Path) -> String {
    let out = Command::new(strata())
        .args(["record"])
        .arg(to)
        .arg("--from")
        .arg(from)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// IN re-encoded into format 2, and back into JSON lines: all three read alike.
fn holds(input: &Path, dir: &Path) -> Vec<NodeSample> {
    let (one, other) = read(input);
    assert!(!other && !one.is_empty());
    let two = dir.join("two.zst");
    let said = reencode(input, &two);
    assert!(said.contains("strata.recording/2"), "{said}");
    let head = std::fs::read(&two).expect("written");
    assert!(head.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]), "zstd");
    let (back, other) = read(&two);
    assert!(!other);
    assert_eq!(back.len(), one.len());
    for (a, b) in one.iter().zip(&back) {
        assert_eq!(a, b, "at {}", a.time);
    }
    let again = dir.join("again.jsonl");
    reencode(&two, &again);
    assert_eq!(read(&again).0, one, "format 2 back to JSON lines");
    one
}

#[test]
fn the_demo_story_reads_back_alike_from_either_format() {
    let scratch = Scratch::new("reencode-demo");
    let dir = &scratch.dir;
    let one = dir.join("one.jsonl");
    std::fs::write(&one, common::snapshot::demo_story()).expect("write");
    let samples = holds(&one, dir);
    assert_eq!(samples.len(), 121);
}

/// The snapshot's older derived form (allocator figures only in `processes[].feed`, no raw
/// `feeds`) keeps its allocator figures through format 2: written as the feeds rebuilt.
#[test]
fn the_older_derived_form_keeps_its_feeds_in_format_2() {
    let scratch = Scratch::new("reencode-derived");
    let dir = &scratch.dir;
    let one = dir.join("one.jsonl");
    let out = Command::new(strata())
        .args(["snapshot", "--demo", "--demo-at", "600", "--json"])
        .args(["--count", "30", "--interval", "10"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let mut text = String::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).expect("a sample");
        v.as_object_mut().expect("an object").remove("feeds");
        text += &v.to_string();
        text.push('\n');
    }
    std::fs::write(&one, text).expect("write");
    let samples = holds(&one, dir);
    assert_eq!(samples.len(), 30);
    assert!(
        samples.iter().all(|s| !s.feeds.is_empty()),
        "every sample keeps its allocator figures, as feeds"
    );
}

#[test]
fn the_busy_node_reads_back_alike_from_either_format() {
    let scratch = Scratch::new("reencode-busy");
    let dir = &scratch.dir;
    let one = dir.join("one.jsonl");
    let mut node = busy_node::Node::new(8);
    let mut text = String::new();
    // 11 minutes: three keyframes, the leak's climb begun.
    for k in 0..660 {
        text += &serde_json::to_string(&node.sample(k)).expect("json");
        text.push('\n');
    }
    std::fs::write(&one, text).expect("write");
    let samples = holds(&one, dir);
    assert_eq!(samples.len(), 660);
    assert_eq!(samples[0].feeds.len(), 64);
    let f1 = std::fs::metadata(&one).expect("one").len();
    let f2 = std::fs::metadata(dir.join("two.zst")).expect("two").len();
    assert!(f2 * 20 < f1, "format 2 is far smaller: {f2} of {f1}");
}

#[test]
fn reencoding_into_the_file_being_read_is_refused() {
    let scratch = Scratch::new("reencode-same");
    let dir = &scratch.dir;
    let one = dir.join("one.jsonl");
    std::fs::write(&one, "").expect("write");
    let out = Command::new(strata())
        .arg("record")
        .arg(&one)
        .arg("--from")
        .arg(&one)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is the recording being read"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1);
}

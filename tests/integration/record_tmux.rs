//! `r` in the monitor under a real pseudo-terminal: the prompt with its default name, the
//! header while recording (paused too), `r` again to stop with the saved line, and the file
//! read back. A bad name is refused in the footer and the monitor goes on.

use crate::common;

use common::tmux::Pane;
use common::{strata, Scratch};
use std::io::BufRead;
use std::time::Duration;
use strata::sample::NodeSample;

const WAIT: Duration = common::tmux::PATIENCE;

#[test]
fn r_records_from_the_monitor_and_the_file_reads_back() {
    let scratch = Scratch::new("rec-tmux");
    let dir = &scratch.dir;
    let pane = Pane::start(
        "rec",
        &format!(
            "cd '{}' && {} --demo --interval 0.2",
            dir.display(),
            strata()
        ),
        140,
        40,
    );
    pane.wait_for(&["● live"], WAIT)
        .unwrap_or_else(|s| panic!("no monitor:\n{s}"));

    pane.keys(&["r"]);
    let screen = pane
        .wait_for(&["record to: strata-demo-node-", ".jsonl.zst"], WAIT)
        .unwrap_or_else(|s| panic!("no prompt with the default name:\n{s}"));
    assert!(screen.contains("esc cancel"), "{screen}");
    // Esc cancels: nothing is recorded.
    pane.keys(&["Escape"]);
    pane.wait_for(&["recording cancelled"], WAIT)
        .unwrap_or_else(|s| panic!("not cancelled:\n{s}"));

    // A name in a directory that does not exist: refused in the footer, the monitor goes on.
    pane.keys(&["r", "C-u", "nope/x.zst", "Enter"]);
    pane.wait_for(
        &["cannot record to nope/x.zst", "directory does not exist"],
        WAIT,
    )
    .unwrap_or_else(|s| panic!("bad name not refused:\n{s}"));

    pane.keys(&["r", "C-u", "night.jsonl.zst", "Enter"]);
    pane.wait_for(&["● rec night.jsonl.zst"], WAIT)
        .unwrap_or_else(|s| panic!("header does not show the recording:\n{s}"));
    // Paused, samples are still recorded as they arrive: the header says both.
    pane.keys(&["p"]);
    pane.wait_for(&["‖ paused", "● rec night.jsonl.zst"], WAIT)
        .unwrap_or_else(|s| panic!("paused header lost the recording:\n{s}"));
    // Eight samples come while paused (the header counts them as queued): they are
    // recorded too.
    let queued = |screen: &str| -> Option<u64> {
        screen
            .split("‖ paused ")
            .nth(1)?
            .split(" queued")
            .next()?
            .parse()
            .ok()
    };
    common::wait_until(WAIT, "eight samples queued while paused", || {
        queued(&pane.capture()).is_some_and(|n| n >= 8)
    });
    // Narrow: the short form keeps the recording in view.
    pane.resize(60, 20);
    pane.wait_for(&["● rec "], WAIT)
        .unwrap_or_else(|s| panic!("narrow header lost the recording:\n{s}"));
    pane.resize(140, 40);
    pane.keys(&["r"]);
    let screen = pane
        .wait_for(&["saved night.jsonl.zst: "], WAIT)
        .unwrap_or_else(|s| panic!("no saved line:\n{s}"));
    assert!(!screen.contains("● rec"), "still recording:\n{screen}");
    let saved: u64 = screen
        .split("saved night.jsonl.zst: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in the saved line:\n{screen}"));
    pane.keys(&["q"]);
    let (exit, cooked) = pane.wait_exit(WAIT).expect("quits");
    assert_eq!(exit, "EXIT=0");
    assert!(cooked);

    let path = dir.join("night.jsonl.zst");
    let (read, cut) = strata::recording::open(&path).expect("the file is there");
    let samples: Vec<NodeSample> = read
        .lines()
        .map(|l| serde_json::from_str(&l.expect("line")).expect("a sample"))
        .collect();
    assert!(!cut.happened(), "the frame was finished");
    assert_eq!(samples.len() as u64, saved, "the saved line's count");
    // The eight that came while paused, at least: those were recorded too.
    assert!(saved >= 8, "{saved} samples");
    assert!(!dir.join("nope").exists());
}

/// Quitting while recording saves the file and says, once the screen is given back, where it
/// is (its full path) and what it holds.
#[test]
fn quitting_while_recording_says_where_the_recording_is() {
    let scratch = Scratch::new("rec-quit");
    let dir = &scratch.dir;
    let pane = Pane::start(
        "rec-quit",
        &format!(
            "cd '{}' && {} --demo --interval 0.2",
            dir.display(),
            strata()
        ),
        200,
        40,
    );
    pane.wait_for(&["● live"], WAIT)
        .unwrap_or_else(|s| panic!("no monitor:\n{s}"));
    pane.keys(&["r", "C-u", "quit.jsonl.zst", "Enter"]);
    pane.wait_for(&["● rec quit.jsonl.zst"], WAIT)
        .unwrap_or_else(|s| panic!("not recording:\n{s}"));
    pane.keys(&["q"]);
    let (exit, cooked) = pane.wait_exit(WAIT).expect("quits");
    assert_eq!(exit, "EXIT=0");
    assert!(cooked);
    // The line may wrap in the pane: read it whole.
    let shown: String = pane.capture().lines().map(str::trim_end).collect();
    let path = dir.join("quit.jsonl.zst");
    let said = shown
        .split("strata: recorded ")
        .nth(1)
        .unwrap_or_else(|| panic!("no parting words:\n{shown}"));
    assert!(
        said.contains(&format!("to {}, saved", path.display())),
        "the full path: {shown}"
    );
    let count: usize = said
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {said}"));
    let (read, cut) = strata::recording::open(&path).expect("the file is there");
    assert!(!cut.happened(), "the frame was finished");
    assert_eq!(read.lines().count(), count, "the count said is the file's");
}

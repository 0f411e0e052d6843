//! `R` in the monitor under a real pseudo-terminal: it writes the report of the instant on
//! screen (paused) into the directory strata was started in, the same report `strata snapshot
//! --report` prints for that instant, and names the file in the footer; a directory that
//! cannot be written is one line in the footer, and the monitor stays up.

use crate::common;

use common::tmux::Pane;
use common::{strata, Scratch};
use std::time::Duration;

const START: Duration = Duration::from_secs(20);
/// 30 s between samples (300 story seconds each): the screen holds one instant for the test.
const OPTIONS: &str = "--demo --demo-at 905 --interval 30";

/// `story 15m05s` → 905.
fn story_secs(text: &str) -> u64 {
    let rest = text
        .split("story ")
        .nth(1)
        .unwrap_or_else(|| panic!("no story time in {text:?}"));
    let word = rest.split([' ', ')', ':']).next().unwrap_or_default();
    let (minutes, seconds) = match word.split_once('m') {
        Some((m, s)) => (m, s),
        None => ("0", word),
    };
    let minutes: u64 = minutes.parse().expect("minutes");
    let seconds: u64 = seconds.trim_end_matches('s').parse().expect("seconds");
    minutes * 60 + seconds
}

#[test]
fn r_writes_the_paused_instants_report_and_the_footer_names_it() {
    let scratch = Scratch::new("report-written");
    let dir = &scratch.dir;
    let pane = Pane::start(
        "report",
        &format!("cd '{}' && {} {OPTIONS}", dir.display(), strata()),
        200,
        50,
    );
    pane.wait_for(&["story 15m05s", "3g.40gb"], START)
        .unwrap_or_else(|s| panic!("the monitor did not draw:\n{s}"));
    pane.keys(&["p"]);
    pane.wait_for(&["paused"], Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("not paused:\n{s}"));
    pane.keys(&["R"]);
    let screen = pane
        .wait_for(
            &["report written to ./strata-report-demo-node-"],
            Duration::from_secs(5),
        )
        .unwrap_or_else(|s| panic!("no report named in the footer:\n{s}"));
    let named = screen
        .lines()
        .find_map(|l| l.split("report written to ./").nth(1))
        .map(|rest| {
            rest.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .expect("the file's name");
    let written = std::fs::read_to_string(dir.join(&named))
        .unwrap_or_else(|e| panic!("{named} in {}: {e}", dir.display()));
    // The instant on screen, as the report's time row says it in story time (its title says
    // it in UTC); the demo's file name says it too.
    let time_row = written
        .lines()
        .find(|l| l.starts_with("| time |"))
        .unwrap_or_else(|| panic!("no time row in {written}"));
    let at = story_secs(time_row);
    // The demo's story starts at 2026-01-01 09:00:00 UTC.
    let clock = 9 * 3600 + at;
    assert_eq!(
        named,
        format!(
            "strata-report-demo-node-20260101-{:02}{:02}{:02}.md",
            clock / 3600,
            clock % 3600 / 60,
            clock % 60
        )
    );
    let expected = std::process::Command::new(strata())
        .args(["snapshot", "--report"])
        .args(OPTIONS.split(' ').map(|a| {
            if a == "905" {
                at.to_string()
            } else {
                a.to_string()
            }
        }))
        .output()
        .expect("snapshot runs");
    assert!(expected.status.success());
    // R also writes the chart beside the report and links it in a section of its own, which
    // a report on standard output cannot have; the rest is the same text.
    let svg = named.replace(".md", ".svg");
    let chart = written
        .find("## Chart\n")
        .unwrap_or_else(|| panic!("no chart section in {named}"));
    let section_end = written[chart + 1..]
        .find("\n## ")
        .map_or(written.len(), |i| chart + 2 + i);
    assert!(
        written[chart..section_end].contains(&format!("]({svg})")),
        "{}",
        &written[chart..section_end]
    );
    assert!(dir.join(&svg).is_file(), "{svg} beside the report");
    let without_chart = format!("{}{}", &written[..chart], &written[section_end..]);
    assert_eq!(
        without_chart.trim_end(),
        String::from_utf8_lossy(&expected.stdout).trim_end(),
        "R and snapshot --report differ for story {at} s"
    );
    pane.keys(&["q"]);
    let (exit, _) = pane
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("did not quit:\n{s}"));
    assert_eq!(exit, "EXIT=0");
}

#[test]
fn a_directory_that_cannot_be_written_is_one_line_in_the_footer() {
    let scratch = Scratch::new("report-unwritable");
    let dir = &scratch.dir;
    let pane = Pane::start(
        "report-unwritable",
        &format!("cd '{}' && {} {OPTIONS}", dir.display(), strata()),
        200,
        50,
    );
    pane.wait_for(&["story 15m05s", "3g.40gb"], START)
        .unwrap_or_else(|s| panic!("the monitor did not draw:\n{s}"));
    // Its directory goes away under it (root can write anywhere that exists).
    std::fs::remove_dir_all(dir).expect("remove the work dir");
    pane.keys(&["R"]);
    let screen = pane
        .wait_for(
            &["report not written to ./strata-report-"],
            Duration::from_secs(5),
        )
        .unwrap_or_else(|s| panic!("no error in the footer:\n{s}"));
    let lines: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains("report not written"))
        .collect();
    assert_eq!(lines.len(), 1, "one line:\n{screen}");
    assert!(
        lines[0].contains("No such file or directory"),
        "{}",
        lines[0]
    );
    let last = screen
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or_default();
    assert!(
        last.contains("report not written"),
        "in the footer:\n{screen}"
    );
    // Still up: the next key clears it, and q quits cleanly.
    pane.keys(&["q"]);
    let (exit, cooked) = pane
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("did not quit:\n{s}"));
    assert_eq!(exit, "EXIT=0");
    assert!(cooked);
}

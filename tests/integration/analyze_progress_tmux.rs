//! `strata analyze` of a slow read on a real terminal (a pane under tmux): after a second its
//! stderr says how far the read has come, on one line rewritten in place, and the line is
//! gone when the analysis is printed. Piped to a file, stderr gets no progress at all.

use crate::common;

use common::tmux::Pane;
use common::{strata, Scratch};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn a_slow_read_shows_its_progress_on_a_terminal_and_clears_it() {
    let scratch = Scratch::new("progress-tmux");
    let dir = &scratch.dir;
    let recording = dir.join("demo.jsonl");
    let out = std::process::Command::new(strata())
        .args([
            "snapshot",
            "--demo",
            "--json",
            "--count",
            "20",
            "--interval",
            "10",
        ])
        .output()
        .expect("snapshot");
    std::fs::write(&recording, &out.stdout).expect("write");
    // Ten samples, three seconds of nothing, then the rest: the read takes over a second.
    let feed = format!(
        "{{ head -10 '{r}'; sleep 3; tail -n +11 '{r}'; }}",
        r = recording.display()
    );
    let pane = Pane::start(
        "progress",
        &format!(
            "{feed} | {} analyze - 2>&1 >'{}/out'",
            strata(),
            dir.display()
        ),
        120,
        20,
    );
    let screen = pane
        .wait_for(&["strata: reading standard input: ", " KiB"], WAIT)
        .unwrap_or_else(|s| panic!("no progress line:\n{s}"));
    assert!(!screen.contains("EXIT="), "{screen}");
    let screen = pane
        .wait_for(&["EXIT=0"], WAIT)
        .unwrap_or_else(|s| panic!("analyze did not end:\n{s}"));
    assert!(
        !screen.contains("strata: reading"),
        "the line is cleared:\n{screen}"
    );
    let analysis = std::fs::read_to_string(dir.join("out")).expect("out");
    assert!(analysis.starts_with("20 samples from "), "{analysis}");

    // Not a terminal: no progress, whatever the time.
    let piped = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{feed} | {} analyze - 2>&1 >/dev/null", strata()))
        .output()
        .expect("sh");
    assert!(
        piped.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&piped.stdout)
    );
}

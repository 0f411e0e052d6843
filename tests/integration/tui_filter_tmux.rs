//! The process table's filter in a real terminal, on the demo: `/` and a filter typed show
//! only the processes it matches, with the count in the title; Esc shows every one again.
//! `--user`, `--pid` and `--gpu` start the monitor filtered; a bad value is refused before
//! the terminal is taken. Needs tmux.

use crate::common;

use common::tmux::Pane;
use common::{strata, strata_output};

const DEMO: &str = "--demo --demo-at 600";
/// Every process of the demo, by pid, with its user.
const PROCESSES: [(&str, &str); 9] = [
    ("41230", "mlteam"),
    ("41231", "mlteam"),
    ("38811", "svc-embed"),
    ("52010", "bob"),
    ("52077", "svc-infer"),
    ("31337", "n/a"),
    ("60500", "svc-jax"),
    ("61002", "triton"),
    ("60112", "carol"),
];

/// The pids of the table's rows on `screen`.
fn rows(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|first| PROCESSES.iter().any(|(pid, _)| pid == first))
        .map(str::to_string)
        .collect()
}

/// Waits until the table shows exactly the processes of `users` (and the screen `needles`).
fn must_list(pane: &Pane, users: &[&str], needles: &[&str], what: &str) -> String {
    let mut want: Vec<String> = PROCESSES
        .iter()
        .filter(|(_, user)| users.contains(user))
        .map(|(pid, _)| pid.to_string())
        .collect();
    want.sort();
    let start = std::time::Instant::now();
    loop {
        let screen = pane.capture();
        let mut shown = rows(&screen);
        shown.sort();
        if shown == want && needles.iter().all(|n| screen.contains(n)) {
            return screen;
        }
        assert!(
            start.elapsed() < common::tmux::PATIENCE,
            "{what}: want {want:?}, shown {shown:?}:\n{screen}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn slash_filters_the_table_and_esc_shows_every_process_again() {
    let pane = Pane::start("filter", &format!("{} {DEMO}", strata()), 200, 50);
    let all: Vec<&str> = PROCESSES.iter().map(|(_, u)| *u).collect();
    must_list(&pane, &all, &["Processes (9)"], "the whole table");
    pane.keys(&["/"]);
    pane.keys(&["-l", "user:mlteam"]);
    let screen = must_list(
        &pane,
        &["mlteam"],
        &["Processes · filter user:mlteam▏ · 2 of 9"],
        "typing filters",
    );
    // The GPU panels stay whole: GPU 2's and GPU 3's, which hold none of mlteam's.
    assert!(
        screen.contains("GPU 2 ·") && screen.contains("GPU 3 ·"),
        "{screen}"
    );
    pane.keys(&["Enter"]);
    must_list(
        &pane,
        &["mlteam"],
        &["Processes · filter user:mlteam · 2 of 9"],
        "Enter keeps the filter",
    );
    // Keys are keys again: `s` sorts the filtered table.
    pane.keys(&["s"]);
    must_list(&pane, &["mlteam"], &["sorted by live"], "s in the table");
    pane.keys(&["Escape"]);
    must_list(&pane, &all, &["Processes (9)"], "Esc clears the filter");
    // Plain words, ANDed; a filter that matches nothing says so.
    pane.keys(&["/"]);
    pane.keys(&["-l", "python gpu:2"]);
    pane.keys(&["Enter"]);
    must_list(
        &pane,
        &["bob", "svc-infer"],
        &["filter python gpu:2 · 2 of 9"],
        "two terms",
    );
    pane.keys(&["/"]);
    pane.keys(&["-l", " user:zed"]);
    must_list(
        &pane,
        &[],
        &["0 of 9", "no process matches `python gpu:2 user:zed`"],
        "nothing matches",
    );
    pane.keys(&["Escape"]);
    must_list(
        &pane,
        &all,
        &["Processes (9)"],
        "Esc in the prompt clears it",
    );
    pane.quit();
}

#[test]
fn the_command_line_starts_the_monitor_filtered() {
    let pane = Pane::start(
        "filter-cli",
        &format!("{} {DEMO} --user svc-jax --gpu 3", strata()),
        200,
        50,
    );
    must_list(
        &pane,
        &["svc-jax"],
        &["Processes · filter user:svc-jax gpu:3 · 1 of 9"],
        "--user and --gpu",
    );
    pane.keys(&["Escape"]);
    let all: Vec<&str> = PROCESSES.iter().map(|(_, u)| *u).collect();
    must_list(&pane, &all, &["Processes (9)"], "Esc clears a saved filter");
    pane.quit();
}

#[test]
fn a_bad_filter_on_the_command_line_is_one_line_with_a_hint() {
    for (args, says) in [
        (vec!["--demo", "--pid", "12x"], "`12x` is not a PID"),
        (vec!["--demo", "--user", "a b"], "`a b` is not a user name"),
        (
            vec!["--demo", "--user", "ana", "snapshot"],
            "strata snapshot does not take --user",
        ),
    ] {
        let out = strata_output(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first = stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(says),
            "{args:?}: {stderr}"
        );
    }
}

/// The config file: a key it does not know is one line naming the file, line and key, with
/// the hint; `strata config --default` prints a file that is taken back as it is.
#[test]
fn the_config_file_is_read_and_a_bad_key_is_one_line() {
    let scratch = common::Scratch::new("config");
    let bad = scratch.dir.join("bad.toml");
    std::fs::write(&bad, "interval = 2.0\nthem = \"light\"\n").expect("writes");
    let out = strata_output(&["--demo", "--config", bad.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("line 2") && stderr.contains("`them`") && stderr.contains("hint:"),
        "{stderr}"
    );
    let default = strata_output(&["config", "--default"]);
    assert_eq!(default.status.code(), Some(0));
    let good = scratch.dir.join("good.toml");
    std::fs::write(&good, &default.stdout).expect("writes");
    // The default file is taken: the monitor gets as far as asking for a terminal.
    let out = strata_output(&["--demo", "--config", good.to_str().expect("utf-8")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("config file"), "{stderr}");
}

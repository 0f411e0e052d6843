//! The process table's sort in a real terminal, on the demo: `S` reverses it, and rows whose
//! values saw-tooth nearly in step hold still rather than swapping at every sample.

use crate::common;

use common::strata;
use common::tmux::Pane;
use std::time::{Duration, Instant};

/// The pid column's values of the table's rows, top to bottom, among `pids`.
fn row_order(screen: &str, pids: &[&str]) -> Vec<String> {
    screen
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|first| pids.contains(first))
        .map(str::to_string)
        .collect()
}

/// The rows' order among `pids` once every one is on screen and `good` holds, read for up
/// to 5 s; the screen read last if it never does.
fn settled_order(pane: &Pane, pids: &[&str], good: impl Fn(&[String]) -> bool) -> Vec<String> {
    let start = Instant::now();
    loop {
        let screen = pane.capture();
        let order = row_order(&screen, pids);
        if (order.len() == pids.len() && good(&order)) || start.elapsed() > Duration::from_secs(5) {
            assert!(good(&order), "{screen}");
            return order;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `S` reverses the order (▲ in the title); sorted by live tensors, the two training ranks,
/// whose activations saw-tooth nearly in step and cross twice a step, keep their rows.
#[test]
fn s_reverses_and_saw_toothing_rows_hold_still() {
    let pane = Pane::start(
        "sort",
        &format!("{} --demo --demo-at 600 --demo-speed 10", strata()),
        200,
        50,
    );
    let pids = [
        "41230", "41231", "60112", "52077", "52010", "60500", "38811", "61002", "31337",
    ];
    // A capture can catch a frame half written: the order is read until it settles.
    pane.must_show(&["sorted by used ▼"], "no table");
    let down = settled_order(&pane, &pids, |o| {
        o.last().map(String::as_str) == Some("31337")
    });
    assert_eq!(down.len(), pids.len(), "{down:?}");
    pane.keys(&["S"]);
    pane.must_show(&["sorted by used ▲"], "S did not reverse");
    let up = settled_order(&pane, &pids, |o| {
        o.first().map(String::as_str) == Some("31337")
    });
    assert_eq!(up.len(), pids.len(), "{up:?}");
    pane.keys(&["S", "s"]);
    pane.must_show(&["sorted by live ▼"], "s did not move to live");
    // Two steps of the ranks (60 story seconds each, 6 s here): their rows never swap.
    let ranks = ["41230", "41231"];
    let mut seen = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(12) {
        let order = row_order(&pane.capture(), &ranks);
        if order.len() == 2 {
            seen.push(order);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(seen.len() > 20);
    assert!(seen.iter().all(|o| *o == seen[0]), "rows swapped: {seen:?}");
    pane.quit();
}

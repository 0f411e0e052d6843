//! The state without a terminal: pausing, selections, the findings panel, the views' keys.

use super::*;
use crate::detect::{FindingKind, Severity};
use crate::history::SeriesKey;
use crate::source::demo::node_at;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn state() -> State {
    State::new(Pipeline::new(None), "demo".into(), 1.0)
}

#[test]
fn pausing_freezes_the_screen_and_loses_no_sample() {
    let mut s = state();
    s.on_sample(node_at(0, 100.0, 10.0));
    s.apply_action(Action::TogglePause);
    for t in [110.0, 120.0, 130.0] {
        s.on_sample(node_at(0, t, 10.0));
    }
    let shown = s.current.as_ref().map(|o| o.sample.time);
    assert_eq!(
        shown,
        Some(crate::source::demo::DEMO_EPOCH + 100.0),
        "frozen while paused"
    );
    assert_eq!(s.pause.queue.len(), 3);
    s.apply_action(Action::TogglePause);
    while s.catch_up(std::time::Duration::ZERO) > 0 {}
    assert!(s.pause.queue.is_empty());
    let uuid = s
        .current
        .as_ref()
        .map(|o| o.sample.gpus[0].uuid.clone())
        .unwrap_or_default();
    let series = s
        .pipeline
        .history
        .get(&SeriesKey::device(&uuid, crate::history::Metric::Used))
        .expect("series");
    assert_eq!(
        series.raw().filter(|(_, v)| v.is_some()).count(),
        4,
        "every queued sample went into history"
    );
}

#[test]
fn selection_follows_its_process_once_the_user_moved() {
    let mut s = state();
    s.on_sample(node_at(0, 600.0, 10.0));
    let first = s.process_table.selected.clone();
    s.apply_action(Action::Down);
    let chosen = s.process_table.selected.clone();
    assert_ne!(first, chosen);
    s.apply_action(Action::CycleSort);
    s.on_sample(node_at(0, 610.0, 10.0));
    assert_eq!(
        s.process_table.selected, chosen,
        "stays on the same process when rows move"
    );
    s.apply_action(Action::Open);
    let (pid, uuid) = chosen.expect("a selection");
    assert_eq!(
        s.view,
        View::Detail {
            pid,
            device_uuid: uuid
        }
    );
    s.apply_action(Action::Back);
    assert_eq!(s.view, View::Main);
    s.apply_action(Action::Back);
    assert!(!s.quit, "Esc on the main screen does nothing: q quits");
    assert_eq!(s.view, View::Main);
}

#[test]
fn keys_map_to_actions() {
    let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
    assert_eq!(key_action(key(KeyCode::Char('q'))), Some(Action::Quit));
    assert_eq!(
        key_action(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        Some(Action::Quit)
    );
    assert_eq!(key_action(key(KeyCode::Char('j'))), Some(Action::Down));
    assert_eq!(key_action(key(KeyCode::Up)), Some(Action::Up));
    assert_eq!(key_action(key(KeyCode::Enter)), Some(Action::Open));
    assert_eq!(key_action(key(KeyCode::Tab)), Some(Action::FocusNext));
    assert_eq!(key_action(key(KeyCode::Char('s'))), Some(Action::CycleSort));
    assert_eq!(
        key_action(key(KeyCode::Char('p'))),
        Some(Action::TogglePause)
    );
    assert_eq!(
        key_action(key(KeyCode::Char('?'))),
        Some(Action::ToggleHelp)
    );
    assert_eq!(
        key_action(key(KeyCode::Char('v'))),
        Some(Action::ToggleStrata)
    );
    assert_eq!(key_action(key(KeyCode::Char('z'))), Some(Action::ZoomCycle));
    assert_eq!(key_action(key(KeyCode::Char('+'))), Some(Action::ZoomIn));
    assert_eq!(key_action(key(KeyCode::Char('='))), Some(Action::ZoomIn));
    assert_eq!(key_action(key(KeyCode::Char('-'))), Some(Action::ZoomOut));
    assert_eq!(key_action(key(KeyCode::Char('x'))), None);
    assert_eq!(
        key_action(key(KeyCode::Char('S'))),
        Some(Action::ReverseSort)
    );
    assert_eq!(key_action(key(KeyCode::Char('K'))), Some(Action::Signal));
    assert_eq!(key_action(key(KeyCode::Char('k'))), Some(Action::Up));
    assert_eq!(key_action(key(KeyCode::Char('j'))), Some(Action::Down));
    assert_eq!(key_action(key(KeyCode::F(9))), Some(Action::Signal));
    assert_eq!(key_action(key(KeyCode::Char('y'))), Some(Action::Yes));
    assert_eq!(key_action(key(KeyCode::Char('n'))), Some(Action::No));
}

/// The demo's story up to `at` seconds, a sample every 10 s: its history and findings.
fn demo(at: f64) -> State {
    let mut s = state();
    let mut t = 0.0;
    while t <= at {
        s.on_sample(node_at(0, t, 10.0));
        t += 10.0;
    }
    s
}

fn finding(kind: FindingKind, pid: Option<u32>, severity: Severity, since: f64) -> Finding {
    Finding {
        kind,
        severity,
        device_uuid: Some("GPU-a".into()),
        pid,
        since,
        message: format!("{kind:?} {pid:?}"),
        evidence: crate::detect::Evidence::Untyped(serde_json::json!({})),
    }
}

/// The demo at 905 s, with its findings replaced by `findings` as if a sample brought them.
fn with_findings(s: &mut State, findings: Vec<Finding>) {
    if let Some(o) = s.current_mut() {
        o.findings = findings;
    }
    s.follow_findings();
}

#[test]
fn tab_arrows_and_enter_open_the_selected_findings_evidence() {
    let mut s = demo(905.0);
    let count = s.findings().len();
    assert!(count >= 5, "the demo at 905 s has findings");
    assert_eq!(s.selected_finding_index(), Some(0), "the most severe first");
    s.apply_action(Action::FocusNext);
    assert_eq!(s.focus, Focus::Findings);
    s.apply_action(Action::Down);
    s.apply_action(Action::Down);
    assert_eq!(s.selected_finding_index(), Some(2));
    s.apply_action(Action::Bottom);
    assert_eq!(s.selected_finding_index(), Some(count - 1));
    s.apply_action(Action::Top);
    s.apply_action(Action::Down);
    let chosen = s.findings()[1].clone();
    s.apply_action(Action::Open);
    assert_eq!(s.view, View::Evidence(FindingId::of(&chosen)));
    assert_eq!(s.views.evidence_last.as_ref(), Some(&chosen));
    s.apply_action(Action::Down);
    assert_eq!(s.views.evidence_scroll, 1, "arrows scroll the evidence");
    s.apply_action(Action::FocusNext);
    assert_eq!(s.focus, Focus::Findings, "Tab does nothing unseen");
    s.apply_action(Action::Back);
    assert_eq!(s.view, View::Main);
    assert_eq!(s.focus, Focus::Findings, "back where it was");
    assert_eq!(s.selected_finding_index(), Some(1));
    assert!(!s.quit);
}

/// The selection follows its finding by kind, device and process as others come, go and
/// reorder; when it clears, its neighbour takes its place; the open evidence stays.
#[test]
fn the_finding_selection_stays_on_its_finding_as_findings_come_and_go() {
    let mut s = state();
    s.on_sample(node_at(0, 905.0, 10.0));
    let a = finding(FindingKind::Climb, Some(1), Severity::Warning, 10.0);
    let b = finding(FindingKind::Fragmentation, Some(2), Severity::Warning, 20.0);
    let c = finding(FindingKind::AllocRetries, Some(2), Severity::Warning, 30.0);
    with_findings(&mut s, vec![a.clone(), b.clone(), c.clone()]);
    assert_eq!(
        s.finding_list.selected,
        Some(FindingId::of(&a)),
        "top until moved"
    );
    s.apply_action(Action::FocusNext);
    s.apply_action(Action::Down);
    assert_eq!(s.finding_list.selected, Some(FindingId::of(&b)));
    // A critical one comes on top: the selection stays on b, now third.
    let oom = finding(FindingKind::Oom, Some(2), Severity::Critical, 40.0);
    with_findings(&mut s, vec![oom.clone(), a.clone(), b.clone(), c.clone()]);
    assert_eq!(s.finding_list.selected, Some(FindingId::of(&b)));
    assert_eq!(s.selected_finding_index(), Some(2));
    // Its message and figures change: still the same finding.
    let mut b2 = b.clone();
    b2.message = "grown".into();
    with_findings(&mut s, vec![oom.clone(), a.clone(), b2.clone(), c.clone()]);
    assert_eq!(s.selected_finding_index(), Some(2));
    // The same kind on another process is another finding.
    let mut other = b.clone();
    other.pid = Some(3);
    assert!(!FindingId::of(&b).matches(&other));
    s.apply_action(Action::Open);
    assert_eq!(s.view, View::Evidence(FindingId::of(&b)));
    // b clears: the selection moves to what took its row; the view keeps b as last seen.
    with_findings(&mut s, vec![oom.clone(), a.clone(), c.clone()]);
    assert_eq!(s.finding_list.selected, Some(FindingId::of(&c)));
    let id = FindingId::of(&b);
    let (shown, raised) = s.evidence_finding(&id).expect("kept");
    assert_eq!((shown.message.as_str(), raised), ("grown", false));
    // Everything clears, then findings return: nothing selected, then the neighbour row.
    with_findings(&mut s, Vec::new());
    assert_eq!(s.finding_list.selected, None);
    with_findings(&mut s, vec![a.clone()]);
    assert_eq!(s.finding_list.selected, Some(FindingId::of(&a)));
}

#[test]
fn the_strata_view_opens_zooms_and_scrolls_its_devices() {
    let mut s = state();
    s.on_sample(node_at(0, 905.0, 10.0));
    s.apply_action(Action::ZoomCycle);
    assert_eq!(
        s.strata.zoom,
        Zoom::Minutes15,
        "no zoom where it does not show"
    );
    s.apply_action(Action::ToggleStrata);
    assert_eq!(s.view, View::Strata);
    s.apply_action(Action::ZoomCycle);
    assert_eq!(s.strata.zoom, Zoom::Hours2);
    s.apply_action(Action::ZoomOut);
    assert_eq!(s.strata.zoom, Zoom::Hours24);
    s.apply_action(Action::ZoomOut);
    assert_eq!(s.strata.zoom, Zoom::Hours24, "24 h is the longest");
    s.apply_action(Action::ZoomIn);
    s.apply_action(Action::ZoomIn);
    s.apply_action(Action::ZoomIn);
    assert_eq!(s.strata.zoom, Zoom::Minutes15);
    // Seven devices: 4 GPUs and GPU 3's three MIG instances.
    s.apply_action(Action::Down);
    assert_eq!(s.strata.device, 1);
    s.apply_action(Action::PageDown);
    assert_eq!(s.strata.device, 6, "clamped to the last device");
    s.apply_action(Action::Up);
    assert_eq!(s.strata.device, 5);
    let rows_selected = s.process_table.selected.clone();
    assert_eq!(
        s.process_table.selected, rows_selected,
        "the process table did not move"
    );
    // Help from the strata view goes back to it.
    s.apply_action(Action::ToggleHelp);
    assert_eq!(s.view, View::Help);
    s.apply_action(Action::Back);
    assert_eq!(s.view, View::Strata);
    s.apply_action(Action::ToggleStrata);
    assert_eq!(s.view, View::Main);
    s.apply_action(Action::ToggleStrata);
    s.apply_action(Action::Back);
    assert_eq!(s.view, View::Main);
    assert!(!s.quit);
    s.apply_action(Action::Quit);
    assert!(s.quit, "q quits from anywhere");
}

#[test]
fn a_climb_flagged_for_a_process_is_on_its_row() {
    let s = demo(905.0);
    let rows = s.rows();
    let leak = rows
        .iter()
        .find(|r| r.process.pid == 52010)
        .and_then(|r| r.climb.clone())
        .expect("the eval loop's leak is on its row");
    assert_eq!(leak.cause, "live");
    assert!(leak.rate_mib_per_min > 300.0, "{leak:?}");
    assert!(leak.window_secs > 0.0);
    assert!(rows
        .iter()
        .filter(|r| [41230, 41231, 52077, 60500].contains(&r.process.pid))
        .all(|r| r.climb.is_none()));
}

/// Two processes whose memory saw-tooths out of phase, crossing each other every few samples
/// (20 to 24 GiB); a third far below.
fn saw_tooths(i: usize) -> NodeSample {
    use crate::fixtures::{gpu, memory, node, process, GIB};
    let tooth = |phase: usize| 20 * GIB + (4 * GIB) * ((i + phase) % 6) as u64 / 5;
    let mut s = node();
    s.time += i as f64;
    let (a, b) = (tooth(0), tooth(3));
    s.gpus.push(gpu(0, memory(80 * GIB, a + b + GIB)));
    s.processes = vec![
        process(300, "GPU-test-0", Some(a)),
        process(200, "GPU-test-0", Some(b)),
        process(100, "GPU-test-0", Some(GIB)),
    ];
    s
}

fn order(s: &State) -> Vec<u32> {
    s.rows().iter().map(|r| r.process.pid).collect()
}

/// Sorted by used memory, two saw-tooths that cross every few samples keep their rows: the
/// instant's values swap places 10 times over these 30 samples, the table never does.
#[test]
fn rows_do_not_swap_when_two_values_saw_tooth_past_each_other() {
    let mut s = state();
    let mut swaps_in_the_data = 0;
    let mut orders = Vec::new();
    for i in 0..30 {
        let sample = saw_tooths(i);
        let used = |pid| {
            sample
                .processes
                .iter()
                .find(|p| p.pid == pid)
                .and_then(|p| p.used)
        };
        let first = if used(300) >= used(200) { 300 } else { 200 };
        if i > 0 && orders.last().map(|o: &(u32, Vec<u32>)| o.0) != Some(first) {
            swaps_in_the_data += 1;
        }
        s.on_sample(sample);
        orders.push((first, order(&s)));
    }
    assert!(
        swaps_in_the_data >= 8,
        "the data does cross: {swaps_in_the_data}"
    );
    let settled: Vec<&Vec<u32>> = orders[6..].iter().map(|(_, o)| o).collect();
    assert!(
        settled.iter().all(|o| *o == settled[0]),
        "the table held still: {settled:?}"
    );
    assert_eq!(settled[0][2], 100, "the small one last");
    // S: the other way round, at once, still by the same settled values.
    s.apply_action(Action::ReverseSort);
    let reversed = order(&s);
    let mut expected = settled[0].clone();
    expected.reverse();
    assert_eq!(reversed, expected);
    assert_eq!(
        super::sort_arrow(s.process_table.sort, s.process_table.sort_reversed),
        "▲"
    );
    s.apply_action(Action::ReverseSort);
    assert_eq!(
        super::sort_arrow(s.process_table.sort, s.process_table.sort_reversed),
        "▼"
    );
    // A clear change moves a row at once: the small one jumps to 40 GiB.
    let mut jump = saw_tooths(30);
    jump.processes[2].used = Some(40 * crate::fixtures::GIB);
    s.on_sample(jump);
    assert_eq!(order(&s)[0], 100);
}

#[test]
fn equal_values_are_ordered_by_pid_and_unknown_comes_last_both_ways() {
    use crate::fixtures::{gpu, memory, node, process, GIB};
    let mut sample = node();
    sample.gpus.push(gpu(0, memory(80 * GIB, 3 * GIB)));
    sample.processes = vec![
        process(30, "GPU-test-0", Some(GIB)),
        process(10, "GPU-test-0", None),
        process(20, "GPU-test-0", Some(GIB)),
    ];
    let mut s = state();
    s.on_sample(sample);
    assert_eq!(order(&s), [20, 30, 10]);
    s.apply_action(Action::ReverseSort);
    assert_eq!(
        order(&s),
        [20, 30, 10],
        "ties by pid, unknown last, either way"
    );
    // Pid: up, then down.
    while s.process_table.sort != SortKey::Pid {
        s.apply_action(Action::CycleSort);
    }
    assert!(
        !s.process_table.sort_reversed,
        "a new key starts its own way round"
    );
    assert_eq!(order(&s), [10, 20, 30]);
    s.apply_action(Action::ReverseSort);
    assert_eq!(order(&s), [30, 20, 10]);
}

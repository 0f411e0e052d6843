//! The rows kept between frames are never those of another sample, order or filter.

use super::*;
use crate::app::{Action, ClimbNote, State};
use crate::pipeline::Pipeline;
use crate::source::demo::node_at;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a row shows, as text: pid, device, the GPU column and the climb on it.
fn seen(rows: &[ProcessRow<'_>]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            format!(
                "{} {} {} {:?}",
                r.process.pid, r.process.device_uuid, r.place, r.climb
            )
        })
        .collect()
}

/// The rows the state lends equal the rows worked out afresh from what it holds now.
#[track_caller]
fn same_as_afresh(s: &State, step: &str) {
    let Some(observed) = &s.current else {
        panic!("{step}: no sample shown")
    };
    let table = &s.process_table;
    let afresh = process_rows(
        observed,
        (table.sort, table.sort_reversed),
        &table.sort_memory,
        &table.filter.terms,
    );
    assert_eq!(seen(&s.rows()), seen(&afresh), "{step}");
    assert_eq!(s.table_len(), afresh.len(), "{step}");
}

fn typed(s: &mut State, text: &str) {
    for c in text.chars() {
        s.filter_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
    }
}

#[test]
fn the_rows_kept_follow_every_sample_order_filter_and_finding() {
    let mut s = State::new(Pipeline::new(None), "demo".into(), 1.0);
    let mut t = 0.0;
    while t <= 905.0 {
        s.on_sample(node_at(0, t, 10.0));
        t += 10.0;
        // Asked between samples, as a frame would, so that a stale copy would be there.
        same_as_afresh(&s, &format!("sample at {t}"));
    }
    let by_used: Vec<u32> = s.rows().iter().map(|r| r.process.pid).collect();
    assert!(
        s.rows().iter().any(|r| r.climb.is_some()),
        "the demo at 905 s flags a climb on a row"
    );
    for key in crate::present::sort::SortKey::CYCLE {
        s.apply_action(Action::CycleSort);
        same_as_afresh(&s, &format!("sorted by {key:?}'s next"));
        s.apply_action(Action::ReverseSort);
        same_as_afresh(&s, &format!("{key:?}'s next reversed"));
        s.apply_action(Action::ReverseSort);
    }
    assert_eq!(s.process_table.sort, crate::present::sort::SortKey::Used);
    let by_pid = {
        s.process_table.sort = crate::present::sort::SortKey::Pid;
        s.rows().iter().map(|r| r.process.pid).collect::<Vec<_>>()
    };
    assert_ne!(
        by_pid, by_used,
        "the demo's order differs by pid and by used"
    );
    same_as_afresh(&s, "sort set in place");
    s.process_table.sort = crate::present::sort::SortKey::Used;
    // The filter, typed key by key, then cleared.
    s.apply_action(Action::Filter);
    typed(&mut s, "gpu:3");
    same_as_afresh(&s, "filtered to GPU 3");
    assert!(s.rows().len() < by_used.len(), "the filter hides rows");
    s.filter_key(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE));
    typed(&mut s, "1");
    same_as_afresh(&s, "filtered to GPU 1");
    s.filter_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    same_as_afresh(&s, "filter cleared");
    assert_eq!(s.rows().len(), by_used.len());
    // The selection moves, the rows stay what they are.
    s.apply_action(Action::Down);
    s.apply_action(Action::Down);
    same_as_afresh(&s, "selection moved");
    // A sample listing the same processes in another order, and one without the first.
    let mut sample = node_at(0, 915.0, 10.0);
    sample.processes.reverse();
    s.on_sample(sample);
    same_as_afresh(&s, "processes listed the other way");
    let mut sample = node_at(0, 925.0, 10.0);
    let gone = sample.processes.remove(0).pid;
    s.on_sample(sample);
    same_as_afresh(&s, "a process gone");
    assert!(s.rows().iter().all(|r| r.process.pid != gone));
    // The findings changed where the sample shown is: the climbs on the rows follow, to
    // another process, then away.
    let (pid, device) = s
        .rows()
        .iter()
        .find(|r| r.climb.is_none())
        .map(|r| (r.process.pid, r.process.device_uuid.to_string()))
        .expect("a row without a climb");
    if let Some(o) = s.current_mut() {
        let climb = o
            .findings
            .iter_mut()
            .find(|f| ClimbNote::of(f).is_some())
            .expect("a climb at 925 s");
        climb.pid = Some(pid);
        climb.device_uuid = Some(device);
    }
    same_as_afresh(&s, "a climb moved to another process");
    assert!(s
        .rows()
        .iter()
        .any(|r| r.process.pid == pid && r.climb.is_some()));
    if let Some(o) = s.current_mut() {
        o.findings.retain(|f| ClimbNote::of(f).is_none());
    }
    same_as_afresh(&s, "climbs cleared");
    assert!(s.rows().iter().all(|r| r.climb.is_none()));
}

/// The table's lines as text: a group by its key, device and sums, a process by its row.
fn lines(s: &State) -> Vec<String> {
    s.table()
        .iter()
        .map(|e| match e {
            crate::app::TableEntry::Group(g) => format!("G {g:?}"),
            crate::app::TableEntry::Process { row, member } => {
                format!("{member} {}", seen(std::slice::from_ref(row)).join(""))
            }
        })
        .collect()
}

/// The grouped table's lines equal those worked out with nothing kept.
#[track_caller]
fn same_groups_as_afresh(s: &State, step: &str) {
    let kept = lines(s);
    *s.process_table.groups.borrow_mut() = None;
    assert_eq!(kept, lines(s), "{step}");
}

#[test]
fn the_groups_kept_follow_every_sample_and_grouping() {
    let mut s = State::new(Pipeline::new(None), "demo".into(), 1.0);
    let mut t = 0.0;
    while t <= 905.0 {
        s.on_sample(node_at(0, t, 10.0));
        t += 10.0;
    }
    for _ in 0..5 {
        s.apply_action(Action::CycleGroup);
        same_groups_as_afresh(&s, &format!("grouped by {:?}", s.process_table.group_by));
    }
    // By user, then samples whose groups change: a member gone, the sums moving.
    for _ in 0..4 {
        s.apply_action(Action::CycleGroup);
    }
    let before = lines(&s);
    let mut sample = node_at(0, 915.0, 10.0);
    sample.processes.remove(0);
    s.on_sample(sample);
    same_groups_as_afresh(&s, "a member gone");
    assert_ne!(lines(&s), before, "the groups changed with the sample");
    s.on_sample(node_at(0, 925.0, 10.0));
    same_groups_as_afresh(&s, "the next sample");
}

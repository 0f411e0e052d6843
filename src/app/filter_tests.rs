//! The filter (`/`): its parsing, what each term matches on the demo node, and the prompt.

use super::*;
use crate::app::{Action, View};
use crate::pipeline::Pipeline;
use crate::source::demo::{DemoSource, SNAPSHOT_AT};
use crate::source::Source;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// The monitor on the demo at its snapshot instant: nine processes on four GPUs, three on
/// GPU 3's MIG instances.
pub(crate) fn demo_state() -> State {
    let mut source = DemoSource::new(0, 1.0, 10.0, SNAPSHOT_AT);
    let mut state = State::new(Pipeline::new(None), "demo".into(), 1.0);
    for earlier in source.backlog() {
        state.on_sample(earlier);
    }
    state.on_sample(source.sample().expect("demo sample"));
    state
}

/// The screen as text, a line a row.
pub(crate) fn screen(state: &State, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    terminal.draw(|f| crate::ui::draw(f, state)).expect("draws");
    let buffer = terminal.backend().buffer();
    (0..height)
        .map(|y| {
            let line: String = (0..width).map(|x| buffer[(x, y)].symbol()).collect();
            line.trim_end().to_string() + "\n"
        })
        .collect()
}

/// The pids the table shows, sorted.
fn shown(state: &State) -> Vec<u32> {
    let mut pids: Vec<u32> = state.rows().iter().map(|r| r.process.pid).collect();
    pids.sort_unstable();
    pids
}

/// The pids `text` keeps on the demo, sorted.
fn kept(text: &str) -> Vec<u32> {
    let mut state = demo_state();
    state.start_filtered(text).expect("parses");
    shown(&state)
}

fn typed(state: &mut State, text: &str) {
    for c in text.chars() {
        state.filter_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
    }
}

fn key(state: &mut State, code: KeyCode) {
    state.filter_key(KeyEvent::new(code, KeyModifiers::NONE));
}

#[test]
fn terms_parse_by_field_and_plain_words_match_any_field() {
    assert_eq!(parse(""), Ok(vec![]));
    assert_eq!(parse("   "), Ok(vec![]));
    assert_eq!(
        parse("Train  user:Alice pid:1234 gpu:0 cmd:LR=3 owner:slurm"),
        Ok(vec![
            Term::Any("train".into()),
            Term::User("alice".into()),
            Term::Pid(1234),
            Term::Gpu(GpuTerm::Index(0)),
            Term::Command("lr=3".into()),
            Term::Owner("slurm".into()),
        ])
    );
    assert_eq!(
        parse("gpu:GPU-5F2A command:x"),
        Ok(vec![
            Term::Gpu(GpuTerm::Named("gpu-5f2a".into())),
            Term::Command("x".into()),
        ])
    );
    // Quotes keep a space in one term; a colon after the field stays in the value.
    assert_eq!(
        parse(r#"owner:"slurm 81234" cmd:host:29500 "two words""#),
        Ok(vec![
            Term::Owner("slurm 81234".into()),
            Term::Command("host:29500".into()),
            Term::Any("two words".into()),
        ])
    );
}

#[test]
fn a_term_that_cannot_match_says_why() {
    let err = |text: &str| parse(text).expect_err(text);
    assert!(err("pid:abc").contains("not a PID"), "{}", err("pid:abc"));
    assert!(err("pid:0").contains("not a PID"));
    assert!(err("pid:99999999999").contains("not a PID"));
    assert!(err("user:").contains("needs a value"));
    assert!(err("gpu:").contains("needs a value"));
    assert!(err("gpu:-1").contains("not a GPU"));
    let unknown = err("usr:alice");
    assert!(
        unknown.contains("`usr:` is not a field") && unknown.contains("pid, user, cmd"),
        "{unknown}"
    );
}

#[test]
fn each_field_matches_what_the_table_shows_of_the_process() {
    // Every process when off.
    assert_eq!(kept("").len(), 9);
    assert_eq!(kept("user:mlteam"), [41230, 41231]);
    assert_eq!(kept("USER:MLTEAM"), [41230, 41231], "case-insensitive");
    assert_eq!(kept("user:svc"), [38811, 52077, 60500], "a substring");
    assert_eq!(kept("pid:52010"), [52010]);
    assert_eq!(kept("pid:5201"), Vec::<u32>::new(), "a PID is exact");
    assert_eq!(kept("cmd:train.py"), [41230, 41231]);
    // GPU 3's processes run on its MIG instances.
    assert_eq!(kept("gpu:3"), [60112, 60500, 61002]);
    assert_eq!(kept("gpu:2"), [31337, 52010, 52077]);
    assert_eq!(kept("gpu:GPU-c4d8"), [31337, 52010, 52077], "a UUID prefix");
    assert_eq!(kept("gpu:c4d8"), [31337, 52010, 52077], "without GPU-");
    assert_eq!(kept("gpu:gpu-e86b"), [60112, 60500, 61002], "the MIG's GPU");
    assert_eq!(kept("gpu:MIG-9b2d7e41-0c5a-5f83-a6e1-0001"), [60500]);
    assert_eq!(
        kept("gpu:3:2g.20gb"),
        [60500],
        "a MIG place as the table writes it"
    );
    assert_eq!(kept("gpu:7"), Vec::<u32>::new());
    // The owner: Slurm job, launcher, pod, container, unit.
    assert_eq!(kept("owner:81234"), [41230, 41231]);
    assert_eq!(kept("owner:torchrun"), [41230, 41231]);
    assert_eq!(kept("owner:serving/"), [60500, 61002]);
    assert_eq!(kept("owner:carol-finetune"), [60112]);
    assert_eq!(kept("owner:embeddings.service"), [38811]);
    // Plain words: any field.
    assert_eq!(kept("t5"), [60500], "command and pod");
    assert_eq!(kept("carol"), [60112], "user and container");
    assert_eq!(kept("41231"), [41231]);
    assert_eq!(kept("3f9c"), [41230], "a UUID prefix");
    // Terms are ANDed.
    assert_eq!(kept("python mlteam"), [41230, 41231]);
    assert_eq!(kept("cmd:train pid:41231"), [41231]);
    assert_eq!(kept("user:mlteam gpu:2"), Vec::<u32>::new());
}

#[test]
fn typing_filters_at_each_key_enter_keeps_it_and_esc_clears_it() {
    let mut s = demo_state();
    s.apply_action(Action::Filter);
    assert!(s.process_table.filter.editing);
    typed(&mut s, "user:bob");
    assert_eq!(shown(&s), [52010]);
    // `q` and `k` are letters while the prompt is open.
    key(&mut s, KeyCode::Backspace);
    key(&mut s, KeyCode::Backspace);
    key(&mut s, KeyCode::Backspace);
    typed(&mut s, "svc-jax q k");
    assert!(!s.quit && s.kill.dialog.is_none());
    assert_eq!(s.process_table.filter.text, "user:svc-jax q k");
    s.filter_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    typed(&mut s, "user:svc-jax");
    assert_eq!(shown(&s), [60500]);
    key(&mut s, KeyCode::Enter);
    assert!(!s.process_table.filter.editing);
    assert_eq!(shown(&s), [60500], "Enter keeps the filter");
    // Back at the table: `/` edits the same text; Esc there clears it.
    s.apply_action(Action::Filter);
    assert_eq!(s.process_table.filter.text, "user:svc-jax");
    key(&mut s, KeyCode::Esc);
    assert_eq!(s.process_table.filter, Filter::default());
    assert_eq!(shown(&s).len(), 9);
    // Esc on the main screen clears a kept filter too.
    s.start_filtered("gpu:0").expect("parses");
    assert_eq!(shown(&s), [41230]);
    s.apply_action(Action::Back);
    assert_eq!(shown(&s).len(), 9);
    assert_eq!(s.view, View::Main);
}

#[test]
fn a_filter_being_typed_that_does_not_parse_keeps_the_last_one_and_enter_waits() {
    let mut s = demo_state();
    s.apply_action(Action::Filter);
    typed(&mut s, "user:bob gpu");
    assert_eq!(shown(&s), [52010]);
    typed(&mut s, ":");
    assert!(s.process_table.filter.error.is_some());
    assert_eq!(shown(&s), [52010], "`user:bob gpu` stays in force");
    key(&mut s, KeyCode::Enter);
    assert!(
        s.process_table.filter.editing,
        "Enter waits for a filter that parses"
    );
    typed(&mut s, "3");
    assert_eq!(s.process_table.filter.error, None);
    assert_eq!(shown(&s), Vec::<u32>::new(), "bob is on GPU 2");
    key(&mut s, KeyCode::Enter);
    assert!(!s.process_table.filter.editing);
}

#[test]
fn the_selection_stays_on_its_process_while_it_still_matches() {
    let mut s = demo_state();
    // Select bob's eval loop, below the top row.
    while s.process_table.selected.as_ref().map(|(p, _)| *p) != Some(52010) {
        let before = s.process_table.selected.clone();
        s.apply_action(Action::Down);
        assert_ne!(before, s.process_table.selected, "52010 not in the table");
    }
    s.apply_action(Action::Filter);
    typed(&mut s, "python");
    assert_eq!(
        s.process_table.selected.as_ref().map(|(p, _)| *p),
        Some(52010),
        "still shown: still selected"
    );
    typed(&mut s, " gpu:0");
    assert_eq!(
        s.process_table.selected.as_ref().map(|(p, _)| *p),
        Some(41230),
        "hidden: the first row shown"
    );
    key(&mut s, KeyCode::Esc);
    assert_eq!(
        s.process_table.selected.as_ref().map(|(p, _)| *p),
        Some(41230),
        "clearing keeps the selection"
    );
}

#[test]
fn slash_opens_the_prompt_only_where_the_table_is() {
    let mut s = demo_state();
    s.apply_action(Action::ToggleHelp);
    s.apply_action(Action::Filter);
    assert!(!s.process_table.filter.editing);
    s.apply_action(Action::ToggleHelp);
    s.apply_action(Action::Filter);
    assert!(s.process_table.filter.editing);
}

#[test]
fn the_title_counts_what_the_filter_shows_and_the_gpu_panels_stay_whole() {
    let mut s = demo_state();
    let whole = screen(&s, 120, 40);
    s.start_filtered("user:mlteam").expect("parses");
    let filtered = screen(&s, 120, 40);
    assert!(
        filtered.contains("Processes · filter user:mlteam · 2 of 9 · sorted by used"),
        "{filtered}"
    );
    // Everything above the table (the header aside, whose clock may move) is as it was.
    let table_at = |screen: &str| {
        screen
            .lines()
            .position(|l| l.contains(" Processes"))
            .expect("the table")
    };
    let top = |screen: &str| -> Vec<String> {
        screen
            .lines()
            .skip(1)
            .take(table_at(screen) - 1)
            .map(str::to_string)
            .collect()
    };
    assert_eq!(top(&whole), top(&filtered), "the GPU panels changed");
    let rows: Vec<&str> = filtered
        .lines()
        .skip(table_at(&filtered) + 2)
        .take_while(|l| !l.trim().is_empty() && !l.contains("Findings"))
        .collect();
    assert!(
        rows.iter().all(|l| l.contains("mlteam")),
        "a row of another user: {rows:#?}"
    );
    assert_eq!(rows.len(), 2, "{filtered}");
}

#[test]
fn a_filter_that_matches_nothing_says_so() {
    let mut s = demo_state();
    s.start_filtered("user:zed").expect("parses");
    let text = screen(&s, 120, 40);
    assert!(text.contains("filter user:zed · 0 of 9"), "{text}");
    assert!(
        text.contains("no process matches `user:zed` · Esc clears the filter"),
        "{text}"
    );
}

#[test]
fn the_prompt_shows_its_cursor_and_why_a_filter_does_not_parse() {
    let mut s = demo_state();
    s.apply_action(Action::Filter);
    let text = screen(&s, 160, 48);
    assert!(text.contains("filter ▏ · 9 of 9"), "{text}");
    typed(&mut s, "pid:x");
    let text = screen(&s, 160, 48);
    assert!(
        text.contains("filter pid:x▏ · 0 of 9 · `x` is not a PID"),
        "{text}"
    );
}

#[test]
fn grouped_a_filter_shows_the_groups_of_the_processes_it_shows_with_their_sums_whole() {
    let mut s = demo_state();
    // By Slurm job: the two ranks, one group row per device.
    for _ in 0..3 {
        s.apply_action(Action::CycleGroup);
    }
    assert_eq!(s.process_table.group_by, GroupBy::Slurm);
    let sums = |s: &State| -> Vec<(String, String, Option<u64>)> {
        s.table()
            .iter()
            .filter_map(|e| match e {
                super::super::TableEntry::Group(g) => {
                    Some((g.key.clone(), g.device_uuid.clone(), g.used))
                }
                _ => None,
            })
            .collect()
    };
    let before = sums(&s);
    assert_eq!(before.len(), 2, "{before:?}");
    s.start_filtered("pid:41231").expect("parses");
    let after = sums(&s);
    assert_eq!(after.len(), 1, "only rank 1's group: {after:?}");
    assert!(before.contains(&after[0]), "its sum changed: {after:?}");
    s.start_filtered("user:bob").expect("parses");
    assert!(sums(&s).is_empty(), "no group of bob's");
    assert_eq!(s.table().len(), 1);
}

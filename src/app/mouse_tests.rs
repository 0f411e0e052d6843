//! The mouse on the demo: clicks land on the line the drawing put under them.

use super::*;
use crate::app::filter::tests::{demo_state, screen};
use crossterm::event::KeyModifiers;

fn mouse(kind: MouseEventKind, column: u16, row: u16) -> MouseEvent {
    MouseEvent {
        kind,
        column,
        row,
        modifiers: KeyModifiers::NONE,
    }
}

fn press(column: u16, row: u16) -> MouseEvent {
    mouse(MouseEventKind::Down(MouseButton::Left), column, row)
}

/// The screen row whose first word is `pid`, drawn at `width`x`height` (which records the
/// table's place, as the event loop's frames do).
fn row_of(state: &State, pid: u32, width: u16, height: u16) -> u16 {
    let text = screen(state, width, height);
    let row = text
        .lines()
        .position(|l| l.split_whitespace().next() == Some(&pid.to_string()))
        .unwrap_or_else(|| panic!("no row of {pid}:\n{text}"));
    u16::try_from(row).expect("a screen row")
}

fn selected_pid(state: &State) -> Option<u32> {
    state.process_table.selected.as_ref().map(|(p, _)| *p)
}

#[test]
fn a_click_selects_the_row_under_it_at_every_size() {
    for (width, height) in [(80, 24), (120, 40), (200, 60)] {
        let mut s = demo_state();
        for pid in [52010, 41231, 60112] {
            let row = row_of(&s, pid, width, height);
            let t0 = Instant::now();
            assert!(s.on_mouse(press(30, row), t0));
            assert_eq!(selected_pid(&s), Some(pid), "{width}x{height}");
            assert_eq!(s.view, View::Main, "one click only selects");
            // The selection then holds as samples come: the user chose it.
            assert!(s.process_table.selection_moved);
        }
    }
}

#[test]
fn a_click_moves_the_focus_to_the_table() {
    let mut s = demo_state();
    s.apply_action(Action::FocusNext);
    assert_eq!(s.focus, Focus::Findings);
    let row = row_of(&s, 52010, 120, 40);
    s.on_mouse(press(10, row), Instant::now());
    assert_eq!(s.focus, Focus::Processes);
    assert_eq!(selected_pid(&s), Some(52010));
}

#[test]
fn a_double_click_opens_the_process_and_two_slow_clicks_do_not() {
    let mut s = demo_state();
    let row = row_of(&s, 60112, 120, 40);
    let t0 = Instant::now();
    s.on_mouse(press(20, row), t0);
    s.on_mouse(
        press(20, row),
        t0 + DOUBLE_CLICK + Duration::from_millis(100),
    );
    assert_eq!(s.view, View::Main, "too slow for a double-click");
    s.on_mouse(
        press(20, row),
        t0 + DOUBLE_CLICK + Duration::from_millis(300),
    );
    let View::Detail { pid, .. } = &s.view else {
        panic!("a double-click did not open: {:?}", s.view)
    };
    assert_eq!(*pid, 60112);
    // Two clicks on two rows are two selections.
    let mut s = demo_state();
    let a = row_of(&s, 52010, 120, 40);
    let b = row_of(&s, 41231, 120, 40);
    s.on_mouse(press(20, a), t0);
    s.on_mouse(press(20, b), t0 + Duration::from_millis(50));
    assert_eq!(s.view, View::Main);
    assert_eq!(selected_pid(&s), Some(41231));
    s.apply_action(Action::Open);
    assert!(
        matches!(s.view, View::Detail { pid: 41231, .. }),
        "Enter opens what was clicked: {:?}",
        s.view
    );
}

#[test]
fn a_click_off_the_rows_or_under_a_prompt_changes_nothing() {
    let mut s = demo_state();
    let first = s.process_table.selected.clone();
    let text = screen(&s, 120, 40);
    let title = text
        .lines()
        .position(|l| l.contains(" Processes"))
        .expect("title") as u16;
    // The header line, the title, the header row (a click on a GPU selects it: below).
    for row in [0, title, title + 1] {
        assert!(!s.on_mouse(press(10, row), Instant::now()), "row {row}");
    }
    assert_eq!(s.process_table.selected, first);
    // A prompt takes no clicks.
    let row = row_of(&s, 52010, 120, 40);
    s.apply_action(Action::Record);
    assert!(s.recorder.prompt.is_some());
    assert!(!s.on_mouse(press(10, row), Instant::now()));
    assert_eq!(s.process_table.selected, first);
}

#[test]
fn without_the_mouse_a_report_that_comes_through_is_ignored() {
    let mut s = demo_state();
    s.setup.mouse = false;
    let first = s.process_table.selected.clone();
    let row = row_of(&s, 52010, 120, 40);
    assert!(!s.on_mouse(press(10, row), Instant::now()));
    assert!(!s.on_mouse(mouse(MouseEventKind::ScrollDown, 10, row), Instant::now()));
    assert_eq!(s.process_table.selected, first);
}

#[test]
fn a_view_over_the_table_takes_no_clicks_meant_for_it() {
    let mut s = demo_state();
    let row = row_of(&s, 52010, 120, 40);
    s.apply_action(Action::ToggleHelp);
    assert!(!s.on_mouse(press(10, row), Instant::now()));
    s.apply_action(Action::ToggleHelp);
    // The event loop forgets the table's place before a frame that does not draw it.
    s.mouse.table.take();
    assert!(!s.on_mouse(press(10, row), Instant::now()));
}

#[test]
fn a_filtered_table_is_clicked_where_it_is_drawn() {
    let mut s = demo_state();
    s.start_filtered("gpu:3").expect("parses");
    let row = row_of(&s, 61002, 80, 24);
    s.on_mouse(press(5, row), Instant::now());
    assert_eq!(selected_pid(&s), Some(61002));
    // Below the last row shown: nothing.
    assert!(!s.on_mouse(press(5, row + 3), Instant::now()));
    assert_eq!(selected_pid(&s), Some(61002));
}

#[test]
fn a_group_row_is_selected_and_opened_by_the_mouse() {
    let mut s = demo_state();
    s.apply_action(Action::CycleGroup);
    let text = screen(&s, 120, 40);
    let row = text
        .lines()
        .position(|l| l.starts_with("group") && l.contains("torchrun 41200"))
        .expect("a launcher group") as u16;
    let t0 = Instant::now();
    s.on_mouse(press(3, row), t0);
    assert_eq!(
        s.process_table
            .selected_group
            .as_ref()
            .map(|g| g.0.as_str()),
        Some("torchrun 41200")
    );
    assert_eq!(s.process_table.selected, None);
    s.on_mouse(press(3, row), t0 + Duration::from_millis(100));
    assert!(matches!(s.view, View::Group { .. }), "{:?}", s.view);
}

#[test]
fn the_wheel_moves_the_tables_selection_and_scrolls_a_text_view() {
    let mut s = demo_state();
    s.apply_action(Action::FocusNext);
    let first = selected_pid(&s);
    let row = row_of(&s, 52010, 120, 40);
    s.on_mouse(mouse(MouseEventKind::ScrollDown, 10, row), Instant::now());
    assert_eq!(
        s.focus,
        Focus::Processes,
        "the wheel over the table is the table's"
    );
    let rows: Vec<u32> = s.rows().iter().map(|r| r.process.pid).collect();
    assert_eq!(
        selected_pid(&s),
        Some(rows[1]),
        "one row down from {first:?}"
    );
    s.on_mouse(mouse(MouseEventKind::ScrollUp, 10, row), Instant::now());
    assert_eq!(selected_pid(&s), Some(rows[0]));
    s.apply_action(Action::ToggleHelp);
    s.on_mouse(mouse(MouseEventKind::ScrollDown, 10, 5), Instant::now());
    assert_eq!(s.views.help_scroll, WHEEL_LINES);
}

/// The screen cell (column, row) of GPU `index`'s compact row or panel title (the first
/// line starting with its index, or holding `GPU {index} ·`), a few cells in.
fn gpu_cell(state: &State, index: u32, width: u16, height: u16) -> (u16, u16) {
    let text = screen(state, width, height);
    let title = format!("GPU {index} ·");
    let (row, column) = text
        .lines()
        .enumerate()
        .find_map(|(row, l)| {
            if l.starts_with(&format!("{index} ")) {
                return Some((row, 2));
            }
            l.find(&title).map(|at| (row, l[..at].chars().count() + 2))
        })
        .unwrap_or_else(|| panic!("no GPU {index}:\n{text}"));
    (
        u16::try_from(column).expect("a column"),
        u16::try_from(row).expect("a screen row"),
    )
}

#[test]
fn a_click_on_a_gpu_shows_its_processes_and_a_second_shows_all() {
    // Compact rows at 80x24 and 120x40, bordered panels at 200x60.
    for (width, height) in [(80, 24), (120, 40), (200, 60)] {
        let mut s = demo_state();
        let (column, row) = gpu_cell(&s, 2, width, height);
        let t0 = Instant::now();
        assert!(s.on_mouse(press(column, row), t0), "{width}x{height}");
        assert_eq!(s.process_table.filter.text, "gpu:2", "{width}x{height}");
        assert_eq!(s.view, View::Main);
        let text = screen(&s, width, height);
        assert!(text.contains("filter gpu:2"), "{width}x{height}:\n{text}");
        // A second click, long after (not a double-click), shows every process again.
        let (column, row) = gpu_cell(&s, 2, width, height);
        assert!(s.on_mouse(press(column, row), t0 + DOUBLE_CLICK * 4));
        assert!(!s.process_table.filter.is_on(), "{width}x{height}");
        assert_eq!(s.view, View::Main);
    }
}

#[test]
fn a_click_on_a_gpus_legend_line_selects_that_gpu() {
    // At 120x40 each GPU row has its legend under it: a click there is a click on the GPU.
    let mut s = demo_state();
    let (_, row) = gpu_cell(&s, 1, 120, 40);
    assert!(s.on_mouse(press(40, row + 1), Instant::now()));
    assert_eq!(s.process_table.filter.text, "gpu:1");
}

#[test]
fn a_double_click_on_a_gpu_opens_the_strata_view_at_it() {
    let mut s = demo_state();
    let (column, row) = gpu_cell(&s, 3, 200, 60);
    let t0 = Instant::now();
    s.on_mouse(press(column, row), t0);
    assert!(s.on_mouse(press(column, row), t0 + DOUBLE_CLICK / 2));
    assert_eq!(s.view, View::Strata);
    let devices = crate::app::strata::strata_devices(&s.current.as_ref().expect("a sample").sample);
    let shown = &devices[s.strata.device];
    assert_eq!(
        shown.uuid,
        s.current.as_ref().expect("a sample").sample.gpus[3].uuid
    );
    assert_eq!(shown.mig, None);
}

#[test]
fn a_click_outside_the_gpus_and_the_table_does_nothing() {
    let mut s = demo_state();
    let text = screen(&s, 120, 40);
    // The header line is neither a GPU nor the table.
    assert!(text.lines().next().is_some_and(|l| l.contains("strata")));
    assert!(!s.on_mouse(press(20, 0), Instant::now()));
    assert!(!s.process_table.filter.is_on());
}

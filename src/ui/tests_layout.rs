//! The main screen's layout at 80x24, 120x40 and 200x60, on nodes of 1, 4 and 8 GPUs with 3
//! and 30 processes (the demo's, copied onto more GPUs and under more PIDs): the process table
//! shows every process the screen has room for, no finding is cut while a row stands blank,
//! and the layout holds still while only the number of findings changes.

use super::layout::findings_least;
use super::tests::{demo_state, render, text};
use crate::app::{Action, State};
use crate::detect::Finding;
use crate::pipeline::Pipeline;

const SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (200, 60)];
const GPUS: [usize; 3] = [1, 4, 8];
const PROCESSES: [usize; 2] = [3, 30];

/// The demo's findings at its snapshot instant (9 of them), repeated or cut to `count`.
fn findings(count: usize) -> Vec<Finding> {
    let demo = demo_state(false);
    let all = demo.findings().to_vec();
    all.iter().cycle().take(count).cloned().collect()
}

/// The demo's node at its snapshot instant reshaped: `gpus` GPUs (the demo's four, copied
/// under new indices and UUIDs past them; GPU 0 alone for one) and `processes` processes (the
/// demo's nine, copied under new PIDs onto the copied GPUs), showing `findings` findings.
fn shaped(gpus: usize, processes: usize, findings_shown: usize) -> State {
    let demo = demo_state(false);
    let base = &demo.current.as_ref().expect("a sample").sample;
    let mut sample = base.clone();
    let copy = |uuid: &str, gpu: usize| match gpu {
        0..=3 => uuid.to_string(),
        n => format!("{uuid}-copy{n}"),
    };
    sample.gpus = (0..gpus)
        .map(|i| {
            let mut gpu = base.gpus[i % base.gpus.len()].clone();
            gpu.index = i as u32;
            gpu.uuid = copy(&gpu.uuid, i);
            for m in &mut gpu.mig {
                m.uuid = copy(&m.uuid, i);
            }
            gpu
        })
        .collect();
    // Which demo GPU a device UUID is on.
    let gpu_of = |uuid: &str| {
        base.gpus
            .iter()
            .position(|g| g.uuid == uuid || g.mig.iter().any(|m| m.uuid == uuid))
            .unwrap_or(0)
    };
    sample.processes = (0..processes)
        .map(|j| {
            let round = j / base.processes.len();
            let mut p = base.processes[j % base.processes.len()].clone();
            p.pid += 100_000 * round as u32;
            if gpus == 1 {
                p.device_uuid = base.gpus[0].uuid.as_str().into();
            } else {
                let target = (gpu_of(&p.device_uuid) + 4 * round) % gpus;
                p.device_uuid = copy(&p.device_uuid, target).into();
            }
            p
        })
        .collect();
    // Where copies crowd a device past what NVML says is used there, each holds its share;
    // their feeds (the demo's jobs' own) would no longer match and go.
    let device_used = |uuid: &str| {
        sample.gpus.iter().find_map(|g| {
            if g.uuid == uuid {
                g.memory.map(|m| m.used)
            } else {
                g.mig
                    .iter()
                    .find(|m| m.uuid == uuid)
                    .and_then(|m| m.memory.map(|m| m.used))
            }
        })
    };
    let mut reshaped = processes > base.processes.len();
    let devices: Vec<String> = sample
        .processes
        .iter()
        .map(|p| p.device_uuid.to_string())
        .collect();
    for uuid in devices {
        let held: u64 = sample
            .processes
            .iter()
            .filter(|p| *p.device_uuid == *uuid)
            .filter_map(|p| p.used)
            .sum();
        let Some(used) = device_used(&uuid) else {
            continue;
        };
        if held > used {
            reshaped = true;
            for p in sample
                .processes
                .iter_mut()
                .filter(|p| *p.device_uuid == *uuid)
            {
                p.used = p
                    .used
                    .map(|u| (u128::from(u) * u128::from(used) / u128::from(held)) as u64);
            }
        }
    }
    if reshaped {
        sample.feeds.clear();
        for p in &mut sample.processes {
            p.feed = None;
        }
    }
    let mut state = State::new(Pipeline::new(None), demo.setup.source_label.clone(), 1.0);
    state.setup.demo = true;
    state.on_sample(sample);
    set_findings(&mut state, findings_shown);
    state
}

fn set_findings(state: &mut State, count: usize) {
    if let Some(observed) = state.current_mut() {
        observed.findings = findings(count);
    }
}

/// What a screen shows of the main layout.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    /// Rows of the GPU section (between the header and the table's rule).
    gpu_rows: usize,
    /// The table's rule and the findings' rule, as screen rows.
    table_at: usize,
    findings_at: usize,
    /// Process rows shown, and blank rows under them before the findings.
    process_rows: usize,
    blank_in_table: usize,
}

fn seen(screen: &str) -> Seen {
    let lines: Vec<&str> = screen.lines().collect();
    let table_at = lines
        .iter()
        .position(|l| l.starts_with(" Processes ("))
        .unwrap_or_else(|| panic!("no process table:\n{screen}"));
    let findings_at = lines
        .iter()
        .position(|l| l.starts_with(" Findings ("))
        .unwrap_or_else(|| panic!("no findings panel:\n{screen}"));
    // The rule, the header, then the rows.
    let rows = &lines[table_at + 2..findings_at];
    let is_row = |l: &&&str| {
        l.split_whitespace()
            .next()
            .is_some_and(|w| w.parse::<u32>().is_ok())
    };
    Seen {
        gpu_rows: table_at - 1,
        table_at,
        findings_at,
        process_rows: rows.iter().filter(is_row).count(),
        blank_in_table: rows.iter().filter(|l| l.trim().is_empty()).count(),
    }
}

/// The findings panel's lines (under its rule, above the footer).
fn finding_lines(screen: &str) -> Vec<String> {
    let lines: Vec<&str> = screen.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(" Findings ("))
        .expect("a findings panel");
    lines[at + 1..lines.len() - 1]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

/// Every size and shape: the table shows every process it has room for and stands no row
/// empty while one is left out; a table cut short has the GPU section in its leanest form
/// and the findings at their least; and at 120x40 and 200x60, the demo's node with 3
/// processes shows them all whatever the GPUs.
#[test]
fn the_table_shows_every_process_there_is_room_for() {
    for (w, h) in SIZES {
        for gpus in GPUS {
            for processes in PROCESSES {
                let state = shaped(gpus, processes, 9);
                let screen = text(&render(&state, w, h));
                let s = seen(&screen);
                let room = s.findings_at - s.table_at - 2;
                let what = format!("{w}x{h}, {gpus} GPUs, {processes} processes:\n{screen}");
                assert_eq!(s.process_rows, processes.min(room), "{what}");
                assert_eq!(s.blank_in_table, room - s.process_rows, "{what}");
                if s.process_rows < processes {
                    // Cut: every other block at its least.
                    let devices = gpus
                        + state.current.as_ref().map_or(0, |o| {
                            o.sample.gpus.iter().map(|g| g.mig.len()).sum::<usize>()
                        });
                    assert!(s.gpu_rows <= devices + 1, "{what}");
                    let findings_rows = h as usize - 2 - s.findings_at + 1;
                    assert!(
                        findings_rows <= usize::from(findings_least(h - 2)),
                        "{what}"
                    );
                }
                if processes == 3 && h >= 40 {
                    assert_eq!(s.process_rows, 3, "{what}");
                }
            }
        }
    }
}

/// The demo at 120x40 shows all nine processes with its four GPUs, whatever the number of
/// findings; at 80x24 too.
#[test]
fn the_demo_shows_all_nine_processes_at_120x40_and_80x24() {
    for count in [0, 1, 3, 9, 25] {
        let mut state = demo_state(false);
        set_findings(&mut state, count);
        for (w, h) in [(120, 40), (80, 24)] {
            let screen = text(&render(&state, w, h));
            assert_eq!(seen(&screen).process_rows, 9, "{count} findings:\n{screen}");
            for gpu in [
                "0 H100",
                "1 H100",
                "2 H100",
                "3 A100",
                "└3g.40gb",
                "└1g.10gb",
            ] {
                assert!(screen.contains(gpu), "{gpu}:\n{screen}");
            }
        }
    }
}

/// No finding is cut with `…` while a row of the table or the findings stands blank; and
/// where the findings
/// outnumber their rows, the last says how many more and the key to them.
#[test]
fn no_finding_is_cut_while_rows_stand_blank() {
    for (w, h) in SIZES {
        for gpus in GPUS {
            for processes in PROCESSES {
                for count in [1, 3, 9, 25] {
                    let state = shaped(gpus, processes, count);
                    let screen = text(&render(&state, w, h));
                    let what =
                        format!("{w}x{h}, {gpus} GPUs, {processes} processes, {count} findings");
                    let lines = finding_lines(&screen);
                    let cut = lines.iter().any(|l| l.ends_with('…'));
                    // Rows left blank under the GPU section (whose legends keep the rows
                    // their longest figures need, so that it holds still).
                    let blank = screen
                        .lines()
                        .skip(seen(&screen).table_at)
                        .filter(|l| l.trim().is_empty())
                        .count();
                    assert!(!(cut && blank > 0), "{what}:\n{screen}");
                    let leads = lines
                        .iter()
                        .filter(|l| ["crit ", "warn ", "info "].iter().any(|s| l.starts_with(s)))
                        .count();
                    if leads < count {
                        let more = format!("+{} more", count - leads);
                        let last = lines.iter().rev().find(|l| !l.trim().is_empty());
                        assert!(
                            last.is_some_and(|l| l.starts_with(&more) && l.contains("tab")),
                            "{what}: {more}:\n{screen}"
                        );
                    }
                }
            }
        }
    }
}

/// The layout is the terminal's and the node's: the same blocks at the same rows with 0, 1,
/// 3, 9 or 25 findings.
#[test]
fn the_layout_holds_still_while_the_findings_change() {
    for (w, h) in SIZES {
        for gpus in GPUS {
            for processes in PROCESSES {
                let layouts: Vec<Seen> = [0, 1, 3, 9, 25]
                    .into_iter()
                    .map(|count| seen(&text(&render(&shaped(gpus, processes, count), w, h))))
                    .collect();
                assert!(
                    layouts.windows(2).all(|p| p[0] == p[1]),
                    "{w}x{h}, {gpus} GPUs, {processes} processes: {layouts:#?}"
                );
            }
        }
    }
    // The demo's own story: from its first findings to its last, the same layout.
    let mut state = demo_state(false);
    let mut layouts = Vec::new();
    for count in [3, 9] {
        set_findings(&mut state, count);
        layouts.push(seen(&text(&render(&state, 120, 40))));
    }
    assert_eq!(layouts[0], layouts[1]);
}

/// The table scrolled by its selection, one line at a time to the last and back to the top:
/// at every step each line it has room for is a process, the selected one among them, and
/// the lines shown follow one another in the table's order (only the lines on screen are
/// worked out, and none of them is left blank).
#[test]
fn the_table_scrolls_with_its_selection_and_leaves_no_line_blank() {
    for (w, h) in SIZES {
        let mut state = shaped(4, 80, 9);
        let order: Vec<u32> = state.rows().iter().map(|r| r.process.pid).collect();
        let first = text(&render(&state, w, h));
        let room = {
            let s = seen(&first);
            s.findings_at - s.table_at - 2
        };
        assert!(
            room < order.len(),
            "{w}x{h}: the table must be cut to scroll:\n{first}"
        );
        let mut steps: Vec<Action> = vec![Action::Down; order.len() + 2];
        steps.extend(vec![Action::Up; order.len() + 2]);
        for (step, action) in steps.into_iter().enumerate() {
            state.apply_action(action);
            let screen = text(&render(&state, w, h));
            let s = seen(&screen);
            let what = format!("{w}x{h}, step {step}:\n{screen}");
            assert_eq!(s.process_rows, room, "{what}");
            assert_eq!(s.blank_in_table, 0, "{what}");
            let lines: Vec<&str> = screen.lines().collect();
            let shown: Vec<u32> = lines[s.table_at + 2..s.findings_at]
                .iter()
                .filter_map(|l| l.split_whitespace().next()?.parse().ok())
                .collect();
            let at = order
                .iter()
                .position(|&p| p == shown[0])
                .unwrap_or_else(|| panic!("{what}"));
            assert_eq!(shown, order[at..at + room].to_vec(), "{what}");
            let picked = state.process_table.selected.as_ref().map(|(pid, _)| *pid);
            assert!(picked.is_some_and(|p| shown.contains(&p)), "{what}");
        }
    }
}

/// The findings panel focused and scrolled: the selection stays in view and the last line
/// says how many are above and below.
#[test]
fn the_findings_scroll_with_the_selection() {
    let mut state = shaped(4, 30, 25);
    state.apply_action(Action::FocusNext);
    for _ in 0..12 {
        state.apply_action(Action::Down);
    }
    let screen = text(&render(&state, 120, 40));
    let lines = finding_lines(&screen);
    let last = lines.last().cloned().unwrap_or_default();
    assert!(last.contains("above") && last.contains("below"), "{screen}");
    assert!(last.contains("↑↓"), "{screen}");
}

#[test]
fn main_screen_at_each_size_and_shape() {
    for (w, h) in SIZES {
        for gpus in GPUS {
            for processes in PROCESSES {
                let screen = text(&render(&shaped(gpus, processes, 9), w, h));
                insta::assert_snapshot!(format!("main_{w}x{h}_{gpus}gpu_{processes}proc"), screen);
            }
        }
    }
}

/// The footer lists what the width allows, in order of use, `? help` at every width; at
/// 120 columns every key of the main screen.
#[test]
fn the_footer_keeps_the_help_key_and_lists_what_fits() {
    let state = demo_state(false);
    let footer = |w: u16| {
        text(&render(&state, w, 30))
            .lines()
            .last()
            .unwrap_or_default()
            .to_string()
    };
    for w in 60..=250 {
        let line = footer(w);
        assert!(line.ends_with("? help"), "{w}: {line}");
        assert!(line.starts_with(" q quit"), "{w}: {line}");
    }
    let line = footer(120);
    for key in [
        "⏎ detail",
        "tab ",
        "s sort",
        "S ",
        "K signal",
        "v strata",
        "p pause",
        "g group",
        "a attach",
        "r rec",
        "R report",
    ] {
        assert!(line.contains(key), "{key}: {line}");
    }
    // Narrower, the later keys go first: signal stays, the report goes.
    let line = footer(80);
    assert!(
        line.contains("K signal") && !line.contains("R report"),
        "{line}"
    );
}

/// The help in two columns where the screen is wide: all of it in view at 200x60; at 80x24
/// it scrolls and its border says how much is below, then above.
#[test]
fn the_help_takes_two_columns_where_wide_and_says_what_is_below() {
    let mut state = demo_state(false);
    state.apply_action(Action::ToggleHelp);
    let wide = text(&render(&state, 200, 60));
    assert!(!wide.contains("more lines below"), "{wide}");
    let keys = wide
        .lines()
        .find(|l| l.starts_with("│Keys"))
        .unwrap_or_default();
    assert!(keys.contains("Allocator feeds"), "two columns:\n{wide}");
    for layer in crate::layers::Layer::ALL {
        assert!(wide.contains(layer.meaning()), "{}:\n{wide}", layer.name());
    }
    let narrow = text(&render(&state, 80, 24));
    assert!(narrow.contains("more lines below: j PgDn"), "{narrow}");
    assert!(!narrow.contains("lines above"), "{narrow}");
    state.apply_action(Action::Bottom);
    let end = text(&render(&state, 80, 24));
    assert!(end.contains("lines above: k PgUp"), "{end}");
    assert!(!end.contains("more lines below"), "{end}");
}

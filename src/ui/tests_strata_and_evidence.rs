//! The monitor's diagnosis on screen: findings selected and opened to their evidence, climb
//! rates in the trend column, climb marks on sparklines, and the strata view at each zoom.

use super::tests::{demo_state, render, text};
use crate::app::{Action, Focus, State, View, Zoom};
use crate::detect::FindingKind;
use crate::layers::Layer;
use crate::pipeline::Pipeline;
use crate::source::demo::node_at;
use ratatui::style::Color;

/// The demo after 25 story hours, ending at the same point of its 20-minute loop as
/// [`demo_state`] (the fine-tune's OOM, the eval loop's leak): a sample a minute until the
/// last 2.5 hours, then one every 10 s (the monitor's own pace at `--demo-speed 10`). Every
/// tier of the history is full, and the test stays quick.
fn long_demo(mono: bool) -> State {
    let end = 25.0 * 3600.0 + crate::source::demo::SNAPSHOT_AT;
    let dense_from = end - 9000.0;
    let coarse = (0..)
        .map(|k| dense_from - 60.0 * f64::from(k))
        .take_while(|&t| t >= 0.0)
        .skip(1);
    let dense = (0..=900).map(|k| end - 10.0 * f64::from(k));
    let mut times: Vec<f64> = coarse.chain(dense).collect();
    times.sort_by(f64::total_cmp);
    let mut state = State::new(Pipeline::new(None), "demo".into(), 1.0);
    state.setup.demo = true;
    state.setup.monochrome = mono;
    for t in times {
        state.on_sample(node_at(0, t, 10.0));
    }
    state
}

/// The rows of the first chart on screen (between its title and its time axis), without
/// the border and the byte axis: one string per row, top first.
fn first_chart(screen: &str) -> Vec<String> {
    screen
        .lines()
        .skip_while(|l| !l.contains("┤"))
        .take_while(|l| !l.contains("0└"))
        .map(|l| {
            let row: String = l.chars().skip(1 + super::chart::Y_AXIS).collect();
            row.trim_end_matches('│').to_string()
        })
        .collect()
}

#[test]
fn strata_view_at_each_zoom() {
    let mut state = long_demo(false);
    state.apply_action(Action::ToggleStrata);
    for zoom in Zoom::ALL {
        state.strata.zoom = zoom;
        for (w, h) in [(80, 24), (160, 48)] {
            let screen = text(&render(&state, w, h));
            assert!(
                screen.contains(&format!("every layer over the last {}", zoom.label())),
                "{screen}"
            );
            assert!(screen.contains("GPU 0 · NVIDIA H100"), "{screen}");
            assert!(
                screen.contains("79.6G┤"),
                "the total on the axis:\n{screen}"
            );
            // A full history: no column of GPU 0's chart is unknown.
            let chart = first_chart(&screen);
            assert!(chart.len() >= 8, "{screen}");
            let bottom = chart.last().cloned().unwrap_or_default();
            assert!(!bottom.contains(' '), "a gap in a full history:\n{screen}");
            insta::assert_snapshot!(format!("strata_{}_{w}x{h}", zoom.label()), screen);
        }
    }
}

/// The story's OOMs and leak happen in the last 20 minutes: seen at 15 minutes, and at 24
/// hours the loop repeats (each 20-minute story a tooth).
#[test]
fn strata_view_scrolls_to_every_device_and_marks_climbs() {
    let mut state = demo_state(false);
    state.apply_action(Action::ToggleStrata);
    let screen = text(&render(&state, 160, 48));
    assert!(screen.contains("devices 1-3 of 7"), "{screen}");
    // GPU 2: the eval loop's leak, marked where it began.
    assert!(
        screen.contains("▲ PID 52010 live +636 MiB/min from 09:01"),
        "{screen}"
    );
    let axis_marks = screen
        .lines()
        .filter(|l| l.contains("0└") && l.contains('▲'))
        .count();
    assert_eq!(axis_marks, 1, "one climb on GPUs 0-2:\n{screen}");
    for _ in 0..6 {
        state.apply_action(Action::Down);
    }
    let screen = text(&render(&state, 160, 48));
    assert!(screen.contains("devices 5-7 of 7"), "{screen}");
    assert!(screen.contains("GPU 3 MIG 1g.10gb"), "{screen}");
    assert!(
        screen.contains("▲ PID 60112 cache"),
        "the fine-tune's climb on its instance:\n{screen}"
    );
}

/// Samples missing for two minutes are a blank stretch in every row of the chart: unknown,
/// not zero, and not bridged.
#[test]
fn a_gap_in_the_history_is_a_gap_in_the_strata_view() {
    let mut state = State::new(Pipeline::new(None), "demo".into(), 1.0);
    state.setup.demo = true;
    let mut t = 0.0;
    while t <= 905.0 {
        if !(600.0..720.0).contains(&t) {
            state.on_sample(node_at(0, t, 10.0));
        }
        t += 10.0;
    }
    state.apply_action(Action::ToggleStrata);
    let screen = text(&render(&state, 160, 48));
    let chart = first_chart(&screen);
    let width = chart.iter().map(|r| r.chars().count()).max().unwrap_or(0);
    let blank_in_every_row = |c: usize| {
        chart
            .iter()
            .all(|row| row.chars().nth(c).is_none_or(|ch| ch == ' '))
    };
    let blank: Vec<usize> = (0..width).filter(|&c| blank_in_every_row(c)).collect();
    // 120 s of the 900 shown over 151 columns: about 20 columns, together.
    assert!((16..=22).contains(&blank.len()), "{blank:?}\n{screen}");
    assert!(blank.windows(2).all(|w| w[1] == w[0] + 1), "{blank:?}");
    let from = blank[0] as f64 / width as f64 * 900.0 + 5.0;
    assert!(
        (590.0..630.0).contains(&from),
        "starts at {from} s\n{screen}"
    );
}

/// With NO_COLOR the strata view has no colour, and its layers are told apart by glyph.
#[test]
fn the_strata_view_reads_in_monochrome() {
    let mut state = demo_state(true);
    state.apply_action(Action::ToggleStrata);
    let buffer = render(&state, 160, 48);
    for cell in buffer.content() {
        assert!(
            matches!(cell.fg, Color::Reset) && matches!(cell.bg, Color::Reset),
            "coloured cell {cell:?}"
        );
    }
    let screen = text(&buffer);
    let charts: String = screen
        .lines()
        .filter(|l| l.contains('┤') || l.contains("│      │"))
        .collect();
    for layer in [
        Layer::Live,
        Layer::Cached,
        Layer::OutsidePool,
        Layer::Other,
        Layer::Free,
    ] {
        assert!(
            charts.contains(layer.glyph()),
            "{} missing:\n{screen}",
            layer.name()
        );
    }
}

/// Selects the first finding of `kind` (and `pid`) in the findings panel, by the keys.
fn select(state: &mut State, kind: FindingKind, pid: Option<u32>) {
    if state.focus != Focus::Findings {
        state.apply_action(Action::FocusNext);
    }
    state.apply_action(Action::Top);
    for _ in 0..state.findings().len() {
        let at = state.selected_finding_index().map(|i| &state.findings()[i]);
        if at.is_some_and(|f| f.kind == kind && (pid.is_none() || f.pid == pid)) {
            return;
        }
        state.apply_action(Action::Down);
    }
    panic!("no {kind:?} {pid:?} among {:?}", state.findings());
}

#[test]
fn evidence_of_a_climb_80x24() {
    let mut state = demo_state(false);
    select(&mut state, FindingKind::Climb, Some(52010));
    state.apply_action(Action::Open);
    let screen = text(&render(&state, 80, 24));
    assert!(screen.contains("Finding · climb"), "{screen}");
    assert!(screen.contains("PID 52010 · user bob"), "{screen}");
    insta::assert_snapshot!(screen);
    // Scrolled down: the chart of allocated bytes, the start marked under it.
    for _ in 0..30 {
        state.apply_action(Action::Down);
    }
    let screen = text(&render(&state, 80, 24));
    assert!(
        screen.contains("allocated (live tensors) of PID 52010"),
        "{screen}"
    );
    assert!(screen.contains("▲ began 09:01"), "{screen}");
    insta::assert_snapshot!("evidence_of_a_climb_80x24_scrolled", screen);
}

#[test]
fn evidence_of_a_climb_160x48() {
    let mut state = demo_state(false);
    select(&mut state, FindingKind::Climb, Some(52010));
    state.apply_action(Action::Open);
    let screen = text(&render(&state, 160, 48));
    for field in [
        "rate_mib_per_min       +635.8 MiB/min",
        "start                  09:01",
        "from_bytes",
        "window_secs            8m00s (480 s)",
        "cause                  live",
    ] {
        assert!(screen.contains(field), "{field}:\n{screen}");
    }
    let axis = screen.lines().find(|l| l.contains("0└")).expect("a chart");
    assert!(axis.contains('▲'), "{axis}");
    insta::assert_snapshot!(screen);
}

/// Every kind opens, each field with its unit: an OOM's request and free bytes, retries'
/// rate, fragmentation's share (and its chart).
#[test]
fn evidence_of_other_kinds_names_every_figure() {
    let mut state = demo_state(false);
    for (kind, expect) in [
        (
            FindingKind::Oom,
            vec![
                "class",
                "fragmentation",
                "requested",
                "2.50 GiB (2,684,354,560 B)",
            ],
        ),
        (
            FindingKind::AllocRetries,
            vec!["rate_per_min", "a minute", "window_secs", "5m00s (300 s)"],
        ),
        (
            FindingKind::Fragmentation,
            vec![
                "share",
                "%",
                "inactive_split (free split pieces) of PID 60112",
            ],
        ),
        (
            FindingKind::ZombieContext,
            vec!["used", "2.10 GiB (2,254,438,400 B)", "PID 31337 · user n/a"],
        ),
    ] {
        select(&mut state, kind, None);
        state.apply_action(Action::Open);
        assert!(matches!(state.view, View::Evidence(_)));
        let screen = text(&render(&state, 120, 40));
        for e in expect {
            assert!(screen.contains(e), "{kind:?}: {e}\n{screen}");
        }
        state.apply_action(Action::Back);
    }
}

/// The trend column shows a flagged climb's rate on its row, with its window where there is
/// room, always per minute as `/min`; other rows keep their sparkline.
#[test]
fn the_trend_column_shows_a_flagged_climbs_rate() {
    let state = demo_state(false);
    for (w, h, rate) in [
        (80, 24, "+636M/min"),
        (120, 40, "+636M/min 8m"),
        (160, 48, "+636 MiB/min 8m"),
    ] {
        let screen = text(&render(&state, w, h));
        let row = screen
            .lines()
            .find(|l| l.starts_with("52010"))
            .unwrap_or_else(|| panic!("{w}x{h}:\n{screen}"));
        assert!(row.contains(rate), "{w}x{h}: {row}");
        // A rate is per minute, written `/min` at every width.
        assert!(
            !row.contains("/m ") && !row.ends_with("/m"),
            "{w}x{h}: {row}"
        );
        let trainer = screen
            .lines()
            .find(|l| l.starts_with("41230"))
            .unwrap_or_default();
        assert!(trainer.contains("▁▁▁▁"), "{w}x{h}: {trainer}");
    }
}

/// The reconciliation of the leaking process marks on its sparklines where the climb began.
#[test]
fn sparklines_mark_where_a_climb_began() {
    let mut state = demo_state(false);
    while state.process_table.selected.as_ref().map(|s| s.0) != Some(52010) {
        state.apply_action(Action::Down);
    }
    state.apply_action(Action::Open);
    let screen = text(&render(&state, 160, 60));
    let used = screen
        .lines()
        .find(|l| l.trim_start_matches('│').starts_with("used  ") && !l.contains("NVML"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert_eq!(used.matches('▲').count(), 1, "{used}");
    assert!(
        screen.contains("▲ where the climb flagged for this process began: 09:01"),
        "{screen}"
    );
}

/// The story's leak, fragmentation, retries and OOMs reach the findings panel when a user
/// would expect (as the detectors' own test says), and none before its cause exists.
#[test]
fn the_demos_story_appears_in_the_findings_panel_on_time() {
    let expected: [(&str, f64, f64); 5] = [
        ("PID 52010 on GPU 2: live tensors climbing", 70.0, 670.0),
        (
            "PID 60112 on GPU 3 MIG 3g.40gb: fragmentation",
            300.0,
            700.0,
        ),
        ("PID 60112 on GPU 3 MIG 3g.40gb: ", 390.0, 500.0),
        (
            "PID 60112 on GPU 3 MIG 3g.40gb ran out of memory",
            900.0,
            900.0,
        ),
        ("PID 52010 on GPU 2 ran out of memory", 1010.0, 1010.0),
    ];
    let kinds = [
        FindingKind::Climb,
        FindingKind::Fragmentation,
        FindingKind::AllocRetries,
        FindingKind::Oom,
        FindingKind::Oom,
    ];
    let mut first_seen: Vec<Option<f64>> = vec![None; expected.len()];
    let mut state = State::new(Pipeline::new(None), "demo".into(), 1.0);
    state.setup.demo = true;
    let mut t = 0.0;
    while t <= 1010.0 {
        state.on_sample(node_at(0, t, 10.0));
        let screen = text(&render(&state, 200, 80));
        let panel: Vec<&str> = screen
            .lines()
            .skip_while(|l| !l.contains("Findings ("))
            .collect();
        for (i, (phrase, _, _)) in expected.iter().enumerate() {
            // Retries: the line that counts them.
            let hit = panel
                .iter()
                .any(|l| l.contains(phrase) && (i != 2 || l.contains("allocation retries")));
            if hit && first_seen[i].is_none() {
                first_seen[i] = Some(t);
                // It opens, from the panel, to its evidence.
                select(&mut state, kinds[i], None);
                state.apply_action(Action::Open);
                let screen = text(&render(&state, 120, 40));
                assert!(
                    screen.contains(&format!("Finding · {}", kinds[i].name())),
                    "{screen}"
                );
                state.apply_action(Action::Back);
            }
        }
        t += 10.0;
    }
    for ((phrase, from, by), seen) in expected.iter().zip(&first_seen) {
        let seen = seen.unwrap_or_else(|| panic!("never in the panel: {phrase}"));
        assert!(
            (*from..=*by).contains(&seen),
            "{phrase}: first in the panel at {seen} s, expected {from}..={by}"
        );
    }
}

#[test]
fn the_strata_and_evidence_views_draw_at_every_size_without_panic() {
    let mut state = demo_state(false);
    select(&mut state, FindingKind::Climb, Some(52010));
    state.apply_action(Action::Open);
    let evidence = state.view.clone();
    for view in [evidence, View::Strata] {
        state.view = view;
        for zoom in Zoom::ALL {
            state.strata.zoom = zoom;
            for (w, h) in [
                (0, 0),
                (1, 1),
                (20, 5),
                (60, 16),
                (61, 17),
                (80, 24),
                (100, 30),
                (250, 70),
                (1000, 20),
            ] {
                render(&state, w, h);
            }
        }
    }
}

#[test]
fn help_and_footer_name_the_strata_and_evidence_keys() {
    let mut state = demo_state(false);
    let footer = |state: &State, w: u16| {
        text(&render(state, w, 24))
            .lines()
            .last()
            .unwrap_or_default()
            .to_string()
    };
    for w in [80, 120] {
        assert!(footer(&state, w).contains("v strata"), "{w}");
    }
    // Recording and the report where the width leaves room; `r` says it stops a recording.
    assert!(footer(&state, 160).contains("r record  R report"));
    state.recorder.recording = Some(crate::app::RecordingShown {
        path: "night.jsonl.zst".into(),
        samples: 3,
        bytes: 4096,
    });
    assert!(footer(&state, 160).contains("r stop rec  R report"));
    state.recorder.recording = None;
    state.apply_action(Action::FocusNext);
    assert!(footer(&state, 80).contains("⏎ evidence"));
    state.apply_action(Action::ToggleStrata);
    assert!(
        footer(&state, 80).contains("zoom:15m"),
        "{}",
        footer(&state, 80)
    );
    state.apply_action(Action::ToggleHelp);
    // Tall enough for the whole help (it scrolls on a shorter screen).
    let screen = text(&render(&state, 80, 160));
    for key in [
        "v strata view",
        "z + - zoom",
        "a finding's evidence",
        "▲ where a flagged climb began",
    ] {
        assert!(screen.contains(key), "{key}:\n{screen}");
    }
}

/// A GPU lost from the bus keeps its chart (its name and size from its last reading), its
/// history up to the loss, and blank from then on.
#[test]
fn a_lost_gpu_keeps_its_history_in_the_strata_view() {
    let mut state = demo_state(false);
    let mut sample = state.current.as_ref().expect("sample").sample.clone();
    for _ in 0..12 {
        sample.time += 10.0;
        sample.gpus[1].lost = true;
        sample.gpus[1].memory = None;
        sample.gpus[1].name = None;
        sample
            .processes
            .retain(|p| *p.device_uuid != *sample.gpus[1].uuid);
        state.on_sample(sample.clone());
    }
    state.apply_action(Action::ToggleStrata);
    state.apply_action(Action::Down);
    let screen = text(&render(&state, 160, 48));
    let title = screen
        .lines()
        .find(|l| l.contains("GPU 1 ·"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(title.contains("NVIDIA H100 80GB HBM3"), "{title}");
    assert!(title.contains("total 79.6 GiB"), "{title}");
    assert!(
        title.contains("in use now n/a") && title.contains("LOST"),
        "{title}"
    );
    let chart: Vec<String> = screen
        .lines()
        .skip_while(|l| !l.contains("GPU 1 ·"))
        .skip(1)
        .take_while(|l| !l.contains("0└"))
        .map(|l| l.chars().skip(1 + super::chart::Y_AXIS).collect())
        .collect();
    let bottom = chart.last().cloned().unwrap_or_default();
    let bottom = bottom.trim_end_matches('│');
    // The last 2 minutes of 15 (about 20 of 151 columns) unknown, the rest known.
    let blank = bottom.chars().rev().take_while(|&c| c == ' ').count();
    assert!((15..=23).contains(&blank), "{blank}: {bottom}");
    assert!(!bottom.trim_end().contains(' '), "{bottom}");
}

/// Strings from outside reach the strata and evidence views defused: a MIG profile in the strata view's
/// titles, a command line and a finding's message in the evidence view.
#[test]
fn hostile_strings_are_defused_in_the_strata_and_evidence_views() {
    let mut state = demo_state(false);
    let mut sample = state.current.as_ref().expect("sample").sample.clone();
    sample.time += 10.0;
    sample.gpus[3].mig[0].profile = Some("3g\u{1b}[31m.40gb".into());
    sample.gpus[3].name = Some("NVIDIA A100\u{1b}]0;x\u{7}".into());
    for p in sample.processes.iter_mut().filter(|p| p.pid == 60112) {
        p.command = Some("python \u{1b}[2Jfinetune.py\u{202e}".into());
    }
    state.on_sample(sample);
    state.apply_action(Action::ToggleStrata);
    for _ in 0..4 {
        state.apply_action(Action::Down);
    }
    let mut screens = vec![
        text(&render(&state, 160, 48)),
        text(&render(&state, 80, 24)),
    ];
    state.apply_action(Action::ToggleStrata);
    select(&mut state, FindingKind::Climb, Some(60112));
    state.apply_action(Action::Open);
    screens.push(text(&render(&state, 160, 48)));
    screens.push(text(&render(&state, 80, 24)));
    for screen in &screens {
        assert!(!screen.contains('\u{1b}'), "{screen}");
        assert!(
            !screen.contains('\u{7}') && !screen.contains('\u{202e}'),
            "{screen}"
        );
    }
    assert!(
        screens[0].contains("GPU 3 MIG 3g\u{fffd}[31m.40gb"),
        "{}",
        screens[0]
    );
    assert!(
        screens[2].contains("python \u{fffd}[2Jfinetune.py\u{fffd}"),
        "{}",
        screens[2]
    );
}

/// A finding that clears while its evidence is open stays readable, marked as cleared.
#[test]
fn evidence_of_a_cleared_finding_says_so() {
    let mut state = demo_state(false);
    select(&mut state, FindingKind::Climb, Some(52010));
    state.apply_action(Action::Open);
    let screen = text(&render(&state, 120, 40));
    assert!(screen.contains("still raised at 09:15:05 UTC"), "{screen}");
    if let Some(o) = state.current_mut() {
        o.findings.retain(|f| f.kind != FindingKind::Climb);
    }
    let screen = text(&render(&state, 120, 40));
    assert!(
        screen.contains("cleared: not raised at 09:15:05 UTC; shown as last seen"),
        "{screen}"
    );
    assert!(screen.contains("live tensors climbing"), "{screen}");
    assert!(
        screen.contains("allocated (live tensors) of PID 52010"),
        "{screen}"
    );
}

/// The demo's fine-tune climbs toward its MIG slice's size: its forecast is in the trend
/// column, and its evidence charts the series, the fitted line carried past now and the
/// line it will cross.
#[test]
fn a_forecast_shows_in_the_trend_column_and_charts_its_crossing() {
    let mut state = demo_state(false);
    let screen = text(&render(&state, 120, 40));
    let row = screen
        .lines()
        .find(|l| l.starts_with("60112"))
        .expect("the fine-tune's row");
    assert!(row.contains("OOM ~"), "{row}");
    select(&mut state, FindingKind::OomForecast, Some(60112));
    state.apply_action(Action::Open);
    let screen = text(&render(&state, 160, 48));
    for part in [
        "Finding · oom_forecast",
        "eta_secs",
        "available_bytes",
        "limit_bytes",
    ] {
        assert!(screen.contains(part), "{part}:\n{screen}");
    }
    for _ in 0..30 {
        state.apply_action(Action::Down);
    }
    let screen = text(&render(&state, 160, 48));
    for part in [
        "at the present rate",
        "• fitted:",
        "─ what can be had",
        "✕ crossed in ~",
    ] {
        assert!(screen.contains(part), "{part}:\n{screen}");
    }
    let axis = screen.lines().find(|l| l.contains("0└")).expect("a chart");
    assert!(axis.contains('✕') && axis.contains('┼'), "{axis}");
    insta::assert_snapshot!("evidence_of_a_forecast_160x48", screen);
}

/// Memory against step: each column the step-end readings of its steps, the steps named.
#[test]
fn the_step_chart_draws_memory_against_step() {
    let mut steps = crate::history::Steps::default();
    for s in 1..=300u64 {
        steps.push(crate::history::StepPoint {
            step: s,
            time: 1000.0 + s as f64,
            allocated: (10u64 << 30) + s * (8 << 20),
            reserved: Some(0),
            peak_allocated: None,
        });
    }
    let lines = super::evidence::forecast::step_chart(
        &steps,
        100,
        super::theme::Theme {
            mono: true,
            ..Default::default()
        },
    );
    let shown: Vec<String> = lines
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect();
    assert!(shown[0].contains("steps 1 to 300"), "{shown:?}");
    assert!(shown
        .last()
        .is_some_and(|l| l.contains("step 1") && l.contains("step 300")));
    // A climb: the top row holds only the last steps, the bottom every step.
    let columns = |row: &String| -> Vec<char> { row.chars().skip(super::chart::Y_AXIS).collect() };
    let top = columns(&shown[1]);
    let bottom = columns(&shown[8]);
    assert!(top[..top.len() / 3].iter().all(|&c| c == ' '), "{shown:?}");
    assert!(top[top.len() - 1] != ' ', "{shown:?}");
    assert!(bottom.iter().all(|&c| c == '█'), "{shown:?}");
}

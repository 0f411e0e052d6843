use super::*;
use crate::app::{Action, State};
use crate::layers::Layer;
use crate::pipeline::Pipeline;
use crate::source::demo::{DemoSource, SNAPSHOT_AT};
use crate::source::Source;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use ratatui::Terminal;

/// The monitor after running the demo up to its snapshot instant.
pub(super) fn demo_state(mono: bool) -> State {
    demo(mono).0
}

/// [`demo_state`], and the demo, to go on from there.
pub(super) fn demo(mono: bool) -> (State, DemoSource) {
    let mut source = DemoSource::new(0, 1.0, 10.0, SNAPSHOT_AT);
    let mut state = State::new(Pipeline::new(None), source.label(), 1.0);
    state.setup.monochrome = mono;
    state.setup.demo = true;
    for sample in source.backlog() {
        state.on_sample(sample);
    }
    state.on_sample(source.sample().expect("demo samples"));
    (state, source)
}

pub(super) fn render(state: &State, width: u16, height: u16) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    terminal.draw(|f| draw(f, state)).expect("draws");
    terminal.backend().buffer().clone()
}

pub(super) fn text(buffer: &Buffer) -> String {
    let area = buffer.area;
    let mut out = String::new();
    for y in 0..area.height {
        let line: String = (0..area.width)
            .map(|x| buffer[(x, y)].symbol().to_string())
            .collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[test]
fn main_screen_80x24() {
    insta::assert_snapshot!(text(&render(&demo_state(false), 80, 24)));
}

/// Between compact and panels: bars with a short legend under each.
#[test]
fn main_screen_120x40() {
    insta::assert_snapshot!(text(&render(&demo_state(false), 120, 40)));
}

#[test]
fn main_screen_160x48() {
    insta::assert_snapshot!(text(&render(&demo_state(false), 160, 48)));
}

#[test]
fn reconciliation_80x24() {
    let mut state = demo_state(false);
    state.apply_action(Action::Open);
    insta::assert_snapshot!(text(&render(&state, 80, 24)));
}

#[test]
fn reconciliation_160x48() {
    let mut state = demo_state(false);
    // The fragmenting job, two rows down when sorted by used memory.
    state.apply_action(Action::Down);
    state.apply_action(Action::Down);
    state.apply_action(Action::Open);
    let screen = text(&render(&state, 160, 48));
    assert!(screen.contains("PID 60112"), "{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn help_screen_lists_every_layer() {
    let mut state = demo_state(false);
    state.apply_action(Action::ToggleHelp);
    // Every page of it, scrolled to its end.
    let mut screen = String::new();
    for _ in 0..40 {
        screen.push_str(&text(&render(&state, 120, 40)));
        state.apply_action(Action::Down);
    }
    for layer in Layer::ALL {
        assert!(screen.contains(layer.name()), "{} missing", layer.name());
    }
}

/// Scrolling the help stops where its last line reaches the bottom: one key back up moves
/// it at once, however often down was pressed; and it explains STATE, TREND and feeds.
#[test]
fn help_scrolls_to_its_end_and_no_further() {
    let mut state = demo_state(false);
    state.apply_action(Action::ToggleHelp);
    let top = text(&render(&state, 80, 24));
    for wanted in [
        "STATE:",
        "TREND 10m:",
        "A feed is strata's agent",
        "strata run --",
        "held of a 48.0 MiB budget",
    ] {
        let all = (0..80)
            .map(|_| {
                let screen = text(&render(&state, 80, 24));
                state.apply_action(Action::Down);
                screen
            })
            .collect::<String>();
        assert!(all.contains(wanted), "{wanted} not in the help");
        state.views.help_scroll = 0;
    }
    for _ in 0..200 {
        state.apply_action(Action::Down);
        render(&state, 80, 24);
    }
    let end = text(&render(&state, 80, 24));
    assert!(end.contains(Layer::Free.meaning()), "{end}");
    state.apply_action(Action::Up);
    let back = text(&render(&state, 80, 24));
    assert_ne!(back, end, "one key up moves the help at once");
    assert_ne!(back, top);
}

/// The demo runs ten times faster than the clock: its header shows story time, never a UTC
/// wall clock, and the interval of its samples as the JSON has it (10 story seconds).
#[test]
fn the_demo_shows_story_time_and_the_samples_interval() {
    let state = demo_state(false);
    let json_interval = state.current.as_ref().expect("a sample").sample.interval;
    assert_eq!(json_interval, 10.0);
    for (w, h) in [(160, 48), (120, 40), (80, 24)] {
        let header = text(&render(&state, w, h))
            .lines()
            .next()
            .unwrap_or("")
            .to_string();
        assert!(header.contains("story 15m05s"), "{w}: {header}");
        assert!(
            !header.contains("UTC") && !header.contains("09:15"),
            "{w}: {header}"
        );
        assert!(
            header.contains("10.0s") || header.contains(" 10s "),
            "{w}: {header}"
        );
    }
}

/// At 60x16 every GPU and MIG row is on screen (the 1g.10gb slice a warning names among
/// them): the layers' key line goes first.
#[test]
fn every_device_row_stays_at_60x16() {
    let state = demo_state(false);
    let screen = text(&render(&state, 60, 16));
    for row in [
        "0 H100",
        "1 H100",
        "2 H100",
        "3 A100",
        "└3g.40gb",
        "└2g.20gb",
        "└1g.10gb",
    ] {
        assert!(screen.contains(row), "{row} missing:\n{screen}");
    }
}

#[test]
fn tiny_terminals_do_not_panic() {
    let state = demo_state(false);
    for (w, h) in [(0, 0), (1, 1), (20, 5), (59, 40), (200, 3), (1, 100)] {
        let screen = text(&render(&state, w, h));
        if w >= 20 && h >= 1 {
            assert!(screen.contains("too small"), "{w}x{h}: {screen}");
        }
    }
}

#[test]
fn a_terminal_too_small_always_says_how_to_quit() {
    let state = demo_state(false);
    for (w, h) in [
        (59, 40),
        (40, 10),
        (30, 8),
        (20, 5),
        (20, 1),
        (9, 1),
        (9, 3),
        (74, 2),
    ] {
        let screen = text(&render(&state, w, h));
        assert!(screen.contains("q to quit"), "{w}x{h}:\n{screen}");
    }
    // Where the sentence fits, it is one line, as before.
    let wide = text(&render(&state, 200, 3));
    assert!(
        wide.contains("too small (200x3 < 60x16): enlarge the terminal, or q to quit"),
        "{wide}"
    );
}

#[test]
fn every_size_in_between_draws() {
    let mut state = demo_state(false);
    for (w, h) in [
        (60, 16),
        (80, 24),
        (100, 30),
        (120, 40),
        (160, 48),
        (250, 70),
    ] {
        render(&state, w, h);
    }
    state.apply_action(Action::Open);
    for (w, h) in [(60, 16), (250, 70)] {
        render(&state, w, h);
    }
}

/// With NO_COLOR nothing is coloured, and the bar still tells every layer apart by glyph.
#[test]
fn monochrome_bars_distinguish_layers_by_glyph() {
    let glyphs: std::collections::HashSet<char> = Layer::ALL.iter().map(|l| l.glyph()).collect();
    assert_eq!(glyphs.len(), Layer::ALL.len(), "each layer its own glyph");

    let buffer = render(&demo_state(true), 160, 48);
    for cell in buffer.content() {
        assert!(
            matches!(cell.fg, Color::Reset) && matches!(cell.bg, Color::Reset),
            "coloured cell {cell:?}"
        );
    }
    // GPU 3 holds every layer at this instant; its bar is the first line of its panel.
    let screen = text(&buffer);
    let bar = screen
        .lines()
        .skip_while(|l| !l.contains("GPU 3"))
        .nth(1)
        .expect("GPU 3 panel");
    for layer in Layer::ALL {
        assert!(
            bar.contains(layer.glyph()),
            "{} not in bar: {bar}",
            layer.name()
        );
    }
}

#[test]
fn lost_gpu_shows_its_last_values_greyed() {
    let mut state = demo_state(false);
    let mut sample = state.current.as_ref().expect("sample").sample.clone();
    sample.time += 10.0;
    sample.gpus[1].lost = true;
    sample.gpus[1].memory = None;
    sample
        .processes
        .retain(|p| *p.device_uuid != *sample.gpus[1].uuid);
    state.on_sample(sample);
    let screen = text(&render(&state, 160, 48));
    assert!(screen.contains("LOST"), "{screen}");
    assert!(screen.contains("fell off the bus"), "{screen}");
    // The other GPUs go on.
    assert!(screen.contains("GPU 0 · NVIDIA H100"), "{screen}");
}

#[test]
fn a_node_without_gpus_says_so() {
    let mut state = State::new(Pipeline::new(None), "nvml".into(), 1.0);
    state.on_sample(crate::fixtures::node());
    let screen = text(&render(&state, 100, 30));
    assert!(
        screen.contains("NVML reports no GPU on this node"),
        "{screen}"
    );
}

/// Whatever the width, the header says whether the monitor is live or paused.
#[test]
fn header_always_shows_the_state() {
    let mut state = demo_state(false);
    state.apply_action(Action::TogglePause);
    for width in [60, 80, 100, 120, 160, 250] {
        let screen = text(&render(&state, width, 30));
        let header = screen.lines().next().unwrap_or_default();
        assert!(header.contains("‖ paused"), "{width}: {header}");
    }
}

/// Strings from outside (NVML names, MIG profiles, the host, command lines, feeds) reach the
/// screen with their control characters replaced, in every layout.
#[test]
fn hostile_strings_are_shown_defused() {
    let mut state = demo_state(false);
    let mut sample = state.current.as_ref().expect("sample").sample.clone();
    sample.time += 10.0;
    sample.host = "node\u{1b}]0;pwned\u{7}".into();
    sample.gpus[0].name = Some("NVIDIA H100\u{1b}[2J 80GB".into());
    sample.gpus[3].mig[0].profile = Some("3g\u{1b}[31m.40gb".into());
    sample.processes[0].command = Some("python \u{1b}[2Jtrain.py\u{202e}".into());
    state.on_sample(sample);
    for (width, height) in [(80, 24), (120, 40), (160, 48)] {
        let screen = text(&render(&state, width, height));
        assert!(!screen.contains('\u{1b}'), "{width}x{height}:\n{screen}");
        assert!(!screen.contains('\u{202e}'), "{width}x{height}");
        assert!(screen.contains('\u{fffd}'), "{width}x{height}:\n{screen}");
    }
    let screen = text(&render(&state, 160, 48));
    assert!(screen.contains("NVIDIA H100\u{fffd}[2J 80GB"), "{screen}");
    assert!(screen.contains("node\u{fffd}]0;pwned\u{fffd}"), "{screen}");
}

#[test]
fn the_config_files_columns_choose_the_extra_columns_and_their_order() {
    use crate::config::Column;
    let header = |state: &State| {
        let screen = text(&render(state, 200, 60));
        screen
            .lines()
            .find(|l| l.starts_with("PID "))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no header:\n{screen}"))
    };
    let mut state = demo_state(false);
    let every = header(&state);
    assert!(
        every.contains(" T ") && every.contains("SM%") && every.contains("OWNER"),
        "{every}"
    );
    state.setup.columns = vec![Column::Owner, Column::Sm];
    let chosen = header(&state);
    assert!(
        !chosen.contains(" T ") && !chosen.contains("CPU%"),
        "{chosen}"
    );
    let (owner, sm) = (chosen.find("OWNER"), chosen.find("SM%"));
    assert!(owner.is_some() && sm.is_some() && owner < sm, "{chosen}");
    state.setup.columns.clear();
    let none = header(&state);
    assert!(!none.contains("OWNER") && !none.contains("SM%"), "{none}");
}

#[test]
fn a_wide_character_command_is_cut_at_the_edge_with_its_mark() {
    // A command in CJK and emoji (two cells a character) runs to the table's border, cut by
    // cells with its `…`, not six cells short and unmarked.
    let mut state = demo_state(false);
    let mut sample = state.current.as_ref().expect("sample").sample.clone();
    sample.time += 10.0;
    let pid = sample.processes[0].pid;
    sample.processes[0].command =
        Some("python 训练模型数据集加载器和优化器的很长的命令行参数🚀🚀🚀 --epochs 100".repeat(3));
    state.on_sample(sample);
    for (width, height) in [(80, 24), (120, 40), (200, 60)] {
        let screen = text(&render(&state, width, height));
        let row = screen
            .lines()
            .find(|l| l.trim_start_matches('│').starts_with(&pid.to_string()))
            .unwrap_or_else(|| panic!("{width}x{height}: no row of {pid}:\n{screen}"));
        let row = row.trim_end();
        assert!(
            row.trim_end_matches('│').ends_with('…'),
            "{width}x{height}: {row}"
        );
        // The row reaches the edge (its border, where it has one); the `…` stands one cell
        // short only where a two-cell character would have straddled it.
        let cells = unicode_width::UnicodeWidthStr::width(row);
        assert!(
            cells + 1 >= usize::from(width),
            "{width}x{height}: {cells} cells: {row}"
        );
    }
}

/// The `K` dialog over the table: several holders of a zombie's device file, the one at the
/// cursor refused with its reason; then the signals; then the question.
fn dialog_state() -> State {
    use crate::app::{KillDialog, Offer, Stage};
    use crate::process_signal::{Signal, Target};
    let mut state = demo_state(false);
    let target = |pid: u32, command: &str, note: &str| Target {
        pid,
        start_time: Some(1),
        user: Some("dave".into()),
        command: Some(command.into()),
        note: Some(note.into()),
    };
    state.kill.dialog = Some(KillDialog {
        title: "the holders of /dev/nvidia2".into(),
        offers: vec![
            Offer {
                target: target(
                    31342,
                    "python pretrain.py --workers 8",
                    "no context of its own · child of 1 /sbin/init",
                ),
                refusal: None,
            },
            Offer {
                target: target(52010, "python eval_loop.py", "has a context of its own"),
                refusal: Some(
                    "not permitted (EPERM): PID 52010 belongs to user bob; run strata as that user or as root"
                        .into(),
                ),
            },
        ],
        chosen: 1,
        signal: Signal::Term,
        stage: Stage::Process,
        message: None,
    });
    state
}

#[test]
fn signal_dialog_80x24() {
    let state = dialog_state();
    let screen = text(&render(&state, 80, 24));
    for needle in [
        "Signal · the holders of /dev/nvidia2",
        "  PID 31342 (python pretrain.py --workers 8) · dave · no context of its",
        "› PID 52010 (python eval_loop.py) · dave",
        "cannot: not permitted (EPERM): PID 52010",
        "↑↓ choose · Enter next · Esc cancel",
    ] {
        assert!(screen.contains(needle), "{needle}:\n{screen}");
    }
    insta::assert_snapshot!(screen);
}

#[test]
fn signal_dialog_asks_which_signal_then_confirms() {
    use crate::app::Stage;
    let mut state = dialog_state();
    if let Some(d) = state.kill.dialog.as_mut() {
        d.chosen = 0;
        d.stage = Stage::Signal;
    }
    let screen = text(&render(&state, 120, 40));
    assert!(
        screen.contains("Signal PID 31342 (python pretrain.py --workers 8), user dave:"),
        "{screen}"
    );
    assert!(
        screen.contains("  SIGINT   interrupt, as Ctrl-C"),
        "{screen}"
    );
    assert!(screen.contains("› SIGTERM  ask it to exit"), "{screen}");
    assert!(screen.contains("  SIGKILL  end it at once"), "{screen}");
    if let Some(d) = state.kill.dialog.as_mut() {
        d.stage = Stage::Confirm;
    }
    let screen = text(&render(&state, 120, 40));
    assert!(
        screen.contains("Send SIGTERM to PID 31342 (python pretrain.py --workers 8), user dave?"),
        "{screen}"
    );
    assert!(screen.contains("y/Enter send · n/Esc cancel"), "{screen}");
    for (w, h) in [
        (0, 0),
        (1, 1),
        (20, 5),
        (60, 16),
        (61, 17),
        (200, 3),
        (1, 100),
    ] {
        render(&state, w, h);
    }
}

/// `--ascii` (or the config file's `ascii`) reaches every cell of every screen at every
/// size, the too-small one included; `--theme light` draws the layers in the light palette.
#[test]
fn the_ascii_switch_and_the_light_theme_reach_the_screen() {
    let mut state = demo_state(false);
    state.setup.ascii = true;
    for (width, height) in [(80, 24), (120, 40), (200, 60), (40, 10)] {
        let buffer = render(&state, width, height);
        let area = buffer.area;
        for y in 0..area.height {
            for x in 0..area.width {
                let symbol = buffer[(x, y)].symbol();
                assert!(
                    symbol.is_ascii(),
                    "{width}x{height}: {symbol:?} at ({x}, {y}) in ASCII mode:\n{}",
                    text(&buffer)
                );
            }
        }
    }
    let dark = render(&demo_state(false), 120, 40);
    let mut light = demo_state(false);
    light.setup.palette = crate::config::Palette::Light;
    let light = render(&light, 120, 40);
    assert_eq!(text(&dark), text(&light), "the same words in either theme");
    let colours =
        |b: &Buffer| -> Vec<ratatui::style::Color> { b.content().iter().map(|c| c.fg).collect() };
    assert_ne!(
        colours(&dark),
        colours(&light),
        "the light theme's colours are drawn"
    );
}

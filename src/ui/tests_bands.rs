//! Drawing band by band ([`draw_bands`]) shows what drawing the whole frame shows, after
//! any run of samples, keys and resizes: the screen a terminal holds once each frame's
//! changed rows are written is the whole frame of the last state.

use super::tests::{demo, render, text};
use super::*;
use crate::app::{key_action, AttachOffer};
use crate::source::Source;
use crate::terminal::present;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use proptest::prelude::*;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::Terminal;
use std::ops::Range;

/// What happens between two frames.
#[derive(Debug, Clone)]
enum Step {
    /// The next sample.
    Sample,
    Key(KeyCode),
    /// The terminal takes this size (the screen is wiped).
    Resize(u16, u16),
    /// The offer to attach a feed opens over the main screen, or closes.
    Offer,
    /// The next frame is drawn with nothing new.
    Nothing,
}

/// Keys that change what the main screen and its dialogs show, and nothing outside the
/// test: no `y` (it would signal a process, or attach to one), no report or recording, no
/// quit or stop.
const KEYS: &[KeyCode] = &[
    KeyCode::Char('j'),
    KeyCode::Char('k'),
    KeyCode::Down,
    KeyCode::Up,
    KeyCode::PageDown,
    KeyCode::PageUp,
    KeyCode::Home,
    KeyCode::End,
    KeyCode::Char('g'),
    KeyCode::Char('G'),
    KeyCode::Char('o'),
    KeyCode::Left,
    KeyCode::Right,
    KeyCode::Enter,
    KeyCode::Tab,
    KeyCode::Char('s'),
    KeyCode::Char('S'),
    KeyCode::Char('p'),
    KeyCode::Char('?'),
    KeyCode::Char('v'),
    KeyCode::Char('+'),
    KeyCode::Char('z'),
    KeyCode::Char('/'),
    KeyCode::Char('3'),
    KeyCode::Char('x'),
    KeyCode::Backspace,
    KeyCode::Esc,
    KeyCode::Char('K'),
    KeyCode::Char('a'),
    KeyCode::Char('n'),
    KeyCode::Char('w'),
];

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => Just(Step::Sample),
        6 => proptest::sample::select(KEYS).prop_map(Step::Key),
        1 => proptest::sample::select(vec![(120, 40), (80, 24), (100, 30), (60, 16), (59, 20)])
            .prop_map(|(w, h)| Step::Resize(w, h)),
        1 => Just(Step::Offer),
        2 => Just(Step::Nothing),
    ]
}

/// A key as the event loop takes it: to the filter while it is typed, else its action.
fn press(state: &mut State, code: KeyCode) {
    let key = KeyEvent::new(code, KeyModifiers::NONE);
    if state.process_table.filter.editing {
        state.filter_key(key);
    } else if let Some(action) = key_action(key) {
        state.apply_action(action);
    }
}

fn toggle_offer(state: &mut State) {
    state.attach.offer = match state.attach.offer {
        Some(_) => None,
        None => Some(AttachOffer {
            pid: 41230,
            title: "PID 41230 (python train.py)".into(),
        }),
    };
}

/// The monitor's frames written to a terminal as [`crate::terminal::Guard`] writes them.
struct Screen {
    terminal: Terminal<TestBackend>,
    shown: Buffer,
    bands: Bands,
    wiped: bool,
}

impl Screen {
    fn new(width: u16, height: u16) -> Self {
        let terminal = Terminal::new(TestBackend::new(width, height)).expect("test backend");
        Screen {
            terminal,
            shown: Buffer::empty(Rect::new(0, 0, width, height)),
            bands: Bands::default(),
            wiped: true,
        }
    }

    /// Draws a frame band by band and writes what changed; returns the rows drawn (`None`:
    /// every row).
    fn frame(&mut self, state: &State) -> Option<Vec<Range<u16>>> {
        let wiped = std::mem::take(&mut self.wiped);
        let drawn = draw_bands(
            &mut self.terminal.get_frame(),
            state,
            &mut self.bands,
            wiped,
        );
        let mut next = std::mem::take(self.terminal.current_buffer_mut());
        present(
            self.terminal.backend_mut(),
            &mut self.shown,
            &mut next,
            drawn.as_deref(),
        )
        .expect("written");
        *self.terminal.current_buffer_mut() = next;
        drawn
    }

    fn shows(&self) -> &Buffer {
        self.terminal.backend().buffer()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn bands_show_the_whole_frame(
        steps in proptest::collection::vec(step(), 1..40),
        mono in any::<bool>(),
        ascii in any::<bool>(),
    ) {
        let (mut state, mut source) = demo(mono);
        state.setup.ascii = ascii;
        let (mut width, mut height) = (120, 40);
        let mut screen = Screen::new(width, height);
        screen.frame(&state);
        for step in steps {
            match step {
                Step::Sample => state.on_sample(source.sample().expect("demo samples")),
                Step::Key(code) => press(&mut state, code),
                Step::Resize(w, h) => {
                    (width, height) = (w, h);
                    // A new size: a blank screen, written whole.
                    let bands = std::mem::take(&mut screen.bands);
                    screen = Screen::new(w, h);
                    screen.bands = bands;
                }
                Step::Offer => toggle_offer(&mut state),
                Step::Nothing => {}
            }
            screen.frame(&state);
            let whole = render(&state, width, height);
            prop_assert_eq!(
                screen.shows(),
                &whole,
                "shown:\n{}\nwhole:\n{}",
                text(screen.shows()),
                text(&whole)
            );
        }
    }
}

/// A frame with nothing new draws no band; a new sample of the demo draws the header (its
/// clock) and the bands whose figures moved, not the footer.
#[test]
fn a_frame_draws_only_the_bands_that_changed() {
    let (mut state, mut source) = demo(false);
    let mut screen = Screen::new(120, 40);
    assert_eq!(
        screen.frame(&state),
        Some(vec![0..1, 1..15, 15..26, 26..39, 39..40])
    );
    assert_eq!(screen.frame(&state), Some(vec![]));
    state.on_sample(source.sample().expect("demo samples"));
    let Some(rows) = screen.frame(&state) else {
        panic!("the main screen is drawn band by band");
    };
    assert_eq!(rows.first(), Some(&(0..1)), "the clock moved");
    assert!(
        !rows.contains(&(39..40)),
        "the footer did not change: {rows:?}"
    );
    // Another view: the whole frame, and every band after it.
    press(&mut state, KeyCode::Char('?'));
    assert_eq!(screen.frame(&state), None);
    press(&mut state, KeyCode::Esc);
    let Some(rows) = screen.frame(&state) else {
        panic!("the main screen is drawn band by band");
    };
    assert_eq!(rows.len(), 5, "{rows:?}");
    assert_eq!(screen.shows(), &render(&state, 120, 40));
    // A dialog over the main screen: the same.
    toggle_offer(&mut state);
    assert_eq!(screen.frame(&state), None);
    toggle_offer(&mut state);
    let Some(rows) = screen.frame(&state) else {
        panic!("the main screen is drawn band by band");
    };
    assert_eq!(rows.len(), 5, "{rows:?}");
    assert_eq!(screen.shows(), &render(&state, 120, 40));
}

/// The rows the last frame's GPU band took.
fn gpu_rows(screen: &Screen) -> Range<u16> {
    let last = screen
        .bands
        .last
        .as_ref()
        .expect("a frame drawn band by band");
    let (band, _) = last.bands[1];
    band.top()..band.bottom()
}

/// A still node (the demo's sample again, a second later each time), at sizes where its GPUs
/// are panels (120x60) and compact rows (120x40, 80x24): the GPU section is worked out again
/// only where what it shows moved (a sparkline's cell ending, a figure), and kept otherwise;
/// the screen is the whole frame's every time, and a click on a GPU still finds it. (A debug
/// build also works out each kept section and compares.)
#[test]
fn a_still_node_keeps_its_gpu_section_until_what_it_shows_moves() {
    for (width, height) in [(120, 60), (120, 40), (80, 24)] {
        still_node_at(width, height);
    }
}

fn still_node_at(width: u16, height: u16) {
    let (mut state, mut source) = demo(false);
    let first = source.sample().expect("demo samples");
    let mut screen = Screen::new(width, height);
    let at = |state: &mut State, t: f64| {
        let mut sample = first.clone();
        sample.time = t;
        state.on_sample(sample);
    };
    at(&mut state, first.time);
    screen.frame(&state);
    assert_eq!(screen.bands.gpus.worked_out, 1, "at {width}x{height}");
    let places = state.mouse.gpus.borrow().clone();
    assert!(!places.is_empty(), "the GPUs' places are recorded");
    let mut kept = 0;
    for i in 1..=60 {
        at(&mut state, first.time + f64::from(i));
        let before = screen.bands.gpus.worked_out;
        let rows = screen.frame(&state).expect("the main screen, band by band");
        if screen.bands.gpus.worked_out == before {
            kept += 1;
            let gpus = gpu_rows(&screen);
            assert!(
                !rows.contains(&gpus),
                "a kept section is not drawn: {rows:?}"
            );
        }
        let whole = render(&state, width, height);
        assert_eq!(screen.shows(), &whole, "at {width}x{height} after {i} s");
        assert_eq!(*state.mouse.gpus.borrow(), places, "after {i} s");
    }
    // Sixty samples of one reading: the sparklines' cells end every 10 to 75 s.
    assert!(
        (40..60).contains(&kept),
        "{kept} of 60 frames kept the section at {width}x{height}"
    );
    // A figure that moves is drawn at once.
    let mut moved = first.clone();
    moved.time = first.time + 61.0;
    let memory = moved.gpus[0]
        .memory
        .as_mut()
        .expect("the demo GPU's memory");
    memory.used += 1 << 30;
    memory.free -= 1 << 30;
    state.on_sample(moved);
    let before = screen.bands.gpus.worked_out;
    screen.frame(&state);
    assert_eq!(screen.bands.gpus.worked_out, before + 1);
    assert_eq!(screen.shows(), &render(&state, width, height));
}

/// What the GPU section was drawn from goes with the frame that drew it: after another view,
/// a frame of another form at the same size (compact rows, the GPUs' refusals taking the
/// panels' room), or another size, it is worked out again, never taken from a frame that did
/// not draw it.
#[test]
fn a_kept_gpu_section_goes_with_the_frame_that_drew_it() {
    let (mut state, mut source) = demo(false);
    let sample = source.sample().expect("demo samples");
    let (width, height) = (120, 60);
    let mut screen = Screen::new(width, height);
    let check = |screen: &mut Screen, state: &State, worked: usize| {
        screen.frame(state);
        assert_eq!(screen.bands.gpus.worked_out, worked);
        assert_eq!(screen.shows(), &render(state, width, height));
    };
    state.on_sample(sample.clone());
    check(&mut screen, &state, 1);
    check(&mut screen, &state, 1);
    // Another view and back.
    press(&mut state, KeyCode::Char('?'));
    screen.frame(&state);
    press(&mut state, KeyCode::Esc);
    check(&mut screen, &state, 2);
    // Each GPU with eight refusals: its panel too tall, compact rows instead.
    let mut refused = sample.clone();
    for gpu in &mut refused.gpus {
        for i in 0..8 {
            gpu.problems
                .insert(format!("what{i}"), "Not Supported".into());
        }
    }
    state.on_sample(refused);
    check(&mut screen, &state, 3);
    state.on_sample(sample.clone());
    check(&mut screen, &state, 4);
    // Another size, compact, and back.
    let bands = std::mem::take(&mut screen.bands);
    screen = Screen::new(width, 40);
    screen.bands = bands;
    screen.frame(&state);
    let bands = std::mem::take(&mut screen.bands);
    screen = Screen::new(width, height);
    screen.bands = bands;
    check(&mut screen, &state, 6);
}

/// The footer's hints are worked out once and kept while what they say holds: a node that
/// moves (the demo's samples) does not work them out again; a key that changes a hint (the
/// order, a pause) does, at once; a notice in their place is drawn each frame and the hints
/// come back worked out anew. The screen is the whole frame's every time. (A debug build also
/// works out each kept footer and compares.)
#[test]
fn the_footer_is_kept_while_its_hints_hold() {
    let (mut state, mut source) = demo(false);
    let (width, height) = (120, 40);
    let mut screen = Screen::new(width, height);
    let footer = height - 1..height;
    let frame = |screen: &mut Screen, state: &State| {
        let rows = screen.frame(state).expect("the main screen, band by band");
        assert_eq!(screen.shows(), &render(state, width, height));
        rows
    };
    frame(&mut screen, &state);
    assert_eq!(screen.bands.footer.worked_out, 1);
    for _ in 0..20 {
        state.on_sample(source.sample().expect("demo samples"));
        let rows = frame(&mut screen, &state);
        assert!(!rows.contains(&footer), "{rows:?}");
    }
    assert_eq!(
        screen.bands.footer.worked_out, 1,
        "kept while the node moved"
    );
    // The order's hint is short at this width (`s sort`): worked out, the same cells.
    for (key, worked, drawn) in [('s', 2, false), ('p', 3, true), ('p', 4, true)] {
        press(&mut state, KeyCode::Char(key));
        let rows = frame(&mut screen, &state);
        assert_eq!(rows.contains(&footer), drawn, "after {key}: {rows:?}");
        assert_eq!(screen.bands.footer.worked_out, worked, "after {key}");
    }
    state.notice = Some(crate::app::Notice {
        text: "a notice".into(),
        alert: false,
    });
    frame(&mut screen, &state);
    assert!(text(screen.shows()).contains("a notice"));
    assert_eq!(screen.bands.footer.worked_out, 4, "a notice is no hint");
    state.notice = None;
    let rows = frame(&mut screen, &state);
    assert!(rows.contains(&footer), "{rows:?}");
    assert_eq!(
        screen.bands.footer.worked_out, 5,
        "the hints again, worked out"
    );
}

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

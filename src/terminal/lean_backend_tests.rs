//! The lean backend's bytes: what each frame writes, against a terminal emulator that reads
//! them back, and the moves, pens and widths it keeps between frames.

use super::*;
use proptest::prelude::*;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::{Terminal, TerminalOptions, Viewport};

const W: u16 = 24;
const H: u16 = 5;

const SYMBOLS: [&str; 9] = ["a", "Z", " ", "7", "█", "▁", "─", "é", "中"];
const COLOURS: [Color; 8] = [
    Color::Reset,
    Color::Black,
    Color::Cyan,
    Color::LightRed,
    Color::DarkGray,
    Color::White,
    Color::Indexed(208),
    Color::Rgb(1, 2, 3),
];
const MODIFIERS: [Modifier; 5] = [
    Modifier::BOLD,
    Modifier::DIM,
    Modifier::ITALIC,
    Modifier::UNDERLINED,
    Modifier::REVERSED,
];

/// What the terminal emulator calls `color`.
fn seen(color: Color) -> vt100::Color {
    let index = |i: u8| vt100::Color::Idx(i);
    match color {
        Color::Reset => vt100::Color::Default,
        Color::Black => index(0),
        Color::Red => index(1),
        Color::Green => index(2),
        Color::Yellow => index(3),
        Color::Blue => index(4),
        Color::Magenta => index(5),
        Color::Cyan => index(6),
        Color::Gray => index(7),
        Color::DarkGray => index(8),
        Color::LightRed => index(9),
        Color::LightGreen => index(10),
        Color::LightYellow => index(11),
        Color::LightBlue => index(12),
        Color::LightMagenta => index(13),
        Color::LightCyan => index(14),
        Color::White => index(15),
        Color::Indexed(i) => index(i),
        Color::Rgb(r, g, b) => vt100::Color::Rgb(r, g, b),
    }
}

/// A frame: each cell's symbol, colours and modifiers, by index into the tables above.
fn frame() -> impl Strategy<Value = Vec<(usize, usize, usize, u8)>> {
    proptest::collection::vec(
        (
            0..SYMBOLS.len(),
            0..COLOURS.len(),
            0..COLOURS.len(),
            0u8..32,
        ),
        usize::from(W * H),
    )
}

fn buffer(cells: &[(usize, usize, usize, u8)]) -> Buffer {
    let mut buf = Buffer::empty(Rect::new(0, 0, W, H));
    let mut covered = None;
    for (i, &(symbol, fg, bg, mods)) in cells.iter().enumerate() {
        let (x, y) = (i as u16 % W, i as u16 / W);
        // The cell a wide character covers is its, as in any buffer ratatui draws.
        if covered == Some((x, y)) {
            continue;
        }
        if SYMBOLS[symbol] == "中" {
            covered = Some((x + 1, y));
        }
        let mut modifier = MODIFIERS
            .iter()
            .enumerate()
            .filter(|(bit, _)| mods & (1 << bit) != 0)
            .fold(Modifier::empty(), |m, (_, &add)| m | add);
        // The emulator keeps one intensity (and shows no dim): bold alone, where a terminal
        // may show both.
        if modifier.contains(Modifier::BOLD) {
            modifier.remove(Modifier::DIM);
        }
        let style = Style::default()
            .fg(COLOURS[fg])
            .bg(COLOURS[bg])
            .add_modifier(modifier);
        // A wide character that does not fit is left out, as ratatui leaves it.
        buf.set_stringn(x, y, SYMBOLS[symbol], usize::from(W - x), style);
    }
    buf
}

/// What a backend wrote, kept where the test can read it.
#[derive(Clone, Default)]
struct Tape(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl Write for Tape {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Tape {
    fn bytes(&self) -> Vec<u8> {
        self.0.borrow().clone()
    }
}

/// Draws `frames` one after another through `backend`, as the monitor does: the diff
/// against the previous frame, written.
fn draw_all<B: Backend>(backend: B, frames: &[Buffer])
where
    B::Error: std::fmt::Debug,
{
    let mut terminal = Terminal::with_options(
        backend,
        TerminalOptions {
            viewport: Viewport::Fixed(Rect::new(0, 0, W, H)),
        },
    )
    .expect("terminal");
    for frame in frames {
        terminal.current_buffer_mut().merge(frame);
        terminal.flush().expect("flush");
        terminal.swap_buffers();
    }
}

/// The bytes the lean backend writes for `frames`, knowing neither the screen's width
/// nor the terminal's mode (as before its size is first asked).
fn lean(frames: &[Buffer]) -> Vec<u8> {
    lean_with(frames, Moves::default())
}

/// The bytes the lean backend writes for `frames`, told what `moves` says.
fn lean_with(frames: &[Buffer], moves: Moves) -> Vec<u8> {
    let tape = Tape::default();
    let mut backend = LeanBackend::new(tape.clone());
    backend.width.set(moves.width);
    backend.set_line_feed_keeps_column(moves.line_feed_keeps_column);
    draw_all(backend, frames);
    tape.bytes()
}

/// What a backend may be told: nothing; the width; the width, and that a line feed keeps
/// the column (raw mode).
fn told(which: u8) -> Moves {
    Moves {
        width: (which > 0).then_some(W),
        line_feed_keeps_column: which > 1,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the frames, a terminal that reads the bytes shows the last frame: every
    /// cell's character, colours, and the modifiers the emulator knows.
    #[test]
    fn a_terminal_shows_the_last_frame(
        first in frame(),
        edits in proptest::collection::vec(
            proptest::collection::vec(
                (0..usize::from(W * H), (0..SYMBOLS.len(), 0..COLOURS.len(), 0..COLOURS.len(), 0u8..32)),
                0..12,
            ),
            0..4,
        ),
        which in 0u8..3,
    ) {
        // A first frame, then frames that change a few cells each (so runs of cells that
        // stay are skipped over, as on a monitor's screen).
        let mut cells = first;
        let mut frames = vec![buffer(&cells)];
        for edit in edits {
            for (at, cell) in edit {
                cells[at] = cell;
            }
            frames.push(buffer(&cells));
        }
        let bytes = lean_with(&frames, told(which));
        let mut parser = vt100::Parser::new(H, W, 0);
        parser.process(&bytes);
        let screen = parser.screen();
        let last = frames.last().expect("a frame");
        for y in 0..H {
            for x in 0..W {
                let want = &last[(x, y)];
                let got = screen.cell(y, x).expect("a cell");
                if got.is_wide_continuation() {
                    continue;
                }
                let at = format!("({x}, {y}) in {:?}", String::from_utf8_lossy(&bytes));
                // A blank the emulator never had written to reads as nothing.
                let contents = got.contents();
                let shown = if contents.is_empty() { " " } else { contents.as_str() };
                prop_assert_eq!(shown, want.symbol(), "{}", at);
                prop_assert_eq!(got.fgcolor(), seen(want.fg), "{}", at);
                prop_assert_eq!(got.bgcolor(), seen(want.bg), "{}", at);
                let m = want.modifier;
                prop_assert_eq!(got.bold(), m.contains(Modifier::BOLD), "{}", at);
                prop_assert_eq!(got.italic(), m.contains(Modifier::ITALIC), "{}", at);
                prop_assert_eq!(got.underline(), m.contains(Modifier::UNDERLINED), "{}", at);
                prop_assert_eq!(got.inverse(), m.contains(Modifier::REVERSED), "{}", at);
            }
        }
    }
}

/// A cell written over the first half of a wide character (a wide one, or a narrow one
/// with a background) leaves the terminal to blank its second half: it is blanked plain,
/// as the frame has it, not with the new cell's bold or background.
#[test]
fn a_wide_character_broken_leaves_a_plain_blank() {
    let row = |lead: usize, symbol: &str, style: Style| {
        let mut buf = Buffer::empty(Rect::new(0, 0, W, H));
        buf.set_string(0, 0, "a".repeat(lead), Style::default());
        buf.set_string(lead as u16, 0, symbol, style);
        buf
    };
    let bold_red = Style::default().bg(Color::Red).add_modifier(Modifier::BOLD);
    let wide = row(22, "中", Style::default());
    // Broken at once; or after a frame that changed only the column before it.
    let mut before = wide.clone();
    before.set_string(21, 0, "b", Style::default());
    let sequences = [
        vec![wide.clone(), row(21, "中", bold_red)],
        vec![wide.clone(), row(22, "a", bold_red)],
        vec![wide, before, row(21, "中", bold_red)],
    ];
    for frames in sequences {
        let bytes = lean(&frames);
        let mut parser = vt100::Parser::new(H, W, 0);
        parser.process(&bytes);
        let after = parser.screen().cell(0, 23).expect("a cell");
        assert_eq!(
            (after.contents().trim(), after.bgcolor(), after.bold()),
            ("", vt100::Color::Default, false),
            "{:?}",
            String::from_utf8_lossy(&bytes)
        );
    }
}

/// Figures changing down a column, as a monitor's do each sample: each row after the first
/// is reached from the one above by a carriage return and line feeds, or by a move down
/// the column, not by an absolute move; and the terminal shows the new frame.
#[test]
fn a_column_of_changes_is_reached_row_by_row() {
    let frame = |figures: [&str; 4]| {
        let mut buf = Buffer::empty(Rect::new(0, 0, W, H));
        for (row, figure) in figures.iter().enumerate() {
            buf.set_string(
                0,
                row as u16,
                format!("{figure} proc {row:>3}"),
                Style::default(),
            );
            buf.set_string(20, row as u16, *figure, Style::default());
        }
        buf
    };
    let frames = [frame(["1", "2", "3", "4"]), frame(["1", "5", "6", "4"])];
    let both = lean(&frames);
    let tick = &both[lean(&frames[..1]).len()..];
    assert_eq!(
        String::from_utf8_lossy(tick),
        "\x1b[2;1H5\x1b[19C5\r\n6\x1b[19C6"
    );
    let mut parser = vt100::Parser::new(H, W, 0);
    parser.process(&both);
    assert_eq!(
        parser.screen().contents_between(1, 0, 2, W),
        "5 proc   1          5\n6 proc   2          6"
    );
}

/// A frame leaves its last style set; a clear then erases with a plain pen (a terminal
/// erases with the background in use), and the next frame's first cell sets its own.
#[test]
fn a_clear_after_a_coloured_frame_leaves_plain_blanks() {
    let mut buf = Buffer::empty(Rect::new(0, 0, W, H));
    buf.set_string(0, 0, "header", Style::default().bg(Color::Cyan));
    let tape = Tape::default();
    let mut backend = LeanBackend::new(tape.clone());
    let cells = || {
        buf.content.iter().enumerate().map(|(i, cell)| {
            (
                (i % usize::from(W)) as u16,
                (i / usize::from(W)) as u16,
                cell,
            )
        })
    };
    // The whole frame (its last cell plain), then the header alone, which leaves the pen
    // coloured, then a clear: the screen is blank and plain before anything is drawn.
    backend.draw(cells()).expect("draw");
    backend.draw(cells().take(6)).expect("draw");
    backend.clear().expect("clear");
    let cleared = tape.bytes();
    let mut parser = vt100::Parser::new(H, W, 0);
    parser.process(&cleared);
    for y in 0..H {
        for x in 0..W {
            let cell = parser.screen().cell(y, x).expect("a cell");
            assert_eq!(
                (cell.contents().trim(), cell.bgcolor()),
                ("", vt100::Color::Default),
                "({x}, {y}) in {:?}",
                String::from_utf8_lossy(&cleared)
            );
        }
    }
    // The next frame sets its own style from the plain pen.
    backend.draw(cells()).expect("draw");
    parser.process(&tape.bytes()[cleared.len()..]);
    let header = parser.screen().cell(0, 0).expect("a cell");
    assert_eq!(
        (header.contents(), header.bgcolor()),
        ("h".to_string(), seen(Color::Cyan))
    );
    let after = parser.screen().cell(0, 6).expect("a cell");
    assert_eq!(after.bgcolor(), vt100::Color::Default);
}

/// Two-digit figures changing down a column, as a busy node's do each sample: each row
/// after the first is reached by a line feed and two backspaces where a line feed keeps
/// the column, by a move down and two backspaces where only the width is known, and by an
/// absolute move where nothing is (the seven bytes of `CR LF ESC[10C` save nothing); the
/// terminal shows the new frame each way.
#[test]
fn a_column_of_figures_is_reached_back_down_the_column() {
    let frame = |figures: [&str; 3]| {
        let mut buf = Buffer::empty(Rect::new(0, 0, W, H));
        for (row, figure) in figures.iter().enumerate() {
            buf.set_string(0, row as u16, format!("proc {row}"), Style::default());
            buf.set_string(10, row as u16, *figure, Style::default());
        }
        buf
    };
    let frames = [frame(["12", "34", "56"]), frame(["21", "43", "65"])];
    for (which, second, third) in [
        (0, "\x1b[2;11H", "\x1b[3;11H"),
        (1, "\x1b[B\x08\x08", "\x1b[B\x08\x08"),
        (2, "\n\x08\x08", "\n\x08\x08"),
    ] {
        let both = lean_with(&frames, told(which));
        let tick = &both[lean_with(&frames[..1], told(which)).len()..];
        assert_eq!(
            String::from_utf8_lossy(tick),
            format!("\x1b[1;11H21{second}43{third}65"),
            "told {which}"
        );
        let mut parser = vt100::Parser::new(H, W, 0);
        parser.process(&both);
        assert_eq!(
            parser.screen().contents_between(0, 0, 2, W),
            "proc 0    21\nproc 1    43\nproc 2    65",
            "told {which}"
        );
    }
}

/// A clock's second ticking on a coloured header, the change of a frame of a still node:
/// the move and the digit, the header's colours left set from the frame before; fewer
/// bytes than crossterm's backend writes for it.
#[test]
fn a_ticking_second_is_written_short() {
    let frame = |second: &str| {
        let mut buf = Buffer::empty(Rect::new(0, 0, W, H));
        let header = Style::default().fg(Color::Black).bg(Color::Cyan);
        buf.set_string(0, 0, format!("12:00:0{second} UTC"), header);
        buf.set_string(0, 2, "plain text", Style::default());
        buf
    };
    // The first tick leaves the header's colours set (the frame before ended plain).
    let frames = [frame("1"), frame("2"), frame("3")];
    let both = lean(&frames);
    let tape = Tape::default();
    draw_all(CrosstermBackend::new(tape.clone()), &frames);
    let crossterm = tape.bytes();
    let tick = &both[lean(&frames[..2]).len()..];
    assert_eq!(String::from_utf8_lossy(tick), "\x1b[1;8H3");
    let lean = both;
    assert!(
        lean.len() < crossterm.len(),
        "{} vs {}",
        lean.len(),
        crossterm.len()
    );
}

//! The terminal backend the monitor draws through: crossterm's, with the cells that changed
//! written in fewer bytes, for a monitor watched over a slow or metered SSH link.
//!
//! ratatui already writes only the cells that changed; crossterm's backend then spends, on
//! every frame, 16 bytes on a pair of palette colours (`ESC[38;5;0;48;5;6m`), 22 on putting
//! the style back (`ESC[39m ESC[49m ESC[59m ESC[0m`), and an absolute move before every run
//! of cells. Here the sixteen named colours take their short codes (`ESC[30;46m`), the style
//! of a frame's last cell is left set for the next frame (a clear puts the pen back to plain
//! first; the terminal's restore does too), and a move from a cursor known
//! (after a one-column cell) is a relative one where shorter: along the row (`ESC[5C`), back
//! along it (`BS`), down a column (`ESC[B`, or a line feed where raw mode leaves the column
//! alone). Everything else is crossterm's.

use ratatui::backend::{Backend, ClearType, CrosstermBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};
use ratatui::style::{Color, Modifier};
use std::io::{self, Write};

/// crossterm's backend, drawing changed cells in fewer bytes.
pub(crate) struct LeanBackend<W: Write> {
    inner: CrosstermBackend<W>,
    /// Where the wide characters written stand, by their first column: a cell written over
    /// half of one leaves the other half to the terminal, which blanks it with the pen in
    /// use (a bold, a background), where ratatui's buffer holds a plain blank.
    wide: std::collections::HashSet<(u16, u16)>,
    /// The screen's width, from the last size asked (ratatui asks before each frame).
    width: std::cell::Cell<Option<u16>>,
    /// A line feed moves down and keeps the column: the terminal's output translation is off.
    line_feed_keeps_column: bool,
    /// The style (and underline colour) the terminal's pen holds after what was written last:
    /// a frame starts from it, and leaves its last style set, so that a second ticking on
    /// a coloured header costs neither the colours again nor a reset. Not known (`None`) at
    /// first and after [`LeanBackend::forget_pen`]: the first cell then resets it.
    pen: Option<(Look, Color)>,
}

impl<W: Write> LeanBackend<W> {
    pub(crate) fn new(writer: W) -> Self {
        LeanBackend {
            inner: CrosstermBackend::new(writer),
            wide: std::collections::HashSet::new(),
            width: std::cell::Cell::new(None),
            line_feed_keeps_column: false,
            pen: None,
        }
    }

    /// Something else wrote to the terminal (a re-entry after a stop): its pen is not known.
    pub(crate) fn forget_pen(&mut self) {
        self.pen = None;
    }

    /// Puts the pen back to plain before a clear: a terminal erases with the background in
    /// use (back-colour erase), where ratatui's buffer holds plain blanks.
    fn plain_pen(&mut self) -> io::Result<()> {
        if self.pen != Some((PLAIN, Color::Reset)) {
            self.inner.write_all(super::PLAIN_PEN.as_bytes())?;
            self.pen = Some((PLAIN, Color::Reset));
        }
        Ok(())
    }

    /// Whether a line feed written keeps the cursor's column ([`super::line_feed_keeps_column`]
    /// says so of the terminal in raw mode): a move down a column of figures is then a line
    /// feed and a backspace or two.
    pub(crate) fn set_line_feed_keeps_column(&mut self, keeps: bool) {
        self.line_feed_keeps_column = keeps;
    }
}

/// A cell's look: what an SGR sequence sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Look {
    fg: Color,
    bg: Color,
    modifier: Modifier,
}

const PLAIN: Look = Look {
    fg: Color::Reset,
    bg: Color::Reset,
    modifier: Modifier::empty(),
};

/// The SGR parameter of a colour, as a foreground (`base` 30) or background (`base` 40).
fn colour(out: &mut Vec<String>, color: Color, base: u8) {
    let named = |n: u8| (base + n).to_string();
    let bright = |n: u8| (base + 60 + n).to_string();
    out.push(match color {
        Color::Reset => (base + 9).to_string(),
        Color::Black => named(0),
        Color::Red => named(1),
        Color::Green => named(2),
        Color::Yellow => named(3),
        Color::Blue => named(4),
        Color::Magenta => named(5),
        Color::Cyan => named(6),
        Color::Gray => named(7),
        Color::DarkGray => bright(0),
        Color::LightRed => bright(1),
        Color::LightGreen => bright(2),
        Color::LightYellow => bright(3),
        Color::LightBlue => bright(4),
        Color::LightMagenta => bright(5),
        Color::LightCyan => bright(6),
        Color::White => bright(7),
        Color::Indexed(i) => format!("{};5;{i}", base + 8),
        Color::Rgb(r, g, b) => format!("{};2;{r};{g};{b}", base + 8),
    });
}

/// The SGR codes that set each modifier, in ratatui's bit order.
const SET: [(Modifier, &str); 9] = [
    (Modifier::BOLD, "1"),
    (Modifier::DIM, "2"),
    (Modifier::ITALIC, "3"),
    (Modifier::UNDERLINED, "4"),
    (Modifier::SLOW_BLINK, "5"),
    (Modifier::RAPID_BLINK, "6"),
    (Modifier::REVERSED, "7"),
    (Modifier::HIDDEN, "8"),
    (Modifier::CROSSED_OUT, "9"),
];

/// The SGR parameters that take the terminal from `from` to `to`. Where a modifier is taken
/// away the sequence starts from `0` (everything off) and sets what `to` has: the codes that
/// clear one modifier clear others with it (`22` both bold and dim).
fn transition(from: Look, to: Look) -> Vec<String> {
    let mut out = Vec::new();
    let mut from = from;
    if !(from.modifier - to.modifier).is_empty() {
        out.push("0".to_string());
        from = PLAIN;
    }
    for (modifier, code) in SET {
        if to.modifier.contains(modifier) && !from.modifier.contains(modifier) {
            out.push(code.to_string());
        }
    }
    if to.fg != from.fg {
        colour(&mut out, to.fg, 30);
    }
    if to.bg != from.bg {
        colour(&mut out, to.bg, 40);
    }
    out
}

impl<W: Write> Backend for LeanBackend<W> {
    type Error = io::Error;

    fn draw<'a, I>(&mut self, content: I) -> io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        let mut bytes: Vec<u8> = Vec::new();
        let moves = Moves {
            width: self.width.get(),
            line_feed_keeps_column: self.line_feed_keeps_column,
        };
        let (mut look, mut underline, mut known) = match self.pen {
            Some((look, underline)) => (look, underline, true),
            None => (PLAIN, Color::Reset, false),
        };
        // Where the cursor stands after the last cell written: after a cell one column wide,
        // the next column, as ratatui lays the cells out (and as crossterm's backend takes
        // it); after any other, not known, and the next cell is reached by an absolute move.
        let mut cursor: Option<Position> = None;
        for (x, y, cell) in content {
            let symbol = cell.symbol();
            let narrow = unicode_width::UnicodeWidthStr::width(symbol) == 1;
            // A wide character starting here (a narrow cell breaks it) or in the next column
            // (a wide one breaks it): the next column is first written blank and plain, which
            // breaks it with the plain pen; the cell then covers or leaves that blank.
            let breaks =
                self.wide.contains(&(x, y)) || (!narrow && self.wide.contains(&(x + 1, y)));
            if !known {
                bytes.extend_from_slice(super::PLAIN_PEN.as_bytes());
                known = true;
            }
            if breaks {
                move_to(&mut bytes, cursor, x + 1, y, moves)?;
                if look != PLAIN || underline != Color::Reset {
                    bytes.extend_from_slice(super::PLAIN_PEN.as_bytes());
                    look = PLAIN;
                    underline = Color::Reset;
                }
                bytes.push(b' ');
                write!(bytes, "\x1b[2D")?;
                cursor = Some(Position { x, y });
            }
            // What this cell overwrites: a wide character starting here, one covering this
            // column from the one before, and, if the cell is wide, one starting next.
            self.wide.remove(&(x, y));
            if x > 0 {
                self.wide.remove(&(x - 1, y));
            }
            if !narrow {
                self.wide.remove(&(x + 1, y));
                self.wide.insert((x, y));
            }
            move_to(&mut bytes, cursor, x, y, moves)?;
            let next = Look {
                fg: cell.fg,
                bg: cell.bg,
                modifier: cell.modifier,
            };
            if next != look {
                let codes = transition(look, next);
                if !codes.is_empty() {
                    write!(bytes, "\x1b[{}m", codes.join(";"))?;
                }
                if codes.first().is_some_and(|c| c == "0") {
                    underline = Color::Reset;
                }
                look = next;
            }
            if cell.underline_color != underline {
                crossterm::queue!(
                    bytes,
                    crossterm::style::SetUnderlineColor(underline_colour(cell.underline_color))
                )?;
                underline = cell.underline_color;
            }
            bytes.extend_from_slice(symbol.as_bytes());
            cursor = narrow.then(|| Position { x: x + 1, y });
        }
        if known {
            self.pen = Some((look, underline));
        }
        self.inner.write_all(&bytes)
    }

    fn hide_cursor(&mut self) -> io::Result<()> {
        self.inner.hide_cursor()
    }

    fn show_cursor(&mut self) -> io::Result<()> {
        self.inner.show_cursor()
    }

    fn get_cursor_position(&mut self) -> io::Result<Position> {
        self.inner.get_cursor_position()
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> io::Result<()> {
        self.inner.set_cursor_position(position)
    }

    fn clear(&mut self) -> io::Result<()> {
        self.wide.clear();
        self.plain_pen()?;
        self.inner.clear()
    }

    fn clear_region(&mut self, clear_type: ClearType) -> io::Result<()> {
        self.wide.clear();
        self.plain_pen()?;
        self.inner.clear_region(clear_type)
    }

    fn append_lines(&mut self, n: u16) -> io::Result<()> {
        self.plain_pen()?;
        self.inner.append_lines(n)
    }

    fn size(&self) -> io::Result<Size> {
        let size = self.inner.size()?;
        self.width.set(Some(size.width));
        Ok(size)
    }

    fn window_size(&mut self) -> io::Result<WindowSize> {
        self.inner.window_size()
    }

    fn flush(&mut self) -> io::Result<()> {
        Backend::flush(&mut self.inner)
    }
}

/// What a relative move may rely on besides the cursor: the screen's width (from the last
/// size asked), and whether a line feed keeps the column (the terminal's output translation
/// off, as raw mode leaves it).
#[derive(Debug, Clone, Copy, Default)]
struct Moves {
    width: Option<u16>,
    line_feed_keeps_column: bool,
}

/// Moves from `cursor` (where known) to column `x` of row `y` in the fewest bytes: nowhere if
/// there already; along the row (`ESC[nC`), or back along it (`BS`s, `ESC[nD`); down a
/// column (`ESC[nB`), then along or back; to the row's start (`CR`), down by line feeds and
/// along; down by line feeds alone, then along or back, where a line feed keeps the column;
/// else an absolute move (`ESC[row;colH`). A monitor's changes run down a column of
/// figures, where `LF BS BS` (3 bytes), `ESC[B BS BS` (5) or `CR LF ESC[30C` (7) takes the
/// place of `ESC[14;31H` (8).
///
/// After a cell in the last column the terminal's cursor stays on it, a wrap pending, where
/// `cursor` says the column after it: no move starts from that column but a carriage
/// return (which clears the wrap), a move down in a column (no target is in that column) or
/// an absolute one; the moves that keep the column and go back along the row (which would
/// be one short) are made only from a column known to be on the screen. A line feed moves
/// down only from a row above the target, never from the last, so it never scrolls; with
/// the terminal's output translation on, it returns the carriage too, after the `CR` that
/// already did, and is not used to keep the column.
fn move_to(
    bytes: &mut Vec<u8>,
    cursor: Option<Position>,
    x: u16,
    y: u16,
    moves: Moves,
) -> io::Result<()> {
    let along = |out: &mut Vec<u8>, n: u16| match n {
        0 => {}
        1 => out.extend_from_slice(b"\x1b[C"),
        _ => out.extend_from_slice(format!("\x1b[{n}C").as_bytes()),
    };
    // From column `from` to `x` on the same row, by the shorter of `BS`s and `ESC[nD`.
    let across = |out: &mut Vec<u8>, from: u16| {
        if from <= x {
            along(out, x - from);
        } else {
            let n = from - x;
            match n {
                1..=3 => out.extend(std::iter::repeat_n(b'\x08', usize::from(n))),
                _ => out.extend_from_slice(format!("\x1b[{n}D").as_bytes()),
            }
        }
    };
    let on_screen = |at: Position| moves.width.is_some_and(|width| at.x < width);
    let mut best = format!("\x1b[{};{}H", y + 1, x + 1).into_bytes();
    let mut consider = |candidate: Vec<u8>| {
        if candidate.len() < best.len() {
            best = candidate;
        }
    };
    match cursor {
        Some(at) if at.y == y && at.x == x => return Ok(()),
        Some(at) if at.y == y && at.x < x => {
            let mut c = Vec::new();
            along(&mut c, x - at.x);
            consider(c);
        }
        Some(at) if at.y == y => {
            let mut c = b"\r".to_vec();
            along(&mut c, x);
            consider(c);
            if on_screen(at) {
                let mut c = Vec::new();
                across(&mut c, at.x);
                consider(c);
            }
        }
        Some(at) if at.y < y => {
            let down = y - at.y;
            let mut c = match down {
                1 => b"\x1b[B".to_vec(),
                _ => format!("\x1b[{down}B").into_bytes(),
            };
            if at.x == x {
                consider(c);
            } else if on_screen(at) {
                across(&mut c, at.x);
                consider(c);
            }
            if moves.line_feed_keeps_column && on_screen(at) {
                let mut c = vec![b'\n'; usize::from(down)];
                across(&mut c, at.x);
                consider(c);
            }
            let mut c = b"\r".to_vec();
            c.extend(std::iter::repeat_n(b'\n', usize::from(down)));
            along(&mut c, x);
            consider(c);
        }
        _ => {}
    }
    bytes.extend_from_slice(&best);
    Ok(())
}

/// An underline colour as crossterm names it.
fn underline_colour(color: Color) -> crossterm::style::Color {
    use crossterm::style::Color as C;
    match color {
        Color::Reset => C::Reset,
        Color::Black => C::Black,
        Color::Red => C::DarkRed,
        Color::Green => C::DarkGreen,
        Color::Yellow => C::DarkYellow,
        Color::Blue => C::DarkBlue,
        Color::Magenta => C::DarkMagenta,
        Color::Cyan => C::DarkCyan,
        Color::Gray => C::Grey,
        Color::DarkGray => C::DarkGrey,
        Color::LightRed => C::Red,
        Color::LightGreen => C::Green,
        Color::LightYellow => C::Yellow,
        Color::LightBlue => C::Blue,
        Color::LightMagenta => C::Magenta,
        Color::LightCyan => C::Cyan,
        Color::White => C::White,
        Color::Indexed(i) => C::AnsiValue(i),
        Color::Rgb(r, g, b) => C::Rgb { r, g, b },
    }
}

#[cfg(test)]
mod tests {
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
}

//! The terminal backend the monitor draws through: crossterm's, with the cells that changed
//! written in fewer bytes, for a monitor watched over a slow or metered SSH link.
//!
//! ratatui already writes only the cells that changed; crossterm's backend then spends, on
//! every frame, 16 bytes on a pair of palette colours (`ESC[38;5;0;48;5;6m`), 22 on putting
//! the style back (`ESC[39m ESC[49m ESC[59m ESC[0m`), and an absolute move before every run
//! of cells. Here the sixteen named colours take their short codes (`ESC[30;46m`), a style
//! is put back with one `ESC[0m` and only when one was set, and a move along the same row
//! after a one-column cell is a relative one (`ESC[5C`). Everything else is crossterm's.

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
}

impl<W: Write> LeanBackend<W> {
    pub(crate) fn new(writer: W) -> Self {
        LeanBackend {
            inner: CrosstermBackend::new(writer),
            wide: std::collections::HashSet::new(),
        }
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
        let mut look = PLAIN;
        let mut underline = Color::Reset;
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
            if breaks {
                move_to(&mut bytes, cursor, x + 1, y)?;
                if look != PLAIN || underline != Color::Reset {
                    bytes.extend_from_slice(b"\x1b[0m");
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
            move_to(&mut bytes, cursor, x, y)?;
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
        if look != PLAIN || underline != Color::Reset {
            bytes.extend_from_slice(b"\x1b[0m");
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
        self.inner.clear()
    }

    fn clear_region(&mut self, clear_type: ClearType) -> io::Result<()> {
        self.wide.clear();
        self.inner.clear_region(clear_type)
    }

    fn append_lines(&mut self, n: u16) -> io::Result<()> {
        self.inner.append_lines(n)
    }

    fn size(&self) -> io::Result<Size> {
        self.inner.size()
    }

    fn window_size(&mut self) -> io::Result<WindowSize> {
        self.inner.window_size()
    }

    fn flush(&mut self) -> io::Result<()> {
        Backend::flush(&mut self.inner)
    }
}

/// Moves from `cursor` (where known) to column `x` of row `y` in the fewest bytes: nowhere if
/// there already; along the row (`ESC[nC`); down a column (`ESC[nB`); to the row's start
/// (`CR`), down by line feeds and along; else an absolute move (`ESC[row;colH`). A monitor's
/// changes run down a column of figures, where `CR LF ESC[30C` (7 bytes) or `ESC[B` (3)
/// takes the place of `ESC[14;31H` (8).
///
/// After a cell in the last column the terminal's cursor stays on it, a wrap pending, where
/// `cursor` says the column after it: no move starts from that column but a carriage
/// return (which clears the wrap), a move down in a column (no target is in that column) or
/// an absolute one. A line feed moves down only from a row above the target, never from
/// the last, so it never scrolls; with the terminal's output translation on, it returns
/// the carriage too, after the `CR` that already did.
fn move_to(bytes: &mut Vec<u8>, cursor: Option<Position>, x: u16, y: u16) -> io::Result<()> {
    let along = |out: &mut Vec<u8>, n: u16| match n {
        0 => {}
        1 => out.extend_from_slice(b"\x1b[C"),
        _ => out.extend_from_slice(format!("\x1b[{n}C").as_bytes()),
    };
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
        }
        Some(at) if at.y < y => {
            let down = y - at.y;
            if at.x == x {
                consider(match down {
                    1 => b"\x1b[B".to_vec(),
                    _ => format!("\x1b[{down}B").into_bytes(),
                });
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

    /// The bytes the lean backend writes for `frames`.
    fn lean(frames: &[Buffer]) -> Vec<u8> {
        let tape = Tape::default();
        draw_all(LeanBackend::new(tape.clone()), frames);
        tape.bytes()
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
            let bytes = lean(&frames);
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

    /// A clock's second ticking on a coloured header, the change of a frame of a still node:
    /// fewer bytes than crossterm's backend writes for it, and no style left set after it.
    #[test]
    fn a_ticking_second_is_written_short() {
        let frame = |second: &str| {
            let mut buf = Buffer::empty(Rect::new(0, 0, W, H));
            let header = Style::default().fg(Color::Black).bg(Color::Cyan);
            buf.set_string(0, 0, format!("12:00:0{second} UTC"), header);
            buf.set_string(0, 2, "plain text", Style::default());
            buf
        };
        let frames = [frame("1"), frame("2")];
        let both = lean(&frames);
        let tape = Tape::default();
        draw_all(CrosstermBackend::new(tape.clone()), &frames);
        let crossterm = tape.bytes();
        let tick = &both[lean(&frames[..1]).len()..];
        assert_eq!(
            String::from_utf8_lossy(tick),
            "\x1b[1;8H\x1b[30;46m2\x1b[0m"
        );
        let lean = both;
        assert!(
            lean.len() < crossterm.len(),
            "{} vs {}",
            lean.len(),
            crossterm.len()
        );
    }
}

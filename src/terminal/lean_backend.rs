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
#[path = "lean_backend_tests.rs"]
mod tests;

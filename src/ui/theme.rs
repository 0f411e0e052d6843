//! Colours and glyphs: a dark and a light palette, a monochrome mode (`NO_COLOR`) where
//! glyphs alone carry the meaning, and an ASCII mode for terminals and fonts without block,
//! braille or box-drawing characters.
//!
//! The layers' colours are xterm-256 indexed colours from the 6×6×6 cube and the grey ramp
//! (16–255), whose RGB values every xterm-compatible terminal shares, unlike the 16 named
//! colours, which each terminal's scheme redefines. Each is at least 3:1 (WCAG's contrast for
//! graphics) against black in the dark palette and against white in the light one; the tests
//! below compute it.

pub(crate) use crate::config::Palette;
use crate::detect::Severity;
use crate::layers::Layer;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::border;
use std::borrow::Cow;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Theme {
    pub(crate) mono: bool,
    pub(crate) palette: Palette,
    /// Draw with ASCII only: see [`Theme::layer_glyph`], [`Theme::ticks`],
    /// [`Theme::border_set`], [`Theme::glyph`] and, last, [`to_ascii`].
    pub(crate) ascii: bool,
}

/// xterm-256 indices of the layers' colours, in [`Layer::ALL`]'s order: on black, on white.
const LAYER_COLOURS: [(u8, u8); 8] = [
    (77, 28),   // live: green #5fd75f / #008700
    (203, 160), // fragmented: red #ff5f5f / #d70000
    (75, 25),   // cached: blue #5fafff / #005faf
    (220, 130), // outside_pool: yellow #ffd700 / brown #af5f00
    (170, 127), // context: magenta #d75fd7 / #af00af
    (44, 30),   // unattributed: cyan #00d7d7 / #008787
    (250, 239), // other: grey #bcbcbc / #4e4e4e
    (244, 243), // free: grey #808080 / #767676
];

/// The named glyphs drawing code asks the theme for, each with its ASCII form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Glyph {
    /// `…` / `...`: text cut short.
    Ellipsis,
    /// `●` / `*`: a live or selected mark.
    Filled,
    /// `◌` / `o`: an empty or pending mark.
    Hollow,
    /// `↑` / `^`.
    Up,
    /// `↓` / `v`.
    Down,
    /// `≥` / `>=`: a lower bound.
    AtLeast,
    /// `≤` / `<=`: an upper bound.
    AtMost,
    /// `°` / (nothing): degrees, as in `64°C` / `64C`.
    Degree,
    /// `·` / `.`: a separator between items.
    Dot,
    /// `│` / `|`: a column rule.
    Rule,
    /// `→` / `->`.
    Arrow,
    /// `⏎` / `Enter`.
    Enter,
}

impl Glyph {
    const fn forms(self) -> (&'static str, &'static str) {
        match self {
            Glyph::Ellipsis => ("…", "..."),
            Glyph::Filled => ("●", "*"),
            Glyph::Hollow => ("◌", "o"),
            Glyph::Up => ("↑", "^"),
            Glyph::Down => ("↓", "v"),
            Glyph::AtLeast => ("≥", ">="),
            Glyph::AtMost => ("≤", "<="),
            Glyph::Degree => ("°", ""),
            Glyph::Dot => ("·", "."),
            Glyph::Rule => ("│", "|"),
            Glyph::Arrow => ("→", "->"),
            Glyph::Enter => ("⏎", "Enter"),
        }
    }
}

/// Every named glyph, for [`Theme::text`].
const GLYPHS: [Glyph; 12] = [
    Glyph::Ellipsis,
    Glyph::Filled,
    Glyph::Hollow,
    Glyph::Up,
    Glyph::Down,
    Glyph::AtLeast,
    Glyph::AtMost,
    Glyph::Degree,
    Glyph::Dot,
    Glyph::Rule,
    Glyph::Arrow,
    Glyph::Enter,
];

/// The eight levels of a sparkline, lowest first.
const TICKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
const ASCII_TICKS: [char; 8] = ['_', '.', ',', '-', '~', '=', '*', '#'];

/// Box borders of `+`, `-` and `|`.
pub(crate) const ASCII_BORDER: border::Set<'static> = border::Set {
    top_left: "+",
    top_right: "+",
    bottom_left: "+",
    bottom_right: "+",
    vertical_left: "|",
    vertical_right: "|",
    horizontal_top: "-",
    horizontal_bottom: "-",
};

impl Theme {
    fn pick(self, style: Style) -> Style {
        if self.mono {
            // Keep emphasis (bold, reverse), drop colour.
            Style {
                fg: None,
                bg: None,
                ..style
            }
        } else {
            style
        }
    }

    fn light(self) -> bool {
        self.palette == Palette::Light
    }

    /// `dark` on a dark background, `light` on a light one.
    fn either(self, dark: Color, light: Color) -> Color {
        if self.light() {
            light
        } else {
            dark
        }
    }

    /// The layer's colour as an xterm-256 index, for this palette.
    pub(crate) fn layer_index(self, layer: Layer) -> u8 {
        let (dark, light) = LAYER_COLOURS[layer as usize];
        if self.light() {
            light
        } else {
            dark
        }
    }

    pub(crate) fn layer(self, layer: Layer) -> Style {
        self.pick(Style::new().fg(Color::Indexed(self.layer_index(layer))))
    }

    /// The layer's glyph: its block or shade, or in ASCII mode its ASCII mark.
    pub(crate) fn layer_glyph(self, layer: Layer) -> char {
        if self.ascii {
            layer.ascii_glyph()
        } else {
            layer.glyph()
        }
    }

    /// A sparkline's eight levels, lowest first.
    pub(crate) fn ticks(self) -> &'static [char; 8] {
        if self.ascii {
            &ASCII_TICKS
        } else {
            &TICKS
        }
    }

    /// The border of a box: ratatui's plain lines, or `+-|`.
    pub(crate) fn border_set(self) -> border::Set<'static> {
        if self.ascii {
            ASCII_BORDER
        } else {
            border::PLAIN
        }
    }

    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the screen's drawing asks for it once the ASCII switch is wired"
        )
    )]
    pub(crate) fn glyph(self, glyph: Glyph) -> &'static str {
        let (fancy, plain) = glyph.forms();
        if self.ascii {
            plain
        } else {
            fancy
        }
    }

    /// `text` as this theme draws it: in ASCII mode every glyph in its ASCII form and any
    /// other character outside ASCII (a CJK command line, an emoji) as `?`.
    pub(crate) fn text<'a>(self, text: &'a str) -> Cow<'a, str> {
        if !self.ascii || text.is_ascii() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            match GLYPHS.iter().find(|g| g.forms().0.starts_with(c)) {
                Some(glyph) => out.push_str(glyph.forms().1),
                None => out.push(ascii_char(c).unwrap_or('?')),
            }
        }
        Cow::Owned(out)
    }

    /// Values that are not current: a lost GPU's last reading, a stale feed.
    pub(crate) fn stale(self) -> Style {
        self.pick(
            Style::new()
                .fg(self.either(Color::DarkGray, Color::Indexed(245)))
                .add_modifier(Modifier::DIM),
        )
    }

    pub(crate) fn dim(self) -> Style {
        self.pick(Style::new().fg(self.either(Color::DarkGray, Color::Indexed(244))))
    }

    pub(crate) fn title(self) -> Style {
        self.pick(
            Style::new()
                .fg(self.either(Color::White, Color::Indexed(16)))
                .add_modifier(Modifier::BOLD),
        )
    }

    pub(crate) fn header_bar(self) -> Style {
        self.pick(Style::new().fg(Color::Black).bg(Color::Cyan))
    }

    pub(crate) fn table_header(self) -> Style {
        self.pick(
            Style::new()
                .fg(self.either(Color::Cyan, Color::Indexed(24)))
                .add_modifier(Modifier::BOLD),
        )
    }

    pub(crate) fn selected(self) -> Style {
        self.pick(Style::new().add_modifier(Modifier::REVERSED))
    }

    pub(crate) fn focused_border(self) -> Style {
        self.pick(Style::new().fg(self.either(Color::Cyan, Color::Indexed(24))))
    }

    pub(crate) fn border(self) -> Style {
        self.pick(Style::new().fg(self.either(Color::DarkGray, Color::Indexed(246))))
    }

    pub(crate) fn alert(self) -> Style {
        self.pick(
            Style::new()
                .fg(self.either(Color::LightRed, Color::Indexed(160)))
                .add_modifier(Modifier::BOLD),
        )
    }

    pub(crate) fn severity(self, severity: Severity) -> Style {
        let style = match severity {
            Severity::Critical => self.alert(),
            Severity::Warning => Style::new().fg(self.either(Color::Yellow, Color::Indexed(130))),
            Severity::Info => Style::new().fg(self.either(Color::Cyan, Color::Indexed(24))),
        };
        self.pick(style)
    }
}

/// The ASCII form of a glyph strata draws with (a layer's block or shade, a sparkline's
/// level, a box-drawing line, a braille dot, an arrow or a mark); `None` for a character that
/// is no glyph (a letter of another script, an emoji). ASCII is itself.
pub(crate) fn ascii_char(c: char) -> Option<char> {
    if c.is_ascii() {
        return Some(c);
    }
    if let Some(layer) = Layer::ALL.into_iter().find(|l| l.glyph() == c) {
        return Some(layer.ascii_glyph());
    }
    if let Some(level) = TICKS.iter().position(|&t| t == c) {
        return Some(ASCII_TICKS[level]);
    }
    let mapped = match c {
        '…' => '~',
        '●' | '•' | '⟳' => '*',
        '◌' | '○' | '°' => 'o',
        '↑' | '▲' => '^',
        '↓' | '▼' => 'v',
        '≥' | '→' | '›' | '⏎' => '>',
        '≤' | '←' | '‹' => '<',
        '✓' | '±' => '+',
        '✗' => 'x',
        '‖' => '|',
        '\u{a0}' => ' ',
        // Box drawing: straight lines as themselves, every corner and junction as `+`.
        '─' | '━' | '┄' | '┅' | '┈' | '┉' | '╌' | '╍' | '═' => '-',
        '│' | '┃' | '┆' | '┇' | '┊' | '┋' | '╎' | '╏' | '║' => '|',
        '\u{2500}'..='\u{257f}' => '+',
        // Any other block element or shade.
        '\u{2580}'..='\u{259f}' => '#',
        // Braille (ratatui's charts and canvases): a blank cell stays blank.
        '\u{2800}' => ' ',
        '\u{2801}'..='\u{28ff}' => ':',
        _ => return None,
    };
    Some(mapped)
}

/// Rewrites every cell of `buffer` in ASCII ([`ascii_char`]; `?` for a character that is no
/// glyph): the last pass of a frame drawn in ASCII mode, so that no cell escapes it.
pub(crate) fn to_ascii(buffer: &mut Buffer) {
    to_ascii_in(buffer, buffer.area);
}

/// [`to_ascii`] in `area` of the buffer only (a band drawn again).
pub(crate) fn to_ascii_in(buffer: &mut Buffer, area: Rect) {
    let area = area.intersection(buffer.area);
    for y in area.top()..area.bottom() {
        for x in area.left()..area.right() {
            let cell = &mut buffer[(x, y)];
            let symbol = cell.symbol();
            if symbol.is_ascii() {
                continue;
            }
            let ascii: String = symbol
                .chars()
                .filter(|c| !is_combining(*c))
                .map(|c| ascii_char(c).unwrap_or('?'))
                .take(1)
                .collect();
            cell.set_symbol(if ascii.is_empty() { " " } else { &ascii });
        }
    }
}

/// A mark that joins the character before it (an accent, a variation selector, a joiner).
fn is_combining(c: char) -> bool {
    matches!(c, '\u{300}'..='\u{36f}' | '\u{fe00}'..='\u{fe0f}' | '\u{200d}')
}

#[cfg(test)]
#[path = "theme_tests.rs"]
mod tests;

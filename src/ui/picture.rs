//! The README's pictures (`assets/screens/`): the monitor on the demo, rendered into
//! ratatui's `TestBackend` as the screen tests render it, and written out as SVG with its
//! colours. The test fails when a checked-in picture is not what the code draws now;
//! `STRATA_UPDATE_PICTURES=1 cargo test --lib picture` writes them again.

use super::tests::{demo_state, render};
use crate::app::{Action, Focus, State};
use crate::detect::FindingKind;
use ratatui::buffer::{Buffer, Cell};
use ratatui::style::{Color, Modifier};
use std::fmt::Write as _;
use std::path::PathBuf;
use unicode_width::UnicodeWidthStr;

/// A cell's width and a row's height in the SVG, in pixels (a 14 px monospace font).
const CELL_W: f64 = 8.4;
const ROW_H: f64 = 18.0;
/// The terminal's own colours where the screen says `Reset`: a dark terminal.
const DEFAULT_FG: &str = "#d4d4d4";
const DEFAULT_BG: &str = "#1c1c1c";
/// Drawn as a rectangle, not a glyph.
const FULL_BLOCK: &str = "█";

/// The terminal's 16 colours (those of a common dark theme) in `Color`'s order.
fn named(color: Color) -> Option<&'static str> {
    Some(match color {
        Color::Black => "#1c1c1c",
        Color::Red => "#cd3131",
        Color::Green => "#23b35a",
        Color::Yellow => "#d7ba1d",
        Color::Blue => "#3b78ff",
        Color::Magenta => "#c55ec5",
        Color::Cyan => "#29b8db",
        Color::Gray => "#b4b4b4",
        Color::DarkGray => "#767676",
        Color::LightRed => "#f14c4c",
        Color::LightGreen => "#5fd787",
        Color::LightYellow => "#f5f543",
        Color::LightBlue => "#6aa0ff",
        Color::LightMagenta => "#d670d6",
        Color::LightCyan => "#67d8ef",
        Color::White => "#f2f2f2",
        _ => return None,
    })
}

/// How many eighths of its cell a lower block (`▁` to `▇`) fills.
fn lower_block(symbol: &str) -> Option<u8> {
    let mut chars = symbol.chars();
    match (chars.next(), chars.next()) {
        (Some(c @ '▁'..='▇'), None) => u8::try_from(u32::from(c) - 0x2580).ok(),
        _ => None,
    }
}

/// A colour as `#rrggbb`; `None` for the terminal's default.
fn hex(color: Color) -> Option<String> {
    const BASE: [Color; 16] = [
        Color::Black,
        Color::Red,
        Color::Green,
        Color::Yellow,
        Color::Blue,
        Color::Magenta,
        Color::Cyan,
        Color::Gray,
        Color::DarkGray,
        Color::LightRed,
        Color::LightGreen,
        Color::LightYellow,
        Color::LightBlue,
        Color::LightMagenta,
        Color::LightCyan,
        Color::White,
    ];
    match color {
        Color::Reset => None,
        Color::Rgb(r, g, b) => Some(format!("#{r:02x}{g:02x}{b:02x}")),
        Color::Indexed(i) if i < 16 => named(BASE[usize::from(i)]).map(str::to_string),
        Color::Indexed(i) if i < 232 => {
            // The 6×6×6 cube of the xterm palette.
            let level = |v: u8| if v == 0 { 0 } else { 55 + 40 * v };
            let i = i - 16;
            let (r, g, b) = (level(i / 36), level(i / 6 % 6), level(i % 6));
            Some(format!("#{r:02x}{g:02x}{b:02x}"))
        }
        Color::Indexed(i) => {
            let v = 8 + 10 * (i - 232);
            Some(format!("#{v:02x}{v:02x}{v:02x}"))
        }
        other => named(other).map(str::to_string),
    }
}

/// How one cell is drawn: its foreground, background and emphasis, reverse applied.
#[derive(Clone, PartialEq, Eq)]
struct Look {
    fg: String,
    bg: String,
    bold: bool,
    dim: bool,
    italic: bool,
    underline: bool,
}

fn look(cell: &Cell) -> Look {
    let mut fg = hex(cell.fg).unwrap_or_else(|| DEFAULT_FG.to_string());
    let mut bg = hex(cell.bg).unwrap_or_else(|| DEFAULT_BG.to_string());
    if cell.modifier.contains(Modifier::REVERSED) {
        std::mem::swap(&mut fg, &mut bg);
    }
    Look {
        fg,
        bg,
        bold: cell.modifier.contains(Modifier::BOLD),
        dim: cell.modifier.contains(Modifier::DIM),
        italic: cell.modifier.contains(Modifier::ITALIC),
        underline: cell.modifier.contains(Modifier::UNDERLINED),
    }
}

impl Look {
    /// Two looks draw a glyph alike (the background is drawn apart).
    fn same_ink(&self, other: &Look) -> bool {
        (&self.fg, self.bold, self.dim, self.italic, self.underline)
            == (
                &other.fg,
                other.bold,
                other.dim,
                other.italic,
                other.underline,
            )
    }
}

/// Interns the styles used, as CSS classes, so that each run names one short class.
#[derive(Default)]
struct Classes(Vec<String>);

impl Classes {
    fn of(&mut self, css: String) -> usize {
        match self.0.iter().position(|c| *c == css) {
            Some(i) => i,
            None => {
                self.0.push(css);
                self.0.len() - 1
            }
        }
    }
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// A number of pixels, short: at most one decimal.
fn px(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// The buffer as an SVG: a rectangle per run of one background (a full block `█` is its
/// foreground's; runs of the same place and width on consecutive rows merged), a `<text>`
/// per row and a `<tspan>` per run of cells drawn alike; blank cells are spaces inside a
/// run, or nothing.
pub(super) fn svg(buffer: &Buffer, title: &str) -> String {
    let area = buffer.area;
    let (w, h) = (
        f64::from(area.width) * CELL_W,
        f64::from(area.height) * ROW_H,
    );
    let mut classes = Classes::default();
    // A wide character's second cell is blank in the buffer: it takes the first's look,
    // and is `hidden`, drawn by the character before it.
    let mut hidden = vec![vec![false; usize::from(area.width)]; usize::from(area.height)];
    let looks: Vec<Vec<Look>> = (0..area.height)
        .map(|y| {
            let mut row: Vec<Look> = Vec::with_capacity(usize::from(area.width));
            let mut covered = 0usize;
            for x in 0..area.width {
                if covered > 0 {
                    covered -= 1;
                    hidden[usize::from(y)][usize::from(x)] = true;
                    let before = row.last().cloned().unwrap_or_else(|| look(&buffer[(x, y)]));
                    row.push(before);
                    continue;
                }
                let cell = &buffer[(x, y)];
                covered = cell.symbol().width().saturating_sub(1);
                let mut here = look(cell);
                if cell.symbol() == FULL_BLOCK {
                    // A full block is drawn as its cell's rectangle: bars and charts stay
                    // solid whatever the font's line height.
                    here.bg = here.fg.clone();
                }
                row.push(here);
            }
            row
        })
        .collect();

    // Backgrounds: per row, runs of one colour other than the default; then merged down.
    let mut rects: Vec<(u16, u16, u16, u16, String)> = Vec::new(); // x, y, width, height, colour
    for (y, row) in (0u16..).zip(&looks) {
        let mut x = 0u16;
        while usize::from(x) < row.len() {
            let bg = &row[usize::from(x)].bg;
            let mut end = x + 1;
            while usize::from(end) < row.len() && row[usize::from(end)].bg == *bg {
                end += 1;
            }
            if bg != DEFAULT_BG {
                let below = rects
                    .iter_mut()
                    .find(|r| r.0 == x && r.2 == end - x && r.1 + r.3 == y && r.4 == *bg);
                match below {
                    Some(r) => r.3 += 1,
                    None => rects.push((x, y, end - x, 1, bg.clone())),
                }
            }
            x = end;
        }
    }

    let mut body = String::new();
    for (x, y, width, height, colour) in &rects {
        let class = classes.of(format!("fill:{colour}"));
        let _ = writeln!(
            body,
            r#"<rect x="{}" y="{}" width="{}" height="{}" class="c{class}"/>"#,
            px(f64::from(*x) * CELL_W),
            px(f64::from(*y) * ROW_H),
            px(f64::from(*width) * CELL_W),
            px(f64::from(*height) * ROW_H),
        );
    }

    // Lower blocks (`▁` to `▇`, a chart's tops) as rectangles of their height, from the
    // cell's foot: a glyph would leave a seam under it where the font's line is shorter.
    for (y, row) in (0u16..).zip(&looks) {
        let mut x = 0u16;
        while x < area.width {
            let Some(eighths) = lower_block(buffer[(x, y)].symbol()) else {
                x += 1;
                continue;
            };
            let fg = &row[usize::from(x)].fg;
            let mut end = x + 1;
            while end < area.width
                && lower_block(buffer[(end, y)].symbol()) == Some(eighths)
                && row[usize::from(end)].fg == *fg
            {
                end += 1;
            }
            let class = classes.of(format!("fill:{fg}"));
            let height = ROW_H * f64::from(eighths) / 8.0;
            let _ = writeln!(
                body,
                r#"<rect x="{}" y="{}" width="{}" height="{}" class="c{class}"/>"#,
                px(f64::from(x) * CELL_W),
                px(f64::from(y + 1) * ROW_H - height),
                px(f64::from(end - x) * CELL_W),
                px(height),
            );
            x = end;
        }
    }

    for (y, row) in (0u16..).zip(&looks) {
        // Runs of cells drawn alike; a blank cell joins the run it is in.
        let mut spans: Vec<(u16, u16, String, Look)> = Vec::new(); // start, cells, text, look
        for x in 0..area.width {
            let symbol = buffer[(x, y)].symbol();
            if hidden[usize::from(y)][usize::from(x)] || symbol.is_empty() {
                // The second half of a wide character: its width is the cell before's.
                if let Some(last) = spans.last_mut() {
                    last.1 += 1;
                }
                continue;
            }
            let blank = symbol == " " || symbol == FULL_BLOCK || lower_block(symbol).is_some();
            let here = &row[usize::from(x)];
            match spans.last_mut() {
                Some(last) if last.0 + last.1 == x && (blank || last.3.same_ink(here)) => {
                    last.1 += 1;
                    last.2.push_str(if blank { " " } else { symbol });
                }
                _ if blank => {}
                _ => spans.push((x, 1, symbol.to_string(), here.clone())),
            }
        }
        let mut line = String::new();
        for (start, cells, text, look) in spans {
            let trimmed = text.trim_end_matches(' ');
            let cells = cells - (text.len() - trimmed.len()) as u16;
            let mut css = format!("fill:{}", look.fg);
            if look.bold {
                css.push_str(";font-weight:bold");
            }
            if look.dim {
                css.push_str(";opacity:.6");
            }
            if look.italic {
                css.push_str(";font-style:italic");
            }
            if look.underline {
                css.push_str(";text-decoration:underline");
            }
            let class = classes.of(css);
            let _ = write!(
                line,
                r#"<tspan x="{}" textLength="{}" class="c{class}">{}</tspan>"#,
                px(f64::from(start) * CELL_W),
                px(f64::from(cells) * CELL_W),
                escape(trimmed),
            );
        }
        if !line.is_empty() {
            let _ = writeln!(
                body,
                r#"<text y="{}">{line}</text>"#,
                px(f64::from(y) * ROW_H + ROW_H * 0.75)
            );
        }
    }

    let mut style = String::new();
    for (i, css) in classes.0.iter().enumerate() {
        let _ = write!(style, ".c{i}{{{css}}}");
    }
    format!(
        concat!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" xml:space="preserve" shape-rendering="crispEdges">"#,
            "\n<title>{title}</title>\n",
            "<style>text{{font:14px ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,monospace;white-space:pre}}",
            "{style}</style>\n",
            r#"<rect width="100%" height="100%" fill="{bg}"/>"#,
            "\n{body}</svg>\n"
        ),
        w = px(w),
        h = px(h),
        title = escape(title),
        style = style,
        bg = DEFAULT_BG,
        body = body,
    )
}

/// Selects the first finding of `kind` for `pid` in the findings panel, by the keys.
fn select(state: &mut State, kind: FindingKind, pid: u32) {
    if state.focus != Focus::Findings {
        state.apply_action(Action::FocusNext);
    }
    state.apply_action(Action::Top);
    for _ in 0..state.findings().len() {
        let at = state.selected_finding_index().map(|i| &state.findings()[i]);
        if at.is_some_and(|f| f.kind == kind && f.pid == Some(pid)) {
            return;
        }
        state.apply_action(Action::Down);
    }
    panic!("no {kind:?} of PID {pid} in the demo");
}

/// Each picture: its file under `assets/screens/`, what it shows, and the screen.
fn pictures() -> Vec<(&'static str, String)> {
    let main = demo_state(false);
    let monitor = svg(
        &render(&main, 120, 40),
        "strata --demo: the monitor at 120×40",
    );
    let mut state = demo_state(false);
    select(&mut state, FindingKind::Climb, 52010);
    state.apply_action(Action::Open);
    let evidence = svg(
        &render(&state, 120, 40),
        "strata --demo: the evidence of a climb",
    );
    vec![("monitor.svg", monitor), ("evidence.svg", evidence)]
}

fn screens_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/screens")
}

/// The checked-in pictures are what the code draws now.
#[test]
fn the_pictures_are_what_the_code_draws() {
    // A contributor's switch, not one strata reads: named through a constant, so the man
    // page's list of the environment strata reads leaves it out.
    const UPDATE: &str = "STRATA_UPDATE_PICTURES";
    let update = std::env::var_os(UPDATE).is_some_and(|v| v == "1");
    let dir = screens_dir();
    let mut stale = Vec::new();
    for (name, drawn) in pictures() {
        let path = dir.join(name);
        if update {
            std::fs::create_dir_all(&dir).expect("assets/screens");
            std::fs::write(&path, &drawn).expect("writes the picture");
            continue;
        }
        let kept = std::fs::read_to_string(&path).unwrap_or_default();
        if kept != drawn {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "these pictures are not what the screen draws now: {stale:?}\n\
         make them again with: STRATA_UPDATE_PICTURES=1 cargo test --lib picture"
    );
}

/// The SVG carries the screen: every row's text in order, its colours, and a run per style
/// rather than an element per cell.
#[test]
fn the_svg_holds_the_screens_text_and_colours() {
    use ratatui::style::Style;
    let mut buffer = Buffer::empty(ratatui::layout::Rect::new(0, 0, 12, 2));
    buffer.set_string(0, 0, "GPU 0 <ok>", Style::new().fg(Color::Green));
    buffer.set_string(6, 0, "<ok>", Style::new().fg(Color::Indexed(196)));
    buffer.set_string(0, 1, "训练 a&b", Style::new().bg(Color::Rgb(1, 2, 3)));
    let svg = svg(&buffer, "t");
    assert!(
        svg.contains(r#"textLength="42" class="c1">GPU 0</tspan>"#),
        "{svg}"
    );
    assert!(svg.contains(">&lt;ok&gt;</tspan>"), "{svg}");
    assert!(
        svg.contains("fill:#23b35a") && svg.contains("fill:#ff0000"),
        "{svg}"
    );
    // The wide characters take two cells each: the run is 8 cells wide.
    assert!(svg.contains(r#"textLength="67.2" class="c"#), "{svg}");
    assert!(svg.contains(">训练 a&amp;b</tspan>"), "{svg}");
    assert_eq!(
        svg.matches("<rect").count(),
        2,
        "one rectangle for the row's background: {svg}"
    );
    assert!(
        svg.contains(r#"width="67.2" height="18" class="c0""#),
        "{svg}"
    );
    assert_eq!(svg.matches("<tspan").count(), 3, "{svg}");
}

/// A picture stays small enough for a README: runs merged, no element per cell.
#[test]
fn the_pictures_stay_small() {
    for (name, drawn) in pictures() {
        assert!(
            drawn.len() < 120_000,
            "{name} is {} bytes: runs are not being merged",
            drawn.len()
        );
        let elements = drawn.matches('<').count();
        assert!(elements < 120 * 40 / 4, "{name}: {elements} elements");
    }
}

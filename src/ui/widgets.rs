//! Small drawing pieces: the layer bar, its legend, text sparklines.

use super::theme::Theme;
use crate::layers::{Layer, Layers};
use crate::present::Exactness;
use crate::units;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::Frame;

/// Splits `width` cells among the layers in proportion to their bytes (largest remainder),
/// then gives every non-empty layer at least one cell where there is room, so a small but
/// present layer is never invisible. The figures in the legend stay exact.
pub(crate) fn bar_cells(layers: &Layers, width: usize) -> Vec<(Layer, usize)> {
    let total = layers.sum();
    if width == 0 || total == 0 {
        return Vec::new();
    }
    let mut cells: Vec<(Layer, usize, u128)> = Layer::ALL
        .iter()
        .map(|&layer| {
            let bytes = u128::from(layers.get(layer).unwrap_or(0));
            let exact = bytes * width as u128;
            (layer, (exact / total) as usize, exact % total)
        })
        .collect();
    let mut left = width - cells.iter().map(|c| c.1).sum::<usize>();
    let mut order: Vec<usize> = (0..cells.len()).collect();
    order.sort_by(|&a, &b| cells[b].2.cmp(&cells[a].2));
    for &i in order.iter() {
        if left == 0 {
            break;
        }
        cells[i].1 += 1;
        left -= 1;
    }
    let present = |l: Layer| layers.get(l).unwrap_or(0) > 0;
    let wanting: Vec<usize> = (0..cells.len())
        .filter(|&i| cells[i].1 == 0 && present(cells[i].0))
        .collect();
    for i in wanting {
        let donor = (0..cells.len())
            .filter(|&j| cells[j].1 > 1)
            .max_by_key(|&j| cells[j].1);
        if let Some(j) = donor {
            cells[j].1 -= 1;
            cells[i].1 = 1;
        }
    }
    cells
        .into_iter()
        .filter(|c| c.1 > 0)
        .map(|(l, n, _)| (l, n))
        .collect()
}

/// A section under a rule with its title, highlighted when it has the keyboard focus: what a
/// `Block` with a top border and a title draws, drawn without the block's pass over every
/// cell of the section to lay its style (it has none) under what the section holds, which
/// was a fifth of a still frame's drawing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Section {
    title: Line<'static>,
    rule: &'static str,
    rule_style: Style,
}

impl Section {
    pub(crate) fn new(title: String, focused: bool, theme: Theme) -> Self {
        Section {
            title: Line::styled(title, theme.title()),
            rule: theme.border_set().horizontal_top,
            rule_style: if focused {
                theme.focused_border()
            } else {
                theme.border()
            },
        }
    }

    /// What the section holds: its area less the rule.
    pub(crate) fn inner(&self, area: Rect) -> Rect {
        Rect {
            y: area.y.saturating_add(1).min(area.bottom()),
            height: area.height.saturating_sub(1),
            ..area
        }
    }

    /// The rule along the area's top row, and the title over its left end.
    fn render(&self, area: Rect, buffer: &mut Buffer) {
        let area = area.intersection(buffer.area);
        if area.is_empty() {
            return;
        }
        for x in area.left()..area.right() {
            buffer[(x, area.top())]
                .set_symbol(self.rule)
                .set_style(self.rule_style);
        }
        let width = u16::try_from(self.title.width()).unwrap_or(u16::MAX);
        let title_area = Rect {
            width: width.min(area.width),
            height: 1,
            ..area
        };
        ratatui::widgets::Widget::render(&self.title, title_area, buffer);
    }
}

/// A box around a GPU's panel, its title over the top left and a figure over the top right:
/// what a `Block` with all four borders and those two titles draws, drawn without the
/// block's pass over every cell inside to lay its style (it has none).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Boxed {
    pub(crate) title: Line<'static>,
    /// Drawn right-aligned at the top's right end.
    pub(crate) figure: Line<'static>,
    pub(crate) border_style: Style,
}

impl Boxed {
    /// What the box holds: its area less the border.
    pub(crate) fn inner(area: Rect) -> Rect {
        ratatui::widgets::Block::bordered().inner(area)
    }

    /// The border, and the title and the figure over its top.
    fn render(&self, area: Rect, buffer: &mut Buffer) {
        let area = area.intersection(buffer.area);
        if area.is_empty() {
            return;
        }
        let set = ratatui::symbols::border::PLAIN;
        let (left, top) = (area.left(), area.top());
        let (right, bottom) = (area.right() - 1, area.bottom() - 1);
        let mut put = |x: u16, y: u16, symbol: &str| {
            buffer[(x, y)]
                .set_symbol(symbol)
                .set_style(self.border_style);
        };
        // The sides, then the corners over their ends, in the block's order.
        for y in top..=bottom {
            put(left, y, set.vertical_left);
        }
        for x in left..=right {
            put(x, top, set.horizontal_top);
        }
        for y in top..=bottom {
            put(right, y, set.vertical_right);
        }
        for x in left..=right {
            put(x, bottom, set.horizontal_bottom);
        }
        put(right, bottom, set.bottom_right);
        put(right, top, set.top_right);
        put(left, bottom, set.bottom_left);
        put(left, top, set.top_left);
        // The titles along the top, between the corners.
        let titles = Rect {
            x: left.saturating_add(1),
            y: top,
            width: area.width.saturating_sub(2),
            height: 1,
        };
        if titles.is_empty() {
            return;
        }
        let width = |line: &Line<'_>| u16::try_from(line.width()).unwrap_or(u16::MAX);
        let title = Rect {
            width: width(&self.title).min(titles.width),
            ..titles
        };
        ratatui::widgets::Widget::render(&self.title, title, buffer);
        let figure_width = width(&self.figure);
        let figure = Rect {
            x: titles
                .right()
                .saturating_sub(figure_width)
                .max(titles.left()),
            width: figure_width.min(titles.width),
            ..titles
        };
        ratatui::widgets::Widget::render(&self.figure, figure, buffer);
    }
}

/// Writes lines straight into the frame, one per row, cut at the area's edge. Cheaper than a
/// `Paragraph` (no wrapping or alignment to work out), which matters at every redraw.
pub(crate) fn put_lines(frame: &mut Frame<'_>, area: Rect, lines: &[Line<'_>]) {
    render_lines(frame.buffer_mut(), area, lines);
}

fn render_lines(buffer: &mut Buffer, area: Rect, lines: &[Line<'_>]) {
    let area = area.intersection(buffer.area);
    for (line, y) in lines.iter().zip(area.top()..area.bottom()) {
        put_line(buffer, area.x, y, line, area.width);
    }
}

/// What a band of the screen draws, kept rather than drawn: the same pieces, in the same
/// order, with all they show. Two equal paints draw the same cells in the same area, so a
/// band whose paint is the last frame's need not be drawn again, nor its cells compared:
/// the screen shows them still. Nothing is read at [`Paint::render`] but what was kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Paint {
    ops: Vec<Op>,
}

/// One piece of a [`Paint`].
#[derive(Debug, Clone, PartialEq)]
enum Op {
    /// [`put_lines`]'s.
    Lines(Rect, Vec<Line<'static>>),
    Section(Rect, Section),
    Boxed(Rect, Boxed),
    Grid(GridShown),
}

impl Paint {
    /// [`put_lines`], kept.
    pub(crate) fn lines(&mut self, area: Rect, lines: Vec<Line<'static>>) {
        self.ops.push(Op::Lines(area, lines));
    }

    /// [`Section::draw`], kept.
    pub(crate) fn section(&mut self, area: Rect, section: Section) {
        self.ops.push(Op::Section(area, section));
    }

    /// [`Boxed::draw`], kept.
    pub(crate) fn boxed(&mut self, area: Rect, boxed: Boxed) {
        self.ops.push(Op::Boxed(area, boxed));
    }

    /// Draws what was kept, in its order, each piece cut to `band`: nothing outside it is
    /// written.
    pub(crate) fn render(&self, buffer: &mut Buffer, band: Rect) {
        for op in &self.ops {
            match op {
                Op::Lines(area, lines) => render_lines(buffer, area.intersection(band), lines),
                Op::Section(area, section) => section.render(area.intersection(band), buffer),
                Op::Boxed(area, boxed) => boxed.render(area.intersection(band), buffer),
                Op::Grid(grid) => grid.render(grid.area.intersection(band), buffer),
            }
        }
    }
}

/// What `Buffer::set_line` writes, where a span of printable ASCII (most of what the monitor
/// writes) goes a byte to a cell without being cut into graphemes and measured, which was a
/// tenth of a still frame's drawing, and a span of [`one_cell`] characters (the bars, the
/// sparklines, the rules, `·`) a character to a cell. Any other span is `set_line`'s own.
fn put_line(buffer: &mut Buffer, mut x: u16, y: u16, line: &Line<'_>, max_width: u16) -> u16 {
    let mut remaining = max_width;
    for span in line {
        if remaining == 0 {
            break;
        }
        let text = span.content.as_ref();
        let style = line.style.patch(span.style);
        let room = buffer.area.right().saturating_sub(x).min(remaining);
        let end = match put_one_cell_text(buffer, (x, y), text, room, style) {
            Some(n) => x + n,
            None => {
                buffer
                    .set_stringn(x, y, text, usize::from(remaining), style)
                    .0
            }
        };
        remaining = remaining.saturating_sub(end.saturating_sub(x));
        x = end;
    }
    x
}

/// Writes `text` from `at` a character to a cell, into at most `room` cells (which lie
/// within the buffer), laying `style` over each, where every character is [`one_cell`]
/// (printable ASCII a byte at a time): the cells written. `None`, writing nothing, for any
/// other text, which must be cut into graphemes and measured.
fn put_one_cell_text(
    buffer: &mut Buffer,
    (x, y): (u16, u16),
    text: &str,
    room: u16,
    style: Style,
) -> Option<u16> {
    let n = if text.bytes().all(|b| (b' '..=b'~').contains(&b)) {
        let n = text.len().min(usize::from(room));
        if n > 0 {
            let start = buffer.index_of(x, y);
            for (i, cell) in buffer.content[start..start + n].iter_mut().enumerate() {
                cell.set_symbol(&text[i..=i]).set_style(style);
            }
        }
        n
    } else if text.chars().all(one_cell) {
        let mut n = 0;
        if room > 0 {
            let start = buffer.index_of(x, y);
            let cells = buffer.content[start..start + usize::from(room)].iter_mut();
            for ((at, c), cell) in text.char_indices().zip(cells) {
                cell.set_symbol(&text[at..at + c.len_utf8()])
                    .set_style(style);
                n += 1;
            }
        }
        n
    } else {
        return None;
    };
    // n <= room, a u16.
    Some(n as u16)
}

/// A row of a [`Grid`]: its cells, each a line of text and the style laid over the cell's
/// whole column, and the style laid over the whole row under them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GridRow<'a> {
    pub(crate) cells: Vec<Span<'a>>,
    pub(crate) style: Style,
}

impl GridRow<'_> {
    /// The row with its texts its own (those it owns already are moved, not copied).
    fn into_owned(self) -> GridRow<'static> {
        GridRow {
            cells: self
                .cells
                .into_iter()
                .map(|span| Span::styled(span.content.into_owned(), span.style))
                .collect(),
            style: self.style,
        }
    }
}

/// A table of one-line rows under a one-line header, its columns a cell apart: what
/// ratatui's `Table` draws from the same widths, rows and styles (scrolled from its top each
/// frame, so that the selected row is on screen), drawn without making every cell a `Text`
/// and cutting it into graphemes, which was two thirds of a frame's drawing at 8 GPUs × 8
/// processes. A cell of [`one_cell`] characters goes a character to a cell; any other cell
/// is drawn as the table draws it.
pub(crate) struct Grid<'a> {
    /// One or more: a table given none divides its width among its cells itself.
    pub(crate) widths: &'a [Constraint],
    pub(crate) header: GridRow<'a>,
    /// Laid over the selected row.
    pub(crate) highlight: Style,
}

impl Grid<'_> {
    /// Keeps in `paint` the header and, of `count` rows, those that fit, asking `row` for
    /// those only; returns the index of the first (the table's offset).
    pub(crate) fn paint<'r>(
        &self,
        paint: &mut Paint,
        area: Rect,
        count: usize,
        selected: Option<usize>,
        row: impl FnMut(usize) -> GridRow<'r>,
    ) -> usize {
        let (shown, first) = self.shown(area, count, selected, row);
        paint.ops.push(Op::Grid(shown));
        first
    }

    /// The header and the rows that fit in `area`, scrolled so that the selected one is
    /// among them, and the index of the first.
    fn shown<'r>(
        &self,
        area: Rect,
        count: usize,
        selected: Option<usize>,
        mut row: impl FnMut(usize) -> GridRow<'r>,
    ) -> (GridShown, usize) {
        let mut shown = GridShown {
            area,
            widths: self.widths.to_vec(),
            header: self.header.clone().into_owned(),
            rows: Vec::new(),
            selected: None,
            highlight: self.highlight,
        };
        if area.is_empty() || count == 0 {
            return (shown, 0);
        }
        let height = area.height - 1;
        let selected = selected.map(|s| s.min(count - 1));
        let first = selected.map_or(0, |s| (s + 1).saturating_sub(usize::from(height)));
        let fit = count.saturating_sub(first).min(usize::from(height));
        shown.rows = (first..first + fit).map(|i| row(i).into_owned()).collect();
        shown.selected = selected.and_then(|s| s.checked_sub(first));
        (shown, first)
    }
}

/// What a [`Grid`] draws: its header and the rows that fit, worked out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GridShown {
    area: Rect,
    widths: Vec<Constraint>,
    header: GridRow<'static>,
    /// From the first shown, a row a line under the header.
    rows: Vec<GridRow<'static>>,
    /// Of `rows`, the one the highlight is laid over.
    selected: Option<usize>,
    highlight: Style,
}

impl GridShown {
    /// Draws it in `area`: its own, or that cut to a band.
    fn render(&self, area: Rect, buffer: &mut Buffer) {
        if area.is_empty() {
            return;
        }
        let columns = grid_columns(&self.widths, area.width);
        put_grid_row(buffer, Rect { height: 1, ..area }, &columns, &self.header);
        let fit = usize::from(area.height - 1);
        for (k, row) in self.rows.iter().take(fit).enumerate() {
            // k < the area's height, a u16.
            let line = Rect {
                y: area.y + 1 + k as u16,
                height: 1,
                ..area
            };
            put_grid_row(buffer, line, &columns, row);
            if self.selected == Some(k) {
                patch_style(buffer, line, self.highlight);
            }
        }
    }
}

/// Where each column starts along the row and how wide it is: the table's own layout (with
/// no highlight symbol, its columns take the whole width).
fn grid_columns(widths: &[Constraint], width: u16) -> Vec<(u16, u16)> {
    Layout::horizontal(widths.iter().copied())
        .flex(Flex::Start)
        .spacing(1)
        .split(Rect::new(0, 0, width, 1))
        .iter()
        .map(|c| (c.x, c.width))
        .collect()
}

fn put_grid_row(buffer: &mut Buffer, line: Rect, columns: &[(u16, u16)], row: &GridRow<'_>) {
    patch_style(buffer, line, row.style);
    for (cell, &(x, width)) in row.cells.iter().zip(columns) {
        let area = Rect::new(line.x.saturating_add(x), line.y, width, line.height);
        patch_style(buffer, area, cell.style);
        put_cell_text(buffer, area, &cell.content);
    }
}

/// A cell's text, its first line only, as a `Text` made from it draws it: symbols only (the
/// styles are the row's and the cell's), [`one_cell`] text a character to a cell.
fn put_cell_text(buffer: &mut Buffer, area: Rect, text: &str) {
    let area = area.intersection(buffer.area);
    if area.is_empty() {
        return;
    }
    let text = text.lines().next().unwrap_or("");
    let at = (area.x, area.y);
    if put_one_cell_text(buffer, at, text, area.width, Style::default()).is_none() {
        let span = Span::raw(text);
        if span.width() > 0 {
            ratatui::widgets::Widget::render(&span, area, buffer);
        }
    }
}

/// `Buffer::set_style` over `area`, skipped where the style changes nothing.
fn patch_style(buffer: &mut Buffer, area: Rect, style: Style) {
    if style == Style::default() {
        return;
    }
    let area = area.intersection(buffer.area);
    if area.is_empty() {
        return;
    }
    for y in area.top()..area.bottom() {
        let start = buffer.index_of(area.x, y);
        for cell in &mut buffer.content[start..start + usize::from(area.width)] {
            cell.set_style(style);
        }
    }
}

/// Characters that are a grapheme of one cell whatever stands beside them of their kind:
/// printable ASCII, a few Latin-1 signs (`°`, `±`, `·`, `¼`, `×`), punctuation (`‖`, `•`,
/// `…`, `‹`, `›`), arrows, `≤`, `≥`, and the box-drawing, block and geometric characters
/// bar the two that are wide (a test checks each beside each, against `set_line`).
fn one_cell(c: char) -> bool {
    matches!(c,
        ' '..='~'
        | '\u{b0}' | '\u{b1}' | '\u{b7}' | '\u{bc}'..='\u{be}' | '\u{d7}'
        | '\u{2016}' | '\u{2022}' | '\u{2026}' | '\u{2039}' | '\u{203a}'
        | '\u{2190}'..='\u{2199}' | '\u{2264}' | '\u{2265}'
        | '\u{2500}'..='\u{25fc}' | '\u{25ff}')
}

/// One stacked bar of the layers, `width` cells wide.
pub(crate) fn bar(layers: &Layers, width: usize, theme: Theme, greyed: bool) -> Line<'static> {
    let spans: Vec<Span<'static>> = bar_cells(layers, width)
        .into_iter()
        .map(|(layer, n)| {
            let style = if greyed {
                theme.stale()
            } else {
                theme.layer(layer)
            };
            Span::styled(theme.layer_glyph(layer).to_string().repeat(n), style)
        })
        .collect();
    Line::from(spans)
}

/// Legend entries: glyph, name and figure of each layer, packed into at most `lines` lines
/// of `width` (see [`legend_lines_most`]).
pub(crate) fn legend(
    layers: &Layers,
    exactness: Exactness<'_>,
    (width, lines): (usize, usize),
    theme: Theme,
    short: bool,
    greyed: bool,
) -> Vec<Line<'static>> {
    pack_legend(
        legend_entries(layers, exactness, theme, short, greyed),
        width,
        lines,
    )
}

/// The legend's entries, one per layer in bar order, before packing into lines. A figure
/// carries its mark ([`Exactness::mark`]). On a device no fed process is on (its live
/// tensors unknown), only the layers known are listed: a row of `n/a` says nothing there.
pub(crate) fn legend_entries(
    layers: &Layers,
    exactness: Exactness<'_>,
    theme: Theme,
    short: bool,
    greyed: bool,
) -> Vec<Vec<Span<'static>>> {
    let unfed = layers.get(Layer::Live).is_none();
    Layer::ALL
        .iter()
        .filter(|&&layer| !(unfed && layers.get(layer).is_none()))
        .map(|&layer| {
            let mut figure = if short {
                short_bytes(layers.get(layer))
            } else {
                units::opt_bytes(layers.get(layer))
            };
            if layers.get(layer).is_some() {
                figure.insert_str(0, &theme.text(exactness.mark(layer)));
            }
            let name = if short { layer.short() } else { layer.name() };
            let style = if greyed {
                theme.stale()
            } else {
                theme.layer(layer)
            };
            let name = if short {
                format!("{name} ")
            } else {
                format!(" {name} ")
            };
            vec![
                Span::styled(theme.layer_glyph(layer).to_string(), style),
                Span::raw(name),
                Span::styled(figure, if greyed { theme.stale() } else { Style::new() }),
            ]
        })
        .collect()
}

/// The widest a legend's figure can be, its mark included: `≥1.50 KiB`, `≥1.50K` short.
const FIGURE_MOST: usize = 9;
const SHORT_FIGURE_MOST: usize = 6;
/// The widest note of the driver's reservation after `other`: ` (1.50K driver)`.
pub(crate) const DRIVER_NOTE_MOST: usize = 15;

/// The most lines a legend of every layer takes at `width`, each figure at its widest and
/// packed as tightly as [`pack_legend`] may: a height planned with it holds whatever the
/// figures are, so the screen's layout does not move as they change. `driver_note`: the
/// `other` entry may carry the driver's share.
pub(crate) fn legend_lines_most(width: usize, short: bool, driver_note: bool) -> usize {
    let widths = Layer::ALL.iter().map(|&layer| {
        let name = if short {
            layer.short().chars().count() + 1
        } else {
            layer.name().chars().count() + 2
        };
        let figure = if short {
            SHORT_FIGURE_MOST
        } else {
            FIGURE_MOST
        };
        let note = if driver_note && layer == Layer::Other {
            DRIVER_NOTE_MOST
        } else {
            0
        };
        1 + name + figure + note
    });
    let (mut lines, mut used) = (0, 0);
    for w in widths {
        if used == 0 || used + 1 + w > width {
            lines += 1;
            used = w;
        } else {
            used += 1 + w;
        }
    }
    lines
}

/// Packs legend entries into at most `lines` lines, two spaces apart where that fits and
/// one where it does not. With `lines` from [`legend_lines_most`] they always fit: packing
/// in order never takes more lines for narrower entries, or fewer of them.
pub(crate) fn pack_legend(
    entries: Vec<Vec<Span<'static>>>,
    width: usize,
    lines: usize,
) -> Vec<Line<'static>> {
    let airy = pack(entries.clone(), width, 2);
    if airy.len() <= lines {
        airy
    } else {
        pack(entries, width, 1)
    }
}

/// Glyph and name of each layer, no figures: the key of compact bars.
pub(crate) fn key_line(theme: Theme) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    for layer in Layer::ALL {
        spans.push(Span::styled(
            theme.layer_glyph(layer).to_string(),
            theme.layer(layer),
        ));
        spans.push(Span::raw(format!("{} ", layer.short())));
    }
    spans
}

/// Packs groups of spans into lines no wider than `width`, `gap` spaces apart.
pub(crate) fn pack(
    entries: Vec<Vec<Span<'static>>>,
    width: usize,
    gap: usize,
) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let mut line: Vec<Span<'static>> = Vec::new();
    let mut used = 0;
    for entry in entries {
        let w: usize = entry.iter().map(|s| s.width()).sum();
        if used > 0 && used + gap + w > width {
            lines.push(Line::from(std::mem::take(&mut line)));
            used = 0;
        }
        if used > 0 {
            line.push(Span::raw(" ".repeat(gap)));
            used += gap;
        }
        line.extend(entry);
        used += w;
    }
    if !line.is_empty() {
        lines.push(Line::from(line));
    }
    lines
}

/// Bytes as `38.1G`, `532M`, `n/a`: for legends and narrow columns.
pub(crate) fn short_bytes(value: Option<u64>) -> String {
    value.map_or_else(|| "n/a".into(), units::short_bytes)
}

/// [`sparkline_in`] with the default theme's levels.
pub(crate) fn sparkline(values: &[Option<u64>], width: usize, ceiling: Option<u64>) -> String {
    sparkline_in(Theme::default(), values, width, ceiling)
}

/// A text sparkline of the last `width` values, scaled from 0 to `ceiling` (or the largest
/// value shown), in the theme's levels ([`Theme::ticks`]). Unknown values are blanks, never
/// zero.
pub(crate) fn sparkline_in(
    theme: Theme,
    values: &[Option<u64>],
    width: usize,
    ceiling: Option<u64>,
) -> String {
    let ticks = theme.ticks();
    let shown = &values[values.len().saturating_sub(width)..];
    let top = ceiling
        .or_else(|| shown.iter().flatten().copied().max())
        .unwrap_or(0)
        .max(1);
    let mut out = String::with_capacity(width * 3);
    for _ in shown.len()..width {
        out.push(' ');
    }
    for v in shown {
        match v {
            None => out.push(' '),
            Some(v) => {
                let level = ((*v as f64 / top as f64) * 7.0).round().clamp(0.0, 7.0) as usize;
                out.push(ticks[level]);
            }
        }
    }
    out
}

/// [`trend_in`] with the default theme's levels.
pub(crate) fn trend(values: &[Option<u64>], width: usize, min_range: u64) -> String {
    trend_in(Theme::default(), values, width, min_range)
}

/// A trend of `values` squeezed into `width` cells (each cell the largest value of its
/// span, so peaks survive), drawn from the smallest value shown up to at least `min_range`
/// above it, in the theme's levels: a plateau stays flat, a climb of more than `min_range`
/// rises across the cells, and noise smaller than `min_range` does not look like a trend.
pub(crate) fn trend_in(
    theme: Theme,
    values: &[Option<u64>],
    width: usize,
    min_range: u64,
) -> String {
    let ticks = theme.ticks();
    if width == 0 {
        return String::new();
    }
    let per_cell = values.len().div_ceil(width).max(1);
    let cells: Vec<Option<u64>> = values
        .chunks(per_cell)
        .map(|chunk| chunk.iter().flatten().copied().max())
        .collect();
    let known = cells.iter().flatten().copied();
    let (Some(low), Some(high)) = (known.clone().min(), known.max()) else {
        return " ".repeat(width);
    };
    let range = (high - low).max(min_range).max(1) as f64;
    let mut out = " ".repeat(width.saturating_sub(cells.len()));
    for cell in cells {
        out.push(match cell {
            None => ' ',
            Some(v) => ticks[(((v - low) as f64 / range) * 7.0).round().clamp(0.0, 7.0) as usize],
        });
    }
    out
}

/// A GPU's name without the vendor, shortened: `H100`, `A100`.
pub(crate) fn short_gpu_name(name: Option<&str>) -> String {
    let name = crate::text::clean(name.unwrap_or("GPU"));
    let name = name.as_ref();
    let name = name.strip_prefix("NVIDIA ").unwrap_or(name);
    name.split([' ', '-']).next().unwrap_or(name).to_string()
}

/// Words of `text` (made safe first) in lines no wider than `width`; a word longer than a
/// line is cut across lines.
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let text = crate::text::clean(text);
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut used = 0;
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        if used > 0 && used + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
            used = 0;
        }
        while word.len() > width {
            let rest = word.split_off(width);
            if used > 0 {
                lines.push(std::mem::take(&mut line));
            }
            lines.push(word.into_iter().collect());
            used = 0;
            word = rest;
        }
        if used > 0 {
            line.push(' ');
            used += 1;
        }
        used += word.len();
        line.extend(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_fills_width_and_keeps_small_layers_visible() {
        let layers = Layers {
            live: Some(900),
            context: Some(1),
            free: Some(99),
            ..Layers::default()
        };
        let cells = bar_cells(&layers, 20);
        assert_eq!(cells.iter().map(|c| c.1).sum::<usize>(), 20);
        assert!(cells.iter().any(|c| c.0 == Layer::Context && c.1 == 1));
    }

    #[test]
    fn trend_is_flat_for_a_plateau_and_rises_for_a_climb() {
        let plateau = vec![Some(5_000u64); 40];
        assert_eq!(trend(&plateau, 4, 100), "▁▁▁▁");
        let climb: Vec<Option<u64>> = (0..40u64).map(|i| Some(i * 100)).collect();
        assert_eq!(trend(&climb, 4, 100), "▁▃▆█");
        assert_eq!(trend(&[], 3, 1), "   ");
    }

    #[test]
    fn wrap_keeps_words_whole_and_cuts_only_longer_ones() {
        assert_eq!(
            wrap("PID 52010 on GPU 2: live tensors climbing", 16),
            vec!["PID 52010 on GPU", "2: live tensors", "climbing"]
        );
        assert_eq!(wrap("abcdefghij xy", 4), vec!["abcd", "efgh", "ij", "xy"]);
        assert_eq!(wrap("a\u{1b}[2J b", 20), vec!["a\u{fffd}[2J b"]);
        assert!(wrap("", 10).is_empty());
    }

    #[test]
    fn sparkline_shows_gaps_as_blanks() {
        assert_eq!(sparkline(&[Some(0), None, Some(10)], 4, None), " ▁ █");
    }

    /// Every piece this file draws, in ASCII mode: nothing but ASCII, and still telling
    /// levels and layers apart.
    #[test]
    fn ascii_mode_draws_bars_legends_and_sparklines_in_ascii() {
        let theme = Theme {
            ascii: true,
            ..Theme::default()
        };
        let layers = Layers {
            live: Some(500),
            fragmented: Some(60),
            cached: Some(90),
            outside_pool: Some(40),
            context: Some(30),
            unattributed: Some(20),
            other: Some(10),
            free: Some(250),
        };
        let text =
            |line: &Line<'_>| -> String { line.spans.iter().map(|s| s.content.as_ref()).collect() };
        let bar = text(&bar(&layers, 60, theme, false));
        assert_eq!(bar.chars().count(), 60);
        let mut drawn: Vec<String> = vec![bar.clone()];
        for short in [false, true] {
            let partial = [Layer::Live, Layer::OutsidePool];
            let exactness = Exactness {
                context: None,
                partial: &partial,
                processes_unknown: true,
            };
            let lines = legend(&layers, exactness, (80, 4), theme, short, false);
            drawn.extend(lines.iter().map(text));
        }
        assert!(
            drawn[1].contains(">="),
            "a lower bound's mark in ASCII: {drawn:?}"
        );
        drawn.push(text(&Line::from(key_line(theme))));
        let climb: Vec<Option<u64>> = (0..40u64).map(|i| Some(i * 100)).collect();
        let spark = sparkline_in(theme, &climb, 8, None);
        let rising = trend_in(theme, &climb, 8, 100);
        drawn.extend([spark.clone(), rising.clone()]);
        for piece in &drawn {
            assert!(piece.is_ascii(), "not ASCII: {piece:?}");
        }
        for layer in Layer::ALL {
            assert!(bar.contains(layer.ascii_glyph()), "{layer:?} in {bar}");
        }
        // Eight distinct levels, the climb's cells rising through them.
        let levels: std::collections::HashSet<char> = theme.ticks().iter().copied().collect();
        assert_eq!(levels.len(), 8);
        assert_eq!(rising, "_.,-~=*#");
        assert_eq!(trend_in(theme, &vec![Some(5_000u64); 40], 4, 100), "____");
        let mut buffer = ratatui::buffer::Buffer::empty(Rect::new(0, 0, 12, 2));
        Section::new("GPUs".into(), true, theme).render(buffer.area, &mut buffer);
        let top: String = (0..12)
            .map(|x| buffer[(x, 0)].symbol().to_string())
            .collect();
        assert!(top.is_ascii() && top.contains('-'), "{top:?}");
    }

    /// A screen covered in text, drawn over by ours and, apart, by the reference: the two
    /// screens, ours first.
    fn over_text(
        screen: Rect,
        theme: Theme,
        ours: impl FnOnce(&mut Buffer),
        reference: impl FnOnce(&mut Buffer),
    ) -> (Buffer, Buffer) {
        let mut covered = Buffer::empty(screen);
        for y in screen.top()..screen.bottom() {
            covered.set_string(screen.x, y, "x".repeat(screen.width.into()), theme.dim());
        }
        let mut drawn = covered.clone();
        ours(&mut drawn);
        reference(&mut covered);
        (drawn, covered)
    }

    /// A section draws what a `Block` with a top border and a title drew, cell for cell, on
    /// a screen that already holds text (the rule and the title are laid over it), in every
    /// theme, at every size down to nothing, with a title longer than the section and a
    /// section that runs off the screen.
    #[test]
    fn a_section_draws_what_its_block_drew() {
        use ratatui::widgets::{Block, Borders, Widget};
        let screen = Rect::new(0, 0, 30, 6);
        let themes = [
            Theme::default(),
            Theme {
                ascii: true,
                ..Theme::default()
            },
            Theme {
                mono: true,
                ..Theme::default()
            },
        ];
        let areas = [
            screen,
            Rect::new(3, 1, 20, 4),
            Rect::new(0, 5, 30, 1),
            Rect::new(25, 2, 20, 9),
            Rect::new(4, 4, 0, 2),
            Rect::new(4, 4, 5, 0),
            Rect::new(40, 0, 5, 2),
        ];
        let titles = [
            "",
            " Findings (3) ",
            " Processes (9) · sorted by USED v · wider than it ",
        ];
        for theme in themes {
            for focused in [false, true] {
                for area in areas {
                    for title in titles {
                        let section = Section::new(title.into(), focused, theme);
                        let (after, before) = over_text(
                            screen,
                            theme,
                            |buffer| section.render(area, buffer),
                            |buffer| {
                                Block::default()
                                    .borders(Borders::TOP)
                                    .border_set(theme.border_set())
                                    .border_style(if focused {
                                        theme.focused_border()
                                    } else {
                                        theme.border()
                                    })
                                    .title(Line::styled(title.to_string(), theme.title()))
                                    .render(area, buffer);
                            },
                        );
                        assert_eq!(after, before, "{area:?} {title:?} {focused}");
                        let block = Block::default().borders(Borders::TOP);
                        assert_eq!(section.inner(area), block.inner(area), "{area:?}");
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// A line put a byte to a cell where it is ASCII writes what `set_line` writes, and
        /// ends where it ends: spans of ASCII, of wide and combining characters, of control
        /// characters, styled and not, from anywhere on the screen (off its right edge too),
        /// cut at any width.
        #[test]
        fn a_line_put_is_what_set_line_writes(
            spans in proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "", "a", "GPU 0 ", "~ !", "\u{1b}[2J", "t\tab", "─", "é", "e\u{301}",
                        "日本", "🧠", "x\u{fe0f}", "██░", "  ", "▁▂▃ ·36°C", "█\u{301}", "◽",
                        "≥1.2G…", "↑↓",
                    ]),
                    0u8..4,
                ),
                0..6,
            ),
            line_style in 0u8..3,
            x in 0u16..24,
            y in 0u16..3,
            max_width in 0u16..30,
        ) {
            use ratatui::style::{Color, Modifier};
            let style = |k: u8| match k {
                0 => Style::default(),
                1 => Style::default().fg(Color::Red),
                2 => Style::default().bg(Color::Blue).add_modifier(Modifier::BOLD),
                _ => Style::default().remove_modifier(Modifier::BOLD).fg(Color::Indexed(7)),
            };
            let line = Line::from(
                spans
                    .iter()
                    .map(|(text, k)| Span::styled(text.to_string(), style(*k)))
                    .collect::<Vec<_>>(),
            )
            .style(style(line_style));
            let screen = Rect::new(2, 0, 20, 3);
            let mut expected = Buffer::empty(screen);
            expected.set_string(2, 1, "under the line, kept", style(2));
            let mut got = expected.clone();
            let x = x.max(screen.x);
            let (end, _) = expected.set_line(x, y, &line, max_width);
            proptest::prop_assert_eq!(put_line(&mut got, x, y, &line, max_width), end);
            proptest::prop_assert_eq!(got, expected);
        }
    }

    proptest::proptest! {
        /// A grid draws what ratatui's `Table` drew from the same widths, header, rows and
        /// styles, cell for cell, over text already on the screen, and scrolls to the same
        /// row: cells of ASCII, of wide, combining and zero-width characters, cut by their
        /// column, with more cells than columns and fewer, widths wider than the screen,
        /// any row selected (past the last too), in areas down to nothing and off the screen.
        #[test]
        fn a_grid_draws_what_a_table_drew(
            widths in proptest::collection::vec((0u8..2, 0u16..9), 1..7),
            header in proptest::collection::vec((0usize..14, 0u8..4), 0..8),
            header_style in 0u8..4,
            rows in proptest::collection::vec(
                (proptest::collection::vec((0usize..14, 0u8..4), 0..8), 0u8..4),
                0..14,
            ),
            selected in proptest::option::of(0usize..16),
            highlight in 0u8..4,
            (x, y, width, height) in (0u16..34, 0u16..10, 0u16..40, 0u16..12),
        ) {
            use ratatui::style::{Color, Modifier};
            use ratatui::widgets::{Cell, Row, StatefulWidget, Table, TableState};
            const TEXTS: [&str; 14] = [
                "", "a", "PID", "1234567890123", "└4321", "▁▂█▇", "日本語", "e\u{301}x",
                "🧠x", "\u{301}", "≥1.2G", "a\nb", "x\r\ny", " n/a ",
            ];
            let style = |k: u8| match k {
                0 => Style::default(),
                1 => Style::default().fg(Color::Red),
                2 => Style::default().bg(Color::Blue).add_modifier(Modifier::BOLD),
                _ => Style::default().remove_modifier(Modifier::BOLD).fg(Color::Indexed(7)),
            };
            let widths: Vec<Constraint> = widths
                .iter()
                .map(|&(kind, n)| match kind {
                    0 => Constraint::Length(n),
                    _ => Constraint::Min(n),
                })
                .collect();
            let grid_row = |cells: &[(usize, u8)], k: u8| GridRow {
                cells: cells
                    .iter()
                    .map(|&(t, c)| Span::styled(TEXTS[t], style(c)))
                    .collect(),
                style: style(k),
            };
            let table_row = |cells: &[(usize, u8)], k: u8| {
                Row::new(
                    cells
                        .iter()
                        .map(|&(t, c)| Cell::from(TEXTS[t].to_string()).style(style(c)))
                        .collect::<Vec<_>>(),
                )
                .style(style(k))
            };
            let screen = Rect::new(1, 0, 30, 8);
            let area = Rect::new(x, y, width, height);
            let mut offset = None;
            let mut table_state = TableState::default().with_selected(selected);
            let (after, before) = over_text(
                screen,
                Theme::default(),
                |buffer| {
                    let grid = Grid {
                        widths: &widths,
                        header: grid_row(&header, header_style),
                        highlight: style(highlight),
                    };
                    let mut paint = Paint::default();
                    offset = Some(grid.paint(&mut paint, area, rows.len(), selected, |i| {
                        grid_row(&rows[i].0, rows[i].1)
                    }));
                    paint.render(buffer, area);
                },
                |buffer| {
                    Table::new(rows.iter().map(|(c, k)| table_row(c, *k)), widths.clone())
                        .header(table_row(&header, header_style))
                        .column_spacing(1)
                        .row_highlight_style(style(highlight))
                        .render(area, buffer, &mut table_state);
                },
            );
            proptest::prop_assert_eq!(after, before);
            proptest::prop_assert_eq!(offset, Some(table_state.offset()));
        }
    }

    /// Every character put a character to a cell is one grapheme of one cell beside each
    /// other one and beside ASCII: a line of each between all the others (so that every pair
    /// stands side by side both ways) is put as `set_line` writes it, styled and not.
    #[test]
    fn one_cell_characters_are_put_as_set_line_writes_them() {
        let all: Vec<char> = (0..=0x2fffu32)
            .filter_map(char::from_u32)
            .filter(|&c| one_cell(c))
            .collect();
        assert!(all.len() > 300, "{}", all.len());
        let width = u16::try_from(all.len() * 2 + 4).unwrap();
        let screen = Rect::new(0, 0, width, 1);
        for &c in all.iter().filter(|c| !c.is_ascii()) {
            let mut text = String::from("a");
            for &d in &all {
                text.push(c);
                text.push(d);
            }
            text.push('z');
            for style in [
                Style::default(),
                Style::default().fg(ratatui::style::Color::Red),
            ] {
                let line = Line::from(Span::styled(text.clone(), style));
                let mut expected = Buffer::empty(screen);
                let (end, _) = expected.set_line(0, 0, &line, width);
                let mut got = Buffer::empty(screen);
                assert_eq!(put_line(&mut got, 0, 0, &line, width), end, "{c:?}");
                assert_eq!(got, expected, "{c:?}");
            }
        }
    }

    /// A GPU's box draws what a `Block` with all borders and a title at each end of its
    /// top drew, cell for cell, over text already on the screen, at every size down to
    /// nothing, with titles wider than the box and a box that runs off the screen.
    #[test]
    fn a_box_draws_what_its_block_drew() {
        use ratatui::widgets::{Block, Borders, Widget};
        let screen = Rect::new(0, 0, 30, 6);
        let areas = [
            screen,
            Rect::new(3, 1, 20, 4),
            Rect::new(0, 5, 30, 1),
            Rect::new(2, 2, 1, 3),
            Rect::new(2, 2, 2, 2),
            Rect::new(25, 2, 20, 9),
            Rect::new(4, 4, 0, 2),
            Rect::new(40, 0, 5, 2),
        ];
        let titles = [
            Line::from(""),
            Line::from(vec![
                Span::styled(" GPU 0 · H100 ", Theme::default().title()),
                Span::raw("· util 85% "),
            ]),
            Line::from(" GPU 7 · a name much wider than any box here "),
        ];
        let figures = [
            "",
            " 36.5/79.6G ",
            " 1.00/80.0 GiB used, wider than the box ",
        ];
        for area in areas {
            for title in &titles {
                for figure in figures {
                    let style = Theme::default().border();
                    let boxed = Boxed {
                        title: title.clone(),
                        figure: Line::from(figure).right_aligned(),
                        border_style: style,
                    };
                    let (after, before) = over_text(
                        screen,
                        Theme::default(),
                        |buffer| boxed.render(area, buffer),
                        |buffer| {
                            Block::default()
                                .borders(Borders::ALL)
                                .border_style(style)
                                .title(title.clone())
                                .title_top(Line::from(figure).right_aligned())
                                .render(area, buffer);
                        },
                    );
                    assert_eq!(after, before, "{area:?} {title:?} {figure:?}");
                    let block = Block::default().borders(Borders::ALL);
                    assert_eq!(Boxed::inner(area), block.inner(area), "{area:?}");
                }
            }
        }
    }
}

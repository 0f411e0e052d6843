//! Small drawing pieces: the layer bar, its legend, text sparklines.

use super::theme::Theme;
use crate::layers::{Layer, Layers};
use crate::present::Exactness;
use crate::units;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders};
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

/// A section under a rule with its title, highlighted when it has the keyboard focus.
pub(crate) fn section_block(title: String, focused: bool, theme: Theme) -> Block<'static> {
    Block::default()
        .borders(Borders::TOP)
        .border_set(theme.border_set())
        .border_style(if focused {
            theme.focused_border()
        } else {
            theme.border()
        })
        .title(Line::styled(title, theme.title()))
}

/// Writes lines straight into the frame, one per row, cut at the area's edge. Cheaper than a
/// `Paragraph` (no wrapping or alignment to work out), which matters at every redraw.
pub(crate) fn put_lines(frame: &mut Frame<'_>, area: Rect, lines: &[Line<'_>]) {
    let buffer = frame.buffer_mut();
    let area = area.intersection(buffer.area);
    for (line, y) in lines.iter().zip(area.top()..area.bottom()) {
        buffer.set_line(area.x, y, line, area.width);
    }
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
        let block = section_block("GPUs".into(), true, theme);
        let mut buffer = ratatui::buffer::Buffer::empty(Rect::new(0, 0, 12, 2));
        ratatui::widgets::Widget::render(block, buffer.area, &mut buffer);
        let top: String = (0..12)
            .map(|x| buffer[(x, 0)].symbol().to_string())
            .collect();
        assert!(top.is_ascii() && top.contains('-'), "{top:?}");
    }
}

//! Pieces of the history charts (the strata view, the evidence view) and of marked
//! sparklines: time axes with labels, byte axes, runs of styled glyphs, climb marks.

use crate::history::Series;
use crate::units;
use ratatui::style::Style;
use ratatui::text::Span;

/// Where a climb began: on sparklines, under charts.
pub const CLIMB_MARK: char = '▲';

/// Width of a chart's byte axis: a label (`79.6G`) and the axis itself.
pub const Y_AXIS: usize = 7;

/// Styled glyphs gathered into as few spans as their styles allow.
#[derive(Default)]
pub struct Runs {
    spans: Vec<Span<'static>>,
    text: String,
    style: Style,
}

impl Runs {
    pub fn push(&mut self, glyph: char, style: Style) {
        if style != self.style && !self.text.is_empty() {
            self.flush();
        }
        self.style = style;
        self.text.push(glyph);
    }

    pub fn push_str(&mut self, text: &str, style: Style) {
        for c in text.chars() {
            self.push(c, style);
        }
    }

    fn flush(&mut self) {
        let text = std::mem::take(&mut self.text);
        self.spans.push(Span::styled(text, self.style));
    }

    pub fn finish(mut self) -> Vec<Span<'static>> {
        if !self.text.is_empty() {
            self.flush();
        }
        self.spans
    }
}

/// A time axis: `width` columns covering `window` seconds up to `end` (unix seconds).
#[derive(Debug, Clone, Copy)]
pub struct TimeAxis {
    pub end: f64,
    pub window: f64,
    pub width: usize,
}

/// Tick spacings, seconds: the first that leaves room for a label between ticks is used.
const TICK_SPACINGS: [f64; 12] = [
    60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10_800.0, 14_400.0, 21_600.0,
    43_200.0,
];
/// Columns a time label (`09:15`) needs, with a gap.
const LABEL_ROOM: f64 = 8.0;

impl TimeAxis {
    pub fn start(&self) -> f64 {
        self.end - self.window
    }

    /// Seconds one column covers.
    pub fn column_secs(&self) -> f64 {
        self.window / self.width.max(1) as f64
    }

    /// The column a time falls in, if it is on the axis.
    pub fn column(&self, time: f64) -> Option<usize> {
        if !time.is_finite() || time < self.start() || time > self.end || self.width == 0 {
            return None;
        }
        let at = ((time - self.start()) / self.window * self.width as f64).floor() as usize;
        Some(at.min(self.width - 1))
    }

    /// Tick times, on whole minutes or hours of UTC, with their columns.
    pub fn ticks(&self) -> Vec<(usize, f64)> {
        let per_column = self.column_secs();
        let Some(spacing) = TICK_SPACINGS
            .iter()
            .copied()
            .find(|s| s / per_column >= LABEL_ROOM)
        else {
            return Vec::new();
        };
        let mut ticks = Vec::new();
        let mut t = (self.start() / spacing).ceil() * spacing;
        while t <= self.end {
            if let Some(c) = self.column(t) {
                ticks.push((c, t));
            }
            t += spacing;
        }
        ticks
    }

    /// The axis rule: `─` with `┬` at the ticks and `marks` (a glyph and its style) on top.
    pub fn rule(&self, marks: &[(usize, char, Style)], style: Style) -> Vec<Span<'static>> {
        let mut cells = vec![('─', style); self.width];
        for (c, _) in self.ticks() {
            cells[c] = ('┬', style);
        }
        for &(c, glyph, mark_style) in marks {
            if let Some(cell) = cells.get_mut(c) {
                *cell = (glyph, mark_style);
            }
        }
        let mut runs = Runs::default();
        for (glyph, style) in cells {
            runs.push(glyph, style);
        }
        runs.finish()
    }

    /// Time labels (`09:15`, UTC) centred under the ticks, skipping any that would overlap.
    pub fn labels(&self) -> String {
        let mut line = vec![' '; self.width];
        let mut free_from = 0;
        for (c, t) in self.ticks() {
            let text: Vec<char> = units::clock(t)[..5].chars().collect();
            let Some(from) = c.checked_sub(text.len() / 2) else {
                continue;
            };
            if from < free_from || from + text.len() > self.width {
                continue;
            }
            line[from..from + text.len()].copy_from_slice(&text);
            free_from = from + text.len() + 1;
        }
        line.into_iter().collect()
    }
}

/// The byte axis of a chart `height` rows tall whose top is `top` bytes: per row from the
/// top, the label of the row's upper edge where one is shown (the top, and about every
/// quarter), else blank; `Y_AXIS - 1` wide.
pub fn byte_labels(top: u64, height: usize) -> Vec<String> {
    let mut labels = vec![String::new(); height];
    if height == 0 {
        return labels;
    }
    for quarter in [4usize, 3, 2, 1] {
        let edge = (quarter * height + 2) / 4; // rows below the labelled edge, rounded
        if edge == 0 || (quarter < 4 && edge == height) {
            continue;
        }
        let row = height - edge;
        if labels[row].is_empty() {
            let value = (u128::from(top) * edge as u128 / height as u128) as u64;
            labels[row] = super::widgets::short_bytes(Some(value));
        }
    }
    labels
        .into_iter()
        .map(|l| format!("{:>width$}", l, width = Y_AXIS - 1))
        .collect()
}

/// Columns of a sparkline of `series`' last `width` raw values (as
/// [`super::widgets::sparkline`] draws them, right-aligned) where one of `starts` falls.
pub fn spark_marks(series: &Series, width: usize, starts: &[f64]) -> Vec<usize> {
    let shown = series.len().min(width);
    let (Some(last), step) = (series.last_time(), series.step()) else {
        return Vec::new();
    };
    if shown == 0 {
        return Vec::new();
    }
    let first = last - (shown - 1) as f64 * step;
    starts
        .iter()
        .filter(|&&s| s.is_finite() && s >= first - step / 2.0 && s <= last + step / 2.0)
        .map(|&s| {
            let i = (((s - first) / step).round().max(0.0) as usize).min(shown - 1);
            width - shown + i
        })
        .collect()
}

/// A sparkline with [`CLIMB_MARK`] at the `marks` columns, in `mark_style`.
pub fn marked(text: &str, marks: &[usize], style: Style, mark_style: Style) -> Vec<Span<'static>> {
    let mut runs = Runs::default();
    for (i, c) in text.chars().enumerate() {
        if marks.contains(&i) {
            runs.push(CLIMB_MARK, mark_style);
        } else {
            runs.push(c, style);
        }
    }
    runs.finish()
}

/// The sparkline of `series`' last `width` raw values (blank where there is none), scaled to
/// `ceiling`, with [`CLIMB_MARK`] where one of `starts` (where climbs began) falls.
pub fn marked_sparkline(
    series: Option<&Series>,
    width: usize,
    ceiling: Option<u64>,
    starts: &[f64],
    style: Style,
    mark_style: Style,
) -> Vec<Span<'static>> {
    let values = series.map(|s| s.recent(width)).unwrap_or_default();
    let text = super::widgets::sparkline(&values, width, ceiling);
    let marks = series.map_or_else(Vec::new, |s| spark_marks(s, width, starts));
    marked(&text, &marks, style, mark_style)
}

/// A window as short as it reads: `45s`, `8m`, `2h`.
pub fn short_window(secs: f64) -> String {
    if !secs.is_finite() || secs <= 0.0 {
        return String::new();
    }
    if secs < 90.0 {
        format!("{secs:.0}s")
    } else if secs < 5400.0 {
        format!("{:.0}m", secs / 60.0)
    } else {
        format!("{:.0}h", secs / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Scale;

    #[test]
    fn a_time_axis_ticks_on_whole_minutes_with_room_for_labels() {
        // 15 minutes over 90 columns: 10 s a column, a tick every 2 minutes.
        let axis = TimeAxis {
            end: 1_767_258_905.0,
            window: 900.0,
            width: 90,
        };
        let ticks = axis.ticks();
        assert!(ticks.iter().all(|(_, t)| t % 120.0 == 0.0), "{ticks:?}");
        assert_eq!(ticks.len(), 7, "09:02 to 09:14");
        let labels = axis.labels();
        assert_eq!(labels.chars().count(), 90);
        assert!(
            labels.contains("09:02") && labels.contains("09:14"),
            "{labels}"
        );
        assert_eq!(axis.column(axis.end), Some(89));
        assert_eq!(axis.column(axis.start()), Some(0));
        assert_eq!(axis.column(axis.start() - 1.0), None);
    }

    #[test]
    fn byte_labels_start_at_the_top_with_the_total() {
        let labels = byte_labels(80 << 30, 8);
        assert_eq!(labels[0].trim(), "80.0G");
        assert_eq!(labels[4].trim(), "40.0G");
        assert_eq!(labels[6].trim(), "20.0G");
        assert!(labels[7].trim().is_empty());
        assert!(labels.iter().all(|l| l.chars().count() == Y_AXIS - 1));
    }

    #[test]
    fn sparkline_marks_land_on_the_column_of_their_time() {
        let mut s = Series::new(Scale::Unit, 10.0, 0.0);
        for i in 0..20 {
            s.push(i as f64 * 10.0, Some(i));
        }
        // The last 8 values are at 120..190 s, right-aligned in 10 columns: 120 s is column 2.
        assert_eq!(spark_marks(&s, 10, &[120.0, 150.0, 50.0]), vec![2, 5]);
        let spans = marked("▁▂▃▄", &[1], Style::new(), Style::new());
        let text: String = spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(text, "▁▲▃▄");
    }

    #[test]
    fn windows_read_short() {
        assert_eq!(short_window(480.0), "8m");
        assert_eq!(short_window(600.0), "10m");
        assert_eq!(short_window(45.0), "45s");
        assert_eq!(short_window(7200.0), "2h");
        assert_eq!(short_window(f64::NAN), "");
    }
}

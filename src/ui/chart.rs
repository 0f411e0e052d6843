//! Pieces of the history charts (the strata view, the evidence view) and of marked
//! sparklines: time axes with labels, byte axes, runs of styled glyphs, climb marks.

use crate::history::Series;
use crate::units;
use ratatui::style::Style;
use ratatui::text::Span;

/// Where a climb began: on sparklines, under charts.
pub(crate) const CLIMB_MARK: char = '▲';

/// Width of a chart's byte axis: a label (`79.6G`) and the axis itself.
pub(crate) const Y_AXIS: usize = 7;

/// Styled glyphs gathered into as few spans as their styles allow.
#[derive(Default)]
pub(crate) struct Runs {
    spans: Vec<Span<'static>>,
    text: String,
    style: Style,
}

impl Runs {
    pub(crate) fn push(&mut self, glyph: char, style: Style) {
        if style != self.style && !self.text.is_empty() {
            self.flush();
        }
        self.style = style;
        self.text.push(glyph);
    }

    pub(crate) fn push_str(&mut self, text: &str, style: Style) {
        for c in text.chars() {
            self.push(c, style);
        }
    }

    fn flush(&mut self) {
        let text = std::mem::take(&mut self.text);
        self.spans.push(Span::styled(text, self.style));
    }

    pub(crate) fn finish(mut self) -> Vec<Span<'static>> {
        if !self.text.is_empty() {
            self.flush();
        }
        self.spans
    }
}

/// A time axis: `width` columns covering `window` seconds up to `end` (unix seconds).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimeAxis {
    pub(crate) end: f64,
    pub(crate) window: f64,
    pub(crate) width: usize,
}

/// Tick spacings, seconds: the first that leaves room for a label between ticks is used.
const TICK_SPACINGS: [f64; 12] = [
    60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10_800.0, 14_400.0, 21_600.0,
    43_200.0,
];
/// Columns a time label (`09:15`) needs, with a gap.
const LABEL_ROOM: f64 = 8.0;

impl TimeAxis {
    pub(crate) fn start(&self) -> f64 {
        self.end - self.window
    }

    /// Seconds one column covers.
    pub(crate) fn column_secs(&self) -> f64 {
        self.window / self.width.max(1) as f64
    }

    /// The column a time falls in, if it is on the axis.
    pub(crate) fn column(&self, time: f64) -> Option<usize> {
        if !time.is_finite() || time < self.start() || time > self.end || self.width == 0 {
            return None;
        }
        let at = ((time - self.start()) / self.window * self.width as f64).floor() as usize;
        Some(at.min(self.width - 1))
    }

    /// Tick times, on whole minutes or hours of UTC, with their columns.
    pub(crate) fn ticks(&self) -> Vec<(usize, f64)> {
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
    pub(crate) fn rule(&self, marks: &[(usize, char, Style)], style: Style) -> Vec<Span<'static>> {
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
    pub(crate) fn labels(&self) -> String {
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
pub(crate) fn byte_labels(top: u64, height: usize) -> Vec<String> {
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

/// How a sparkline up to `width` cells wide reads its series: `cells` cells (right-aligned)
/// of `bucket` seconds each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Spark {
    pub(crate) cells: usize,
    pub(crate) bucket: f64,
}

impl Spark {
    /// A sparkline up to `width` cells wide of a series sampled every `step` seconds: about
    /// ten minutes across, each cell a round number of seconds (so cells begin on the
    /// clock's round seconds) and never finer than the samples; fewer cells where a full row
    /// would reach past the full-resolution history.
    pub(crate) fn new(width: usize, step: f64) -> Spark {
        const NICE: [f64; 12] = [
            1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
        ];
        let step = if step.is_finite() && step > 0.0 {
            step
        } else {
            1.0
        };
        let want = (600.0 / width.max(1) as f64).max(step);
        let bucket = NICE.into_iter().find(|&b| b >= want).unwrap_or(1800.0);
        // The full-resolution history reaches RAW_SECS; past it, points are ten samples
        // apart, and a cell finer than that would be blank between them.
        let cells = if bucket * width as f64 > crate::history::RAW_SECS && bucket < 10.0 * step {
            ((crate::history::RAW_SECS / bucket).floor() as usize).min(width)
        } else {
            width
        };
        Spark { cells, bucket }
    }

    /// For `series` (or, without one, samples every `step` seconds).
    pub(crate) fn of(width: usize, series: Option<&Series>, step: f64) -> Spark {
        Spark::new(width, series.map_or(step, Series::step))
    }

    /// The seconds the sparkline covers.
    pub(crate) fn window(&self) -> f64 {
        self.bucket * self.cells as f64
    }

    /// The peak of `series` in each cell, oldest first, the last the cell that holds `now`
    /// ([`Series::cell_peaks`]): a sparkline that moves along once a cell, not at every
    /// sample, so a slow link carries only the cell that changed.
    pub(crate) fn peaks(&self, series: &Series, now: f64) -> Vec<Option<u64>> {
        series.cell_peaks(now, self.cells, self.bucket)
    }

    /// The cells (counted from the left of `width`, the sparkline right-aligned) where one of
    /// `starts` falls.
    pub(crate) fn marks(&self, now: f64, width: usize, starts: &[f64]) -> Vec<usize> {
        if self.cells == 0 || !now.is_finite() {
            return Vec::new();
        }
        let end = ((now / self.bucket).floor() + 1.0) * self.bucket;
        let first = end - self.window();
        let offset = width.saturating_sub(self.cells);
        starts
            .iter()
            .filter(|&&s| s.is_finite() && s >= first && s < end)
            .map(|&s| offset + (((s - first) / self.bucket) as usize).min(self.cells - 1))
            .collect()
    }
}

/// A sparkline with [`CLIMB_MARK`] at the `marks` columns, in `mark_style`.
pub(crate) fn marked(
    text: &str,
    marks: &[usize],
    style: Style,
    mark_style: Style,
) -> Vec<Span<'static>> {
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

/// The sparkline of `series`' peaks, read as [`Spark::of`] says, up to `now` (blank where
/// there is none), scaled to `ceiling`, with [`CLIMB_MARK`] where one of `starts` (where
/// climbs began) falls.
pub(crate) fn marked_sparkline(
    series: Option<&Series>,
    now: f64,
    width: usize,
    ceiling: Option<u64>,
    starts: &[f64],
    style: Style,
    mark_style: Style,
) -> Vec<Span<'static>> {
    SparkRead::of(series, now, width, starts).spans(width, ceiling, style, mark_style)
}

/// What a [`marked_sparkline`] shows of its series, read and not yet drawn: the same read
/// draws the same sparkline, so that one drawn from it need not be drawn again.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SparkRead {
    /// Each cell's peak, oldest first; `None` without a series (a blank sparkline).
    values: Option<Vec<Option<u64>>>,
    /// The cells where a climb began.
    marks: Vec<usize>,
}

impl SparkRead {
    pub(crate) fn of(series: Option<&Series>, now: f64, width: usize, starts: &[f64]) -> SparkRead {
        let Some(series) = series else {
            return SparkRead {
                values: None,
                marks: Vec::new(),
            };
        };
        let spark = Spark::of(width, Some(series), 1.0);
        SparkRead {
            values: Some(spark.peaks(series, now)),
            marks: spark.marks(now, width, starts),
        }
    }

    pub(crate) fn spans(
        &self,
        width: usize,
        ceiling: Option<u64>,
        style: Style,
        mark_style: Style,
    ) -> Vec<Span<'static>> {
        match &self.values {
            None => marked(&" ".repeat(width), &[], style, mark_style),
            Some(values) => {
                let text = super::widgets::sparkline(values, width, ceiling);
                marked(&text, &self.marks, style, mark_style)
            }
        }
    }
}

/// A window as short as it reads: `45s`, `8m`, `2h`.
pub(crate) fn short_window(secs: f64) -> String {
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
    fn a_sparkline_moves_once_a_cell_not_at_every_sample() {
        // A saw-tooth sampled every second: from one second to the next, only the last cell
        // may change, and not at all once the cell has seen its peak.
        let mut s = Series::new(Scale::Unit, 1.0, 0.0);
        let spark = Spark::new(10, 1.0);
        let mut previous: Option<Vec<Option<u64>>> = None;
        for t in 0..1200u64 {
            s.push(t as f64, Some(100 + (t % 7) * 10));
            let peaks = spark.peaks(&s, t as f64);
            assert_eq!(peaks.len(), 10);
            if let Some(before) = &previous {
                let changed: Vec<usize> = (0..10).filter(|&i| peaks[i] != before[i]).collect();
                if t % 60 != 0 {
                    assert!(
                        changed.iter().all(|&i| i == 9),
                        "at {t}: cells {changed:?} moved"
                    );
                }
            }
            previous = Some(peaks);
        }
        assert_eq!(
            spark,
            Spark {
                cells: 10,
                bucket: 60.0
            }
        );
        assert_eq!(Spark::new(7, 1.0).window(), 840.0);
        // Never finer than the samples, and no blanks between the coarser points past the
        // full-resolution history: fewer cells instead.
        assert_eq!(
            Spark::new(140, 10.0),
            Spark {
                cells: 90,
                bucket: 10.0
            }
        );
        assert_eq!(
            Spark::new(8, 1.0),
            Spark {
                cells: 8,
                bucket: 120.0
            }
        );
    }

    #[test]
    fn sparkline_marks_land_on_the_column_of_their_time() {
        // 10 cells of 60 s: the last is 540..600 s, holding now (570 s); the first 0..60 s;
        // right-aligned in 12 columns.
        let spark = Spark::new(10, 1.0);
        assert_eq!(
            spark.marks(570.0, 12, &[120.0, 150.0, 599.0, 600.0, -1.0]),
            vec![4, 4, 11]
        );
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

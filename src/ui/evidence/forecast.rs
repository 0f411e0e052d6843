//! Two charts of the evidence view: a forecast (the series that climbs, its fitted line
//! carried on past now, and the line it will cross, with where it crosses), and memory
//! against training step (the step-end readings of a process).

use crate::detect::{evidence, Severity};
use crate::history::{Series, Steps};
use crate::layers::Layer;
use crate::present::fit;
use crate::ui::chart::{byte_labels, Runs, TimeAxis, Y_AXIS};
use crate::ui::theme::Theme;
use crate::ui::widgets::pack;
use crate::units;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

const ROWS: usize = 8;
const TICKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// Where the fitted line meets the line it will cross.
const CROSSING: char = '✕';

/// What a forecast's evidence says to draw.
pub(super) struct Forecast {
    /// The series' level now, its pace (bytes a second) and the line it will cross.
    pub(crate) level: u64,
    pub(crate) rate: f64,
    pub(crate) limit: u64,
    pub(crate) eta: f64,
    pub(crate) start: Option<f64>,
}

impl Forecast {
    pub(crate) fn of(evidence: &evidence::Forecast) -> Option<Forecast> {
        Some(Forecast {
            level: evidence.level_bytes.0,
            rate: Some(evidence.rate_bytes_per_sec.0).filter(|r| r.is_finite())?,
            limit: evidence.limit_bytes.0,
            eta: Some(evidence.eta_secs.0).filter(|e| e.is_finite() && *e >= 0.0)?,
            start: Some(evidence.start.0).filter(|s| s.is_finite()),
        })
    }
}

/// The series over the past `window` and the forecast over what comes after now, up to the
/// crossing (at most as long again as the past shown).
#[allow(clippy::too_many_arguments)]
pub(super) fn forecast_chart(
    series: &Series,
    label: &str,
    layer: Layer,
    f: &Forecast,
    now: f64,
    window: f64,
    width: usize,
    theme: Theme,
) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if width <= Y_AXIS + 4 {
        return out;
    }
    let ahead = f.eta.clamp(window / 20.0, window);
    let axis = TimeAxis {
        end: now + ahead,
        window: window + ahead,
        width: width - Y_AXIS,
    };
    out.push(Line::styled(
        fit(
            &format!(
                "{label} · the last {} and the next {} at the present rate",
                units::duration(window),
                units::duration(ahead)
            ),
            width,
        ),
        theme.table_header(),
    ));
    let resolution = series.resolution(axis.window).max(f64::MIN_POSITIVE);
    let cols = axis.width;
    let n = ((axis.window / (resolution * 1.0001)).floor() as usize).clamp(1, cols);
    let chunks = series.chunks(axis.end, axis.window, n);
    let columns: Vec<Option<crate::history::Span>> = (0..cols)
        .map(|c| chunks[(c * n / cols).min(n - 1)])
        .collect();
    let top = columns
        .iter()
        .flatten()
        .map(|s| s.max)
        .chain([f.limit, f.level])
        .max()
        .unwrap_or(0)
        .max(1);
    let eighths = |v: f64| (v.max(0.0) * (ROWS * 8) as f64 / top as f64) as usize;
    let column_time = |c: usize| axis.start() + (c as f64 + 0.5) * axis.column_secs();
    // The fitted line, through the level now at the present rate.
    let fitted = |c: usize| f.level as f64 + f.rate * (column_time(c) - now);
    let limit_row = (eighths(f.limit as f64) / 8).min(ROWS - 1);
    let now_col = axis.column(now);
    let cross = axis.column(now + f.eta);
    let start = f.start.and_then(|s| axis.column(s));
    let solid = theme.layer(layer);
    let warn = theme.severity(Severity::Warning);
    let crit = theme.severity(Severity::Critical);
    for (r, label) in byte_labels(top, ROWS).into_iter().enumerate() {
        let row = ROWS - 1 - r;
        let mut runs = Runs::default();
        runs.push_str(&label, theme.dim());
        runs.push(
            if label.trim().is_empty() {
                '│'
            } else {
                '┤'
            },
            theme.border(),
        );
        for (c, column) in columns.iter().enumerate() {
            let fit_row = eighths(fitted(c)) / 8;
            let (glyph, style) = match column {
                Some(span) => {
                    let floor = eighths(span.min as f64);
                    let peak = eighths(span.max as f64).div_ceil(8);
                    if floor >= (row + 1) * 8 {
                        ('█', solid)
                    } else if floor > row * 8 {
                        (TICKS[floor - row * 8 - 1], solid)
                    } else if row == fit_row && fitted(c) >= 0.0 {
                        ('•', warn)
                    } else if row < peak {
                        ('░', solid)
                    } else if row == limit_row {
                        ('─', crit)
                    } else {
                        (' ', Style::new())
                    }
                }
                None if Some(c) == cross && row == limit_row => (CROSSING, crit),
                None if row == fit_row && Some(c) > now_col && fitted(c) <= f.limit as f64 => {
                    ('•', warn)
                }
                None if row == limit_row => ('─', crit),
                None if Some(c) == now_col => ('┊', theme.dim()),
                None => (' ', Style::new()),
            };
            runs.push(glyph, style);
        }
        out.push(Line::from(runs.finish()));
    }
    let mut marks: Vec<(usize, char, Style)> = Vec::new();
    if let Some(c) = start {
        marks.push((c, crate::ui::chart::CLIMB_MARK, warn));
    }
    if let Some(c) = now_col {
        marks.push((c, '┼', theme.dim()));
    }
    if let Some(c) = cross {
        marks.push((c, CROSSING, crit));
    }
    let mut rule = vec![Span::styled(
        format!("{:>w$}└", "0", w = Y_AXIS - 1),
        theme.dim(),
    )];
    rule.extend(axis.rule(&marks, theme.border()));
    out.push(Line::from(rule));
    out.push(Line::styled(
        format!("{}{}", " ".repeat(Y_AXIS), axis.labels()),
        theme.dim(),
    ));
    let key = vec![
        vec![Span::styled("█", solid), Span::raw(" least in each column")],
        vec![Span::styled("░", solid), Span::raw(" up to the most")],
        vec![
            Span::styled("•", warn),
            Span::raw(format!(
                " fitted: {:+.0} MiB/min",
                f.rate * 60.0 / f64::from(1 << 20)
            )),
        ],
        vec![
            Span::styled("─", crit),
            Span::raw(format!(" what can be had: {}", units::bytes(f.limit))),
        ],
        vec![
            Span::styled(CROSSING.to_string(), crit),
            Span::raw(format!(
                " crossed in ~{} ({} UTC)",
                units::duration(f.eta),
                units::clock(now + f.eta)
            )),
        ],
    ];
    out.extend(pack(key, width, 2));
    out
}

/// Live bytes at the end of each step, against step: each column the least and the most of
/// the step-end readings in its steps.
pub(crate) fn step_chart(steps: &Steps, width: usize, theme: Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let points = steps.points();
    let (Some(first), Some(last)) = (points.front(), points.back()) else {
        return out;
    };
    if width <= Y_AXIS + 4 || last.step <= first.step {
        return out;
    }
    let cols = width - Y_AXIS;
    let span = last.step - first.step + 1;
    let mut columns: Vec<Option<(u64, u64)>> = vec![None; cols];
    for p in points {
        let c =
            (((p.step - first.step) as u128 * cols as u128 / span as u128) as usize).min(cols - 1);
        columns[c] = Some(columns[c].map_or((p.allocated, p.allocated), |(lo, hi)| {
            (lo.min(p.allocated), hi.max(p.allocated))
        }));
    }
    let top = columns
        .iter()
        .flatten()
        .map(|c| c.1)
        .max()
        .unwrap_or(0)
        .max(1);
    let eighths = |v: u64| (u128::from(v) * (ROWS as u128 * 8) / u128::from(top)) as usize;
    out.push(Line::styled(
        fit(
            &format!(
                "allocated at the end of each step (memory against step) · steps {} to {}",
                first.step, last.step
            ),
            width,
        ),
        theme.table_header(),
    ));
    let solid = theme.layer(Layer::Live);
    for (r, label) in byte_labels(top, ROWS).into_iter().enumerate() {
        let row = ROWS - 1 - r;
        let mut runs = Runs::default();
        runs.push_str(&label, theme.dim());
        runs.push(
            if label.trim().is_empty() {
                '│'
            } else {
                '┤'
            },
            theme.border(),
        );
        for column in &columns {
            let (glyph, style) = match column {
                Some((lo, hi)) => {
                    let floor = eighths(*lo);
                    let peak = eighths(*hi).div_ceil(8);
                    if floor >= (row + 1) * 8 {
                        ('█', solid)
                    } else if floor > row * 8 {
                        (TICKS[floor - row * 8 - 1], solid)
                    } else if row < peak {
                        ('░', solid)
                    } else {
                        (' ', Style::new())
                    }
                }
                None => (' ', Style::new()),
            };
            runs.push(glyph, style);
        }
        out.push(Line::from(runs.finish()));
    }
    out.push(Line::styled(
        format!("{:>w$}└{}", "0", "─".repeat(cols), w = Y_AXIS - 1),
        theme.dim(),
    ));
    let left = format!("step {}", first.step);
    let right = format!("step {}", last.step);
    let gap = cols.saturating_sub(left.len() + right.len());
    out.push(Line::styled(
        fit(
            &format!("{}{left}{}{right}", " ".repeat(Y_AXIS), " ".repeat(gap)),
            width,
        ),
        theme.dim(),
    ));
    out
}

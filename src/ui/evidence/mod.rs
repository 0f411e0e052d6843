//! The evidence view of one finding: what it is, where, since when, its whole message, what to
//! do about it (its advice), every field of its evidence with its unit, and for a climb (or
//! fragmentation) a chart of the series behind it, the climb's start marked.

pub(crate) mod forecast;

use super::chart::{byte_labels, Runs, TimeAxis, CLIMB_MARK, Y_AXIS};
use super::theme::Theme;
use super::widgets::wrap;
use crate::app::{ClimbNote, FindingId, State};
use crate::detect::{device_name, Evidence, Finding, FindingKind, Severity};
use crate::history::{KeyRef, Metric, Series, SeriesKey};
use crate::layers::Layer;
use crate::pipeline::Observed;
use crate::present::evidence as fields;
use crate::present::fit;
use crate::sample::ProcessSample;
use crate::units;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;

/// Rows of the chart of a climb.
const CHART_ROWS: usize = 8;
/// Width of the field names column.
const NAME_WIDTH: usize = 22;

pub(crate) fn draw_evidence(
    frame: &mut Frame<'_>,
    area: Rect,
    state: &State,
    observed: &Observed,
    id: &FindingId,
    theme: Theme,
) {
    let found = state.evidence_finding(id);
    let severity = found.map_or_else(String::new, |(f, _)| format!(" {} ", f.severity.label()));
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.focused_border())
        .title(Line::styled(
            format!(" Finding · {} ", id.kind.name()),
            theme.title(),
        ))
        .title_top(Line::from(severity).right_aligned());
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let width = inner.width as usize;
    let lines = match found {
        Some((finding, raised)) => lines(state, observed, finding, raised, width, theme),
        None => vec![Line::styled(
            fit("This finding is no longer raised. Esc goes back.", width),
            theme.dim(),
        )],
    };
    let room = lines.len().saturating_sub(inner.height as usize);
    state.views.scroll_room.set(Some(room));
    let start = state.views.evidence_scroll.min(room);
    super::widgets::put_lines(frame, inner, &lines[start..]);
}

fn lines(
    state: &State,
    observed: &Observed,
    finding: &Finding,
    raised: bool,
    width: usize,
    theme: Theme,
) -> Vec<Line<'static>> {
    let sample = &observed.sample;
    let now = sample.time;
    let mut out = Vec::new();
    let mut fact = |name: &str, text: String, style: Style| {
        out.push(Line::from(vec![
            Span::styled(format!("{name:<10}"), theme.dim()),
            Span::styled(fit(&text, width.saturating_sub(10)), style),
        ]));
    };
    let severity = match finding.severity {
        Severity::Critical => "critical",
        Severity::Warning => "warning",
        Severity::Info => "information",
    };
    fact(
        "severity",
        severity.to_string(),
        theme.severity(finding.severity),
    );
    fact("kind", finding.kind.name(), Style::new());
    let device = match finding.device_uuid.as_deref() {
        Some(uuid) => {
            let model = sample
                .locate(uuid)
                .and_then(|(g, _)| g.name.clone())
                .map_or_else(String::new, |n| format!(" · {n}"));
            format!("{}{model} · {uuid}", device_name(sample, uuid))
        }
        None => "the node (no one device)".into(),
    };
    fact("device", device, Style::new());
    let process = process_of(observed, finding);
    if let Some(pid) = finding.pid {
        let who = match process {
            Some(p) => format!(
                "PID {pid} · user {} · {}",
                p.user.as_deref().unwrap_or("n/a"),
                p.command.as_deref().unwrap_or("command n/a")
            ),
            None => format!("PID {pid} (no longer listed on this device)"),
        };
        fact("process", who, Style::new());
    }
    fact(
        "raised",
        format!(
            "{} UTC · {} ago",
            units::clock(finding.since),
            units::duration(now - finding.since)
        ),
        Style::new(),
    );
    if raised {
        fact(
            "status",
            format!("still raised at {} UTC", units::clock(now)),
            Style::new(),
        );
    } else {
        fact(
            "status",
            format!(
                "cleared: not raised at {} UTC; shown as last seen",
                units::clock(now)
            ),
            theme.alert(),
        );
    }
    out.push(Line::raw(""));
    for line in wrap(&finding.message, width) {
        out.push(Line::raw(line));
    }
    out.push(Line::raw(""));
    out.push(Line::styled("what to do", theme.table_header()));
    for sentence in finding.advice() {
        // Each sentence its own paragraph, hung under a mark.
        for (i, line) in wrap(&sentence, width.saturating_sub(4))
            .into_iter()
            .enumerate()
        {
            let mark = if i == 0 { "  → " } else { "    " };
            out.push(Line::raw(format!("{mark}{line}")));
        }
    }
    out.push(Line::raw(""));
    out.push(Line::styled("evidence", theme.table_header()));
    let rows = fields::rows(&finding.evidence, now);
    if rows.is_empty() {
        out.push(Line::styled("  (no figures)", theme.dim()));
    }
    for (depth, name, value) in rows {
        let indent = 2 + 2 * depth;
        let name_width = NAME_WIDTH.saturating_sub(indent - 2).max(1);
        let text = format!(
            "{}{:<name_width$} {value}",
            " ".repeat(indent),
            fit(&name, name_width)
        );
        out.push(Line::raw(fit(&text, width)));
    }
    let holders = finding.evidence.holders().is_some_and(|h| !h.is_empty());
    if holders {
        out.push(Line::raw(""));
        out.push(Line::styled(
            fit(
                "K: signal one of the holders (SIGINT, SIGTERM or SIGKILL; you confirm first)",
                width,
            ),
            theme.dim(),
        ));
    }
    if let Some(spec) = chart_spec(state, observed, finding, process) {
        out.push(Line::raw(""));
        out.extend(chart(&spec, now, width, theme));
    }
    if let Evidence::OomForecast(evidence) = &finding.evidence {
        let history = &state.pipeline.history;
        let series_name = evidence.series.as_str();
        let metric = match series_name {
            "allocated" => Some(Metric::Allocated),
            "reserved" => Some(Metric::Reserved),
            "used" => Some(Metric::Used),
            s if s == Layer::OutsidePool.name() => Some(Metric::OutsidePool),
            _ => None,
        };
        let series = match (metric, process, finding.device_uuid.as_deref()) {
            (Some(m), Some(p), _) => history.get(&KeyRef::of(p, m)),
            (None, None, Some(uuid)) => {
                history.get(&SeriesKey::device(uuid, Metric::Layer(Layer::Other)))
            }
            _ => None,
        };
        if let (Some(series), Some(f)) = (series, forecast::Forecast::of(evidence)) {
            let lead = f.start.map_or(0.0, |s| (now - s).max(0.0));
            // The past and what comes after now within the finest tier where they fit.
            let ahead = f.eta.min(series.reach()[0] / 2.0);
            let window = (lead * 1.25).max(600.0).min(series.reach()[0] - ahead);
            let label = format!(
                "{}{}",
                series_name,
                finding
                    .pid
                    .map_or_else(String::new, |p| format!(" of PID {p}"))
            );
            out.push(Line::raw(""));
            out.extend(forecast::forecast_chart(
                series,
                &label,
                Layer::Live,
                &f,
                now,
                window,
                width,
                theme,
            ));
        }
    }
    // Memory against step, for a process that reports steps.
    let per_step = match &finding.evidence {
        Evidence::Climb(e) => !e.bytes_per_step.is_none(),
        Evidence::OomForecast(_) | Evidence::WarmingUp(_) => true,
        _ => finding.kind == FindingKind::WarmUp,
    };
    if let (true, Some(p)) = (per_step, process) {
        let id = crate::history::ProcessId::of(p);
        if let Some(steps) = state.pipeline.history.steps(&id) {
            out.push(Line::raw(""));
            out.extend(forecast::step_chart(steps, width, theme));
        }
    }
    out
}

/// The process a finding names, as listed now on its device.
fn process_of<'a>(observed: &'a Observed, finding: &Finding) -> Option<&'a ProcessSample> {
    let pid = finding.pid?;
    observed
        .sample
        .processes
        .iter()
        .find(|p| p.pid == pid && Some(&*p.device_uuid) == finding.device_uuid.as_deref())
}

/// The series behind a finding, and how to draw it.
struct ChartSpec<'a> {
    series: &'a Series,
    /// What the series is, in the metric's own words.
    label: String,
    layer: Layer,
    /// Where a climb began, marked.
    start: Option<f64>,
    window: f64,
}

fn chart_spec<'a>(
    state: &'a State,
    observed: &Observed,
    finding: &Finding,
    process: Option<&ProcessSample>,
) -> Option<ChartSpec<'a>> {
    let history = &state.pipeline.history;
    let now = observed.sample.time;
    let of_process = |metric| process.and_then(|p| history.get(&KeyRef::of(p, metric)));
    let pid = finding
        .pid
        .map_or_else(String::new, |p| format!(" of PID {p}"));
    match finding.kind {
        FindingKind::Climb => {
            let note = ClimbNote::of(finding)?;
            let (series, label, layer) = match Layer::named(&note.cause) {
                Some(Layer::Live) => {
                    // Live tensors climb in the allocated series, or (under a deep saw-tooth)
                    // only in the pool's floor: the one nearer the climb's level.
                    let nearer = |s: &&Series| {
                        let last = s.last().unwrap_or(0);
                        last.abs_diff(note.to_bytes.unwrap_or(0))
                    };
                    let allocated = of_process(Metric::Allocated);
                    let reserved = of_process(Metric::Reserved);
                    let best = allocated.into_iter().chain(reserved).min_by_key(nearer)?;
                    let label = if allocated.is_some_and(|a| std::ptr::eq(a, best)) {
                        "allocated (live tensors)"
                    } else {
                        "reserved (the allocator's pool)"
                    };
                    (best, label, Layer::Live)
                }
                Some(Layer::Cached) => (
                    of_process(Metric::Reserved)?,
                    "reserved (the allocator's pool)",
                    Layer::Cached,
                ),
                Some(Layer::OutsidePool) => (
                    of_process(Metric::OutsidePool)?,
                    "outside_pool (used - reserved - context)",
                    Layer::OutsidePool,
                ),
                None if note.cause == "no_process" => (
                    history.get(&SeriesKey::device(
                        finding.device_uuid.as_deref()?,
                        Metric::Layer(Layer::Other),
                    ))?,
                    "other (memory no listed process holds)",
                    Layer::Other,
                ),
                _ => (
                    of_process(Metric::Used)?,
                    "used (NVML's)",
                    Layer::Unattributed,
                ),
            };
            let lead = (now - note.start).max(0.0);
            let mut window = (lead * 1.25)
                .max(if note.window_secs.is_finite() {
                    note.window_secs
                } else {
                    0.0
                })
                .max(300.0)
                .min(series.reach()[2]);
            // The finest tier that still shows the start: a little less lead-in before it
            // rather than ten times coarser points.
            if let Some(&reach) = series.reach().iter().find(|&&r| lead < r * 0.95) {
                window = window.min(reach);
            }
            Some(ChartSpec {
                series,
                label: format!("{label}{pid}"),
                layer,
                start: Some(note.start),
                window,
            })
        }
        FindingKind::Fragmentation => {
            let window = match &finding.evidence {
                Evidence::Fragmentation(e) => Some(e.window_secs.0),
                _ => None,
            }
            .filter(|w| w.is_finite())
            .unwrap_or(600.0);
            Some(ChartSpec {
                series: of_process(Metric::InactiveSplit)?,
                label: format!("inactive_split (free split pieces){pid}"),
                layer: Layer::Fragmented,
                start: None,
                window: (window * 2.0).max(300.0),
            })
        }
        _ => None,
    }
}

/// The series as columns over its window: solid up to the least value in each column (the
/// floor a climb is read from), shaded up to the most; the climb's start marked.
fn chart(spec: &ChartSpec<'_>, now: f64, width: usize, theme: Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if width <= Y_AXIS + 4 {
        return out;
    }
    let axis = TimeAxis {
        end: now,
        window: spec.window,
        width: width - Y_AXIS,
    };
    out.push(Line::styled(
        fit(
            &format!("{} · the last {}", spec.label, units::duration(spec.window)),
            width,
        ),
        theme.table_header(),
    ));
    let resolution = spec.series.resolution(spec.window).max(f64::MIN_POSITIVE);
    let n = ((spec.window / (resolution * 1.0001)).floor() as usize).clamp(1, axis.width);
    let chunks = spec.series.chunks(now, spec.window, n);
    let columns: Vec<Option<crate::history::Span>> = (0..axis.width)
        .map(|c| chunks[(c * n / axis.width).min(n - 1)])
        .collect();
    let top = columns
        .iter()
        .flatten()
        .map(|s| s.max)
        .max()
        .unwrap_or(0)
        .max(1);
    let rows = CHART_ROWS;
    let eighths = |v: u64| (u128::from(v) * (rows as u128 * 8) / u128::from(top)) as usize;
    let mark = spec.start.and_then(|s| axis.column(s));
    let solid = theme.layer(spec.layer);
    let warn = theme.severity(Severity::Warning);
    const TICKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    for (r, label) in byte_labels(top, rows).into_iter().enumerate() {
        let row = rows - 1 - r;
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
            let Some(span) = column else {
                runs.push(if Some(c) == mark { '┊' } else { ' ' }, warn);
                continue;
            };
            let floor = eighths(span.min);
            let peak = eighths(span.max).div_ceil(8);
            if floor >= (row + 1) * 8 {
                runs.push('█', solid);
            } else if floor > row * 8 {
                runs.push(TICKS[floor - row * 8 - 1], solid);
            } else if row < peak {
                runs.push('░', solid);
            } else if Some(c) == mark {
                runs.push('┊', warn);
            } else {
                runs.push(' ', Style::new());
            }
        }
        out.push(Line::from(runs.finish()));
    }
    let marks: Vec<(usize, char, Style)> =
        mark.map(|c| (c, CLIMB_MARK, warn)).into_iter().collect();
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
    let mut key = vec![
        vec![
            Span::styled("█", solid),
            Span::raw(" least in each column (the floor a climb is read from)"),
        ],
        vec![Span::styled("░", solid), Span::raw(" up to the most")],
    ];
    if let Some(start) = spec.start {
        let began = format!(" began {} UTC", units::clock(start));
        key.push(vec![
            Span::styled(CLIMB_MARK.to_string(), warn),
            Span::raw(match mark {
                Some(_) => began,
                None => format!("{began} (before the chart)"),
            }),
        ]);
    }
    out.extend(super::widgets::pack(key, width, 2));
    out
}

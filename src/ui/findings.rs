//! The findings panel: most severe first, then oldest; Tab focuses it, the arrows select one,
//! Enter opens its evidence. It has the rows the layout gives it (`layout.rs`), whatever the
//! number of findings: a line per finding while they fit, a finding cut at the edge going on
//! over the rows left over; past that, `+N more` and the keys to the rest.

use super::theme::Theme;
use super::widgets::Paint;
use super::widgets::{wrap, Section};
use crate::app::{Focus, State};
use crate::detect::Finding;
use crate::pipeline::Observed;
use crate::present::fit;
use crate::units;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

/// What a finding's line says after its severity and age: everything the line has to say
/// is built here, so that what is added to it is added once.
pub(crate) fn finding_text(finding: &Finding) -> String {
    finding.message.clone()
}

/// The severity and age before each finding's text: `crit    15m  `.
fn lead(finding: &Finding, now: f64) -> String {
    format!(
        "{:<4} {:>6}  ",
        finding.severity.label(),
        units::age(now - finding.since)
    )
}

/// The width of [`lead`]: where a finding's text starts, and goes on below.
const LEAD: usize = 13;

pub(crate) fn draw_findings(
    paint: &mut Paint,
    area: Rect,
    state: &State,
    observed: &Observed,
    theme: Theme,
) {
    let focused = state.focus == Focus::Findings;
    let findings = &observed.findings;
    let section = Section::new(format!(" Findings ({}) ", findings.len()), focused, theme);
    let inner = section.inner(area);
    paint.section(area, section);
    let lines = panel_lines(
        findings,
        observed.sample.time,
        (inner.width as usize, inner.height as usize),
        (focused, state.selected_finding_index()),
        theme,
    );
    paint.lines(inner, lines);
}

/// The panel's lines in `width` x `rows`.
fn panel_lines(
    findings: &[Finding],
    now: f64,
    (width, rows): (usize, usize),
    (focused, selected): (bool, Option<usize>),
    theme: Theme,
) -> Vec<Line<'static>> {
    if findings.is_empty() {
        return vec![Line::styled("nothing to report", theme.dim())];
    }
    let room = width.saturating_sub(LEAD);
    let highlight = |i: usize, line: Line<'static>| -> Line<'static> {
        if focused && Some(i) == selected {
            // The whole row, padded, so the highlight reads as a bar.
            let pad = width.saturating_sub(line.width());
            let mut line = line;
            line.spans.push(Span::raw(" ".repeat(pad)));
            line.style(theme.selected())
        } else {
            line
        }
    };
    if findings.len() <= rows {
        // A line each; the rows left over go first to the findings cut at the edge, in
        // order, then to the first sentence of each one's advice where it fits whole.
        let mut spare = rows - findings.len();
        let texts: Vec<(String, Vec<String>)> = findings
            .iter()
            .map(|f| {
                let message = finding_text(f);
                let wrapped = wrap(&message, room.max(1));
                (message, wrapped)
            })
            .collect();
        let mut extra: Vec<usize> = Vec::with_capacity(findings.len());
        for (_, wrapped) in &texts {
            let more = wrapped.len().saturating_sub(1).min(spare);
            spare -= more;
            extra.push(more);
        }
        let mut texts = texts;
        for (i, f) in findings.iter().enumerate() {
            let (message, wrapped) = &texts[i];
            if wrapped.len().saturating_sub(1) > extra[i] {
                continue;
            }
            let Some(first) = f.advice().into_iter().next() else {
                continue;
            };
            let full = format!("{message} → {first}");
            let with = wrap(&full, room.max(1));
            let more = with.len().saturating_sub(wrapped.len());
            if more <= spare {
                spare -= more;
                extra[i] += more;
                texts[i] = (full, with);
            }
        }
        let mut lines = Vec::new();
        for (i, f) in findings.iter().enumerate() {
            let (text, wrapped) = &texts[i];
            let shown = fold(text, wrapped, extra[i] + 1, room);
            for (n, part) in shown.into_iter().enumerate() {
                let first = if n == 0 {
                    Span::styled(lead(f, now), theme.severity(f.severity))
                } else {
                    Span::raw(" ".repeat(LEAD))
                };
                lines.push(highlight(i, Line::from(vec![first, Span::raw(part)])));
            }
        }
        return lines;
    }
    // More than there are rows: a window on them that keeps the selection in view, and a
    // last line that says how many more and how to see them.
    let visible = if rows > 1 { rows - 1 } else { rows };
    let start = selected
        .map_or(0, |i| (i + 1).saturating_sub(visible))
        .min(findings.len().saturating_sub(visible));
    let mut lines: Vec<Line<'static>> = findings
        .iter()
        .enumerate()
        .skip(start)
        .take(visible)
        .map(|(i, f)| {
            let line = Line::from(vec![
                Span::styled(lead(f, now), theme.severity(f.severity)),
                Span::raw(crate::present::evidence::finding_line(f, room)),
            ]);
            highlight(i, line)
        })
        .collect();
    if rows > 1 {
        let above = start;
        let below = findings.len() - start - visible;
        lines.push(Line::styled(
            more_line(above, below, focused, width),
            theme.dim(),
        ));
    }
    lines
}

/// A finding's text in `lines` lines of `room`: its words as wrapped, the last line taking
/// the rest, cut with `…` where it does not fit.
fn fold(text: &str, wrapped: &[String], lines: usize, room: usize) -> Vec<String> {
    if wrapped.len() <= lines {
        return if wrapped.is_empty() {
            vec![fit(text, room)]
        } else {
            wrapped.to_vec()
        };
    }
    let mut shown: Vec<String> = wrapped[..lines - 1].to_vec();
    shown.push(fit(&wrapped[lines - 1..].join(" "), room));
    shown
}

/// `+6 more · tab: the list, ↑↓ scroll, ⏎ evidence`, as much as `width` holds: how many
/// findings are out of view and the keys that show them.
pub(crate) fn more_line(above: usize, below: usize, focused: bool, width: usize) -> String {
    let count = match (above, below) {
        (0, n) => format!("+{n} more"),
        (a, 0) => format!("+{a} more above"),
        (a, b) => format!("+{} more ({a} above, {b} below)", a + b),
    };
    let keys: &[&str] = if focused {
        &[" · ↑↓ scroll the findings, ⏎ evidence", " · ↑↓ scroll", ""]
    } else {
        &[
            " · tab: the findings, then ↑↓ scroll, ⏎ evidence",
            " · tab, then ↑↓",
            " · tab",
            "",
        ]
    };
    keys.iter()
        .map(|k| format!("{count}{k}"))
        .find(|t| t.chars().count() <= width)
        .unwrap_or_else(|| fit(&count, width))
}

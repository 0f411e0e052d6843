//! The findings panel: most severe first, then oldest; Tab focuses it, the arrows select one,
//! Enter opens its evidence.

use super::theme::Theme;
use super::widgets::section_block;
use crate::app::{Focus, State};
use crate::pipeline::Observed;
use crate::units;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::Frame;

/// Rows the panel takes: its title and up to a quarter of the screen of findings.
pub(crate) fn height_for(count: usize, body_height: u16) -> u16 {
    let most = (body_height / 4).max(2);
    (count.max(1) as u16 + 1).min(most)
}

pub(crate) fn draw_findings(
    frame: &mut Frame<'_>,
    area: Rect,
    state: &State,
    observed: &Observed,
    theme: Theme,
) {
    let focused = state.focus == Focus::Findings;
    let findings = &observed.findings;
    let block = section_block(format!(" Findings ({}) ", findings.len()), focused, theme);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let width = inner.width as usize;
    let visible = inner.height as usize;
    // The selection in view: the list scrolls just enough to show it.
    let selected = state.selected_finding_index();
    let start = selected
        .map_or(0, |i| (i + 1).saturating_sub(visible))
        .min(findings.len().saturating_sub(visible));
    let now = observed.sample.time;
    let lines: Vec<Line<'_>> = if findings.is_empty() {
        vec![Line::styled("nothing to report", theme.dim())]
    } else {
        findings
            .iter()
            .enumerate()
            .skip(start)
            .take(visible)
            .map(|(i, f)| {
                let lead = format!(
                    "{:<4} {:>6}  ",
                    f.severity.label(),
                    units::age(now - f.since)
                );
                let text = crate::present::evidence::finding_line(
                    f,
                    width.saturating_sub(lead.chars().count()),
                );
                let line = Line::from(vec![
                    Span::styled(lead, theme.severity(f.severity)),
                    Span::raw(text),
                ]);
                if focused && Some(i) == selected {
                    // The whole row, padded, so the highlight reads as a bar.
                    let pad = width.saturating_sub(line.width());
                    let mut line = line;
                    line.spans.push(Span::raw(" ".repeat(pad)));
                    line.style(theme.selected())
                } else {
                    line
                }
            })
            .collect()
    };
    super::widgets::put_lines(frame, inner, &lines);
}

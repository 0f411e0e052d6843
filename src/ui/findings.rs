//! The findings panel: zombie contexts, invisible holders, unattributed and unexplained usage.

use super::theme::Theme;
use super::widgets::{fit, section_block};
use crate::app::{Focus, State};
use crate::pipeline::Observed;
use crate::units;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::Frame;

/// Rows the panel takes: its title and up to a quarter of the screen of findings.
pub fn height_for(count: usize, body_height: u16) -> u16 {
    let most = (body_height / 4).max(2);
    (count.max(1) as u16 + 1).min(most)
}

pub fn draw_findings(
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
    let start = state
        .finding_scroll
        .min(findings.len().saturating_sub(visible));
    let now = observed.sample.time;
    let lines: Vec<Line<'_>> = if findings.is_empty() {
        vec![Line::styled("nothing to report", theme.dim())]
    } else {
        findings
            .iter()
            .skip(start)
            .take(visible)
            .map(|f| {
                let lead = format!(
                    "{:<4} {:>6}  ",
                    f.severity.label(),
                    units::duration(now - f.since)
                );
                let text = fit(&f.message, width.saturating_sub(lead.chars().count()));
                Line::from(vec![
                    Span::styled(lead, theme.severity(f.severity)),
                    Span::raw(text),
                ])
            })
            .collect()
    };
    super::widgets::put_lines(frame, inner, &lines);
}

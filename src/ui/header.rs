//! The header line (host, versions, clock, state) and the footer (keys, status).

use super::theme::Theme;
use super::widgets::fit;
use crate::app::{Focus, State, View};
use crate::units;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::Frame;

pub fn draw_header(frame: &mut Frame<'_>, area: Rect, state: &State, theme: Theme) {
    let sample = state.current.as_ref().map(|o| &o.sample);
    let host = crate::text::clean(sample.map_or("…", |s| s.host.as_str()));
    let driver = crate::text::clean(
        sample
            .and_then(|s| s.driver_version.as_deref())
            .unwrap_or("n/a"),
    );
    let cuda = crate::text::clean(
        sample
            .and_then(|s| s.cuda_driver_version.as_deref())
            .unwrap_or("n/a"),
    );
    let gpus = sample.map_or(0, |s| s.gpus.len());
    let clock = sample.map_or_else(|| "--:--:--".into(), |s| units::clock(s.time));
    let mode = if state.paused {
        format!("‖ paused ({} queued)", state.queued.len())
    } else if let Some(file) = &state.recording {
        format!("● rec {file}")
    } else {
        "● live".into()
    };
    let plural = if gpus == 1 { "" } else { "s" };
    let label = &state.source_label;
    let interval = state.interval;
    // The richest line that fits; the state (live, paused, recording) is in every one.
    let variants = [
        format!(" strata │ {host} [{label}] │ driver {driver} │ CUDA {cuda} │ {gpus} GPU{plural} │ every {interval:.1}s │ {clock} UTC │ {mode} │ ? help"),
        format!(" strata │ {host} │ driver {driver} │ CUDA {cuda} │ {gpus} GPU{plural} │ {interval:.1}s │ {clock} │ {mode}"),
        format!(" strata {host} │ drv {driver} │ CUDA {cuda} │ {gpus}GPU │ {interval:.1}s │ {clock} │ {mode}"),
        format!(" {mode} │ {host} │ {clock} │ drv {driver} │ CUDA {cuda}"),
    ];
    let fits = |t: &String| t.chars().count() <= area.width as usize;
    let text = variants
        .iter()
        .find(|t| fits(t))
        .unwrap_or(&variants[3])
        .clone();
    let width = area.width as usize;
    let padded = format!("{:<width$}", fit(&text, width));
    super::widgets::put_lines(frame, area, &[Line::styled(padded, theme.header_bar())]);
}

pub fn draw_footer(frame: &mut Frame<'_>, area: Rect, state: &State, theme: Theme) {
    let line = if let Some(status) = &state.status {
        Line::styled(fit(status, area.width as usize), theme.alert())
    } else {
        let keys = match state.view {
            View::Main => {
                let focus = match state.focus {
                    Focus::Processes => "processes",
                    Focus::Findings => "findings",
                };
                format!(
                    " q quit  ↑↓/jk move  ⏎ detail  tab focus:{focus}  s sort:{}  p {}  ? help",
                    state.sort.label(),
                    if state.paused { "resume" } else { "pause" }
                )
            }
            View::Detail { .. } => " esc back  q quit  p pause  ? help".to_string(),
            View::Help => " esc/? back  q quit".to_string(),
        };
        Line::from(Span::styled(fit(&keys, area.width as usize), theme.dim()))
    };
    super::widgets::put_lines(frame, area, &[line]);
}

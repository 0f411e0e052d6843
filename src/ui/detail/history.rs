//! The reconciliation view's history: sparklines of used (NVML's) and live tensors with a
//! flagged climb's start marked, and live memory at the end of each step, against step.

use super::Rows;
use crate::app::State;
use crate::history::{KeyRef, Metric};
use crate::layers::Layer;
use crate::pipeline::Observed;
use crate::sample::ProcessSample;
use crate::ui::chart::marked_sparkline;
use crate::ui::theme::Theme;
use crate::units;
use ratatui::text::{Line, Span};

pub(super) fn section(
    rows: &mut Rows,
    state: &State,
    observed: &Observed,
    p: &ProcessSample,
    theme: Theme,
) {
    let sample = &observed.sample;
    rows.blank();
    let width = rows.width.saturating_sub(12);
    let history = &state.pipeline.history;
    let total = sample
        .locate(&p.device_uuid)
        .and_then(|(g, m)| m.and_then(|m| m.memory).or(g.memory))
        .map(|m| m.total);
    // Where a climb flagged for this process began, marked on its sparklines.
    let climb_starts = state.climb_starts_of(p.pid, &p.device_uuid);
    for (label, key) in [
        ("used", KeyRef::of(p, Metric::Used)),
        (Layer::Live.name(), KeyRef::of(p, Metric::Allocated)),
    ] {
        let peak = history.get(&key).and_then(|s| s.peak()).map_or_else(
            || "n/a".into(),
            |(v, secs)| format!("peak {} over {}", units::bytes(v), units::duration(secs)),
        );
        let spark = crate::ui::chart::Spark::of(width, history.get(&key), state.setup.interval);
        let mut spans = vec![Span::styled(format!("{label:<6}"), theme.dim())];
        spans.extend(marked_sparkline(
            history.get(&key),
            state.now(),
            width,
            total,
            &climb_starts,
            theme.layer(crate::layers::Layer::Live),
            theme.severity(crate::detect::Severity::Warning),
        ));
        rows.lines.push(Line::from(spans));
        rows.text(
            format!(
                "      {peak} (scale: device total; each cell the peak of {}, the last {})",
                crate::ui::chart::short_window(spark.bucket),
                crate::ui::chart::short_window(spark.window())
            ),
            theme.dim(),
        );
    }
    // Memory against step: the live bytes at the end of each step the agent reported.
    let id = crate::history::ProcessId::of(p);
    if let Some(steps) = history.steps(&id).filter(|s| s.len() >= 2) {
        let values: Vec<Option<u64>> = steps
            .points()
            .iter()
            .rev()
            .take(width)
            .rev()
            .map(|s| Some(s.allocated))
            .collect();
        let mut spans = vec![Span::styled(format!("{:<6}", "step"), theme.dim())];
        spans.push(Span::styled(
            crate::ui::widgets::sparkline(&values, width, total),
            theme.layer(crate::layers::Layer::Live),
        ));
        rows.lines.push(Line::from(spans));
        if let Some(last) = steps.last() {
            let back = steps.since_step(last.step.saturating_sub(200)).next();
            let pace = back
                .and_then(|b| crate::detect::diagnosis::steps::per_step(steps, b.time))
                .map_or_else(String::new, |(per, n)| {
                    let sign = if per < 0.0 { "-" } else { "+" };
                    format!(
                        "; {sign}{}/step over the last {n} steps",
                        units::bytes(per.abs() as u64)
                    )
                });
            rows.text(
                format!(
                    "      live at the end of each step, against step (the last {} readings): {} at step {}{pace}",
                    values.len(),
                    units::bytes(last.allocated),
                    last.step
                ),
                theme.dim(),
            );
        }
    }
    if let Some(start) = climb_starts.first() {
        rows.text(
            format!(
                "      {} where the climb flagged for this process began: {} UTC",
                crate::ui::chart::CLIMB_MARK,
                units::clock(*start)
            ),
            theme.severity(crate::detect::Severity::Warning),
        );
    }
}

//! The compact GPU section: one line per GPU and per MIG instance under one key line, for
//! 80x24 over SSH.

use super::{bar_row, displayed_gpu, gpu_view, mig_accounts, usage_figure, DeviceView};
use crate::app::State;
use crate::history::SeriesKey;
use crate::layers::Layer;
use crate::pipeline::Observed;
use crate::ui::theme::Theme;
use crate::ui::widgets::{fit, key_line, put_lines, short_gpu_name, sparkline};
use crate::units;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::Frame;

pub(super) fn draw_compact(
    frame: &mut Frame<'_>,
    area: Rect,
    state: &State,
    observed: &Observed,
    theme: Theme,
) {
    let width = area.width as usize;
    let mut lines = vec![Line::from(key_line(theme))];
    const LABEL: usize = 10;
    const SPARK: usize = 8;
    for (index, (gpu, acc)) in observed
        .sample
        .gpus
        .iter()
        .zip(&observed.account.gpus)
        .enumerate()
    {
        let view = gpu_view(state, gpu, &acc.layers);
        let shown = displayed_gpu(state, gpu);
        let label = format!(
            "{:<LABEL$}",
            fit(
                &format!("{} {}", gpu.index, short_gpu_name(shown.name.as_deref())),
                LABEL - 1
            )
        );
        let figure = usage_figure(view.memory, view.layers, true);
        let util = if gpu.lost {
            "LOST".to_string()
        } else {
            units::opt_percent(gpu.utilization_gpu)
        };
        let tail = format!(" {figure:>11} {util:>4} ");
        let bar_width = width.saturating_sub(LABEL + tail.chars().count() + SPARK);
        let used = state
            .pipeline
            .history
            .get(&SeriesKey::DeviceUsed(gpu.uuid.clone()))
            .map(|s| s.recent(SPARK))
            .unwrap_or_default();
        let style = if gpu.lost {
            theme.alert()
        } else {
            theme.title()
        };
        let mut row = bar_row(Span::styled(label, style), &view, bar_width, tail, theme);
        row.spans.push(Span::styled(
            sparkline(&used, SPARK, view.memory.map(|m| m.total)),
            theme.layer(Layer::Other),
        ));
        lines.push(row);
        for (m, macc) in shown
            .mig
            .iter()
            .zip(mig_accounts(observed, state, gpu, index))
        {
            let label = format!(
                "{:<LABEL$}",
                fit(
                    &format!(" └{}", m.profile.as_deref().unwrap_or("MIG")),
                    LABEL - 1
                )
            );
            let figure = usage_figure(m.memory.as_ref(), macc, true);
            let tail = format!(" {figure:>11}");
            let bar_width = width.saturating_sub(LABEL + tail.chars().count() + 6 + SPARK);
            let mig_view = DeviceView {
                memory: m.memory.as_ref(),
                layers: macc,
                greyed: view.greyed,
            };
            lines.push(bar_row(
                Span::styled(label, theme.title()),
                &mig_view,
                bar_width,
                tail,
                theme,
            ));
        }
    }
    lines.truncate(area.height as usize);
    put_lines(frame, area, &lines);
}

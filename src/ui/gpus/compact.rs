//! The compact GPU section: one line per GPU and per MIG instance, for 80x24 over SSH, with
//! a short legend under each where the terminal is a little larger.

use super::{bar_row, displayed_gpu, gpu_view, mig_accounts, usage_figure, DeviceView};
use crate::app::State;
use crate::detect::Severity;
use crate::history::{Metric, SeriesKey};
use crate::layers::Layer;
use crate::pipeline::Observed;
use crate::present::fit;
use crate::ui::chart::{short_window, Spark, SparkRead};
use crate::ui::theme::Theme;
use crate::ui::widgets::{key_line, legend, legend_lines_most, short_gpu_name};
use crate::units;
use ratatui::text::{Line, Span};

const LABEL: usize = 10;
const SPARK: usize = 8;
/// A GPU row's figures after its bar: ` 42.4/79.6G util  90% 16m `.
const TAIL: usize = 27;
/// The same below 80 columns, without the sparkline's window: ` 42.4/79.6G util  90%`.
const NARROW_TAIL: usize = 22;
/// From this width a GPU row also holds its vitals (` 70°C 624W`) in this many cells.
const VITALS_FROM: usize = 120;
const VITALS: usize = 11;

/// The lines of a device's short legend at this width, at most (see `legend_lines_most`).
pub(super) fn legend_lines(width: usize) -> usize {
    legend_lines_most(width.saturating_sub(LABEL), true, false)
}

/// The cells of a GPU row's sparkline in a section `width` wide: none below 80 columns, where
/// the bar keeps the room.
fn spark_cells(width: usize) -> usize {
    if width >= 80 {
        SPARK
    } else {
        0
    }
}

/// The sparkline of a GPU row in a section `width` wide, and the window it covers.
pub(super) fn spark(state: &State, uuid: &str, width: usize) -> super::Sparks {
    let used = state
        .pipeline
        .history
        .get(&SeriesKey::device(uuid, Metric::Used));
    super::Sparks::Row {
        window: Spark::of(SPARK, used, state.setup.interval).window(),
        read: SparkRead::of(
            used,
            state.now(),
            spark_cells(width),
            &state.climb_starts_on_gpu(uuid),
        ),
    }
}

/// The compact section's lines: one bar row per GPU and per MIG instance, each followed by
/// its short legend in `legends` lines where given (a medium-sized terminal), else under one
/// shared key line where `key`. Every device takes as many lines whatever its figures; each
/// GPU row's sparkline is its [`spark`] in `sparks`. Beside the lines, the GPU (its place in
/// the sample) each line belongs to, for the mouse.
pub(super) fn compact_lines(
    state: &State,
    observed: &Observed,
    (width, theme): (usize, Theme),
    (legends, key): (Option<usize>, bool),
    sparks: &[Option<super::Sparks>],
) -> (Vec<Line<'static>>, Vec<Option<usize>>) {
    let mut lines = Vec::new();
    let mut owners = Vec::new();
    if key && legends.is_none() {
        lines.push(Line::from(key_line(theme)));
        owners.push(None);
    }
    let legend_lines = |view: &DeviceView<'_>| -> Vec<Line<'static>> {
        let Some(most) = legends else {
            return Vec::new();
        };
        let mut shown: Vec<Line<'static>> = match view.layers {
            Ok(layers) => legend(
                layers,
                view.exactness,
                (width.saturating_sub(LABEL), most),
                theme,
                true,
                view.greyed,
            )
            .into_iter()
            .map(|l| {
                let mut spans = vec![Span::raw(" ".repeat(LABEL))];
                spans.extend(l.spans);
                Line::from(spans)
            })
            .collect(),
            Err(_) => Vec::new(),
        };
        shown.resize(most, Line::default());
        shown
    };
    for (index, (gpu, acc)) in observed
        .sample
        .gpus
        .iter()
        .zip(&observed.account.gpus)
        .enumerate()
    {
        let view = gpu_view(state, gpu, acc);
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
        // The figures, then the sparkline's window: `42.4/79.6G util  90% 16m▁▂▃▄▅▆▇█`.
        let (window, read) = match sparks.get(index) {
            Some(Some(super::Sparks::Row { window, read })) => (*window, Some(read)),
            _ => (f64::NAN, None),
        };
        let spark = spark_cells(width);
        let vitals = match (width >= VITALS_FROM, gpu.lost) {
            (true, false) => format!(
                " {:>w$}",
                super::vitals::line(shown, VITALS - 1, theme.ascii),
                w = VITALS - 1
            ),
            (true, true) => " ".repeat(VITALS),
            (false, _) => String::new(),
        };
        let tail = if spark > 0 {
            let window = short_window(window);
            format!(" {figure:>11} util {util:>4}{vitals} {window:>3} ")
        } else {
            format!(" {figure:>11} util {util:>4}")
        };
        let bar_width = width.saturating_sub(LABEL + tail.chars().count() + spark);
        let style = if gpu.lost {
            theme.alert()
        } else {
            theme.title()
        };
        let mut row = bar_row(Span::styled(label, style), &view, bar_width, tail, theme);
        if let Some(read) = read {
            row.spans.extend(read.spans(
                spark,
                view.memory.map(|m| m.total),
                theme.layer(Layer::Other),
                theme.severity(Severity::Warning),
            ));
        }
        lines.push(row);
        lines.extend(legend_lines(&view));
        for (position, (m, macc)) in shown
            .mig
            .iter()
            .zip(mig_accounts(observed, state, gpu, index))
            .enumerate()
        {
            if !macc.leads(position) {
                continue;
            }
            let label = format!(
                "{:<LABEL$}",
                fit(
                    &format!(" └{}", m.profile.as_deref().unwrap_or("MIG")),
                    LABEL - 1
                )
            );
            let figure = usage_figure(m.memory.as_ref(), macc.layers, true);
            let tail = format!(" {figure:>11}");
            // As wide as the GPU rows' bars.
            let bar_width = if width >= VITALS_FROM {
                width.saturating_sub(LABEL + TAIL + VITALS + SPARK)
            } else if width >= 80 {
                width.saturating_sub(LABEL + TAIL + SPARK)
            } else {
                width.saturating_sub(LABEL + NARROW_TAIL)
            };
            let mig_view = DeviceView::mig(m, &macc, view.greyed);
            lines.push(bar_row(
                Span::styled(label, theme.title()),
                &mig_view,
                bar_width,
                tail,
                theme,
            ));
            lines.extend(legend_lines(&mig_view));
        }
        owners.resize(lines.len(), Some(index));
    }
    (lines, owners)
}

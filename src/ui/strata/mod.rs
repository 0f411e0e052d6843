//! The strata view: per device (a GPU, or a MIG instance), every layer stacked over time in
//! its own glyph and colour, from the bottom (live tensors) to the top (free), on a byte axis
//! up to the device's total. It answers "where did this memory go over the last hour".
//!
//! Each column is the last sample within its span of time, all layers from that one instant
//! (the history records them together). A column with no sample is blank: unknown, never
//! zero. Bytes the device's occupied total holds beyond its known layers (a layer known only
//! as a lower bound, a feed gone stale) are drawn as `?`, never given to a layer.

mod columns;

use columns::{columns, stack, Band};

use super::chart::{byte_labels, Runs, TimeAxis, CLIMB_MARK, Y_AXIS};
use super::theme::Theme;
use super::widgets::{key_line, pack, short_bytes, short_gpu_name};
use crate::app::{climbs, strata_devices, ClimbNote, State, StrataDevice};
use crate::detect::device_name;
use crate::history::{Metric, SeriesKey};
use crate::pipeline::Observed;
use crate::present::fit;
use crate::units;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;

/// The glyph of bytes only partly known.
pub(crate) const PARTIAL_GLYPH: char = '?';

/// Chart rows a device gets where there is room, at least and at most.
const PREFERRED_ROWS: usize = 10;
const MOST_ROWS: usize = 20;
/// Lines around a chart: its title, the time axis and its labels.
const FRAME_LINES: usize = 3;

fn band_glyph(band: Band) -> char {
    match band {
        Band::Layer(layer) => layer.glyph(),
        Band::Partial => PARTIAL_GLYPH,
    }
}

fn band_style(band: Band, theme: Theme) -> ratatui::style::Style {
    match band {
        Band::Layer(layer) => theme.layer(layer),
        Band::Partial => theme.alert(),
    }
}

/// Rows the chart of each device gets, and how many devices fit at once, in `height` lines.
fn chart_rows(height: usize, devices: usize) -> (usize, usize) {
    let per_page = (height / (PREFERRED_ROWS + FRAME_LINES))
        .clamp(1, devices.max(1))
        .max(1);
    let rows = (height / per_page)
        .saturating_sub(FRAME_LINES)
        .clamp(1, MOST_ROWS);
    (rows, per_page)
}

pub(crate) fn draw_strata(
    frame: &mut Frame<'_>,
    area: Rect,
    state: &State,
    observed: &Observed,
    theme: Theme,
) {
    let devices = strata_devices(&observed.sample);
    let zoom = state.strata.zoom;
    let zooms: Vec<String> = crate::app::Zoom::ALL
        .iter()
        .map(|z| match *z == zoom {
            true => format!("[{}]", z.label()),
            false => z.label().to_string(),
        })
        .collect();
    let frame_block = Block::default().borders(Borders::ALL);
    let inner = frame_block.inner(area);
    let width = inner.width as usize;
    let warn = theme.severity(crate::detect::Severity::Warning);
    let mut key = key_line(theme);
    key.push(Span::styled(PARTIAL_GLYPH.to_string(), theme.alert()));
    key.push(Span::raw("partly known  "));
    key.push(Span::styled(CLIMB_MARK.to_string(), warn));
    key.push(Span::raw("climb began  blank: n/a (unknown)"));
    let mut lines = vec![Line::from(key)];
    if lines[0].width() > width {
        // Too narrow for one line: the entries packed over two.
        let mut entries: Vec<Vec<Span<'static>>> = key_line(theme)
            .chunks(2)
            .map(|pair| pair.to_vec())
            .collect();
        entries.push(vec![
            Span::styled(PARTIAL_GLYPH.to_string(), theme.alert()),
            Span::raw("partial "),
        ]);
        entries.push(vec![
            Span::styled(CLIMB_MARK.to_string(), warn),
            Span::raw("climb "),
        ]);
        entries.push(vec![Span::raw("blank: n/a")]);
        lines = pack(entries, width, 0);
    }
    let room = (inner.height as usize).saturating_sub(lines.len());
    let (rows, per_page) = chart_rows(room, devices.len());
    let selected = state.strata.device.min(devices.len().saturating_sub(1));
    let first = ((selected / per_page) * per_page).min(devices.len().saturating_sub(per_page));
    let shown = &devices[first..(first + per_page).min(devices.len())];
    let column = units::duration(zoom.window_secs() / width.saturating_sub(Y_AXIS).max(1) as f64);
    let mut block = frame_block
        .border_style(theme.focused_border())
        .title(Line::styled(
            format!(
                " Strata · every layer over the last {} · a column ≈ {column} ",
                zoom.label()
            ),
            theme.title(),
        ))
        .title_top(Line::from(format!(" zoom {} ", zooms.join(" "))).right_aligned());
    if shown.len() < devices.len() {
        block = block.title_bottom(
            Line::from(match shown.len() {
                1 => format!(" device {} of {} · ↑↓ ", first + 1, devices.len()),
                n => format!(
                    " devices {}-{} of {} · ↑↓ ",
                    first + 1,
                    first + n,
                    devices.len()
                ),
            })
            .right_aligned(),
        );
    }
    frame.render_widget(block, area);
    if inner.width <= Y_AXIS as u16 + 4 || inner.height < 2 {
        return;
    }
    if devices.is_empty() {
        lines.push(Line::styled("no device to chart", theme.dim()));
        super::widgets::put_lines(frame, inner, &lines);
        return;
    }
    let axis = TimeAxis {
        end: observed.sample.time,
        window: zoom.window_secs(),
        width: width - Y_AXIS,
    };
    for (i, device) in shown.iter().enumerate() {
        let is_selected = first + i == selected && shown.len() < devices.len();
        lines.extend(device_lines(
            state,
            observed,
            device,
            &axis,
            rows,
            is_selected,
            theme,
        ));
    }
    super::widgets::put_lines(frame, inner, &lines);
}

/// One device: its title (name, total, now, climbs), chart, time axis and labels.
fn device_lines(
    state: &State,
    observed: &Observed,
    device: &StrataDevice,
    axis: &TimeAxis,
    rows: usize,
    selected: bool,
    theme: Theme,
) -> Vec<Line<'static>> {
    let sample = &observed.sample;
    let width = axis.width + Y_AXIS;
    let gpu = &sample.gpus[device.gpu];
    // A lost GPU is drawn from its last good reading (its name and size still hold).
    let shown = match (gpu.lost, state.last_known.get(&gpu.uuid)) {
        (true, Some(last)) => &last.gpu,
        _ => gpu,
    };
    let (name, short_name, memory) = match device.mig {
        None => (
            format!(
                "GPU {} · {}",
                gpu.index,
                crate::text::clean(shown.name.as_deref().unwrap_or("n/a"))
            ),
            format!(
                "GPU {} {}",
                gpu.index,
                short_gpu_name(shown.name.as_deref())
            ),
            shown.memory,
        ),
        Some(m) => {
            let name = format!(
                "  └ {}",
                crate::text::clean(&device_name(sample, &device.uuid))
            );
            (name.clone(), name, shown.mig.get(m).and_then(|m| m.memory))
        }
    };
    // Climbs on this device; a GPU's chart holds its MIG instances' too.
    let on_device = |uuid: &str| {
        uuid == device.uuid
            || (device.mig.is_none()
                && sample
                    .locate(uuid)
                    .is_some_and(|(g, m)| m.is_some() && g.uuid == device.uuid))
    };
    let notes: Vec<(Option<u32>, ClimbNote)> = climbs(&observed.findings)
        .filter(|(f, _)| f.device_uuid.as_deref().is_some_and(on_device))
        .map(|(f, note)| (f.pid, note))
        .collect();
    let mut title = vec![Span::styled(
        name,
        if selected {
            theme.selected()
        } else {
            theme.title()
        },
    )];
    let Some(total) = memory.map(|m| m.total).filter(|&t| t > 0) else {
        title.push(Span::styled(
            " · memory size n/a: nothing to chart",
            theme.alert(),
        ));
        return vec![Line::from(title)];
    };
    let now = state
        .pipeline
        .history
        .get(&SeriesKey::device(&device.uuid, Metric::Used))
        .and_then(|s| s.last());
    // The richest title that fits: full words, else short figures.
    let warn = theme.severity(crate::detect::Severity::Warning);
    let full = {
        let mut line = title.clone();
        let now = now.map_or_else(|| "n/a".to_string(), units::bytes);
        let lost = if gpu.lost { " · LOST" } else { "" };
        line.push(Span::raw(format!(
            " · total {} · in use now {now}{lost}",
            units::bytes(total)
        )));
        for (pid, note) in &notes {
            let who = pid.map_or_else(String::new, |p| format!("PID {p} "));
            line.push(Span::styled(
                format!(
                    " · {CLIMB_MARK} {who}{} {:+.0} MiB/min from {}",
                    crate::text::clean(&note.cause),
                    note.rate_mib_per_min,
                    &units::clock(note.start)[..5]
                ),
                warn,
            ));
        }
        line
    };
    let title = if full.iter().map(Span::width).sum::<usize>() <= width {
        full
    } else {
        let mut line = vec![Span::styled(short_name, title[0].style)];
        let now = short_bytes(now);
        let lost = if gpu.lost { " LOST" } else { "" };
        line.push(Span::raw(format!(
            " · {} now {now}{lost}",
            short_bytes(Some(total))
        )));
        for (pid, note) in &notes {
            let who = pid.map_or_else(String::new, |p| format!("{p} "));
            line.push(Span::styled(
                format!(
                    " · {CLIMB_MARK}{who}{} {:+.0}M/min {}",
                    crate::text::clean(&note.cause),
                    note.rate_mib_per_min,
                    &units::clock(note.start)[..5]
                ),
                warn,
            ));
        }
        line
    };
    let mut lines = vec![fit_line(title, width)];
    let columns = columns(&state.pipeline.history, &device.uuid, total, axis);
    let stacks: Vec<Option<Vec<Band>>> = columns
        .iter()
        .map(|c| c.as_ref().map(|bands| stack(bands, total, rows)))
        .collect();
    let labels = byte_labels(total, rows);
    for (r, label) in labels.into_iter().enumerate() {
        let row = rows - 1 - r; // from the bottom
        let mut runs = Runs::default();
        let tick = if label.trim().is_empty() {
            '│'
        } else {
            '┤'
        };
        runs.push_str(&label, theme.dim());
        runs.push(tick, theme.border());
        for stack in &stacks {
            match stack.as_ref().and_then(|s| s.get(row)) {
                Some(&band) => runs.push(band_glyph(band), band_style(band, theme)),
                None => runs.push(' ', ratatui::style::Style::new()),
            }
        }
        lines.push(Line::from(runs.finish()));
    }
    let mark_style = theme.severity(crate::detect::Severity::Warning);
    let marks: Vec<(usize, char, ratatui::style::Style)> = notes
        .iter()
        .filter_map(|(_, note)| axis.column(note.start))
        .map(|c| (c, CLIMB_MARK, mark_style))
        .collect();
    let mut rule = vec![Span::styled(
        format!("{:>w$}└", "0", w = Y_AXIS - 1),
        theme.dim(),
    )];
    rule.extend(axis.rule(&marks, theme.border()));
    lines.push(Line::from(rule));
    lines.push(Line::styled(
        format!("{}{}", " ".repeat(Y_AXIS), axis.labels()),
        theme.dim(),
    ));
    lines
}

/// A line cut at `width` cells, the cut marked.
fn fit_line(line: Vec<Span<'static>>, width: usize) -> Line<'static> {
    let mut out = Vec::new();
    let mut left = width;
    for span in line {
        let w = span.width();
        if w <= left {
            left -= w;
            out.push(span);
        } else {
            out.push(Span::styled(fit(&span.content, left), span.style));
            break;
        }
    }
    Line::from(out)
}

//! The report's picture: the strata chart of one device (a GPU or a MIG instance) over the
//! 30 minutes before the report's instant, as an SVG beside the report (plotters' SVG
//! backend). Each column is one instant's layers from the history, stacked from live
//! tensors at the bottom to free memory at the top, each in its colour; a column with no
//! sample is left blank (unknown, never zero), and bytes of the device's occupied total no
//! known layer holds (a layer known only in part) are drawn hatched grey as `partly known`.
//! The OOM, or the start of the climb, is marked; the legend names each layer and the axis
//! its unit.

use crate::detect::{Evidence, Finding, FindingKind};
use crate::history::{History, Metric, SeriesKey};
use crate::layers::Layer;
use crate::pipeline::Observed;
use plotters::prelude::*;

/// The window drawn, seconds before the instant.
pub(crate) const WINDOW_SECS: f64 = 1800.0;
/// Columns drawn across the window (one each 10 s: the history's resolution past 15 min).
pub(crate) const COLUMNS: usize = 180;
/// The picture's size in pixels.
pub(crate) const SIZE: (u32, u32) = (1000, 520);

/// Each layer's colour, as the monitor's theme gives it (terminal colours in RGB).
pub fn colour(layer: Layer) -> RGBColor {
    match layer {
        Layer::Live => RGBColor(0x2E, 0xA0, 0x43),
        Layer::Fragmented => RGBColor(0xF0, 0x6C, 0x6C),
        Layer::Cached => RGBColor(0x33, 0x66, 0xCC),
        Layer::OutsidePool => RGBColor(0xE0, 0xB0, 0x20),
        Layer::Context => RGBColor(0xB0, 0x40, 0xB0),
        Layer::Unattributed => RGBColor(0x20, 0xB0, 0xC0),
        Layer::Other => RGBColor(0x99, 0x99, 0x99),
        Layer::Free => RGBColor(0xE8, 0xE8, 0xE8),
    }
}

/// The colour of bytes only partly known.
pub(crate) const PARTIAL: RGBColor = RGBColor(0x55, 0x55, 0x55);

/// The layers of a column, bottom to top (free last), in the order the monitor stacks them.
pub const STACK: [Layer; 8] = [
    Layer::Live,
    Layer::Fragmented,
    Layer::Cached,
    Layer::OutsidePool,
    Layer::Context,
    Layer::Unattributed,
    Layer::Other,
    Layer::Free,
];

/// What the chart is of: a device, its total, and what to mark.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    pub(crate) uuid: String,
    pub(crate) name: String,
    pub(crate) total: u64,
    /// The time marked, and what it is (`OOM`, `climb began`).
    pub(crate) mark: Option<(f64, &'static str)>,
}

/// The device the report's picture is of: the one of the latest OOM finding, else of a
/// climb, else the device most occupied at the instant.
pub(crate) fn subject(observed: &Observed) -> Option<Subject> {
    let s = &observed.sample;
    let device_of = |f: &Finding| f.device_uuid.clone();
    let finding = |kind| {
        observed
            .findings
            .iter()
            .filter(|f| f.kind == kind && f.device_uuid.is_some())
            .max_by(|a, b| a.since.total_cmp(&b.since))
    };
    let (uuid, mark) = if let Some(f) = finding(FindingKind::Oom) {
        let at = match &f.evidence {
            Evidence::Oom(e) => e.time.map(|t| t.0).filter(|t| t.is_finite()),
            _ => None,
        }
        .unwrap_or(f.since);
        (device_of(f)?, Some((at, "OOM")))
    } else if let Some(f) = finding(FindingKind::Climb) {
        let at = match &f.evidence {
            Evidence::Climb(e) => Some(e.start.0).filter(|t| t.is_finite()),
            _ => None,
        }
        .unwrap_or(f.since);
        (device_of(f)?, Some((at, "climb began")))
    } else {
        let devices = s.gpus.iter().flat_map(|g| {
            std::iter::once((g.uuid.clone(), g.memory))
                .chain(g.mig.iter().map(|m| (m.uuid.clone(), m.memory)))
        });
        let busiest = devices
            .filter_map(|(uuid, m)| Some((uuid, m?.total.checked_sub(m?.free)?)))
            .max_by_key(|(_, occupied)| *occupied)?;
        (busiest.0, None)
    };
    let (gpu, mig) = s.locate(&uuid)?;
    let memory = match mig {
        Some(m) => m.memory?,
        None => gpu.memory?,
    };
    Some(Subject {
        name: crate::text::clean(&crate::detect::device_name(s, &uuid)).into_owned(),
        uuid,
        total: memory.total,
        mark,
    })
}

/// One column's bands, bottom to top, in bytes: its known layers, then what is only partly
/// known (`None`), then free. `None` where nothing is known.
pub(crate) type Column = Option<Vec<(Option<Layer>, u64)>>;

/// The device's columns over the window ending at `end`, from the history.
pub(crate) fn columns(history: &History, subject: &Subject, end: f64) -> Vec<Column> {
    let Some(used) = history.get(&SeriesKey::device(&subject.uuid, Metric::Used)) else {
        return vec![None; COLUMNS];
    };
    // No chunk narrower than a point of the tier read (a 10 s recording's 30 minutes are
    // read from points 100 s apart): each chunk then spreads over the columns it covers.
    let resolution = used.resolution(WINDOW_SECS).max(f64::MIN_POSITIVE);
    let chunks = ((WINDOW_SECS / (resolution * 1.0001)).floor() as usize).clamp(1, COLUMNS);
    let per_chunk = chunk_columns(history, subject, end, chunks);
    (0..COLUMNS)
        .map(|c| per_chunk[(c * chunks / COLUMNS).min(chunks - 1)].clone())
        .collect()
}

fn chunk_columns(history: &History, subject: &Subject, end: f64, chunks: usize) -> Vec<Column> {
    let read = |metric| {
        history
            .get(&SeriesKey::device(&subject.uuid, metric))
            .map(|s| s.chunks(end, WINDOW_SECS, chunks))
            .unwrap_or_else(|| vec![None; chunks])
    };
    let occupied = read(Metric::Used);
    let layers: Vec<(Layer, Vec<Option<crate::history::Span>>)> = STACK
        .into_iter()
        .filter(|&l| l != Layer::Free)
        .map(|l| (l, read(Metric::Layer(l))))
        .collect();
    (0..chunks)
        .map(|i| {
            let occupied = occupied[i]?.last;
            let mut bands = Vec::with_capacity(STACK.len() + 1);
            let mut known = 0u64;
            for (layer, values) in &layers {
                if let Some(span) = values[i] {
                    bands.push((Some(*layer), span.last));
                    known = known.saturating_add(span.last);
                }
            }
            bands.push((None, occupied.saturating_sub(known)));
            bands.push((Some(Layer::Free), subject.total.saturating_sub(occupied)));
            Some(bands)
        })
        .collect()
}

const GIB: f64 = (1u64 << 30) as f64;

/// The SVG of the chart of `subject` over the 30 minutes before `end`.
pub(crate) fn svg(history: &History, subject: &Subject, end: f64, demo: bool) -> String {
    let columns = columns(history, subject, end);
    let mut out = String::new();
    // Drawing into a string cannot fail for want of room; a failure leaves what was drawn.
    let _ = draw(&mut out, &columns, subject, end, demo);
    out
}

fn draw(
    out: &mut String,
    columns: &[Column],
    subject: &Subject,
    end: f64,
    demo: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, legend) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
    let clock = super::markdown::Clock { demo };
    let top = (subject.total as f64 / GIB).max(f64::MIN_POSITIVE);
    let mut chart = ChartBuilder::on(&plot)
        .caption(
            format!(
                "{}: memory by layer, the 30 minutes to {}",
                subject.name,
                clock.at(end)
            ),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(-WINDOW_SECS / 60.0..0.0, 0.0..top)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("minutes before the report's instant")
        .y_desc("GiB (2^30 bytes)")
        .draw()?;
    let width = WINDOW_SECS / 60.0 / COLUMNS as f64;
    let bands: Vec<Option<Layer>> = STACK
        .iter()
        .map(|&l| Some(l))
        .chain(std::iter::once(None))
        .collect();
    for &band in &bands {
        let fill = band.map_or(PARTIAL, colour);
        let mut rects = Vec::new();
        for (i, column) in columns.iter().enumerate() {
            let Some(column) = column else { continue };
            let x0 = -WINDOW_SECS / 60.0 + i as f64 * width;
            let mut bottom = 0.0;
            for &(b, bytes) in column {
                let height = bytes as f64 / GIB;
                if b == band && height > 0.0 {
                    rects.push(Rectangle::new(
                        [(x0, bottom), (x0 + width, bottom + height)],
                        fill.filled(),
                    ));
                }
                bottom += height;
            }
        }
        chart.draw_series(rects)?;
    }
    let mut marked = None;
    if let Some((at, what)) = subject.mark {
        let x = (at - end) / 60.0;
        if (-WINDOW_SECS / 60.0..=0.0).contains(&x) {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x, 0.0), (x, top)],
                BLACK.stroke_width(2),
            )))?;
            chart.draw_series(std::iter::once(Text::new(
                what.to_string(),
                (x, top * 0.99),
                ("sans-serif", 14).into_font().color(&BLACK),
            )))?;
            marked = Some(format!("{what} at {}", clock.at(at)));
        }
    }
    // The legend, beside the plot: each layer's colour and name, with the unit.
    let text = ("sans-serif", 13).into_font().color(&BLACK);
    legend.draw(&Text::new("layers (GiB)", (8, 40), text.clone()))?;
    for (i, band) in bands.iter().enumerate() {
        let y = 64 + 22 * i as i32;
        let fill = band.map_or(PARTIAL, colour);
        legend.draw(&Rectangle::new([(8, y), (24, y + 14)], fill.filled()))?;
        legend.draw(&Rectangle::new([(8, y), (24, y + 14)], BLACK))?;
        let name = band.map_or("partly known", Layer::name);
        legend.draw(&Text::new(name, (32, y + 1), text.clone()))?;
    }
    if let Some(marked) = marked {
        let y = 64 + 22 * bands.len() as i32 + 10;
        legend.draw(&PathElement::new(
            vec![(16, y), (16, y + 16)],
            BLACK.stroke_width(2),
        ))?;
        legend.draw(&Text::new(marked, (32, y + 2), text.clone()))?;
    }
    root.present()?;
    Ok(())
}

/// The legend's width, right of the plot.
pub(crate) const LEGEND_WIDTH: u32 = 190;

/// `strata-report-….svg` beside `strata-report-….md`.
pub(crate) fn file_name(report: &str) -> String {
    match report.strip_suffix(".md") {
        Some(stem) => format!("{stem}.svg"),
        None => format!("{report}.svg"),
    }
}

/// The report's link to its picture, a section of its own at the end.
pub(crate) fn link(subject: &Subject, svg_name: &str) -> String {
    format!(
        "\n## Chart\n\n![{}: memory by layer over the 30 minutes before this instant]({})\n",
        super::markdown::escape(&subject.name),
        svg_name
    )
}

/// Writes the report of the instant `observed` into `dir` (`strata-report-….md`), its chart
/// beside it (`….svg`, linked from its end) where a device can be charted; returns the
/// report's file name.
pub(crate) fn write_report(
    dir: &std::path::Path,
    observed: &Observed,
    history: &History,
    demo: bool,
) -> std::io::Result<String> {
    let mut text = super::markdown(observed, history, demo);
    let name = super::file_name(&observed.sample);
    if let Some(subject) = subject(observed) {
        let picture = file_name(&name);
        let svg = svg(history, &subject, observed.sample.time, demo);
        std::fs::write(dir.join(&picture), svg)?;
        text.push_str(&link(&subject, &picture));
    }
    std::fs::write(dir.join(&name), text)?;
    Ok(name)
}

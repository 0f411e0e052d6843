//! GPU panels: one stacked bar of the layers per GPU, legend, sparklines, MIG instances nested.

mod compact;
mod vitals;

use super::chart::{short_window, Spark, SparkRead};
use super::theme::Theme;
use super::widgets::{
    bar, legend, legend_entries, legend_lines_most, pack_legend, short_bytes, short_gpu_name,
    Boxed, Paint,
};
use crate::accounting::{Gap, GpuAccount};
use crate::app::{GpuDrawn, State};
use crate::history::{Metric, SeriesKey};
use crate::layers::Layer;
use crate::layers::Layers;
use crate::pipeline::Observed;
use crate::present::{fit, Exactness};
use crate::sample::{DeviceMemory, GpuSample, MigSample};
use crate::units;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

/// How the GPU section is laid out at this size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Bordered panels with legend and sparklines, in this many columns.
    Full { columns: u16 },
    /// One line per GPU and per MIG instance, with a short legend line under each when
    /// `legends` (a medium-sized terminal), else under one key line of the layers where `key`.
    Compact { legends: bool, key: bool },
    /// NVML sees no GPU at all: one line says so.
    Empty,
}

/// A layout the GPU section can take and the rows it needs, from the terminal's width and
/// the node's shape only (its GPUs, their MIG instances, what NVML refused), never from the
/// figures: the screen's layout holds still while the figures move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Form {
    pub(crate) mode: Mode,
    pub(crate) height: u16,
    /// Taken only where no other form leaves the process table its least.
    pub(crate) last_resort: bool,
}

/// The chosen layout, with each panel's contents already built (once per frame).
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) mode: Mode,
    /// Inside of each GPU's panel in Full mode; the section's lines in Compact mode.
    panels: Vec<Vec<Line<'static>>>,
    /// Each panel's rows in Full mode, its border included.
    heights: Vec<u16>,
    /// In Compact mode, the GPU (its place in the sample) each line belongs to.
    owners: Vec<Option<usize>>,
}

/// One device to draw: a GPU (with its current or last known reading) or a MIG instance.
struct DeviceView<'a> {
    memory: Option<&'a DeviceMemory>,
    layers: &'a Result<Layers, Gap>,
    exactness: Exactness<'a>,
    greyed: bool,
}

impl<'a> DeviceView<'a> {
    /// A MIG GPU instance, greyed with its GPU.
    fn mig(instance: &'a MigSample, account: &MigShown<'a>, greyed: bool) -> Self {
        DeviceView {
            memory: instance.memory.as_ref(),
            layers: account.layers,
            exactness: account.exactness,
            greyed,
        }
    }
}

/// A MIG device's layers as shown: its GPU instance's partition, how exact it is, and the
/// positions of the compute instances sharing it (the first one stands for them all).
struct MigShown<'a> {
    layers: &'a Result<Layers, Gap>,
    exactness: Exactness<'a>,
    members: &'a [usize],
}

impl MigShown<'_> {
    fn leads(&self, position: usize) -> bool {
        self.members.first().is_none_or(|&first| first == position)
    }
}

/// What decides a GPU's rows: its MIG rows (one per GPU instance) and NVML's refusals.
struct Shape {
    mig_rows: u16,
    problems: u16,
}

impl Shape {
    fn of(state: &State, observed: &Observed, index: usize) -> Shape {
        let Some(gpu) = observed.sample.gpus.get(index) else {
            return Shape {
                mig_rows: 0,
                problems: 0,
            };
        };
        let shown = displayed_gpu(state, gpu);
        let mig_rows = mig_accounts(observed, state, gpu, index)
            .iter()
            .enumerate()
            .filter(|(position, m)| m.leads(*position))
            .count();
        Shape {
            mig_rows: mig_rows as u16,
            problems: shown.problems.len() as u16,
        }
    }

    /// A bordered panel `inner` cells wide inside: the bar, the legend at its longest, a line
    /// per refusal, the sparklines, and each MIG row with its short legend.
    fn panel_height(&self, inner: usize) -> u16 {
        let legend = legend_lines_most(inner, false, true) as u16;
        let mig_legend = legend_lines_most(inner.saturating_sub(MIG_INDENT), true, false) as u16;
        2 + 1 + legend + self.problems + 1 + self.mig_rows * (1 + mig_legend)
    }
}

/// How far a MIG row's legend is indented inside a panel.
const MIG_INDENT: usize = 4;

/// The layouts the section can take at `width`, richest first; the last is the last resort.
pub(crate) fn forms(state: &State, observed: &Observed, width: u16) -> Vec<Form> {
    let gpus = &observed.sample.gpus;
    if gpus.is_empty() {
        return vec![Form {
            mode: Mode::Empty,
            height: 1,
            last_resort: false,
        }];
    }
    let shapes: Vec<Shape> = (0..gpus.len())
        .map(|i| Shape::of(state, observed, i))
        .collect();
    let mut forms = Vec::new();
    let mut tries = Vec::new();
    // Two columns where wide, and where there are two GPUs to fill them.
    if width >= 150 && gpus.len() > 1 {
        tries.push(2);
    }
    if width >= 70 {
        tries.push(1);
    }
    for columns in tries {
        let inner = (width / columns).saturating_sub(2) as usize;
        let height = shapes
            .chunks(usize::from(columns))
            .map(|row| row.iter().map(|s| s.panel_height(inner)).max().unwrap_or(0))
            .sum();
        forms.push(Form {
            mode: Mode::Full { columns },
            height,
            last_resort: false,
        });
    }
    let devices: u16 = shapes.iter().map(|s| 1 + s.mig_rows).sum();
    if width >= 100 {
        let legend = compact::legend_lines(usize::from(width)) as u16;
        forms.push(Form {
            mode: Mode::Compact {
                legends: true,
                key: false,
            },
            height: devices * (1 + legend),
            last_resort: false,
        });
    }
    forms.push(Form {
        mode: Mode::Compact {
            legends: false,
            key: true,
        },
        height: devices + 1,
        last_resort: false,
    });
    // Every GPU and MIG row without the layers' key line: where they do not all fit with it,
    // the key goes (the help has it), never a device a finding may name.
    forms.push(Form {
        mode: Mode::Compact {
            legends: false,
            key: false,
        },
        height: devices,
        last_resort: true,
    });
    forms
}

/// Builds the section in `form` (drawn into the rows the screen gives it, which may be fewer),
/// with the GPUs' sparkline rows where `form` shows them ([`spark_rows`]).
fn plan(
    state: &State,
    observed: &Observed,
    width: u16,
    form: Form,
    sparks: &[Option<Sparks>],
    theme: Theme,
) -> Plan {
    let gpus = &observed.sample.gpus;
    match form.mode {
        Mode::Empty => Plan {
            mode: form.mode,
            panels: Vec::new(),
            heights: Vec::new(),
            owners: Vec::new(),
        },
        Mode::Full { columns } => {
            let inner = (width / columns.max(1)).saturating_sub(2) as usize;
            let panels = (0..gpus.len())
                .map(|i| {
                    let spark = match sparks.get(i) {
                        Some(Some(Sparks::Panel(row))) => Some(row),
                        _ => None,
                    };
                    panel_lines(state, observed, i, inner, spark, theme)
                })
                .collect();
            let heights = (0..gpus.len())
                .map(|i| Shape::of(state, observed, i).panel_height(inner))
                .collect();
            Plan {
                mode: form.mode,
                panels,
                heights,
                owners: Vec::new(),
            }
        }
        Mode::Compact { legends, key } => {
            let legends = legends.then(|| compact::legend_lines(usize::from(width)));
            let (lines, owners) = compact::compact_lines(
                state,
                observed,
                (width as usize, theme),
                (legends, key),
                sparks,
            );
            Plan {
                mode: form.mode,
                panels: vec![lines],
                heights: Vec::new(),
                owners,
            }
        }
    }
}

/// Each GPU's sparklines where `form` shows them (a panel's row, for a GPU whose memory is
/// known; a compact row's one), read for a section `width` wide.
fn spark_rows(state: &State, observed: &Observed, width: u16, form: Form) -> Vec<Option<Sparks>> {
    let gpus = observed.sample.gpus.iter();
    match form.mode {
        Mode::Full { columns } => {
            let inner = (width / columns.max(1)).saturating_sub(2) as usize;
            gpus.map(|gpu| {
                let known = displayed_gpu(state, gpu).memory.is_some();
                known.then(|| Sparks::Panel(spark_row(state, &gpu.uuid, inner)))
            })
            .collect()
        }
        Mode::Compact { .. } => gpus
            .map(|gpu| Some(compact::spark(state, &gpu.uuid, usize::from(width))))
            .collect(),
        Mode::Empty => Vec::new(),
    }
}

/// What the GPU section was last drawn from (in panels or compact rows), and where its GPUs
/// went, kept from one frame to the next ([`section`]).
#[derive(Debug, Default)]
pub(crate) struct Kept {
    from: Option<Drawn>,
    /// The places recorded for the mouse when it was drawn.
    places: Vec<GpuDrawn>,
    /// What it drew, in a debug build, to compare with each paint it spares.
    #[cfg(debug_assertions)]
    paint: Paint,
    /// Sections of panels or compact rows worked out, not kept.
    #[cfg(test)]
    pub(crate) worked_out: usize,
}

/// Everything a section of panels or compact rows is drawn from: where, at what size and in
/// what form and theme, and for each GPU its reading, its account, its last good reading
/// while it is lost, and its sparklines. Nothing else of the state reaches them.
#[derive(Debug, PartialEq)]
struct Drawn {
    area: Rect,
    width: u16,
    form: Form,
    theme: Theme,
    gpus: Vec<GpuDrawnFrom>,
}

#[derive(Debug, PartialEq)]
struct GpuDrawnFrom {
    gpu: GpuSample,
    account: Option<GpuAccount>,
    /// Read only while the GPU is lost: its time, reading and layers.
    last_known: Option<(f64, GpuSample, Result<Layers, Gap>)>,
    spark: Option<Sparks>,
}

impl Kept {
    /// Lets go of what the section was drawn from: the frame that drew it is gone.
    pub(crate) fn forget(&mut self) {
        self.from = None;
    }
}

impl Drawn {
    /// Whether the section would now be drawn from what it was.
    fn same(
        &self,
        (area, width, form, theme): (Rect, u16, Form, Theme),
        state: &State,
        observed: &Observed,
        sparks: &[Option<Sparks>],
    ) -> bool {
        let gpus = &observed.sample.gpus;
        self.area == area
            && self.width == width
            && self.form == form
            && self.theme == theme
            && self.gpus.len() == gpus.len()
            && self
                .gpus
                .iter()
                .zip(gpus)
                .enumerate()
                .all(|(i, (was, gpu))| {
                    was.gpu == *gpu
                        && was.account.as_ref() == observed.account.gpus.get(i)
                        && was.last_known.as_ref().map(|(t, g, l)| (*t, g, l))
                            == last_known_of(state, gpu).map(|l| (l.time, &l.gpu, &l.layers))
                        && was.spark.as_ref() == sparks.get(i).and_then(Option::as_ref)
                })
    }

    fn of(
        (area, width, form, theme): (Rect, u16, Form, Theme),
        state: &State,
        observed: &Observed,
        sparks: Vec<Option<Sparks>>,
    ) -> Drawn {
        let mut sparks = sparks.into_iter();
        let gpus = observed
            .sample
            .gpus
            .iter()
            .enumerate()
            .map(|(i, gpu)| GpuDrawnFrom {
                gpu: gpu.clone(),
                account: observed.account.gpus.get(i).cloned(),
                last_known: last_known_of(state, gpu)
                    .map(|l| (l.time, l.gpu.clone(), l.layers.clone())),
                spark: sparks.next().flatten(),
            })
            .collect();
        Drawn {
            area,
            width,
            form,
            theme,
            gpus,
        }
    }
}

/// The last good reading of `gpu` where it is read: while the GPU is lost.
fn last_known_of<'a>(state: &'a State, gpu: &GpuSample) -> Option<&'a crate::app::LastKnown> {
    gpu.lost.then(|| state.last_known.get(&gpu.uuid)).flatten()
}

/// The GPU section in `form`, drawn into `area`, `width` wide. With `kept` (the main screen's
/// bands, drawn where they changed), a section of panels or compact rows that would be drawn
/// from what the last frame's was is not worked out again: `None`, that frame's paint stands,
/// and the places its GPUs took are recorded for the mouse again. In a debug build the
/// section is worked out all the same and must be that frame's, whose inputs then missed
/// nothing.
pub(crate) fn section(
    area: Rect,
    state: &State,
    observed: &Observed,
    (width, form, theme): (u16, Form, Theme),
    kept: Option<&mut Kept>,
) -> Option<Paint> {
    let draw = |sparks: &[Option<Sparks>]| {
        let mut paint = Paint::default();
        let plan = plan(state, observed, width, form, sparks, theme);
        draw_gpus(&mut paint, area, state, observed, plan, theme);
        paint
    };
    let sparks = spark_rows(state, observed, width, form);
    let Some(kept) = kept else {
        return Some(draw(&sparks));
    };
    // No GPU: one line, from what NVML said, drawn each time.
    if form.mode == Mode::Empty {
        kept.forget();
        return Some(draw(&sparks));
    }
    let key = (area, width, form, theme);
    if kept
        .from
        .as_ref()
        .is_some_and(|from| from.same(key, state, observed, &sparks))
    {
        #[cfg(debug_assertions)]
        {
            let fresh = draw(&sparks);
            assert_eq!(
                fresh, kept.paint,
                "the GPU panels, drawn from what the last frame's were, differ from it: \
                 Drawn misses something they read"
            );
            assert_eq!(*state.mouse.gpus.borrow(), kept.places);
        }
        #[cfg(not(debug_assertions))]
        state
            .mouse
            .gpus
            .borrow_mut()
            .extend(kept.places.iter().cloned());
        return None;
    }
    let paint = draw(&sparks);
    #[cfg(test)]
    {
        kept.worked_out += 1;
    }
    kept.places = state.mouse.gpus.borrow().clone();
    #[cfg(debug_assertions)]
    {
        kept.paint = paint.clone();
    }
    kept.from = Some(Drawn::of(key, state, observed, sparks));
    Some(paint)
}

/// The GPU as shown: its last good reading while it is lost.
fn displayed_gpu<'a>(state: &'a State, gpu: &'a GpuSample) -> &'a GpuSample {
    if gpu.lost {
        if let Some(last) = state.last_known.get(&gpu.uuid) {
            return &last.gpu;
        }
    }
    gpu
}

fn gpu_view<'a>(state: &'a State, gpu: &'a GpuSample, account: &'a GpuAccount) -> DeviceView<'a> {
    let shown = displayed_gpu(state, gpu);
    let (layers, exactness, greyed) = match (gpu.lost, state.last_known.get(&gpu.uuid)) {
        (true, Some(last)) => (&last.layers, Exactness::default(), true),
        _ => (
            &account.layers,
            Exactness {
                context: account.context_source,
                partial: &account.partial,
                processes_unknown: !account.processes_known,
            },
            false,
        ),
    };
    DeviceView {
        memory: shown.memory.as_ref(),
        layers,
        exactness,
        greyed,
    }
}

fn draw_gpus(
    paint: &mut Paint,
    area: Rect,
    state: &State,
    observed: &Observed,
    plan: Plan,
    theme: Theme,
) {
    let mut panels = plan.panels;
    match plan.mode {
        Mode::Compact { .. } => {
            if !panels.is_empty() {
                paint.lines(area, panels.swap_remove(0));
            }
            for (row, owner) in (area.top()..area.bottom()).zip(&plan.owners) {
                if let Some(gpu) = owner.and_then(|i| observed.sample.gpus.get(i)) {
                    let line = Rect {
                        y: row,
                        height: 1,
                        ..area
                    };
                    record_drawn(state, line, gpu);
                }
            }
        }
        Mode::Empty => {
            let text = match observed.sample.problems.get("device_count") {
                Some(error) => format!(
                    "NVML could not count the GPUs: {error} (strata tries again every interval)"
                ),
                None => {
                    "NVML reports no GPU on this node (strata --demo shows a simulated one)".into()
                }
            };
            paint.lines(
                area,
                vec![Line::styled(fit(&text, area.width as usize), theme.alert())],
            )
        }
        Mode::Full { columns } => {
            let gpus = &observed.sample.gpus;
            let mut y = area.y;
            let mut panels = panels.into_iter();
            let count = panels.len();
            for row_i in 0..count.div_ceil(usize::from(columns)) {
                let row: Vec<_> = panels.by_ref().take(usize::from(columns)).collect();
                let first = row_i * columns as usize;
                let height = plan
                    .heights
                    .iter()
                    .skip(first)
                    .take(row.len())
                    .copied()
                    .max()
                    .unwrap_or(0)
                    .min(area.bottom().saturating_sub(y));
                let row_area = Rect { y, height, ..area };
                let cells = Layout::horizontal(vec![
                    Constraint::Ratio(1, u32::from(columns));
                    columns as usize
                ])
                .split(row_area);
                for (i, lines) in row.into_iter().enumerate() {
                    let index = row_i * columns as usize + i;
                    if let Some(gpu) = gpus.get(index) {
                        draw_panel(paint, cells[i], state, observed, index, gpu, lines, theme);
                        record_drawn(state, cells[i], gpu);
                    }
                }
                y += height;
            }
        }
    }
}

/// Where a GPU was drawn, for the mouse: what its click selects.
fn record_drawn(state: &State, area: Rect, gpu: &GpuSample) {
    state.mouse.gpus.borrow_mut().push(GpuDrawn {
        area,
        index: gpu.index,
        uuid: gpu.uuid.clone(),
    });
}

/// `54.6 / 79.6 GiB` (or `54.6/79.6G` when `compact`): occupied over total, from the layers
/// where there are any, else from NVML's own total and free.
fn usage_figure(
    memory: Option<&DeviceMemory>,
    layers: &Result<Layers, Gap>,
    compact: bool,
) -> String {
    let Some(m) = memory else {
        return if compact {
            "n/a".into()
        } else {
            "memory n/a".into()
        };
    };
    let occupied = match layers {
        Ok(l) => l.occupied(),
        Err(_) => m.total.saturating_sub(m.free),
    };
    if compact {
        format!("{}/{}G", units::gib(occupied), units::gib(m.total))
    } else {
        full_usage(occupied, m.total)
    }
}

/// `54.6 / 79.6 GiB`: both figures in GiB to one decimal, so that they read alike.
fn full_usage(occupied: u64, total: u64) -> String {
    format!("{} / {} GiB", units::gib(occupied), units::gib(total))
}

/// A labelled bar row: `label`, the device's bar (or why it has none) `bar_width` wide, `tail`.
fn bar_row(
    label: Span<'static>,
    view: &DeviceView<'_>,
    bar_width: usize,
    tail: String,
    theme: Theme,
) -> Line<'static> {
    let mut spans = vec![label];
    spans.extend(bar_or_gap(view, bar_width, theme).spans);
    spans.push(Span::raw(tail));
    Line::from(spans)
}

#[allow(clippy::too_many_arguments)]
fn draw_panel(
    paint: &mut Paint,
    area: Rect,
    state: &State,
    observed: &Observed,
    index: usize,
    gpu: &GpuSample,
    lines: Vec<Line<'static>>,
    theme: Theme,
) {
    let Some(account) = observed.account.gpus.get(index) else {
        return;
    };
    let view = gpu_view(state, gpu, account);
    let shown = displayed_gpu(state, gpu);
    let mut title = vec![Span::styled(
        match gpu.lost {
            // Room for the warning: the short name.
            true => format!(
                " GPU {} · {} ",
                gpu.index,
                short_gpu_name(shown.name.as_deref())
            ),
            false => format!(
                " GPU {} · {} ",
                gpu.index,
                crate::text::clean(shown.name.as_deref().unwrap_or("n/a"))
            ),
        },
        theme.title(),
    )];
    if gpu.lost {
        let seen = state
            .last_known
            .get(&gpu.uuid)
            .map_or_else(|| "never".into(), |l| units::clock(l.time));
        title.push(Span::styled(
            format!("· LOST since {seen}: last values greyed "),
            theme.alert(),
        ));
    } else {
        title.push(Span::raw(format!(
            "· util {} ",
            units::opt_percent(gpu.utilization_gpu)
        )));
        if gpu.mig_mode == Some(true) {
            title.push(Span::raw("· MIG "));
        }
        // The vitals in what the title leaves beside the usage figure, at its widest (the
        // whole device occupied), so that the form holds still while the figures move.
        let taken: usize = title.iter().map(|s| s.width()).sum();
        let usage = 2 + view
            .memory
            .map_or("memory n/a".len(), |m| full_usage(m.total, m.total).len());
        let room = usize::from(area.width)
            .saturating_sub(2 + taken + usage + 1)
            .saturating_sub(3);
        let line = vitals::line(shown, room, theme.ascii);
        if !line.is_empty() {
            title.push(Span::raw(format!("· {line} ")));
        }
    }
    let boxed = Boxed {
        title: Line::from(title),
        figure: Line::from(format!(
            " {} ",
            usage_figure(view.memory, view.layers, false)
        ))
        .right_aligned(),
        border_style: theme.border(),
    };
    let inner = Boxed::inner(area);
    paint.boxed(area, boxed);
    paint.lines(inner, lines);
}

/// What a GPU panel holds inside its border: bar, legend, sparklines, MIG instances.
fn panel_lines(
    state: &State,
    observed: &Observed,
    index: usize,
    width: usize,
    spark: Option<&SparkRow>,
    theme: Theme,
) -> Vec<Line<'static>> {
    let (Some(gpu), Some(account)) = (
        observed.sample.gpus.get(index),
        observed.account.gpus.get(index),
    ) else {
        return Vec::new();
    };
    let view = gpu_view(state, gpu, account);
    let shown = displayed_gpu(state, gpu);
    let mut lines = device_lines(&view, width, theme, false);
    // What NVML refused for this GPU, one line each, so that an n/a says why.
    for (what, error) in &shown.problems {
        lines.push(Line::styled(
            fit(&format!("{what} n/a: {error}"), width),
            theme.alert(),
        ));
    }
    if let (Some(memory), Some(row)) = (view.memory, spark) {
        lines.push(spark_line(row, memory.total, width, theme));
    }
    for (position, (m, macc)) in shown
        .mig
        .iter()
        .zip(mig_accounts(observed, state, gpu, index))
        .enumerate()
    {
        if !macc.leads(position) {
            continue;
        }
        let label = mig_label(&shown.mig, macc.members, m);
        let tail = format!(" {}", usage_figure(m.memory.as_ref(), macc.layers, false));
        let bar_width = width.saturating_sub(label.chars().count() + tail.chars().count());
        let mig_view = DeviceView::mig(m, &macc, view.greyed);
        lines.push(bar_row(
            Span::styled(label, theme.title()),
            &mig_view,
            bar_width,
            tail,
            theme,
        ));
        if let Ok(layers) = macc.layers {
            let legend_width = width.saturating_sub(MIG_INDENT);
            let most = legend_lines_most(legend_width, true, false);
            for l in legend(
                layers,
                macc.exactness,
                (legend_width, most),
                theme,
                true,
                view.greyed,
            ) {
                let mut spans = vec![Span::raw(" ".repeat(MIG_INDENT))];
                spans.extend(l.spans);
                lines.push(Line::from(spans));
            }
        }
    }
    lines
}

/// The MIG accounts matching what is shown (the last known ones while the GPU is lost).
fn mig_accounts<'a>(
    observed: &'a Observed,
    state: &'a State,
    gpu: &'a GpuSample,
    index: usize,
) -> Vec<MigShown<'a>> {
    static LOST: Result<Layers, Gap> = Err(Gap::Lost);
    let shown = displayed_gpu(state, gpu);
    match observed.account.gpus.get(index) {
        Some(acc) if !gpu.lost => acc
            .mig
            .iter()
            .map(|m| MigShown {
                layers: &m.layers,
                exactness: Exactness {
                    context: m.context_source,
                    partial: &m.partial,
                    processes_unknown: !m.processes_known,
                },
                members: &m.gpu_instance_members,
            })
            .collect(),
        _ => shown
            .mig
            .iter()
            .map(|_| MigShown {
                layers: &LOST,
                exactness: Exactness::default(),
                members: &[],
            })
            .collect(),
    }
}

/// ` └ 3g.40gb GI1/CI0`, or ` └ 4g.40gb GI2/CI0+1` for a GPU instance with two compute
/// instances.
fn mig_label(all: &[MigSample], members: &[usize], m: &MigSample) -> String {
    let cis: Vec<String> = if members.is_empty() {
        m.compute_instance_id
            .map(|c| c.to_string())
            .into_iter()
            .collect()
    } else {
        members
            .iter()
            .filter_map(|&i| all.get(i).and_then(|c| c.compute_instance_id))
            .map(|c| c.to_string())
            .collect()
    };
    let ids = match (m.gpu_instance_id, cis.is_empty()) {
        (Some(g), false) => format!(" GI{g}/CI{}", cis.join("+")),
        (Some(g), true) => format!(" GI{g}"),
        _ => String::new(),
    };
    let profile = crate::text::clean(m.profile.as_deref().unwrap_or("MIG"));
    format!(" └ {profile}{ids} ")
}

fn bar_or_gap(view: &DeviceView<'_>, width: usize, theme: Theme) -> Line<'static> {
    match view.layers {
        Ok(layers) => bar(layers, width, theme, view.greyed),
        Err(gap) => Line::styled(
            fit(&format!("layers n/a: {}", gap.describe()), width),
            theme.alert(),
        ),
    }
}

fn device_lines(
    view: &DeviceView<'_>,
    width: usize,
    theme: Theme,
    short: bool,
) -> Vec<Line<'static>> {
    let mut lines = vec![bar_or_gap(view, width, theme)];
    if let Ok(layers) = view.layers {
        let mut entries = legend_entries(layers, view.exactness, theme, short, view.greyed);
        // Say how much of `other` is the driver's own reservation, beside `other` itself.
        if let (Some(other), Some(reserved)) =
            (layers.other, view.memory.and_then(|m| m.driver_reserved))
        {
            if let Some(entry) = Layer::ALL
                .iter()
                .position(|&l| l == Layer::Other)
                .and_then(|i| entries.get_mut(i))
            {
                entry.push(Span::styled(
                    format!(" ({} driver)", short_bytes(Some(reserved.min(other)))),
                    theme.dim(),
                ));
            }
        }
        lines.extend(pack_legend(
            entries,
            width,
            legend_lines_most(width, false, true),
        ));
    }
    lines
}

/// What a GPU's sparklines show, read from the history and not yet drawn: the same read
/// draws the same sparklines.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Sparks {
    /// A panel's row of two ([`spark_line`]).
    Panel(SparkRow),
    /// A compact row's one, of the memory used, and the window it covers in seconds.
    Row { window: f64, read: SparkRead },
}

/// What a panel's sparkline row shows ([`spark_line`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SparkRow {
    /// `used  3.50G ` and ` live    n/a `: the last values as shown.
    labels: (String, String),
    /// The windows the two sparklines cover, in seconds.
    windows: [f64; 2],
    used: SparkRead,
    live: SparkRead,
}

/// The labels of a sparkline row: `used  3.50G ` and ` live    n/a `.
fn spark_labels(used: Option<u64>, live: Option<u64>) -> (String, String) {
    (
        format!("used {:>6} ", short_bytes(used)),
        format!(" live {:>6} ", short_bytes(live)),
    )
}

/// The two sparklines' widths in a row `width` wide with these labels, each followed by its
/// window (` 10m`).
fn spark_widths(width: usize, labels: &(String, String)) -> [usize; 2] {
    let half = width / 2;
    [
        half.saturating_sub(labels.0.chars().count() + 4),
        width.saturating_sub(half + labels.1.chars().count() + 4),
    ]
}

/// What the sparkline row of the GPU `uuid` shows in a panel `width` wide inside.
fn spark_row(state: &State, uuid: &str, width: usize) -> SparkRow {
    let history = &state.pipeline.history;
    let used = history.get(&SeriesKey::device(uuid, Metric::Used));
    let live = history.get(&SeriesKey::device(uuid, Metric::Layer(Layer::Live)));
    let labels = spark_labels(used.and_then(|s| s.last()), live.and_then(|s| s.last()));
    let [w_used, w_live] = spark_widths(width, &labels);
    let now = state.now();
    // Where climbs on this GPU began, marked on both.
    let starts = state.climb_starts_on_gpu(uuid);
    // Both windows are the used series' (their cells end together).
    let window = |w: usize| Spark::of(w, used, state.setup.interval).window();
    SparkRow {
        labels,
        windows: [window(w_used), window(w_live)],
        used: SparkRead::of(used, now, w_used, &starts),
        live: SparkRead::of(live, now, w_live, &starts),
    }
}

/// The sparkline row: `used  3.50G ▁▂▃▅ 10m  live  2.00G ▁▁▂▂ 10m`.
fn spark_line(row: &SparkRow, total: u64, width: usize, theme: Theme) -> Line<'static> {
    let [w_used, w_live] = spark_widths(width, &row.labels);
    let window = |secs: f64| Span::styled(format!(" {:>3}", short_window(secs)), theme.dim());
    let warn = theme.severity(crate::detect::Severity::Warning);
    let mut spans = vec![Span::styled(row.labels.0.clone(), theme.dim())];
    spans.extend(
        row.used
            .spans(w_used, Some(total), theme.layer(Layer::Other), warn),
    );
    spans.push(window(row.windows[0]));
    spans.push(Span::styled(row.labels.1.clone(), theme.dim()));
    spans.extend(
        row.live
            .spans(w_live, Some(total), theme.layer(Layer::Live), warn),
    );
    spans.push(window(row.windows[1]));
    Line::from(spans)
}

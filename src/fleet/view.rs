//! The fleet's screen: a row per device (or per node that is down or stale), ranked by
//! urgency; a row per job (`g`); a node's devices and the line to its live view (Enter).
//! Pure: state in, frame out, as the node monitor's screens are tested.

use super::model::{Device, Fleet, Job, Node, NodeState, Sort, Urgency, Window};
use crate::layers::Layer;
use crate::text::clean;
use crate::units::{bytes, duration};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Devices,
    Jobs,
}

/// The rows a read asks for at least, and the step it grows by as the selection moves down,
/// unless `--rows` says otherwise: a few screens' worth, so that a refresh of a large fleet
/// reads what can be shown.
pub const WINDOW_ROWS: usize = 200;

/// What the screen shows and where the user is in it.
pub struct FleetView {
    pub fleet: Option<Fleet>,
    /// The last read's failure, while the fleet shown (if any) is older.
    pub error: Option<String>,
    /// Unix seconds now, for ages.
    pub now: f64,
    pub mode: Mode,
    pub sort: Sort,
    pub reversed: bool,
    pub filter: String,
    /// The filter as last kept (Enter) or cleared: what the source is asked for. While one is
    /// typed, the rows read are filtered as it grows, and read again when it is kept.
    pub kept_filter: String,
    /// The rows a read asks for at least, and the step they grow by (`--rows`).
    pub window_rows: usize,
    pub typing: bool,
    pub selected: usize,
    /// The node open (its instance), Enter on a row.
    pub open: Option<String>,
    pub ssh_command: String,
    /// The open node's processes and history, once read (an error where they could not be).
    pub detail: Option<Result<super::detail::Detail, String>>,
    /// Lines the open node's page is scrolled by.
    pub scroll: u16,
    pub quit: bool,
    pub refresh_now: bool,
}

impl FleetView {
    pub fn new(ssh_command: String) -> FleetView {
        FleetView {
            fleet: None,
            error: None,
            now: 0.0,
            mode: Mode::Devices,
            sort: Sort::Urgency,
            reversed: false,
            filter: String::new(),
            kept_filter: String::new(),
            window_rows: WINDOW_ROWS,
            typing: false,
            selected: 0,
            open: None,
            ssh_command,
            detail: None,
            scroll: 0,
            quit: false,
            refresh_now: false,
        }
    }

    /// What the screen asks the source for: the rows down to the one selected and half a
    /// window or more past it (a multiple of `window_rows`), by the order and the filter kept.
    pub fn window(&self) -> Window {
        let step = self.window_rows.max(1);
        let want = (self.selected + step / 2).div_ceil(step) * step;
        Window {
            rows: Some(want.max(step)),
            sort: self.sort,
            reversed: self.reversed,
            filter: self.kept_filter.clone(),
        }
    }

    /// The device rows, in the order shown: (node, device), `None` for a node down or stale
    /// (or up with no device).
    pub fn device_rows(&self) -> Vec<(&Node, Option<&Device>)> {
        let Some(fleet) = &self.fleet else {
            return Vec::new();
        };
        let filter = self.filter.to_lowercase();
        let mut rows: Vec<(&Node, Option<&Device>)> = Vec::new();
        for node in &fleet.nodes {
            if node.state != NodeState::Up {
                rows.push((node, None));
            } else if node.devices.is_empty() && node.device_count.is_none_or(|n| n == 0) {
                // A node up with no device: a row where no filter is asked, or where the
                // node itself matches it (a filtered read's count is of the devices that
                // match: none of them is not none at all).
                if filter.is_empty() || super::model::row_matches(node, None, &filter) {
                    rows.push((node, None));
                }
            } else {
                rows.extend(node.devices.iter().map(|d| (node, Some(d))));
            }
        }
        // Prometheus picked the rows by this very filter (owners too, which it does not send):
        // they are not filtered again. One being typed narrows the rows read.
        let picked = fleet
            .part
            .as_ref()
            .is_some_and(|p| p.filter.to_lowercase() == filter);
        if !picked {
            rows.retain(|(n, d)| super::model::row_matches(n, *d, &filter));
        }
        let used_share = |d: Option<&Device>| {
            d.and_then(|d| Some(d.used()? as f64 / d.total.filter(|t| *t > 0)? as f64))
                .unwrap_or(-1.0)
        };
        match self.sort {
            Sort::Urgency => rows.sort_by(|a, b| {
                Urgency::cmp_desc(&Urgency::of(a.0, a.1), &Urgency::of(b.0, b.1))
                    .then_with(|| a.0.name.cmp(&b.0.name))
            }),
            Sort::Node => rows.sort_by(|a, b| {
                a.0.name
                    .cmp(&b.0.name)
                    .then_with(|| gpu_order(a.1).cmp(&gpu_order(b.1)))
            }),
            Sort::Used => rows.sort_by(|a, b| used_share(b.1).total_cmp(&used_share(a.1))),
        }
        if self.reversed {
            rows.reverse();
        }
        rows
    }

    pub fn job_rows(&self) -> Vec<&Job> {
        let Some(fleet) = &self.fleet else {
            return Vec::new();
        };
        let filter = self.filter.to_lowercase();
        let mut rows: Vec<&Job> = fleet
            .jobs
            .iter()
            .filter(|j| super::model::job_matches(j, &filter))
            .collect();
        if self.reversed {
            rows.reverse();
        }
        rows
    }

    fn row_count(&self) -> usize {
        match self.mode {
            Mode::Devices => self.device_rows().len(),
            Mode::Jobs => self.job_rows().len(),
        }
    }

    /// A key: what it changes. Returns whether to draw again.
    pub fn key(&mut self, code: crossterm::event::KeyCode) -> bool {
        use crossterm::event::KeyCode as K;
        if self.typing {
            match code {
                K::Enter => {
                    self.typing = false;
                    self.kept_filter = self.filter.clone();
                }
                K::Esc => {
                    self.typing = false;
                    self.filter.clear();
                    self.kept_filter.clear();
                }
                K::Backspace => {
                    self.filter.pop();
                }
                K::Char(c) if !c.is_control() && self.filter.chars().count() < 64 => {
                    self.filter.push(c)
                }
                _ => return false,
            }
            self.selected = 0;
            return true;
        }
        if self.open.is_some() {
            match code {
                K::Esc | K::Backspace | K::Left | K::Char('q') => {
                    self.open = None;
                    self.scroll = 0;
                }
                K::Char('r') => self.refresh_now = true,
                K::Down | K::Char('j') => self.scroll = self.scroll.saturating_add(1),
                K::Up | K::Char('k') => self.scroll = self.scroll.saturating_sub(1),
                K::PageDown => self.scroll = self.scroll.saturating_add(20),
                K::PageUp => self.scroll = self.scroll.saturating_sub(20),
                K::Home => self.scroll = 0,
                _ => return false,
            }
            return true;
        }
        let rows = self.row_count();
        match code {
            K::Char('q') => self.quit = true,
            K::Down | K::Char('j') => {
                self.selected = (self.selected + 1).min(rows.saturating_sub(1))
            }
            K::Up | K::Char('k') => self.selected = self.selected.saturating_sub(1),
            K::PageDown => self.selected = (self.selected + 20).min(rows.saturating_sub(1)),
            K::PageUp => self.selected = self.selected.saturating_sub(20),
            K::Home => self.selected = 0,
            K::End => self.selected = rows.saturating_sub(1),
            K::Char('s') => {
                self.sort = self.sort.next();
                self.selected = 0;
            }
            K::Char('S') => self.reversed = !self.reversed,
            K::Char('/') => {
                self.typing = true;
                self.filter.clear();
            }
            K::Char('g') => {
                self.mode = match self.mode {
                    Mode::Devices => Mode::Jobs,
                    Mode::Jobs => Mode::Devices,
                };
                self.selected = 0;
            }
            K::Char('r') => self.refresh_now = true,
            K::Esc => {
                self.filter.clear();
                self.kept_filter.clear();
            }
            K::Enter if self.mode == Mode::Devices => {
                let instance = self
                    .device_rows()
                    .get(self.selected)
                    .map(|(n, _)| n.instance.clone());
                self.open = instance;
            }
            _ => return false,
        }
        true
    }

    /// The line that opens a node's live view.
    pub fn ssh_line(&self, node: &Node) -> String {
        // A node's name is from outside: only a host name's characters go into a command.
        let safe: String = node
            .name
            .split(' ')
            .next()
            .unwrap_or("")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
            .collect();
        self.ssh_command.replace("{node}", &safe)
    }
}

fn gpu_order(d: Option<&Device>) -> (u64, String) {
    d.map_or((0, String::new()), |d| {
        (d.gpu.parse().unwrap_or(u64::MAX), d.uuid.clone())
    })
}

/// A layer's colour in the bar (its glyph is the node view's, `Layer::glyph`).
fn colour(layer: Layer) -> Color {
    match layer {
        Layer::Live => Color::Green,
        Layer::Fragmented => Color::Red,
        Layer::Cached => Color::Cyan,
        Layer::OutsidePool => Color::Yellow,
        Layer::Context => Color::Magenta,
        Layer::Unattributed => Color::Gray,
        Layer::Other => Color::DarkGray,
        Layer::Free => Color::Reset,
    }
}

/// A device's layers as a bar of `width` cells, each layer's share of its total; `n/a`
/// where its layers are unknown.
fn bar(d: &Device, width: usize) -> Vec<Span<'static>> {
    let total: u64 = d.total.unwrap_or_else(|| d.layers.values().sum());
    if d.layers.is_empty() || total == 0 {
        return vec![Span::raw(format!("{:<width$}", "n/a"))];
    }
    let mut spans = Vec::new();
    let mut drawn = 0usize;
    let mut acc = 0u64;
    for layer in Layer::ALL {
        let Some(b) = d.layers.get(layer.name()) else {
            continue;
        };
        acc += b;
        let end = ((acc as f64 / total as f64) * width as f64).round() as usize;
        let cells = end.min(width).saturating_sub(drawn);
        if cells > 0 {
            spans.push(Span::styled(
                layer.glyph().to_string().repeat(cells),
                Style::new().fg(colour(layer)),
            ));
            drawn += cells;
        }
    }
    if drawn < width {
        spans.push(Span::raw(" ".repeat(width - drawn)));
    }
    spans
}

fn pad(text: &str, width: usize) -> String {
    let mut out: String = text.chars().take(width).collect();
    let n = out.chars().count();
    if n < width {
        out.push_str(&" ".repeat(width - n));
    }
    out
}

fn age(secs: Option<f64>) -> String {
    secs.map_or("n/a".into(), crate::units::age)
}

/// Draws the fleet.
pub fn draw(frame: &mut Frame, v: &FleetView) {
    let area = frame.area();
    if area.width < 60 || area.height < 10 {
        frame.render_widget(
            Paragraph::new(format!(
                "strata fleet needs 60x10; this terminal is {}x{}",
                area.width, area.height
            )),
            area,
        );
        return;
    }
    // The notes' area holds the notes, five at most.
    let notes = note_lines(v);
    let [head, notes_area, body, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(notes.len().min(5) as u16),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(header(v)), head);
    frame.render_widget(Paragraph::new(notes), notes_area);
    if let Some(instance) = &v.open {
        node_detail(frame, v, instance, body);
    } else {
        match v.mode {
            Mode::Devices => devices(frame, v, body),
            Mode::Jobs => jobs(frame, v, body),
        }
    }
    frame.render_widget(Paragraph::new(footer(v)), foot);
}

fn header(v: &FleetView) -> Line<'static> {
    let Some(f) = &v.fleet else {
        return Line::from(match &v.error {
            Some(_) => "strata fleet · not read".to_string(),
            None => "strata fleet · reading…".to_string(),
        });
    };
    let count = |s: NodeState| f.nodes.iter().filter(|n| n.state == s).count();
    let devices: usize = f.nodes.iter().map(|n| n.devices.len()).sum();
    // A windowed read: what was read of how many (the rest are not rows until read).
    let devices = match &f.part {
        Some(p) if v.mode == Mode::Jobs => match p.jobs {
            Some(jobs) if p.jobs_read < jobs => format!(
                "{} jobs read of {jobs} (the largest, and each with a climbing rank)",
                p.jobs_read
            ),
            _ => format!("{} jobs", p.jobs_read),
        },
        Some(p) if p.devices_read < p.devices => format!(
            "{} of {} devices read (the first by {}{})",
            p.devices_read,
            p.devices,
            p.sort.name(),
            if p.reversed { ", reversed" } else { "" }
        ),
        _ => format!("{devices} devices"),
    };
    // The source last: what a narrow terminal cuts. A windowed read lists every node down
    // or stale, and counts the rest.
    let (down, stale) = (count(NodeState::Down), count(NodeState::Stale));
    let total = f
        .part
        .as_ref()
        .and_then(|p| p.nodes)
        .map_or(f.nodes.len(), |n| (n as usize).max(down + stale));
    let mut text = format!("strata fleet · {total} nodes: {} up", total - down - stale);
    for (s, word) in [(NodeState::Down, "down"), (NodeState::Stale, "stale")] {
        if count(s) > 0 {
            text.push_str(&format!(", {} {word}", count(s)));
        }
    }
    text.push_str(&format!(
        " · {devices} · read {} ago · {}",
        crate::units::age((v.now - f.time).max(0.0)),
        f.source
    ));
    Line::from(Span::styled(
        text,
        Style::new().add_modifier(Modifier::BOLD),
    ))
}

fn note_lines(v: &FleetView) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if let Some(e) = &v.error {
        let shown = if v.fleet.is_some() {
            format!(
                "not refreshed: {} (the figures below are from the last read)",
                clean(e)
            )
        } else {
            format!("cannot read the fleet: {}", clean(e))
        };
        out.push(Line::from(Span::styled(shown, Style::new().fg(Color::Red))));
    }
    if let Some(f) = &v.fleet {
        let silent = f
            .nodes
            .iter()
            .filter(|n| n.state == NodeState::Up && !n.findings_exported)
            .count();
        if silent > 0 {
            out.push(Line::from(Span::styled(
                format!(
                    "{silent} node{} a strata that exports no device findings: their WORST is n/a, not none (upgrade strata serve there)",
                    if silent == 1 { " runs" } else { "s run" }
                ),
                Style::new().fg(Color::Yellow),
            )));
        }
        for finding in &f.findings {
            out.push(Line::from(Span::styled(
                format!("rank_outlier · {}", clean(&finding.message)),
                Style::new().fg(Color::Yellow),
            )));
        }
        for p in &f.problems {
            out.push(Line::from(Span::styled(
                format!("partial: {}", clean(p)),
                Style::new().fg(Color::Red),
            )));
        }
    }
    out
}

fn selected_style(selected: bool) -> Style {
    if selected {
        Style::new().add_modifier(Modifier::REVERSED)
    } else {
        Style::new()
    }
}

/// The device table's column widths at `width` cells: the bar takes what is left, and is
/// left out where under 8 cells remain (an 80-column terminal).
struct Columns {
    node: usize,
    gpu: usize,
    bar: usize,
    used: usize,
    worst: usize,
    oom: usize,
}

impl Columns {
    fn at(width: usize) -> Columns {
        let (node, gpu, used, oom, age) = (18, 8, 22, 9, 6);
        let worst = if width >= 110 { 28 } else { 20 };
        let left = width.saturating_sub(node + gpu + used + worst + oom + age);
        let bar = if left >= 9 { (left - 1).min(40) } else { 0 };
        Columns {
            node,
            gpu,
            bar,
            used,
            worst,
            oom,
        }
    }
}

/// A device's worst finding in `width` characters: `critical oom forecast ×2`; where that
/// does not fit, the severity shortened (its colour says it too), then the rest cut with `…`.
fn worst_text(f: &super::model::DeviceFinding, width: usize) -> String {
    let kind = f.kind.replace('_', " ");
    let count = if f.count > 1 {
        format!(" ×{}", f.count)
    } else {
        String::new()
    };
    let full = format!("{} {kind}{count}", f.severity);
    if full.chars().count() <= width {
        return full;
    }
    let short = match f.severity.as_str() {
        "critical" => "crit",
        "warning" => "warn",
        other => other,
    };
    let text = format!("{short} {kind}{count}");
    if text.chars().count() <= width {
        return text;
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// `text` in at most `width` characters: where it is longer, its start and its end either
/// side of `…` (a job's key ends in what tells it from others: a pod's suffix, a step).
fn elide(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width || width < 3 {
        return text.to_string();
    }
    let head = (width - 1) / 2;
    let tail = width - 1 - head;
    let mut out: String = text.chars().take(head).collect();
    out.push('…');
    out.extend(text.chars().skip(n - tail));
    out
}

/// A cell of `width`: the text cut to leave one blank before the next column.
fn cell(text: &str, width: usize) -> String {
    pad(text, width.saturating_sub(1)) + " "
}

fn devices(frame: &mut Frame, v: &FleetView, area: Rect) {
    let rows = v.device_rows();
    let c = Columns::at(usize::from(area.width));
    let mut head = cell("NODE", c.node) + &cell("GPU", c.gpu);
    if c.bar > 0 {
        head += &cell("LAYERS", c.bar + 1);
    }
    head +=
        &(cell("USED / TOTAL", c.used) + &cell("WORST", c.worst) + &cell("OOM IN", c.oom) + "AGE");
    let mut lines = vec![Line::from(Span::styled(
        head,
        Style::new().add_modifier(Modifier::BOLD),
    ))];
    let visible = usize::from(area.height).saturating_sub(1);
    let first = v.selected.saturating_sub(visible.saturating_sub(1));
    for (i, (node, device)) in rows.iter().enumerate().skip(first).take(visible) {
        let style = selected_style(i == v.selected);
        let mut spans = vec![Span::styled(cell(&node.name, c.node), style)];
        match device {
            None => {
                let (word, color) = match node.state {
                    NodeState::Down => ("DOWN", Color::Red),
                    NodeState::Stale => ("STALE", Color::Yellow),
                    NodeState::Up => ("no devices", Color::Reset),
                };
                spans.push(Span::styled(
                    format!(
                        "{word}: {}",
                        clean(node.why.as_deref().unwrap_or("no GPU listed"))
                    ),
                    Style::new().fg(color),
                ));
            }
            Some(d) => {
                let gpu = if d.mig {
                    format!("{} mig", d.gpu)
                } else {
                    d.gpu.clone()
                };
                spans.push(Span::raw(cell(&gpu, c.gpu)));
                if c.bar > 0 {
                    spans.extend(bar(d, c.bar));
                    spans.push(Span::raw(" "));
                }
                let used = match (d.used(), d.total) {
                    (Some(u), Some(t)) => format!("{} / {}", bytes(u), bytes(t)),
                    (None, Some(t)) => format!("n/a / {}", bytes(t)),
                    _ => "n/a".into(),
                };
                spans.push(Span::raw(cell(&used, c.used)));
                // An older strata exports no findings: unknown, not none.
                let none = if node.findings_exported { "—" } else { "n/a" };
                let worst = d
                    .worst()
                    .map_or(String::from(none), |f| worst_text(f, c.worst - 1));
                let wcolor = match d.worst().map(|f| f.severity.as_str()) {
                    Some("critical") => Color::Red,
                    Some("warning") => Color::Yellow,
                    _ => Color::Reset,
                };
                spans.push(Span::styled(cell(&worst, c.worst), Style::new().fg(wcolor)));
                spans.push(Span::raw(cell(
                    &d.oom_eta_secs.map_or("—".into(), duration),
                    c.oom,
                )));
                spans.push(Span::raw(age(node.age_secs)));
            }
        }
        lines.push(Line::from(spans));
    }
    if rows.is_empty() && v.fleet.is_some() {
        lines.push(Line::from(if v.filter.is_empty() {
            "no node has strata serve's metrics".to_string()
        } else {
            format!("nothing matches /{}", clean(&v.filter))
        }));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

fn spread_cell(j: &Job, figure: &str) -> String {
    j.spread.get(figure).map_or("n/a".into(), |s| {
        format!(
            "{} {} {}",
            crate::units::short_bytes(s.least as u64),
            crate::units::short_bytes(s.median as u64),
            crate::units::short_bytes(s.most as u64)
        )
    })
}

fn jobs(frame: &mut Frame, v: &FleetView, area: Rect) {
    let rows = v.job_rows();
    // Below 110 columns the memory outside the pool is left out, and the job's name narrows;
    // wider, the name takes what the figures leave (a pod's name ends in what tells it from
    // its siblings).
    let wide = area.width >= 110;
    let spread_w = if wide { 22 } else { 20 };
    let figures = 7 + 7 + spread_w * 2 + if wide { 22 } else { 0 } + 16;
    let job_w = usize::from(area.width)
        .saturating_sub(figures)
        .clamp(if wide { 20 } else { 16 }, 64);
    let mut head = cell("JOB", job_w) + &cell("PROCS", 7) + &cell("NODES", 7);
    head += &cell("LIVE least med most", spread_w);
    head += &cell("RESERVED", spread_w);
    if wide {
        head += &cell("OUTSIDE POOL", 22);
    }
    head += "CLIMBING";
    let mut lines = vec![Line::from(Span::styled(
        head,
        Style::new().add_modifier(Modifier::BOLD),
    ))];
    let visible = usize::from(area.height).saturating_sub(1);
    let first = v.selected.saturating_sub(visible.saturating_sub(1));
    let outliers: Vec<&str> = v
        .fleet
        .iter()
        .flat_map(|f| f.findings.iter().map(|x| x.job.as_str()))
        .collect();
    for (i, j) in rows.iter().enumerate().skip(first).take(visible) {
        let climbing = if j.climbing.is_empty() {
            "—".to_string()
        } else if outliers.contains(&j.key.as_str()) {
            format!("{} (outlier)", j.climbing.len())
        } else {
            format!("{} of {}", j.climbing.len(), j.processes)
        };
        let mut row = cell(&elide(&clean(&j.key), job_w - 1), job_w)
            + &cell(&j.processes.to_string(), 7)
            + &cell(&j.nodes.to_string(), 7)
            + &cell(&spread_cell(j, Layer::Live.name()), spread_w)
            + &cell(&spread_cell(j, "reserved"), spread_w);
        if wide {
            row += &cell(&spread_cell(j, Layer::OutsidePool.name()), 22);
        }
        row += &climbing;
        lines.push(Line::from(Span::styled(
            row,
            selected_style(i == v.selected),
        )));
    }
    if rows.is_empty() && v.fleet.is_some() {
        lines.push(Line::from(
            "no job: no process names a Slurm job, a torchrun run or a pod (rank labels come from strata serve's per-process series)",
        ));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

fn node_detail(frame: &mut Frame, v: &FleetView, instance: &str, area: Rect) {
    let Some(node) = v
        .fleet
        .as_ref()
        .and_then(|f| f.nodes.iter().find(|n| n.instance == instance))
    else {
        frame.render_widget(Paragraph::new("that node is no longer in the fleet"), area);
        return;
    };
    let state = match node.state {
        NodeState::Up => "up".to_string(),
        NodeState::Down => format!("DOWN: {}", clean(node.why.as_deref().unwrap_or(""))),
        NodeState::Stale => format!("STALE: {}", clean(node.why.as_deref().unwrap_or(""))),
    };
    let mut lines = vec![
        Line::from(Span::styled(
            format!("{} ({}) · {state}", node.name, clean(&node.instance)),
            Style::new().add_modifier(Modifier::BOLD),
        )),
        Line::from(format!(
            "strata {} · sample age {}",
            node.version.as_deref().unwrap_or("n/a"),
            age(node.age_secs)
        )),
        Line::from(format!("live view: {}", v.ssh_line(node))),
        Line::from(""),
    ];
    if node.state == NodeState::Up && !node.findings_exported {
        lines.insert(
            2,
            Line::from(Span::styled(
                "its strata exports no device findings (older than this one): its findings are n/a, not none",
                Style::new().fg(Color::Yellow),
            )),
        );
    }
    for d in &node.devices {
        lines.push(Line::from(format!(
            "GPU {}{} {} · {}",
            d.gpu,
            if d.mig { " (MIG)" } else { "" },
            d.name.as_deref().unwrap_or(""),
            clean(&d.uuid)
        )));
        let mut layers: Vec<String> = Vec::new();
        for layer in Layer::ALL {
            if let Some(b) = d.layers.get(layer.name()) {
                layers.push(format!(
                    "{} {}",
                    layer.short(),
                    crate::units::short_bytes(*b)
                ));
            }
        }
        lines.push(Line::from(format!(
            "  {}",
            if layers.is_empty() {
                "layers n/a".to_string()
            } else {
                layers.join(" · ")
            }
        )));
        for f in &d.findings {
            lines.push(Line::from(format!(
                "  {} {} ×{}",
                f.severity, f.kind, f.count
            )));
        }
        if let Some(eta) = d.oom_eta_secs {
            lines.push(Line::from(format!("  OOM forecast in {}", duration(eta))));
        }
        // The evidence its node exports: each climb and forecast, with its process.
        if let Some(Ok(detail)) = &v.detail {
            for e in detail.evidence.iter().filter(|e| e.uuid == d.uuid) {
                lines.push(Line::from(evidence_line(e)));
                if let Some(points) = &e.history {
                    let what = e.cause.as_deref().unwrap_or("used").replace('_', " ");
                    lines.push(Line::from(format!(
                        "    {what}, last hour: {}",
                        spark_between(points)
                    )));
                }
            }
        }
        if let Some(Ok(detail)) = &v.detail {
            if let Some(points) = detail.history.get(&d.uuid) {
                lines.push(Line::from(format!(
                    "  used, last hour: {}",
                    spark(points, d.total)
                )));
            }
        }
    }
    match &v.detail {
        None => lines.push(Line::from("reading its processes…")),
        Some(Err(why)) => lines.push(Line::from(Span::styled(
            format!("its processes cannot be read: {}", clean(why)),
            Style::new().fg(Color::Red),
        ))),
        Some(Ok(detail)) => {
            if let Some(why) = &detail.no_history {
                lines.push(Line::from(Span::styled(
                    format!("history: {}", clean(why)),
                    Style::new().add_modifier(Modifier::DIM),
                )));
            }
            for p in &detail.problems {
                lines.push(Line::from(format!("partial: {}", clean(p))));
            }
            lines.push(Line::from(""));
            lines.push(Line::from(Span::styled(
                format!(
                    "{}{}{}{}{}{}COMMAND",
                    cell("PID", 9),
                    cell("GPU", 5),
                    cell("USED", 11),
                    cell(Layer::Live.head(), 11),
                    cell("CLIMB", 13),
                    cell("OWNER", 26)
                ),
                Style::new().add_modifier(Modifier::BOLD),
            )));
            if detail.processes.is_empty() {
                lines.push(Line::from("no process holds memory on it"));
            }
            for p in &detail.processes {
                let climb = p.climb_bytes_per_sec.map_or("—".to_string(), |r| {
                    format!(
                        "+{}/min",
                        crate::units::short_bytes((r * 60.0).max(0.0) as u64)
                    )
                });
                lines.push(Line::from(format!(
                    "{}{}{}{}{}{}{}",
                    cell(&p.pid, 9),
                    cell(&p.gpu, 5),
                    cell(&crate::units::opt_bytes(p.used), 11),
                    cell(&crate::units::opt_bytes(p.live), 11),
                    cell(&climb, 13),
                    cell(p.owner.as_deref().unwrap_or("—"), 26),
                    pad(
                        p.command.as_deref().or(p.user.as_deref()).unwrap_or(""),
                        usize::from(area.width).saturating_sub(75)
                    )
                )));
            }
        }
    }
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(ratatui::widgets::Wrap { trim: false })
            .scroll((v.scroll, 0)),
        area,
    );
}

/// One line of a finding's evidence on a node's page.
fn evidence_line(e: &super::detail::Evidence) -> String {
    let process = match (&e.pid, &e.who) {
        (Some(pid), Some(who)) => format!("pid {pid} ({who})"),
        (Some(pid), None) => format!("pid {pid}"),
        (None, _) => "the device".to_string(),
    };
    match (e.kind, e.bytes_per_sec, e.eta_secs) {
        ("climb", Some(rate), _) => {
            let per_min = crate::units::bytes((rate.max(0.0) * 60.0).round() as u64);
            let what = match (&e.cause, &e.series) {
                (Some(c), Some(s)) => format!("{} +{per_min}/min ({s})", c.replace('_', " ")),
                (Some(c), None) => format!("{} +{per_min}/min", c.replace('_', " ")),
                (None, _) => format!("+{per_min}/min"),
            };
            format!("  climb · {process}: {what}")
        }
        (_, _, Some(eta)) => format!(
            "  oom forecast · {process}: out of memory in {} at its climb's rate",
            duration(eta)
        ),
        _ => format!("  {} · {process}", e.kind.replace('_', " ")),
    }
}

/// A device's used memory over time in eighth-blocks, scaled to its total (or to its
/// highest point where the total is unknown); a gap where Prometheus has no sample.
fn spark(points: &[Option<f64>], total: Option<u64>) -> String {
    let top = total
        .map(|t| t as f64)
        .or_else(|| points.iter().flatten().copied().reduce(f64::max))
        .filter(|t| *t > 0.0)
        .unwrap_or(1.0);
    spark_scaled(points, |_, _| (0.0, top))
}

/// A climb's figure over time in eighth-blocks, from its least to its most (a climb of a
/// few MiB on an 80 GiB device is flat at the device's scale), then the two; a gap where
/// Prometheus has no sample.
fn spark_between(points: &[Option<f64>]) -> String {
    spark_scaled(points, |lo, hi| (lo, hi))
}

/// Points in eighth-blocks between the bottom and top that `scale` gives of their least
/// and most (the lowest block where the two meet), then the least and the most; a gap
/// where a point is missing.
fn spark_scaled(points: &[Option<f64>], scale: impl Fn(f64, f64) -> (f64, f64)) -> String {
    const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let known = points.iter().flatten().copied();
    let (Some(lo), Some(hi)) = (known.clone().reduce(f64::min), known.reduce(f64::max)) else {
        return "no samples in the last hour".into();
    };
    let (bottom, top) = scale(lo, hi);
    let span = top - bottom;
    let mut out: String = points
        .iter()
        .map(|p| match p {
            None => ' ',
            Some(_) if span <= 0.0 => BLOCKS[0],
            Some(v) => BLOCKS[(((v - bottom) / span) * 7.0).round().clamp(0.0, 7.0) as usize],
        })
        .collect();
    out.push_str(&format!(
        "  {} – {}",
        bytes(lo.max(0.0) as u64),
        bytes(hi.max(0.0) as u64)
    ));
    out
}

fn footer(v: &FleetView) -> Line<'static> {
    if v.typing {
        return Line::from(format!("/{}▏  Enter keep · Esc clear", v.filter));
    }
    if v.open.is_some() {
        return Line::from("Esc back · ↑↓ scroll · r refresh");
    }
    let mut text = format!(
        "q quit · ↑↓ move · Enter node · g {} · s sort: {}{} · / filter · r refresh",
        match v.mode {
            Mode::Devices => "jobs",
            Mode::Jobs => "devices",
        },
        v.sort.name(),
        if v.reversed { " (reversed)" } else { "" }
    );
    if !v.filter.is_empty() {
        text.push_str(&format!(" · filter /{} (Esc clears)", clean(&v.filter)));
    }
    Line::from(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::model::Part;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn node(name: &str, devices: usize, count: Option<u64>) -> Node {
        Node {
            name: name.into(),
            instance: format!("{name}:9842"),
            state: NodeState::Up,
            why: None,
            age_secs: Some(1.0),
            version: None,
            findings_exported: true,
            devices: (0..devices)
                .map(|g| Device {
                    gpu: g.to_string(),
                    uuid: format!("GPU-{name}-{g}"),
                    name: None,
                    mig: false,
                    total: Some(100),
                    layers: [("live".to_string(), 10), ("free".to_string(), 90)].into(),
                    findings: Vec::new(),
                    oom_eta_secs: None,
                    climb_bytes_per_sec: None,
                    owners: Vec::new(),
                })
                .collect(),
            device_count: count,
        }
    }

    /// A fleet read from `source` with these nodes, jobs and part, and no findings.
    fn fleet_of(source: &str, nodes: Vec<Node>, jobs: Vec<Job>, part: Option<Part>) -> Fleet {
        Fleet {
            schema: "strata.fleet/1",
            source: source.into(),
            time: 0.0,
            nodes,
            jobs,
            findings: Vec::new(),
            problems: Vec::new(),
            part,
        }
    }

    /// The screen drawn 12 lines high and `width` wide.
    fn text_at(v: &FleetView, width: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(width, 12)).expect("test backend");
        t.draw(|f| draw(f, v)).expect("drawn");
        let buf = t.backend().buffer();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
                    + "\n"
            })
            .collect()
    }

    fn text(v: &FleetView) -> String {
        text_at(v, 120)
    }

    /// A windowed read: a node's devices not read are not rows (nor is the node), a node up
    /// with no device at all is, and the header says how much was read.
    #[test]
    fn a_windowed_read_shows_the_rows_read_and_says_of_how_many() {
        let mut v = FleetView::new("ssh -t {node} strata".into());
        v.fleet = Some(fleet_of(
            "prometheus http://p:9090",
            vec![
                node("node-a", 2, Some(5)),
                node("node-b", 0, Some(3)),
                node("node-c", 0, Some(0)),
            ],
            Vec::new(),
            Some(Part {
                nodes: None,
                devices_read: 2,
                devices: 8,
                jobs_read: 0,
                jobs: Some(0),
                sort: Sort::Urgency,
                reversed: false,
                filter: String::new(),
            }),
        ));
        let rows: Vec<(&str, Option<&str>)> = v
            .device_rows()
            .iter()
            .map(|(n, d)| (n.name.as_str(), d.map(|d| d.gpu.as_str())))
            .collect();
        assert_eq!(
            rows,
            [
                ("node-a", Some("0")),
                ("node-a", Some("1")),
                ("node-c", None)
            ]
        );
        let screen = text(&v);
        assert!(
            screen.contains("2 of 8 devices read (the first by urgency)"),
            "{screen}"
        );
    }

    /// A node whose strata exports no findings: its devices' WORST is n/a, not "—", and a
    /// line says why.
    #[test]
    fn a_node_whose_strata_exports_no_findings_shows_them_unknown() {
        let mut v = FleetView::new(String::new());
        let mut old = node("node-old", 1, None);
        old.findings_exported = false;
        v.fleet = Some(fleet_of(
            "endpoints",
            vec![node("node-new", 1, None), old],
            Vec::new(),
            None,
        ));
        let screen = text(&v);
        let row = |name: &str| {
            screen
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("{name}: {screen}"))
                .to_string()
        };
        assert!(row("node-new").contains(" — "), "{screen}");
        assert!(row("node-old").contains(" n/a "), "{screen}");
        assert!(
            screen.contains("1 node runs a strata that exports no device findings"),
            "{screen}"
        );
    }

    /// The window asked grows ahead of the selection, in steps, and carries the order and
    /// the filter kept (not the one being typed).
    #[test]
    fn the_window_asked_grows_ahead_of_the_selection() {
        let mut v = FleetView::new(String::new());
        assert_eq!(v.window().rows, Some(WINDOW_ROWS));
        // Half a window ahead of the selection is read.
        v.selected = WINDOW_ROWS / 2;
        assert_eq!(v.window().rows, Some(WINDOW_ROWS));
        v.selected = WINDOW_ROWS / 2 + 1;
        assert_eq!(v.window().rows, Some(2 * WINDOW_ROWS));
        v.key(crossterm::event::KeyCode::Char('s'));
        v.key(crossterm::event::KeyCode::Char('S'));
        v.key(crossterm::event::KeyCode::Char('/'));
        v.key(crossterm::event::KeyCode::Char('x'));
        let w = v.window();
        assert_eq!(
            (w.sort, w.reversed, w.filter.as_str()),
            (Sort::Node, true, "")
        );
        v.key(crossterm::event::KeyCode::Enter);
        assert_eq!(v.window().filter, "x");
        v.key(crossterm::event::KeyCode::Esc);
        assert_eq!(v.window().filter, "");
    }

    /// A pod's job row keeps the end of its name, which tells it from its siblings: whole
    /// where the screen is wide, its start and end either side of `…` where it is not.
    #[test]
    fn a_pod_job_keeps_the_end_of_its_name() {
        let mut v = FleetView::new(String::new());
        v.mode = Mode::Jobs;
        let key = "pod inference/mistral-7b-6d4f9c-x2x7q";
        v.fleet = Some(fleet_of(
            "endpoints",
            vec![node("node-a", 1, None)],
            vec![Job {
                key: key.into(),
                processes: 1,
                nodes: 1,
                world_size: None,
                spread: Default::default(),
                climbing: Vec::new(),
            }],
            None,
        ));
        let at = |width: u16| {
            text_at(&v, width)
                .lines()
                .find(|l| l.starts_with("pod "))
                .unwrap_or_default()
                .to_string()
        };
        assert!(at(160).starts_with(&format!("{key} ")), "{}", at(160));
        let narrow = at(100);
        assert!(
            narrow.starts_with("pod inference/…b-6d4f9c-x2x7q "),
            "{narrow}"
        );
        assert_eq!(elide("abcdefghij", 5), "ab…ij");
        assert_eq!(elide("abc", 5), "abc");
    }

    /// At 80 columns a device's worst finding is said whole, its severity shortened, rather
    /// than cut mid-word.
    #[test]
    fn the_worst_finding_fits_its_column() {
        let f = |severity: &str, kind: &str, count| crate::fleet::model::DeviceFinding {
            kind: kind.into(),
            severity: severity.into(),
            count,
        };
        assert_eq!(
            worst_text(&f("critical", "oom_forecast", 1), 27),
            "critical oom forecast"
        );
        assert_eq!(
            worst_text(&f("critical", "oom_forecast", 1), 19),
            "crit oom forecast"
        );
        assert_eq!(
            worst_text(&f("critical", "zombie_context", 3), 19),
            "crit zombie contex…"
        );
        assert_eq!(
            worst_text(&f("warning", "fragmentation", 1), 19),
            "warn fragmentation"
        );
        let mut v = FleetView::new(String::new());
        let mut n = node("node-a", 1, None);
        n.devices[0].findings.push(f("critical", "oom_forecast", 1));
        v.fleet = Some(fleet_of("endpoints", vec![n], Vec::new(), None));
        let screen = text_at(&v, 80);
        assert!(screen.contains("crit oom forecast "), "{screen}");
    }

    /// A climb's hour is drawn from its least to its most, so that a climb of MiB on a
    /// device of GiB shows its slope; a flat or empty hour says so.
    #[test]
    fn a_climb_is_drawn_between_its_least_and_its_most() {
        let mib = 1048576.0;
        let climb = [
            Some(100.0 * mib),
            Some(101.0 * mib),
            None,
            Some(102.0 * mib),
        ];
        assert_eq!(spark_between(&climb), "▁▅ █  100 MiB – 102 MiB");
        assert_eq!(spark_between(&[Some(5.0), Some(5.0)]), "▁▁  5 B – 5 B");
        assert_eq!(spark_between(&[None, None]), "no samples in the last hour");
        // A device's used memory is drawn against its total, else its highest point.
        let used = [Some(50.0), None, Some(100.0)];
        assert_eq!(spark(&used, Some(200)), "▃ ▅  50 B – 100 B");
        assert_eq!(spark(&used, None), "▅ █  50 B – 100 B");
        assert_eq!(spark(&[Some(0.0)], None), "▁  0 B – 0 B");
    }

    /// A windowed read lists every node down or stale and counts the rest: the header says
    /// the count, with the nodes up worked from it.
    #[test]
    fn a_read_that_counts_its_nodes_says_how_many_are_up() {
        let mut v = FleetView::new(String::new());
        let mut down = node("node-down", 0, None);
        down.state = NodeState::Down;
        v.fleet = Some(fleet_of(
            "prometheus http://p:9090",
            vec![node("node-a", 1, None), down],
            Vec::new(),
            Some(Part {
                nodes: Some(1000),
                devices_read: 1,
                devices: 7000,
                jobs_read: 0,
                jobs: Some(0),
                sort: Sort::Urgency,
                reversed: false,
                filter: String::new(),
            }),
        ));
        let screen = text(&v);
        assert!(
            screen.contains("strata fleet · 1000 nodes: 999 up, 1 down"),
            "{screen}"
        );
    }

    /// A filtered read counts each node's devices that match: a node up with none of them
    /// is not a row ("no devices" would be false of it), unless the node itself matches.
    #[test]
    fn a_node_with_no_device_that_matches_is_no_row() {
        let mut v = FleetView::new(String::new());
        v.fleet = Some(fleet_of(
            "prometheus http://p:9090",
            vec![
                node("node-a", 2, Some(2)),
                node("node-b", 0, Some(0)),
                node("node-bare", 0, Some(0)),
            ],
            Vec::new(),
            Some(Part {
                nodes: None,
                devices_read: 2,
                devices: 2,
                jobs_read: 0,
                jobs: None,
                sort: Sort::Urgency,
                reversed: false,
                filter: "node-a".into(),
            }),
        ));
        v.filter = "node-a".into();
        let rows = |v: &FleetView| -> Vec<String> {
            v.device_rows()
                .iter()
                .map(|(n, d)| format!("{} {}", n.name, d.map_or("-", |d| d.gpu.as_str())))
                .collect()
        };
        assert_eq!(rows(&v), ["node-a 0", "node-a 1"]);
        // A filter typed that names the bare node: it is a row, with nothing read of it.
        v.filter = "bare".into();
        assert_eq!(rows(&v), ["node-bare -"]);
        // No filter: a node up with no device at all is a row.
        v.filter.clear();
        v.fleet.as_mut().expect("fleet").part = None;
        assert_eq!(
            rows(&v),
            ["node-a 0", "node-a 1", "node-b -", "node-bare -"]
        );
    }
}

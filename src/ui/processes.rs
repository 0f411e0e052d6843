//! The process table: who holds what, split into layers where a feed allows.

use super::chart::short_window;
use super::host::HostColumn;
use super::theme::Theme;
use super::widgets::Paint;
use super::widgets::{short_bytes, trend, Grid, GridRow, Section};
use crate::accounting::FeedStatus;
use crate::app::{
    sort_arrow, ClimbNote, Focus, ProcessRow, State, TableDrawn, TableEntry, TableLine,
};
use crate::detect::{Evidence, Finding, FindingKind};
use crate::layers::Layer;
use crate::present::{fit, state_label};
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::Span;

/// A process's memory must move by more than this across the trend to look like it moved.
const TREND_MIN_RANGE: u64 = 512 << 20;

pub(crate) fn draw_processes(paint: &mut Paint, area: Rect, state: &State, theme: Theme) {
    let entries = state.table();
    let processes = entries
        .iter()
        .filter(|e| matches!(e, TableEntry::Process { .. }))
        .count();
    let wide = area.width >= 120;
    let focused = state.focus == Focus::Processes;
    let grouped = match state.process_table.group_by {
        crate::accounting::GroupBy::None => String::new(),
        by => format!(" · grouped by {}", by.label()),
    };
    let section = Section::new(
        format!(
            " Processes{} · sorted by {} {}{grouped} ",
            filter_title(state, processes),
            state.process_table.sort.label(),
            sort_arrow(state.process_table.sort, state.process_table.sort_reversed)
        ),
        focused,
        theme,
    );
    // The table's area: the section's rule takes its top row only.
    let inner = section.inner(area);
    let inner_width = inner.width;
    let host_ns = state
        .current
        .as_ref()
        .and_then(|o| o.sample.host_pid_namespace);
    // Room for the feed's framework and backend as well (its age when it lags).
    let feed_column = area.width >= 150;
    // Room for a climb's rate and window (`+636M/min 8m`; `+636 MiB/min 8m` where wider),
    // and the ten minutes of the trend.
    let trend_width: u16 = if feed_column {
        15
    } else if wide {
        12
    } else {
        10
    };
    let (header, mut widths): (Vec<&str>, Vec<Constraint>) = if wide {
        (
            vec![
                "PID",
                "USER",
                "GPU",
                "USED",
                Layer::Live.head(),
                Layer::Cached.head(),
                Layer::Fragmented.head(),
                Layer::Context.head(),
                Layer::OutsidePool.head(),
                "TREND 10m",
                "STATE",
                "COMMAND",
            ],
            vec![
                Constraint::Length(7),
                Constraint::Length(9),
                Constraint::Length(10),
                Constraint::Length(7),
                Constraint::Length(7),
                Constraint::Length(7),
                Constraint::Length(7),
                Constraint::Length(7),
                Constraint::Length(7),
                Constraint::Length(trend_width),
                Constraint::Length(9),
                Constraint::Min(10),
            ],
        )
    } else {
        (
            // A PID in full (up to 4194304), whose job it is, and every figure with its unit
            // in five characters (`54.6G`, `318M`, `16.0E`).
            vec![
                "PID",
                "USER",
                "GPU",
                "USED",
                Layer::Live.head(),
                Layer::Cached.head(),
                Layer::Fragmented.head(),
                "TREND 10m",
                "STATE",
                "COMMAND",
            ],
            vec![
                Constraint::Length(7),
                Constraint::Length(8),
                Constraint::Length(9),
                Constraint::Length(5),
                Constraint::Length(5),
                Constraint::Length(6),
                Constraint::Length(5),
                Constraint::Length(trend_width),
                Constraint::Length(8),
                Constraint::Min(6),
            ],
        )
    };
    let mut header: Vec<String> = header.into_iter().map(str::to_string).collect();
    if feed_column {
        // After OUTSIDE: how far each fed process's peak can grow.
        header.insert(9, "HEADROOM".into());
        widths.insert(9, Constraint::Length(8));
        header.insert(header.len() - 1, "FEED".into());
        widths.insert(widths.len() - 1, Constraint::Length(FEED_WIDTH as u16));
    }
    // What the command would have: the extra columns take from it, before it.
    let extra = HostColumn::fitting(
        inner_width.saturating_sub(fixed_cells(&widths)),
        &state.setup.columns,
    );
    for column in &extra {
        header.insert(header.len() - 1, column.title());
        widths.insert(widths.len() - 1, column.constraint());
    }
    let interval = state
        .current
        .as_ref()
        .map_or(state.setup.interval, |o| o.sample.interval);
    let forecasts: Vec<&Finding> = state
        .findings()
        .iter()
        .filter(|f| f.kind == FindingKind::OomForecast)
        .collect();
    let columns = widths.len();
    // The command's cells: what the fixed columns and their spacing leave. A
    // command is cut to it with its `…`, by cells (a CJK character or an emoji takes two).
    let command_width = usize::from(inner_width.saturating_sub(fixed_cells(&widths)));
    let place_of = |uuid: &str| {
        state
            .current
            .as_ref()
            .map_or_else(String::new, |o| match o.sample.locate(uuid) {
                Some((gpu, None)) => gpu.index.to_string(),
                Some((gpu, Some(m))) => {
                    format!("{}:{}", gpu.index, m.profile.as_deref().unwrap_or("mig"))
                }
                None => "?".into(),
            })
    };
    let selected = state.table_index(&entries);
    let (history, time) = match &state.current {
        Some(o) => (Some(&state.pipeline.history), o.sample.time),
        None => (None, 0.0),
    };
    let grid = Grid {
        widths: &widths,
        header: GridRow {
            cells: header.into_iter().map(Span::raw).collect(),
            style: theme.table_header(),
        },
        highlight: if focused {
            theme.selected()
        } else {
            theme.dim()
        },
    };
    paint.section(area, section);
    // Only the rows on screen are worked out.
    let offset = grid.paint(paint, inner, entries.len(), selected, |index| {
        let (row, member) = match &entries[index] {
            TableEntry::Group(group) => {
                let findings = state.group_findings(group).len();
                let place = place_of(&group.device_uuid);
                return group_row(
                    group,
                    &place,
                    (wide, feed_column),
                    (columns, command_width),
                    findings,
                    theme,
                );
            }
            TableEntry::Process { row, member } => (row, *member),
        };
        let forecast = forecasts.iter().copied().find(|f| {
            f.pid == Some(row.process.pid)
                && f.device_uuid.as_deref() == Some(&*row.process.device_uuid)
        });
        let trend = history.map_or_else(Vec::new, |h| crate::app::trend(h, row.process, time));
        let mut cells = table_row(
            row,
            (&trend, trend_width as usize),
            wide,
            host_ns,
            forecast,
            theme,
        );
        if member {
            cells[0] = Span::raw(format!("└{}", row.process.pid));
        }
        if feed_column {
            let room = state.current.as_ref().and_then(|o| {
                let i = o
                    .sample
                    .processes
                    .iter()
                    .position(|p| std::ptr::eq(p, row.process))?;
                o.headroom.get(i).copied().flatten()
            });
            cells.insert(9, Span::raw(headroom_cell(room)));
        }
        if feed_column {
            cells.push(feed_cell(row, interval, theme));
        }
        cells.extend(extra.iter().map(|c| Span::raw(c.cell(row.process))));
        let command = command_line(row.process);
        cells.push(Span::raw(fit(&command, command_width)));
        GridRow {
            cells,
            style: Style::new(),
        }
    });
    if processes == 0 && state.process_table.filter.is_on() {
        no_match_line(paint, area, state, theme);
    }
    record_drawn(state, area, &entries, offset);
}

/// The title's count: ` (9)`; with a filter, what it is and how many of the processes it
/// shows (` · filter user:alice · 3 of 9`); while it is typed, a cursor, and why it does not
/// parse where it does not.
fn filter_title(state: &State, shown: usize) -> String {
    let filter = &state.process_table.filter;
    let all = state
        .current
        .as_ref()
        .map_or(0, |o| o.sample.processes.len());
    if !filter.editing && !filter.is_on() {
        return format!(" ({all})");
    }
    let text = crate::text::clean(&filter.text).into_owned();
    let cursor = if filter.editing { "▏" } else { "" };
    let error = match &filter.error {
        Some(e) if filter.editing => format!(" · {}", crate::text::clean(e)),
        _ => String::new(),
    };
    format!(" · filter {text}{cursor} · {shown} of {all}{error}")
}

/// A filter that matches nothing says so, and how to see every process again.
fn no_match_line(paint: &mut Paint, area: Rect, state: &State, theme: Theme) {
    let filter = crate::text::clean(&state.process_table.filter.text).into_owned();
    let line = ratatui::text::Line::styled(
        fit(
            &format!("no process matches `{filter}` · Esc clears the filter"),
            usize::from(area.width),
        ),
        theme.dim(),
    );
    let below_header = Rect {
        y: area.y.saturating_add(2),
        height: area.height.saturating_sub(2),
        ..area
    };
    paint.lines(below_header, vec![line]);
}

/// Records where each line of the table is on screen, for the mouse: the rows below the
/// title and the header, from the first `offset` the table scrolled to.
fn record_drawn(state: &State, area: Rect, entries: &[TableEntry<'_>], offset: usize) {
    let rows = usize::from(area.height.saturating_sub(2));
    let lines = entries
        .iter()
        .skip(offset)
        .take(rows)
        .map(|e| match e {
            TableEntry::Group(g) => TableLine::Group(g.key.clone(), g.device_uuid.clone()),
            TableEntry::Process { row, .. } => {
                TableLine::Process(row.process.pid, row.process.device_uuid.to_string())
            }
        })
        .collect();
    *state.mouse.table.borrow_mut() = Some(TableDrawn {
        left: area.x,
        width: area.width,
        top: area.y.saturating_add(2),
        lines,
    });
}

/// A group's row (`g`): its key, its device, NVML used and the layers summed over its
/// members (`≥` where a member's share is unknown), how many members and findings; the
/// other columns blank. `columns` is the table's count, so the row lines up.
fn group_row(
    group: &crate::accounting::GroupRow,
    place: &str,
    (wide, headroom_column): (bool, bool),
    (columns, command_width): (usize, usize),
    findings: usize,
    theme: Theme,
) -> GridRow<'static> {
    let sum = |value: Option<u64>, mark: &str| match value {
        Some(v) => format!("{mark}{}", short_bytes(Some(v))),
        None => short_bytes(None),
    };
    let layer = |l: Layer| {
        let mark = match (group.bounds.get(&l), group.partial.contains(&l)) {
            (Some(bound), _) => bound.mark(),
            (None, true) => "≥",
            (None, false) => "",
        };
        sum(group.layers.get(l), mark)
    };
    let mut cells = vec![
        "group".to_string(),
        String::new(),
        crate::text::clean(place).into_owned(),
        sum(group.used, if group.used_partial { "≥" } else { "" }),
        layer(Layer::Live),
        layer(Layer::Cached),
        layer(Layer::Fragmented),
    ];
    if wide {
        cells.push(layer(Layer::Context));
        cells.push(layer(Layer::OutsidePool));
    }
    if headroom_column {
        // Headroom is a process's own: a group's would sum peaks.
        cells.push(String::new());
    }
    let members = group.pids.len();
    let note = match findings {
        0 => String::new(),
        1 => "1 finding".into(),
        n => format!("{n} findings"),
    };
    cells.push(note);
    cells.push(format!(
        "{members} proc{}",
        if members == 1 { "" } else { "s" }
    ));
    // Blank up to the command, which names the group.
    while cells.len() + 1 < columns {
        cells.push(String::new());
    }
    cells.push(fit(&group.key, command_width));
    GridRow {
        cells: cells.into_iter().map(Span::raw).collect(),
        style: theme.table_header(),
    }
}

/// The HEADROOM column: `16.7G`, `-512M` where the peak no longer fits, blank without a feed.
fn headroom_cell(room: Option<crate::detect::Headroom>) -> String {
    match room {
        Some(r) if r.bytes < 0 => format!("-{}", short_bytes(Some(r.bytes.unsigned_abs()))),
        Some(r) => short_bytes(Some(r.bytes.unsigned_abs())),
        None => String::new(),
    }
}

/// A forecast's time to OOM for the TREND column: `OOM ~12m`, `OOM ~45s`.
pub(crate) fn forecast_label(forecast: &Finding, width: usize) -> String {
    let eta = match &forecast.evidence {
        Evidence::OomForecast(e) => e.eta_secs.0,
        _ => f64::NAN,
    };
    let when = short_window(eta.max(1.0));
    let text = format!("OOM ~{when}");
    if text.chars().count() <= width {
        text
    } else {
        fit(&format!("OOM{when}"), width)
    }
}

/// A figure with its unit in at most five characters: `54.6G`, `318M`, `n/a`.
fn figure(value: Option<u64>, _wide: bool) -> String {
    short_bytes(value)
}

const FEED_WIDTH: usize = 21;

/// The FEED column: the framework and allocator backend of a feed in use, with the age of its
/// sample only when it lags more than an interval (so the cell does not change every second).
fn feed_cell(row: &ProcessRow<'_>, interval: f64, theme: Theme) -> Span<'static> {
    let Some(feed) = &row.process.feed else {
        return Span::raw(match row.account.feed_status {
            FeedStatus::Refused { .. } => "refused",
            FeedStatus::Pending { kind, .. } => kind.label(),
            _ => "",
        });
    };
    let name = format!("{}·{}", feed.framework, feed.backend);
    let (text, style) = match row.account.feed_status {
        FeedStatus::Fresh { age } if age.abs() <= interval => (name, Style::new()),
        FeedStatus::Fresh { age } => (
            format!("{} {}", feed.framework, crate::units::duration(age.abs())),
            Style::new(),
        ),
        FeedStatus::Stale { age } => (
            format!("{} {}", feed.framework, crate::units::duration(age.abs())),
            theme.alert(),
        ),
        _ => (name, theme.alert()),
    };
    Span::styled(fit(&text, FEED_WIDTH), style)
}

/// A flagged climb's rate and the window it was read over, as much as `width` holds:
/// `+636 MiB/min 8m`, `+636M/min 8m`, `+1.6G/min 8m`, `+636M/min`, `+1.6G/min`: a rate is
/// per minute, written `/min`, at every width; the window goes before the unit is cut.
pub(crate) fn climb_rate(climb: &ClimbNote, width: usize) -> String {
    let rate = climb.rate_mib_per_min;
    let sign = if rate < 0.0 { '-' } else { '+' };
    let mib = format!("{sign}{:.0}", rate.abs());
    let gib = format!("{sign}{:.1}G", rate.abs() / 1024.0);
    let window = short_window(climb.window_secs);
    let with_window = |text: String| match window.is_empty() {
        true => text,
        false => format!("{text} {window}"),
    };
    let variants = [
        with_window(format!("{mib} MiB/min")),
        with_window(format!("{mib}M/min")),
        with_window(format!("{gib}/min")),
        format!("{mib}M/min"),
        format!("{gib}/min"),
        format!("{mib}M"),
    ];
    variants
        .iter()
        .find(|v| v.chars().count() <= width)
        .cloned()
        .unwrap_or_else(|| fit(&variants[variants.len() - 1], width))
}

fn table_row<'a>(
    row: &ProcessRow<'a>,
    (trend_cells, trend_width): (&[Option<u64>], usize),
    wide: bool,
    host_ns: Option<bool>,
    forecast: Option<&Finding>,
    theme: Theme,
) -> Vec<Span<'a>> {
    let p = row.process;
    let layers = &row.account.layers;
    let stale = matches!(row.account.feed_status, FeedStatus::Stale { .. });
    let state = state_label(p, &row.account.feed_status, host_ns);
    let trend = match (forecast, &row.climb) {
        (Some(f), _) => Span::styled(forecast_label(f, trend_width), theme.severity(f.severity)),
        (None, Some(climb)) => Span::styled(
            climb_rate(climb, trend_width),
            theme.severity(crate::detect::Severity::Warning),
        ),
        (None, None) => Span::raw(trend(trend_cells, trend_width, TREND_MIN_RANGE)),
    };
    let mut cells = vec![Span::raw(p.pid.to_string())];
    let user = crate::text::clean(p.user.as_deref().unwrap_or("n/a")).into_owned();
    cells.push(Span::raw(fit(&user, if wide { 9 } else { 8 })));
    cells.push(Span::raw(
        crate::text::clean(&row.place.to_string()).into_owned(),
    ));
    cells.push(Span::raw(figure(p.used, wide)));
    cells.push(Span::raw(figure(layers.live, wide)));
    cells.push(Span::raw(figure(layers.cached, wide)));
    cells.push(Span::raw(figure(layers.fragmented, wide)));
    if wide {
        let mark = row.account.context_source.map_or("", |s| s.mark());
        let context = match layers.context {
            Some(_) => format!("{mark}{}", figure(layers.context, wide)),
            None => "n/a".into(),
        };
        cells.push(Span::raw(context));
        // Beside an estimated context, the memory outside the pool is a lower bound: `≥0B`.
        let outside = match (
            layers.outside_pool,
            row.account.bounds().get(&Layer::OutsidePool),
        ) {
            (Some(_), Some(bound)) => {
                format!("{}{}", bound.mark(), figure(layers.outside_pool, wide))
            }
            _ => figure(layers.outside_pool, wide),
        };
        cells.push(Span::raw(outside));
    }
    cells.push(trend);
    let refused = matches!(
        row.account.feed_status,
        FeedStatus::Refused { .. } | FeedStatus::Inconsistent { .. }
    );
    let state_style = if state == "gone" || state == "zombie" || stale || refused {
        theme.alert()
    } else {
        Style::new()
    };
    cells.push(Span::styled(state, state_style));
    cells
}

/// The cells the fixed-width columns take, each with the cell of spacing after it.
fn fixed_cells(widths: &[Constraint]) -> u16 {
    widths
        .iter()
        .map(|c| match c {
            Constraint::Length(n) => n + 1,
            _ => 0,
        })
        .sum()
}

/// A process's command line as the table shows it, before it is cut to the column.
fn command_line(p: &crate::sample::ProcessSample) -> String {
    crate::text::clean(p.command.as_deref().unwrap_or("n/a")).into_owned()
}

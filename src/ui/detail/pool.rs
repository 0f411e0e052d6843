//! Inside the pool: the sites view (`w`) of one process, and the short section the
//! reconciliation shows of it. What the agent sent (a sites window, its latest segment map)
//! is drawn as it is, for the device the process is on, with its age.

use super::{clock_tenths, Rows};
use crate::app::State;
use crate::pipeline::Observed;
use crate::present::pool_text;
use crate::sample::feed::FeedRecord;
use crate::sample::pool::{DeviceSegments, SitesReport, SitesState};
use crate::sample::ProcessSample;
use crate::ui::theme::Theme;
use crate::units::{self, bytes};
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;

/// Sites listed per table in the view.
const SITES_SHOWN: usize = 10;

fn record_of<'a>(observed: &'a Observed, p: &ProcessSample) -> Option<&'a FeedRecord> {
    let sample = &observed.sample;
    match &p.feed {
        Some(feed) => sample.feeds.get(feed.feed),
        None => sample.feeds.iter().find(|r| r.pid() == Some(p.pid)),
    }
}

/// The framework's index of the device the process is on, where its feed names it.
fn index_of(p: &ProcessSample) -> Option<u32> {
    p.feed.as_ref().map(|f| f.stats.index)
}

fn device_map(record: &FeedRecord, index: Option<u32>) -> Option<&DeviceSegments> {
    let map = record.segments.as_deref()?;
    match index {
        Some(i) => map.devices.iter().find(|d| d.index == i),
        None if map.devices.len() == 1 => map.devices.first(),
        None => None,
    }
}

/// The reconciliation's lines on the pool's inside: the largest free block, the pinned
/// segments, and the key for the sites view.
pub(super) fn section(rows: &mut Rows, observed: &Observed, p: &ProcessSample, theme: Theme) {
    let Some(record) = record_of(observed, p) else {
        return;
    };
    let answers = record.hello.as_ref().is_some_and(|h| h.answers("sites"));
    let map = device_map(record, index_of(p));
    if map.is_none() && !answers {
        return;
    }
    rows.blank();
    rows.text("inside the pool".into(), theme.table_header());
    if let (Some(map), Some(report)) = (map, record.segments.as_deref()) {
        rows.text(
            format!(
                "  segments   {} · {}",
                summary(map),
                age(observed.sample.time, report.time)
            ),
            Style::new(),
        );
    }
    if answers {
        rows.text(
            "  sites      w: which lines of its code hold the memory (records 60 s)".into(),
            theme.dim(),
        );
    }
}

fn age(now: f64, then: f64) -> String {
    format!(
        "snapshot {} ago at {}",
        units::duration((now - then).max(0.0)),
        clock_tenths(then)
    )
}

/// `12 segments, 24.0 GiB; largest free block 600 MiB; 12 segments (24.0 GiB) pinned by
/// 63.0 MiB live`.
fn summary(map: &DeviceSegments) -> String {
    let segments: u64 = map.pools.iter().map(|p| p.segments).sum();
    let mut text = format!(
        "{segments} segments, {}; largest free block {}",
        bytes(map.reserved()),
        bytes(map.largest_free())
    );
    if let Some(pinned) = pool_text::pinned_words(&map.pinned()) {
        text.push_str(&format!("; {pinned}"));
    }
    text
}

/// The sites view: the window's state or summary for the process's device, then its
/// segment map.
pub(crate) fn draw_sites(
    frame: &mut Frame<'_>,
    area: Rect,
    state: &State,
    observed: &Observed,
    pid: u32,
    device_uuid: &str,
    theme: Theme,
) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.focused_border())
        .title(Line::styled(
            format!(" Allocation sites · PID {pid} "),
            theme.title(),
        ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let mut rows = Rows {
        lines: Vec::new(),
        width: inner.width as usize,
    };
    let process = observed
        .sample
        .processes
        .iter()
        .find(|p| p.pid == pid && *p.device_uuid == *device_uuid);
    match process.and_then(|p| record_of(observed, p).map(|r| (p, r))) {
        None => rows.text(
            format!("PID {pid} no longer has an allocator feed on this device. Esc goes back."),
            theme.dim(),
        ),
        Some((p, record)) => body(&mut rows, observed, p, record, state.sites.asked, theme),
    }
    let visible = inner.height as usize;
    let room = rows.lines.len().saturating_sub(visible);
    state.views.scroll_room.set(Some(room));
    let start = state.views.detail_scroll.min(room);
    crate::ui::widgets::put_lines(frame, inner, &rows.lines[start..]);
}

fn body(
    rows: &mut Rows,
    observed: &Observed,
    p: &ProcessSample,
    record: &FeedRecord,
    state_asked: Option<(u32, u64)>,
    theme: Theme,
) {
    let now = observed.sample.time;
    let index = index_of(p);
    let device = index.map_or("its device".to_string(), |i| format!("cuda:{i}"));
    match record.sites.as_deref() {
        None if record.hello.as_ref().is_some_and(|h| h.answers("sites")) => rows.text(
            "No window yet: w asks the agent to record the allocator's history for 60 s.".into(),
            theme.dim(),
        ),
        None => rows.text(
            "sites: this agent takes no requests (an earlier version): run the job under this strata's `strata run`."
                .into(),
            theme.alert(),
        ),
        Some(report) => {
            // Asked from here and not answered yet: the report shown is an earlier one.
            let pending = state_asked.filter(|&(asked_pid, id)| asked_pid == p.pid && id != report.id);
            if pending.is_some() && report.state != SitesState::Running {
                rows.text(
                    "Asked for a new window: waiting for the agent to begin it. The last one:".into(),
                    theme.dim(),
                );
            }
            window(rows, now, report, index, &device, theme)
        }
    }
    rows.blank();
    rows.text("segment map".into(), theme.table_header());
    let Some(report) = record.segments.as_deref() else {
        rows.text(
            "  n/a: the agent has sent no segment map (it takes a snapshot at most once a minute, never while the job records its own history)".into(),
            theme.dim(),
        );
        return;
    };
    let Some(map) = device_map(record, index) else {
        rows.text(
            format!("  n/a: the latest snapshot holds nothing of {device}"),
            theme.dim(),
        );
        return;
    };
    rows.text(format!("  {}", age(now, report.time)), theme.dim());
    for line in pool_text::device_segments(map, rows.width) {
        let pinned = line.contains(" pinned ") || line.starts_with("  pinned,");
        rows.text(line, if pinned { theme.alert() } else { Style::new() });
    }
}

fn window(
    rows: &mut Rows,
    now: f64,
    r: &SitesReport,
    index: Option<u32>,
    device: &str,
    theme: Theme,
) {
    match r.state {
        SitesState::Running => {
            let ends = r.started.unwrap_or(r.time) + r.seconds.unwrap_or(0.0);
            rows.text(
                format!(
                    "Recording the allocator's history ({}): the summary comes in {}.",
                    if r.history.as_deref() == Some("job") {
                        "the job's own"
                    } else {
                        "Python stacks"
                    },
                    units::duration((ends - now).max(0.0))
                ),
                Style::new(),
            );
        }
        SitesState::Refused | SitesState::Failed => rows.text(
            format!(
                "✗ sites {}: {}",
                if r.state == SitesState::Refused {
                    "refused"
                } else {
                    "failed"
                },
                r.reason.as_deref().unwrap_or("no reason given")
            ),
            theme.alert(),
        ),
        SitesState::Done => done(rows, now, r, index, device, theme),
    }
}

fn done(
    rows: &mut Rows,
    now: f64,
    r: &SitesReport,
    index: Option<u32>,
    device: &str,
    theme: Theme,
) {
    rows.text(
        format!(
            "Window ended {} ago at {}.",
            units::duration((now - r.time).max(0.0)),
            clock_tenths(r.time)
        ),
        Style::new(),
    );
    rows.text(pool_text::window_line(r), theme.dim());
    let found = r
        .devices
        .iter()
        .find(|d| Some(d.index) == index)
        .or(match r.devices.as_slice() {
            [only] if index.is_none() => Some(only),
            _ => None,
        });
    let Some(d) = found else {
        rows.text(format!("Nothing of {device} in this window."), theme.dim());
        return;
    };
    rows.blank();
    for line in pool_text::device_sites(d, SITES_SHOWN, true, rows.width) {
        rows.text(line, Style::new());
    }
}

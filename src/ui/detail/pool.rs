//! Inside the pool: the sites view (`w`) of one process, and the short section the
//! reconciliation shows of it. What the agent sent (a sites window, its latest segment map)
//! is drawn as it is, for the device the process is on, with its age.

use super::{clock_tenths, Rows};
use crate::app::State;
use crate::pipeline::Observed;
use crate::sample::feed::FeedRecord;
use crate::sample::pool::{DeviceSegments, RunState, SegmentStrip, SitesReport, SitesState};
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
/// Strips drawn in the view.
const STRIPS_SHOWN: usize = 12;

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
    let pinned = map.pinned();
    let mut text = format!(
        "{segments} segments, {}; largest free block {}",
        bytes(map.reserved()),
        bytes(map.largest_free())
    );
    if pinned.segments > 0 {
        text.push_str(&format!(
            "; {} pinned ({}) by {} live",
            pinned.segments,
            bytes(pinned.reserved),
            bytes(pinned.live)
        ));
    }
    text
}

/// A strip as a bar of `width` cells: `#` live, `~` freed and pending, `.` free, `?` mixed;
/// each cell the state holding most of its bytes, and every run at least one cell where the
/// width allows, so a small live block in a free segment is never drawn away.
pub(crate) fn strip_bar(strip: &SegmentStrip, width: usize) -> String {
    let glyph = |s: RunState| match s {
        RunState::Live => '#',
        RunState::Pending => '~',
        RunState::Free => '.',
        RunState::Mixed => '?',
    };
    if width == 0 || strip.size == 0 {
        return String::new();
    }
    if strip.runs.len() <= width {
        // Cells per run by its bytes, each at least one, the largest runs giving way.
        let mut cells: Vec<usize> = strip
            .runs
            .iter()
            .map(|(b, _)| ((*b as u128 * width as u128) / strip.size as u128).max(1) as usize)
            .collect();
        let mut total: usize = cells.iter().sum();
        while total > width {
            let Some(big) = (0..cells.len())
                .filter(|&i| cells[i] > 1)
                .max_by_key(|&i| cells[i])
            else {
                break;
            };
            cells[big] -= 1;
            total -= 1;
        }
        while total < width {
            let big = (0..cells.len())
                .max_by_key(|&i| strip.runs[i].0)
                .unwrap_or(0);
            cells[big] += 1;
            total += 1;
        }
        return strip
            .runs
            .iter()
            .zip(cells)
            .flat_map(|((_, s), n)| std::iter::repeat_n(glyph(*s), n))
            .collect();
    }
    // More runs than cells: each cell the state with most bytes in its span.
    let mut out = String::with_capacity(width);
    let mut run = 0usize;
    let mut into = 0u128; // bytes of runs before `run`
    for cell in 0..width {
        let lo = strip.size as u128 * cell as u128 / width as u128;
        let hi = strip.size as u128 * (cell as u128 + 1) / width as u128;
        let mut best = (0u128, RunState::Free);
        let mut held = [0u128; 4];
        while run < strip.runs.len() {
            let (b, s) = strip.runs[run];
            let (start, end) = (into, into + b as u128);
            let overlap = end.min(hi).saturating_sub(start.max(lo));
            let k = s as usize;
            held[k] += overlap;
            if held[k] > best.0 {
                best = (held[k], s);
            }
            if end > hi {
                break;
            }
            into = end;
            run += 1;
        }
        out.push(glyph(best.1));
    }
    out
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
        .find(|p| p.pid == pid && p.device_uuid == device_uuid);
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
    rows.text(format!("segment map of {device}"), theme.table_header());
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
    rows.text(format!("  {}", summary(map)), Style::new());
    rows.text(format!("  {}", age(now, report.time)), theme.dim());
    rows.text(
        format!(
            "  {:<16} {:>8} {:>10} {:>10} {:>10} {:>12}",
            "pool", "segments", "reserved", "live", "free", "largest free"
        ),
        theme.dim(),
    );
    for pool in &map.pools {
        let name = format!(
            "{}{}",
            pool.pool,
            if pool.expandable { " expandable" } else { "" }
        );
        rows.text(
            format!(
                "  {:<16} {:>8} {:>10} {:>10} {:>10} {:>12}",
                name,
                pool.segments,
                bytes(pool.reserved),
                bytes(pool.live),
                bytes(pool.free),
                bytes(pool.largest_free)
            ),
            Style::new(),
        );
    }
    let label = 28usize;
    let bar = rows.width.saturating_sub(label + 4).clamp(8, 96);
    for strip in map.strips.iter().take(STRIPS_SHOWN) {
        let tag = format!(
            "{} {}{}",
            bytes(strip.size),
            strip.pool,
            if strip.pinned { " pinned" } else { "" }
        );
        let style = if strip.pinned {
            theme.alert()
        } else {
            Style::new()
        };
        rows.text(format!("  {tag:<label$} {}", strip_bar(strip, bar)), style);
    }
    let more = map.strips.len().saturating_sub(STRIPS_SHOWN) as u64 + map.strips_left_out;
    if more > 0 {
        rows.text(format!("  … {more} more segments not drawn"), theme.dim());
    }
    rows.text(
        "  # live  ~ freed, pending  . free  ? mixed".into(),
        theme.dim(),
    );
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
    let window = r.window.map_or("n/a".into(), units::duration);
    let dropped = match r.dropped {
        Some(0) => "none dropped".to_string(),
        Some(d) => format!("{d} dropped: growth is partial"),
        None => "dropped n/a".into(),
    };
    rows.text(
        format!(
            "Window of {window}, ended {} ago · {} entries, {dropped}",
            units::duration((now - r.time).max(0.0)),
            r.entries.map_or("n/a".into(), |e| e.to_string())
        ),
        Style::new(),
    );
    let ms = |s: Option<f64>| s.map_or("n/a".into(), |s| format!("{:.1} ms", s * 1e3));
    rows.text(
        format!(
            "Cost to the job: {} of CPU, longest GIL hold {}, snapshot {}",
            ms(r.cost.cpu),
            ms(r.cost.gil_max),
            ms(r.cost.snapshot)
        ),
        theme.dim(),
    );
    if let Some(stopped) = &r.stopped {
        rows.text(format!("Stopped early: {stopped}"), theme.alert());
    }
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
    rows.text(
        format!(
            "grew over the window on {device}: {} in all",
            bytes(d.growth_bytes)
        ),
        theme.table_header(),
    );
    if d.growth.is_empty() {
        rows.text(
            "  nothing allocated in the window is still live".into(),
            theme.dim(),
        );
    }
    for g in d.growth.iter().take(SITES_SHOWN) {
        rows.text(
            format!(
                "  +{:>9}  {:>6}/{:<6} freed  {}",
                bytes(g.bytes),
                g.frees,
                g.allocs,
                site(&g.site, &g.via)
            ),
            Style::new(),
        );
    }
    rows.blank();
    let before = if d.live_unattributed > 0 {
        format!(
            ", {} from before recording began (no site)",
            bytes(d.live_unattributed)
        )
    } else {
        String::new()
    };
    rows.text(
        format!(
            "live on {device}: {} in {} blocks{before}",
            bytes(d.live_bytes),
            d.live_blocks
        ),
        theme.table_header(),
    );
    for s in d.live.iter().take(SITES_SHOWN) {
        rows.text(
            format!(
                "  {:>10}  {:>6} blocks  {}",
                bytes(s.bytes),
                s.count,
                site(&s.site, &s.via)
            ),
            Style::new(),
        );
    }
}

fn site(site: &str, via: &[String]) -> String {
    let mut out = site.to_string();
    for v in via {
        out.push_str(" ← ");
        out.push_str(v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(runs: Vec<(u64, RunState)>) -> SegmentStrip {
        SegmentStrip {
            pool: "large".into(),
            expandable: false,
            size: runs.iter().map(|r| r.0).sum(),
            live: 0,
            free: 0,
            largest_free: 0,
            pinned: false,
            runs,
        }
    }

    #[test]
    fn a_small_live_block_in_a_free_segment_is_never_drawn_away() {
        let s = strip(vec![
            (10 << 20, RunState::Free),
            (1 << 20, RunState::Live),
            (1 << 30, RunState::Free),
        ]);
        let bar = strip_bar(&s, 20);
        assert_eq!(bar.chars().count(), 20);
        assert_eq!(bar.matches('#').count(), 1, "{bar}");
        assert!(bar.starts_with('.') && bar.ends_with('.'), "{bar}");
    }

    #[test]
    fn cells_follow_bytes_and_fill_the_width() {
        let s = strip(vec![
            (3, RunState::Live),
            (1, RunState::Pending),
            (4, RunState::Free),
        ]);
        assert_eq!(strip_bar(&s, 8), "###~....");
        // More runs than cells: the state holding most of each cell's bytes.
        let many: Vec<(u64, RunState)> = (0..100)
            .map(|i| {
                (
                    10,
                    if i < 75 {
                        RunState::Live
                    } else {
                        RunState::Free
                    },
                )
            })
            .collect();
        let bar = strip_bar(&strip(many), 4);
        assert_eq!(bar, "###.");
    }
}

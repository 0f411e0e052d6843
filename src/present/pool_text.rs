//! The text of a segment map ([`SegmentsReport`]) and of allocation sites ([`SitesReport`]),
//! as lines: a table per device (pool, segments, reserved, live, pending, free, largest free,
//! pinned), the free blocks by size, each drawn segment as a bar, and the sites that hold and
//! grow. `strata analyze FILE.pickle` prints them; the monitor's views and `strata sites`
//! draw the same lines. Every site comes from the job: each is made safe for a terminal and
//! cut to the width ([`super::fit`]).

use super::{fit, grouped};
use crate::sample::pool::{
    DeviceSegments, DeviceSites, Pinned, PoolMap, RunState, SegmentStrip, SegmentsReport,
    SitesReport, SitesState,
};
use crate::units::bytes;
use unicode_width::UnicodeWidthStr;

/// The glyph of a run's state in a bar.
pub(crate) fn glyph(state: RunState) -> char {
    match state {
        RunState::Live => '#',
        RunState::Free => '.',
        RunState::Pending => '~',
        RunState::Mixed => '?',
    }
}

/// The legend of a bar's glyphs.
pub(crate) const LEGEND: &str = "# live  . free  ~ pending  ? mixed";

/// A strip as `width` cells, each run's share of the bytes, every run at least one cell
/// where the width allows (the rest shared by largest remainder). Narrower than its runs,
/// each cell is the state of the bytes it covers, `?` where they are of more than one.
pub(crate) fn bar(runs: &[(u64, RunState)], width: usize) -> String {
    let runs: Vec<(u64, RunState)> = runs.iter().copied().filter(|(b, _)| *b > 0).collect();
    let total: u128 = runs.iter().map(|(b, _)| u128::from(*b)).sum();
    if width == 0 || total == 0 {
        return String::new();
    }
    if runs.len() <= width {
        let spare = (width - runs.len()) as u128;
        let mut cells: Vec<usize> = Vec::with_capacity(runs.len());
        let mut rems: Vec<(u128, usize)> = Vec::with_capacity(runs.len());
        for (i, (b, _)) in runs.iter().enumerate() {
            let share = u128::from(*b) * spare;
            cells.push(1 + (share / total) as usize);
            rems.push((share % total, i));
        }
        let mut left = width - cells.iter().sum::<usize>();
        rems.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, i) in rems {
            if left == 0 {
                break;
            }
            cells[i] += 1;
            left -= 1;
        }
        return runs
            .iter()
            .zip(cells)
            .flat_map(|((_, s), n)| std::iter::repeat_n(glyph(*s), n))
            .collect();
    }
    // More runs than cells: cell k covers bytes [k·total/width, (k+1)·total/width).
    let mut out = String::with_capacity(width);
    let mut run = 0;
    let mut start: u128 = 0; // where `runs[run]` starts
    for k in 0..width as u128 {
        let (lo, hi) = (k * total / width as u128, (k + 1) * total / width as u128);
        let mut state: Option<RunState> = None;
        let mut mixed = false;
        let mut at = run;
        let mut from = start;
        while at < runs.len() && from < hi {
            let end = from + u128::from(runs[at].0);
            if end > lo {
                match state {
                    None => state = Some(runs[at].1),
                    Some(s) if s != runs[at].1 => mixed = true,
                    _ => {}
                }
            }
            if end <= hi {
                at += 1;
                from = end;
                run = at;
                start = from;
            } else {
                break;
            }
        }
        out.push(match (state, mixed) {
            (_, true) | (None, _) => '?',
            (Some(s), false) => glyph(s),
        });
    }
    out
}

/// `12 segments (24.0 GiB) pinned by 114 MiB live`; `None` when none is pinned.
pub(crate) fn pinned_words(p: &Pinned) -> Option<String> {
    if p.segments == 0 {
        return None;
    }
    let plural = if p.segments == 1 {
        "segment"
    } else {
        "segments"
    };
    Some(format!(
        "{} {plural} ({}) pinned by {} live",
        grouped(p.segments),
        bytes(p.reserved),
        bytes(p.live)
    ))
}

/// A pool's name: `large`, `small expandable`.
fn pool_name(pool: &str, expandable: bool) -> String {
    let pool = fit(pool, 12);
    if expandable {
        format!("{pool} exp")
    } else {
        pool
    }
}

fn pool_row(p: &PoolMap) -> String {
    format!(
        "  {:<10} {:>6} {:>10} {:>10} {:>10} {:>10} {:>13}",
        pool_name(&p.pool, p.expandable),
        grouped(p.segments),
        bytes(p.reserved),
        bytes(p.live),
        bytes(p.pending_free),
        bytes(p.free),
        bytes(p.largest_free),
    )
}

/// A strip's line: its size and pool, its bar, its live and free bytes.
pub(crate) fn strip_line(s: &SegmentStrip, width: usize) -> String {
    let head = format!(
        "  {:>10} {:<9}{} ",
        bytes(s.size),
        pool_name(&s.pool, s.expandable),
        if s.pinned { " pinned" } else { "       " }
    );
    // Fixed widths, so that the bars of a device line up.
    let tail = format!(" {:>8} live, {:>8} free", bytes(s.live), bytes(s.free));
    let room = width.saturating_sub(head.width() + tail.width() + 2).max(8);
    format!("{head}[{}]{tail}", bar(&s.runs, room))
}

/// The lines of one device's segment map, `width` cells wide at most where it can be.
pub(crate) fn device_segments(d: &DeviceSegments, width: usize) -> Vec<String> {
    let reserved = d.reserved();
    let segments: u64 = d.pools.iter().map(|p| p.segments).sum();
    let mut out = vec![format!(
        "device {}: {} reserved in {} segments, largest free block {}",
        d.index,
        bytes(reserved),
        grouped(segments),
        bytes(d.largest_free())
    )];
    out.push(format!(
        "  {:<10} {:>6} {:>10} {:>10} {:>10} {:>10} {:>13}",
        "pool", "segs", "reserved", "live", "pending", "free", "largest free"
    ));
    out.extend(d.pools.iter().map(pool_row));
    // Segments that live blocks hold with at least three quarters of them free.
    for p in &d.pools {
        if let Some(words) = pinned_words(&p.pinned) {
            out.push(format!(
                "  pinned, {}: {words}",
                pool_name(&p.pool, p.expandable)
            ));
        }
    }
    for p in &d.pools {
        if p.free_blocks.is_empty() {
            continue;
        }
        let mut line = format!("  free blocks, {}:", pool_name(&p.pool, p.expandable));
        for b in &p.free_blocks {
            let item = format!(
                " ≥{} ×{} ({})",
                bytes(b.at_least),
                grouped(b.blocks),
                bytes(b.bytes)
            );
            if line.width() + item.width() > width && line.contains('×') {
                out.push(line);
                line = " ".repeat(4);
            }
            line.push_str(&item);
        }
        out.push(line);
    }
    if !d.strips.is_empty() {
        let drawn = d.strips.len() as u64;
        out.push(format!(
            "  segments drawn: {drawn} of {} ({LEGEND})",
            grouped(drawn + d.strips_left_out)
        ));
        out.extend(d.strips.iter().map(|s| strip_line(s, width)));
    }
    out
}

/// The lines of a segment map.
pub(crate) fn segments(report: &SegmentsReport, width: usize) -> Vec<String> {
    if report.devices.is_empty() {
        return vec!["no segments: the allocator held no memory".into()];
    }
    let mut out = Vec::new();
    for (i, d) in report.devices.iter().enumerate() {
        if i > 0 {
            out.push(String::new());
        }
        out.extend(device_segments(d, width));
    }
    out
}

/// The figures, then the site cut to what is left of the width (16 cells at least).
fn site_row(figures: &str, site: &str, width: usize) -> String {
    let room = width.saturating_sub(figures.width()).max(16);
    format!("{figures}{}", fit(site, room))
}

fn via_rows(via: &[String], width: usize, out: &mut Vec<String>) {
    for v in via {
        out.push(format!(
            "{:>26}{}",
            "via ",
            fit(v, width.saturating_sub(26).max(16))
        ));
    }
}

/// The lines of one device's sites, the top `top` of each list.
pub(crate) fn device_sites(d: &DeviceSites, top: usize, window: bool, width: usize) -> Vec<String> {
    let mut out = vec![format!(
        "device {}: {} live in {} blocks{}",
        d.index,
        bytes(d.live_bytes),
        grouped(d.live_blocks),
        if d.live_unattributed > 0 {
            format!(
                ", {} of them with no frames (allocated before recording began)",
                bytes(d.live_unattributed)
            )
        } else {
            String::new()
        }
    )];
    if !d.live.is_empty() {
        out.push(format!("  {:>10} {:>8}  live at", "bytes", "blocks"));
        for s in d.live.iter().take(top) {
            let figures = format!("  {:>10} {:>8}  ", bytes(s.bytes), grouped(s.count));
            out.push(site_row(&figures, &s.site, width));
            via_rows(&s.via, width, &mut out);
        }
        if d.live.len() > top {
            out.push(format!("  ({} more sites)", d.live.len() - top));
        }
    }
    if window {
        out.push(format!(
            "  grew: {} allocated in the window and live at its end",
            bytes(d.growth_bytes)
        ));
        if !d.growth.is_empty() {
            out.push(format!(
                "  {:>10} {:>8} {:>8}  grew at",
                "bytes", "allocs", "freed"
            ));
            for g in d.growth.iter().take(top) {
                let figures = format!(
                    "  {:>10} {:>8} {:>8}  ",
                    bytes(g.bytes),
                    grouped(g.allocs),
                    grouped(g.frees)
                );
                out.push(site_row(&figures, &g.site, width));
                via_rows(&g.via, width, &mut out);
            }
            if d.growth.len() > top {
                out.push(format!("  ({} more sites)", d.growth.len() - top));
            }
        }
    }
    out
}

fn secs(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), crate::units::interval)
}

/// The window's line: its length, entries read and dropped, the cost, why it stopped early.
pub(crate) fn window_line(r: &SitesReport) -> String {
    let count = |v: Option<u64>| v.map_or_else(|| "n/a".into(), grouped);
    let mut line = format!(
        "window {}, {} entries, {} dropped; cost: {} CPU, GIL held {} at most, snapshot {}",
        secs(r.window),
        count(r.entries),
        count(r.dropped),
        secs(r.cost.cpu),
        secs(r.cost.gil_max),
        secs(r.cost.snapshot)
    );
    if let Some(why) = &r.stopped {
        line.push_str(&format!("; stopped early: {}", fit(why, 200)));
    }
    line
}

/// The lines of a sites report: its window, then each device's sites (the top `top`).
pub(crate) fn sites(r: &SitesReport, top: usize, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let window = r.entries.is_some() || r.window.is_some();
    if let Some(reason) = &r.reason {
        let state = match r.state {
            SitesState::Running => "running",
            SitesState::Done => "done",
            SitesState::Refused => "refused",
            SitesState::Failed => "failed",
        };
        out.push(format!("{state}: {}", fit(reason, width.max(40))));
    }
    if window {
        out.push(window_line(r));
    }
    for (i, d) in r.devices.iter().enumerate() {
        if i > 0 || !out.is_empty() {
            out.push(String::new());
        }
        out.extend(device_sites(d, top, window, width));
    }
    out
}

#[cfg(test)]
#[path = "pool_text_tests.rs"]
mod tests;

//! The `segments` and `sites` messages (PROTOCOL.md, "Inside the pool"): read into the
//! shapes of [`crate::sample::pool`] and checked, so that what the hub keeps is bounded and
//! adds up, whatever the agent writes.

use super::protocol::{Bad, MAX_DEVICES};
use crate::sample::pool::{
    DeviceSegments, DeviceSites, SegmentsReport, SitesReport, MAX_RUNS, MAX_SITES,
    MAX_SITE_TEXT_CHARS, MAX_STRIPS,
};

/// Pools a device may have: large and small, each expandable or not.
const MAX_POOLS: usize = 4;
/// Buckets of free-block sizes: one per power of two of a 64-bit size.
const MAX_BUCKETS: usize = 64;
/// Callers named with a site.
const MAX_VIA: usize = 2;
/// A reason, a `stopped` line: characters kept.
const MAX_REASON_CHARS: usize = 256;

fn finite(t: f64) -> Result<(), Bad> {
    t.is_finite().then_some(()).ok_or(Bad::Invalid)
}

fn clip(s: &mut String, max_chars: usize) {
    if let Some((cut, _)) = s.char_indices().nth(max_chars) {
        s.truncate(cut);
    }
}

/// Checks a segment map: bounds, and every pool and strip adds up to its size.
pub(crate) fn segments(mut report: SegmentsReport) -> Result<SegmentsReport, Bad> {
    finite(report.time)?;
    if report.took.is_some_and(|t| !t.is_finite() || t < 0.0) {
        return Err(Bad::Invalid);
    }
    if report.devices.len() > MAX_DEVICES {
        return Err(Bad::Invalid);
    }
    let mut seen = Vec::with_capacity(report.devices.len());
    for d in &mut report.devices {
        if seen.contains(&d.index) {
            return Err(Bad::Invalid);
        }
        seen.push(d.index);
        device_segments(d)?;
    }
    Ok(report)
}

fn device_segments(d: &mut DeviceSegments) -> Result<(), Bad> {
    if d.pools.len() > MAX_POOLS || d.strips.len() > MAX_STRIPS {
        return Err(Bad::Invalid);
    }
    for p in &mut d.pools {
        clip(&mut p.pool, 16);
        let held = [p.live, p.pending_free, p.free]
            .iter()
            .try_fold(0u64, |a, &b| a.checked_add(b));
        if held != Some(p.reserved)
            || p.largest_free > p.free
            || p.free_blocks.len() > MAX_BUCKETS
            || p.pinned.segments > p.segments
            || p.pinned.live > p.pinned.reserved
            || p.pinned.reserved > p.reserved
        {
            return Err(Bad::Invalid);
        }
        let mut bucket_bytes = 0u64;
        for b in &p.free_blocks {
            let top = b.at_least.saturating_mul(2);
            // Each block is at least the bucket's floor and under twice it.
            let floor = b.at_least.checked_mul(b.blocks);
            if !b.at_least.is_power_of_two() || floor.is_none_or(|f| f > b.bytes) {
                return Err(Bad::Invalid);
            }
            if b.blocks > 0 && b.bytes / b.blocks >= top && top != u64::MAX {
                return Err(Bad::Invalid);
            }
            bucket_bytes = bucket_bytes.checked_add(b.bytes).ok_or(Bad::Invalid)?;
        }
        if bucket_bytes != p.free {
            return Err(Bad::Invalid);
        }
    }
    for s in &mut d.strips {
        clip(&mut s.pool, 16);
        let sum = s
            .runs
            .iter()
            .try_fold(0u64, |a, (bytes, _)| a.checked_add(*bytes));
        if s.runs.len() > MAX_RUNS
            || sum != Some(s.size)
            || s.live.checked_add(s.free).is_none_or(|h| h > s.size)
            || s.largest_free > s.free
        {
            return Err(Bad::Invalid);
        }
    }
    Ok(())
}

/// Checks a sites report: bounds, times, site texts cut, and the lists within their totals.
pub(crate) fn sites(mut report: SitesReport) -> Result<SitesReport, Bad> {
    finite(report.time)?;
    for t in [report.started, report.seconds, report.window]
        .into_iter()
        .flatten()
    {
        finite(t)?;
    }
    let cost = report.cost;
    if [cost.cpu, cost.gil_max, cost.snapshot]
        .into_iter()
        .flatten()
        .any(|c| !c.is_finite() || c < 0.0)
    {
        return Err(Bad::Invalid);
    }
    for text in [&mut report.reason, &mut report.stopped, &mut report.history]
        .into_iter()
        .flatten()
    {
        clip(text, MAX_REASON_CHARS);
    }
    if report.devices.len() > MAX_DEVICES {
        return Err(Bad::Invalid);
    }
    let mut seen = Vec::with_capacity(report.devices.len());
    for d in &mut report.devices {
        if seen.contains(&d.index) {
            return Err(Bad::Invalid);
        }
        seen.push(d.index);
        device_sites(d)?;
    }
    Ok(report)
}

fn device_sites(d: &mut DeviceSites) -> Result<(), Bad> {
    if d.live.len() > MAX_SITES || d.growth.len() > MAX_SITES {
        return Err(Bad::Invalid);
    }
    let mut live = 0u64;
    for s in &mut d.live {
        site_text(&mut s.site, &mut s.via)?;
        live = live.checked_add(s.bytes).ok_or(Bad::Invalid)?;
    }
    let held = live.checked_add(d.live_unattributed).ok_or(Bad::Invalid)?;
    if held > d.live_bytes {
        return Err(Bad::Invalid);
    }
    let mut grown = 0u64;
    for g in &mut d.growth {
        site_text(&mut g.site, &mut g.via)?;
        if g.frees > g.allocs {
            return Err(Bad::Invalid);
        }
        grown = grown.checked_add(g.bytes).ok_or(Bad::Invalid)?;
    }
    if grown > d.growth_bytes {
        return Err(Bad::Invalid);
    }
    Ok(())
}

fn site_text(site: &mut String, via: &mut Vec<String>) -> Result<(), Bad> {
    if via.len() > MAX_VIA {
        return Err(Bad::Invalid);
    }
    clip(site, MAX_SITE_TEXT_CHARS);
    for v in via {
        clip(v, MAX_SITE_TEXT_CHARS);
    }
    Ok(())
}

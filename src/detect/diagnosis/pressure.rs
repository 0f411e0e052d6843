//! Allocator pressure before an OOM: fragmentation (free split pieces that other sizes cannot
//! use) and the allocator's retries.
//!
//! Fragmentation is read from the floor of the split pieces (each chunk's least), so pieces
//! that come and go within a training step, a healthy saw-tooth, never count: only what
//! stays split does. It is raised by its growth (the floor's share of the pool grows fast,
//! or the floor rises steadily at any pace), by its level (a large share that sits there and
//! does not shrink) or by its consequence (a share of the pool that stays split while the
//! allocator retries), whatever the pace.

use super::{counter_rise, series};
use crate::detect::evidence::units::{Bytes, Count, PerMin, Secs, Share, Time};
use crate::detect::evidence::{self, Evidence, Retries};
use crate::detect::{FindingKind, Findings, Severity};
use crate::history::{History, Metric, ProcessId, Series};
use crate::sample::AllocatorStats;
use crate::units::{bytes, duration};

/// Fragmentation worth a line: this much in free split pieces...
const FRAGMENTED_MIN: u64 = 1 << 30;
/// ...making at least this share of the pool while the allocator retries...
const FRAGMENTED_SHARE: f64 = 0.10;
/// ...or this share, sitting there over the whole window without shrinking...
const SITTING_SHARE: f64 = 0.15;
/// ...or a floor whose share grew by this much (and 512 MiB) over the window.
const SHARE_GROWTH: f64 = 0.05;
const GROWTH_MIN: u64 = 512 << 20;
pub(super) const FRAGMENTATION_WINDOW: f64 = 600.0;
/// Or a floor that rises steadily by 512 MiB, however slowly: over the window, or one of
/// these longer ones (within the first tier's two hours).
const STEADY_WINDOWS: [f64; 4] = [FRAGMENTATION_WINDOW, 1200.0, 2400.0, 4800.0];
/// The floor "does not shrink" when its last chunk keeps this share of its first.
const NOT_SHRINKING: f64 = 0.9;
/// Allocation retries are counted over this window.
pub(super) const RETRY_WINDOW: f64 = 300.0;

/// The least value of each of `n` chunks of the window, all of them known: `None` where the
/// series does not cover the window.
fn floors(series: &Series, now: f64, window: f64, n: usize) -> Option<Vec<u64>> {
    series
        .chunks(now, window, n)
        .into_iter()
        .map(|c| c.map(|c| c.min))
        .collect()
}

/// Floors that rise steadily: each chunk's above the one before, no one step making more
/// than half the rise (a single jump is not a trend), the whole rise at least
/// [`GROWTH_MIN`].
fn steady(floors: &[u64]) -> bool {
    let (Some(&first), Some(&last)) = (floors.first(), floors.last()) else {
        return false;
    };
    let rise = last.saturating_sub(first);
    rise >= GROWTH_MIN
        && floors
            .windows(2)
            .all(|w| w[1] > w[0] && (w[1] - w[0]) * 2 <= rise)
}

/// The shortest of [`STEADY_WINDOWS`] over which the floor rose steadily to at least
/// [`FRAGMENTED_MIN`], with its first and last floors.
fn steady_rise(series: &Series, now: f64) -> Option<(f64, u64, u64)> {
    STEADY_WINDOWS.into_iter().find_map(|window| {
        let w = floors(series, now, window, 5)?;
        let (first, last) = (w[0], w[w.len() - 1]);
        (steady(&w) && last >= FRAGMENTED_MIN).then_some((window, first, last))
    })
}

fn share(part: u64, whole: u64) -> f64 {
    part as f64 / whole.max(1) as f64
}

fn rounded(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Free split pieces that stay: growing as a share of the pool, sitting large, or large
/// while the allocator retries.
pub(super) fn fragmentation(
    out: &mut Findings,
    now: f64,
    history: &History,
    id: &ProcessId,
    who: &str,
    stats: &AllocatorStats,
    setup: &super::Setup,
) {
    let Some(split) = series(history, id, Metric::InactiveSplit) else {
        return;
    };
    let (Some(now_split), Some(reserved_now)) = (stats.inactive_split, stats.reserved) else {
        return;
    };
    if now_split < FRAGMENTED_MIN || reserved_now == 0 {
        return;
    }
    let share_now = share(now_split, reserved_now);
    if share_now < FRAGMENTED_SHARE {
        return;
    }
    let mut reasons = Vec::new();
    let mut said = Vec::new();
    // Over the whole window: the floor's first and last chunks, and its least.
    let window = floors(split, now, FRAGMENTATION_WINDOW, 5);
    // The pool at the start of a window.
    let reserved_then = |window: f64| {
        series(history, id, Metric::Reserved)
            .and_then(|r| r.chunks(now, window, 5)[0])
            .map(|c| c.last)
            .filter(|&r| r > 0)
    };
    let mut share_before = None;
    let mut floor_share = None;
    let mut growth_window = FRAGMENTATION_WINDOW;
    let mut grown = None;
    if let Some(w) = &window {
        let (first, last) = (w[0], w[w.len() - 1]);
        let least = w.iter().copied().min().unwrap_or(0);
        floor_share = Some(share(least, reserved_now));
        grown = Some(last.saturating_sub(first));
        if let Some(then) = reserved_then(FRAGMENTATION_WINDOW) {
            let before = share(first, then);
            share_before = Some(before);
            if share(last, reserved_now) - before >= SHARE_GROWTH
                && last.saturating_sub(first) >= GROWTH_MIN
            {
                reasons.push("growing");
                said.push(format!(
                    "up from {:.0}% {} ago",
                    before * 100.0,
                    duration(FRAGMENTATION_WINDOW)
                ));
            } else if let Some((steady_window, from, to)) = steady_rise(split, now) {
                let then = reserved_then(steady_window).unwrap_or(then);
                share_before = Some(share(from, then));
                growth_window = steady_window;
                grown = Some(to - from);
                reasons.push("growing");
                said.push(format!(
                    "rising steadily from {:.0}% {} ago",
                    share(from, then) * 100.0,
                    duration(steady_window)
                ));
            }
        }
        if least >= FRAGMENTED_MIN
            && share(least, reserved_now) >= SITTING_SHARE
            && last as f64 >= NOT_SHRINKING * first as f64
        {
            reasons.push("sitting");
            said.push(format!(
                "never below {:.0}% over the last {}",
                share(least, reserved_now) * 100.0,
                duration(FRAGMENTATION_WINDOW)
            ));
        }
    }
    // The consequence: the allocator retries while a large share stays split.
    let retries = series(history, id, Metric::Retries)
        .and_then(|s| counter_rise(s, now, RETRY_WINDOW))
        .filter(|&r| r > 0);
    if let (Some(n), Some(w)) = (retries, floors(split, now, RETRY_WINDOW, 5)) {
        let least = w.iter().copied().min().unwrap_or(0);
        if least >= FRAGMENTED_MIN && share(least, reserved_now) >= FRAGMENTED_SHARE {
            reasons.push("retries");
            said.push(format!(
                "held while the allocator retried {n} times in {}",
                duration(RETRY_WINDOW)
            ));
        }
    }
    if reasons.is_empty() {
        return;
    }
    out.raise(
        FindingKind::Fragmentation,
        Severity::Warning,
        Some(&id.device_uuid),
        Some(id.pid),
        format!(
            "{who}: fragmentation: {} of the {} pool is in free split pieces ({:.0}%, {}): allocations of other sizes cannot use them{}",
            bytes(now_split),
            bytes(reserved_now),
            share_now * 100.0,
            said.join("; "),
            setup.pinned_words()
        ),
        Evidence::Fragmentation(evidence::Fragmentation {
            expandable_segments: setup.expandable_segments.into(),
            framework: setup.framework.clone().into(),
            grown_bytes: grown.map(Bytes),
            growth_window_secs: Secs(growth_window),
            inactive_split_bytes: Bytes(now_split),
            largest_free_block: stats.largest_free_block.map(Bytes),
            pinned_live: setup.pinned.map(|(p, _)| Bytes(p.live)).into(),
            pinned_reserved: setup.pinned.map(|(p, _)| Bytes(p.reserved)).into(),
            pinned_segments: setup.pinned.map(|(p, _)| Count(p.segments)).into(),
            reason: reasons.into_iter().map(str::to_string).collect(),
            reserved_bytes: Bytes(reserved_now),
            retries_in_window: retries.map(Count),
            segment_map_time: setup.pinned.map(|(_, t)| Time(t)).into(),
            share: Share(rounded(share_now)),
            share_before: share_before.map(rounded).map(Share),
            share_floor: floor_share.map(rounded).map(Share),
            window_secs: Secs(FRAGMENTATION_WINDOW),
        }),
    );
}

/// The allocator's last-resort retries rising: pressure before OOMs.
pub(super) fn retries(out: &mut Findings, now: f64, history: &History, id: &ProcessId, who: &str) {
    let Some(series) = series(history, id, Metric::Retries) else {
        return;
    };
    let Some(rise) = counter_rise(series, now, RETRY_WINDOW).filter(|&r| r > 0) else {
        return;
    };
    let total = series.last().unwrap_or(rise);
    out.raise(
        FindingKind::AllocRetries,
        Severity::Warning,
        Some(&id.device_uuid),
        Some(id.pid),
        format!(
            "{who}: {rise} allocation retries in the last {} ({total} in all): the allocator had to free its cached memory to allocate, the step before out-of-memory",
            duration(RETRY_WINDOW)
        ),
        Evidence::AllocRetries(Retries {
            rate_per_min: PerMin((rise as f64 * 60.0 / RETRY_WINDOW * 10.0).round() / 10.0),
            retries_in_window: Count(rise),
            retries_total: Count(total),
            window_secs: Secs(RETRY_WINDOW),
        }),
    );
}

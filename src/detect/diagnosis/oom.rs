//! Out-of-memory errors: the feed's report or its counter, remembered for as long as the
//! finding is shown, and their class.
//!
//! The class is **capacity** only when live tensors plus the
//! request exceed what the device could give this pool if its cache were perfectly
//! reusable: the pool itself plus the device's free memory at the OOM (everything else on the
//! device, the driver's reservation, this process's context and memory outside its pool,
//! every other process, is already not free). Otherwise the memory exists, but not in a
//! usable shape: **fragmentation**. Without the request's size, or the device's free memory
//! where the total alone cannot decide, the class is **uncertain**, and the message says why.

use super::{counter_rise, series};
use crate::detect::evidence::units::{Bytes, Count, Time};
use crate::detect::evidence::{self, Evidence};
use crate::detect::{device_name, FindingKind, Findings, Severity};
use crate::history::{History, Metric, ProcessId};
use crate::sample::feed::OomReport;
use crate::sample::{AllocatorStats, NodeSample};
use crate::units::{bytes, clock, duration};
use std::collections::HashMap;

/// An OOM stays a finding this long after the last one.
pub(crate) const OOM_SHOWN_SECS: f64 = 600.0;
/// A pool this much in free split pieces points to fragmentation (said, not decided).
const SPLIT_SHARE_HINT: f64 = 0.3;

/// An OOM's class, why, and the figures it was decided on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OomClass {
    /// `capacity`, `fragmentation` or `uncertain`.
    pub(crate) class: &'static str,
    pub(crate) why: String,
    /// Live tensors plus the request.
    pub(crate) needed: Option<u64>,
    /// The pool plus the device's free memory at the OOM.
    pub(crate) could_have: Option<u64>,
}

/// Capacity, fragmentation or uncertain, from what the allocator saw at the OOM: its report
/// (the request, the device's free memory, the statistics at that instant) or, without one,
/// the latest statistics.
pub(crate) fn classify(
    report: Option<&OomReport>,
    stats: &AllocatorStats,
) -> (&'static str, String) {
    let c = judge(report, stats);
    (c.class, c.why)
}

pub(crate) fn judge(report: Option<&OomReport>, stats: &AllocatorStats) -> OomClass {
    // Statistics read at the OOM (only torch's OOM observer sends them): torch had already
    // released every wholly free cached segment before it raised, so what its pool held
    // beyond live tensors then was free pieces inside segments that hold live blocks.
    let at_oom = report.and_then(|r| r.stats.as_ref());
    let stats = at_oom.unwrap_or(stats);
    let live = stats.allocated;
    let split = stats.inactive_split;
    let Some(reserved) = stats.reserved else {
        // XLA's cuda_async: no pool figure, so neither what the pool could give nor its shape.
        return OomClass {
            class: "uncertain",
            why: "the allocator does not report its pool (reserved): capacity or fragmentation cannot be told".into(),
            needed: report
                .and_then(|r| r.requested)
                .map(|requested| live.saturating_add(requested)),
            could_have: None,
        };
    };
    let cached = reserved
        .saturating_sub(live)
        .saturating_sub(split.unwrap_or(0));
    let shape = match split {
        Some(s) => format!(
            "{} in free split pieces, {} cached",
            bytes(s),
            bytes(cached)
        ),
        // Under expandable segments torch does not count split pieces: at the OOM they are
        // what the pool holds beyond live tensors all the same.
        None if at_oom.is_some() => format!(
            "{} free in the pool, all of it in pieces of segments that hold live tensors: torch releases every wholly free segment before it raises",
            bytes(reserved.saturating_sub(live))
        ),
        None => format!("{} free in the pool", bytes(reserved.saturating_sub(live))),
    };
    let uncertain = |what: String| {
        let share = split.map(|s| s as f64 / reserved.max(1) as f64);
        let hint = match share {
            Some(x) if x >= SPLIT_SHARE_HINT => format!(
                "; {:.0}% of its {} pool was in free split pieces, which points to fragmentation",
                x * 100.0,
                bytes(reserved)
            ),
            _ => format!(
                "; {} live in a {} pool ({shape})",
                bytes(live),
                bytes(reserved)
            ),
        };
        OomClass {
            class: "uncertain",
            why: format!("{what}: capacity or fragmentation cannot be told{hint}"),
            needed: None,
            could_have: None,
        }
    };
    let Some(report) = report else {
        return uncertain(
            "the allocator counted it, but no report of it arrived (the size it asked for is not known)"
                .into(),
        );
    };
    let Some(requested) = report.requested else {
        return uncertain("the request's size was not reported".into());
    };
    let needed = live.saturating_add(requested);
    let asked = format!(
        "it asked for {} with {} live ({} in all)",
        bytes(requested),
        bytes(live),
        bytes(needed)
    );
    let Some(free) = report.device_free else {
        return match report.device_total {
            Some(total) if needed > total => OomClass {
                class: "capacity",
                why: format!(
                    "{asked}, more than the device's {} in all: live tensors need more than the device holds: capacity",
                    bytes(total)
                ),
                needed: Some(needed),
                could_have: None,
            },
            _ => OomClass {
                needed: Some(needed),
                ..uncertain(format!(
                    "{asked}, but the device's free memory at the OOM was not reported"
                ))
            },
        };
    };
    let could_have = reserved.saturating_add(free);
    let room = format!(
        "the {} the device could give this pool with every cached block reusable (its {} pool and {} free)",
        bytes(could_have),
        bytes(reserved),
        bytes(free)
    );
    if needed > could_have {
        return OomClass {
            class: "capacity",
            why: format!(
                "{asked}, more than {room}: live tensors need more than the device holds: capacity"
            ),
            needed: Some(needed),
            could_have: Some(could_have),
        };
    }
    let block = match (stats.largest_free_block, stats.largest_free_block_time) {
        (Some(b), _) if requested > b => format!("; its largest free block was {}", bytes(b)),
        (Some(b), Some(at)) => format!(
            "; its largest free block was {} at {} UTC, before the pool took the shape it failed in",
            bytes(b),
            clock(at)
        ),
        _ => String::new(),
    };
    OomClass {
        class: "fragmentation",
        why: format!(
            "{asked}, which fits in {room}, but no free block that large ({shape}){block}: the memory exists but not in a usable shape: fragmentation, not capacity"
        ),
        needed: Some(needed),
        could_have: Some(could_have),
    }
}

/// The latest OOM report of each fed process's device, kept for [`OOM_SHOWN_SECS`]: a feed
/// record carries a report once (the sample after it arrived) and may not carry it again, so
/// the finding keeps its figures for as long as it is shown.
#[derive(Debug, Default, Clone)]
pub(crate) struct OomMemory {
    reports: HashMap<ProcessId, OomReport>,
}

impl OomMemory {
    /// Keeps the latest report of each fed process in `sample` (feeds attached), and forgets
    /// those no longer shown.
    pub(crate) fn observe(&mut self, sample: &NodeSample) {
        let now = sample.time;
        for p in &sample.processes {
            let Some(feed) = &p.feed else { continue };
            let latest = sample.feeds.get(feed.feed).and_then(|r| {
                r.ooms
                    .iter()
                    .filter(|o| o.index == feed.stats.index)
                    .max_by(|a, b| a.time.total_cmp(&b.time))
            });
            let Some(latest) = latest else { continue };
            let id = ProcessId::of(p);
            match self.reports.get(&id) {
                Some(kept) if kept.time >= latest.time => {}
                _ => {
                    self.reports.insert(id, latest.clone());
                }
            }
        }
        self.reports
            .retain(|_, r| now - r.time <= OOM_SHOWN_SECS && r.time <= now + OOM_SHOWN_SECS);
    }

    fn report(&self, id: &ProcessId) -> Option<&OomReport> {
        self.reports.get(id)
    }
}

/// OOMs a feed reported (its `oom` messages, as remembered) or counted (`num_ooms` rising),
/// with their class.
pub(super) fn ooms(sample: &NodeSample, history: &History, memory: &OomMemory, out: &mut Findings) {
    let now = sample.time;
    for p in &sample.processes {
        let Some(feed) = &p.feed else { continue };
        let id = ProcessId::of(p);
        let report = memory
            .report(&id)
            .filter(|o| o.index == feed.stats.index && now - o.time <= OOM_SHOWN_SECS);
        let counted = series(history, &id, Metric::Ooms)
            .and_then(|s| counter_rise(s, now, OOM_SHOWN_SECS))
            .filter(|&n| n > 0);
        if report.is_none() && counted.is_none() {
            continue;
        }
        let c = judge(report, &feed.stats);
        let setup = super::Setup::of(sample, feed);
        let place = device_name(sample, &p.device_uuid);
        let when = report.map_or_else(String::new, |r| format!(" {} ago", duration(now - r.time)));
        out.raise(
            FindingKind::Oom,
            Severity::Critical,
            Some(&p.device_uuid),
            Some(p.pid),
            format!(
                "PID {} on {place} ran out of memory{when}: {}{}",
                p.pid,
                c.why,
                if c.class == "fragmentation" {
                    setup.pinned_words()
                } else {
                    String::new()
                }
            ),
            Evidence::Oom(evidence::Oom {
                allocated: Bytes(feed.stats.allocated),
                class: c.class.to_string(),
                could_have_bytes: c.could_have.map(Bytes),
                device_free: report.and_then(|r| r.device_free).map(Bytes),
                device_total: report.and_then(|r| r.device_total).map(Bytes),
                expandable_segments: setup.expandable_segments.into(),
                framework: setup.framework.into(),
                inactive_split: feed.stats.inactive_split.map(Bytes),
                largest_free_block: feed.stats.largest_free_block.map(Bytes),
                needed_bytes: c.needed.map(Bytes),
                ooms_in_window: counted.map(Count),
                ooms_total: feed.stats.ooms.map(Count),
                pinned_live: setup.pinned.map(|(p, _)| Bytes(p.live)).into(),
                pinned_reserved: setup.pinned.map(|(p, _)| Bytes(p.reserved)).into(),
                pinned_segments: setup.pinned.map(|(p, _)| Count(p.segments)).into(),
                requested: report.and_then(|r| r.requested).map(Bytes),
                reserved: feed.stats.reserved.map(Bytes),
                segment_map_time: setup.pinned.map(|(_, t)| Time(t)).into(),
                time: report.map(|r| Time(r.time)),
            }),
        );
    }
}

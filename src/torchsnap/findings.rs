//! What a snapshot shows on its own: fragmentation (free split pieces as a share of the pool,
//! the segments pinned by a few live bytes) and, under expandable segments, where the
//! fragmented figure comes from. An OOM's own class is in [`super::ooms`].
//!
//! The thresholds are the fragmentation detector's (`detect::diagnosis::pressure`): at least
//! 1 GiB in free split pieces making at least 15% of the pool, its level for "sitting" (one
//! snapshot has no window, so neither its growth nor its retries can be judged). They are
//! private to the detector, so they are repeated here with that name.

use super::segments::{figures, pinned};
use super::shape::Segment;
use crate::detect::evidence::units::{Bytes, Secs, Share};
use crate::detect::{evidence, Evidence, FindingKind};
use crate::units::bytes;
use serde::Serialize;

/// `pressure::FRAGMENTED_MIN`: fragmentation worth a line.
const FRAGMENTED_MIN: u64 = 1 << 30;
/// `pressure::SITTING_SHARE`: the share of the pool that is a finding at one instant.
const SITTING_SHARE: f64 = 0.15;

/// A finding of the snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SnapFinding {
    /// `fragmentation`, `oom` or `expandable`.
    pub kind: &'static str,
    pub device: u32,
    pub message: String,
    pub advice: Vec<String>,
}

/// What a device's segments say about its shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) reserved: u64,
    pub(crate) live: u64,
    /// Free blocks in segments that also hold live or pending blocks.
    pub(crate) split: u64,
    pub(crate) largest_free: u64,
    pub(crate) expandable: bool,
}

pub(crate) fn shape(segs: &[&Segment]) -> Shape {
    let mut s = Shape::default();
    for seg in segs {
        let f = figures(seg);
        s.reserved += seg.total_size;
        s.live += f.live;
        if f.live + f.pending > 0 {
            s.split += f.free;
        }
        s.largest_free = s.largest_free.max(f.largest_free);
        s.expandable |= seg.expandable;
    }
    s
}

/// `12 segments of 2.00 GiB each pinned by at most 52.0 MiB live each`, where any are.
fn pinned_words(segs: &[&Segment]) -> Option<String> {
    let held: Vec<(u64, u64)> = segs
        .iter()
        .filter_map(|s| {
            let f = figures(s);
            pinned(s, &f).then_some((s.total_size, f.live))
        })
        .collect();
    let most_live = held.iter().map(|&(_, l)| l).max()?;
    let n = held.len();
    let sizes = if held.iter().all(|&(s, _)| s == held[0].0) {
        format!("of {} each", bytes(held[0].0))
    } else {
        format!("({} in all)", bytes(held.iter().map(|&(s, _)| s).sum()))
    };
    let plural = if n == 1 { "segment" } else { "segments" };
    Some(format!(
        "{n} {plural} {sizes} pinned by at most {} live each",
        bytes(most_live)
    ))
}

/// The findings of one device's segments.
pub(crate) fn findings(
    device: u32,
    segs: &[&Segment],
    expandable_setting: Option<bool>,
) -> Vec<SnapFinding> {
    let s = shape(segs);
    let mut out = Vec::new();
    let expandable = expandable_setting.or(s.expandable.then_some(true));
    let share = s.split as f64 / s.reserved.max(1) as f64;
    if s.split >= FRAGMENTED_MIN && share >= SITTING_SHARE {
        let pinned = pinned_words(segs).map_or_else(String::new, |p| format!("; {p}"));
        let message = format!(
            "fragmentation: {} of the {} pool is in free split pieces ({:.0}%; the largest free block is {}{pinned}): allocations of other sizes cannot use them",
            bytes(s.split),
            bytes(s.reserved),
            share * 100.0,
            bytes(s.largest_free),
        );
        // The segments live blocks pin, as the agent's map counts them.
        let (mut n, mut size, mut live) = (0u64, 0u64, 0u64);
        for seg in segs {
            let f = figures(seg);
            if super::segments::pinned(seg, &f) {
                n += 1;
                size += seg.total_size;
                live += f.live;
            }
        }
        let evidence = Evidence::Fragmentation(evidence::Fragmentation {
            expandable_segments: expandable.into(),
            framework: Some("torch".to_string()).into(),
            grown_bytes: None,
            growth_window_secs: Secs(0.0),
            inactive_split_bytes: Bytes(s.split),
            largest_free_block: Some(Bytes(s.largest_free)),
            pinned_live: Some(Bytes(live)).into(),
            pinned_reserved: Some(Bytes(size)).into(),
            pinned_segments: Some(crate::detect::evidence::units::Count(n)).into(),
            reason: vec!["sitting".into()],
            reserved_bytes: Bytes(s.reserved),
            retries_in_window: None,
            // The snapshot is the file's one instant: no separate map time.
            segment_map_time: None.into(),
            share: Share((share * 1000.0).round() / 1000.0),
            share_before: None,
            share_floor: None,
            window_secs: Secs(0.0),
        });
        out.push(SnapFinding {
            kind: "fragmentation",
            device,
            message,
            advice: crate::detect::advice::advice(FindingKind::Fragmentation, &evidence),
        });
    }
    if s.expandable {
        out.push(SnapFinding {
            kind: "expandable",
            device,
            message: format!(
                "expandable segments: torch's `inactive_split` does not count their free blocks, so the fragmented figure here ({} in free blocks beside live ones) comes from the snapshot's blocks",
                bytes(s.split)
            ),
            advice: Vec::new(),
        });
    }
    out
}

/// An OOM as a finding: its message in the monitor's words, with its advice.
pub(crate) fn of_oom(o: &super::ooms::OomEvent) -> SnapFinding {
    let when = o.time.map_or_else(String::new, |t| {
        format!(" at {} UTC", crate::units::clock(t))
    });
    let at = o.site.as_deref().map_or_else(String::new, |s| {
        format!(" (asked at {})", crate::present::fit(s, 160))
    });
    SnapFinding {
        kind: "oom",
        device: o.device,
        message: format!("ran out of memory{when}{at}: {}", o.why),
        advice: o.advice.clone(),
    }
}

//! The OOMs of a snapshot's traces: the request, what CUDA had free, when, and what the pool
//! held then, worked back from the snapshot's segments through the trace entries after it
//! (the ring keeps the newest entries, so all of those after an OOM it still holds are
//! there). Each is classed as the monitor classes an OOM (`detect::diagnosis::classify`), in
//! its words.

use super::shape::{Action, BlockState, Entry, Segment, Stacks};
use super::sites::site_of;
use crate::detect::evidence::units::{Bytes, Time};
use crate::detect::{evidence, Evidence, FindingKind};
use crate::sample::feed::OomReport;
use crate::sample::AllocatorStats;
use serde::Serialize;

/// One OOM of a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OomEvent {
    pub device: u32,
    /// Unix seconds, from the entry's `time_us`.
    pub time: Option<f64>,
    /// The request that failed (`size`).
    pub requested: Option<u64>,
    /// What CUDA said was free on the device (`device_free`).
    pub device_free: Option<u64>,
    /// Where it was asked for, in the job's code.
    pub site: Option<String>,
    /// What the pool held at the OOM, worked back from the snapshot; `None` where the trace
    /// after it does not add up.
    pub reserved: Option<u64>,
    pub live: Option<u64>,
    pub pending_free: Option<u64>,
    /// Reserved and neither live nor pending at the OOM: by then the allocator had released
    /// every wholly free segment, so this is free space in segments that hold live blocks.
    pub split_free: Option<u64>,
    /// Allocator events in the trace after it: none means the snapshot's segments are the
    /// pool as it was at the OOM (a snapshot dumped by an OOM observer).
    pub events_after: u64,
    /// The largest free block at the OOM, where the snapshot shows the pool as it was then.
    pub largest_free: Option<u64>,
    /// `capacity`, `fragmentation` or `uncertain`.
    pub class: String,
    pub why: String,
    pub advice: Vec<String>,
}

/// The pool of one device at the end of the trace: the snapshot's.
#[derive(Debug, Clone, Copy, Default)]
struct Pool {
    reserved: i128,
    live: i128,
    pending: i128,
}

fn pool_now(segs: &[&Segment]) -> Pool {
    let mut p = Pool::default();
    for s in segs {
        p.reserved += i128::from(s.total_size);
        for b in &s.blocks {
            match b.state {
                BlockState::Live => p.live += i128::from(b.size),
                BlockState::Pending => p.pending += i128::from(b.size),
                BlockState::Free => {}
            }
        }
    }
    p
}

/// The pool before `entries` happened, from the pool after them: each undone, newest first.
fn undo(mut p: Pool, entries: &[Entry]) -> Pool {
    for e in entries.iter().rev() {
        let size = i128::from(e.size.unwrap_or(0));
        match e.action {
            Action::Alloc => p.live -= size,
            Action::FreeRequested => {
                p.live += size;
                p.pending -= size;
            }
            Action::FreeCompleted => p.pending += size,
            Action::SegmentAlloc | Action::SegmentMap => p.reserved -= size,
            Action::SegmentFree | Action::SegmentUnmap => p.reserved += size,
            Action::Oom | Action::Other => {}
        }
    }
    p
}

fn is_event(e: &Entry) -> bool {
    !matches!(e.action, Action::Oom | Action::Other)
}

/// The OOMs of one device's trace, oldest first. `segs` are the device's segments in the
/// snapshot; `expandable` whether the job ran with expandable segments, where known.
pub(crate) fn ooms(
    device: u32,
    entries: &[Entry],
    segs: &[&Segment],
    stacks: &Stacks,
    expandable: Option<bool>,
) -> Vec<OomEvent> {
    let now = pool_now(segs);
    let largest_now = segs
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == BlockState::Free)
        .map(|b| b.size)
        .max()
        .unwrap_or(0);
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if e.action != Action::Oom {
            continue;
        }
        let after = &entries[i + 1..];
        let then = undo(now, after);
        let known = |x: i128| u64::try_from(x).ok();
        let (reserved, live, pending) =
            match (known(then.reserved), known(then.live), known(then.pending)) {
                (Some(r), Some(l), Some(p)) if l.saturating_add(p) <= r => {
                    (Some(r), Some(l), Some(p))
                }
                _ => (None, None, None),
            };
        let events_after = after.iter().filter(|e| is_event(e)).count() as u64;
        let largest_free = (events_after == 0).then_some(largest_now);
        let split_free = match (reserved, live, pending) {
            (Some(r), Some(l), Some(p)) => Some(r - l - p),
            _ => None,
        };
        let mut event = OomEvent {
            device,
            time: e.time_us.map(|t| t as f64 / 1e6),
            requested: e.size,
            device_free: e.device_free,
            site: e.stack.map(|s| site_of(stacks.get(s)).site),
            reserved,
            live,
            pending_free: pending,
            split_free,
            events_after,
            largest_free,
            class: String::new(),
            why: String::new(),
            advice: Vec::new(),
        };
        classed(&mut event, expandable);
        out.push(event);
    }
    out
}

/// The class, why and advice of an OOM, as the monitor's detector words them.
fn classed(e: &mut OomEvent, expandable: Option<bool>) {
    let (Some(reserved), Some(live)) = (e.reserved, e.live) else {
        e.class = "uncertain".into();
        e.why = "the trace after it does not add up to the snapshot's pool, so what the pool held at the OOM is not known: capacity or fragmentation cannot be told".into();
        return;
    };
    let stats = AllocatorStats {
        index: e.device,
        time: e.time.unwrap_or(0.0),
        allocated: live,
        reserved: Some(reserved),
        inactive_split: e.split_free,
        largest_free_block: e.largest_free,
        ..AllocatorStats::default()
    };
    let report = OomReport {
        time: e.time.unwrap_or(0.0),
        index: e.device,
        requested: e.requested,
        device_free: e.device_free,
        ..OomReport::default()
    };
    let (class, why) = crate::detect::diagnosis::classify(Some(&report), &stats);
    e.class = class.into();
    e.why = why;
    let evidence = Evidence::Oom(evidence::Oom {
        allocated: Bytes(live),
        class: class.into(),
        could_have_bytes: e.device_free.map(|f| Bytes(reserved.saturating_add(f))),
        device_free: e.device_free.map(Bytes),
        device_total: None,
        expandable_segments: expandable.into(),
        framework: Some("torch".to_string()).into(),
        inactive_split: e.split_free.map(Bytes),
        largest_free_block: e.largest_free.map(Bytes),
        needed_bytes: e.requested.map(|r| Bytes(live.saturating_add(r))),
        ooms_in_window: None,
        ooms_total: None,
        // What the pool's segments were at the OOM is worked back in totals only.
        pinned_live: None.into(),
        pinned_reserved: None.into(),
        pinned_segments: None.into(),
        requested: e.requested.map(Bytes),
        reserved: Some(Bytes(reserved)),
        segment_map_time: None.into(),
        time: e.time.map(Time),
    });
    e.advice = crate::detect::advice::advice(FindingKind::Oom, &evidence);
}

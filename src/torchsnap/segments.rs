//! A snapshot's segments reduced to the segment map (spec: "The reduction of a snapshot's
//! segments", the one rule the agent's reduction follows too).

use super::shape::{BlockState, Segment};
use crate::sample::pool::{
    DeviceSegments, FreeBucket, Pinned, PoolMap, RunState, SegmentStrip, MAX_RUNS, MAX_STRIPS,
    PINNED_FREE_DEN, PINNED_FREE_NUM,
};
use std::collections::BTreeMap;

/// One segment's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Figures {
    pub(crate) live: u64,
    pub(crate) pending: u64,
    /// Inactive blocks.
    pub(crate) free: u64,
    pub(crate) largest_free: u64,
}

pub(crate) fn figures(seg: &Segment) -> Figures {
    let mut f = Figures::default();
    for b in &seg.blocks {
        match b.state {
            BlockState::Live => f.live += b.size,
            BlockState::Pending => f.pending += b.size,
            BlockState::Free => {
                f.free += b.size;
                f.largest_free = f.largest_free.max(b.size);
            }
        }
    }
    f
}

/// Live blocks hold something of it and its free part is at least 3/4 of it.
pub(crate) fn pinned(seg: &Segment, f: &Figures) -> bool {
    f.live > 0
        && u128::from(f.free) * u128::from(PINNED_FREE_DEN)
            >= u128::from(seg.total_size) * u128::from(PINNED_FREE_NUM)
}

/// The order of pools: large before small (another name after both), not expandable before
/// expandable.
fn pool_order(pool: &str, expandable: bool) -> PoolKey {
    let rank = match pool {
        "large" => 0,
        "small" => 1,
        _ => 2,
    };
    (rank, pool.to_string(), expandable)
}

/// `floor(log2(size))`'s power of two.
fn bucket(size: u64) -> u64 {
    1u64 << (63 - size.leading_zeros())
}

/// A segment's blocks in address order, one run per state, the tail past [`MAX_RUNS`] one
/// mixed run; what the blocks leave of the segment is free at its end, and what they claim
/// past it is cut.
pub(crate) fn runs(seg: &Segment) -> Vec<(u64, RunState)> {
    let mut runs: Vec<(u64, RunState)> = Vec::new();
    let mut left = seg.total_size;
    let add = |runs: &mut Vec<(u64, RunState)>, bytes: u64, state: RunState| {
        if bytes == 0 {
            return;
        }
        match runs.last_mut() {
            Some((b, s)) if *s == state => *b += bytes,
            _ => runs.push((bytes, state)),
        }
    };
    for b in &seg.blocks {
        let bytes = b.size.min(left);
        left -= bytes;
        let state = match b.state {
            BlockState::Live => RunState::Live,
            BlockState::Pending => RunState::Pending,
            BlockState::Free => RunState::Free,
        };
        add(&mut runs, bytes, state);
    }
    add(&mut runs, left, RunState::Free);
    if runs.len() > MAX_RUNS {
        let tail: u64 = runs[MAX_RUNS - 1..].iter().map(|(b, _)| b).sum();
        runs.truncate(MAX_RUNS - 1);
        runs.push((tail, RunState::Mixed));
    }
    runs
}

fn strip(seg: &Segment, f: &Figures, is_pinned: bool) -> SegmentStrip {
    // What the blocks leave of the segment is free, as in its runs.
    let blocks: u64 = seg.blocks.iter().map(|b| b.size).sum();
    let gap = seg.total_size.saturating_sub(blocks);
    SegmentStrip {
        pool: seg.pool.clone(),
        expandable: seg.expandable,
        size: seg.total_size,
        live: f.live,
        free: f.free + gap,
        largest_free: f.largest_free,
        pinned: is_pinned,
        runs: runs(seg),
    }
}

/// The segment map of every device in `segments`, devices by index.
pub(crate) fn reduce(segments: &[Segment]) -> Vec<DeviceSegments> {
    let mut devices: BTreeMap<u32, Vec<&Segment>> = BTreeMap::new();
    for s in segments {
        devices.entry(s.device).or_default().push(s);
    }
    devices
        .into_iter()
        .map(|(index, segs)| device(index, &segs))
        .collect()
}

/// A pool's place in the order of pools.
type PoolKey = (u8, String, bool);
/// Free blocks by bucket: (blocks, bytes).
type Buckets = BTreeMap<u64, (u64, u64)>;

fn device(index: u32, segs: &[&Segment]) -> DeviceSegments {
    let mut pools: BTreeMap<PoolKey, PoolMap> = BTreeMap::new();
    let mut buckets: BTreeMap<PoolKey, Buckets> = BTreeMap::new();
    let mut drawn: Vec<(&Segment, Figures, bool)> = Vec::with_capacity(segs.len());
    for &seg in segs {
        let f = figures(seg);
        let is_pinned = pinned(seg, &f);
        let key = pool_order(&seg.pool, seg.expandable);
        let p = pools.entry(key.clone()).or_insert_with(|| PoolMap {
            pool: seg.pool.clone(),
            expandable: seg.expandable,
            segments: 0,
            reserved: 0,
            live: 0,
            pending_free: 0,
            free: 0,
            largest_free: 0,
            free_blocks: Vec::new(),
            pinned: Pinned::default(),
        });
        p.segments += 1;
        p.reserved += seg.total_size;
        p.live += f.live;
        p.pending_free += f.pending;
        p.free += f.free;
        p.largest_free = p.largest_free.max(f.largest_free);
        if is_pinned {
            p.pinned.segments += 1;
            p.pinned.reserved += seg.total_size;
            p.pinned.live += f.live;
        }
        let hist = buckets.entry(key).or_default();
        for b in seg
            .blocks
            .iter()
            .filter(|b| b.state == BlockState::Free && b.size > 0)
        {
            let e = hist.entry(bucket(b.size)).or_default();
            e.0 += 1;
            e.1 += b.size;
        }
        drawn.push((seg, f, is_pinned));
    }
    for (key, hist) in buckets {
        if let Some(p) = pools.get_mut(&key) {
            p.free_blocks = hist
                .into_iter()
                .map(|(at_least, (blocks, bytes))| FreeBucket {
                    at_least,
                    blocks,
                    bytes,
                })
                .collect();
        }
    }
    // Pinned first, most free first; then the largest; address breaks ties.
    drawn.sort_by(|a, b| {
        b.2.cmp(&a.2).then_with(|| {
            if a.2 {
                b.1.free.cmp(&a.1.free)
            } else {
                b.0.total_size.cmp(&a.0.total_size)
            }
            .then(a.0.address.cmp(&b.0.address))
        })
    });
    let strips: Vec<SegmentStrip> = drawn
        .iter()
        .take(MAX_STRIPS)
        .map(|(seg, f, p)| strip(seg, f, *p))
        .collect();
    DeviceSegments {
        index,
        pools: pools.into_values().collect(),
        strips_left_out: (segs.len() - strips.len()) as u64,
        strips,
    }
}

//! One series: values at implicit times (one slot per sampling step), stored as `u32` (KiB for
//! bytes, the count itself for counters and percentages), with a gap marker, in three rings:
//! raw slots for the last 15 minutes, and two folded tiers (min, max, last) reaching 2 and 24
//! hours. The rings grow as values arrive, so a series costs in proportion to what it holds:
//! a few hundred bytes and 4 a sample for a process that lived seconds, at most about 26 KB at a
//! 1 s step after a day (the rings' items are in blocks a copy shares: [`Blocks`]). A figure
//! that holds still costs a block a ring however long it holds (a block that repeats the one
//! before it is that one again). A thinned series reaches a fraction of that past
//! ([`Series::thin`]).

use super::blocks::{self, Blocks};

/// The marker of a slot with no value (unknown at that instant, or nothing sampled).
const GAP: u32 = u32::MAX;
/// How many raw slots make one point of the first tier, and first-tier points the second.
pub(crate) const FOLD_1: i64 = 10;
pub(crate) const FOLD_2: i64 = 12;
/// Chunks a read folds on the stack (more, on the heap): every window the climbs cut.
const FEW_CHUNKS: usize = 16;
/// Seconds each ring covers.
pub(crate) const RAW_SECS: f64 = 900.0;
const TIER_1_SECS: f64 = 7200.0;
const TIER_2_SECS: f64 = 86_400.0;

/// How values are kept: bytes as KiB (rounded up, so a non-zero value never reads 0), or as
/// they are (counts, percentages), saturating below the gap marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scale {
    Kib,
    Unit,
}

impl Scale {
    fn encode(self, value: u64) -> u32 {
        let v = match self {
            Scale::Kib => value.div_ceil(1024),
            Scale::Unit => value,
        };
        v.min(u64::from(GAP - 1)) as u32
    }

    fn decode(self, stored: u32) -> Option<u64> {
        (stored != GAP).then(|| match self {
            Scale::Kib => u64::from(stored) * 1024,
            Scale::Unit => u64::from(stored),
        })
    }
}

/// The smallest, largest and last known value over a span of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) min: u64,
    pub(crate) max: u64,
    pub(crate) last: u64,
}

#[cfg(test)]
impl Span {
    fn merge(self, later: Span) -> Span {
        Span {
            min: self.min.min(later.min),
            max: self.max.max(later.max),
            last: later.last,
        }
    }
}

/// A ring of consecutive slots ending at `head` (an absolute slot number), holding at most
/// `capacity` of them. Its memory grows with what it holds, up to the capacity and a block
/// more; a copy shares its full blocks ([`Blocks`]).
#[derive(Debug, Clone)]
struct Ring<T: Copy + PartialEq> {
    items: Blocks<T>,
    /// At most 2^16 (see [`capacity`]).
    capacity: u32,
    /// The absolute slot of the newest item, `i64::MIN` while there is none ([`Ring::head`]):
    /// a plain number, where an `Option` would take 8 bytes more, three to a series.
    newest: i64,
}

impl<T: Copy + PartialEq> Ring<T> {
    fn new(capacity: usize) -> Self {
        Ring {
            items: Blocks::new(capacity),
            capacity: ring_capacity(capacity),
            newest: i64::MIN,
        }
    }

    /// The absolute slot of the newest item, if any.
    #[inline]
    fn head(&self) -> Option<i64> {
        (self.newest != i64::MIN).then_some(self.newest)
    }

    fn push(&mut self, slot: i64, value: T) {
        let capacity = self.capacity as usize;
        if self.items.len() >= capacity {
            self.items.drop_front(self.items.len() + 1 - capacity);
        }
        self.items.push_back(value);
        // A slot is never `i64::MIN`: slots count steps from the history's first instant.
        self.newest = slot.max(i64::MIN + 1);
    }

    /// Holds at most `capacity` items from now on, letting the oldest go, and their memory.
    fn set_capacity(&mut self, capacity: usize) {
        let excess = self.items.len().saturating_sub(capacity);
        self.items.drop_front(excess);
        self.capacity = ring_capacity(capacity);
        self.items.set_capacity(capacity);
    }

    /// Bytes of the items' memory, as allocated.
    #[inline]
    fn bytes(&self) -> usize {
        self.items.bytes()
    }

    /// Bytes of the blocks `other` does not share with this ring.
    fn bytes_beside(&self, other: &Ring<T>) -> usize {
        self.items.bytes_beside(&other.items)
    }

    fn clear(&mut self) {
        self.items.clear();
        self.newest = i64::MIN;
    }

    /// The absolute slot of the oldest item held.
    fn first(&self) -> Option<i64> {
        self.head().map(|h| h - self.items.len() as i64 + 1)
    }

    /// Items with their absolute slots, oldest first.
    fn iter(&self) -> impl DoubleEndedIterator<Item = (i64, T)> + '_ {
        self.iter_from(i64::MIN)
    }

    /// Items from the absolute slot `from` on, without walking the older ones.
    fn iter_from(&self, from: i64) -> impl DoubleEndedIterator<Item = (i64, T)> + '_ {
        let first = self.first().unwrap_or(0);
        let skip = usize::try_from(from.saturating_sub(first))
            .unwrap_or(0)
            .min(self.items.len());
        self.items
            .range(skip..self.items.len())
            .enumerate()
            .map(move |(i, v)| (first + (skip + i) as i64, *v))
    }
}

/// One series. Times are implicit: slot `k` is `origin + k * step`.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    scale: Scale,
    step: f64,
    origin: f64,
    raw: Ring<u32>,
    tier_1: Ring<[u32; 3]>,
    tier_2: Ring<[u32; 3]>,
    /// The slot of the first value since the rings were last empty (`i64::MIN` before any:
    /// a plain number, where an `Option` would cost the room the steady run takes).
    began: i64,
    /// A value (as stored; [`GAP`]: none) that every known slot from `steady_since` on
    /// holds, up to the newest: a running summary kept as values are written, so a read of
    /// a window over which the series has not moved (a counter at 0, a figure that holds) is
    /// answered without folding it ([`Series::steady_span`]). Apart, not an `Option` of a
    /// pair: the value fits beside `scale` where it costs no room.
    steady_value: u32,
    steady_since: i64,
    /// Out-of-order values dropped.
    pub(crate) dropped: u64,
}

/// `x.round() as i64` where `x` is finite (`None` where it is not), without a call: on a
/// target without SSE4.1 `round` is a library function, and a series rounds at every value
/// written. Truncating is one instruction, and what it cut off (exactly: below 2^52 the
/// subtraction loses nothing) says which way to round, halves away from zero as `round`.
fn nearest(x: f64) -> Option<i64> {
    if !x.is_finite() {
        return None;
    }
    // At 2^52 and beyond every float is a whole number (`as` saturates, as after `round`).
    if x.abs() >= 4_503_599_627_370_496.0 {
        return Some(x as i64);
    }
    let whole = x as i64;
    let cut = x - whole as f64;
    Some(if cut >= 0.5 {
        whole + 1
    } else if cut <= -0.5 {
        whole - 1
    } else {
        whole
    })
}

/// A ring's capacity as it keeps it ([`capacity`] makes none past 2^16).
fn ring_capacity(capacity: usize) -> u32 {
    u32::try_from(capacity).unwrap_or(u32::MAX)
}

fn capacity(secs: f64, step: f64) -> usize {
    ((secs / step).ceil() as usize).clamp(16, 1 << 16)
}

/// The most each ring holds at `step`, thinned to reach `1 / thinning` of its time.
fn capacities(step: f64, thinning: u32) -> [usize; 3] {
    let d = f64::from(thinning.max(1));
    [
        capacity(RAW_SECS / d, step),
        capacity(TIER_1_SECS / d, step * FOLD_1 as f64),
        capacity(TIER_2_SECS / d, step * (FOLD_1 * FOLD_2) as f64),
    ]
}

fn span_of(stored: [u32; 3], scale: Scale) -> Option<Span> {
    Some(Span {
        min: scale.decode(stored[0])?,
        max: scale.decode(stored[1])?,
        last: scale.decode(stored[2])?,
    })
}

#[cfg(test)]
fn fold_raw(values: impl Iterator<Item = u32>) -> [u32; 3] {
    let mut out = [GAP; 3];
    for v in values.filter(|&v| v != GAP) {
        if out[0] == GAP {
            out = [v, v, v];
        } else {
            out = [out[0].min(v), out[1].max(v), v];
        }
    }
    out
}

/// [`fold_raw`] of a ring's items, each pass one the compiler can make wide (a gap is the
/// largest u32: it never wins a min; it wraps to 0 to lose the max).
fn fold_items(items: blocks::Iter<'_, u32>) -> [u32; 3] {
    let min = items.clone().copied().min().unwrap_or(GAP);
    if min == GAP {
        return [GAP; 3];
    }
    let max = items
        .clone()
        .map(|v| v.wrapping_add(1))
        .max()
        .unwrap_or(0)
        .wrapping_sub(1);
    let last = items.rev().copied().find(|&v| v != GAP).unwrap_or(GAP);
    [min, max, last]
}

/// The blocks of `fold` points each that `coarser` holds folded, closed and wholly inside the
/// points `[from, to)`: `(first, past)`, or `None` where there is none. A block is folded into
/// the coarser ring when the next one begins, and never changes after.
fn whole_blocks(coarser: &Ring<[u32; 3]>, fold: i64, from: i64, to: i64) -> Option<(i64, i64)> {
    let first = from.div_euclid(fold) + i64::from(from.rem_euclid(fold) != 0);
    let past = to
        .div_euclid(fold)
        .min(coarser.head().map_or(i64::MIN, |h| h + 1));
    (past.saturating_sub(first) >= 1 && first >= coarser.first()?).then_some((first, past))
}

/// [`fold_spans`] of a tier's points from `from` up to (not including) `below`: the ring's
/// items between the places of those slots (its slots are consecutive), folded a block at a
/// time rather than item by item.
fn fold_run(ring: &Ring<[u32; 3]>, from: i64, below: i64) -> [u32; 3] {
    let (Some(first), held) = (ring.first(), ring.items.len()) else {
        return [GAP; 3];
    };
    let place = |slot: i64| usize::try_from(slot.saturating_sub(first)).map_or(0, |i| i.min(held));
    let (start, end) = (place(from), place(below));
    fold_spans(ring.items.range(start..end.max(start)).copied())
}

fn fold_spans(values: impl Iterator<Item = [u32; 3]>) -> [u32; 3] {
    values.fold([GAP; 3], |out, v| {
        if v[0] == GAP {
            out
        } else if out[0] == GAP {
            v
        } else {
            [out[0].min(v[0]), out[1].max(v[1]), v[2]]
        }
    })
}

impl Series {
    /// An empty series with slots of `step` seconds from `origin`.
    #[cfg(test)]
    pub(crate) fn new(scale: Scale, step: f64, origin: f64) -> Self {
        Series::thinned(scale, step, origin, 1)
    }

    /// An empty series whose rings reach `1 / thinning` of the time a whole one's do.
    pub(crate) fn thinned(scale: Scale, step: f64, origin: f64, thinning: u32) -> Self {
        let step = if step.is_finite() && step > 0.0 {
            step
        } else {
            1.0
        };
        let [raw, tier_1, tier_2] = capacities(step, thinning);
        Series {
            scale,
            step,
            origin,
            raw: Ring::new(raw),
            tier_1: Ring::new(tier_1),
            tier_2: Ring::new(tier_2),
            began: i64::MIN,
            steady_value: GAP,
            steady_since: 0,
            dropped: 0,
        }
    }

    /// From now on reaches `1 / thinning` of the time a whole series does (1: all of it):
    /// the oldest slots past that are let go, with their memory. Thinning less lets the
    /// rings grow again as values arrive.
    pub(crate) fn thin(&mut self, thinning: u32) {
        let [raw, tier_1, tier_2] = capacities(self.step, thinning);
        self.raw.set_capacity(raw);
        self.tier_1.set_capacity(tier_1);
        self.tier_2.set_capacity(tier_2);
    }

    pub(crate) fn step(&self) -> f64 {
        self.step
    }

    fn slot(&self, time: f64) -> Option<i64> {
        nearest((time - self.origin) / self.step)
    }

    /// The time of a slot.
    pub(crate) fn time_of(&self, slot: i64) -> f64 {
        self.origin + slot as f64 * self.step
    }

    /// The time of the last slot a tier's point `p` folds (`points` slots a point): where
    /// the point stands. Worked in floats, exact below 2^53 as the slot is: the point of
    /// `i64::MAX` has its last slot past it.
    fn end_of(&self, p: i64, points: i64) -> f64 {
        self.origin + ((p as f64 + 1.0) * points as f64 - 1.0) * self.step
    }

    /// Records a value (`None`: unknown) at `time`. A time in the slot already last written
    /// replaces that value; an older one is dropped and counted; a later one leaves gaps for
    /// the slots between.
    pub(crate) fn push(&mut self, time: f64, value: Option<u64>) {
        let Some(slot) = self.slot(time) else {
            self.dropped += 1;
            return;
        };
        let stored = value.map_or(GAP, |v| self.scale.encode(v));
        match self.raw.head() {
            Some(head) if slot < head => self.dropped += 1,
            Some(head) if slot == head => {
                self.raw.items.set_back(stored);
                self.keep_steady(slot, stored);
            }
            Some(head) => {
                // Slots with nothing sampled are gaps; a long silence restarts the rings.
                if slot - head > self.raw.capacity as i64 * FOLD_1 * FOLD_2 {
                    self.raw.clear();
                    self.tier_1.clear();
                    self.tier_2.clear();
                    self.began = slot;
                    self.steady_value = GAP;
                } else {
                    for missing in head + 1..slot {
                        self.advance(missing, GAP);
                    }
                }
                self.advance(slot, stored);
                self.keep_steady(slot, stored);
            }
            None => {
                self.began = slot;
                self.advance(slot, stored);
                self.keep_steady(slot, stored);
            }
        }
    }

    /// Keeps [`Series::steady_value`] true of a value just written at `slot`, the newest: a gap
    /// leaves it as it was; another value starts a new run there.
    fn keep_steady(&mut self, slot: i64, stored: u32) {
        if stored != GAP && self.steady_value != stored {
            self.steady_value = stored;
            self.steady_since = slot;
        }
    }

    /// `chunks(end, window, 1)[0]` where it is known without a read: the series has held
    /// one value over the whole window (every known slot that any point read for it folds,
    /// from a second-tier point's width before the window on), and its newest slot, known,
    /// stands in the window. `None` where it must be read.
    pub(crate) fn steady_span(&self, end: f64, window: f64) -> Option<Span> {
        let (value, since) = (self.steady_value, self.steady_since);
        let head = self.raw.head()?;
        if value == GAP || self.raw.items.back() != Some(&value) || window.is_nan() || window <= 0.0
        {
            return None;
        }
        let start = end - window;
        let at = self.time_of(head);
        // A point stands at the end of the slots it folds: the first read may begin up to
        // a second-tier point's width before the window (and a slot's rounding before that).
        let reaches = self.time_of(since.saturating_add(FOLD_1 * FOLD_2 + 1));
        (at >= start && at <= end && reaches <= start).then(|| {
            let v = self.scale.decode(value)?;
            Some(Span {
                min: v,
                max: v,
                last: v,
            })
        })?
    }

    /// Appends a raw slot, folding the block it closes into the tiers.
    fn advance(&mut self, slot: i64, stored: u32) {
        if let Some(head) = self.raw.head() {
            let block = head.div_euclid(FOLD_1);
            if slot.div_euclid(FOLD_1) != block {
                self.fold_block(block);
            }
        }
        self.raw.push(slot, stored);
    }

    /// Folds raw block `block` (slots `block * FOLD_1 ..`) into the first tier, and the first
    /// tier's block it closes into the second.
    fn fold_block(&mut self, block: i64) {
        // The block is the raw head's (the slot pushed next opens another): its slots are
        // the ring's last, from the block's first on, or the ring's first where it was
        // emptied inside the block.
        let held = self.raw.items.len();
        let first = self.raw.first().unwrap_or(block * FOLD_1);
        let skip = usize::try_from(block * FOLD_1 - first)
            .unwrap_or(0)
            .min(held);
        let folded = fold_items(self.raw.items.range(skip..held));
        if let Some(head) = self.tier_1.head() {
            let group = head.div_euclid(FOLD_2);
            if block.div_euclid(FOLD_2) != group {
                let spans = fold_run(
                    &self.tier_1,
                    group * FOLD_2,
                    (group + 1).saturating_mul(FOLD_2),
                );
                self.tier_2.push(group, spans);
            }
            for missing in head + 1..block {
                self.tier_1.push(missing, [GAP; 3]);
            }
        }
        self.tier_1.push(block, folded);
    }

    /// The latest known value.
    pub(crate) fn last(&self) -> Option<u64> {
        self.raw.items.back().and_then(|&v| self.scale.decode(v))
    }

    /// The time of the latest slot written.
    pub(crate) fn last_time(&self) -> Option<f64> {
        self.raw.head().map(|h| self.time_of(h))
    }

    /// The time of the oldest slot held, in any tier (its value may be a gap): the first
    /// value's, while the tiers still reach it.
    pub(crate) fn first_time(&self) -> Option<f64> {
        let held = [
            self.raw.first(),
            self.tier_1.first().map(|p| p * FOLD_1),
            self.tier_2.first().map(|p| p * FOLD_1 * FOLD_2),
        ]
        .into_iter()
        .flatten()
        .min()?;
        Some(self.time_of(held.max(self.began)))
    }

    /// How many raw slots are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.raw.items.len()
    }

    /// The last `n` raw values (gaps as `None`), oldest first.
    #[cfg(test)]
    pub(crate) fn recent(&self, n: usize) -> Vec<Option<u64>> {
        let items = &self.raw.items;
        items
            .iter()
            .skip(items.len().saturating_sub(n))
            .map(|&v| self.scale.decode(v))
            .collect()
    }

    /// The raw values with their times, oldest first.
    pub(crate) fn raw(&self) -> impl Iterator<Item = (f64, Option<u64>)> + '_ {
        self.raw
            .iter()
            .map(|(s, v)| (self.time_of(s), self.scale.decode(v)))
    }

    /// The largest known value over the raw window, with the window's length in seconds.
    pub(crate) fn peak(&self) -> Option<(u64, f64)> {
        let max = self
            .raw
            .items
            .iter()
            .filter_map(|&v| self.scale.decode(v))
            .max()?;
        Some((
            max,
            self.raw.items.len().saturating_sub(1) as f64 * self.step,
        ))
    }

    /// Seconds of the past each tier reaches: raw, first tier, second tier.
    pub(crate) fn reach(&self) -> [f64; 3] {
        [
            self.raw.capacity as f64 * self.step,
            self.tier_1.capacity as f64 * self.step * FOLD_1 as f64,
            self.tier_2.capacity as f64 * self.step * (FOLD_1 * FOLD_2) as f64,
        ]
    }

    /// Seconds between the points [`Series::chunks`] reads for a window of this length: a
    /// chunk narrower than this may hold none.
    pub(crate) fn resolution(&self, window: f64) -> f64 {
        let reach = self.reach();
        if window <= reach[0] {
            self.step
        } else if window <= reach[1] {
            self.step * FOLD_1 as f64
        } else {
            self.step * (FOLD_1 * FOLD_2) as f64
        }
    }

    /// `n` equal chunks of `[end - window, end]`, oldest first, each the min, max and last
    /// value within it (`None` where nothing is known), from the finest tier that holds the
    /// whole window. Chunks are whole points of that tier, so a chunk never straddles two.
    pub(crate) fn chunks(&self, end: f64, window: f64, n: usize) -> Vec<Option<Span>> {
        if n == 1 {
            return vec![self.chunk(end, window)];
        }
        self.chunks_between(end, window, n, f64::NEG_INFINITY, f64::INFINITY)
    }

    /// `chunks(end, window, 1)[0]`, with nothing allocated: a window's lowest, highest and
    /// last, as the detectors ask of most series at every judgement.
    pub(crate) fn chunk(&self, end: f64, window: f64) -> Option<Span> {
        if let Some(span) = self.steady_span(end, window) {
            return Some(span);
        }
        let mut out = [None];
        self.chunks_read(
            end,
            window,
            f64::NEG_INFINITY,
            f64::INFINITY,
            false,
            &mut out,
        );
        out[0]
    }

    /// The first and the last of the chunks [`Series::chunks`] cuts, reading only their
    /// points: whether a window can hold a rise at all, at a fraction of the cost.
    pub(crate) fn edges(&self, end: f64, window: f64, n: usize) -> (Option<Span>, Option<Span>) {
        if n == 0 {
            return (None, None);
        }
        let width = window / n as f64;
        let start = end - window;
        // A few chunks on the stack, as the climbs cut their windows (more on the heap).
        let mut few = [None; FEW_CHUNKS];
        let mut many = Vec::new();
        let out = if n <= FEW_CHUNKS {
            &mut few[..n]
        } else {
            many.resize(n, None);
            &mut many[..]
        };
        self.chunks_read(end, window, start, start + width, false, out);
        let first = out[0];
        out.fill(None);
        self.chunks_read(end, window, end - width, end, false, out);
        (first, out[n - 1])
    }

    /// [`Series::chunks`], reading only the points from `from` to `to`.
    fn chunks_between(
        &self,
        end: f64,
        window: f64,
        n: usize,
        from: f64,
        to: f64,
    ) -> Vec<Option<Span>> {
        let mut out = vec![None; n];
        self.chunks_read(end, window, from, to, false, &mut out);
        out
    }

    /// [`Series::chunks`] with a tier's points each put in its chunk one by one (no run
    /// found at a chunk's edges, no group read from the second tier): what it must equal.
    #[cfg(test)]
    pub(crate) fn chunks_plainly(&self, end: f64, window: f64, n: usize) -> Vec<Option<Span>> {
        let mut out = vec![None; n];
        self.chunks_read(
            end,
            window,
            f64::NEG_INFINITY,
            f64::INFINITY,
            true,
            &mut out,
        );
        out
    }

    /// [`Series::chunks_between`] into `out` (one place a chunk, each `None`); `plainly`:
    /// [`Series::chunks_plainly`].
    fn chunks_read(
        &self,
        end: f64,
        window: f64,
        from: f64,
        to: f64,
        plainly: bool,
        out: &mut [Option<Span>],
    ) {
        let n = out.len();
        if n == 0 || window.is_nan() || window <= 0.0 {
            return;
        }
        let start = end - window;
        let width = window / n as f64;
        let (from, to) = (from.max(start), to.min(end));
        let reach = self.reach();
        let from_slot = ((from - self.origin) / self.step).floor() as i64;
        if window <= reach[0] {
            // Each chunk's slots found at its edges, then folded from the ring in one pass (a
            // gap is the largest u32: it never wins a min, and is skipped for the max).
            let (Some(first), Some(head)) = (self.raw.first(), self.raw.head()) else {
                return;
            };
            // Walked in wider integers: the slot past the newest may be one past `i64::MAX`.
            let (first, head) = (i128::from(first), i128::from(head));
            let time_of = |slot: i128| self.origin + slot as f64 * self.step;
            // The chunk a slot's time falls in, as `put` reads it; None outside [from, to].
            let chunk = |slot: i128| {
                let time = time_of(slot);
                (time >= from && time <= to).then(|| (((time - start) / width) as usize).min(n - 1))
            };
            let mut slot = i128::from(from_slot).max(first);
            while slot <= head && chunk(slot).is_none() && time_of(slot) < from {
                slot += 1;
            }
            while slot <= head {
                let Some(i) = chunk(slot) else { break };
                // The first slot past this chunk: estimated, then walked to exactly.
                let edge = start + (i + 1) as f64 * width;
                // (Within the ring: past the newest every slot is this chunk's, as the
                // estimate is its edge.)
                let mut past =
                    (((edge - self.origin) / self.step).ceil() as i128).clamp(slot + 1, head + 1);
                while past > slot + 1 && chunk(past - 1) != Some(i) {
                    past -= 1;
                }
                while past <= head && chunk(past) == Some(i) {
                    past += 1;
                }
                let past = past.min(head + 1);
                let range = (slot - first) as usize..(past - first) as usize;
                out[i] = self.fold_slots(range);
                slot = past;
            }
            return;
        }
        // Folded as stored (min, max, last; a gap never counts), decoded once at the end:
        // decoding is monotonic, so the fold is the same as of the decoded spans.
        // Folded as stored per chunk: a few on the stack, more on the heap.
        let mut few = [[GAP; 3]; FEW_CHUNKS];
        let mut many = Vec::new();
        let folded = if n <= FEW_CHUNKS {
            &mut few[..n]
        } else {
            many.resize(n, [GAP; 3]);
            &mut many[..]
        };
        let mut put = |time: f64, v: [u32; 3]| {
            if time < from || time > to || v[0] == GAP {
                return;
            }
            let i = if n == 1 {
                0
            } else {
                (((time - start) / width) as usize).min(n - 1)
            };
            let o = &mut folded[i];
            *o = if o[0] == GAP {
                v
            } else {
                [o[0].min(v[0]), o[1].max(v[1]), v[2]]
            };
        };
        let raw_from = |slot: i64| {
            self.raw
                .iter_from(slot)
                .take_while(|(slot, _)| self.time_of(*slot) <= to)
        };
        let (ring, points) = if window <= reach[1] {
            (&self.tier_1, FOLD_1)
        } else {
            (&self.tier_2, FOLD_1 * FOLD_2)
        };
        // A point stands at the end of the slots it folds: the first that can be in the
        // window, and on while they are.
        let ends = |p: i64, points: i64| self.end_of(p, points);
        let first_point = from_slot.div_euclid(points);
        if plainly {
            for (p, v) in ring
                .iter_from(first_point)
                .take_while(|(p, _)| ends(*p, points) <= to)
            {
                put(ends(p, points), v);
            }
        } else if n == 1 && points == FOLD_1 {
            // One chunk (a window's lowest, a counter's rise): the points in it are a run,
            // its whole groups read from the second tier.
            put(to, self.fold_tier_1(first_point, from, to));
        } else if let (Some(held), Some(head)) = (ring.first(), ring.head()) {
            // Each chunk's points found at its edges, then folded from the ring as one run
            // (as the raw slots are above): the chunk a point falls in, as `put` reads it
            // (None outside [from, to]), never falls as the points go on.
            let chunk = |p: i64| {
                let time = ends(p, points);
                (time >= from && time <= to).then(|| {
                    if n == 1 {
                        0
                    } else {
                        (((time - start) / width) as usize).min(n - 1)
                    }
                })
            };
            let mut p = first_point.max(held);
            while p <= head && ends(p, points) < from {
                p += 1;
            }
            while p <= head {
                let Some(i) = chunk(p) else { break };
                // The first point past this chunk: estimated from its edge (a point stands
                // at its last slot), then walked to exactly, within the ring.
                let edge = start + (i + 1) as f64 * width;
                let estimate = ((((edge - self.origin) / self.step + 1.0) / points as f64).ceil()
                    as i64)
                    .saturating_sub(1);
                let mut past = estimate.clamp(p + 1, head + 1);
                while past > p + 1 && chunk(past - 1) != Some(i) {
                    past -= 1;
                }
                while past <= head && chunk(past) == Some(i) {
                    past += 1;
                }
                put(ends(past - 1, points), fold_run(ring, p, past));
                p = past;
            }
        }
        // What the second tier has not folded yet: the first tier's open group.
        if points == FOLD_1 * FOLD_2 {
            let folded_to = self
                .tier_2
                .head()
                .map_or(i64::MIN, |h| (h + 1).saturating_mul(FOLD_2));
            for (p, v) in self
                .tier_1
                .iter_from(folded_to.max(from_slot.div_euclid(FOLD_1)))
                .take_while(|(p, _)| ends(*p, FOLD_1) <= to)
            {
                put(ends(p, FOLD_1), v);
            }
        }
        // The open block not folded yet: from the raw ring.
        if let Some(head) = self.raw.head() {
            let open_from = head.div_euclid(FOLD_1) * FOLD_1;
            for (slot, v) in raw_from(open_from.max(from_slot)) {
                put(self.time_of(slot), [v, v, v]);
            }
        }
        for (o, f) in out.iter_mut().zip(folded.iter()) {
            *o = span_of(*f, self.scale);
        }
    }

    /// The first tier's points from `first` on that stand in `[from, to]` (at the end of
    /// the slots each folds), folded as stored: the groups of [`FOLD_2`] points wholly among
    /// them read from the second tier (each is the fold of exactly those points, written
    /// when its group closed), the points at either end from the first.
    fn fold_tier_1(&self, first: i64, from: f64, to: f64) -> [u32; 3] {
        let ends = |p: i64| self.end_of(p, FOLD_1);
        let (Some(held), Some(head)) = (self.tier_1.first(), self.tier_1.head()) else {
            return [GAP; 3];
        };
        // The run [lo, hi]: points in order of their ends, so the first that is not before
        // `from` and the last that is not after `to`.
        let mut lo = first.max(held);
        while lo <= head && ends(lo) < from {
            lo += 1;
        }
        // Found from where `to` falls, then walked to exactly (a step or two at most).
        let estimate = (((to - self.origin) / self.step + 1.0) / FOLD_1 as f64).floor() as i64 - 1;
        let mut hi = estimate.min(head).max(lo - 1);
        while hi >= lo && ends(hi) > to {
            hi -= 1;
        }
        while hi < head && ends(hi + 1) <= to {
            hi += 1;
        }
        if hi < lo {
            return [GAP; 3];
        }
        let points = |a: i64, b: i64| fold_run(&self.tier_1, a, b);
        let Some((g_lo, g_hi)) = whole_blocks(&self.tier_2, FOLD_2, lo, hi + 1) else {
            return points(lo, hi + 1);
        };
        fold_spans(
            [
                points(lo, g_lo * FOLD_2),
                fold_run(&self.tier_2, g_lo, g_hi),
                points(g_hi * FOLD_2, hi + 1),
            ]
            .into_iter(),
        )
    }

    /// [`Series::fold_tier_1`] point by point, with no group read: what it must equal.
    #[cfg(test)]
    fn fold_tier_1_plainly(&self, first: i64, from: f64, to: f64) -> [u32; 3] {
        let ends = |p: i64| self.end_of(p, FOLD_1);
        fold_spans(
            self.tier_1
                .iter_from(first)
                .take_while(|&(p, _)| ends(p) <= to)
                .filter(|&(p, _)| ends(p) >= from)
                .map(|(_, v)| v),
        )
    }

    /// The min, max and last known value of raw ring items `range`: the blocks of the first
    /// tier that lie wholly inside it read instead of their slots (each is the fold of
    /// exactly those slots, written when its block closed and never changed since), the
    /// slots at either end from the raw ring.
    fn fold_slots(&self, range: std::ops::Range<usize>) -> Option<Span> {
        span_of(self.fold_stored(range), self.scale)
    }

    /// [`Series::fold_slots`] as stored: `[min, max, last]`, all [`GAP`] where none is known.
    fn fold_stored(&self, range: std::ops::Range<usize>) -> [u32; 3] {
        let Some(first) = self.raw.first() else {
            return [GAP; 3];
        };
        let end = range.end.min(self.raw.items.len());
        let start = range.start.min(end);
        // `to` is past the newest slot: at `i64::MAX` it stays there, which leaves the
        // (never whole) last block out as one past it would.
        let (from, to) = (
            first.saturating_add(start as i64),
            first.saturating_add(end as i64),
        );
        let Some((lowest, below)) = whole_blocks(&self.tier_1, FOLD_1, from, to) else {
            return fold_items(self.raw.items.range(start..end));
        };
        let index = |slot: i64| (slot - first) as usize;
        fold_spans(
            [
                fold_items(self.raw.items.range(start..index(lowest * FOLD_1))),
                fold_run(&self.tier_1, lowest, below),
                fold_items(self.raw.items.range(index(below * FOLD_1)..end)),
            ]
            .into_iter(),
        )
    }

    /// The least known value of the raw slots within each of the last `spans` seconds up to
    /// `end` (slots at `end - span` or later, and not after `end`; `spans` ascending), read
    /// in one pass from the newest slot back: `None` where the raw ring holds no known value
    /// there. A span reaching past the raw ring reads the slots it holds. Any chunk of a
    /// window that holds those slots (as its own, or folded into a tier's points) has a
    /// floor at most this: a bound that rules a window out without cutting it.
    pub(crate) fn trailing_floors<const N: usize>(
        &self,
        end: f64,
        spans: [f64; N],
    ) -> [Option<u64>; N] {
        debug_assert!(spans.windows(2).all(|w| w[0] <= w[1]), "spans ascending");
        let mut out = [None; N];
        let (Some(first), Some(head)) = (self.raw.first(), self.raw.head()) else {
            return out;
        };
        // The newest slot not after `end` (the head may stand up to half a step past it).
        let mut past = head + 1;
        while past > first && self.time_of(past - 1) > end {
            past -= 1;
        }
        let index = |slot: i64| (slot - first) as usize;
        let mut least = GAP;
        for (floor, span) in out.iter_mut().zip(spans) {
            let from = end - span;
            // The first slot at `from` or later: estimated, then walked to exactly.
            let estimate = ((from - self.origin) / self.step).ceil();
            let mut lo = if estimate.is_finite() {
                (estimate as i64).clamp(first, past)
            } else {
                first
            };
            while lo > first && self.time_of(lo - 1) >= from {
                lo -= 1;
            }
            while lo < past && self.time_of(lo) < from {
                lo += 1;
            }
            if lo < past {
                least = least.min(self.fold_stored(index(lo)..index(past))[0]);
                past = lo;
            }
            *floor = self.scale.decode(least);
        }
        out
    }

    /// [`Series::fold_slots`] slot by slot, with no tier read: what it must equal.
    #[cfg(test)]
    fn fold_slots_plainly(&self, range: std::ops::Range<usize>) -> Option<Span> {
        let items = self.raw.items.range(range);
        span_of(fold_raw(items.copied()), self.scale)
    }

    /// The peak in each of `cells` cells of `bucket` seconds, oldest first, the last the cell
    /// that holds `now`. Cells begin at multiples of `bucket` in unix time, so a row of them
    /// moves along once a bucket, not at every sample, and the last changes only when a new
    /// peak arrives.
    pub(crate) fn cell_peaks(&self, now: f64, cells: usize, bucket: f64) -> Vec<Option<u64>> {
        if cells == 0 || !now.is_finite() || bucket.is_nan() || bucket <= 0.0 {
            return Vec::new();
        }
        let end = ((now / bucket).floor() + 1.0) * bucket;
        self.chunks(end, bucket * cells as f64, cells)
            .into_iter()
            .map(|c| c.map(|c| c.max))
            .collect()
    }

    /// The points of a tier (0 raw, 1 and 2 folded) from `since` on, with their times, oldest
    /// first: what a chart of that zoom draws.
    pub(crate) fn points(&self, tier: usize, since: f64) -> Vec<(f64, Option<Span>)> {
        match tier {
            0 => self
                .raw()
                .filter(|(t, _)| *t >= since)
                .map(|(t, v)| {
                    (
                        t,
                        v.map(|x| Span {
                            min: x,
                            max: x,
                            last: x,
                        }),
                    )
                })
                .collect(),
            1 | 2 => {
                let (ring, points) = if tier == 1 {
                    (&self.tier_1, FOLD_1)
                } else {
                    (&self.tier_2, FOLD_1 * FOLD_2)
                };
                ring.iter()
                    .map(|(p, v)| (self.time_of((p + 1) * points - 1), span_of(v, self.scale)))
                    .filter(|(t, _)| *t >= since)
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    /// Bytes this series holds: itself, and its rings' memory as allocated.
    #[inline]
    pub(crate) fn footprint(&self) -> usize {
        std::mem::size_of::<Self>() + self.raw.bytes() + self.tier_1.bytes() + self.tier_2.bytes()
    }

    /// Bytes of its rings' blocks that `other` does not share with it.
    pub(crate) fn bytes_beside(&self, other: &Series) -> usize {
        self.raw.bytes_beside(&other.raw)
            + self.tier_1.bytes_beside(&other.tier_1)
            + self.tier_2.bytes_beside(&other.tier_2)
    }

    /// The most it holds with every ring full (each ring's blocks, the first partly let go).
    #[cfg(test)]
    pub(crate) fn full_footprint(&self) -> usize {
        std::mem::size_of::<Self>()
            + Blocks::<u32>::most_bytes(self.raw.capacity as usize)
            + Blocks::<[u32; 3]>::most_bytes(self.tier_1.capacity as usize)
            + Blocks::<[u32; 3]>::most_bytes(self.tier_2.capacity as usize)
    }
}

#[cfg(test)]
#[path = "series_tests.rs"]
mod tests;

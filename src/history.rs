//! Bounded rolling history per series, with coarser tiers for long windows.
//!
//! Each series keeps the last `RAW_CAPACITY` samples as taken, and two coarser tiers that
//! fold `FOLD` points of the tier below into one (keeping min, max and last, so a peak never
//! disappears when history is coarsened). Memory per series is fixed whatever the uptime.

use std::collections::{HashMap, VecDeque};

/// Points kept at each tier.
pub const RAW_CAPACITY: usize = 600;
const TIER_CAPACITY: usize = 720;
/// How many points of a tier make one point of the next.
pub const FOLD: usize = 10;

/// One point of a series: a known value, or a gap (unknown at that instant).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub time: f64,
    /// Smallest, largest and last known value over the point's span; `None` for a gap.
    pub span: Option<Span>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub min: u64,
    pub max: u64,
    pub last: u64,
}

impl Span {
    fn of(value: u64) -> Self {
        Span {
            min: value,
            max: value,
            last: value,
        }
    }

    fn merge(self, later: Span) -> Span {
        Span {
            min: self.min.min(later.min),
            max: self.max.max(later.max),
            last: later.last,
        }
    }
}

#[derive(Debug, Clone)]
struct Tier {
    points: VecDeque<Point>,
    capacity: usize,
    /// Points of the tier below not yet folded into one of this tier.
    pending: usize,
}

impl Tier {
    fn new(capacity: usize) -> Self {
        // Write every slot once now, then empty the ring: its pages are resident from the
        // start, so the monitor's resident memory is flat over a long run instead of creeping
        // up for hours while the coarse tiers fill.
        let blank = Point {
            time: 0.0,
            span: None,
        };
        let mut points = VecDeque::with_capacity(capacity);
        points.extend(std::iter::repeat_n(blank, capacity));
        points.clear();
        Tier {
            points,
            capacity,
            pending: 0,
        }
    }

    fn push(&mut self, point: Point) {
        if self.points.len() == self.capacity {
            self.points.pop_front();
        }
        self.points.push_back(point);
    }
}

/// One series: raw points and two coarser tiers.
#[derive(Debug, Clone)]
pub struct Series {
    tiers: [Tier; 3],
}

impl Default for Series {
    fn default() -> Self {
        Series {
            tiers: [
                Tier::new(RAW_CAPACITY),
                Tier::new(TIER_CAPACITY),
                Tier::new(TIER_CAPACITY),
            ],
        }
    }
}

impl Series {
    /// Empties every tier, keeping the memory.
    fn clear(&mut self) {
        for tier in &mut self.tiers {
            tier.points.clear();
            tier.pending = 0;
        }
    }

    /// Appends a sample; `None` records a gap.
    pub fn push(&mut self, time: f64, value: Option<u64>) {
        let mut point = Point {
            time,
            span: value.map(Span::of),
        };
        self.tiers[0].push(point);
        for level in 1..self.tiers.len() {
            let below = &mut self.tiers[level - 1];
            below.pending += 1;
            if below.pending < FOLD {
                return;
            }
            below.pending = 0;
            point = fold(below.points.iter().rev().take(FOLD).rev());
            self.tiers[level].push(point);
        }
    }

    /// The raw points, oldest first.
    pub fn raw(&self) -> impl DoubleEndedIterator<Item = &Point> + ExactSizeIterator {
        self.tiers[0].points.iter()
    }

    /// The points of tier `level` (0 raw, 1 and 2 folded), oldest first.
    pub fn tier(&self, level: usize) -> impl DoubleEndedIterator<Item = &Point> {
        self.tiers[level.min(2)].points.iter()
    }

    /// The latest known value.
    pub fn last(&self) -> Option<u64> {
        self.tiers[0]
            .points
            .back()
            .and_then(|p| p.span)
            .map(|s| s.last)
    }

    /// The last `n` raw values (gaps as `None`), oldest first.
    pub fn recent(&self, n: usize) -> Vec<Option<u64>> {
        let points = &self.tiers[0].points;
        points
            .iter()
            .skip(points.len().saturating_sub(n))
            .map(|p| p.span.map(|s| s.last))
            .collect()
    }

    /// The largest known value over the raw window, with the window's length in seconds.
    pub fn peak(&self) -> Option<(u64, f64)> {
        let points = &self.tiers[0].points;
        let max = points.iter().filter_map(|p| p.span).map(|s| s.max).max()?;
        let window = match (points.front(), points.back()) {
            (Some(a), Some(b)) => b.time - a.time,
            _ => 0.0,
        };
        Some((max, window))
    }
}

fn fold<'a>(points: impl Iterator<Item = &'a Point>) -> Point {
    let mut time = 0.0;
    let mut span: Option<Span> = None;
    for p in points {
        time = p.time;
        span = match (span, p.span) {
            (Some(a), Some(b)) => Some(a.merge(b)),
            (a, b) => a.or(b),
        };
    }
    Point { time, span }
}

/// What a series measures.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SeriesKey {
    /// Occupied bytes (total - free) of a GPU or MIG instance.
    DeviceUsed(String),
    /// Live tensor bytes on a GPU or MIG instance, over the fed processes.
    DeviceLive(String),
    /// NVML used bytes of a process on a device: (pid, start time, device uuid).
    ProcessUsed(u32, Option<u64>, String),
    /// Live tensor bytes of a fed process on a device.
    ProcessLive(u32, Option<u64>, String),
}

/// Every series the monitor keeps. Series not updated for `FORGET_AFTER` samples are dropped,
/// so processes that come and go do not grow memory without bound.
#[derive(Debug, Default, Clone)]
pub struct History {
    series: HashMap<SeriesKey, (Series, u64)>,
    generation: u64,
    /// Rings of forgotten series, emptied and kept for the next new series: processes that
    /// come and go reuse the same memory instead of allocating and freeing it.
    spare: Vec<Series>,
}

const FORGET_AFTER: u64 = RAW_CAPACITY as u64;
/// Emptied rings kept for reuse at most.
const SPARE_SERIES: usize = 64;

impl History {
    /// Starts recording one instant; call [`History::record`] for each series after.
    pub fn begin(&mut self) {
        self.generation += 1;
        if self.generation.is_multiple_of(64) {
            let now = self.generation;
            let stale: Vec<SeriesKey> = self
                .series
                .iter()
                .filter(|(_, (_, seen))| now.saturating_sub(*seen) > FORGET_AFTER)
                .map(|(key, _)| key.clone())
                .collect();
            for key in stale {
                if let Some((mut series, _)) = self.series.remove(&key) {
                    if self.spare.len() < SPARE_SERIES {
                        series.clear();
                        self.spare.push(series);
                    }
                }
            }
        }
    }

    pub fn record(&mut self, key: SeriesKey, time: f64, value: Option<u64>) {
        let spare = &mut self.spare;
        let entry = self
            .series
            .entry(key)
            .or_insert_with(|| (spare.pop().unwrap_or_default(), 0));
        entry.0.push(time, value);
        entry.1 = self.generation;
    }

    pub fn get(&self, key: &SeriesKey) -> Option<&Series> {
        self.series.get(key).map(|(s, _)| s)
    }

    pub fn len(&self) -> usize {
        self.series.len()
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_tier_is_bounded_and_keeps_the_newest() {
        let mut s = Series::default();
        for i in 0..(RAW_CAPACITY as u64 + 50) {
            s.push(i as f64, Some(i));
        }
        assert_eq!(s.raw().len(), RAW_CAPACITY);
        assert_eq!(
            s.raw().next().and_then(|p| p.span).map(|x| x.last),
            Some(50)
        );
        assert_eq!(s.last(), Some(RAW_CAPACITY as u64 + 49));
    }

    #[test]
    fn folding_keeps_peaks_and_gaps_do_not_become_zero() {
        let mut s = Series::default();
        for i in 0..FOLD as u64 {
            let value = if i == 3 {
                Some(900)
            } else if i == 5 {
                None
            } else {
                Some(10 + i)
            };
            s.push(i as f64, value);
        }
        let folded: Vec<&Point> = s.tier(1).collect();
        assert_eq!(folded.len(), 1);
        let span = folded[0].span.expect("known values");
        assert_eq!(span.max, 900);
        assert_eq!(span.min, 10);
        assert_eq!(span.last, 10 + FOLD as u64 - 1);
        assert_eq!(s.recent(5)[0], None, "a gap stays a gap");
    }

    #[test]
    fn history_forgets_series_that_stopped() {
        let mut h = History::default();
        h.begin();
        h.record(SeriesKey::DeviceUsed("gone".into()), 0.0, Some(1));
        for i in 0..(FORGET_AFTER + 70) {
            h.begin();
            h.record(SeriesKey::DeviceUsed("kept".into()), i as f64, Some(1));
        }
        assert!(h.get(&SeriesKey::DeviceUsed("gone".into())).is_none());
        assert!(h.get(&SeriesKey::DeviceUsed("kept".into())).is_some());
        // A new series reuses the forgotten one's rings, and starts empty.
        assert_eq!(h.spare.len(), 1);
        h.record(SeriesKey::DeviceUsed("new".into()), 0.0, Some(5));
        assert!(h.spare.is_empty());
        let new = h
            .get(&SeriesKey::DeviceUsed("new".into()))
            .expect("new series");
        assert_eq!(new.recent(10), vec![Some(5)]);
        assert_eq!(new.tier(1).count(), 0);
    }
}

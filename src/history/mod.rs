//! Bounded rolling history: a series per device for every layer and its occupied bytes, and
//! per process for NVML's used, the allocator's figures and counters, and SM utilisation.
//! Full resolution for the last 15 minutes, folded tiers (min, max, last) to 24 hours.
//! Memory per series is fixed whatever the uptime ([`Series::footprint`]). A process that
//! reports training steps also has its step-end readings, by step ([`Steps`]).

mod series;
mod steps;

pub use series::{Scale, Series, Span, FOLD_1, FOLD_2, RAW_SECS};
pub use steps::{StepPoint, Steps, STEP_POINTS};

use crate::layers::Layer;
use std::collections::HashMap;

/// A process on a device, across samples: the start time tells a reused PID apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessId {
    pub pid: u32,
    pub start_time: Option<u64>,
    pub device_uuid: String,
}

impl ProcessId {
    /// The process a sample lists, on its device.
    pub fn of(process: &crate::sample::ProcessSample) -> Self {
        ProcessId {
            pid: process.pid,
            start_time: process.start_time,
            device_uuid: process.device_uuid.clone(),
        }
    }
}

/// What a series measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// Bytes occupied on a device (total − free); NVML's used of a process.
    Used,
    /// One layer of a device's partition.
    Layer(Layer),
    /// A fed process's allocator: live tensor bytes.
    Allocated,
    Reserved,
    InactiveSplit,
    /// NVML used − reserved − context.
    OutsidePool,
    /// Counters: allocation retries, OOMs.
    Retries,
    Ooms,
    /// SM utilisation, percent.
    Sm,
}

impl Metric {
    fn scale(self) -> Scale {
        match self {
            Metric::Retries | Metric::Ooms | Metric::Sm => Scale::Unit,
            _ => Scale::Kib,
        }
    }
}

/// A series' name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SeriesKey {
    Device(String, Metric),
    Process(ProcessId, Metric),
}

impl SeriesKey {
    pub fn device(uuid: &str, metric: Metric) -> Self {
        SeriesKey::Device(uuid.to_string(), metric)
    }

    pub fn process(pid: u32, start_time: Option<u64>, device_uuid: &str, metric: Metric) -> Self {
        SeriesKey::Process(
            ProcessId {
                pid,
                start_time,
                device_uuid: device_uuid.to_string(),
            },
            metric,
        )
    }

    /// What the series measures.
    pub fn metric(&self) -> Metric {
        match self {
            SeriesKey::Device(_, m) | SeriesKey::Process(_, m) => *m,
        }
    }
}

/// Every series the monitor keeps. Series not updated for [`FORGET_AFTER`] samples are
/// dropped, so processes that come and go do not grow memory without bound.
#[derive(Debug, Default, Clone)]
pub struct History {
    series: HashMap<SeriesKey, (Series, u64)>,
    generation: u64,
    /// Slot length and time of slot 0, set by the first sample.
    clock: Option<(f64, f64)>,
    /// Rings of forgotten series, emptied and kept for the next new series: processes that
    /// come and go reuse the same memory instead of allocating and freeing it.
    spare: Vec<Series>,
    /// Step-end readings of the processes that report steps, with the generation last
    /// written.
    steps: HashMap<ProcessId, (Steps, u64)>,
}

/// Samples without an update after which a series is forgotten: its process has gone.
pub const FORGET_AFTER: u64 = 900;
/// Emptied series kept for reuse at most.
const SPARE_SERIES: usize = 64;

impl History {
    /// Starts recording one instant sampled every `step` seconds; call [`History::record`]
    /// for each series after.
    pub fn begin(&mut self, time: f64, step: f64) {
        if self.clock.is_none() && time.is_finite() {
            let step = if step.is_finite() && step > 0.0 {
                step
            } else {
                1.0
            };
            self.clock = Some((step, time));
        }
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
                if let Some((series, _)) = self.series.remove(&key) {
                    if self.spare.len() < SPARE_SERIES {
                        self.spare.push(series);
                    }
                }
            }
            self.steps
                .retain(|_, (_, seen)| now.saturating_sub(*seen) <= FORGET_AFTER);
        }
    }

    pub fn record(&mut self, key: SeriesKey, time: f64, value: Option<u64>) {
        let (step, origin) = self.clock.unwrap_or((1.0, time));
        let scale = key.metric().scale();
        let spare = &mut self.spare;
        let entry = self.series.entry(key).or_insert_with(|| {
            let series = match spare.pop() {
                Some(mut s) => {
                    s.reset(scale, step, origin);
                    s
                }
                None => Series::new(scale, step, origin),
            };
            (series, 0)
        });
        entry.0.push(time, value);
        entry.1 = self.generation;
    }

    /// Records one step-end reading of a process.
    pub fn record_step(&mut self, id: &ProcessId, point: StepPoint) {
        let generation = self.generation;
        match self.steps.get_mut(id) {
            Some((steps, seen)) => {
                steps.push(point);
                *seen = generation;
            }
            None => {
                let mut steps = Steps::default();
                steps.push(point);
                self.steps.insert(id.clone(), (steps, generation));
            }
        }
    }

    /// The step-end readings of a process, where it reports steps.
    pub fn steps(&self, id: &ProcessId) -> Option<&Steps> {
        self.steps.get(id).map(|(s, _)| s)
    }

    pub fn get(&self, key: &SeriesKey) -> Option<&Series> {
        self.series.get(key).map(|(s, _)| s)
    }

    /// Every series of one process on one device.
    pub fn of_process<'a>(
        &'a self,
        id: &'a ProcessId,
    ) -> impl Iterator<Item = (Metric, &'a Series)> + 'a {
        self.series.iter().filter_map(move |(k, (s, _))| match k {
            SeriesKey::Process(p, m) if p == id => Some((*m, s)),
            _ => None,
        })
    }

    /// Every series, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&SeriesKey, &Series)> {
        self.series.iter().map(|(k, (s, _))| (k, s))
    }

    pub fn len(&self) -> usize {
        self.series.len()
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// Bytes the series hold at full capacity, spares included.
    pub fn footprint(&self) -> usize {
        self.series
            .values()
            .map(|(s, _)| s.footprint())
            .chain(self.spare.iter().map(Series::footprint))
            .chain(self.steps.values().map(|(s, _)| s.footprint()))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_forgets_series_that_stopped_and_reuses_their_rings() {
        let mut h = History::default();
        h.begin(0.0, 1.0);
        let gone = SeriesKey::device("gone", Metric::Used);
        let kept = SeriesKey::device("kept", Metric::Used);
        h.record(gone.clone(), 0.0, Some(1));
        for i in 0..(FORGET_AFTER + 70) {
            h.begin(i as f64, 1.0);
            h.record(kept.clone(), i as f64, Some(1));
        }
        assert!(h.get(&gone).is_none());
        assert!(h.get(&kept).is_some());
        assert_eq!(h.spare.len(), 1);
        let new = SeriesKey::process(7, Some(1), "GPU-0", Metric::Allocated);
        h.record(new.clone(), 2000.0, Some(5 << 20));
        assert!(h.spare.is_empty());
        let series = h.get(&new).expect("new series");
        assert_eq!(series.recent(10), vec![Some(5 << 20)], "reused, and empty");
    }
}

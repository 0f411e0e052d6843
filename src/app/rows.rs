//! Process table rows: a process sample with its layers and trend, sorted.

use crate::accounting::ProcessAccount;
use crate::history::{History, Metric, SeriesKey};
use crate::pipeline::Observed;
use crate::sample::ProcessSample;

/// What the process table is ordered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Used,
    Live,
    Fragmented,
    Cached,
    Pid,
    Device,
}

impl SortKey {
    pub const CYCLE: [SortKey; 6] = [
        SortKey::Used,
        SortKey::Live,
        SortKey::Fragmented,
        SortKey::Cached,
        SortKey::Pid,
        SortKey::Device,
    ];

    pub fn next(self) -> SortKey {
        let i = Self::CYCLE.iter().position(|&k| k == self).unwrap_or(0);
        Self::CYCLE[(i + 1) % Self::CYCLE.len()]
    }

    pub fn label(self) -> &'static str {
        match self {
            SortKey::Used => "used",
            SortKey::Live => "live",
            SortKey::Fragmented => "fragmented",
            SortKey::Cached => "cached",
            SortKey::Pid => "pid",
            SortKey::Device => "gpu",
        }
    }
}

/// One row of the process table.
#[derive(Debug, Clone)]
pub struct ProcessRow<'a> {
    pub process: &'a ProcessSample,
    pub account: &'a ProcessAccount,
    /// Where it runs, for the GPU column: `0`, `3:3g.40gb`.
    pub place: String,
    /// Index of its GPU, for ordering by device.
    pub gpu_index: u32,
    /// NVML used: the peak of each of the last [`TREND_CELLS`] minutes, oldest first.
    pub trend: Vec<Option<u64>>,
    /// The climb flagged for this process on this device, if any: its rate and window
    /// replace the plain trend.
    pub climb: Option<super::ClimbNote>,
}

/// The table's trend: this many cells, each the peak of [`TREND_BUCKET`] seconds.
pub const TREND_CELLS: usize = 10;
pub const TREND_BUCKET: f64 = 60.0;

pub fn process_rows<'a>(
    observed: &'a Observed,
    history: &History,
    sort: SortKey,
) -> Vec<ProcessRow<'a>> {
    let sample = &observed.sample;
    let mut rows: Vec<ProcessRow<'a>> = sample
        .processes
        .iter()
        .zip(&observed.account.processes)
        .map(|(process, account)| {
            let (place, gpu_index) = match sample.locate(&process.device_uuid) {
                Some((gpu, None)) => (gpu.index.to_string(), gpu.index),
                Some((gpu, Some(m))) => (
                    format!("{}:{}", gpu.index, m.profile.as_deref().unwrap_or("mig")),
                    gpu.index,
                ),
                None => ("?".into(), u32::MAX),
            };
            let key = SeriesKey::process(
                process.pid,
                process.start_time,
                &process.device_uuid,
                Metric::Used,
            );
            let trend = history
                .get(&key)
                .map(|s| s.cell_peaks(sample.time, TREND_CELLS, TREND_BUCKET))
                .unwrap_or_default();
            let climb = super::climbs(&observed.findings)
                .find(|(f, _)| {
                    f.pid == Some(process.pid)
                        && f.device_uuid.as_deref() == Some(process.device_uuid.as_str())
                })
                .map(|(_, note)| note);
            ProcessRow {
                process,
                account,
                place,
                gpu_index,
                trend,
                climb,
            }
        })
        .collect();
    let desc = |v: Option<u64>| std::cmp::Reverse(v);
    match sort {
        SortKey::Used => rows.sort_by_key(|r| (desc(r.process.used), r.process.pid)),
        SortKey::Live => rows.sort_by_key(|r| (desc(r.account.layers.live), r.process.pid)),
        SortKey::Fragmented => {
            rows.sort_by_key(|r| (desc(r.account.layers.fragmented), r.process.pid))
        }
        SortKey::Cached => rows.sort_by_key(|r| (desc(r.account.layers.cached), r.process.pid)),
        SortKey::Pid => rows.sort_by_key(|r| r.process.pid),
        SortKey::Device => rows.sort_by(|a, b| {
            (a.gpu_index, &a.place, desc(a.process.used), a.process.pid).cmp(&(
                b.gpu_index,
                &b.place,
                desc(b.process.used),
                b.process.pid,
            ))
        }),
    }
    rows
}

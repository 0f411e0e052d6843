//! Process table rows: a process sample with its layers and trend, sorted.

use super::filter::{Subject, Term};
use crate::accounting::{GroupBy, ProcessAccount};
use crate::history::{History, KeyRef, Metric};
use crate::pipeline::Observed;
use crate::present::sort::{SortKey, SortMemory};
use crate::sample::ProcessSample;
use std::cmp::Ordering;

/// The process table: its order, its grouping and what is selected in it.
#[derive(Debug)]
pub struct ProcessTable {
    pub(crate) sort: SortKey,
    /// The other way round from the key's own (`S`): smallest first for amounts.
    pub(crate) sort_reversed: bool,
    /// The settled values the rows are ordered by, so that they do not swap at every sample.
    pub(crate) sort_memory: SortMemory,
    /// Selected process, by (pid, device uuid), so it stays selected as rows move.
    pub(crate) selected: Option<(u32, String)>,
    /// Until the user moves, the selection stays on the top row, whatever comes there.
    pub(crate) selection_moved: bool,
    /// How the process table is grouped (`g`).
    pub(crate) group_by: GroupBy,
    /// The selected group row, by (key, device uuid), when a group rather than a process is
    /// selected (then `selected` is `None`).
    pub(crate) selected_group: Option<(String, String)>,
    /// `/`: which processes the table shows (every one when off).
    pub(crate) filter: super::filter::Filter,
}

impl Default for ProcessTable {
    fn default() -> Self {
        ProcessTable {
            sort: SortKey::Used,
            sort_reversed: false,
            sort_memory: SortMemory::default(),
            selected: None,
            selection_moved: false,
            group_by: GroupBy::None,
            selected_group: None,
            filter: super::filter::Filter::default(),
        }
    }
}

/// Two values in order, the largest first when `down`; unknown last whichever way.
fn by_value(a: Option<f64>, b: Option<f64>, down: bool) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) if down => b.total_cmp(&a),
        (Some(a), Some(b)) => a.total_cmp(&b),
        (a, b) => b.is_some().cmp(&a.is_some()),
    }
}

/// One row of the process table.
#[derive(Debug, Clone)]
pub(crate) struct ProcessRow<'a> {
    pub(crate) process: &'a ProcessSample,
    pub(crate) account: &'a ProcessAccount,
    /// Where it runs, for the GPU column: `0`, `3:3g.40gb`.
    pub(crate) place: String,
    /// Index of its GPU, for ordering by device.
    pub(crate) gpu_index: u32,
    /// The climb flagged for this process on this device, if any: its rate and window
    /// replace the plain trend.
    pub(crate) climb: Option<super::ClimbNote>,
}

/// The table's trend: this many cells, each the peak of [`TREND_BUCKET`] seconds.
pub(crate) const TREND_CELLS: usize = 10;
pub(crate) const TREND_BUCKET: f64 = 60.0;

/// The rows of `observed` that hold every term of `filter`, ordered by `sort` (the other way
/// when `reversed`) through the settled values of `order`.
pub(crate) fn process_rows<'a>(
    observed: &'a Observed,
    (sort, reversed): (SortKey, bool),
    order: &SortMemory,
    filter: &[Term],
) -> Vec<ProcessRow<'a>> {
    let sample = &observed.sample;
    let mut rows: Vec<ProcessRow<'a>> = sample
        .processes
        .iter()
        .zip(&observed.account.processes)
        .filter_map(|(process, account)| {
            let (place, gpu_index) = match sample.locate(&process.device_uuid) {
                Some((gpu, None)) => (gpu.index.to_string(), gpu.index),
                Some((gpu, Some(m))) => (
                    format!("{}:{}", gpu.index, m.profile.as_deref().unwrap_or("mig")),
                    gpu.index,
                ),
                None => ("?".into(), u32::MAX),
            };
            if !filter.is_empty() && !Subject::of(sample, process, &place).matches_all(filter) {
                return None;
            }
            let climb = super::climbs(&observed.findings)
                .find(|(f, _)| {
                    f.pid == Some(process.pid)
                        && f.device_uuid.as_deref() == Some(process.device_uuid.as_str())
                })
                .map(|(_, note)| note);
            Some(ProcessRow {
                process,
                account,
                place,
                gpu_index,
                climb,
            })
        })
        .collect();
    let down = sort.descending() != reversed;
    // Each row's settled value is looked up once, not at every comparison.
    let settled = |rows: Vec<ProcessRow<'a>>, key: SortKey| -> Vec<(Option<f64>, ProcessRow<'a>)> {
        rows.into_iter()
            .map(|r| (order.settled(r.process.pid, &r.process.device_uuid, key), r))
            .collect()
    };
    // Ties (and equal settled values) by pid.
    match sort {
        SortKey::Pid if down => rows.sort_by_key(|r| std::cmp::Reverse(r.process.pid)),
        SortKey::Pid => rows.sort_by_key(|r| r.process.pid),
        SortKey::Device => {
            let mut keyed = settled(rows, SortKey::Used);
            keyed.sort_by(|(va, a), (vb, b)| {
                let place = (a.gpu_index, &a.place).cmp(&(b.gpu_index, &b.place));
                let place = if down { place.reverse() } else { place };
                // Within a device, the largest first.
                place
                    .then_with(|| by_value(*va, *vb, true))
                    .then(a.process.pid.cmp(&b.process.pid))
            });
            rows = keyed.into_iter().map(|(_, r)| r).collect();
        }
        key => {
            let mut keyed = settled(rows, key);
            keyed.sort_by(|(va, a), (vb, b)| {
                by_value(*va, *vb, down).then(a.process.pid.cmp(&b.process.pid))
            });
            rows = keyed.into_iter().map(|(_, r)| r).collect();
        }
    }
    rows
}

/// NVML used of `process` in `history`: the peak of each of the last [`TREND_CELLS`] minutes
/// before `time`, oldest first. Worked out for the rows on screen only.
pub(crate) fn trend(history: &History, process: &ProcessSample, time: f64) -> Vec<Option<u64>> {
    history
        .get(&KeyRef::of(process, Metric::Used))
        .map(|s| s.cell_peaks(time, TREND_CELLS, TREND_BUCKET))
        .unwrap_or_default()
}

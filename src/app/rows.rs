//! Process table rows: a process sample with its layers and trend, sorted.
//!
//! The rows are worked out once per sample, sort, reversal and filter ([`RowCache`]), as
//! indices into the sample shown, and lent out as [`ProcessRow`]s whenever asked: the key
//! map, the selection and the drawing of one frame ask several times.

use super::filter::{Subject, Term};
use crate::accounting::{GroupBy, ProcessAccount};
use crate::history::{History, KeyRef, Metric};
use crate::pipeline::Observed;
use crate::present::sort::{SortKey, SortMemory};
use crate::sample::{NodeSample, ProcessSample};
use std::cell::RefCell;
use std::cmp::Ordering;
use std::fmt;

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
    /// Counts the samples shown: `State::show` moves it on with each, so the rows of the
    /// last are never lent out for the next.
    pub(crate) samples_shown: u64,
    /// The rows of the sample shown, in order, as last worked out.
    pub(crate) cache: RefCell<RowCache>,
    /// The groups (`g`) of the sample shown, the largest used first, as last worked out: for
    /// the sample (of `samples_shown`) and the grouping they were.
    pub(crate) groups: RefCell<Option<(u64, GroupBy, Vec<crate::accounting::GroupRow>)>>,
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
            samples_shown: 0,
            cache: RefCell::new(RowCache::default()),
            groups: RefCell::new(None),
        }
    }
}

/// What the rows depend on beside the sample's own contents: which sample, the order and the
/// filter. The selection and the grouping do not change them.
#[derive(Debug, Clone, PartialEq)]
struct RowsKey {
    sample: u64,
    sort: SortKey,
    reversed: bool,
    terms: Vec<Term>,
}

/// The rows last worked out, and what they were worked out for.
#[derive(Debug, Default)]
pub(crate) struct RowCache {
    key: Option<RowsKey>,
    rows: Vec<RowAt>,
}

/// One row, as indices into the sample (no borrow of it, so it can be kept).
#[derive(Debug, Clone, Copy)]
struct RowAt {
    /// Into the sample's processes (and the account's, which go with them).
    index: usize,
    place: PlaceAt,
    /// Into the findings: the climb flagged for this process on this device.
    climb: Option<usize>,
}

/// Where a process runs, as indices into the sample's GPUs and their MIG instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PlaceAt {
    Gpu(usize),
    Mig(usize, usize),
    Unplaced,
}

impl PlaceAt {
    /// Where the device `uuid` is in `sample`.
    fn of(sample: &NodeSample, uuid: &str) -> PlaceAt {
        for (g, gpu) in sample.gpus.iter().enumerate() {
            if gpu.uuid == uuid {
                return PlaceAt::Gpu(g);
            }
            if let Some(m) = gpu.mig.iter().position(|m| m.uuid == uuid) {
                return PlaceAt::Mig(g, m);
            }
        }
        PlaceAt::Unplaced
    }

    fn resolve(self, sample: &NodeSample) -> Place<'_> {
        let gpu = |g: usize| sample.gpus.get(g);
        match self {
            PlaceAt::Gpu(g) => gpu(g).map_or(Place::Unplaced, |gpu| Place::Gpu(gpu.index)),
            PlaceAt::Mig(g, m) => gpu(g)
                .and_then(|gpu| {
                    let mig = gpu.mig.get(m)?;
                    Some(Place::Mig(
                        gpu.index,
                        mig.profile.as_deref().unwrap_or("mig"),
                    ))
                })
                .unwrap_or(Place::Unplaced),
            PlaceAt::Unplaced => Place::Unplaced,
        }
    }
}

/// Where a process runs, as the GPU column says it: `0`, `3:3g.40gb`, `?` on no device the
/// sample lists. Written out only where a row is drawn or matched by a filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place<'a> {
    Gpu(u32),
    /// A MIG instance of the GPU of this index, by its profile (`mig` where it has none).
    Mig(u32, &'a str),
    Unplaced,
}

impl Place<'_> {
    /// The order of the GPU column: by GPU index, the GPU itself before its instances, these
    /// by profile, as their text (`0` < `0:1g.10gb` < `0:3g.40gb` < `1`) orders them.
    fn cmp_place(self, other: Place<'_>) -> Ordering {
        fn key<'p>(p: Place<'p>) -> (u32, u8, &'p str) {
            match p {
                Place::Gpu(i) => (i, 0, ""),
                Place::Mig(i, profile) => (i, 1, profile),
                Place::Unplaced => (u32::MAX, 2, ""),
            }
        }
        key(self).cmp(&key(other))
    }
}

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Gpu(index) => write!(f, "{index}"),
            Place::Mig(index, profile) => write!(f, "{index}:{profile}"),
            Place::Unplaced => f.write_str("?"),
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
    pub(crate) place: Place<'a>,
    /// The climb flagged for this process on this device, if any: its rate and window
    /// replace the plain trend.
    pub(crate) climb: Option<super::ClimbNote>,
}

/// The table's trend: this many cells, each the peak of [`TREND_BUCKET`] seconds.
pub(crate) const TREND_CELLS: usize = 10;
pub(crate) const TREND_BUCKET: f64 = 60.0;

/// The rows of `observed` that hold every term of `filter`, ordered by `sort` (the other way
/// when `reversed`) through the settled values of `order`, worked out afresh.
#[cfg(test)]
pub(crate) fn process_rows<'a>(
    observed: &'a Observed,
    (sort, reversed): (SortKey, bool),
    order: &SortMemory,
    filter: &[Term],
) -> Vec<ProcessRow<'a>> {
    ordered(observed, (sort, reversed), order, filter)
        .into_iter()
        .filter_map(|at| at.lend(observed))
        .collect()
}

/// The rows of `observed` that hold every term of `filter`, in order, as indices.
fn ordered(
    observed: &Observed,
    (sort, reversed): (SortKey, bool),
    order: &SortMemory,
    filter: &[Term],
) -> Vec<RowAt> {
    let sample = &observed.sample;
    // The climbs, found once: by (pid, device), the first flagged for each.
    let mut climbs: Vec<(u32, &str, usize)> = observed
        .findings
        .iter()
        .enumerate()
        .filter(|(_, f)| super::ClimbNote::of(f).is_some())
        .filter_map(|(at, f)| Some((f.pid?, f.device_uuid.as_deref()?, at)))
        .collect();
    // Stable: among equal keys the first finding stays first.
    climbs.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let climb_of = |process: &ProcessSample| {
        let key = (process.pid, &*process.device_uuid);
        let at = climbs.partition_point(|c| (c.0, c.1) < key);
        climbs.get(at).filter(|c| (c.0, c.1) == key).map(|c| c.2)
    };
    // A node lists a device's processes together: the last device's place is kept.
    let mut last: Option<(&str, PlaceAt)> = None;
    let mut rows: Vec<RowAt> = Vec::with_capacity(sample.processes.len());
    for (index, process) in sample.processes.iter().enumerate() {
        let place = match last {
            Some((uuid, place)) if *uuid == *process.device_uuid => place,
            _ => {
                let place = PlaceAt::of(sample, &process.device_uuid);
                last = Some((&process.device_uuid, place));
                place
            }
        };
        if !filter.is_empty() {
            let text = place.resolve(sample).to_string();
            if !Subject::of(sample, process, &text).matches_all(filter) {
                continue;
            }
        }
        rows.push(RowAt {
            index,
            place,
            climb: climb_of(process),
        });
    }
    let pid = |r: &RowAt| sample.processes.get(r.index).map_or(0, |p| p.pid);
    let down = sort.descending() != reversed;
    // Each row's settled value is looked up once, not at every comparison.
    let settled = |rows: Vec<RowAt>, key: SortKey| -> Vec<(Option<f64>, RowAt)> {
        let mut settled = order.settled_each(key);
        rows.into_iter()
            .map(|r| {
                let value = sample
                    .processes
                    .get(r.index)
                    .and_then(|p| settled(p.pid, &p.device_uuid));
                (value, r)
            })
            .collect()
    };
    // Ties (and equal settled values) by pid.
    match sort {
        SortKey::Pid if down => rows.sort_by_key(|r| std::cmp::Reverse(pid(r))),
        SortKey::Pid => rows.sort_by_key(pid),
        SortKey::Device => {
            let mut keyed = settled(rows, SortKey::Used);
            keyed.sort_by(|(va, a), (vb, b)| {
                let place = a.place.resolve(sample).cmp_place(b.place.resolve(sample));
                let place = if down { place.reverse() } else { place };
                // Within a device, the largest first.
                place
                    .then_with(|| by_value(*va, *vb, true))
                    .then(pid(a).cmp(&pid(b)))
            });
            rows = keyed.into_iter().map(|(_, r)| r).collect();
        }
        key => {
            let mut keyed = settled(rows, key);
            keyed.sort_by(|(va, a), (vb, b)| by_value(*va, *vb, down).then(pid(a).cmp(&pid(b))));
            rows = keyed.into_iter().map(|(_, r)| r).collect();
        }
    }
    rows
}

impl RowAt {
    /// The row itself, borrowing from `observed`, the sample it was worked out for.
    fn lend(self, observed: &Observed) -> Option<ProcessRow<'_>> {
        Some(ProcessRow {
            process: observed.sample.processes.get(self.index)?,
            account: observed.account.processes.get(self.index)?,
            place: self.place.resolve(&observed.sample),
            climb: self
                .climb
                .and_then(|at| observed.findings.get(at))
                .and_then(super::ClimbNote::of),
        })
    }
}

impl ProcessTable {
    /// The rows of `observed`, the sample shown, in order: worked out again only when the
    /// sample, the order or the filter changed since they last were.
    pub(crate) fn rows<'a>(&self, observed: &'a Observed) -> Vec<ProcessRow<'a>> {
        self.with_rows(observed, |rows| {
            rows.iter().filter_map(|at| at.lend(observed)).collect()
        })
    }

    /// The first row's process, and whether the process `selected` is among the rows:
    /// what keeping the selection needs, without lending every row.
    pub(crate) fn first_and_holding(
        &self,
        observed: &Observed,
        selected: Option<&(u32, String)>,
    ) -> (Option<(u32, String)>, bool) {
        let process = |at: &RowAt| observed.sample.processes.get(at.index);
        self.with_rows(observed, |rows| {
            let first = rows
                .first()
                .and_then(process)
                .map(|p| (p.pid, p.device_uuid.to_string()));
            let holding = selected.is_some_and(|(pid, uuid)| {
                rows.iter()
                    .filter_map(process)
                    .any(|p| p.pid == *pid && *p.device_uuid == **uuid)
            });
            (first, holding)
        })
    }

    /// The groups of `observed`, the sample shown, under the grouping in force, the largest
    /// used first (then by key): worked out again only for another sample or grouping.
    pub(crate) fn groups(&self, observed: &Observed) -> Vec<crate::accounting::GroupRow> {
        let mut kept = self.groups.borrow_mut();
        match &*kept {
            Some((sample, by, groups)) if *sample == self.samples_shown && *by == self.group_by => {
                groups.clone()
            }
            _ => {
                let mut groups = crate::accounting::groups(
                    &observed.sample,
                    &observed.account.processes,
                    self.group_by,
                );
                groups.sort_by(|a, b| b.used.cmp(&a.used).then_with(|| a.key.cmp(&b.key)));
                *kept = Some((self.samples_shown, self.group_by, groups.clone()));
                groups
            }
        }
    }

    /// The pids of the rows from `before` rows above the one of process `first` (the first
    /// row when it is not among them) to `after` rows below it, without lending every row.
    pub(crate) fn pids_around(
        &self,
        observed: &Observed,
        first: Option<(u32, &str)>,
        before: usize,
        after: usize,
    ) -> Vec<u32> {
        let process = |at: &RowAt| observed.sample.processes.get(at.index);
        self.with_rows(observed, |rows| {
            let start = first
                .and_then(|(pid, uuid)| {
                    rows.iter().position(|r| {
                        process(r).is_some_and(|p| p.pid == pid && *p.device_uuid == *uuid)
                    })
                })
                .unwrap_or(0);
            let end = start.saturating_add(after).min(rows.len());
            rows[start.saturating_sub(before)..end]
                .iter()
                .filter_map(process)
                .map(|p| p.pid)
                .collect()
        })
    }

    /// How many rows [`ProcessTable::rows`] holds, without lending them.
    pub(crate) fn row_count(&self, observed: &Observed) -> usize {
        self.with_rows(observed, <[RowAt]>::len)
    }

    fn with_rows<T>(&self, observed: &Observed, read: impl FnOnce(&[RowAt]) -> T) -> T {
        let mut cache = self.cache.borrow_mut();
        let fresh = cache.key.as_ref().is_some_and(|k| {
            k.sample == self.samples_shown
                && k.sort == self.sort
                && k.reversed == self.sort_reversed
                && k.terms == self.filter.terms
        });
        if !fresh {
            cache.rows = ordered(
                observed,
                (self.sort, self.sort_reversed),
                &self.sort_memory,
                &self.filter.terms,
            );
            cache.key = Some(RowsKey {
                sample: self.samples_shown,
                sort: self.sort,
                reversed: self.sort_reversed,
                terms: self.filter.terms.clone(),
            });
        }
        read(&cache.rows)
    }
}

/// NVML used of `process` in `history`: the peak of each of the last [`TREND_CELLS`] minutes
/// before `time`, oldest first. Worked out for the rows on screen only.
pub(crate) fn trend(history: &History, process: &ProcessSample, time: f64) -> Vec<Option<u64>> {
    history
        .get(&KeyRef::of(process, Metric::Used))
        .map(|s| s.cell_peaks(time, TREND_CELLS, TREND_BUCKET))
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "rows_tests.rs"]
mod tests;

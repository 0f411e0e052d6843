//! The history's budget of bytes. Over it, the history first lets go of the series of
//! processes that have gone (the longest gone first) before their [`super::FORGET_AFTER`]
//! samples are up; then thins every series to reach half as far into the past, and again, to
//! a sixteenth; past that, it lets go of the processes met last and is full: processes met
//! from then on get no history until there is room. Device series are never let go. Well
//! under the budget again, the thinning is undone a step at a time (the rings grow back as
//! values arrive). What it did is kept for the monitor to say ([`Budget`]).

use super::{entry_heap, named, AsKey, Entry, History, SeriesKey};
use crate::history::{ProcessId, Steps};
use std::mem::size_of;

/// Bytes the history holds at most, by its own count (rings, step readings, keys and tables
/// as allocated). A node of 8 GPUs x 7 MIG instances and 64 fed processes sampled every
/// second holds about 24 MiB after a day.
pub(crate) const BUDGET_BYTES: usize = 48 << 20;
/// Thinning at most: each series then reaches a sixteenth of its whole time.
pub(crate) const MOST_THINNING: u32 = 16;
/// Dropping for the budget goes on to this share of it, so that it is not done every sample.
const DROP_TO: f64 = 0.875;
/// Thinning is undone one step when the history holds less than this share of the budget.
const RELAX_BELOW: f64 = 0.25;

/// What the budget made the history do, for the monitor to say.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Bytes the history may hold.
    pub limit: usize,
    /// Bytes it holds now.
    pub bytes: usize,
    /// Series let go early for the budget (of processes gone, or, when full, of those met
    /// last), since the start.
    pub dropped: u64,
    /// When (unix seconds) series were last let go early.
    pub(crate) dropped_at: Option<f64>,
    /// Each series reaches `1 / thinned` of its whole time (15 min raw, 2 h, 24 h); 1: whole.
    pub thinned: u32,
    /// Thinned all it can and still over: processes met now get no history (until the
    /// history holds well under its budget again).
    pub(crate) full: bool,
}

impl Budget {
    /// One line for the report: the budget, and what it made the history do.
    pub(crate) fn describe(&self) -> String {
        self.parts().join("; ")
    }

    /// The budget, then each thing it made the history do, a phrase each (for the help's
    /// lines).
    pub(crate) fn parts(&self) -> Vec<String> {
        let size = |b: usize| crate::units::bytes(b as u64);
        let mut parts = vec![format!(
            "{} held of a {} budget",
            size(self.bytes),
            size(self.limit)
        )];
        if self.dropped > 0 {
            parts.push(format!(
                "{} series of exited processes let go early for it",
                self.dropped
            ));
        }
        if self.thinned > 1 {
            let reach = |secs: f64| crate::units::duration(secs / f64::from(self.thinned));
            parts.push(format!(
                "thinned to the last {} at every sample, {} and {} folded",
                reach(super::RAW_SECS),
                reach(7200.0),
                reach(86_400.0)
            ));
        }
        if self.full {
            parts.push("full: processes met now get no history".into());
        }
        parts
    }
}

/// The budget's state inside the history.
#[derive(Debug, Clone)]
pub(super) struct State {
    pub(super) limit: usize,
    pub(super) thinning: u32,
    pub(super) full: bool,
    dropped: u64,
    dropped_at: Option<f64>,
}

impl State {
    pub(super) fn new(limit: usize) -> Self {
        State {
            limit,
            thinning: 1,
            full: false,
            dropped: 0,
            dropped_at: None,
        }
    }
}

/// A table slot's bytes: the entry and its control byte.
fn slot<K, V>() -> usize {
    size_of::<(K, V)>() + 1
}

impl History {
    /// What the budget is and what it made the history do.
    pub fn budget(&self) -> Budget {
        Budget {
            limit: self.budget.limit,
            bytes: self.bytes(),
            dropped: self.budget.dropped,
            dropped_at: self.budget.dropped_at,
            thinned: self.budget.thinning,
            full: self.budget.full,
        }
    }

    pub(super) fn bytes(&self) -> usize {
        self.held
            + self.series.capacity() * (size_of::<usize>() + 1)
            + self.entries.capacity() * size_of::<Option<Box<Entry>>>()
            + self.free.capacity() * size_of::<usize>()
            + self.steps.capacity() * slot::<ProcessId, (Steps, u64)>()
            + self.names.bytes()
    }

    /// Counts the entries' bytes afresh.
    pub(super) fn recount(&mut self) {
        self.held = self
            .entries()
            .map(|(k, e)| entry_heap(k, &e.series))
            .sum::<usize>()
            + self
                .steps
                .iter()
                .map(|(_, (s, _))| s.footprint())
                .sum::<usize>();
    }

    /// Whether a new process's series (or step readings) may be kept: not while full, and
    /// not past the budget unless letting go and thinning make room.
    pub(super) fn room(&mut self, time: f64) -> bool {
        if !self.budget.full && self.bytes() > self.budget.limit {
            self.enforce(time);
        }
        !self.budget.full
    }

    /// Well within the budget: undoes one step of thinning, lets new processes in again.
    pub(super) fn relax(&mut self) {
        if self.bytes() < (self.budget.limit as f64 * DROP_TO) as usize {
            self.budget.full = false;
        }
        let low = (self.budget.limit as f64 * RELAX_BELOW) as usize;
        if self.budget.thinning > 1 && self.bytes() < low {
            self.budget.thinning /= 2;
            let thinning = self.budget.thinning;
            for e in self.entries.iter_mut().flatten() {
                e.series.thin(thinning);
            }
        }
    }

    /// Over the budget at `time`: lets go of what has gone, the longest gone first; then
    /// thins what stays; then lets go of the processes met last, and is full.
    pub(super) fn enforce(&mut self, time: f64) {
        let target = (self.budget.limit as f64 * DROP_TO) as usize;
        // Not written by the last sample: gone (or its feed has).
        let last = self.generation.saturating_sub(1);
        let mut gone: Vec<(u64, Option<SeriesKey>, Option<ProcessId>)> = self
            .entries()
            .filter(|(_, e)| e.seen < last)
            .map(|(k, e)| (e.seen, Some(k.clone()), None))
            .chain(
                self.steps
                    .iter()
                    .filter(|(_, (_, seen))| *seen < last)
                    .map(|(id, (_, seen))| (*seen, None, Some(id.clone()))),
            )
            .collect();
        gone.sort_by_key(|(seen, _, _)| *seen);
        let mut dropped = 0;
        for (_, key, id) in gone {
            if self.bytes() <= target {
                break;
            }
            if let Some(key) = key {
                dropped += u64::from(self.drop_series(&key));
            }
            if let Some((steps, _)) = id.and_then(|id| self.steps.remove(&id)) {
                self.held = self.held.saturating_sub(steps.footprint());
            }
        }
        while self.bytes() > self.budget.limit && self.budget.thinning < MOST_THINNING {
            self.budget.thinning *= 2;
            let thinning = self.budget.thinning;
            for e in self.entries.iter_mut().flatten() {
                e.series.thin(thinning);
            }
            self.recount();
        }
        if self.bytes() > self.budget.limit {
            self.budget.full = true;
            let mut newest: Vec<(u64, SeriesKey)> = self
                .entries()
                .filter(|(k, _)| matches!(k, SeriesKey::Process(..)))
                .map(|(k, e)| (e.born, k.clone()))
                .collect();
            newest.sort_by_key(|e| std::cmp::Reverse(e.0));
            for (_, key) in newest {
                if self.bytes() <= target {
                    break;
                }
                dropped += u64::from(self.drop_series(&key));
            }
        }
        if dropped > 0 {
            self.budget.dropped += dropped;
            self.budget.dropped_at = Some(time);
        }
    }

    fn drop_series(&mut self, key: &SeriesKey) -> bool {
        let key = key.as_key();
        let hash = self.hash(key);
        let entries = &self.entries;
        let Ok(found) = self
            .series
            .find_entry(hash, |&place| named(entries, place, key))
        else {
            return false;
        };
        let (place, _) = found.remove();
        let Some(e) = self.entries.get_mut(place).and_then(Option::take) else {
            return false;
        };
        self.free.push(place);
        self.held = self.held.saturating_sub(entry_heap(&e.key, &e.series));
        true
    }
}

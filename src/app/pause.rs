//! The samples that arrive while paused, kept to be applied on resume so that the history
//! has no hole where the screen stood still.
//!
//! The queue is bounded in bytes ([`PAUSE_BUDGET_BYTES`]), not in samples: a node with a
//! thousand processes at 0.05 s fills any count of samples with gigabytes. Each process is
//! kept as its raw numbers, with its identity strings (device, user, command line,
//! executable, state) held once for the whole queue, however many samples name them.
//!
//! Past the budget the queue grows coarser, never made up: every other queued sample is
//! dropped, then one in four, and so on, so that the samples kept stay spread over the whole
//! pause. A dropped sample is a gap in the history, exactly as a missed poll is. What the
//! allocator feeds sent in a dropped sample (statistics at their own instants, OOM reports)
//! is carried into the next sample kept, so the feeds' history loses nothing. The first and
//! the newest sample are always kept.

use crate::sample::fields::Heap;
use crate::sample::fields::{Interner, Pack};
use crate::sample::{NodeSample, PackedProcess, ProcessSample};
use std::collections::{HashMap, VecDeque};
use std::mem::size_of;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Instant;

/// `p`: the pause of the screen (not of the collector, whose samples queue).
#[derive(Debug, Default)]
pub struct Pause {
    pub(crate) paused: bool,
    /// Samples that arrived while paused, applied on resume a slice at a time
    /// ([`State::catch_up`](super::State::catch_up)); while it holds any, new samples queue
    /// behind them.
    pub(crate) queue: PauseQueue,
}

/// What the queue may hold, in bytes (an estimate of its heap: [`PauseQueue::bytes`]).
pub(crate) const PAUSE_BUDGET_BYTES: u64 = 64 << 20;

/// One string of the queue's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Sym(NonZeroU32);

/// Each distinct identity string once, for every sample of the queue.
#[derive(Debug, Default)]
struct Strings {
    /// By symbol (its number less one); `None` once no sample names it.
    slots: Vec<Option<Arc<str>>>,
    index: HashMap<Arc<str>, Sym>,
    /// Slots emptied, to reuse.
    free: Vec<Sym>,
    bytes: u64,
}

/// A table entry's bytes: the text, the shared pointer's counts, a slot, an index entry.
fn string_bytes(text: &str) -> u64 {
    (text.len() + 2 * size_of::<usize>() + size_of::<Option<Arc<str>>>() + 32) as u64
}

impl Strings {
    fn intern(&mut self, text: String) -> Sym {
        if let Some(sym) = self.index.get(text.as_str()) {
            return *sym;
        }
        let shared: Arc<str> = Arc::from(text);
        self.bytes += string_bytes(&shared);
        let sym = match self.free.pop() {
            Some(sym) => {
                self.slots[sym.0.get() as usize - 1] = Some(shared.clone());
                sym
            }
            None => {
                self.slots.push(Some(shared.clone()));
                let number = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
                Sym(NonZeroU32::MIN.saturating_add(number - 1))
            }
        };
        self.index.insert(shared, sym);
        sym
    }

    fn get(&self, sym: Sym) -> &str {
        self.slots
            .get(sym.0.get() as usize - 1)
            .and_then(|s| s.as_deref())
            .unwrap_or_default()
    }

    /// Forgets every string no queued sample names.
    fn keep_only(&mut self, named: &[bool]) {
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if named.get(i) == Some(&true) {
                continue;
            }
            if let Some(text) = slot.take() {
                self.bytes -= string_bytes(&text);
                self.index.remove(&text);
                if let Some(sym) = NonZeroU32::new(i as u32 + 1) {
                    self.free.push(Sym(sym));
                }
            }
        }
    }

    fn clear(&mut self) {
        *self = Strings::default();
    }
}

/// A process of a queued sample: [`ProcessSample`]'s numbers, its strings as symbols, its
/// feed boxed (packed field by field from its declaration: a field added to it is kept here
/// with no change).
type Process = PackedProcess<Strings>;

impl Interner for Strings {
    type Sym = Sym;
    fn intern(&mut self, text: String) -> Sym {
        Strings::intern(self, text)
    }
    fn text(&self, sym: Sym) -> String {
        self.get(sym).to_string()
    }
}

/// One queued sample.
#[derive(Debug)]
struct Entry {
    /// Its number among the samples that arrived since the queue was last empty.
    seq: u64,
    arrived: Instant,
    /// The sample, less its processes.
    sample: NodeSample,
    processes: Vec<Process>,
    /// What it holds, strings apart ([`PauseQueue::bytes`]).
    bytes: u64,
}

impl Entry {
    fn measure(&mut self) {
        let feeds: usize = self
            .processes
            .iter()
            .map(|p| p.feed.as_ref().map_or(0, |f| f.heap()))
            .sum();
        self.bytes = (size_of::<Entry>()
            + self.sample.heap()
            + self.processes.capacity() * size_of::<Process>()
            + feeds) as u64;
    }

    /// Takes in what the feeds sent in `dropped`, a sample dropped just before this one:
    /// statistics read at their own instants and OOM reports that this one does not hold.
    fn carry_feeds_of(&mut self, dropped: Entry) {
        for record in dropped.sample.feeds {
            let Some(next) = self
                .sample
                .feeds
                .iter_mut()
                .find(|r| r.socket == record.socket)
            else {
                continue;
            };
            for device in record.devices {
                let Some(into) = next
                    .devices
                    .iter_mut()
                    .find(|d| d.latest.index == device.latest.index)
                else {
                    continue;
                };
                let held_from = into.earlier.first().unwrap_or(&into.latest).time;
                let mut carried = device.earlier;
                carried.push(device.latest);
                carried.retain(|s| s.time < held_from);
                carried.append(&mut into.earlier);
                into.earlier = carried;
            }
            let mut ooms = record.ooms;
            ooms.retain(|o| !next.ooms.iter().any(|n| n.seq == o.seq && n.time == o.time));
            ooms.append(&mut next.ooms);
            next.ooms = ooms;
        }
        self.measure();
    }
}

/// The samples queued while paused, oldest first, within a byte budget.
#[derive(Debug)]
pub struct PauseQueue {
    entries: VecDeque<Entry>,
    strings: Strings,
    budget: u64,
    /// Bytes of the entries ([`Entry::bytes`]), strings apart.
    entries_bytes: u64,
    /// One sample in `stride` is kept (the newest always).
    stride: u64,
    next_seq: u64,
    dropped: u64,
}

impl Default for PauseQueue {
    fn default() -> Self {
        PauseQueue::with_budget(PAUSE_BUDGET_BYTES)
    }
}

impl PauseQueue {
    pub(crate) fn with_budget(budget: u64) -> Self {
        PauseQueue {
            entries: VecDeque::new(),
            strings: Strings::default(),
            budget,
            entries_bytes: 0,
            stride: 1,
            next_seq: 0,
            dropped: 0,
        }
    }

    /// Samples queued.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The estimated heap bytes the queue holds: its samples, and its strings once each.
    pub(crate) fn bytes(&self) -> u64 {
        self.entries_bytes + self.strings.bytes
    }

    pub(crate) fn budget(&self) -> u64 {
        self.budget
    }

    /// Samples dropped to stay within the budget since the queue was last empty.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// One sample in how many is kept now (1: every one).
    pub(crate) fn stride(&self) -> u64 {
        self.stride
    }

    /// Queues a sample that arrived at `arrived`.
    pub(crate) fn push(&mut self, mut sample: NodeSample, arrived: Instant) {
        // A fresh vector: `collect` would reuse the full-size processes' allocation.
        let full = std::mem::take(&mut sample.processes);
        let mut processes = Vec::with_capacity(full.len());
        processes.extend(full.into_iter().map(|p| p.pack(&mut self.strings)));
        let mut entry = Entry {
            seq: self.next_seq,
            arrived,
            sample,
            processes,
            bytes: 0,
        };
        self.next_seq += 1;
        entry.measure();
        // The newest is always kept; the one it replaces as newest only on the stride.
        if self
            .entries
            .back()
            .is_some_and(|e| e.seq % self.stride != 0)
        {
            if let Some(dropped) = self.entries.pop_back() {
                self.entries_bytes -= dropped.bytes;
                self.dropped += 1;
                entry.carry_feeds_of(dropped);
            }
        }
        self.entries_bytes += entry.bytes;
        self.entries.push_back(entry);
        while self.bytes() > self.budget && self.entries.len() > 2 {
            self.coarsen();
        }
    }

    /// Keeps half as many samples: those on twice the stride, the newest, and the first.
    fn coarsen(&mut self) {
        self.stride = self.stride.saturating_mul(2);
        let newest = self.entries.len() - 1;
        let mut carried: Option<Entry> = None;
        let mut kept = VecDeque::with_capacity(self.entries.len() / 2 + 1);
        for (i, mut entry) in std::mem::take(&mut self.entries).into_iter().enumerate() {
            if let Some(dropped) = carried.take() {
                entry.carry_feeds_of(dropped);
            }
            if i == newest || entry.seq % self.stride == 0 {
                kept.push_back(entry);
            } else {
                self.dropped += 1;
                carried = Some(entry);
            }
        }
        self.entries = kept;
        self.entries_bytes = self.entries.iter().map(|e| e.bytes).sum();
        let mut named = vec![false; self.strings.slots.len()];
        for process in self.entries.iter().flat_map(|e| &e.processes) {
            ProcessSample::symbols(process, &mut |sym: Sym| {
                if let Some(flag) = named.get_mut(sym.0.get() as usize - 1) {
                    *flag = true;
                }
            });
        }
        self.strings.keep_only(&named);
    }

    /// The oldest sample, whole again, and when it arrived.
    pub(crate) fn pop_front(&mut self) -> Option<(NodeSample, Instant)> {
        let entry = self.entries.pop_front()?;
        self.entries_bytes -= entry.bytes;
        let mut sample = entry.sample;
        sample.processes = entry
            .processes
            .into_iter()
            .map(|p| ProcessSample::unpack(p, &self.strings))
            .collect();
        if self.entries.is_empty() {
            self.reset();
        }
        Some((sample, entry.arrived))
    }

    /// Samples from now on are all kept again (the user resumed: the queue is emptying);
    /// those kept so far stay.
    pub(crate) fn keep_every_sample(&mut self) {
        self.stride = 1;
    }

    fn reset(&mut self) {
        self.strings.clear();
        self.entries_bytes = 0;
        self.stride = 1;
        self.next_seq = 0;
        self.dropped = 0;
    }

    /// Times of the samples queued, oldest first.
    #[cfg(test)]
    fn times(&self) -> Vec<f64> {
        self.entries.iter().map(|e| e.sample.time).collect()
    }
}

#[cfg(test)]
#[path = "pause_tests.rs"]
mod tests;

//! Bounded rolling history: a series per device for every layer and its occupied bytes, and
//! per process for NVML's used, the allocator's figures and counters, and SM utilisation.
//! Full resolution for the last 15 minutes, folded tiers (min, max, last) to 24 hours.
//! A series costs in proportion to how long it was written, up to a bound
//! ([`Series::footprint`]); a process that reports training steps also has its step-end
//! readings, by step ([`Steps`]). The whole history keeps within [`BUDGET_BYTES`]
//! ([`budget`]).

mod blocks;
mod budget;
mod handles;
mod series;
mod steps;

pub(crate) use budget::BUDGET_BYTES;
pub(crate) use handles::{Handle, Handles};
pub(crate) use series::{Scale, Series, Span, FOLD_1, RAW_SECS};
pub(crate) use steps::{StepPoint, Steps};

use crate::layers::Layer;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::num::NonZeroU64;
use std::sync::Arc;

/// The series' table: each series' place in [`History::entries`], found by a borrowed name
/// ([`KeyRef`]) hashed as [`History::hash`] does. The names are in the entries, not the
/// table: a table keeps up to half its slots empty, and a slot of a place is 8 bytes where
/// one of a name and its place was 64 (half a megabyte of a node of 4,096 processes).
type SeriesTable = hashbrown::HashTable<usize>;

/// A process on a device, across samples: the start time tells a reused PID apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessId {
    pub(crate) pid: u32,
    pub(crate) start_time: Option<u64>,
    /// Shared: the history keeps each device's name once for all its keys ([`Names`]).
    pub(crate) device_uuid: Arc<str>,
}

impl ProcessId {
    /// The process a sample lists, on its device.
    pub(crate) fn of(process: &crate::sample::ProcessSample) -> Self {
        ProcessId {
            pid: process.pid,
            start_time: process.start_time,
            device_uuid: Arc::clone(&process.device_uuid),
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
    /// The allocator's own peak of live tensor bytes (since the process started or last
    /// reset it): where it rose lately, the exact peak a forecast starts from.
    PeakAllocated,
    /// NVML used − reserved − context.
    OutsidePool,
    /// Counters: allocation retries, OOMs.
    Retries,
    Ooms,
    /// SM utilisation, percent.
    Sm,
}

impl Metric {
    /// A number of its own for each metric, for a key's hash.
    fn code(self) -> u64 {
        match self {
            Metric::Used => 0,
            Metric::Layer(layer) => 1 + layer as u64,
            Metric::Allocated => 16,
            Metric::Reserved => 17,
            Metric::InactiveSplit => 18,
            Metric::PeakAllocated => 19,
            Metric::OutsidePool => 20,
            Metric::Retries => 21,
            Metric::Ooms => 22,
            Metric::Sm => 23,
        }
    }

    fn scale(self) -> Scale {
        match self {
            Metric::Retries | Metric::Ooms | Metric::Sm => Scale::Unit,
            _ => Scale::Kib,
        }
    }
}

/// A series' name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum SeriesKey {
    Device(String, Metric),
    Process(ProcessId, Metric),
}

impl SeriesKey {
    pub fn device(uuid: &str, metric: Metric) -> Self {
        SeriesKey::Device(uuid.to_string(), metric)
    }

    pub fn process(pid: u32, start_time: Option<u64>, device_uuid: &str, metric: Metric) -> Self {
        KeyRef::Process(pid, start_time, device_uuid, metric).to_key()
    }

    /// What the series measures.
    pub(crate) fn metric(&self) -> Metric {
        self.as_key().metric()
    }
}

/// A series' name borrowed from what names it (a sample's UUID, a process): how the
/// history is written and read without making a key of its own each time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRef<'a> {
    Device(&'a str, Metric),
    Process(u32, Option<u64>, &'a str, Metric),
}

impl KeyRef<'_> {
    /// The series of a process on its device.
    pub(crate) fn of_process(id: &ProcessId, metric: Metric) -> KeyRef<'_> {
        KeyRef::Process(id.pid, id.start_time, &id.device_uuid, metric)
    }

    /// The series of a process a sample lists, on its device (as [`ProcessId::of`] names it).
    pub(crate) fn of(process: &crate::sample::ProcessSample, metric: Metric) -> KeyRef<'_> {
        KeyRef::Process(
            process.pid,
            process.start_time,
            &process.device_uuid,
            metric,
        )
    }

    pub(crate) fn to_key(self) -> SeriesKey {
        match self {
            KeyRef::Device(uuid, m) => SeriesKey::Device(uuid.to_string(), m),
            KeyRef::Process(pid, start_time, uuid, m) => SeriesKey::Process(
                ProcessId {
                    pid,
                    start_time,
                    device_uuid: uuid.into(),
                },
                m,
            ),
        }
    }

    fn metric(self) -> Metric {
        match self {
            KeyRef::Device(_, m) | KeyRef::Process(.., m) => m,
        }
    }
}

/// A series' name, owned or borrowed.
pub trait AsKey {
    fn as_key(&self) -> KeyRef<'_>;
}

impl AsKey for SeriesKey {
    fn as_key(&self) -> KeyRef<'_> {
        match self {
            SeriesKey::Device(uuid, m) => KeyRef::Device(uuid, *m),
            SeriesKey::Process(id, m) => KeyRef::of_process(id, *m),
        }
    }
}

impl AsKey for KeyRef<'_> {
    fn as_key(&self) -> KeyRef<'_> {
        *self
    }
}

// A key hashes as its borrowed form, so that the table finds an owned key from a borrowed one.
// A process's key leaves its device's UUID out of the hash: the PID and start time tell
// processes apart almost always (only one on several GPUs shares them, and its series are
// then told apart by the comparison), and a sample writes some 15 series a process, each
// a hash of the key.
impl std::hash::Hash for KeyRef<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match *self {
            KeyRef::Device(uuid, m) => {
                state.write_u64(m.code());
                uuid.hash(state);
            }
            // Two words: the PID with the metric and whether the start time is known, then
            // the start time (each write is a round of the hasher).
            KeyRef::Process(pid, start_time, _, m) => {
                state.write_u64(
                    u64::from(pid)
                        | m.code() << 32
                        | u64::from(start_time.is_some()) << 40
                        | 1 << 48,
                );
                state.write_u64(start_time.unwrap_or(0));
            }
        }
    }
}

impl std::hash::Hash for SeriesKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_key().hash(state);
    }
}

/// Every series the monitor keeps. Series not updated for [`FORGET_AFTER`] samples are
/// dropped, so processes that come and go do not grow memory without bound; the whole keeps
/// within a budget of bytes ([`Budget`]).
#[derive(Debug, Clone)]
pub struct History {
    series: SeriesTable,
    /// Hashes the names for [`History::series`] (a copy hashes as the original).
    hasher: hashbrown::DefaultHashBuilder,
    /// The series at their places, each kept there from when it is made to when it is let
    /// go, so that a [`Handle`] finds it again without the table. Boxed, so that a spare
    /// place costs a pointer, not a series.
    entries: Vec<Option<Box<Entry>>>,
    /// Places let go, to be used again.
    free: Vec<usize>,
    generation: u64,
    /// Slot length and time of slot 0, set by the first sample.
    clock: Option<(f64, f64)>,
    /// Step-end readings of the processes that report steps, with the generation last
    /// written.
    steps: HashMap<ProcessId, (Steps, u64)>,
    /// Bytes the entries hold beyond the tables' own slots: rings, step readings, keys.
    held: usize,
    /// The devices' names the processes' keys hold, each once.
    names: Names,
    budget: budget::State,
}

/// One series, its name, and the generations it was first and last written in.
#[derive(Debug, Clone)]
struct Entry {
    key: SeriesKey,
    series: Series,
    seen: u64,
    born: u64,
    /// Which series this is of those any history made ([`MADE`]).
    serial: NonZeroU64,
}

/// Series made by every history so far: each one's number tells it from any other, the one
/// made at its place before it or one of another history (a copy's series are the same
/// series, and share their numbers).
static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Samples without an update after which a series is forgotten: its process has gone.
pub(crate) const FORGET_AFTER: u64 = 900;
/// Samples between sweeps for what is forgotten.
const SWEEP_EVERY: u64 = 64;

impl Default for History {
    fn default() -> Self {
        History::with_budget(BUDGET_BYTES)
    }
}

impl History {
    /// A history that keeps within `limit` bytes.
    pub(crate) fn with_budget(limit: usize) -> Self {
        History {
            series: SeriesTable::new(),
            hasher: hashbrown::DefaultHashBuilder::default(),
            entries: Vec::new(),
            free: Vec::new(),
            generation: 0,
            clock: None,
            steps: HashMap::new(),
            held: 0,
            names: Names::default(),
            budget: budget::State::new(limit),
        }
    }

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
        if self.generation.is_multiple_of(SWEEP_EVERY) {
            let now = self.generation;
            let (entries, free) = (&mut self.entries, &mut self.free);
            self.series.retain(|&mut place| {
                let kept = entries[place]
                    .as_ref()
                    .is_some_and(|e| now.saturating_sub(e.seen) <= FORGET_AFTER);
                if !kept {
                    entries[place] = None;
                    free.push(place);
                }
                kept
            });
            self.steps
                .retain(|_, (_, seen)| now.saturating_sub(*seen) <= FORGET_AFTER);
            self.names.sweep();
            if self.series.capacity() > 4 * self.series.len().max(64) {
                let (entries, hasher) = (&self.entries, &self.hasher);
                self.series
                    .shrink_to_fit(|&place| rehash(hasher, entries, place));
            }
            // The places past the last series held go (and are no longer free).
            while self.entries.last().is_some_and(Option::is_none) {
                self.entries.pop();
            }
            let held = self.entries.len();
            self.free.retain(|&place| place < held);
            if self.entries.capacity() > 4 * held.max(64) {
                self.entries.shrink_to_fit();
            }
            if self.free.capacity() > 4 * self.free.len().max(64) {
                self.free.shrink_to_fit();
            }
            if self.steps.capacity() > 4 * self.steps.len().max(64) {
                self.steps.shrink_to_fit();
            }
            self.recount();
            self.relax();
        }
        if self.bytes() > self.budget.limit {
            self.enforce(time);
        }
    }

    pub fn record(&mut self, key: impl AsKey, time: f64, value: Option<u64>) {
        self.record_all(key, std::iter::once((time, value)));
    }

    /// [`History::record`] of several points of one series, in order: the series is found
    /// once.
    pub(crate) fn record_all(
        &mut self,
        key: impl AsKey,
        points: impl Iterator<Item = (f64, Option<u64>)>,
    ) {
        self.record_placed(key, points);
    }

    /// [`History::record_all`] through `handle`: the series it holds written without
    /// finding it by its name, where it still holds one (the handle of a series let go
    /// since finds nothing); otherwise the series is found (or made) by `key`, and
    /// `handle` holds it for the next time. A handle is only ever used with the key it
    /// was got for.
    pub(crate) fn record_through(
        &mut self,
        handle: &mut Option<Handle>,
        key: impl AsKey,
        mut points: impl Iterator<Item = (f64, Option<u64>)>,
    ) {
        if let Some(held) = *handle {
            let generation = self.generation;
            if let Some(entry) = self
                .entries
                .get_mut(held.place)
                .and_then(|e| e.as_deref_mut())
                .filter(|e| e.serial == held.serial)
            {
                self.held = write(entry, &mut points, generation, self.held);
                return;
            }
        }
        *handle = self.record_placed(key, points);
    }

    /// [`History::record_all`], returning where the series written is (none where it was
    /// not kept: no point, or no room).
    fn record_placed(
        &mut self,
        key: impl AsKey,
        mut points: impl Iterator<Item = (f64, Option<u64>)>,
    ) -> Option<Handle> {
        let key = key.as_key();
        let generation = self.generation;
        if let Some(place) = self.place(key) {
            let entry = self.entries[place].as_deref_mut()?;
            self.held = write(entry, &mut points, generation, self.held);
            return Some(Handle {
                place,
                serial: entry.serial,
            });
        }
        let (time, value) = points.next()?;
        if matches!(key, KeyRef::Process(..)) && !self.room(time) {
            return None;
        }
        let (step, origin) = self.clock.unwrap_or((1.0, time));
        let scale = key.metric().scale();
        let mut series = Series::thinned(scale, step, origin, self.budget.thinning);
        series.push(time, value);
        for (time, value) in points {
            series.push(time, value);
        }
        let hash = self.hash(key);
        let key = match key {
            KeyRef::Process(pid, start_time, uuid, metric) => SeriesKey::Process(
                ProcessId {
                    pid,
                    start_time,
                    device_uuid: self.names.of(uuid),
                },
                metric,
            ),
            KeyRef::Device(..) => key.to_key(),
        };
        self.held += entry_heap(&key, &series);
        // Never 0: an absent handle then costs no more than a handle.
        let serial =
            NonZeroU64::MIN.saturating_add(MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let entry = Some(Box::new(Entry {
            key,
            series,
            seen: generation,
            born: generation,
            serial,
        }));
        let place = match self.free.pop() {
            Some(place) => {
                self.entries[place] = entry;
                place
            }
            None => {
                self.entries.push(entry);
                self.entries.len() - 1
            }
        };
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.series
            .insert_unique(hash, place, |&place| rehash(hasher, entries, place));
        Some(Handle { place, serial })
    }

    /// Records one step-end reading of a process.
    pub(crate) fn record_step(&mut self, id: &ProcessId, point: StepPoint) {
        let generation = self.generation;
        match self.steps.get_mut(id) {
            Some((steps, seen)) => {
                let before = steps.footprint();
                steps.push(point);
                self.held = (self.held + steps.footprint()).saturating_sub(before);
                *seen = generation;
            }
            None => {
                if !self.room(point.time) {
                    return;
                }
                let mut steps = Steps::default();
                steps.push(point);
                self.held += steps.footprint();
                let id = ProcessId {
                    device_uuid: self.names.of(&id.device_uuid),
                    ..id.clone()
                };
                self.steps.insert(id, (steps, generation));
            }
        }
    }

    /// Whether any process's step-end readings are kept.
    pub(crate) fn keeps_steps(&self) -> bool {
        !self.steps.is_empty()
    }

    /// The step-end readings of a process, where it reports steps.
    pub(crate) fn steps(&self, id: &ProcessId) -> Option<&Steps> {
        self.steps.get(id).map(|(s, _)| s)
    }

    /// The series of a name, owned ([`SeriesKey`]) or borrowed ([`KeyRef`]).
    pub(crate) fn get(&self, key: &(impl AsKey + ?Sized)) -> Option<&Series> {
        self.entry(self.place(key.as_key())?).map(|e| &e.series)
    }

    /// The hash of a series' name in [`History::series`].
    fn hash(&self, key: KeyRef<'_>) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Where the series `key` names is, if it is kept.
    fn place(&self, key: KeyRef<'_>) -> Option<usize> {
        let entries = &self.entries;
        self.series
            .find(self.hash(key), |&place| named(entries, place, key))
            .copied()
    }

    /// The entry at a place.
    /// The series `key` names, found through `handles` where the process the sample last
    /// recorded listed at `place` is `key`'s (no search of the table), else by its name.
    pub(crate) fn get_listed(
        &self,
        handles: &Handles,
        place: usize,
        key: KeyRef<'_>,
    ) -> Option<&Series> {
        let through = handles
            .of_listed(place, key)
            .and_then(|held| self.entry(held.place).filter(|e| e.serial == held.serial));
        match through {
            Some(entry) => Some(&entry.series),
            None => self.get(&key),
        }
    }

    fn entry(&self, place: usize) -> Option<&Entry> {
        self.entries.get(place)?.as_deref()
    }

    /// Every series, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&SeriesKey, &Series)> {
        self.entries().map(|(k, e)| (k, &e.series))
    }

    /// Every entry with its key, in no particular order.
    fn entries(&self) -> impl Iterator<Item = (&SeriesKey, &Entry)> {
        self.series
            .iter()
            .filter_map(|&place| self.entry(place).map(|e| (&e.key, e)))
    }

    pub fn len(&self) -> usize {
        self.series.len()
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// Bytes the history holds, by its own count: rings, step readings, keys and tables as
    /// allocated (the allocator's own slack is not counted).
    pub fn footprint(&self) -> usize {
        self.bytes()
    }

    /// Bytes this history holds that `other`, a copy of it from another instant, does not
    /// share with it: what keeping both costs beyond keeping `other`. Series' blocks a copy
    /// shares are counted once; the step readings, keys and tables are counted whole.
    pub(crate) fn footprint_beside(&self, other: &History) -> usize {
        // Each series' footprint, and what of it `other` does not share.
        let (whole, beside) = self.iter().fold((0, 0), |(whole, beside), (key, series)| {
            let own = other.get(key).map_or_else(
                || series.footprint(),
                |o| std::mem::size_of::<Series>() + series.bytes_beside(o),
            );
            (whole + series.footprint(), beside + own)
        });
        self.bytes().saturating_sub(whole) + beside
    }
}

/// Writes `points` to an entry seen at `generation`: what the history holds, `held` before,
/// after.
fn write(
    entry: &mut Entry,
    points: &mut impl Iterator<Item = (f64, Option<u64>)>,
    generation: u64,
    held: usize,
) -> usize {
    let before = entry.series.footprint();
    for (time, value) in points {
        entry.series.push(time, value);
    }
    entry.seen = generation;
    (held + entry.series.footprint()).saturating_sub(before)
}

/// The names of the devices the processes' keys name, each held once: a node lists
/// thousands of processes on a few devices, and each process has two series or more (a copy
/// of its device's name each was 48 bytes). A name no key holds any longer goes at a sweep.
/// The names' own bytes are kept as they come and go: the budget asks [`Names::bytes`] at
/// every series it lets go, and a recording may name many devices.
#[derive(Debug, Clone, Default)]
struct Names {
    set: hashbrown::HashSet<Arc<str>>,
    held: usize,
}

/// A name's bytes: its text and its two counts.
fn name_bytes(name: &str) -> usize {
    name.len() + 2 * std::mem::size_of::<usize>()
}

impl Names {
    /// The name `uuid`, shared.
    fn of(&mut self, uuid: &str) -> Arc<str> {
        if let Some(held) = self.set.get(uuid) {
            return Arc::clone(held);
        }
        let made: Arc<str> = Arc::from(uuid);
        self.held += name_bytes(uuid);
        self.set.insert(Arc::clone(&made));
        made
    }

    /// Lets go of the names no key holds.
    fn sweep(&mut self) {
        let held = &mut self.held;
        self.set.retain(|name| {
            let kept = Arc::strong_count(name) > 1;
            if !kept {
                *held = held.saturating_sub(name_bytes(name));
            }
            kept
        });
    }

    /// Bytes they hold: the table's slots, and each name with its counts.
    fn bytes(&self) -> usize {
        self.set.capacity() * (std::mem::size_of::<Arc<str>>() + 1) + self.held
    }
}

/// Whether the series at `place` is the one `key` names (the table's comparison).
fn named(entries: &[Option<Box<Entry>>], place: usize, key: KeyRef<'_>) -> bool {
    entries[place]
        .as_ref()
        .is_some_and(|e| e.key.as_key() == key)
}

/// The hash of the name of the series at `place` (one the table holds: never an empty place).
fn rehash(
    hasher: &hashbrown::DefaultHashBuilder,
    entries: &[Option<Box<Entry>>],
    place: usize,
) -> u64 {
    entries[place]
        .as_ref()
        .map_or(0, |e| hasher.hash_one(e.key.as_key()))
}

/// Bytes an entry holds outside its table slot: itself with its rings, and its key's text.
fn entry_heap(key: &SeriesKey, series: &Series) -> usize {
    let text = match key {
        SeriesKey::Device(uuid, _) => uuid.capacity(),
        // Counted once for all its keys, with the names ([`Names::bytes`]).
        SeriesKey::Process(..) => 0,
    };
    text + series.footprint() + std::mem::size_of::<Entry>() - std::mem::size_of::<Series>()
}

#[cfg(test)]
mod tests;

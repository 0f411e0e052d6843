//! The CUDA context of each fed process: observed, estimated, or fixed.
//!
//! NVML's per-process figure is `context + outside_pool + reserved`; no allocator sees the
//! context. What the agent reports makes it knowable:
//! - **observed**: an NVML reading taken while the allocator held nothing (`reserved` 0 after
//!   CUDA init, the agent running from before the first allocation, as under `strata run`):
//!   that reading *is* the context;
//! - **reported**: the agent's own NVML reading right after CUDA init, while its pool was
//!   empty, which its `hello` carries (each device's `context`): exact, and known to a monitor
//!   that meets the job at any later time;
//! - **estimated**: otherwise, the smallest `used - reserved` over readings that can be paired
//!   exactly with a feed sample: the agent says the pool held the same bytes from before the
//!   NVML reading until after it (`reserved_since <= reading <= feed time`). A feed read at
//!   another instant than NVML is never paired, so skewed samples never ratchet the estimate;
//! - **fixed**: `--context-mib`.
//!
//! What is learned is kept for the life of the process (pid and start time), not only while
//! NVML lists it.

use crate::accounting::attach::FeedStatus;
use crate::sample::{AllocatorStats, FeedSample, NodeSample, ProcessSample};
use serde::Serialize;
use std::sync::Arc;

/// Maps keyed by process, looked up by [`KeyRef`] (no key made to look one up).
type ByProcess<V> = hashbrown::HashMap<ProcessKey, V>;

/// Where a context figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextSource {
    /// NVML's reading while the pool was empty: exact.
    Observed,
    /// The agent's own NVML reading right after CUDA init, while its pool was empty (its
    /// hello's device `context`): exact, for a monitor that was not there then.
    Reported,
    /// The smallest exactly-paired `used - reserved`: an upper bound that tightens.
    Estimated,
    /// `--context-mib`.
    Fixed,
    /// Nothing paired yet: the figure is `used - reserved`, context and memory outside the
    /// pool together.
    Unsplit,
}

impl ContextSource {
    /// The mark shown before a context figure: `~` for anything not exact.
    pub(crate) fn mark(self) -> &'static str {
        match self {
            ContextSource::Observed | ContextSource::Reported | ContextSource::Fixed => "",
            ContextSource::Estimated => "~",
            ContextSource::Unsplit => "≤",
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            ContextSource::Observed => "observed",
            ContextSource::Reported => "reported",
            ContextSource::Estimated => "estimated",
            ContextSource::Fixed => "fixed",
            ContextSource::Unsplit => "unsplit",
        }
    }
}

/// A process on a device, across samples. The start time tells a reused PID apart.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ProcessKey {
    pid: u32,
    start_time: Option<u64>,
    /// The sample's own, shared: a node's processes are on a few devices.
    device_uuid: Arc<str>,
}

/// A [`ProcessKey`] borrowed from a process sample, hashed as the key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KeyRef<'a> {
    pid: u32,
    start_time: Option<u64>,
    device_uuid: &'a Arc<str>,
}

impl<'a> KeyRef<'a> {
    fn of(process: &'a ProcessSample) -> Self {
        KeyRef {
            pid: process.pid,
            start_time: process.start_time,
            device_uuid: &process.device_uuid,
        }
    }

    fn to_key(self) -> ProcessKey {
        ProcessKey {
            pid: self.pid,
            start_time: self.start_time,
            device_uuid: Arc::clone(self.device_uuid),
        }
    }
}

/// The value of `key` in `map`, `new` put in first where there is none (a key made only
/// then).
fn slot<'m, V>(map: &'m mut ByProcess<V>, key: KeyRef<'_>, new: V) -> Option<&'m mut V> {
    // One search, found or not (a search to ask and another to take would be two).
    Some(match map.entry_ref(&key) {
        hashbrown::hash_map::EntryRef::Occupied(found) => found.into_mut(),
        hashbrown::hash_map::EntryRef::Vacant(room) => room.insert_with_key(key.to_key(), new),
    })
}

// A key hashes as its borrowed form. The PID and start time tell processes apart almost
// always (only one on several GPUs shares them, told apart then by the comparison), so the
// device's UUID is left out of the hash: a sample looks up each listed process.
impl std::hash::Hash for KeyRef<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(u64::from(self.pid) | u64::from(self.start_time.is_some()) << 32);
        state.write_u64(self.start_time.unwrap_or(0));
    }
}

impl std::hash::Hash for ProcessKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        KeyRef {
            pid: self.pid,
            start_time: self.start_time,
            device_uuid: &self.device_uuid,
        }
        .hash(state);
    }
}

impl hashbrown::Equivalent<ProcessKey> for KeyRef<'_> {
    fn equivalent(&self, key: &ProcessKey) -> bool {
        self.pid == key.pid
            && self.start_time == key.start_time
            && *self.device_uuid == key.device_uuid
    }
}

/// What has been learned of one process's context.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Learned {
    bytes: u64,
    source: ContextSource,
    /// Sample time it was last listed at, for forgetting.
    seen: f64,
}

/// One NVML reading of a process, waiting for a feed sample taken after it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Reading {
    /// NVML read the process between `from` and `to`.
    from: f64,
    to: f64,
    used: u64,
}

/// A process not listed for this long is forgotten: a pid and start time name one process
/// for its whole life, so keeping it longer is never wrong, only memory.
const FORGET_AFTER_SECS: f64 = 3600.0;
/// At most this many processes remembered.
const MAX_REMEMBERED: usize = 8192;

/// Learns each fed process's context from exactly paired readings.
#[derive(Debug, Clone, Default)]
pub struct ContextEstimator {
    fixed_bytes: Option<u64>,
    learned: ByProcess<Learned>,
    /// Each listed process's latest NVML reading, with the count of the sample that last
    /// listed it.
    pending: ByProcess<(Option<Reading>, u64)>,
    /// Samples observed.
    observed: u64,
}

impl ContextEstimator {
    /// An estimator that answers `fixed` bytes where given (`--context-mib`), else learns.
    pub(crate) fn new(fixed: Option<u64>) -> Self {
        fixed.map_or_else(Self::learning, Self::fixed)
    }

    /// An estimator that learns from what it observes.
    pub fn learning() -> Self {
        Self::default()
    }

    /// An estimator that answers a fixed context size (`--context-mib`).
    pub(crate) fn fixed(bytes: u64) -> Self {
        ContextEstimator {
            fixed_bytes: Some(bytes),
            ..Self::default()
        }
    }

    /// Learns from one sample whose feeds are attached (`statuses` parallel to its
    /// processes). A feed that contradicts itself or NVML is not learned from.
    pub fn observe(&mut self, sample: &NodeSample, statuses: &[FeedStatus]) {
        if self.fixed_bytes.is_some() {
            return;
        }
        let now = sample.time;
        self.observed += 1;
        let count = self.observed;
        let poll = sample.poll_secs.filter(|s| s.is_finite() && *s >= 0.0);
        let reading_from = now - poll.unwrap_or(0.0);
        // Processes listed that were listed in the sample before: when every one kept is,
        // none is forgotten.
        let mut kept = 0;
        for (process, status) in sample.processes.iter().zip(statuses) {
            let key = KeyRef::of(process);
            // A node without feeds learns nothing: no search for what cannot be there.
            if !self.learned.is_empty() {
                if let Some(learned) = self.learned.get_mut(&key) {
                    learned.seen = now;
                }
            }
            let current = process.used.map(|used| Reading {
                from: reading_from,
                to: now,
                used,
            });
            // Listed: it waits for the next sample with this reading, or without one with
            // the reading it had.
            let earlier = slot(&mut self.pending, key, (None, u64::MAX)).and_then(|pending| {
                if pending.1 == count - 1 {
                    kept += 1;
                }
                pending.1 = count;
                match current {
                    Some(current) => pending.0.replace(current),
                    None => pending.0,
                }
            });
            let Some(current) = current else { continue };
            if let (Some(feed), false) = (
                &process.feed,
                matches!(status, FeedStatus::Inconsistent { .. }),
            ) {
                if let Some(bytes) = reported(sample, feed) {
                    let reported = Learned {
                        bytes,
                        source: ContextSource::Reported,
                        seen: now,
                    };
                    // What this monitor observed itself stays; a reading replaces an estimate.
                    if let Some(learned) = slot(&mut self.learned, key, reported) {
                        if learned.source != ContextSource::Observed {
                            *learned = reported;
                        }
                    }
                }
                // The previous reading first: the feed usually arrives after it.
                if let Some(earlier) = earlier {
                    self.pair(key, earlier, &feed.stats, now);
                }
                self.pair(key, current, &feed.stats, now);
            }
        }
        self.forget(now, count, kept);
    }

    /// Learns from one NVML reading if the feed sample brackets it with an unchanged pool.
    fn pair(&mut self, key: KeyRef<'_>, reading: Reading, stats: &AllocatorStats, now: f64) {
        // Without a pool figure (XLA's cuda_async) nothing pairs: used - reserved is unknown.
        let (Some(since), Some(reserved)) = (stats.reserved_since, stats.reserved) else {
            return;
        };
        let bracketed = since <= reading.from && reading.to <= stats.time;
        if !bracketed || reserved > reading.used {
            return;
        }
        let beyond_pool = reading.used - reserved;
        let Some(entry) = slot(
            &mut self.learned,
            key,
            Learned {
                bytes: beyond_pool,
                source: ContextSource::Estimated,
                seen: now,
            },
        ) else {
            return;
        };
        if matches!(
            entry.source,
            ContextSource::Observed | ContextSource::Reported
        ) {
            return;
        }
        if reserved == 0 {
            *entry = Learned {
                bytes: reading.used,
                source: ContextSource::Observed,
                seen: now,
            };
        } else {
            entry.bytes = entry.bytes.min(beyond_pool);
        }
    }

    /// Forgets what was learned of processes unlisted for long, and the readings of those
    /// unlisted now; `kept` of the readings were listed before and now.
    fn forget(&mut self, now: f64, count: u64, kept: usize) {
        self.learned
            .retain(|_, l| now - l.seen <= FORGET_AFTER_SECS || now < l.seen);
        if self.learned.len() > MAX_REMEMBERED {
            let mut by_age: Vec<(f64, ProcessKey)> = self
                .learned
                .iter()
                .map(|(k, l)| (l.seen, k.clone()))
                .collect();
            by_age.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (_, key) in by_age.into_iter().take(self.learned.len() - MAX_REMEMBERED) {
                self.learned.remove(&key);
            }
        }
        // A reading waits for one sample only: it pairs with the next feed or never (a
        // process still listed keeps its reading through samples without one). Every
        // reading kept was listed in the sample before (the last retain saw to it): when
        // each of them is listed now and nothing new came, there is nothing to let go.
        if kept == self.pending.len() {
            return;
        }
        self.pending.retain(|_, (_, listed)| *listed == count);
    }

    /// The context of a process and where the figure comes from, if known.
    pub fn estimate(&self, process: &ProcessSample) -> Option<(u64, ContextSource)> {
        if let Some(bytes) = self.fixed_bytes {
            return Some((bytes, ContextSource::Fixed));
        }
        self.learned
            .get(&KeyRef::of(process))
            .map(|l| (l.bytes, l.source))
    }
}

/// The `context` of the hello device a feed's statistics are for.
pub(crate) fn reported_context<'a>(
    sample: &'a NodeSample,
    feed: &FeedSample,
) -> Option<&'a crate::sample::feed::ReportedContext> {
    let hello = sample.feeds.get(feed.feed)?.hello.as_ref()?;
    hello
        .devices
        .iter()
        .find(|d| d.index == feed.stats.index)?
        .context
        .as_ref()
}

fn reported(sample: &NodeSample, feed: &FeedSample) -> Option<u64> {
    reported_context(sample, feed)?.context_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::attach::FeedStatus;
    use crate::fixtures::*;
    use crate::sample::FeedSample;

    fn fed(used: u64, stats: AllocatorStats) -> NodeSample {
        let mut sample = node();
        sample.gpus.push(gpu(0, memory(80 * GIB, used)));
        let mut p = process(10, "GPU-test-0", Some(used));
        p.feed = Some(Box::new(FeedSample {
            framework: "torch".into(),
            framework_version: None,
            backend: "native".into(),
            feed: 0,
            stats,
        }));
        sample.processes.push(p);
        sample
    }

    fn at(sample: NodeSample, time: f64) -> NodeSample {
        NodeSample { time, ..sample }
    }

    const FRESH: [FeedStatus; 1] = [FeedStatus::Fresh { age: 0.0 }];

    /// What is kept of a process holds its sample's device name, not a copy of it: a node
    /// lists thousands of processes on a few devices.
    #[test]
    fn a_process_kept_shares_its_samples_device_name() {
        let mut c = ContextEstimator::learning();
        let s = at(fed(600 * MIB, stats(0, 0, 999.0, 1000.2)), 1000.0);
        c.observe(&s, &FRESH);
        let name = &s.processes[0].device_uuid;
        assert!(c.pending.keys().all(|k| Arc::ptr_eq(&k.device_uuid, name)));
        assert!(c.learned.keys().all(|k| Arc::ptr_eq(&k.device_uuid, name)));
        assert_eq!((c.pending.len(), c.learned.len()), (1, 1));
    }

    #[test]
    fn a_reading_while_the_pool_is_empty_is_the_observed_context() {
        let mut c = ContextEstimator::learning();
        // The feed sample (time 1000.2) comes after the reading (1000.0), pool empty since 999.
        let s = at(fed(600 * MIB, stats(0, 0, 999.0, 1000.2)), 1000.0);
        c.observe(&s, &FRESH);
        assert_eq!(
            c.estimate(&s.processes[0]),
            Some((600 * MIB, ContextSource::Observed))
        );
        // Later, with a pool and memory outside it, the observed context stays.
        let s = at(
            fed(30 * GIB, stats(8 * GIB, 20 * GIB, 1001.0, 1010.5)),
            1010.0,
        );
        c.observe(&s, &FRESH);
        assert_eq!(
            c.estimate(&s.processes[0]),
            Some((600 * MIB, ContextSource::Observed))
        );
    }

    #[test]
    fn a_reading_paired_across_samples_gives_an_estimate() {
        let mut c = ContextEstimator::learning();
        // Feed read before NVML: cannot pair yet.
        let s = at(
            fed(21 * GIB, stats(8 * GIB, 20 * GIB, 990.0, 999.6)),
            1000.0,
        );
        c.observe(&s, &FRESH);
        assert_eq!(c.estimate(&s.processes[0]), None);
        // The next feed sample says the pool has not moved since 990: the reading at 1000 pairs.
        let s = at(
            fed(21 * GIB, stats(8 * GIB, 20 * GIB, 990.0, 1000.6)),
            1001.0,
        );
        c.observe(&s, &FRESH);
        assert_eq!(
            c.estimate(&s.processes[0]),
            Some((GIB, ContextSource::Estimated))
        );
    }

    /// A reading waits one sample: a process unlisted for a sample (another listed in its
    /// place) pairs its old reading with nothing when it is listed again.
    #[test]
    fn a_reading_of_a_process_unlisted_since_pairs_with_nothing() {
        let mut c = ContextEstimator::learning();
        // Feed read before NVML: cannot pair yet.
        let s = at(
            fed(21 * GIB, stats(8 * GIB, 20 * GIB, 990.0, 999.6)),
            1000.0,
        );
        c.observe(&s, &FRESH);
        let mut other = at(node(), 1001.0);
        other.processes.push(process(11, "GPU-test-0", Some(GIB)));
        c.observe(&other, &[FeedStatus::Absent]);
        // This feed brackets the reading at 1000, not the one at 1002.
        let s = at(
            fed(22 * GIB, stats(8 * GIB, 20 * GIB, 990.0, 1001.6)),
            1002.0,
        );
        c.observe(&s, &FRESH);
        assert_eq!(c.estimate(&s.processes[0]), None);
        // Listed at each sample, the reading pairs.
        let s = at(
            fed(22 * GIB, stats(8 * GIB, 20 * GIB, 990.0, 1002.6)),
            1003.0,
        );
        c.observe(&s, &FRESH);
        assert_eq!(
            c.estimate(&s.processes[0]),
            Some((2 * GIB, ContextSource::Estimated))
        );
    }

    #[test]
    fn skewed_samples_never_ratchet_the_estimate_down() {
        let mut c = ContextEstimator::learning();
        let s = at(
            fed(21 * GIB, stats(8 * GIB, 20 * GIB, 990.0, 1000.5)),
            1000.0,
        );
        c.observe(&s, &FRESH);
        assert_eq!(c.estimate(&s.processes[0]).map(|e| e.0), Some(GIB));
        // The pool grew to 20.9 GiB just after NVML read 21 GiB (which still saw 20 GiB):
        // used - reserved would read 0.1 GiB. The feed says the pool moved at 1001.1, after the
        // reading at 1001.0, so the pair is refused.
        let grown = 20 * GIB + 900 * MIB;
        let s = at(fed(21 * GIB, stats(8 * GIB, grown, 1001.1, 1001.4)), 1001.0);
        c.observe(&s, &FRESH);
        let s = at(
            fed(21 * GIB + 900 * MIB, stats(8 * GIB, grown, 1001.1, 1002.4)),
            1002.0,
        );
        c.observe(&s, &FRESH);
        assert_eq!(
            c.estimate(&s.processes[0]),
            Some((GIB, ContextSource::Estimated)),
            "never 100 MiB"
        );
    }

    #[test]
    fn a_process_missing_from_one_sample_keeps_its_context() {
        let mut c = ContextEstimator::learning();
        let s = at(fed(600 * MIB, stats(0, 0, 999.0, 1000.2)), 1000.0);
        c.observe(&s, &FRESH);
        let process = s.processes[0].clone();
        let mut empty = at(node(), 1001.0);
        empty.gpus.push(gpu(0, memory(80 * GIB, 0)));
        c.observe(&empty, &[]);
        assert_eq!(
            c.estimate(&process),
            Some((600 * MIB, ContextSource::Observed))
        );
        // A reused pid (another start time) knows nothing.
        let mut other = process.clone();
        other.start_time = Some(1);
        assert_eq!(c.estimate(&other), None);
    }

    #[test]
    fn an_inconsistent_feed_teaches_nothing() {
        let mut c = ContextEstimator::learning();
        let s = at(fed(GIB, stats(0, 0, 999.0, 1000.2)), 1000.0);
        c.observe(&s, &[FeedStatus::Inconsistent { reason: "x".into() }]);
        assert_eq!(c.estimate(&s.processes[0]), None);
    }

    #[test]
    fn a_feed_without_a_pool_figure_pairs_nothing() {
        // XLA's cuda_async: used - reserved is unknown, so neither observed nor estimated.
        let mut c = ContextEstimator::learning();
        let mut unpooled = stats(0, 0, 999.0, 1000.2);
        unpooled.reserved = None;
        let s = at(fed(600 * MIB, unpooled.clone()), 1000.0);
        c.observe(&s, &FRESH);
        let s = at(fed(600 * MIB, unpooled), 1001.0);
        c.observe(&s, &FRESH);
        assert_eq!(c.estimate(&s.processes[0]), None);
    }

    #[test]
    fn a_fixed_size_answers_for_everyone() {
        let c = ContextEstimator::fixed(512 * MIB);
        let s = fed(GIB, stats(0, 0, 999.0, 1000.2));
        assert_eq!(
            c.estimate(&s.processes[0]),
            Some((512 * MIB, ContextSource::Fixed))
        );
    }
}

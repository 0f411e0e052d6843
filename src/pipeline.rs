//! The model's one direction of flow: raw sample → layers → history → findings.

use crate::accounting::attach::{attach, attach_reusing, Attachment};
use crate::accounting::{account, NodeAccount};
use crate::context::ContextEstimator;
use crate::detect::{
    detect_history_keyed, detect_instant, headroom_of, headrooms, settle, sort_findings, ClimbHold,
    Finding, FindingTracker, Headroom, Remembered, WarmUp,
};
use crate::history::{Handles, History, KeyRef, Metric};
use crate::layers::Layer;
use crate::sample::derived::{make_raw, FeedShape};
use crate::sample::NodeSample;

/// One of a reading's figures.
type Figure = fn(&crate::sample::AllocatorStats) -> Option<u64>;

/// One instant, with everything derived from it.
#[derive(Debug, Clone)]
pub struct Observed {
    /// The raw sample, with each process's feed attached.
    pub sample: NodeSample,
    /// How the feeds matched NVML's processes, and each feed's judgement.
    pub attachment: Attachment,
    pub account: NodeAccount,
    pub findings: Vec<Finding>,
    /// Each process's headroom (parallel to the sample's processes, up to the last that has
    /// one: read with `get`): how far its peak of live tensors can grow before an allocation
    /// of the same shape would fail. Empty from a pipeline that keeps none
    /// ([`Pipeline::headrooms`]).
    pub(crate) headroom: Vec<Option<Headroom>>,
    /// How the sample's feeds were read: raw, or rebuilt from the derived form of an older
    /// recording.
    pub(crate) feed_shape: FeedShape,
}

/// What the pipeline derives from a sample alone, before any state: the feeds in their raw
/// shape and matched to NVML's processes. A reading thread can do it ([`prepare`]).
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) feed_shape: FeedShape,
    pub(crate) attachment: Attachment,
    /// The sample's layers, where the thread that prepared it also keeps the context
    /// estimates (the analysis's reading thread: [`Accountant`]); otherwise the pipeline
    /// works them out from its own.
    pub(crate) account: Option<NodeAccount>,
}

/// The context estimates of a sequence of samples, kept apart from a [`Pipeline`] so that a
/// reading thread can work out each sample's layers ahead of the judging: they are a function
/// of the samples alone, in order. Every sample it accounts must be ingested, in the same
/// order, by a pipeline that keeps no estimates of its own.
#[derive(Debug, Clone, Default)]
pub(crate) struct Accountant {
    contexts: ContextEstimator,
}

impl Accountant {
    /// `context_bytes` as [`Pipeline::new`] takes it.
    pub(crate) fn new(context_bytes: Option<u64>) -> Self {
        Accountant {
            contexts: ContextEstimator::new(context_bytes),
        }
    }

    /// Learns from a prepared sample and works out its layers into `prepared.account`.
    pub(crate) fn account(&mut self, sample: &NodeSample, prepared: &mut Prepared) {
        self.contexts.observe(sample, &prepared.attachment.statuses);
        prepared.account = Some(account(sample, &prepared.attachment, &self.contexts));
    }
}

/// The feeds of an older recording's derived form rebuilt raw, then attached to the
/// sample's processes.
pub(crate) fn prepare(sample: &mut NodeSample) -> Prepared {
    let feed_shape = make_raw(sample);
    let attachment = attach(sample);
    Prepared {
        feed_shape,
        attachment,
        account: None,
    }
}

/// [`prepare`], the feeds attached made from `spare` where it holds any
/// ([`attach_reusing`]).
pub(crate) fn prepare_reusing(
    sample: &mut NodeSample,
    spare: &mut crate::accounting::attach::SpareFeeds,
) -> Prepared {
    let feed_shape = make_raw(sample);
    let attachment = attach_reusing(sample, spare);
    Prepared {
        feed_shape,
        attachment,
        account: None,
    }
}

/// The state that carries from one sample to the next.
#[derive(Debug, Default, Clone)]
pub struct Pipeline {
    pub(crate) contexts: ContextEstimator,
    pub(crate) tracker: FindingTracker,
    pub(crate) hold: ClimbHold,
    pub history: History,
    /// Where each listed process's series are in the history, kept from sample to sample.
    pub(crate) handles: Handles,
    /// What the detectors need that a later sample may not carry (an OOM's report).
    pub(crate) remembered: Remembered,
    /// The warm-up verdicts said.
    pub(crate) warm_up: WarmUp,
    /// Whether each sample's [`Observed::headroom`] is worked out (what the monitor, its
    /// exporter and a report show). An offline analysis, which shows none, leaves it empty:
    /// a warm-up verdict then works out only the headroom it reads.
    pub(crate) headrooms: bool,
}

impl Pipeline {
    /// `context_bytes` fixes every context estimate (`--context-mib`) instead of learning it.
    pub fn new(context_bytes: Option<u64>) -> Self {
        Pipeline {
            contexts: ContextEstimator::new(context_bytes),
            tracker: FindingTracker::default(),
            hold: ClimbHold::default(),
            history: History::default(),
            handles: Handles::default(),
            remembered: Remembered::default(),
            warm_up: WarmUp::default(),
            headrooms: true,
        }
    }

    /// Takes in one sample and returns it with its layers and findings.
    pub fn ingest(&mut self, sample: NodeSample) -> Observed {
        self.ingest_judging(sample, true)
    }

    /// [`Pipeline::ingest`], the detectors that read the history run only when `history`
    /// says so (an offline pass on a coarser clock): otherwise the findings are the
    /// instant's alone, and what the history's findings carry (their `since`, the climbs
    /// held) is kept as it was, for the next sample they run at.
    pub(crate) fn ingest_judging(&mut self, mut sample: NodeSample, history: bool) -> Observed {
        let prepared = prepare(&mut sample);
        self.ingest_prepared(sample, prepared, history)
    }

    /// [`Pipeline::ingest_judging`] of a sample already [`prepare`]d (a function of the
    /// sample alone: a reading thread can do it).
    pub(crate) fn ingest_prepared(
        &mut self,
        sample: NodeSample,
        prepared: Prepared,
        history: bool,
    ) -> Observed {
        let Prepared {
            feed_shape,
            attachment,
            account,
        } = prepared;
        let account = match account {
            Some(account) => {
                self.keep_accounted(&sample, &account);
                account
            }
            None => self.keep(&sample, &attachment),
        };
        let mut findings = Vec::new();
        if history {
            let (found, climbs) = detect_history_keyed(
                &sample,
                &account,
                &self.history,
                &self.handles,
                &self.remembered,
            );
            findings = found;
            self.hold
                .apply(&mut findings, climbs, &self.history, sample.time);
        }
        findings.extend(detect_instant(&sample, &attachment, &account));
        let headroom = if self.headrooms {
            headrooms(&sample, &account, &self.history)
        } else {
            Vec::new()
        };
        let room = |i: usize| {
            if self.headrooms {
                headroom.get(i).copied().flatten()
            } else {
                headroom_of(&sample, &account, &self.history, i)
            }
        };
        self.warm_up
            .apply(&sample, &self.history, room, &mut findings);
        sort_findings(&mut findings);
        self.tracker.stamp(&mut findings, sample.time);
        settle(&mut findings, sample.time);
        Observed {
            sample,
            attachment,
            account,
            findings,
            headroom,
            feed_shape,
        }
    }

    /// Takes in a sample as far as its layers, the history and what the samples alone
    /// decide (the context estimates, the OOMs remembered), judging nothing: the state
    /// [`Pipeline::ingest`] leaves, but for what judging carries (the findings' `since`,
    /// the climbs held, the warm-up verdicts).
    pub(crate) fn take_in(&mut self, mut sample: NodeSample) {
        let Prepared { attachment, .. } = prepare(&mut sample);
        self.keep(&sample, &attachment);
    }

    /// What every sample leaves, judged or not.
    fn keep(&mut self, sample: &NodeSample, attachment: &Attachment) -> NodeAccount {
        self.contexts.observe(sample, &attachment.statuses);
        let account = account(sample, attachment, &self.contexts);
        self.keep_accounted(sample, &account);
        account
    }

    /// What every sample leaves once its layers are worked out.
    fn keep_accounted(&mut self, sample: &NodeSample, account: &NodeAccount) {
        self.record(sample, account);
        self.remembered.observe(sample);
    }

    fn record(&mut self, sample: &NodeSample, account: &NodeAccount) {
        let time = sample.time;
        let history = &mut self.history;
        history.begin(time, sample.interval);
        let mut place = 0;
        for (gpu, acc) in sample.gpus.iter().zip(&account.gpus) {
            let mut devices = vec![(&gpu.uuid, &acc.layers, &acc.partial, acc.processes_known)];
            devices.extend(
                gpu.mig
                    .iter()
                    .zip(&acc.mig)
                    .map(|(m, macc)| (&m.uuid, &macc.layers, &macc.partial, macc.processes_known)),
            );
            for (uuid, layers, partial, processes_known) in devices {
                // Written through the device's handles, as a process's series are.
                let handles = self.handles.device(place, uuid);
                place += 1;
                let layers = layers.as_ref().ok();
                history.record_through(
                    &mut handles[0],
                    KeyRef::Device(uuid, Metric::Used),
                    std::iter::once((time, layers.map(|l| l.occupied()))),
                );
                // `free` is the total less `Used`; every other layer has its own series. A
                // layer only partly known (a feed gone stale) is a gap, not a dip; so is
                // `other` while a process list is unread (the unlisted processes' bytes are
                // in it: a climb of theirs is no climb of `other`).
                for layer in Layer::ALL.into_iter().filter(|&l| l != Layer::Free) {
                    let value = layers
                        .and_then(|l| l.get(layer))
                        .filter(|_| !partial.contains(&layer))
                        .filter(|_| layer != Layer::Other || processes_known);
                    history.record_through(
                        &mut handles[1 + layer as usize],
                        KeyRef::Device(uuid, Metric::Layer(layer)),
                        std::iter::once((time, value)),
                    );
                }
            }
        }
        self.handles.devices_listed(place);
        self.handles.listed(sample.processes.len());
        for (place, (p, acc)) in sample.processes.iter().zip(&account.processes).enumerate() {
            let key = |metric| KeyRef::of(p, metric);
            // Each series written through its handle: found by its name only the first time.
            let slots = self.handles.of(place, p);
            let now = |value| std::iter::once((time, value));
            history.record_through(&mut slots.used, key(Metric::Used), now(p.used));
            if p.sm_util.is_some() || history.get(&key(Metric::Sm)).is_some() {
                history.record_through(
                    &mut slots.sm,
                    key(Metric::Sm),
                    now(p.sm_util.map(u64::from)),
                );
            }
            let Some(feed) = &p.feed else { continue };
            // A fed process's handles, made at its first feed.
            let [allocated, reserved, inactive_split, peak_allocated, retries, ooms, outside_pool] =
                slots.fed();
            // The allocator's figures at the instant the agent read them; a feed met for the
            // first time brings its backlog (the warm-up before this monitor started), and
            // each later sample what arrived since the previous one.
            let earlier = feed.earlier(sample);
            let readings = || earlier.iter().chain(std::iter::once(&feed.stats));
            let mut id = None; // made for the first step-end reading, if any
            for stats in readings() {
                if let Some(step) = stats.step_end() {
                    history.record_step(
                        id.get_or_insert_with(|| crate::history::ProcessId::of(p)),
                        crate::history::StepPoint {
                            step,
                            time: stats.time,
                            allocated: stats.allocated,
                            reserved: stats.reserved,
                            peak_allocated: stats.peak_allocated,
                        },
                    );
                }
            }
            // Each series found once for all the readings.
            let figures: [(Metric, Figure, _); 6] = [
                (Metric::Allocated, |s| Some(s.allocated), allocated),
                (Metric::Reserved, |s| s.reserved, reserved),
                (Metric::InactiveSplit, |s| s.inactive_split, inactive_split),
                (Metric::PeakAllocated, |s| s.peak_allocated, peak_allocated),
                (Metric::Retries, |s| s.alloc_retries, retries),
                (Metric::Ooms, |s| s.ooms, ooms),
            ];
            for (metric, figure, handle) in figures {
                let points = readings().map(|s| (s.time, figure(s)));
                history.record_through(handle, key(metric), points);
            }
            history.record_through(
                outside_pool,
                key(Metric::OutsidePool),
                now(acc.layers.outside_pool),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    /// A series found through the handles of the sample just recorded is the one its name
    /// finds, at the process's place and at any other (where it falls back to the name),
    /// through processes that come, go and change places.
    #[test]
    fn a_series_found_through_its_handle_is_the_one_its_name_finds() {
        let mut pipeline = Pipeline::new(None);
        let lists: [&[u32]; 4] = [&[10, 11, 12], &[11, 10, 12], &[12, 13], &[10, 12, 13]];
        for (i, pids) in lists.into_iter().enumerate() {
            let mut sample = node();
            sample.time += i as f64;
            sample.gpus.push(gpu(0, memory(80 * GIB, 48 * GIB)));
            for &pid in pids {
                let mut p = process(pid, "GPU-test-0", Some(u64::from(pid) * GIB));
                // One process without SM figures: its series is never written.
                if pid == 12 {
                    p.sm_util = None;
                }
                sample.processes.push(p);
            }
            // PID 10 is fed: its allocator's series are written too.
            let latest = crate::sample::AllocatorStats {
                alloc_retries: Some(0),
                ooms: Some(0),
                peak_allocated: Some(5 * GIB),
                inactive_split: Some(GIB),
                ..stats(4 * GIB, 8 * GIB, 990.0, sample.time - 0.2)
            };
            sample.feeds.push(feed_on_gpu_0(10, latest, Vec::new()));
            let observed = pipeline.ingest(sample);
            let history = &pipeline.history;
            let mut found = 0;
            for p in &observed.sample.processes {
                for metric in [
                    Metric::Used,
                    Metric::Sm,
                    Metric::Allocated,
                    Metric::Reserved,
                    Metric::InactiveSplit,
                    Metric::PeakAllocated,
                    Metric::Retries,
                    Metric::Ooms,
                    Metric::OutsidePool,
                ] {
                    let key = crate::history::KeyRef::of(p, metric);
                    let named = history.get(&key);
                    found += usize::from(named.is_some());
                    for place in 0..=pids.len() {
                        let listed = history.get_listed(&pipeline.handles, place, key);
                        assert!(
                            std::ptr::eq(
                                listed.map_or(std::ptr::null(), |s| s as *const _),
                                named.map_or(std::ptr::null(), |s| s as *const _)
                            ),
                            "sample {i}, PID {}, {metric:?}, place {place}",
                            p.pid
                        );
                    }
                }
            }
            // Used for each, SM for each but PID 12, and PID 10's allocator's seven.
            let fed = if pids.contains(&10) { 7 } else { 0 };
            assert_eq!(found, 2 * pids.len() - 1 + fed, "sample {i}");
        }
    }

    /// While a GPU's process list is unread, its `other` holds the unlisted processes'
    /// memory: the history has a gap there, not a climb of theirs; read again, it is kept.
    #[test]
    fn other_is_not_kept_while_the_process_list_is_unread() {
        let mut pipeline = Pipeline::new(None);
        let other = |pipeline: &Pipeline| {
            pipeline
                .history
                .get(&crate::history::SeriesKey::device(
                    "GPU-test-0",
                    Metric::Layer(Layer::Other),
                ))
                .and_then(|s| s.last())
        };
        for (i, known) in [(0u32, true), (1, false), (2, true)] {
            let mut sample = node();
            sample.time += f64::from(i);
            let mut g = gpu(0, memory(80 * GIB, (10 + u64::from(i)) * GIB));
            g.processes_known = known;
            sample.gpus.push(g);
            pipeline.ingest(sample);
            let kept = other(&pipeline);
            assert_eq!(
                kept,
                known.then_some((10 + u64::from(i)) * GIB),
                "sample {i}, list read: {known}"
            );
        }
    }

    /// A monitor that meets a feed late draws the warm-up the agent kept, at its own spacing.
    #[test]
    fn a_new_feeds_backlog_goes_into_the_process_history() {
        let mut sample = node();
        sample.gpus.push(gpu(0, memory(80 * GIB, 10 * GIB)));
        sample
            .processes
            .push(process(7, "GPU-test-0", Some(10 * GIB)));
        // Warm-up every 0.5 s from 980 to 999.5: live grows by 100 MiB a step.
        let earlier = (0u32..40)
            .map(|i| {
                stats(
                    u64::from(i) * 100 * MIB,
                    8 * GIB,
                    0.0,
                    980.0 + f64::from(i) / 2.0,
                )
            })
            .collect();
        sample.feeds.push(feed_on_gpu_0(
            7,
            stats(4 * GIB, 8 * GIB, 990.0, 999.8),
            earlier,
        ));
        let mut pipeline = Pipeline::new(None);
        let observed = pipeline.ingest(sample);
        let p = &observed.sample.processes[0];
        let series = pipeline
            .history
            .get(&crate::history::SeriesKey::process(
                p.pid,
                p.start_time,
                &p.device_uuid,
                Metric::Allocated,
            ))
            .expect("series");
        let points: Vec<(f64, Option<u64>)> = series.raw().collect();
        assert_eq!(
            points.first().map(|p| p.0),
            Some(980.0),
            "from the start of the backlog"
        );
        assert_eq!(
            points.last().map(|p| p.0),
            Some(1000.0),
            "then this instant"
        );
        assert!(points.iter().all(|(_, v)| v.is_some()), "{points:?}");
        assert!(
            points.windows(2).all(|w| w[1].0 - w[0].0 == 1.0),
            "one slot a second: {points:?}"
        );
        assert_eq!(series.recent(1), vec![Some(4 * GIB)]);
    }

    /// A sample's headrooms reach as far as its last fed process: a node without feeds
    /// keeps none, and a fed process's is where its place says.
    #[test]
    fn headrooms_are_kept_up_to_the_last_fed_process() {
        let mut pipeline = Pipeline::new(None);
        let mut sample = node();
        sample.gpus.push(gpu(0, memory(80 * GIB, 30 * GIB)));
        for pid in [5, 7, 9] {
            sample
                .processes
                .push(process(pid, "GPU-test-0", Some(10 * GIB)));
        }
        let observed = pipeline.ingest(sample.clone());
        assert!(observed.headroom.is_empty(), "{:?}", observed.headroom);
        assert_eq!(observed.headroom.capacity(), 0);

        sample.time += 1.0;
        sample.feeds.push(feed_on_gpu_0(
            7,
            stats(4 * GIB, 8 * GIB, 990.0, 1000.8),
            Vec::new(),
        ));
        let observed = pipeline.ingest(sample);
        assert_eq!(observed.headroom.len(), 2, "{:?}", observed.headroom);
        assert!(observed.headroom[0].is_none());
        assert!(observed.headroom[1].is_some(), "{:?}", observed.headroom);
    }
}

//! Findings from history: climbs with their cause, fragmentation, allocation retries, OOMs
//! with their class, capacity, idle holders. Pure: history and the instant in, findings out
//! (what must be remembered across samples, an OOM's report, is the pipeline's, passed in).
//!
//! Along its seams: `climbs` (what rises, and why), `pressure` (fragmentation, retries),
//! `oom` (OOMs and their class), `usage` (capacity, idle holders).

mod climbs;
mod forecast;
mod oom;
mod pressure;
pub(crate) mod steps;
mod usage;

pub(crate) use forecast::Headroom;
pub(crate) use oom::classify;
pub(crate) use oom::OomMemory;

use super::judged::judged;
use super::trend::climbing;
use super::{device_name, Findings};
use crate::accounting::NodeAccount;
use crate::history::{Handles, History, KeyRef, Metric, ProcessId, Series, SeriesKey};
use crate::layers::Layer;
use crate::sample::NodeSample;
use crate::units::bytes;
use climbs::Climber;

const MIB: f64 = (1u64 << 20) as f64;

/// What a climbing series says is growing, in the JSON's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    Live,
    Cache,
    OutsidePool,
    Unattributed,
    NoProcess,
}

impl Cause {
    fn name(self) -> &'static str {
        match self {
            Cause::Live => Layer::Live.name(),
            Cause::Cache => Layer::Cached.name(),
            Cause::OutsidePool => Layer::OutsidePool.name(),
            Cause::Unattributed => Layer::Unattributed.name(),
            Cause::NoProcess => "no_process",
        }
    }

    fn says(self) -> &'static str {
        match self {
            Cause::Live => "live tensors climbing: references kept?",
            Cause::Cache => {
                "the allocator's cached memory climbing while live tensors are flat: a widening mix of shapes?"
            }
            Cause::OutsidePool => {
                "memory outside the pool climbing (NCCL, cuDNN, custom CUDA?)"
            }
            Cause::Unattributed => "its memory climbing (no feed, or no pool figure, to say which layer)",
            Cause::NoProcess => "memory no listed process holds climbing",
        }
    }
}

/// What a fed process's allocator is and how it is set, as its advice needs: whose allocator
/// (`torch`, `jax`...), and whether it runs with `expandable_segments` (from the latest
/// `hello`'s settings; unknown where the agent does not say).
#[derive(Debug, Clone, Default)]
pub(super) struct Setup {
    pub(super) framework: Option<String>,
    pub(super) expandable_segments: Option<bool>,
    /// The pinned segments of the process's device in the agent's latest segment map, and
    /// when it was taken.
    pub(super) pinned: Option<(crate::sample::pool::Pinned, f64)>,
}

impl Setup {
    pub(super) fn of(sample: &NodeSample, feed: &crate::sample::FeedSample) -> Setup {
        let expandable_segments = sample
            .feeds
            .get(feed.feed)
            .and_then(|record| record.hello.as_ref())
            .and_then(|hello| hello.settings.get("expandable_segments"))
            .and_then(serde_json::Value::as_bool);
        let pinned = sample
            .feeds
            .get(feed.feed)
            .and_then(|record| record.segments.as_deref())
            .and_then(|map| {
                map.devices
                    .iter()
                    .find(|d| d.index == feed.stats.index)
                    .map(|d| (d.pinned(), map.time))
            });
        Setup {
            framework: Some(feed.framework.clone()).filter(|f| !f.is_empty()),
            expandable_segments,
            pinned,
        }
    }

    /// `; 12 segments (24.0 GiB) are pinned by 63.0 MiB of live tensors`, where the map says
    /// any are.
    pub(super) fn pinned_words(&self) -> String {
        match self.pinned {
            Some((p, _)) if p.segments > 0 => format!(
                "; {} segment{} ({}) pinned by {} of live tensors",
                p.segments,
                if p.segments == 1 { "" } else { "s" },
                bytes(p.reserved),
                bytes(p.live)
            ),
            _ => String::new(),
        }
    }
}

fn mib_per_min(rate: f64) -> f64 {
    rate * 60.0 / MIB
}

/// The series' name in a climb's evidence.
fn metric_name(metric: Metric) -> &'static str {
    match metric {
        Metric::Used => "used",
        Metric::Layer(layer) => layer.name(),
        Metric::Allocated => "allocated",
        Metric::Reserved => "reserved",
        Metric::InactiveSplit => "inactive_split",
        Metric::PeakAllocated => "peak_allocated",
        Metric::OutsidePool => Layer::OutsidePool.name(),
        Metric::Retries => "alloc_retries",
        Metric::Ooms => "ooms",
        Metric::Sm => "sm_util",
    }
}

pub(super) fn series<'a>(
    history: &'a History,
    id: &ProcessId,
    metric: Metric,
) -> Option<&'a Series> {
    history.get(&KeyRef::of_process(id, metric))
}

/// The change of a counter over a window ending now: its last value less its least, or
/// `None` where it is not known; a counter that reset (a restart) counts from its reset.
pub(super) fn counter_rise(series: &Series, now: f64, window: f64) -> Option<u64> {
    let span = series.chunk(now, window)?;
    Some(span.last.saturating_sub(span.min))
}

pub(super) fn detect(
    sample: &NodeSample,
    account: &NodeAccount,
    history: &History,
    handles: &Handles,
    memory: &OomMemory,
    out: &mut Findings,
) {
    let now = sample.time;
    let mut climbing_devices: Vec<&str> = Vec::new();
    for (place, (p, acc)) in sample.processes.iter().zip(&account.processes).enumerate() {
        // The series the sample's own writes got: found through their handles.
        let listed = |metric| history.get_listed(handles, place, KeyRef::of(p, metric));
        let id = ProcessId::of(p);
        let place = device_name(sample, &p.device_uuid);
        let who = format!("PID {} on {place}", p.pid);
        let found = if let Some(feed) = &p.feed {
            climbs::fed(history, &id, now).or_else(|| {
                // No pool figure (XLA's cuda_async): what lies beyond the live tensors is not
                // split, and climbs as NVML's figure does; live tensors rising beside it
                // are its cause (their own series too noisy to show the climb alone).
                feed.stats
                    .reserved
                    .is_none()
                    .then(|| listed(Metric::Used).and_then(|s| climbing(s, now)))
                    .flatten()
                    .map(|c| {
                        (
                            climbs::unpooled_cause(history, &id, now, &c),
                            c,
                            Metric::Used,
                        )
                    })
            })
        } else if p.visible {
            listed(Metric::Used)
                .and_then(|s| climbing(s, now))
                .map(|c| (Cause::Unattributed, c, Metric::Used))
        } else {
            None
        };
        let found = found.map(|(cause, climb, metric)| climbs::Found {
            cause,
            climb,
            key: SeriesKey::Process(id.clone(), metric),
            per_step: None,
            warm_up: None,
        });
        // A process that reports steps: judged on its step-end readings too.
        let found = match (p.feed.as_ref().and(history.steps(&id)), found) {
            (Some(s), found) => climbs::with_steps(s, found, &id),
            (None, found) => found,
        };
        if let Some(found) = found {
            climbing_devices.push(&p.device_uuid);
            let climber = Climber {
                device: &p.device_uuid,
                who: &who,
                process: Some((p, acc.feed_status.is_usable())),
                grew: p.feed.as_ref().and_then(|f| climbs::grew_most(sample, f)),
            };
            climbs::raise(out, now, &climber, &found);
            forecast::forecast(out, sample, history, &found, &climber);
        }
        if let Some(feed) = &p.feed {
            let setup = Setup::of(sample, feed);
            pressure::fragmentation(out, now, history, &id, &who, &feed.stats, &setup);
            pressure::retries(out, now, history, &id, &who);
        }
        usage::idle(out, now, || listed(Metric::Sm), &id, p, &who);
    }
    oom::ooms(sample, history, memory, out);
    for (gpu, gpu_account) in sample.gpus.iter().zip(&account.gpus) {
        if gpu.lost {
            continue;
        }
        for device in judged(gpu, gpu_account) {
            if device.repeats_instances {
                continue;
            }
            let uuid = device.uuid;
            let place = device_name(sample, uuid);
            let processes_climb = device.members.iter().any(|m| climbing_devices.contains(m));
            let key = SeriesKey::device(uuid, Metric::Layer(Layer::Other));
            if let (false, Some(climb)) = (
                processes_climb,
                history.get(&key).and_then(|s| climbing(s, now)),
            ) {
                let found = climbs::Found {
                    cause: Cause::NoProcess,
                    climb,
                    key,
                    per_step: None,
                    warm_up: None,
                };
                let climber = Climber {
                    device: uuid,
                    who: &place,
                    process: None,
                    grew: None,
                };
                climbs::raise(out, now, &climber, &found);
                forecast::forecast(out, sample, history, &found, &climber);
            }
            let total = device.memory.map(|m| m.total);
            let layers = device.layers.as_ref().ok();
            usage::capacity(out, history, uuid, layers, total, &place);
        }
    }
}

/// Each process's headroom (parallel to the sample's processes, up to the last that has
/// one): `None` for a process without a feed combined at this instant. A node without feeds
/// has none, and keeps no room for them (56 bytes a process).
pub(crate) fn headrooms(
    sample: &NodeSample,
    account: &NodeAccount,
    history: &History,
) -> Vec<Option<Headroom>> {
    let mut rooms: Vec<Option<Headroom>> = (0..sample.processes.len())
        .map(|i| headroom_of(sample, account, history, i))
        .collect();
    let kept = rooms.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
    rooms.truncate(kept);
    rooms.shrink_to_fit();
    rooms
}

/// The headroom of the sample's process `i` (see [`headrooms`]).
pub(crate) fn headroom_of(
    sample: &NodeSample,
    account: &NodeAccount,
    history: &History,
    i: usize,
) -> Option<Headroom> {
    let (p, acc) = (sample.processes.get(i)?, account.processes.get(i)?);
    forecast::headroom(sample, history, p, acc.feed_status.is_usable())
}

//! Pure functions from a raw sample to layers (ARCHITECTURE.md, "Layers"). No I/O.
//!
//! [`attach`] first matches each feed to the processes NVML lists and judges whether it can
//! be combined with NVML's instant; [`account`] then splits each device into its layers.

pub(crate) mod attach;
mod device;
mod group;

pub use device::{partition, Gap, Partition};
pub(crate) use group::{groups, GroupBy, GroupRow};

use crate::context::{ContextEstimator, ContextSource};
use crate::layers::{Layer, Layers};
use crate::sample::{NodeSample, ProcessSample};
use attach::Attachment;
pub use attach::FeedStatus;
use serde::Serialize;

/// The layers of one process on its device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ProcessLayers {
    pub context: Option<u64>,
    pub outside_pool: Option<u64>,
    pub cached: Option<u64>,
    pub fragmented: Option<u64>,
    pub live: Option<u64>,
    pub unattributed: Option<u64>,
}

impl ProcessLayers {
    /// This process's share of its device's partition.
    pub(crate) fn as_device_share(&self) -> Layers {
        Layers {
            context: self.context,
            outside_pool: self.outside_pool,
            cached: self.cached,
            fragmented: self.fragmented,
            live: self.live,
            unattributed: self.unattributed,
            other: None,
            free: None,
        }
    }
}

/// Which side of the truth a figure derived from a bound stands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Bound {
    /// The truth is this or less.
    Upper,
    /// The truth is this or more.
    Lower,
}

impl Bound {
    /// The mark before the figure on screen.
    pub(crate) fn mark(self) -> &'static str {
        match self {
            Bound::Upper => "≤",
            Bound::Lower => "≥",
        }
    }
}

/// Layers that are bounds rather than exact, by layer (the JSON's `bounds` map).
pub(crate) type Bounds = std::collections::BTreeMap<Layer, Bound>;

/// The layers a context figure of this source makes bounds of, where `outside_pool` is
/// known: an estimated (or not yet split) context is an upper bound, so the memory outside
/// the pool, which is what is left of NVML's figure beside it, is a lower bound.
pub(crate) fn context_bounds(source: Option<ContextSource>, outside_known: bool) -> Bounds {
    let mut bounds = Bounds::new();
    if let Some(ContextSource::Estimated | ContextSource::Unsplit) = source {
        bounds.insert(Layer::Context, Bound::Upper);
        if outside_known {
            bounds.insert(Layer::OutsidePool, Bound::Lower);
        }
    }
    bounds
}

/// The layers of a device that are bounds, not exact: those of the least exact context summed
/// in it ([`context_bounds`]), and `other` where the device's processes could not be listed:
/// what NVML says is occupied less nothing known, held by the unlisted processes as much as
/// by none, so at most that.
pub(crate) fn device_bounds(
    layers: Option<&Layers>,
    source: Option<ContextSource>,
    processes_known: bool,
) -> Bounds {
    let mut bounds = context_bounds(source, layers.is_some_and(|l| l.outside_pool.is_some()));
    if !processes_known && layers.is_some_and(|l| l.other.is_some()) {
        bounds.insert(Layer::Other, Bound::Upper);
    }
    bounds
}

/// A process's accounting: its layers, whether its feed was used, and where its context
/// figure comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessAccount {
    pub layers: ProcessLayers,
    pub feed_status: FeedStatus,
    pub context_source: Option<ContextSource>,
}

impl ProcessAccount {
    /// Its layers that are bounds, not exact.
    pub(crate) fn bounds(&self) -> Bounds {
        context_bounds(self.context_source, self.layers.outside_pool.is_some())
    }
}

/// Splits one process's usage (ARCHITECTURE.md, "Layers"):
/// NVML used = context + outside_pool + reserved, reserved = live + fragmented + cached.
/// `feed_status` is the judgement [`crate::accounting::attach::attach`] made of its feed.
pub(crate) fn account_process(
    process: &ProcessSample,
    feed_status: &FeedStatus,
    contexts: &ContextEstimator,
) -> ProcessAccount {
    let mut layers = ProcessLayers::default();
    let mut context_source = None;
    match (&process.feed, feed_status.is_usable()) {
        (Some(feed), true) => {
            let stats = &feed.stats;
            layers.live = Some(stats.allocated);
            match stats.reserved {
                Some(reserved) => {
                    let fragmented = stats.inactive_split;
                    layers.fragmented = fragmented;
                    // The judgement checked allocated + fragmented <= reserved.
                    layers.cached = Some(reserved - stats.allocated - fragmented.unwrap_or(0));
                    if let Some(used) = process.used {
                        // The judgement checked reserved <= used.
                        let beyond_pool = used - reserved;
                        match contexts.estimate(process) {
                            Some((context, source)) => {
                                let context = context.min(beyond_pool);
                                layers.context = Some(context);
                                layers.outside_pool = Some(beyond_pool - context);
                                context_source = Some(source);
                            }
                            None => {
                                // Not split yet: context and what lies outside the pool.
                                layers.context = Some(beyond_pool);
                                context_source = Some(ContextSource::Unsplit);
                            }
                        }
                    }
                }
                None => {
                    // The allocator does not report its pool (XLA's cuda_async): live is
                    // known, and the rest of NVML's figure (pool, context, memory outside the
                    // pool) is not split. The judgement checked allocated <= used.
                    if process.visible {
                        layers.unattributed = process.used.map(|used| used - stats.allocated);
                    }
                }
            }
        }
        _ => {
            // Without a usable feed nothing can be split; a PID that is not visible here is
            // nobody's to attribute to, so its bytes fall into the device's `other`.
            if process.visible {
                layers.unattributed = process.used;
            }
        }
    }
    ProcessAccount {
        layers,
        feed_status: feed_status.clone(),
        context_source,
    }
}

/// One MIG device's (compute instance's) account. Memory belongs to the GPU instance: the
/// compute instances of one GPU instance share one partition, with all their processes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigAccount {
    /// The partition of its GPU instance (the same for each of the instance's CIs).
    pub layers: Result<Layers, Gap>,
    pub partial: Vec<Layer>,
    /// The least exact source among its GPU instance's processes' contexts.
    pub(crate) context_source: Option<ContextSource>,
    /// Positions, in the GPU's `mig`, of the compute instances of this one's GPU instance,
    /// itself included, in order: the first of them stands for the GPU instance on screen.
    pub(crate) gpu_instance_members: Vec<usize>,
    /// Every process list of its GPU instance was read: `other` is exact, not a bound.
    pub(crate) processes_known: bool,
}

impl MigAccount {
    /// Its layers that are bounds, not exact ([`device_bounds`]).
    pub(crate) fn bounds(&self) -> Bounds {
        device_bounds(
            self.layers.as_ref().ok(),
            self.context_source,
            self.processes_known,
        )
    }

    /// Whether this compute instance stands for its GPU instance (the first of its members).
    pub(crate) fn leads(&self, position: usize) -> bool {
        self.gpu_instance_members.first() == Some(&position)
    }
}

/// One GPU's layers (all its processes, MIG instances included) and those of its instances.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuAccount {
    pub layers: Result<Layers, Gap>,
    pub partial: Vec<Layer>,
    pub(crate) context_source: Option<ContextSource>,
    pub mig: Vec<MigAccount>,
    /// Every process list of the GPU (and of its MIG devices) was read: `other` is exact,
    /// not a bound.
    pub(crate) processes_known: bool,
}

impl GpuAccount {
    /// Its layers that are bounds, not exact ([`device_bounds`]).
    pub(crate) fn bounds(&self) -> Bounds {
        device_bounds(
            self.layers.as_ref().ok(),
            self.context_source,
            self.processes_known,
        )
    }
}

/// The least exact of the context sources of some processes: the sum is only as exact as
/// its least exact part.
fn least_exact<'a>(accounts: impl Iterator<Item = &'a ProcessAccount>) -> Option<ContextSource> {
    let rank = |s: ContextSource| match s {
        ContextSource::Unsplit => 0,
        ContextSource::Estimated => 1,
        ContextSource::Fixed => 2,
        ContextSource::Reported => 3,
        ContextSource::Observed => 4,
    };
    accounts
        .filter_map(|a| a.context_source)
        .min_by_key(|&s| rank(s))
}

/// The MIG devices of a GPU grouped by GPU instance, in order of first appearance: each
/// group's positions in `mig`. A device without a GPU instance id is its own group.
pub(crate) fn gpu_instances(mig: &[crate::sample::MigSample]) -> Vec<Vec<usize>> {
    let mut groups: Vec<(Option<u32>, Vec<usize>)> = Vec::new();
    for (i, m) in mig.iter().enumerate() {
        match m.gpu_instance_id {
            Some(id) => match groups.iter_mut().find(|(g, _)| *g == Some(id)) {
                Some((_, members)) => members.push(i),
                None => groups.push((Some(id), vec![i])),
            },
            None => groups.push((None, vec![i])),
        }
    }
    groups.into_iter().map(|(_, members)| members).collect()
}

/// The layers of a whole node sample. `gpus` and `processes` are parallel to the sample's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeAccount {
    pub gpus: Vec<GpuAccount>,
    pub processes: Vec<ProcessAccount>,
}

/// Computes every layer of a sample whose feeds are attached (`attachment`). `contexts` must
/// have observed this sample already.
pub fn account(
    sample: &NodeSample,
    attachment: &Attachment,
    contexts: &ContextEstimator,
) -> NodeAccount {
    let processes: Vec<ProcessAccount> = sample
        .processes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let status = attachment.statuses.get(i).unwrap_or(&FeedStatus::Absent);
            account_process(p, status, contexts)
        })
        .collect();
    let accounts_on = |uuid: &str| -> Vec<(&ProcessSample, &ProcessAccount)> {
        sample
            .processes
            .iter()
            .zip(&processes)
            .filter(|(p, _)| *p.device_uuid == *uuid)
            .collect()
    };
    let holders = holders(sample);
    let gpus = sample
        .gpus
        .iter()
        .enumerate()
        .map(|(g, gpu)| {
            let mut mig: Vec<Option<MigAccount>> = vec![None; gpu.mig.len()];
            for members in gpu_instances(&gpu.mig) {
                let on: Vec<(&ProcessSample, &ProcessAccount)> = members
                    .iter()
                    .flat_map(|&i| accounts_on(&gpu.mig[i].uuid))
                    .collect();
                let lead = &gpu.mig[members[0]];
                let known = members.iter().all(|&i| gpu.mig[i].processes_known);
                let context_source = least_exact(on.iter().map(|(_, a)| *a));
                let Partition { layers, partial } =
                    partition(lead.memory.as_ref(), gpu.lost, known, on.into_iter());
                for &i in &members {
                    mig[i] = Some(MigAccount {
                        layers: layers.clone(),
                        partial: partial.clone(),
                        context_source,
                        gpu_instance_members: members.clone(),
                        processes_known: known,
                    });
                }
            }
            let on_gpu = sample
                .processes
                .iter()
                .zip(&processes)
                .zip(&holders)
                .filter(|((p, _), held)| match held {
                    Some(mask) => mask & (1 << g) != 0,
                    None => gpu.holds(&p.device_uuid),
                })
                .map(|(on, _)| on);
            let known = gpu.processes_known && gpu.mig.iter().all(|m| m.processes_known);
            let context_source = least_exact(on_gpu.clone().map(|(_, a)| a));
            let Partition { layers, partial } =
                partition(gpu.memory.as_ref(), gpu.lost, known, on_gpu);
            GpuAccount {
                layers,
                partial,
                context_source,
                mig: mig.into_iter().flatten().collect(),
                processes_known: known,
            }
        })
        .collect();
    NodeAccount { gpus, processes }
}

/// Which of the sample's GPUs hold each process's device (a bit per GPU, in order; `None`
/// past 64 GPUs, where each GPU is asked), worked out once a process rather than once a
/// process and GPU, and once a run of processes on one device: a sample lists a device's
/// processes together, and a UUID compared is most of the cost.
fn holders(sample: &NodeSample) -> Vec<Option<u64>> {
    let mut out = Vec::with_capacity(sample.processes.len());
    let mut before: Option<(&str, Option<u64>)> = None;
    for p in &sample.processes {
        let mask = match before {
            Some((uuid, mask)) if *uuid == *p.device_uuid => mask,
            _ => (sample.gpus.len() <= 64).then(|| {
                sample
                    .gpus
                    .iter()
                    .enumerate()
                    .filter(|(_, gpu)| gpu.holds(&p.device_uuid))
                    .fold(0u64, |mask, (g, _)| mask | 1 << g)
            }),
        };
        before = Some((&p.device_uuid, mask));
        out.push(mask);
    }
    out
}

#[cfg(test)]
mod tests;

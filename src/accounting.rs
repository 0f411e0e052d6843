//! Pure functions from a raw sample to layers (DESIGN.md §1). No I/O.

use crate::context::{ContextEstimator, ContextSource};
use crate::feed::attach::Attachment;
pub use crate::feed::attach::FeedStatus;
use crate::layers::{Layer, Layers};
use crate::sample::{DeviceMemory, NodeSample, ProcessSample};
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
    fn as_device_share(&self) -> Layers {
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

/// A process's accounting: its layers, whether its feed was used, and where its context
/// figure comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessAccount {
    pub layers: ProcessLayers,
    pub feed_status: FeedStatus,
    pub context_source: Option<ContextSource>,
}

/// Splits one process's usage (DESIGN.md §1):
/// NVML used = context + outside_pool + reserved, reserved = live + fragmented + cached.
/// `feed_status` is the judgement [`crate::feed::attach::attach`] made of its feed.
pub fn account_process(
    process: &ProcessSample,
    feed_status: &FeedStatus,
    contexts: &ContextEstimator,
) -> ProcessAccount {
    let mut layers = ProcessLayers::default();
    let mut context_source = None;
    match (&process.feed, feed_status.is_usable()) {
        (Some(feed), true) => {
            let stats = &feed.stats;
            let fragmented = stats.inactive_split;
            layers.live = Some(stats.allocated);
            layers.fragmented = fragmented;
            // The judgement checked allocated + fragmented <= reserved.
            layers.cached = Some(stats.reserved - stats.allocated - fragmented.unwrap_or(0));
            if let Some(used) = process.used {
                // The judgement checked reserved <= used.
                let beyond_pool = used - stats.reserved;
                match contexts.estimate(process) {
                    Some((context, source)) => {
                        let context = context.min(beyond_pool);
                        layers.context = Some(context);
                        layers.outside_pool = Some(beyond_pool - context);
                        context_source = Some(source);
                    }
                    None => {
                        // Not split yet: context and what lies outside the pool, together.
                        layers.context = Some(beyond_pool);
                        context_source = Some(ContextSource::Unsplit);
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

/// Why a device's layers could not be computed at this instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Gap {
    /// The GPU fell off the bus.
    Lost,
    /// NVML did not give the device's memory.
    MemoryUnknown,
    /// NVML's memory answer contradicts itself.
    FreeExceedsTotal { total: u64, free: u64 },
    /// The processes account for more than the device says is occupied (readings from
    /// slightly different instants, or a driver bug): no exact partition exists.
    ProcessesExceedOccupied { attributed: u64, occupied: u64 },
}

impl Gap {
    pub fn describe(&self) -> String {
        match self {
            Gap::Lost => "GPU lost (fallen off the bus)".into(),
            Gap::MemoryUnknown => "memory not reported by NVML".into(),
            Gap::FreeExceedsTotal { total, free } => {
                format!("NVML reports free {free} B above total {total} B")
            }
            Gap::ProcessesExceedOccupied {
                attributed,
                occupied,
            } => format!("processes hold {attributed} B but NVML says {occupied} B are occupied"),
        }
    }
}

/// Partitions one device's NVML total into layers, given the processes on it and their
/// accounts. Every listed process's NVML usage must fit in what the device says is occupied,
/// visible or not (an invisible holder's bytes sit in `other`): if not, the readings
/// contradict each other and no exact partition exists.
pub fn device_layers<'a>(
    memory: Option<&DeviceMemory>,
    lost: bool,
    processes_known: bool,
    processes: impl Iterator<Item = (&'a ProcessSample, &'a ProcessAccount)>,
) -> Result<Layers, Gap> {
    if lost {
        return Err(Gap::Lost);
    }
    let memory = memory.ok_or(Gap::MemoryUnknown)?;
    let occupied = memory.occupied().ok_or(Gap::FreeExceedsTotal {
        total: memory.total,
        free: memory.free,
    })?;
    let mut layers = Layers::default();
    // What the listed processes need at least: their NVML usage, or the part of it that is
    // split into layers where NVML does not report it.
    let mut needed: u64 = 0;
    if processes_known {
        layers.unattributed = Some(0);
        for (process, account) in processes {
            let share = account.layers.as_device_share();
            needed = needed.saturating_add(process.used.unwrap_or(0).max(share.occupied()));
            layers.absorb(&share);
        }
    }
    if needed > occupied {
        return Err(Gap::ProcessesExceedOccupied {
            attributed: needed,
            occupied,
        });
    }
    // needed >= the layers' sum, so this cannot underflow.
    let other = occupied - layers.occupied();
    layers.add(Layer::Other, other);
    layers.add(Layer::Free, memory.free);
    Ok(layers)
}

/// One MIG instance's layers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigAccount {
    pub layers: Result<Layers, Gap>,
    /// The least exact source among its processes' contexts.
    pub context_source: Option<ContextSource>,
}

/// One GPU's layers (all its processes, MIG instances included) and those of its instances.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuAccount {
    pub layers: Result<Layers, Gap>,
    pub context_source: Option<ContextSource>,
    pub mig: Vec<MigAccount>,
}

/// The least exact of the context sources of some processes: the sum is only as exact as
/// its least exact part.
fn least_exact<'a>(accounts: impl Iterator<Item = &'a ProcessAccount>) -> Option<ContextSource> {
    let rank = |s: ContextSource| match s {
        ContextSource::Unsplit => 0,
        ContextSource::Estimated => 1,
        ContextSource::Fixed => 2,
        ContextSource::Observed => 3,
    };
    accounts
        .filter_map(|a| a.context_source)
        .min_by_key(|&s| rank(s))
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
            .filter(|(p, _)| p.device_uuid == uuid)
            .collect()
    };
    let gpus = sample
        .gpus
        .iter()
        .map(|gpu| {
            let mig: Vec<MigAccount> = gpu
                .mig
                .iter()
                .map(|m| {
                    let on = accounts_on(&m.uuid);
                    MigAccount {
                        context_source: least_exact(on.iter().map(|(_, a)| *a)),
                        layers: device_layers(
                            m.memory.as_ref(),
                            gpu.lost,
                            m.processes_known,
                            on.into_iter(),
                        ),
                    }
                })
                .collect();
            let on_gpu = sample
                .processes
                .iter()
                .zip(&processes)
                .filter(|(p, _)| gpu.holds(&p.device_uuid));
            let known = gpu.processes_known && gpu.mig.iter().all(|m| m.processes_known);
            GpuAccount {
                context_source: least_exact(on_gpu.clone().map(|(_, a)| a)),
                layers: device_layers(gpu.memory.as_ref(), gpu.lost, known, on_gpu),
                mig,
            }
        })
        .collect();
    NodeAccount { gpus, processes }
}

#[cfg(test)]
#[path = "accounting_tests.rs"]
mod tests;

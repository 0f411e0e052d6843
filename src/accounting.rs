//! Pure functions from a raw sample to layers (DESIGN.md §1). No I/O.

use crate::context::ContextEstimator;
use crate::layers::{Layer, Layers};
use crate::sample::{DeviceMemory, FeedSample, NodeSample, ProcessSample};
use serde::Serialize;

/// A feed older (or newer) than this many sampling intervals is stale.
pub const STALE_INTERVALS: f64 = 3.0;

/// Whether a process's allocator feed can be used at this instant.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum FeedStatus {
    /// No feed from this process.
    Absent,
    /// Recent enough to be combined with NVML's reading.
    Fresh { age: f64 },
    /// Too old to combine with this instant; shown, not used.
    Stale { age: f64 },
    /// Its numbers contradict themselves or NVML's: shown, not used.
    Inconsistent { reason: String },
}

impl FeedStatus {
    pub fn is_usable(&self) -> bool {
        matches!(self, FeedStatus::Fresh { .. })
    }
}

/// Judges a process's feed against the sample's instant and NVML's per-process reading.
pub fn feed_status(sample: &NodeSample, process: &ProcessSample) -> FeedStatus {
    let Some(feed) = &process.feed else {
        return FeedStatus::Absent;
    };
    let age = sample.time - feed.time;
    if !age.is_finite() || age.abs() > STALE_INTERVALS * sample.interval.max(0.0) {
        return FeedStatus::Stale { age };
    }
    if let Some(reason) = feed_contradiction(feed, process.used) {
        return FeedStatus::Inconsistent { reason };
    }
    FeedStatus::Fresh { age }
}

fn feed_contradiction(feed: &FeedSample, nvml_used: Option<u64>) -> Option<String> {
    let pool_parts = u128::from(feed.allocated) + u128::from(feed.inactive_split.unwrap_or(0));
    if pool_parts > u128::from(feed.reserved) {
        return Some(format!(
            "allocated + inactive_split ({pool_parts} B) exceed reserved ({} B)",
            feed.reserved
        ));
    }
    match nvml_used {
        Some(used) if feed.reserved > used => Some(format!(
            "allocator reserved ({} B) exceeds NVML used ({used} B)",
            feed.reserved
        )),
        _ => None,
    }
}

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

/// A process's accounting: its layers and whether its feed was used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessAccount {
    pub layers: ProcessLayers,
    pub feed_status: FeedStatus,
}

/// Splits one process's usage (DESIGN.md §1):
/// NVML used = context + outside_pool + reserved, reserved = live + fragmented + cached.
pub fn account_process(
    sample: &NodeSample,
    process: &ProcessSample,
    contexts: &ContextEstimator,
) -> ProcessAccount {
    let feed_status = feed_status(sample, process);
    let mut layers = ProcessLayers::default();
    match (&process.feed, feed_status.is_usable()) {
        (Some(feed), true) => {
            let fragmented = feed.inactive_split;
            layers.live = Some(feed.allocated);
            layers.fragmented = fragmented;
            // feed_status checked allocated + fragmented <= reserved.
            layers.cached = Some(feed.reserved - feed.allocated - fragmented.unwrap_or(0));
            if let Some(used) = process.used {
                // feed_status checked reserved <= used.
                let beyond_pool = used - feed.reserved;
                let context = contexts
                    .estimate(process)
                    .unwrap_or(beyond_pool)
                    .min(beyond_pool);
                layers.context = Some(context);
                layers.outside_pool = Some(beyond_pool - context);
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
        feed_status,
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
}

/// One GPU's layers (all its processes, MIG instances included) and those of its instances.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuAccount {
    pub layers: Result<Layers, Gap>,
    pub mig: Vec<MigAccount>,
}

/// The layers of a whole node sample. `gpus` and `processes` are parallel to the sample's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeAccount {
    pub gpus: Vec<GpuAccount>,
    pub processes: Vec<ProcessAccount>,
}

/// Computes every layer of a sample. `contexts` must have observed this sample already.
pub fn account(sample: &NodeSample, contexts: &ContextEstimator) -> NodeAccount {
    let processes: Vec<ProcessAccount> = sample
        .processes
        .iter()
        .map(|p| account_process(sample, p, contexts))
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
                .map(|m| MigAccount {
                    layers: device_layers(
                        m.memory.as_ref(),
                        gpu.lost,
                        m.processes_known,
                        accounts_on(&m.uuid).into_iter(),
                    ),
                })
                .collect();
            let on_gpu = sample
                .processes
                .iter()
                .zip(&processes)
                .filter(|(p, _)| gpu.holds(&p.device_uuid));
            let known = gpu.processes_known && gpu.mig.iter().all(|m| m.processes_known);
            GpuAccount {
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

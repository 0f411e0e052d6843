//! One device's partition (a GPU, or a MIG GPU instance with its compute instances): its
//! NVML total split into layers, the layers only partly known, and the contradictions that
//! withhold the partition.

use super::ProcessAccount;
use crate::accounting::attach::FeedStatus;
use crate::layers::{Layer, Layers};
use crate::sample::{DeviceMemory, ProcessSample};
use serde::Serialize;

/// How far `reserved + used + free` may stray from `total` before NVML's memory answer is
/// called inconsistent: its figures are exact bytes, but a driver may round to pages.
const MEMORY_SLACK_BYTES: u64 = 2 << 20;

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
    /// NVML says more is used than the device has.
    UsedExceedsTotal { total: u64, used: u64 },
    /// NVML's driver reservation is larger than the device.
    ReservedExceedsTotal { total: u64, reserved: u64 },
    /// `reserved + used + free` is not `total` (memory_info v2).
    MemoryDoesNotAddUp {
        total: u64,
        reserved: u64,
        used: u64,
        free: u64,
    },
    /// A process record no driver would write (pid 0 holding memory, pid 0xFFFFFFFF, more
    /// than the device): the sign of an NVML struct read with another version's layout.
    ImplausibleProcess { pid: u32, used: Option<u64> },
    /// The processes account for more than the device says is occupied (readings from
    /// slightly different instants, or a driver bug): no exact partition exists.
    ProcessesExceedOccupied { attributed: u64, occupied: u64 },
}

impl Gap {
    pub(crate) fn describe(&self) -> String {
        match self {
            Gap::Lost => "GPU lost (fallen off the bus)".into(),
            Gap::MemoryUnknown => "memory not reported by NVML".into(),
            Gap::FreeExceedsTotal { total, free } => {
                format!("NVML reports free {free} B above total {total} B")
            }
            Gap::UsedExceedsTotal { total, used } => {
                format!("NVML reports used {used} B above total {total} B")
            }
            Gap::ReservedExceedsTotal { total, reserved } => {
                format!("NVML reports a driver reservation of {reserved} B, above total {total} B")
            }
            Gap::MemoryDoesNotAddUp {
                total,
                reserved,
                used,
                free,
            } => format!(
                "NVML's reserved {reserved} + used {used} + free {free} B is not its total {total} B"
            ),
            Gap::ImplausibleProcess { pid, used } => format!(
                "NVML lists PID {pid} holding {} B: a record no driver writes (an NVML version mismatch?)",
                used.map_or_else(|| "n/a".to_string(), |u| u.to_string())
            ),
            Gap::ProcessesExceedOccupied {
                attributed,
                occupied,
            } => format!("processes hold {attributed} B but NVML says {occupied} B are occupied"),
        }
    }

    /// Whether NVML's own figures contradict each other (worth a finding), rather than being
    /// missing.
    pub(crate) fn is_contradiction(&self) -> bool {
        !matches!(self, Gap::Lost | Gap::MemoryUnknown)
    }
}

/// A device's partition: its layers (or why there are none) and which layers are only partly
/// known: summed over the processes whose share is known while another process's share is
/// not (a backend that does not report splits, a stale feed, NVML's per-process figure not
/// available). Such a layer is a lower bound, shown `≥`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Partition {
    pub layers: Result<Layers, Gap>,
    pub partial: Vec<Layer>,
}

/// Contradictions in NVML's memory answer for a device.
fn check_memory(memory: &DeviceMemory) -> Result<u64, Gap> {
    let DeviceMemory {
        total,
        used,
        free,
        driver_reserved,
    } = *memory;
    if free > total {
        return Err(Gap::FreeExceedsTotal { total, free });
    }
    if used > total {
        return Err(Gap::UsedExceedsTotal { total, used });
    }
    if let Some(reserved) = driver_reserved {
        if reserved > total {
            return Err(Gap::ReservedExceedsTotal { total, reserved });
        }
        let sum = u128::from(reserved) + u128::from(used) + u128::from(free);
        if sum.abs_diff(u128::from(total)) > u128::from(MEMORY_SLACK_BYTES) {
            return Err(Gap::MemoryDoesNotAddUp {
                total,
                reserved,
                used,
                free,
            });
        }
    }
    Ok(total - free)
}

/// A process record no driver writes. PID 0 holding nothing is a known harmless quirk.
fn implausible(process: &ProcessSample, total: u64) -> bool {
    match (process.pid, process.used) {
        (u32::MAX, _) => true,
        (0, Some(0)) => false,
        (0, _) => true,
        (_, Some(used)) => used > total,
        _ => false,
    }
}

/// The layers a process's share leaves unknown on its device.
pub(super) fn unknown_shares(process: &ProcessSample, account: &ProcessAccount) -> Vec<Layer> {
    let l = &account.layers;
    let mut unknown = Vec::new();
    match (&account.feed_status, &process.feed) {
        (FeedStatus::Fresh { .. }, Some(feed)) if feed.stats.reserved.is_none() => {
            // No pool figure: only live is split out of this process's usage.
            unknown.extend([
                Layer::Fragmented,
                Layer::Cached,
                Layer::Context,
                Layer::OutsidePool,
            ]);
            if process.visible && process.used.is_none() {
                unknown.push(Layer::Unattributed);
            }
        }
        (FeedStatus::Fresh { .. }, Some(_)) => {
            if l.fragmented.is_none() {
                unknown.push(Layer::Fragmented);
            }
            if process.used.is_none() {
                unknown.extend([Layer::Context, Layer::OutsidePool]);
            } else if l.outside_pool.is_none() {
                unknown.push(Layer::OutsidePool);
            }
        }
        // A feed that cannot be combined now: its pool's layers are unknown at this instant.
        (FeedStatus::Stale { .. } | FeedStatus::Inconsistent { .. }, Some(_)) => {
            unknown.extend([
                Layer::Live,
                Layer::Fragmented,
                Layer::Cached,
                Layer::Context,
                Layer::OutsidePool,
            ]);
            if process.visible && process.used.is_none() {
                unknown.push(Layer::Unattributed);
            }
        }
        _ => {
            if process.visible && process.used.is_none() {
                unknown.push(Layer::Unattributed);
            }
        }
    }
    unknown
}

/// Partitions one device's NVML total into layers, given the processes on it and their
/// accounts. Every listed process's NVML usage must fit in what the device says is occupied,
/// visible or not (an invisible holder's bytes sit in `other`): if not, the readings
/// contradict each other and no exact partition exists.
pub fn partition<'a>(
    memory: Option<&DeviceMemory>,
    lost: bool,
    processes_known: bool,
    processes: impl Iterator<Item = (&'a ProcessSample, &'a ProcessAccount)>,
) -> Partition {
    let withheld = |gap| Partition {
        layers: Err(gap),
        partial: Vec::new(),
    };
    if lost {
        return withheld(Gap::Lost);
    }
    let Some(memory) = memory else {
        return withheld(Gap::MemoryUnknown);
    };
    let occupied = match check_memory(memory) {
        Ok(occupied) => occupied,
        Err(gap) => return withheld(gap),
    };
    let mut layers = Layers::default();
    let mut unknown: Vec<Layer> = Vec::new();
    // What the listed processes need at least: their NVML usage, or the part of it that is
    // split into layers where NVML does not report it.
    let mut needed: u64 = 0;
    if processes_known {
        for (process, account) in processes {
            if implausible(process, memory.total) {
                return withheld(Gap::ImplausibleProcess {
                    pid: process.pid,
                    used: process.used,
                });
            }
            let share = account.layers.as_device_share();
            needed = needed.saturating_add(process.used.unwrap_or(0).max(share.occupied()));
            layers.absorb(&share);
            unknown.extend(unknown_shares(process, account));
        }
        // No visible process without a feed, or all of them known: the layer is known, 0 or
        // more. Only unknown shares: it is unknown, never 0.
        if layers.unattributed.is_none() && !unknown.contains(&Layer::Unattributed) {
            layers.unattributed = Some(0);
        }
    }
    if needed > occupied {
        return withheld(Gap::ProcessesExceedOccupied {
            attributed: needed,
            occupied,
        });
    }
    // needed >= the layers' sum, so this cannot underflow.
    let other = occupied - layers.occupied();
    layers.add(Layer::Other, other);
    layers.add(Layer::Free, memory.free);
    let mut partial: Vec<Layer> = Layer::ALL
        .into_iter()
        .filter(|&l| unknown.contains(&l) && layers.get(l).is_some())
        .collect();
    partial.dedup();
    Partition {
        layers: Ok(layers),
        partial,
    }
}

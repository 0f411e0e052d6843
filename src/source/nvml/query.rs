//! Single NVML queries, each failing on its own: memory, process lists (with the two-call
//! count protocol retried), per-process utilization, and raw instance-id calls.

use crate::sample::{ContextKind, DeviceMemory};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::Device;
use std::collections::{BTreeMap, HashMap};

/// A device handle, valid for the life of the `Nvml` that made it. NVML is thread-safe, so the
/// handle can move to the collector thread with its library.
#[derive(Clone, Copy)]
pub(super) struct Handle(pub(super) nvml_wrapper_sys::bindings::nvmlDevice_t);
// SAFETY: NVML handles are opaque pointers into the driver library, documented thread-safe.
unsafe impl Send for Handle {}

/// Collects what a device's process lists say, merging a PID that is in both lists.
#[derive(Default)]
pub(super) struct Holders {
    pub(super) by_pid: BTreeMap<u32, (Option<u64>, ContextKind)>,
    pub(super) known: bool,
}

impl Holders {
    fn add(&mut self, list: Vec<ProcessInfo>, kind: ContextKind) {
        for p in list {
            let used = match p.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => Some(bytes),
                UsedGpuMemory::Unavailable => None,
            };
            self.by_pid
                .entry(p.pid)
                .and_modify(|(u, k)| {
                    // The same context listed twice: one holder, never counted twice.
                    *u = match (*u, used) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                    if *k != kind {
                        *k = ContextKind::ComputeGraphics;
                    }
                })
                .or_insert((used, kind));
        }
    }
}

/// Reads one process list, retrying once when the count changed between NVML's two calls.
fn read_list(
    read: impl Fn() -> Result<Vec<ProcessInfo>, NvmlError>,
) -> Result<Vec<ProcessInfo>, NvmlError> {
    match read() {
        Err(NvmlError::InsufficientSize(_)) => read(),
        other => other,
    }
}

/// Both process lists of a device. `lost` is set when the device fell off the bus.
pub(super) fn holders(device: &Device<'_>, lost: &mut bool) -> Holders {
    let mut holders = Holders {
        known: true,
        ..Holders::default()
    };
    for (kind, list) in [
        (
            ContextKind::Compute,
            read_list(|| device.running_compute_processes()),
        ),
        (
            ContextKind::Graphics,
            read_list(|| device.running_graphics_processes()),
        ),
    ] {
        match list {
            Ok(list) => holders.add(list, kind),
            Err(NvmlError::GpuLost) => {
                *lost = true;
                holders.known = false;
            }
            // Graphics lists are unsupported on many compute GPUs: that is not a gap in
            // the compute picture.
            Err(NvmlError::NotSupported) if kind == ContextKind::Graphics => {}
            Err(_) => holders.known = false,
        }
    }
    holders
}

pub(super) fn memory(device: &Device<'_>, lost: &mut bool) -> Option<DeviceMemory> {
    match device.memory_info() {
        Ok(m) => Some(DeviceMemory {
            total: m.total,
            used: m.used,
            free: m.free,
            driver_reserved: Some(m.reserved),
        }),
        Err(NvmlError::GpuLost) => {
            *lost = true;
            None
        }
        Err(_) => None,
    }
}

/// `3g.40gb` from `NVIDIA A100-SXM4-80GB MIG 3g.40gb`.
pub fn profile_from_name(name: &str) -> Option<String> {
    let (_, profile) = name.rsplit_once("MIG ")?;
    let profile = profile.trim();
    (!profile.is_empty()).then(|| profile.to_string())
}

type IdQuery = unsafe extern "C" fn(
    nvml_wrapper_sys::bindings::nvmlDevice_t,
    *mut std::os::raw::c_uint,
) -> nvml_wrapper_sys::bindings::nvmlReturn_t;

/// A raw `unsigned int` query through the library (`nvmlDeviceGetGpuInstanceId`,
/// `nvmlDeviceGetComputeInstanceId`), `None` where the symbol is missing or the call fails.
pub(super) fn raw_id(symbol: Option<&IdQuery>, handle: Handle) -> Option<u32> {
    let f = symbol?;
    let mut value: std::os::raw::c_uint = 0;
    // SAFETY: a valid handle and a valid out-pointer, as the NVML signature requires.
    let code = unsafe { f(handle.0, &mut value) };
    (code == 0).then_some(value)
}

/// One process holding memory on one device, as NVML listed it.
pub(super) struct Holding {
    pub(super) pid: u32,
    pub(super) device_uuid: String,
    pub(super) used: Option<u64>,
    pub(super) kind: ContextKind,
}

/// Per-process SM utilization NVML has sampled since `since` (µs), latest per PID.
pub(super) fn sm_utilization(
    device: &Device<'_>,
    since: Option<u64>,
    seen: &mut u64,
) -> HashMap<u32, u32> {
    let mut latest: HashMap<u32, (u64, u32)> = HashMap::new();
    if let Ok(samples) = device.process_utilization_stats(since) {
        for s in samples {
            *seen = (*seen).max(s.timestamp);
            let entry = latest.entry(s.pid).or_insert((s.timestamp, s.sm_util));
            if s.timestamp >= entry.0 {
                *entry = (s.timestamp, s.sm_util);
            }
        }
    }
    latest.into_iter().map(|(pid, (_, sm))| (pid, sm)).collect()
}

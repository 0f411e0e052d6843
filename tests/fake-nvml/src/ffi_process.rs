//! Exported NVML functions that list processes, with the two-call count protocol.
//!
//! Safety contract of every `unsafe extern "C"` function here: `device` is any value (unknown
//! handles are refused); `count` is null or points to an unsigned int; the array pointer is
//! null or valid for writing `*count` entries.
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_uint, c_ulonglong};

use crate::abi::{NvmlDevice, NvmlProcessInfo, NvmlProcessInfoV1, NvmlProcessUtilizationSample};
use crate::codes::{ERROR_INVALID_ARGUMENT, NO_INSTANCE_ID};
use crate::ffi_util::{from_code, guard};
use crate::protocol;
use crate::scenario::{processes_at, samples_at, Answer, MigInstance, Process, ProcessAt};
use crate::state::{self, is_lost, Ctx};

#[derive(Clone, Copy)]
enum Kind {
    Compute,
    Graphics,
    Mps,
}

fn list_of(instance: &MigInstance, kind: Kind) -> &Answer<Vec<Process>> {
    match kind {
        Kind::Compute => &instance.compute_processes,
        Kind::Graphics => &instance.graphics_processes,
        Kind::Mps => &instance.mps_processes,
    }
}

fn instance_processes(
    instance: &MigInstance,
    kind: Kind,
    poll: usize,
) -> Result<Vec<ProcessAt>, u32> {
    let list = list_of(instance, kind).get()?;
    let gpu_instance_id = instance
        .gpu_instance_id
        .get()
        .copied()
        .unwrap_or(NO_INSTANCE_ID);
    let compute_instance_id = instance
        .compute_instance_id
        .get()
        .copied()
        .unwrap_or(NO_INSTANCE_ID);
    Ok(processes_at(
        list,
        poll,
        gpu_instance_id,
        compute_instance_id,
    ))
}

/// The processes a handle answers, and the count jitter of its size query. A GPU answers its
/// own list followed by those of its MIG devices (slot order; lost or refusing ones left out),
/// as real NVML lists every MIG instance's processes on the parent handle.
fn processes_of(ctx: &Ctx, kind: Kind) -> Result<(Vec<ProcessAt>, i64), u32> {
    if let Some(instance) = ctx.instance {
        let list = instance_processes(instance, kind, ctx.poll)?;
        return Ok((list, instance.count_jitter.at(ctx.poll)));
    }
    let own = match kind {
        Kind::Compute => ctx.device.compute_processes.get()?,
        Kind::Graphics => ctx.device.graphics_processes.get()?,
        Kind::Mps => ctx.device.mps_processes.get()?,
    };
    let mut all = processes_at(own, ctx.poll, NO_INSTANCE_ID, NO_INSTANCE_ID);
    let mut instances: Vec<&MigInstance> = ctx.device.mig.iter().collect();
    instances.sort_by_key(|instance| instance.slot);
    for instance in instances {
        if is_lost(instance.lost_at_poll, ctx.poll) {
            continue;
        }
        if let Ok(list) = instance_processes(instance, kind, ctx.poll) {
            all.extend(list);
        }
    }
    Ok((all, ctx.device.count_jitter.at(ctx.poll)))
}

/// An entry of the caller's array, in one of the layouts NVML's process calls fill.
trait Entry {
    fn of(process: &ProcessAt) -> Self;
}

impl Entry for NvmlProcessInfo {
    fn of(process: &ProcessAt) -> Self {
        NvmlProcessInfo {
            pid: process.pid,
            used_gpu_memory: process.used_bytes,
            gpu_instance_id: process.gpu_instance_id,
            compute_instance_id: process.compute_instance_id,
        }
    }
}

impl Entry for NvmlProcessInfoV1 {
    fn of(process: &ProcessAt) -> Self {
        NvmlProcessInfoV1 {
            pid: process.pid,
            used_gpu_memory: process.used_bytes,
        }
    }
}

unsafe fn running_processes<E: Entry>(
    device: NvmlDevice,
    count: *mut c_uint,
    infos: *mut E,
    kind: Kind,
    call: &'static str,
) -> u32 {
    guard(|| {
        state::with_device(device, call, false, |ctx| {
            if count.is_null() {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            let (processes, jitter) = processes_of(ctx, kind)?;
            // SAFETY: `count` is non-null and points to an unsigned int (contract above).
            let capacity = unsafe { count.read() };
            let answer =
                protocol::running_processes(processes.len(), jitter, infos.is_null(), capacity);
            for (slot, process) in processes.iter().take(answer.write).enumerate() {
                // SAFETY: `answer.write <= capacity`, and `infos` holds `capacity` entries.
                unsafe { infos.add(slot).write(E::of(process)) };
            }
            // SAFETY: as above.
            unsafe { count.write(answer.count) };
            from_code(answer.code)
        })
    })
}

/// Exports one process call. `$v3` marks the `_v3` calls, which a `pre-r510` build leaves out.
macro_rules! process_call {
    ($name:ident, $entry:ty, $kind:expr, v3) => {
        #[cfg_attr(not(feature = "pre-r510"), no_mangle)]
        #[cfg_attr(feature = "pre-r510", allow(dead_code, non_snake_case))]
        pub unsafe extern "C" fn $name(
            device: NvmlDevice,
            info_count: *mut c_uint,
            infos: *mut $entry,
        ) -> u32 {
            // SAFETY: same contract.
            unsafe { running_processes(device, info_count, infos, $kind, stringify!($name)) }
        }
    };
    ($name:ident, $entry:ty, $kind:expr, v2) => {
        #[cfg_attr(not(feature = "v1-processes"), no_mangle)]
        #[cfg_attr(feature = "v1-processes", allow(dead_code, non_snake_case))]
        pub unsafe extern "C" fn $name(
            device: NvmlDevice,
            info_count: *mut c_uint,
            infos: *mut $entry,
        ) -> u32 {
            // SAFETY: same contract.
            unsafe { running_processes(device, info_count, infos, $kind, stringify!($name)) }
        }
    };
    ($name:ident, $entry:ty, $kind:expr, v1) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            device: NvmlDevice,
            info_count: *mut c_uint,
            infos: *mut $entry,
        ) -> u32 {
            // SAFETY: same contract.
            unsafe { running_processes(device, info_count, infos, $kind, stringify!($name)) }
        }
    };
}

// The `_v3` and `_v2` calls fill the same 24-byte `nvmlProcessInfo_t`; the unversioned ones
// the 16-byte `nvmlProcessInfo_v1_t`.
process_call!(
    nvmlDeviceGetComputeRunningProcesses_v3,
    NvmlProcessInfo,
    Kind::Compute,
    v3
);
process_call!(
    nvmlDeviceGetGraphicsRunningProcesses_v3,
    NvmlProcessInfo,
    Kind::Graphics,
    v3
);
process_call!(
    nvmlDeviceGetMPSComputeRunningProcesses_v3,
    NvmlProcessInfo,
    Kind::Mps,
    v3
);
process_call!(
    nvmlDeviceGetComputeRunningProcesses_v2,
    NvmlProcessInfo,
    Kind::Compute,
    v2
);
process_call!(
    nvmlDeviceGetGraphicsRunningProcesses_v2,
    NvmlProcessInfo,
    Kind::Graphics,
    v2
);
process_call!(
    nvmlDeviceGetMPSComputeRunningProcesses_v2,
    NvmlProcessInfo,
    Kind::Mps,
    v2
);
process_call!(
    nvmlDeviceGetComputeRunningProcesses,
    NvmlProcessInfoV1,
    Kind::Compute,
    v1
);
process_call!(
    nvmlDeviceGetGraphicsRunningProcesses,
    NvmlProcessInfoV1,
    Kind::Graphics,
    v1
);
process_call!(
    nvmlDeviceGetMPSComputeRunningProcesses,
    NvmlProcessInfoV1,
    Kind::Mps,
    v1
);

/// Samples newer than `last_seen_time_stamp` (µs); none at all answers `NVML_ERROR_NOT_FOUND`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: NvmlDevice,
    utilization: *mut NvmlProcessUtilizationSample,
    process_samples_count: *mut c_uint,
    last_seen_time_stamp: c_ulonglong,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetProcessUtilization", false, |ctx| {
            if process_samples_count.is_null() {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            let list = match ctx.instance {
                Some(instance) => instance.process_utilization.get()?,
                None => ctx.device.process_utilization.get()?,
            };
            let samples = samples_at(list, ctx.poll, last_seen_time_stamp);
            // SAFETY: non-null and points to an unsigned int (contract above).
            let capacity = unsafe { process_samples_count.read() };
            let answer = protocol::process_samples(samples.len(), utilization.is_null(), capacity);
            for (slot, sample) in samples.iter().take(answer.write).enumerate() {
                let entry = NvmlProcessUtilizationSample {
                    pid: sample.pid,
                    time_stamp: sample.timestamp_us,
                    sm_util: sample.sm,
                    mem_util: sample.mem,
                    enc_util: sample.enc,
                    dec_util: sample.dec,
                };
                // SAFETY: `answer.write <= capacity`, and the array holds `capacity` entries.
                unsafe { utilization.add(slot).write(entry) };
            }
            // SAFETY: as above.
            unsafe { process_samples_count.write(answer.count) };
            from_code(answer.code)
        })
    })
}

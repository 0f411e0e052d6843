//! Exported NVML functions that query one device: identity, memory, utilization, PCI.
//!
//! Safety contract of every `unsafe extern "C"` function here: `device` is any value (unknown
//! handles are refused) and each other pointer is null or valid for the access NVML's C API
//! documents for it.
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_uint};

use crate::abi::{NvmlDevice, NvmlMemory, NvmlMemoryV2, NvmlUtilization, NVML_MEMORY_V2_VERSION};
use crate::codes::{
    ERROR_ARGUMENT_VERSION_MISMATCH, ERROR_INVALID_ARGUMENT, ERROR_NOT_SUPPORTED, ERROR_UNKNOWN,
};
use crate::ffi_util::{guard, put, put_str};
use crate::scenario::MemoryAt;
use crate::state::{self, Ctx};

fn memory_of(ctx: &Ctx) -> Result<MemoryAt, u32> {
    let memory = match ctx.instance {
        Some(instance) => instance.memory.get()?,
        None => ctx.device.memory.get()?,
    };
    Ok(memory.at(ctx.poll))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: NvmlDevice,
    name: *mut c_char,
    length: c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetName", false, |ctx| {
            let text = match ctx.instance {
                Some(instance) => instance.name.get()?,
                None => ctx.device.name.get()?,
            };
            // SAFETY: `name` is null or holds `length` bytes (contract above).
            unsafe { put_str(text, name, length) }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: NvmlDevice,
    uuid: *mut c_char,
    length: c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetUUID", false, |ctx| {
            let text = match ctx.instance {
                Some(instance) => instance.uuid.get()?,
                None => ctx.device.uuid.get()?,
            };
            // SAFETY: `uuid` is null or holds `length` bytes (contract above).
            unsafe { put_str(text, uuid, length) }
        })
    })
}

/// A MIG device has no NVML index of its own: `NVML_ERROR_NOT_SUPPORTED`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetIndex(device: NvmlDevice, index: *mut c_uint) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetIndex", false, |ctx| {
            if ctx.instance.is_some() {
                return Err(ERROR_NOT_SUPPORTED);
            }
            let gpu_index = u32::try_from(ctx.gpu_index).map_err(|_| ERROR_UNKNOWN)?;
            // SAFETY: `index` is null or points to an unsigned int (contract above).
            unsafe { put(index, gpu_index) }
        })
    })
}

/// The minor number of `/dev/nvidia<N>`: the scenario's `minor_number`, else the GPU's index.
/// A MIG device has no device file of its own: `NVML_ERROR_NOT_SUPPORTED`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(device: NvmlDevice, minor: *mut c_uint) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetMinorNumber", false, |ctx| {
            if ctx.instance.is_some() {
                return Err(ERROR_NOT_SUPPORTED);
            }
            let number = match &ctx.device.minor_number {
                Some(answer) => *answer.get()?,
                None => u32::try_from(ctx.gpu_index).map_err(|_| ERROR_UNKNOWN)?,
            };
            // SAFETY: `minor` is null or points to an unsigned int (contract above).
            unsafe { put(minor, number) }
        })
    })
}

/// v1 memory: `used` includes the driver-reserved memory, as real NVML answers it.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    device: NvmlDevice,
    memory: *mut NvmlMemory,
) -> u32 {
    guard(|| {
        state::with_device(
            device,
            "nvmlDeviceGetMemoryInfo",
            !memory.is_null(),
            |ctx| {
                let at = memory_of(ctx)?;
                let answer = NvmlMemory {
                    total: at.total,
                    free: at.free,
                    used: at.used.saturating_add(at.reserved),
                };
                // SAFETY: `memory` is null or points to an nvmlMemory_t (contract above).
                unsafe { put(memory, answer) }
            },
        )
    })
}

/// v2 memory; the caller must set `version` to `nvmlMemory_v2` (`0x02000028`). A call refused
/// for its version or a null pointer does not count as a poll. Not exported by a `pre-r510`
/// build (drivers before R510 lack it).
#[cfg_attr(not(feature = "pre-r510"), no_mangle)]
#[cfg_attr(feature = "pre-r510", allow(dead_code, non_snake_case))]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: NvmlDevice,
    memory: *mut NvmlMemoryV2,
) -> u32 {
    guard(|| {
        let version = match memory.is_null() {
            true => None,
            // SAFETY: non-null, so it points to an nvmlMemory_v2_t (contract above).
            false => Some(unsafe { std::ptr::addr_of!((*memory).version).read() }),
        };
        let counts_as_poll = version == Some(NVML_MEMORY_V2_VERSION);
        state::with_device(
            device,
            "nvmlDeviceGetMemoryInfo_v2",
            counts_as_poll,
            |ctx| {
                match version {
                    None => return Err(ERROR_INVALID_ARGUMENT),
                    Some(version) if version != NVML_MEMORY_V2_VERSION => {
                        return Err(ERROR_ARGUMENT_VERSION_MISMATCH)
                    }
                    Some(_) => {}
                }
                let at = memory_of(ctx)?;
                let answer = NvmlMemoryV2 {
                    version: NVML_MEMORY_V2_VERSION,
                    total: at.total,
                    reserved: at.reserved,
                    free: at.free,
                    used: at.used,
                };
                // SAFETY: `memory` is non-null and points to an nvmlMemory_v2_t.
                unsafe { put(memory, answer) }
            },
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: NvmlDevice,
    utilization: *mut NvmlUtilization,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetUtilizationRates", false, |ctx| {
            let rates = match ctx.instance {
                Some(instance) => instance.utilization.get()?,
                None => ctx.device.utilization.get()?,
            };
            let answer = NvmlUtilization {
                gpu: rates.gpu.at(ctx.poll),
                memory: rates.memory.at(ctx.poll),
            };
            // SAFETY: `utilization` is null or points to an nvmlUtilization_t (contract above).
            unsafe { put(utilization, answer) }
        })
    })
}

/// The GPU sensor's temperature (sensor 0, `NVML_TEMPERATURE_GPU`); a MIG device, and any
/// other sensor, answers `NotSupported`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: NvmlDevice,
    sensor: c_uint,
    temp: *mut c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetTemperature", false, |ctx| {
            if ctx.instance.is_some() || sensor != 0 {
                return Err(ERROR_NOT_SUPPORTED);
            }
            let celsius = ctx.device.temperature.get()?.at(ctx.poll);
            // SAFETY: `temp` is null or points to an unsigned int, as NVML asks of the caller.
            unsafe { put(temp, celsius) }
        })
    })
}

/// NVML's `NVML_CLOCK_SM`, the one clock the fake knows; the others answer `NotSupported`.
const CLOCK_SM: c_uint = 1;

/// The board's power draw, milliwatts; a MIG device answers `NotSupported`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(device: NvmlDevice, power: *mut c_uint) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetPowerUsage", false, |ctx| {
            if ctx.instance.is_some() {
                return Err(ERROR_NOT_SUPPORTED);
            }
            let milliwatts = ctx.device.power_usage.get()?.at(ctx.poll);
            // SAFETY: `power` is null or points to an unsigned int, as NVML asks of the caller.
            unsafe { put(power, milliwatts) }
        })
    })
}

/// The power limit the GPU enforces, milliwatts; a MIG device answers `NotSupported`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEnforcedPowerLimit(
    device: NvmlDevice,
    limit: *mut c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetEnforcedPowerLimit", false, |ctx| {
            if ctx.instance.is_some() {
                return Err(ERROR_NOT_SUPPORTED);
            }
            let milliwatts = *ctx.device.power_limit.get()?;
            // SAFETY: `limit` is null or points to an unsigned int, as NVML asks of the caller.
            unsafe { put(limit, milliwatts) }
        })
    })
}

/// The SM clock now, MHz (`NVML_CLOCK_SM` only); a MIG device answers `NotSupported`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: NvmlDevice,
    clock: c_uint,
    mhz: *mut c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetClockInfo", false, |ctx| {
            if ctx.instance.is_some() || clock != CLOCK_SM {
                return Err(ERROR_NOT_SUPPORTED);
            }
            let now = ctx.device.sm_clock.get()?.at(ctx.poll);
            // SAFETY: `mhz` is null or points to an unsigned int, as NVML asks of the caller.
            unsafe { put(mhz, now) }
        })
    })
}

/// The SM clock's maximum, MHz (`NVML_CLOCK_SM` only); a MIG device answers `NotSupported`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxClockInfo(
    device: NvmlDevice,
    clock: c_uint,
    mhz: *mut c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetMaxClockInfo", false, |ctx| {
            if ctx.instance.is_some() || clock != CLOCK_SM {
                return Err(ERROR_NOT_SUPPORTED);
            }
            let max = *ctx.device.sm_clock_max.get()?;
            // SAFETY: `mhz` is null or points to an unsigned int, as NVML asks of the caller.
            unsafe { put(mhz, max) }
        })
    })
}

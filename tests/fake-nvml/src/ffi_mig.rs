//! Exported NVML functions for MIG: mode, MIG device handles and instance ids.
//!
//! Safety contract of every `unsafe extern "C"` function here: `device` is any value (unknown
//! handles are refused) and each other pointer is null or valid for the access NVML's C API
//! documents for it.
#![allow(clippy::missing_safety_doc)]

use std::ffi::c_uint;

use crate::abi::NvmlDevice;
use crate::codes::{ERROR_INVALID_ARGUMENT, ERROR_NOT_FOUND, ERROR_NOT_SUPPORTED};
use crate::ffi_util::{guard, put};
use crate::state::{self, handle_for};

/// `NVML_DEVICE_MIG_ENABLE`.
const MIG_ENABLED: c_uint = 1;

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: NvmlDevice,
    current_mode: *mut c_uint,
    pending_mode: *mut c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetMigMode", false, |ctx| {
            if ctx.instance.is_some() {
                return Err(ERROR_NOT_SUPPORTED);
            }
            let mode = ctx.device.mig_mode.get()?;
            if current_mode.is_null() || pending_mode.is_null() {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            // SAFETY: both non-null and point to unsigned ints (contract above).
            unsafe {
                put(current_mode, mode.current)?;
                put(pending_mode, mode.pending)
            }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: NvmlDevice,
    count: *mut c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetMaxMigDeviceCount", false, |ctx| {
            if ctx.instance.is_some() {
                return Err(ERROR_NOT_SUPPORTED);
            }
            let max = *ctx.device.max_mig_devices.get()?;
            // SAFETY: `count` is null or points to an unsigned int (contract above).
            unsafe { put(count, max) }
        })
    })
}

/// Refuses with `NVML_ERROR_NOT_SUPPORTED` when MIG is not enabled, `INVALID_ARGUMENT` for an
/// index at or past `max_mig_devices`, `NOT_FOUND` for an empty slot. The parent's faults apply
/// first, then those of the MIG device in the slot.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: NvmlDevice,
    index: c_uint,
    mig_device: *mut NvmlDevice,
) -> u32 {
    const CALL: &str = "nvmlDeviceGetMigDeviceHandleByIndex";
    guard(|| {
        let handle = state::with_device(device, CALL, false, |ctx| {
            if ctx.instance.is_some() {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            if ctx.device.mig_mode.get()?.current != MIG_ENABLED {
                return Err(ERROR_NOT_SUPPORTED);
            }
            if index >= *ctx.device.max_mig_devices.get()? {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            let instance = ctx
                .device
                .mig
                .iter()
                .find(|instance| instance.slot == index)
                .ok_or(ERROR_NOT_FOUND)?;
            Ok(handle_for(ctx.gpu_index, Some(instance.slot)))
        })?;
        // The MIG device's own faults, and its lost state.
        state::with_device(handle, CALL, false, |_| Ok(()))?;
        // SAFETY: `mig_device` is null or points to an nvmlDevice_t (contract above).
        unsafe { put(mig_device, handle) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: NvmlDevice,
    is_mig_device: *mut c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceIsMigDeviceHandle", false, |ctx| {
            let is_mig = c_uint::from(ctx.instance.is_some());
            // SAFETY: `is_mig_device` is null or points to an unsigned int (contract above).
            unsafe { put(is_mig_device, is_mig) }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig_device: NvmlDevice,
    device: *mut NvmlDevice,
) -> u32 {
    guard(|| {
        state::with_device(
            mig_device,
            "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
            false,
            |ctx| {
                if ctx.instance.is_none() {
                    return Err(ERROR_INVALID_ARGUMENT);
                }
                // SAFETY: `device` is null or points to an nvmlDevice_t (contract above).
                unsafe { put(device, handle_for(ctx.gpu_index, None)) }
            },
        )
    })
}

/// A GPU handle (not a MIG device) answers `NVML_ERROR_NOT_SUPPORTED`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(device: NvmlDevice, id: *mut c_uint) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetGpuInstanceId", false, |ctx| {
            let instance = ctx.instance.ok_or(ERROR_NOT_SUPPORTED)?;
            let gpu_instance_id = *instance.gpu_instance_id.get()?;
            // SAFETY: `id` is null or points to an unsigned int (contract above).
            unsafe { put(id, gpu_instance_id) }
        })
    })
}

/// A GPU handle (not a MIG device) answers `NVML_ERROR_NOT_SUPPORTED`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(
    device: NvmlDevice,
    id: *mut c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetComputeInstanceId", false, |ctx| {
            let instance = ctx.instance.ok_or(ERROR_NOT_SUPPORTED)?;
            let compute_instance_id = *instance.compute_instance_id.get()?;
            // SAFETY: `id` is null or points to an unsigned int (contract above).
            unsafe { put(id, compute_instance_id) }
        })
    })
}

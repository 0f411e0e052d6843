//! Exported NVML functions: init, shutdown, errors, system queries and device enumeration.
//!
//! Safety contract of every `unsafe extern "C"` function here: each pointer argument is null
//! or valid for the access NVML's C API documents for it.
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, c_uint, CStr};

use crate::abi::NvmlDevice;
use crate::codes::{self, ERROR_INVALID_ARGUMENT, ERROR_NOT_FOUND};
use crate::ffi_util::{from_code, guard, put, put_str};
use crate::state;

#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> u32 {
    guard(|| from_code(state::init()))
}

/// The original `nvmlInit` (some old clients still resolve it).
#[no_mangle]
pub extern "C" fn nvmlInit() -> u32 {
    guard(|| from_code(state::init()))
}

/// Flags (`NVML_INIT_FLAG_NO_GPUS`, `NVML_INIT_FLAG_NO_ATTACH`) are accepted and ignored.
#[no_mangle]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> u32 {
    guard(|| from_code(state::init()))
}

#[no_mangle]
pub extern "C" fn nvmlShutdown() -> u32 {
    guard(|| from_code(state::shutdown()))
}

#[no_mangle]
pub extern "C" fn nvmlErrorString(result: u32) -> *const c_char {
    std::panic::catch_unwind(|| codes::error_string_ptr(result))
        .unwrap_or_else(|_| c"Unknown Error".as_ptr())
}

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(version: *mut c_char, length: c_uint) -> u32 {
    guard(|| {
        state::with_system("nvmlSystemGetDriverVersion", |scenario| {
            let text = scenario.system.driver_version.get()?;
            // SAFETY: `version` is null or holds `length` bytes (contract above).
            unsafe { put_str(text, version, length) }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(version: *mut c_char, length: c_uint) -> u32 {
    guard(|| {
        state::with_system("nvmlSystemGetNVMLVersion", |scenario| {
            let text = scenario.system.nvml_version.get()?;
            // SAFETY: `version` is null or holds `length` bytes (contract above).
            unsafe { put_str(text, version, length) }
        })
    })
}

unsafe fn cuda_driver_version(out: *mut c_int, call: &'static str) -> u32 {
    guard(|| {
        state::with_system(call, |scenario| {
            let version = *scenario.system.cuda_driver_version.get()?;
            // SAFETY: `out` is null or points to an int (contract above).
            unsafe { put(out, version) }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(
    cuda_driver_version_out: *mut c_int,
) -> u32 {
    // SAFETY: same contract.
    unsafe { cuda_driver_version(cuda_driver_version_out, "nvmlSystemGetCudaDriverVersion") }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(
    cuda_driver_version_out: *mut c_int,
) -> u32 {
    // SAFETY: same contract.
    unsafe { cuda_driver_version(cuda_driver_version_out, "nvmlSystemGetCudaDriverVersion_v2") }
}

unsafe fn device_count(count: *mut c_uint, call: &'static str) -> u32 {
    guard(|| {
        state::with_system(call, |scenario| {
            let devices = u32::try_from(scenario.devices.len()).unwrap_or(u32::MAX);
            // SAFETY: `count` is null or points to an unsigned int (contract above).
            unsafe { put(count, devices) }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> u32 {
    // SAFETY: same contract.
    unsafe { device_count(count, "nvmlDeviceGetCount_v2") }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount(count: *mut c_uint) -> u32 {
    // SAFETY: same contract.
    unsafe { device_count(count, "nvmlDeviceGetCount") }
}

unsafe fn handle_by_index(index: c_uint, device: *mut NvmlDevice, call: &'static str) -> u32 {
    guard(|| {
        let handle = state::handle_by_index(index, call)?;
        // SAFETY: `device` is null or points to an nvmlDevice_t (contract above).
        unsafe { put(device, handle) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut NvmlDevice,
) -> u32 {
    // SAFETY: same contract.
    unsafe { handle_by_index(index, device, "nvmlDeviceGetHandleByIndex_v2") }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex(index: c_uint, device: *mut NvmlDevice) -> u32 {
    // SAFETY: same contract.
    unsafe { handle_by_index(index, device, "nvmlDeviceGetHandleByIndex") }
}

/// Finds a GPU or a MIG device by UUID (`GPU-...` or `MIG-...`).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    device: *mut NvmlDevice,
) -> u32 {
    guard(|| {
        state::with_scenario(|_| Ok(()))?;
        if uuid.is_null() {
            return Err(ERROR_INVALID_ARGUMENT);
        }
        // SAFETY: `uuid` is a NUL-terminated string (contract above).
        let uuid = unsafe { CStr::from_ptr(uuid) };
        let uuid = uuid.to_str().map_err(|_| ERROR_NOT_FOUND)?;
        let handle = state::handle_by_uuid(uuid)?;
        // SAFETY: `device` is null or points to an nvmlDevice_t (contract above).
        unsafe { put(device, handle) }
    })
}

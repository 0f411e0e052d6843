//! Calling the exported functions as a C client would. The library state is global, so each
//! test holds a `Session`: the serializing lock and the scenario file set for it.

use std::ffi::{c_char, c_uint, CStr};
use std::path::PathBuf;
use std::ptr::null_mut;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::scenarios_dir;
use crate::abi::*;
use crate::codes::*;
use crate::ffi_device::*;
use crate::ffi_mig::*;
use crate::ffi_process::*;
use crate::ffi_system::*;
use crate::state::SCENARIO_ENV;

static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the library for one test: the lock, and the scenario file set for it.
pub struct Session {
    _guard: MutexGuard<'static, ()>,
    pub file: PathBuf,
}

impl Session {
    pub fn with_text(text: &str) -> Session {
        let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
        while nvmlShutdown() == SUCCESS {}
        let file =
            std::env::temp_dir().join(format!("strata-fake-nvml-test-{}.json", std::process::id()));
        std::fs::write(&file, text).expect("temp file writable");
        std::env::set_var(SCENARIO_ENV, &file);
        Session {
            _guard: guard,
            file,
        }
    }

    pub fn example(name: &str) -> Session {
        let text = std::fs::read_to_string(scenarios_dir().join(format!("{name}.json")))
            .expect("example exists");
        let session = Session::with_text(&text);
        assert_eq!(nvmlInit_v2(), SUCCESS);
        session
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        while nvmlShutdown() == SUCCESS {}
        let _ = std::fs::remove_file(&self.file);
    }
}

pub fn handle(index: u32) -> NvmlDevice {
    let mut device: NvmlDevice = null_mut();
    assert_eq!(
        // SAFETY: a valid out pointer.
        unsafe { nvmlDeviceGetHandleByIndex_v2(index, &mut device) },
        SUCCESS
    );
    device
}

pub fn mig_handle(parent: NvmlDevice, index: u32) -> Result<NvmlDevice, u32> {
    let mut device: NvmlDevice = null_mut();
    // SAFETY: a valid out pointer.
    match unsafe { nvmlDeviceGetMigDeviceHandleByIndex(parent, index, &mut device) } {
        SUCCESS => Ok(device),
        code => Err(code),
    }
}

pub fn memory_v2(device: NvmlDevice) -> Result<NvmlMemoryV2, u32> {
    let mut memory = NvmlMemoryV2 {
        version: NVML_MEMORY_V2_VERSION,
        total: 0,
        reserved: 0,
        free: 0,
        used: 0,
    };
    // SAFETY: a valid out pointer.
    match unsafe { nvmlDeviceGetMemoryInfo_v2(device, &mut memory) } {
        SUCCESS => Ok(memory),
        code => Err(code),
    }
}

pub fn name(device: NvmlDevice) -> Result<String, u32> {
    let mut buffer = [0 as c_char; 96];
    // SAFETY: the buffer holds 96 bytes.
    match unsafe { nvmlDeviceGetName(device, buffer.as_mut_ptr(), 96) } {
        // SAFETY: NUL-terminated by the callee.
        SUCCESS => Ok(unsafe { CStr::from_ptr(buffer.as_ptr()) }
            .to_string_lossy()
            .into_owned()),
        code => Err(code),
    }
}

/// The two-call protocol, as nvml-wrapper runs it: size query, then a buffer of count + 5.
pub fn compute_processes(device: NvmlDevice) -> Result<Vec<NvmlProcessInfo>, u32> {
    let mut count: c_uint = 0;
    // SAFETY: valid count pointer, null array.
    match unsafe { nvmlDeviceGetComputeRunningProcesses_v3(device, &mut count, null_mut()) } {
        SUCCESS => return Ok(Vec::new()),
        ERROR_INSUFFICIENT_SIZE => {}
        code => return Err(code),
    }
    let empty = NvmlProcessInfo {
        pid: 0,
        used_gpu_memory: 0,
        gpu_instance_id: 0,
        compute_instance_id: 0,
    };
    let mut infos = vec![empty; count as usize + 5];
    count += 5;
    // SAFETY: the array holds `count` entries.
    match unsafe { nvmlDeviceGetComputeRunningProcesses_v3(device, &mut count, infos.as_mut_ptr()) }
    {
        SUCCESS => {
            infos.truncate(count as usize);
            Ok(infos)
        }
        code => Err(code),
    }
}

pub fn uuid(device: NvmlDevice) -> Result<String, u32> {
    let mut buffer = [0 as c_char; 96];
    // SAFETY: the buffer holds 96 bytes.
    match unsafe { crate::ffi_device::nvmlDeviceGetUUID(device, buffer.as_mut_ptr(), 96) } {
        // SAFETY: NUL-terminated by the callee.
        SUCCESS => Ok(unsafe { CStr::from_ptr(buffer.as_ptr()) }
            .to_string_lossy()
            .into_owned()),
        code => Err(code),
    }
}

/// A process call with the 24-byte layout (`_v3`, `_v2`).
pub type ProcessCall = unsafe extern "C" fn(NvmlDevice, *mut c_uint, *mut NvmlProcessInfo) -> u32;

/// The two-call protocol on any process call with the 24-byte layout.
pub fn list(device: NvmlDevice, call: ProcessCall) -> Result<Vec<NvmlProcessInfo>, u32> {
    let mut count: c_uint = 0;
    // SAFETY: valid count pointer, null array.
    match unsafe { call(device, &mut count, null_mut()) } {
        SUCCESS => return Ok(Vec::new()),
        ERROR_INSUFFICIENT_SIZE => {}
        code => return Err(code),
    }
    let empty = NvmlProcessInfo {
        pid: 0,
        used_gpu_memory: 0,
        gpu_instance_id: 0,
        compute_instance_id: 0,
    };
    let mut infos = vec![empty; count as usize];
    // SAFETY: the array holds `count` entries.
    match unsafe { call(device, &mut count, infos.as_mut_ptr()) } {
        SUCCESS => {
            infos.truncate(count as usize);
            Ok(infos)
        }
        code => Err(code),
    }
}

//! The memory and process calls this driver has, chosen once at start: `_v2` memory and the
//! `_v3` process calls where the driver has them (R510 and later), else the older calls whose
//! struct layouts strata knows, and one line saying what is missing.

use super::query::Handle;
use super::refusal::{Refusal, INSUFFICIENT_SIZE};
use crate::sample::DeviceMemory;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlMemory_t, nvmlProcessInfo_t, nvmlProcessInfo_v1_t, nvmlReturn_t,
};
use std::os::raw::c_uint;

/// A process call that fills `nvmlProcessInfo_t` (24 bytes, with instance ids): the `_v3` and
/// `_v2` calls.
type FullCall =
    unsafe extern "C" fn(nvmlDevice_t, *mut c_uint, *mut nvmlProcessInfo_t) -> nvmlReturn_t;
/// An unversioned process call: `nvmlProcessInfo_v1_t` (16 bytes, no instance ids).
type V1Call =
    unsafe extern "C" fn(nvmlDevice_t, *mut c_uint, *mut nvmlProcessInfo_v1_t) -> nvmlReturn_t;
type MemoryV1Call = unsafe extern "C" fn(nvmlDevice_t, *mut nvmlMemory_t) -> nvmlReturn_t;

/// NVML's `NVML_VALUE_NOT_AVAILABLE` for a 64-bit value.
const VALUE_NOT_AVAILABLE: u64 = u64::MAX;
/// What NVML writes for an instance id that does not apply.
const NO_INSTANCE_ID: u32 = u32::MAX;
/// More entries than any real device lists: a count above it is not believed (nor allocated).
const MOST_PROCESSES: u32 = 1 << 16;

/// The three process lists of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ListKind {
    Compute,
    Graphics,
    /// Clients of an MPS server.
    Mps,
}

impl ListKind {
    pub(super) const ALL: [ListKind; 3] = [ListKind::Compute, ListKind::Graphics, ListKind::Mps];

    fn stem(self) -> &'static str {
        match self {
            ListKind::Compute => "nvmlDeviceGetComputeRunningProcesses",
            ListKind::Graphics => "nvmlDeviceGetGraphicsRunningProcesses",
            ListKind::Mps => "nvmlDeviceGetMPSComputeRunningProcesses",
        }
    }

    fn v3_name(self) -> &'static str {
        match self {
            ListKind::Compute => "nvmlDeviceGetComputeRunningProcesses_v3",
            ListKind::Graphics => "nvmlDeviceGetGraphicsRunningProcesses_v3",
            ListKind::Mps => "nvmlDeviceGetMPSComputeRunningProcesses_v3",
        }
    }

    fn v2_name(self) -> &'static str {
        match self {
            ListKind::Compute => "nvmlDeviceGetComputeRunningProcesses_v2",
            ListKind::Graphics => "nvmlDeviceGetGraphicsRunningProcesses_v2",
            ListKind::Mps => "nvmlDeviceGetMPSComputeRunningProcesses_v2",
        }
    }
}

/// How one list is read on this driver.
#[derive(Clone, Copy)]
enum ProcessCall {
    /// `_v3` or `_v2`, by name.
    Full(FullCall, &'static str),
    /// The unversioned call.
    V1(V1Call, &'static str),
    /// None of them: the `_v3` name, for the refusal.
    Missing(&'static str),
}

/// One entry of a process list, as NVML wrote it (nothing dropped or clamped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Listed {
    pub(super) pid: u32,
    /// `None` for `NVML_VALUE_NOT_AVAILABLE`.
    pub(super) used: Option<u64>,
    /// GPU and compute instance ids, where NVML gave both (MIG mode, not the v1 layout).
    pub(super) instance: Option<(u32, u32)>,
}

/// The calls chosen for this driver.
pub(super) struct Api {
    memory_v2: bool,
    memory_v1: Option<MemoryV1Call>,
    lists: [ProcessCall; 3],
}

impl Api {
    /// Looks up which calls the loaded library has.
    pub(super) fn of(nvml: &Nvml) -> Api {
        let lib = nvml.lib();
        let v3 = |kind: ListKind| -> Option<FullCall> {
            let symbol = match kind {
                ListKind::Compute => &lib.nvmlDeviceGetComputeRunningProcesses_v3,
                ListKind::Graphics => &lib.nvmlDeviceGetGraphicsRunningProcesses_v3,
                ListKind::Mps => &lib.nvmlDeviceGetMPSComputeRunningProcesses_v3,
            };
            symbol.as_ref().ok().copied()
        };
        let lists = ListKind::ALL.map(|kind| {
            if let Some(call) = v3(kind) {
                return ProcessCall::Full(call, kind.v3_name());
            }
            let v2_symbol = format!("{}\0", kind.v2_name());
            let v1_symbol = format!("{}\0", kind.stem());
            // SAFETY: the `_v2` calls take `nvmlProcessInfo_v2_t` (= `nvmlProcessInfo_t`, 24
            // bytes) and the unversioned ones `nvmlProcessInfo_v1_t`, as nvml.h declares them.
            // The pointers stay valid while `nvml` keeps the library loaded, and the source
            // holds `nvml` for as long as it holds the `Api`.
            unsafe {
                if let Ok(symbol) = lib.__library.get::<FullCall>(v2_symbol.as_bytes()) {
                    return ProcessCall::Full(*symbol, kind.v2_name());
                }
                if let Ok(symbol) = lib.__library.get::<V1Call>(v1_symbol.as_bytes()) {
                    return ProcessCall::V1(*symbol, kind.stem());
                }
            }
            ProcessCall::Missing(kind.v3_name())
        });
        Api {
            memory_v2: lib.nvmlDeviceGetMemoryInfo_v2.is_ok(),
            memory_v1: lib.nvmlDeviceGetMemoryInfo.as_ref().ok().copied(),
            lists,
        }
    }

    fn list(&self, kind: ListKind) -> ProcessCall {
        match kind {
            ListKind::Compute => self.lists[0],
            ListKind::Graphics => self.lists[1],
            ListKind::Mps => self.lists[2],
        }
    }

    /// Whether the driver has no call at all for `kind`.
    pub(super) fn lacks(&self, kind: ListKind) -> bool {
        matches!(self.list(kind), ProcessCall::Missing(_))
    }

    /// The memory call chosen (`_v2`, else v1), `None` when the driver has neither.
    pub(super) fn memory_call(&self) -> Option<&'static str> {
        match (self.memory_v2, self.memory_v1) {
            (true, _) => Some("nvmlDeviceGetMemoryInfo_v2"),
            (false, Some(_)) => Some("nvmlDeviceGetMemoryInfo"),
            (false, None) => None,
        }
    }

    /// One line naming the driver and what it lacks, when it lacks a call strata prefers.
    pub(super) fn driver_problem(&self, driver_version: Option<&str>) -> Option<String> {
        let mut missing = Vec::new();
        let mut instead = Vec::new();
        if !self.memory_v2 {
            missing.push("nvmlDeviceGetMemoryInfo_v2".to_string());
            instead.push(match self.memory_v1 {
                Some(_) => {
                    "memory from the v1 call (the driver's reservation is inside `used`, not apart)"
                }
                None => "no memory at all",
            });
        }
        let lacking: Vec<ListKind> = ListKind::ALL
            .into_iter()
            .filter(|kind| !matches!(self.list(*kind), ProcessCall::Full(_, name) if name.ends_with("_v3")))
            .collect();
        if !lacking.is_empty() {
            missing.push(match lacking.len() {
                3 => "the _v3 process calls".to_string(),
                _ => lacking
                    .iter()
                    .map(|k| k.v3_name())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
            let fallbacks = lacking.iter().map(|k| self.list(*k));
            if fallbacks
                .clone()
                .all(|c| matches!(c, ProcessCall::Full(..)))
            {
                instead.push("processes from the _v2 calls");
            } else if fallbacks
                .clone()
                .any(|c| matches!(c, ProcessCall::Missing(_)))
            {
                instead.push("some process lists cannot be read at all");
            } else {
                instead.push("processes from the unversioned calls (no MIG instance ids)");
            }
        }
        if missing.is_empty() {
            return None;
        }
        Some(format!(
            "driver {} lacks {} (R510 and later have them): {}; upgrade the driver for the full picture",
            driver_version.unwrap_or("of unknown version"),
            missing.join(" and "),
            instead.join(", ")
        ))
    }

    /// The device's memory: `_v2` where the driver has it, else v1 (`driver_reserved` unknown).
    pub(super) fn memory(&self, device: &Device<'_>) -> Result<DeviceMemory, Refusal> {
        if self.memory_v2 {
            return device
                .memory_info()
                .map(|m| DeviceMemory {
                    total: m.total,
                    used: m.used,
                    free: m.free,
                    driver_reserved: Some(m.reserved),
                })
                .map_err(|e| Refusal::of("nvmlDeviceGetMemoryInfo_v2", e));
        }
        let call = self
            .memory_v1
            .ok_or(Refusal::missing("nvmlDeviceGetMemoryInfo"))?;
        let mut memory = nvmlMemory_t {
            total: 0,
            free: 0,
            used: 0,
        };
        // SAFETY: a live handle of this library and a valid out pointer of the v1 layout.
        let code = unsafe { call(device.handle(), &mut memory) };
        match code {
            0 => Ok(DeviceMemory {
                total: memory.total,
                used: memory.used,
                free: memory.free,
                driver_reserved: None,
            }),
            code => Err(Refusal::code("nvmlDeviceGetMemoryInfo", code)),
        }
    }

    /// One process list of a device, with NVML's count protocol (retried when the count
    /// changes between the two calls).
    pub(super) fn processes(&self, handle: Handle, kind: ListKind) -> Result<Vec<Listed>, Refusal> {
        match self.list(kind) {
            ProcessCall::Missing(name) => Err(Refusal::missing(name)),
            ProcessCall::Full(call, name) => {
                let empty = nvmlProcessInfo_t {
                    pid: 0,
                    usedGpuMemory: 0,
                    gpuInstanceId: NO_INSTANCE_ID,
                    computeInstanceId: NO_INSTANCE_ID,
                };
                // SAFETY: `call` fills `nvmlProcessInfo_t` entries, up to the count given.
                let list = read_list(
                    |count, buffer| unsafe { call(handle.0, count, buffer) },
                    empty,
                )
                .map_err(|code| Refusal::code(name, code))?;
                Ok(list
                    .iter()
                    .map(|p| Listed {
                        pid: p.pid,
                        used: used(p.usedGpuMemory),
                        instance: (p.gpuInstanceId != NO_INSTANCE_ID
                            && p.computeInstanceId != NO_INSTANCE_ID)
                            .then_some((p.gpuInstanceId, p.computeInstanceId)),
                    })
                    .collect())
            }
            ProcessCall::V1(call, name) => {
                let empty = nvmlProcessInfo_v1_t {
                    pid: 0,
                    usedGpuMemory: 0,
                };
                // SAFETY: `call` fills `nvmlProcessInfo_v1_t` entries, up to the count given.
                let list = read_list(
                    |count, buffer| unsafe { call(handle.0, count, buffer) },
                    empty,
                )
                .map_err(|code| Refusal::code(name, code))?;
                Ok(list
                    .iter()
                    .map(|p| Listed {
                        pid: p.pid,
                        used: used(p.usedGpuMemory),
                        instance: None,
                    })
                    .collect())
            }
        }
    }
}

fn used(raw: u64) -> Option<u64> {
    (raw != VALUE_NOT_AVAILABLE).then_some(raw)
}

/// NVML's two-call protocol: a size query (null buffer), then a buffer with room for 5 more;
/// tried again (twice) when the list grew in between. Returns the entries or NVML's code.
fn read_list<E: Copy>(
    call: impl Fn(*mut c_uint, *mut E) -> nvmlReturn_t,
    empty: E,
) -> Result<Vec<E>, u32> {
    for _attempt in 0..3 {
        let mut count: c_uint = 0;
        match call(&mut count, std::ptr::null_mut()) {
            0 => return Ok(Vec::new()),
            INSUFFICIENT_SIZE => {}
            code => return Err(code),
        }
        if count > MOST_PROCESSES {
            return Err(INSUFFICIENT_SIZE);
        }
        let mut capacity = count.saturating_add(5);
        let mut buffer = vec![empty; capacity as usize];
        match call(&mut capacity, buffer.as_mut_ptr()) {
            0 => {
                buffer.truncate(capacity as usize);
                return Ok(buffer);
            }
            INSUFFICIENT_SIZE => continue,
            code => return Err(code),
        }
    }
    Err(INSUFFICIENT_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn the_count_protocol_retries_when_the_list_grows() {
        let real = Cell::new(2u32);
        let calls = Cell::new(0);
        let list = read_list(
            |count: *mut c_uint, buffer: *mut u32| {
                calls.set(calls.get() + 1);
                // SAFETY: test pointers from `read_list`, with room for `*count` entries.
                unsafe {
                    if buffer.is_null() {
                        *count = real.get();
                        // Between the first size query and the fetch, eight more start.
                        if calls.get() == 1 {
                            real.set(real.get() + 8);
                        }
                        return INSUFFICIENT_SIZE;
                    }
                    if *count < real.get() {
                        *count = real.get();
                        return INSUFFICIENT_SIZE;
                    }
                    for i in 0..real.get() {
                        *buffer.add(i as usize) = i + 100;
                    }
                    *count = real.get();
                }
                0
            },
            0u32,
        );
        assert_eq!(list, Ok((100..110).collect::<Vec<u32>>()));
        assert_eq!(calls.get(), 4, "size, too small, size again, fetch");
    }

    #[test]
    fn an_absurd_count_is_refused_not_allocated() {
        let list = read_list(
            |count: *mut c_uint, _buffer: *mut u64| {
                // SAFETY: a valid count pointer.
                unsafe { *count = u32::MAX };
                INSUFFICIENT_SIZE
            },
            0u64,
        );
        assert_eq!(list, Err(INSUFFICIENT_SIZE));
        assert_eq!(used(u64::MAX), None);
        assert_eq!(used(0), Some(0));
    }
}

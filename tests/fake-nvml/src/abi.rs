//! NVML's C structs, laid out as `nvml.h` (and nvml-wrapper-sys 0.10's bindings) define them.
//! The size assertions pin the layouts that clients rely on.

use std::ffi::{c_char, c_uint, c_ulonglong, c_void};

/// `nvmlDevice_t`: an opaque pointer.
pub type NvmlDevice = *mut c_void;

/// `nvmlMemory_t` (v1): note the order total, free, used; `used` includes reserved memory.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct NvmlMemory {
    pub total: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// `nvmlMemory_v2_t`: order version, total, reserved, free, used; `used` excludes reserved.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct NvmlMemoryV2 {
    pub version: c_uint,
    pub total: c_ulonglong,
    pub reserved: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// `NVML_STRUCT_VERSION(Memory, 2)` = `sizeof(nvmlMemory_v2_t) | 2 << 24` = `0x02000028`.
pub const NVML_MEMORY_V2_VERSION: c_uint =
    (std::mem::size_of::<NvmlMemoryV2>() as c_uint) | (2 << 24);

/// `nvmlUtilization_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct NvmlUtilization {
    pub gpu: c_uint,
    pub memory: c_uint,
}

/// `nvmlProcessInfo_t` as the `_v3` process calls fill it (same layout as `nvmlProcessInfo_v2_t`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct NvmlProcessInfo {
    pub pid: c_uint,
    pub used_gpu_memory: c_ulonglong,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}

/// `nvmlProcessInfo_v1_t`, what the unversioned process calls fill (the oldest drivers' only
/// layout): no instance ids.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct NvmlProcessInfoV1 {
    pub pid: c_uint,
    pub used_gpu_memory: c_ulonglong,
}

/// `nvmlProcessUtilizationSample_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct NvmlProcessUtilizationSample {
    pub pid: c_uint,
    pub time_stamp: c_ulonglong,
    pub sm_util: c_uint,
    pub mem_util: c_uint,
    pub enc_util: c_uint,
    pub dec_util: c_uint,
}

/// `nvmlPciInfo_t` (the layout `nvmlDeviceGetPciInfo_v3` fills).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct NvmlPciInfo {
    pub bus_id_legacy: [c_char; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub bus_id: [c_char; 32],
}

/// The legacy `nvmlPciInfo_t` that `nvmlDeviceGetPciInfo` and `_v2` fill (pynvml's
/// `nvmlPciInfo_v2_t`): the bus id in the old 16-byte form (`DDDD:BB:DD.F`) first, and four
/// reserved words where the newer layout has its 32-byte bus id.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct NvmlPciInfoLegacy {
    pub bus_id: [c_char; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub reserved: [c_uint; 4],
}

/// `nvmlBAR1Memory_t`: total, free, used.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct NvmlBar1Memory {
    pub bar1_total: c_ulonglong,
    pub bar1_free: c_ulonglong,
    pub bar1_used: c_ulonglong,
}

const _: () = assert!(std::mem::size_of::<NvmlMemory>() == 24);
const _: () = assert!(std::mem::size_of::<NvmlBar1Memory>() == 24);
const _: () = assert!(std::mem::size_of::<NvmlMemoryV2>() == 40);
const _: () = assert!(NVML_MEMORY_V2_VERSION == 0x0200_0028);
const _: () = assert!(std::mem::size_of::<NvmlUtilization>() == 8);
const _: () = assert!(std::mem::size_of::<NvmlProcessInfo>() == 24);
const _: () = assert!(std::mem::size_of::<NvmlProcessInfoV1>() == 16);
const _: () = assert!(std::mem::size_of::<NvmlProcessUtilizationSample>() == 32);
const _: () = assert!(std::mem::size_of::<NvmlPciInfo>() == 68);
const _: () = assert!(std::mem::size_of::<NvmlPciInfoLegacy>() == 52);

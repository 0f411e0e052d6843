//! Exported NVML functions about the board around the GPU: its PCI address (all three
//! layouts), the BAR1 aperture, the PCIe link and its traffic, the fan, the temperature
//! thresholds and the video engines. strata reads only `nvmlDeviceGetPciInfo_v3`; the rest
//! are what other monitors ask (nvtop requires all but BAR1; nvitop draws a MIG device's BAR1
//! and fails without it), so that they can run on a fake node beside strata.
//!
//! Safety contract of every `unsafe extern "C"` function here: `device` is any value (unknown
//! handles are refused) and each other pointer is null or valid for the access NVML's C API
//! documents for it.
#![allow(clippy::missing_safety_doc)]

use std::ffi::c_uint;

use crate::abi::{NvmlBar1Memory, NvmlDevice, NvmlPciInfo, NvmlPciInfoLegacy};
use crate::codes::{ERROR_INVALID_ARGUMENT, ERROR_NOT_SUPPORTED, ERROR_UNKNOWN};
use crate::ffi_util::{c_array, guard, put};
use crate::scenario::{Answer, Scripted};
use crate::state::{self, Ctx};
use crate::validate::{bus_id_of, parse_bus_id, PciLocation};

/// PCI device id answered for every GPU (H100 SXM5's `0x2330` from vendor `0x10DE`).
const PCI_DEVICE_ID: c_uint = 0x2330_10DE;
const PCI_SUBSYSTEM_ID: c_uint = 0x16C1_10DE;

/// NVML's `NVML_PCIE_UTIL_TX_BYTES` and `NVML_PCIE_UTIL_RX_BYTES`.
const PCIE_TX: c_uint = 0;
const PCIE_RX: c_uint = 1;
/// NVML's `NVML_TEMPERATURE_THRESHOLD_SHUTDOWN` and `_SLOWDOWN`.
const THRESHOLD_SHUTDOWN: c_uint = 0;
const THRESHOLD_SLOWDOWN: c_uint = 1;
/// The sampling period the encoder and decoder calls answer with their utilization, µs.
pub const VIDEO_SAMPLING_PERIOD_US: c_uint = 1_000_000;

/// The GPU's bus id (a MIG device's is its parent's), parsed.
fn pci_of(ctx: &Ctx) -> Result<(String, PciLocation), u32> {
    let bus_id = bus_id_of(ctx.device, ctx.gpu_index);
    let location = parse_bus_id(&bus_id).ok_or(ERROR_UNKNOWN)?;
    Ok((bus_id, location))
}

/// The legacy form of a bus id, `DDDD:BB:DD.F` (a 4-digit domain), as `busIdLegacy` holds it.
fn legacy_bus_id(location: PciLocation) -> String {
    format!(
        "{:04X}:{:02X}:{:02X}.{:X}",
        location.domain & 0xFFFF,
        location.bus,
        location.device,
        location.function
    )
}

/// A figure of the board: a MIG device has none of its own (`NVML_ERROR_NOT_SUPPORTED`).
fn board<'a, T>(
    ctx: &Ctx<'a>,
    field: impl FnOnce(&'a crate::scenario::Device) -> &'a Answer<T>,
) -> Result<&'a T, u32> {
    if ctx.instance.is_some() {
        return Err(ERROR_NOT_SUPPORTED);
    }
    field(ctx.device).get()
}

/// Reads one scripted figure of the board at the current poll into `out`.
///
/// # Safety
/// `out` must be null or valid for writing an unsigned int.
unsafe fn read_scripted(
    device: NvmlDevice,
    call: &'static str,
    out: *mut c_uint,
    field: impl FnOnce(&crate::scenario::Device) -> &Answer<Scripted<u32>>,
) -> u32 {
    guard(|| {
        state::with_device(device, call, false, |ctx| {
            let value = board(ctx, field)?.at(ctx.poll);
            // SAFETY: `out` is null or points to an unsigned int (the caller's contract).
            unsafe { put(out, value) }
        })
    })
}

/// PCI info of the GPU (a MIG device answers its parent's).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(device: NvmlDevice, pci: *mut NvmlPciInfo) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetPciInfo_v3", false, |ctx| {
            let (bus_id, location) = pci_of(ctx)?;
            let answer = NvmlPciInfo {
                bus_id_legacy: c_array(&legacy_bus_id(location)),
                domain: location.domain,
                bus: location.bus,
                device: location.device,
                pci_device_id: PCI_DEVICE_ID,
                pci_sub_system_id: PCI_SUBSYSTEM_ID,
                bus_id: c_array(&bus_id),
            };
            // SAFETY: `pci` is null or points to an nvmlPciInfo_t (contract above).
            unsafe { put(pci, answer) }
        })
    })
}

fn pci_legacy(device: NvmlDevice, call: &'static str, pci: *mut NvmlPciInfoLegacy) -> u32 {
    guard(|| {
        state::with_device(device, call, false, |ctx| {
            let (_, location) = pci_of(ctx)?;
            let answer = NvmlPciInfoLegacy {
                bus_id: c_array(&legacy_bus_id(location)),
                domain: location.domain,
                bus: location.bus,
                device: location.device,
                pci_device_id: PCI_DEVICE_ID,
                pci_sub_system_id: PCI_SUBSYSTEM_ID,
                reserved: [0; 4],
            };
            // SAFETY: `pci` is null or points to the legacy nvmlPciInfo_t (contract above).
            unsafe { put(pci, answer) }
        })
    })
}

/// The oldest PCI call: the legacy 52-byte layout, bus id `DDDD:BB:DD.F`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo(
    device: NvmlDevice,
    pci: *mut NvmlPciInfoLegacy,
) -> u32 {
    pci_legacy(device, "nvmlDeviceGetPciInfo", pci)
}

/// The same legacy layout as `nvmlDeviceGetPciInfo`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v2(
    device: NvmlDevice,
    pci: *mut NvmlPciInfoLegacy,
) -> u32 {
    pci_legacy(device, "nvmlDeviceGetPciInfo_v2", pci)
}

/// The BAR1 aperture of the GPU, or of the MIG device (its own share).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetBAR1MemoryInfo(
    device: NvmlDevice,
    bar1: *mut NvmlBar1Memory,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetBAR1MemoryInfo", false, |ctx| {
            let memory = match ctx.instance {
                Some(instance) => instance.bar1_memory.get()?,
                None => ctx.device.bar1_memory.get()?,
            };
            let used = memory.used.at(ctx.poll);
            let answer = NvmlBar1Memory {
                bar1_total: memory.total,
                bar1_free: memory.total.saturating_sub(used),
                bar1_used: used,
            };
            // SAFETY: `bar1` is null or points to an nvmlBAR1Memory_t (contract above).
            unsafe { put(bar1, answer) }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCurrPcieLinkGeneration(
    device: NvmlDevice,
    generation: *mut c_uint,
) -> u32 {
    guard(|| {
        state::with_device(
            device,
            "nvmlDeviceGetCurrPcieLinkGeneration",
            false,
            |ctx| {
                let now = board(ctx, |d| &d.pcie_link)?.generation.at(ctx.poll);
                // SAFETY: `generation` is null or points to an unsigned int (contract above).
                unsafe { put(generation, now) }
            },
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCurrPcieLinkWidth(
    device: NvmlDevice,
    width: *mut c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetCurrPcieLinkWidth", false, |ctx| {
            let now = board(ctx, |d| &d.pcie_link)?.width.at(ctx.poll);
            // SAFETY: `width` is null or points to an unsigned int (contract above).
            unsafe { put(width, now) }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxPcieLinkGeneration(
    device: NvmlDevice,
    generation: *mut c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetMaxPcieLinkGeneration", false, |ctx| {
            let max = board(ctx, |d| &d.pcie_link)?.max_generation;
            // SAFETY: `generation` is null or points to an unsigned int (contract above).
            unsafe { put(generation, max) }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxPcieLinkWidth(
    device: NvmlDevice,
    width: *mut c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetMaxPcieLinkWidth", false, |ctx| {
            let max = board(ctx, |d| &d.pcie_link)?.max_width;
            // SAFETY: `width` is null or points to an unsigned int (contract above).
            unsafe { put(width, max) }
        })
    })
}

/// PCIe traffic, KB/s: `counter` 0 is sent (TX), 1 received (RX); any other is refused with
/// `NVML_ERROR_INVALID_ARGUMENT`, as NVML does.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPcieThroughput(
    device: NvmlDevice,
    counter: c_uint,
    value: *mut c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetPcieThroughput", false, |ctx| {
            let throughput = board(ctx, |d| &d.pcie_throughput)?;
            let kb_per_sec = match counter {
                PCIE_TX => throughput.tx.at(ctx.poll),
                PCIE_RX => throughput.rx.at(ctx.poll),
                _ => return Err(ERROR_INVALID_ARGUMENT),
            };
            // SAFETY: `value` is null or points to an unsigned int (contract above).
            unsafe { put(value, kb_per_sec) }
        })
    })
}

/// The fan's speed, percent of its maximum.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetFanSpeed(device: NvmlDevice, speed: *mut c_uint) -> u32 {
    // SAFETY: `speed` is null or points to an unsigned int (contract above).
    unsafe { read_scripted(device, "nvmlDeviceGetFanSpeed", speed, |d| &d.fan_speed) }
}

/// The shutdown (0) and slowdown (1) temperatures, °C; other thresholds are not supported.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperatureThreshold(
    device: NvmlDevice,
    threshold: c_uint,
    temp: *mut c_uint,
) -> u32 {
    guard(|| {
        state::with_device(device, "nvmlDeviceGetTemperatureThreshold", false, |ctx| {
            let thresholds = board(ctx, |d| &d.temperature_thresholds)?;
            let celsius = match threshold {
                THRESHOLD_SHUTDOWN => thresholds.shutdown,
                THRESHOLD_SLOWDOWN => thresholds.slowdown,
                _ => return Err(ERROR_NOT_SUPPORTED),
            };
            // SAFETY: `temp` is null or points to an unsigned int (contract above).
            unsafe { put(temp, celsius) }
        })
    })
}

/// A video engine's utilization and the period it was sampled over; both out pointers are
/// required.
fn video(
    device: NvmlDevice,
    call: &'static str,
    utilization: *mut c_uint,
    period_us: *mut c_uint,
    field: impl FnOnce(&crate::scenario::Device) -> &Answer<Scripted<u32>>,
) -> u32 {
    guard(|| {
        state::with_device(device, call, false, |ctx| {
            if period_us.is_null() {
                return Err(ERROR_INVALID_ARGUMENT);
            }
            let percent = board(ctx, field)?.at(ctx.poll);
            // SAFETY: both are null or point to an unsigned int (the exported functions'
            // contract); `put` refuses a null `utilization` before writing either.
            unsafe {
                put(utilization, percent)?;
                put(period_us, VIDEO_SAMPLING_PERIOD_US)
            }
        })
    })
}

/// The video encoder's utilization, percent, and its sampling period (µs).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEncoderUtilization(
    device: NvmlDevice,
    utilization: *mut c_uint,
    period_us: *mut c_uint,
) -> u32 {
    video(
        device,
        "nvmlDeviceGetEncoderUtilization",
        utilization,
        period_us,
        |d| &d.encoder_utilization,
    )
}

/// The video decoder's utilization, percent, and its sampling period (µs).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDecoderUtilization(
    device: NvmlDevice,
    utilization: *mut c_uint,
    period_us: *mut c_uint,
) -> u32 {
    video(
        device,
        "nvmlDeviceGetDecoderUtilization",
        utilization,
        period_us,
        |d| &d.decoder_utilization,
    )
}

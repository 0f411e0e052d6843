//! One poll of one GPU: its memory, utilization, temperature, power, SM clock, MIG mode and
//! processes (or, in MIG mode, its instances'), each refusal kept beside the value it cost.

use super::handles::GpuSlot;
use super::mig;
use super::processes;
use super::query::{sm_utilization, Handle};
use super::read::{note, value, Lost, Placed, Reader};
use super::refusal::NO_PERMISSION;
use crate::sample::{GpuInfo, GpuSample};
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use std::collections::HashMap;

/// NVML's value for "enabled" in `nvmlDeviceGetMigMode`.
const MIG_ENABLED: u32 = 1;

/// One GPU as one poll saw it.
pub(super) struct GpuRead {
    pub(super) gpu: GpuSample,
    pub(super) placed: Vec<Placed>,
    /// Per-process SM utilization, by pid.
    pub(super) sm: HashMap<u32, u32>,
    /// The latest utilization timestamp seen (µs), for the next poll's query.
    pub(super) seen: u64,
}

/// Reads one GPU. A GPU whose handle is refused appears with its index, its placeholder UUID
/// and the refusal, and no values; on `GPU_IS_LOST` it is returned lost, with no values: none
/// of them would be current.
pub(super) fn read(reader: &Reader<'_>, slot: &GpuSlot, seen_before: u64) -> GpuRead {
    let mut gpu = GpuSample {
        info: GpuInfo {
            name: slot.name.clone(),
            pci_bus_id: slot.pci_bus_id.clone(),
            minor_number: slot.minor_number,
            lost: slot.lost,
            processes_known: false,
            ..GpuInfo::new(slot.index, slot.uuid.clone())
        },
        mig: Vec::new(),
        problems: slot
            .refused
            .iter()
            .map(|(key, refusal)| (key.to_string(), refusal.line()))
            .collect(),
    };
    let idle = |gpu| GpuRead {
        gpu,
        placed: Vec::new(),
        sm: HashMap::new(),
        seen: seen_before,
    };
    let Some(handle) = slot.handle else {
        return idle(gpu);
    };
    let identity = gpu.clone();
    match read_live(reader, handle, &mut gpu, seen_before) {
        Ok((placed, sm, seen)) => GpuRead {
            gpu,
            placed,
            sm,
            seen,
        },
        Err(Lost) => idle(GpuSample {
            info: GpuInfo {
                lost: true,
                ..identity.info
            },
            problems: Default::default(),
            ..identity
        }),
    }
}

type Live = (Vec<Placed>, HashMap<u32, u32>, u64);

fn read_live(
    reader: &Reader<'_>,
    handle: Handle,
    gpu: &mut GpuSample,
    seen_before: u64,
) -> Result<Live, Lost> {
    let device = reader.device(handle);
    // The memory read comes first: it is what a poll is, to NVML's own samplers and the fake.
    let memory = reader.api.memory(&device);
    let problems = &mut gpu.problems;
    gpu.info.utilization_gpu = value(
        device.utilization_rates().map(|u| u.gpu),
        "nvmlDeviceGetUtilizationRates",
        "utilization",
        problems,
    )?;
    gpu.info.temperature = value(
        device.temperature(TemperatureSensor::Gpu),
        "nvmlDeviceGetTemperature",
        "temperature",
        problems,
    )?;
    gpu.info.power_mw = value(
        device.power_usage(),
        "nvmlDeviceGetPowerUsage",
        "power",
        problems,
    )?;
    gpu.info.power_limit_mw = value(
        device.enforced_power_limit(),
        "nvmlDeviceGetEnforcedPowerLimit",
        "power_limit",
        problems,
    )?;
    gpu.info.sm_clock_mhz = value(
        device.clock_info(Clock::SM),
        "nvmlDeviceGetClockInfo",
        "sm_clock",
        problems,
    )?;
    gpu.info.sm_clock_max_mhz = value(
        device.max_clock_info(Clock::SM),
        "nvmlDeviceGetMaxClockInfo",
        "sm_clock_max",
        problems,
    )?;
    gpu.info.mig_mode = value(
        device.mig_mode().map(|m| m.current == MIG_ENABLED),
        "nvmlDeviceGetMigMode",
        "mig_mode",
        problems,
    )?;
    let in_mig = gpu.info.mig_mode == Some(true);
    match memory {
        Ok(memory) => gpu.info.memory = Some(memory),
        Err(refusal) if in_mig && refusal.is(NO_PERMISSION) => {
            problems.insert(
                "memory".into(),
                refusal.line_saying(
                    "the parent GPU's memory in MIG mode needs root (run strata as root); each instance's memory is shown",
                ),
            );
        }
        Err(refusal) => note(refusal, "memory", problems)?,
    }
    let mut seen = seen_before;
    let since = (seen > 0).then_some(seen);
    let (mut sm, sm_refused) = sm_utilization(&device, since, &mut seen);
    if let Some(refusal) = sm_refused {
        // Each process's SM share is then n/a, and this says why.
        note(refusal, "process_utilization", problems)?;
    }
    let placed = if in_mig {
        mig::read(reader, &device, handle, gpu, since, &mut sm)?
    } else {
        let lists = processes::read(reader.api, handle);
        if lists.lost {
            return Err(Lost);
        }
        gpu.processes_known = lists.known();
        if let Some(problem) = lists.problem() {
            gpu.problems.insert("processes".into(), problem);
        }
        let uuid: std::sync::Arc<str> = gpu.uuid.as_str().into();
        lists
            .by_pid
            .into_iter()
            .map(|(pid, holding)| Placed {
                pid,
                device_uuid: std::sync::Arc::clone(&uuid),
                holding,
            })
            .collect()
    };
    Ok((placed, sm, seen))
}

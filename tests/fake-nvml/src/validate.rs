//! Checks on a parsed scenario that serde cannot express, so that a mistake in a scenario
//! fails `nvmlInit` with a message instead of producing a confusing answer later.

use std::collections::HashSet;

use crate::faults::{self, DEVICE_CALLS, SYSTEM_CALLS};
use crate::scenario::{
    Answer, Device, Process, ProcessUtilization, Scenario, MAX_DEVICES, MAX_MIG_SLOTS,
};

/// PCI location parsed from a bus id such as `00000000:18:00.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciLocation {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub function: u32,
}

/// Parses `DDDDDDDD:BB:DD.F` (hex, domain of up to 8 digits).
pub fn parse_bus_id(bus_id: &str) -> Option<PciLocation> {
    let (domain, rest) = bus_id.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    let hex = |part: &str, max_len: usize| {
        (!part.is_empty() && part.len() <= max_len)
            .then(|| u32::from_str_radix(part, 16).ok())
            .flatten()
    };
    Some(PciLocation {
        domain: hex(domain, 8)?,
        bus: hex(bus, 2)?,
        device: hex(device, 2)?,
        function: hex(function, 1)?,
    })
}

/// The bus id a device answers: the scenario's, else one derived from its index.
pub fn bus_id_of(device: &Device, index: usize) -> String {
    match &device.pci_bus_id {
        Some(bus_id) => bus_id.clone(),
        None => format!("00000000:{:02X}:00.0", (0x18 + 0x10 * index) % 0x100),
    }
}

/// Every problem is reported with the device (and MIG slot) it is in.
pub fn check(scenario: &Scenario) -> Result<(), String> {
    if scenario.devices.len() > MAX_DEVICES {
        return Err(format!(
            "{} devices: the fake supports at most {MAX_DEVICES}",
            scenario.devices.len()
        ));
    }
    for text in [
        &scenario.system.driver_version,
        &scenario.system.nvml_version,
    ] {
        check_string(text, "system")?;
    }
    faults::check(&scenario.system.faults, SYSTEM_CALLS, "system")?;
    let mut uuids = HashSet::new();
    for (index, device) in scenario.devices.iter().enumerate() {
        let at = format!("devices[{index}]");
        check_device(device, &at, &mut uuids)?;
    }
    Ok(())
}

fn check_device<'a>(
    device: &'a Device,
    at: &str,
    uuids: &mut HashSet<&'a str>,
) -> Result<(), String> {
    check_string(&device.name, at)?;
    check_uuid(&device.uuid, at, uuids)?;
    if let Some(bus_id) = &device.pci_bus_id {
        if parse_bus_id(bus_id).is_none() {
            return Err(format!(
                "{at}: pci_bus_id {bus_id:?} is not of the form 00000000:18:00.0"
            ));
        }
    }
    if let Answer::Value(max) = device.max_mig_devices {
        if max > MAX_MIG_SLOTS {
            return Err(format!(
                "{at}: max_mig_devices {max} is above the fake's limit of {MAX_MIG_SLOTS}"
            ));
        }
    }
    check_processes(&device.compute_processes, at)?;
    check_processes(&device.graphics_processes, at)?;
    check_processes(&device.mps_processes, at)?;
    check_samples(&device.process_utilization, at)?;
    faults::check(&device.faults, DEVICE_CALLS, at)?;
    let mut slots = HashSet::new();
    let mut instance_ids = HashSet::new();
    for instance in &device.mig {
        let mig_at = format!("{at}.mig[slot {}]", instance.slot);
        let limit = match device.max_mig_devices {
            Answer::Value(max) => max,
            Answer::Error(_) => MAX_MIG_SLOTS,
        };
        if instance.slot >= limit {
            return Err(format!(
                "{mig_at}: slot must be below max_mig_devices ({limit})"
            ));
        }
        if !slots.insert(instance.slot) {
            return Err(format!("{mig_at}: two MIG instances use this slot"));
        }
        check_string(&instance.name, &mig_at)?;
        check_uuid(&instance.uuid, &mig_at, uuids)?;
        check_processes(&instance.compute_processes, &mig_at)?;
        check_processes(&instance.graphics_processes, &mig_at)?;
        check_processes(&instance.mps_processes, &mig_at)?;
        check_samples(&instance.process_utilization, &mig_at)?;
        faults::check(&instance.faults, DEVICE_CALLS, &mig_at)?;
        // Several compute instances may share a GPU instance, but a (GI, CI) pair names one.
        if let (Answer::Value(gi), Answer::Value(ci)) =
            (&instance.gpu_instance_id, &instance.compute_instance_id)
        {
            if !instance_ids.insert((*gi, *ci)) {
                return Err(format!(
                    "{mig_at}: GPU instance {gi}, compute instance {ci} is used twice"
                ));
            }
        }
    }
    Ok(())
}

fn check_string(text: &Answer<String>, at: &str) -> Result<(), String> {
    match text {
        Answer::Value(text) if text.contains('\0') => {
            Err(format!("{at}: {text:?} contains a NUL byte"))
        }
        _ => Ok(()),
    }
}

fn check_uuid<'a>(
    uuid: &'a Answer<String>,
    at: &str,
    uuids: &mut HashSet<&'a str>,
) -> Result<(), String> {
    check_string(uuid, at)?;
    if let Answer::Value(uuid) = uuid {
        if !uuids.insert(uuid.as_str()) {
            return Err(format!("{at}: uuid {uuid} is used twice"));
        }
    }
    Ok(())
}

fn check_window(
    window: Option<crate::scenario::PollWindow>,
    at: &str,
    pid: u32,
) -> Result<(), String> {
    match window {
        Some(crate::scenario::PollWindow(from, Some(to))) if to < from => Err(format!(
            "{at}: pid {pid}: polls [{from}, {to}) ends before it starts"
        )),
        _ => Ok(()),
    }
}

fn check_processes(list: &Answer<Vec<Process>>, at: &str) -> Result<(), String> {
    if let Answer::Value(list) = list {
        for process in list {
            check_window(process.polls, at, process.pid)?;
        }
    }
    Ok(())
}

fn check_samples(list: &Answer<Vec<ProcessUtilization>>, at: &str) -> Result<(), String> {
    if let Answer::Value(list) = list {
        for sample in list {
            check_window(sample.polls, at, sample.pid)?;
        }
    }
    Ok(())
}

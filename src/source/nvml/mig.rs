//! A GPU in MIG mode: every MIG device (one per compute instance; several may share a GPU
//! instance and its memory) with its memory and processes, then the parent's own lists for
//! processes no instance lists.

use super::processes;
use super::query::{profile_from_name, raw_id, sm_utilization, Handle};
use super::read::{note, value, Lost, Placed, Reader};
use super::refusal::{Refusal, INVALID_ARGUMENT, NOT_FOUND, NO_PERMISSION};
use crate::sample::{GpuSample, MigInfo, MigSample};
use nvml_wrapper::Device;
use std::collections::HashMap;

/// Reads every MIG device of `parent` into `gpu.mig`, and returns the holders: each on the
/// instance that lists it, or (listed only by the parent) on the instance its ids name, else
/// on the parent GPU itself. `gpu.processes_known` ends false when any instance, its list, the
/// instance count or the parent's list could not be read, and `gpu.problems` says why.
pub(super) fn read(
    reader: &Reader<'_>,
    parent: &Device<'_>,
    parent_handle: Handle,
    gpu: &mut GpuSample,
    since: Option<u64>,
    sm: &mut HashMap<u32, u32>,
) -> Result<Vec<Placed>, Lost> {
    gpu.processes_known = true;
    let mut unreadable = Vec::new();
    let mut unlisted = Vec::new();
    let slots = match parent.mig_device_count() {
        Ok(slots) => slots,
        Err(e) => {
            let refusal = Refusal::of("nvmlDeviceGetMaxMigDeviceCount", e);
            if refusal.is_lost() {
                return Err(Lost);
            }
            unreadable.push(format!(
                "the instances could not be counted: {}",
                refusal.line()
            ));
            0
        }
    };
    let mut placed = Vec::new();
    for slot in 0..slots {
        let mig = match parent.mig_device_by_index(slot) {
            Ok(mig) => mig,
            Err(e) => {
                let refusal = Refusal::of("nvmlDeviceGetMigDeviceHandleByIndex", e);
                if refusal.is_lost() {
                    return Err(Lost);
                }
                // NVML's answer for an empty slot (or one destroyed since the count).
                if !refusal.is(NOT_FOUND) && !refusal.is(INVALID_ARGUMENT) {
                    unreadable.push(format!("slot {slot}: {}", refusal.line()));
                }
                continue;
            }
        };
        let (instance, holders) = read_instance(reader, &mig, gpu.index, slot, since, sm)?;
        if let Some(problem) = instance.problems.get("processes") {
            unlisted.push(format!("{} (slot {slot}): {problem}", instance.uuid));
        }
        placed.extend(holders);
        gpu.mig.push(instance);
    }
    if !unreadable.is_empty() {
        gpu.processes_known = false;
        gpu.problems
            .insert("mig_devices".into(), unreadable.join("; "));
    }
    if !unlisted.is_empty() {
        gpu.processes_known = false;
        gpu.problems.insert("processes".into(), unlisted.join("; "));
    }
    place_parent_listed(reader, parent_handle, gpu, &mut placed)?;
    Ok(placed)
}

/// One MIG device: identity, memory, its lists and the holders they name.
fn read_instance(
    reader: &Reader<'_>,
    mig: &Device<'_>,
    gpu_index: u32,
    slot: u32,
    since: Option<u64>,
    sm: &mut HashMap<u32, u32>,
) -> Result<(MigSample, Vec<Placed>), Lost> {
    // SAFETY: a handle NVML just returned for this library.
    let handle = Handle(unsafe { mig.handle() });
    let memory = reader.api.memory(mig);
    let mut problems = Default::default();
    let uuid = value(mig.uuid(), "nvmlDeviceGetUUID", "uuid", &mut problems)?
        .unwrap_or_else(|| format!("MIG-unreadable-{gpu_index}-{slot}"));
    let name = value(mig.name(), "nvmlDeviceGetName", "profile", &mut problems)?;
    let memory = match memory {
        Ok(memory) => Some(memory),
        Err(refusal) => note(refusal, "memory", &mut problems).map(|()| None)?,
    };
    let lists = processes::read(reader.api, handle);
    if lists.lost {
        return Err(Lost);
    }
    if let Some(problem) = lists.problem() {
        problems.insert("processes".into(), problem);
    }
    let mut seen = 0;
    let (instance_sm, sm_refused) = sm_utilization(mig, since, &mut seen);
    sm.extend(instance_sm);
    if let Some(refusal) = sm_refused {
        note(refusal, "process_utilization", &mut problems)?;
    }
    let lib = reader.nvml.lib();
    let instance = MigSample {
        info: MigInfo {
            profile: name.as_deref().and_then(profile_from_name),
            gpu_instance_id: raw_id(lib.nvmlDeviceGetGpuInstanceId.as_ref().ok(), handle),
            compute_instance_id: raw_id(lib.nvmlDeviceGetComputeInstanceId.as_ref().ok(), handle),
            memory,
            processes_known: lists.known(),
            ..MigInfo::new(uuid.clone())
        },
        problems,
    };
    let shared: std::sync::Arc<str> = uuid.as_str().into();
    let holders = lists
        .by_pid
        .into_iter()
        .map(|(pid, holding)| Placed {
            pid,
            device_uuid: std::sync::Arc::clone(&shared),
            holding,
        })
        .collect();
    Ok((instance, holders))
}

/// The parent's lists (all instances' processes, and those on the parent alone): a pid no
/// instance listed is placed by its instance ids, else on the parent. Reading them needs
/// root in MIG mode; when refused, that is said under `parent`.
fn place_parent_listed(
    reader: &Reader<'_>,
    parent_handle: Handle,
    gpu: &mut GpuSample,
    placed: &mut Vec<Placed>,
) -> Result<(), Lost> {
    let lists = processes::read(reader.api, parent_handle);
    if lists.lost {
        return Err(Lost);
    }
    if !lists.refused.is_empty() {
        gpu.processes_known = false;
        let lines: Vec<String> = lists
            .refused
            .iter()
            .map(|refusal| match refusal.is(NO_PERMISSION) {
                true => refusal.line_saying(
                    "the parent GPU's own process list in MIG mode needs root (run strata as root); a process listed only on the parent is not shown",
                ),
                false => refusal.line(),
            })
            .collect();
        gpu.problems.insert("parent".into(), lines.join("; "));
    }
    for (pid, holding) in lists.by_pid {
        if placed.iter().any(|p| p.pid == pid) {
            continue;
        }
        let on_instance = holding.instance.and_then(|(gi, ci)| {
            gpu.mig
                .iter()
                .find(|m| m.gpu_instance_id == Some(gi) && m.compute_instance_id == Some(ci))
        });
        // Few: a process on the parent alone, or listed by the parent only.
        let device_uuid = on_instance
            .map_or_else(|| gpu.uuid.as_str(), |m| m.uuid.as_str())
            .into();
        placed.push(Placed {
            pid,
            device_uuid,
            holding,
        });
    }
    Ok(())
}

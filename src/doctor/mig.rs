//! A GPU in MIG mode: whether the parent's aggregate figures (its memory and process lists)
//! can be read, which most drivers give to root only, and whether each instance's handle,
//! memory and process lists can be.

use super::refusals::{fix_for, lines, NVML_HUNG};
use super::runner::Lane;
use super::{Check, Group};
use crate::sample::DeviceMemory;
use crate::source::nvml::probe::{refused, DriverCalls, ProcessLists, Refused, RefusedKind};
use crate::source::nvml::profile_from_name;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Device;

/// In MIG mode, the parent GPU's own memory and process lists: root's only, on most drivers.
pub(super) fn parent_figures(
    memory: &Result<DeviceMemory, Refused>,
    lists: &ProcessLists,
) -> Check {
    let mut refusals: Vec<&Refused> = lists.refused.iter().collect();
    if let Err(r) = memory {
        refusals.insert(0, r);
    }
    if refusals.is_empty() && !lists.lost {
        return Check::ok(
            Group::Gpus,
            "parent_figures",
            "the parent GPU's memory and process lists are read in MIG mode",
        );
    }
    if lists.lost {
        return Check::missing(
            Group::Gpus,
            "parent_figures",
            "NVML_ERROR_GPU_IS_LOST: the GPU has fallen off the bus",
            "see `dmesg` (Xid errors), then reset the GPU (`nvidia-smi -r`) or reboot",
        );
    }
    let root = refusals.iter().all(|r| r.kind == RefusedKind::NeedsRoot);
    let meaning = match root {
        true => "the parent GPU's aggregate figures need root in MIG mode: each instance is still read, and a process listed only on the parent is not shown",
        false => "the parent GPU's figures cannot be read: each instance is still read",
    };
    Check::limited(
        Group::Gpus,
        "parent_figures",
        &format!("{meaning} ({})", lines(&refusals)),
        fix_for(&refusals),
    )
}

/// Every MIG instance: its handle, memory and process lists.
pub(super) fn instances<'n>(
    lane: &Lane,
    subject: &str,
    calls: &DriverCalls<'n>,
    parent: &Device<'n>,
) -> Check {
    let step = |what: &str| lane.step(Group::Gpus, "mig_instances", Some(subject), what, NVML_HUNG);
    step("nvmlDeviceGetMaxMigDeviceCount");
    let slots = match parent.mig_device_count() {
        Ok(slots) => slots,
        Err(e) => {
            let r = refused("nvmlDeviceGetMaxMigDeviceCount", e);
            return Check::limited(
                Group::Gpus,
                "mig_instances",
                &format!(
                    "{}: the instances cannot be counted, and none is shown",
                    r.line
                ),
                fix_for(&[&r]),
            );
        }
    };
    let mut profiles = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    let mut refusals: Vec<Refused> = Vec::new();
    for slot in 0..slots {
        step(&format!(
            "nvmlDeviceGetMigDeviceHandleByIndex (slot {slot})"
        ));
        let mig = match parent.mig_device_by_index(slot) {
            Ok(mig) => mig,
            // An empty slot.
            Err(NvmlError::NotFound | NvmlError::InvalidArg) => continue,
            Err(e) => {
                let r = refused("nvmlDeviceGetMigDeviceHandleByIndex", e);
                problems.push(format!("slot {slot}: {}", r.line));
                refusals.push(r);
                continue;
            }
        };
        step(&format!("nvmlDeviceGetName (slot {slot})"));
        let profile = mig
            .name()
            .ok()
            .and_then(|n| profile_from_name(&n))
            .unwrap_or_else(|| format!("slot {slot}"));
        step(&format!("the memory of slot {slot}"));
        let memory = calls.memory(&mig);
        step(&format!("the process lists of slot {slot}"));
        let lists = calls.processes(&mig);
        lane.listed(lists.pids.clone());
        if let Err(r) = memory {
            problems.push(format!("{profile} (slot {slot}) memory: {}", r.line));
            refusals.push(r);
        }
        for r in lists.refused {
            problems.push(format!("{profile} (slot {slot}) processes: {}", r.line));
            refusals.push(r);
        }
        profiles.push(profile);
    }
    let found = format!(
        "{} instance{}{}",
        profiles.len(),
        if profiles.len() == 1 { "" } else { "s" },
        if profiles.is_empty() {
            String::new()
        } else {
            format!(" ({})", profiles.join(", "))
        }
    );
    if problems.is_empty() {
        return Check::ok(
            Group::Gpus,
            "mig_instances",
            &format!("{found}: each one's memory and processes are read"),
        );
    }
    let refusals: Vec<&Refused> = refusals.iter().collect();
    Check::limited(
        Group::Gpus,
        "mig_instances",
        &format!("{found}; {}", problems.join("; ")),
        fix_for(&refusals),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    fn refusal(kind: RefusedKind) -> Refused {
        Refused {
            line: format!("NVML_ERROR_X (call): {kind:?}"),
            call: "call",
            kind,
        }
    }

    const MEMORY: DeviceMemory = DeviceMemory {
        total: 100,
        used: 40,
        free: 60,
        driver_reserved: Some(0),
    };

    #[test]
    fn the_parent_refusing_in_mig_mode_needs_root_and_is_limited() {
        let root = refusal(RefusedKind::NeedsRoot);
        let lists = ProcessLists {
            pids: vec![],
            refused: vec![root.clone()],
            lost: false,
        };
        let c = parent_figures(&Err(root.clone()), &lists);
        assert_eq!(c.status, Status::Limited);
        assert!(
            c.detail
                .starts_with("the parent GPU's aggregate figures need root"),
            "{}",
            c.detail
        );
        assert!(c
            .fix
            .as_deref()
            .is_some_and(|f| f.starts_with("run strata as root")));
        let fine = parent_figures(&Ok(MEMORY), &ProcessLists::default());
        assert_eq!(fine.status, Status::Ok);
        let other = parent_figures(&Err(refusal(RefusedKind::Other)), &ProcessLists::default());
        assert!(other
            .detail
            .starts_with("the parent GPU's figures cannot be read"));
    }
}

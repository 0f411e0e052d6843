//! GPUs and MIG: the GPU count, then one lane per GPU (so that one hung GPU does not hide the
//! others): its identity, whether its MIG mode can be read, its memory and process lists
//! through the calls the poll uses, and in MIG mode whether the parent's aggregate figures
//! need root and whether each instance can be read.

use super::mig;
use super::refusals::{fix_for, lines, NVML_HUNG};
use super::runner::Lane;
use super::{Check, Group};
use crate::sample::DeviceMemory;
use crate::source::nvml::probe::{refused, DriverCalls, ProcessLists, Refused, RefusedKind};
use nvml_wrapper::Nvml;
use std::sync::Arc;

/// NVML's "enabled" in `nvmlDeviceGetMigMode`.
const MIG_ENABLED: u32 = 1;

pub(super) fn count_lane(lane: Lane, nvml: Arc<Nvml>) {
    lane.step(
        Group::Gpus,
        "gpu_count",
        None,
        "nvmlDeviceGetCount_v2",
        NVML_HUNG,
    );
    match nvml.device_count() {
        Ok(0) => lane.report(Check::missing(
            Group::Gpus,
            "gpu_count",
            "NVML counts no GPU",
            "check `nvidia-smi`; in a container, give it the GPUs (`--gpus all`, or the NVIDIA container toolkit)",
        )),
        Ok(count) => {
            lane.report(Check::ok(
                Group::Gpus,
                "gpu_count",
                &format!("{count} GPU{}", if count == 1 { "" } else { "s" }),
            ));
            for index in 0..count {
                let nvml = Arc::clone(&nvml);
                lane.spawn((1, 1 + index), move |lane| gpu_lane(&lane, &nvml, index));
            }
        }
        Err(e) => {
            let refusal = refused("nvmlDeviceGetCount_v2", e);
            lane.report(Check::missing(
                Group::Gpus,
                "gpu_count",
                &format!(
                    "{}: no GPU can be shown until NVML counts them (the monitor asks again at every poll)",
                    refusal.line
                ),
                fix_for(&[&refusal]),
            ));
        }
    }
}

fn gpu_lane(lane: &Lane, nvml: &Nvml, index: u32) {
    let subject = format!("GPU {index}");
    let step = |check, what: &str| lane.step(Group::Gpus, check, Some(&subject), what, NVML_HUNG);
    let report = |check: Check| lane.report(check.about(&subject));
    step("gpu", "nvmlDeviceGetHandleByIndex_v2");
    let device = match nvml.device_by_index(index) {
        Ok(device) => device,
        Err(e) => {
            let refusal = refused("nvmlDeviceGetHandleByIndex_v2", e);
            report(Check::missing(
                Group::Gpus,
                "gpu",
                &format!("{}: the GPU is shown without values", refusal.line),
                fix_for(&[&refusal]),
            ));
            return;
        }
    };
    step("gpu", "nvmlDeviceGetName");
    let name = device.name().map_err(|e| refused("nvmlDeviceGetName", e));
    step("gpu", "nvmlDeviceGetUUID");
    let uuid = device.uuid().map_err(|e| refused("nvmlDeviceGetUUID", e));
    report(identity(name, uuid));
    step("mig_mode", "nvmlDeviceGetMigMode");
    let mig = device
        .mig_mode()
        .map(|m| (m.current == MIG_ENABLED, m.pending == MIG_ENABLED))
        .map_err(|e| refused("nvmlDeviceGetMigMode", e));
    let in_mig = matches!(mig, Ok((true, _)));
    report(mig_mode(mig));
    let calls = DriverCalls::of(nvml);
    let memory_check = if in_mig { "parent_figures" } else { "memory" };
    step(
        memory_check,
        calls.memory_call().unwrap_or("nvmlDeviceGetMemoryInfo"),
    );
    let memory = calls.memory(&device);
    step(
        if in_mig {
            "parent_figures"
        } else {
            "processes"
        },
        "a process list (nvmlDeviceGet{Compute,Graphics,MPSCompute}RunningProcesses)",
    );
    let lists = calls.processes(&device);
    lane.listed(lists.pids.clone());
    if in_mig {
        report(mig::parent_figures(&memory, &lists));
        report(mig::instances(lane, &subject, &calls, &device));
    } else {
        report(memory_of(&memory));
        report(processes_of(&lists));
    }
}

fn identity(name: Result<String, Refused>, uuid: Result<String, Refused>) -> Check {
    match (name, uuid) {
        (Ok(name), Ok(uuid)) => Check::ok(Group::Gpus, "gpu", &format!("{name}, {uuid}")),
        (name, uuid) => {
            let refusals: Vec<&Refused> = [name.as_ref().err(), uuid.as_ref().err()]
                .into_iter()
                .flatten()
                .collect();
            let known: Vec<&str> = [name.as_deref().ok(), uuid.as_deref().ok()]
                .into_iter()
                .flatten()
                .collect();
            Check::limited(
                Group::Gpus,
                "gpu",
                &match known.is_empty() {
                    true => lines(&refusals),
                    false => format!("{} ({})", known.join(", "), lines(&refusals)),
                },
                fix_for(&refusals),
            )
        }
    }
}

fn mig_mode(mig: Result<(bool, bool), Refused>) -> Check {
    match mig {
        Ok((current, pending)) => {
            let now = if current { "MIG on" } else { "MIG off" };
            let detail = match current == pending {
                true => now.to_string(),
                false => format!(
                    "{now}, {} after the next GPU reset",
                    if pending { "on" } else { "off" }
                ),
            };
            Check::ok(Group::Gpus, "mig_mode", &detail)
        }
        Err(r) if r.kind == RefusedKind::NotSupported => {
            Check::ok(Group::Gpus, "mig_mode", "no MIG on this GPU")
        }
        Err(r) => {
            let check = match r.kind {
                RefusedKind::Lost => Check::missing,
                _ => Check::limited,
            };
            check(
                Group::Gpus,
                "mig_mode",
                &format!(
                    "{}: strata cannot tell whether the GPU is split, and reads it whole",
                    r.line
                ),
                fix_for(&[&r]),
            )
        }
    }
}

fn memory_of(memory: &Result<DeviceMemory, Refused>) -> Check {
    match memory {
        Ok(m) if m.driver_reserved.is_some() => Check::ok(
            Group::Gpus,
            "memory",
            "total, used, free and the driver's reservation are read",
        ),
        Ok(_) => Check::ok(
            Group::Gpus,
            "memory",
            "total, used and free are read (the v1 call: the driver's reservation is inside used)",
        ),
        Err(r) => Check::missing(
            Group::Gpus,
            "memory",
            &format!("{}: the GPU's layers cannot be drawn", r.line),
            fix_for(&[r]),
        ),
    }
}

fn processes_of(lists: &ProcessLists) -> Check {
    let count = lists.pids.len();
    let listed = format!(
        "{count} process{} listed",
        if count == 1 { "" } else { "es" }
    );
    if lists.lost {
        return Check::missing(
            Group::Gpus,
            "processes",
            "NVML_ERROR_GPU_IS_LOST: the GPU has fallen off the bus",
            fix_for(&[&Refused {
                line: String::new(),
                call: "",
                kind: RefusedKind::Lost,
            }]),
        );
    }
    if lists.refused.is_empty() {
        return Check::ok(
            Group::Gpus,
            "processes",
            &format!("{listed} (compute, graphics and MPS lists read)"),
        );
    }
    let refusals: Vec<&Refused> = lists.refused.iter().collect();
    Check::limited(
        Group::Gpus,
        "processes",
        &format!(
            "{}; {listed}, and the GPU's holders are not all known: its memory is shown, none of it called unexplained",
            lines(&refusals)
        ),
        fix_for(&refusals),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    const V1_MEMORY: DeviceMemory = DeviceMemory {
        total: 100,
        used: 40,
        free: 60,
        driver_reserved: None,
    };

    fn refusal(kind: RefusedKind) -> Refused {
        Refused {
            line: format!("NVML_ERROR_X (call): {kind:?}"),
            call: "call",
            kind,
        }
    }

    #[test]
    fn a_refused_list_is_limited_and_refused_memory_missing() {
        let lists = ProcessLists {
            pids: vec![1, 2],
            refused: vec![refusal(RefusedKind::Other)],
            lost: false,
        };
        let c = processes_of(&lists);
        assert_eq!(c.status, Status::Limited);
        assert!(c.detail.contains("2 processes listed"), "{}", c.detail);
        assert_eq!(processes_of(&ProcessLists::default()).status, Status::Ok);
        let lost = ProcessLists {
            lost: true,
            ..ProcessLists::default()
        };
        assert_eq!(processes_of(&lost).status, Status::Missing);
        assert_eq!(
            memory_of(&Err(refusal(RefusedKind::Other))).status,
            Status::Missing
        );
        let v1 = memory_of(&Ok(V1_MEMORY));
        assert!(v1.detail.contains("v1 call"));
    }

    #[test]
    fn mig_mode_not_supported_is_no_mig_and_a_refusal_limited() {
        assert_eq!(mig_mode(Ok((true, true))).detail, "MIG on");
        assert_eq!(
            mig_mode(Ok((false, true))).detail,
            "MIG off, on after the next GPU reset"
        );
        let none = mig_mode(Err(refusal(RefusedKind::NotSupported)));
        assert_eq!(
            (none.status, none.detail.as_str()),
            (Status::Ok, "no MIG on this GPU")
        );
        assert_eq!(
            mig_mode(Err(refusal(RefusedKind::NeedsRoot))).status,
            Status::Limited
        );
        assert_eq!(
            mig_mode(Err(refusal(RefusedKind::Lost))).status,
            Status::Missing
        );
    }

    #[test]
    fn the_fix_names_the_most_pressing_cause() {
        let (lost, root, old) = (
            refusal(RefusedKind::Lost),
            refusal(RefusedKind::NeedsRoot),
            refusal(RefusedKind::MissingCall),
        );
        assert!(fix_for(&[&root, &lost]).contains("fallen off the bus"));
        assert!(fix_for(&[&old, &root]).starts_with("run strata as root"));
        assert!(fix_for(&[&old]).contains("R510"));
        let id = identity(Err(root.clone()), Ok("GPU-1".into()));
        assert_eq!(id.status, Status::Limited);
        assert!(
            id.detail.starts_with("GPU-1 (NVML_ERROR_X"),
            "{}",
            id.detail
        );
    }
}

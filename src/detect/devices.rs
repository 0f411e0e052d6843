//! Findings about devices: lost GPUs, what NVML refused, contradictions that withhold the
//! layers, and usage no listed process accounts for.

use super::evidence::units::Bytes;
use super::evidence::{Contradiction, Evidence, Nothing, NvmlError, Unexplained};
use super::judged::judged;
use super::{device_name, FindingKind, Findings, Severity};
use crate::accounting::NodeAccount;
use crate::sample::{DeviceMemory, NodeSample, ProcessSample};
use crate::units::bytes;
use std::collections::BTreeMap;

/// Usage no process accounts for, beyond the driver's reservation, worth a line.
const UNEXPLAINED_MIN_BYTES: u64 = 512 << 20;
/// Without NVML's driver reservation figure the driver's share is hidden in `other`: wait for
/// more before calling usage unexplained.
const UNEXPLAINED_MIN_BYTES_NO_RESERVED: u64 = 1 << 30;

fn problems(
    out: &mut Findings,
    place: &str,
    device: Option<&str>,
    problems: &BTreeMap<String, String>,
) {
    for (what, error) in problems {
        let what = match what.as_str() {
            "handle" => "the device could not be opened",
            "memory" => "its memory could not be read",
            "processes" => "its process list could not be read",
            "utilization" => "its utilization could not be read",
            "mig_mode" => "its MIG mode could not be read",
            "mig_devices" => "its MIG instances could not be listed",
            "parent" => "the parent GPU's own figures could not be read",
            "uuid" => "its UUID could not be read",
            "name" => "its name could not be read",
            "pci_bus_id" => "its PCI bus id could not be read",
            "profile" => "its MIG profile could not be read",
            "device_count" => "the GPUs could not be counted",
            "driver" => "the driver lacks calls strata uses",
            other => other,
        };
        out.raise(
            FindingKind::NvmlProblem,
            Severity::Warning,
            device,
            None,
            format!("{place}: {what}: {error}"),
            Evidence::NvmlProblem(NvmlError {
                error: error.clone(),
            }),
        );
    }
}

pub(super) fn detect(sample: &NodeSample, account: &NodeAccount, out: &mut Findings) {
    problems(out, "NVML", None, &sample.problems);
    for (gpu, gpu_account) in sample.gpus.iter().zip(&account.gpus) {
        let uuid = Some(gpu.uuid.as_str());
        if gpu.lost {
            out.raise(
                FindingKind::GpuLost,
                Severity::Critical,
                uuid,
                None,
                format!(
                    "GPU {} fell off the bus (GPU_IS_LOST): last known values shown greyed",
                    gpu.index
                ),
                Evidence::GpuLost(Nothing {}),
            );
            continue;
        }
        // Named only where NVML refused something: most GPUs have nothing to say.
        if !gpu.problems.is_empty() {
            problems(out, &format!("GPU {}", gpu.index), uuid, &gpu.problems);
        }
        for m in gpu.mig.iter().filter(|m| !m.problems.is_empty()) {
            problems(
                out,
                &device_name(sample, &m.uuid),
                Some(&m.uuid),
                &m.problems,
            );
        }
        for device in judged(gpu, gpu_account) {
            let uuid = device.uuid;
            let place = || device_name(sample, uuid);
            match device.layers {
                Err(gap) if gap.is_contradiction() => out.raise(
                    FindingKind::InconsistentCounters,
                    Severity::Warning,
                    Some(uuid),
                    None,
                    format!(
                        "{}: {}; layers not shown this instant",
                        place(),
                        gap.describe()
                    ),
                    Evidence::InconsistentCounters(Contradiction::from(gap)),
                ),
                Ok(layers) if !device.repeats_instances && device.known => {
                    let listed = || {
                        device
                            .members
                            .iter()
                            .flat_map(|m| sample.processes_on(m))
                            .collect::<Vec<&ProcessSample>>()
                    };
                    if let Some(unexplained) =
                        unexplained_bytes(layers.other, device.memory, listed)
                    {
                        let place = place();
                        out.raise(
                            FindingKind::UnexplainedUsage,
                            Severity::Warning,
                            Some(uuid),
                            None,
                            format!(
                                "{} in use on {place} is held by no listed process: another PID namespace or container?",
                                bytes(unexplained)
                            ),
                            Evidence::UnexplainedUsage(Unexplained {
                                bytes: Bytes(unexplained),
                                device: place,
                                other: layers.other.map(Bytes),
                            }),
                        );
                    }
                }
                _ => {}
            }
        }
    }
}

/// Bytes of `other` beyond the driver's reservation and the listed holders that are not
/// visible (already reported on their own), if enough to report. Nothing is unexplained when
/// a listed process's usage is not reported: its bytes are in `other` too. The holders are
/// listed only where `other` beyond the reservation is enough to report: most devices'
/// `other` is not, whoever holds what.
fn unexplained_bytes<'a>(
    other: Option<u64>,
    memory: Option<&DeviceMemory>,
    listed: impl FnOnce() -> Vec<&'a ProcessSample>,
) -> Option<u64> {
    let memory = memory?;
    let other = other?;
    let reserved = memory.driver_reserved.unwrap_or(0);
    let threshold = if memory.driver_reserved.is_some() {
        UNEXPLAINED_MIN_BYTES
    } else {
        UNEXPLAINED_MIN_BYTES_NO_RESERVED
    };
    if other.saturating_sub(reserved) < threshold {
        return None;
    }
    let listed = listed();
    if listed.iter().any(|p| p.used.is_none()) {
        return None;
    }
    let invisible: u64 = listed
        .iter()
        .filter(|p| !p.visible && p.feed.is_none())
        .filter_map(|p| p.used)
        .sum();
    let unexplained = other.saturating_sub(invisible.saturating_add(reserved));
    (unexplained >= threshold).then_some(unexplained)
}

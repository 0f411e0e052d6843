//! Findings that one sample shows on its own.

use super::{sort_findings, Finding, FindingKind, Severity};
use crate::accounting::{FeedStatus, Gap, NodeAccount};
use crate::feed::attach::Attachment;
use crate::sample::feed::FeedState;
use crate::sample::{DeviceMemory, NodeSample, ProcessSample};
use crate::units::{bytes, duration};

/// A process without a feed holding at least this much is worth a line.
const UNATTRIBUTED_MIN_BYTES: u64 = 256 << 20;
/// Usage no process accounts for, beyond the driver's reservation, worth a line.
const UNEXPLAINED_MIN_BYTES: u64 = 512 << 20;
/// Without NVML's driver reservation figure the driver's share is hidden in `other`: wait for
/// more before calling usage unexplained.
const UNEXPLAINED_MIN_BYTES_NO_RESERVED: u64 = 1 << 30;

/// Everything this one instant shows: zombie contexts, invisible holders, unattributed and
/// unexplained usage, stale, inconsistent, refused or misplaced feeds, lost GPUs,
/// contradictory counters. `since` is this sample's time; [`super::FindingTracker`] carries
/// it forward.
pub fn detect_instant(
    sample: &NodeSample,
    attachment: &Attachment,
    account: &NodeAccount,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let now = sample.time;
    let mut raise = |kind, severity, device: Option<&str>, pid, message: String| {
        findings.push(Finding {
            kind,
            severity,
            device_uuid: device.map(str::to_string),
            pid,
            since: now,
            message,
        });
    };

    let mut unfed: Vec<&ProcessSample> = Vec::new();
    for (process, process_account) in sample.processes.iter().zip(&account.processes) {
        let place = device_name(sample, &process.device_uuid);
        let held = process
            .used
            .map_or_else(|| "memory (amount not reported)".into(), bytes);
        let device = Some(process.device_uuid.as_str());
        let pid = Some(process.pid);
        if process.proc_state.as_deref() == Some("Z") {
            raise(
                FindingKind::ZombieContext,
                Severity::Critical,
                device,
                pid,
                format!(
                    "PID {} is defunct but its CUDA context still holds {held} on {place}",
                    process.pid
                ),
            );
        } else if !process.visible && sample.host_pid_namespace == Some(true) {
            raise(
                FindingKind::ZombieContext,
                Severity::Critical,
                device,
                pid,
                format!(
                    "PID {} no longer exists but its CUDA context still holds {held} on {place}",
                    process.pid
                ),
            );
        } else if !process.visible {
            raise(
                FindingKind::NotVisibleHolder,
                Severity::Info,
                device,
                pid,
                format!(
                    "PID {} (not in this PID namespace) holds {held} on {place}",
                    process.pid
                ),
            );
        }
        match &process_account.feed_status {
            FeedStatus::Absent => {
                if process.visible
                    && is_python(process)
                    && process.used.unwrap_or(0) >= UNATTRIBUTED_MIN_BYTES
                {
                    unfed.push(process);
                }
            }
            FeedStatus::Stale { age } => raise(
                FindingKind::StaleFeed,
                Severity::Warning,
                device,
                pid,
                format!(
                    "feed of PID {} is {} old: its allocator figures are shown, not combined with NVML",
                    process.pid,
                    duration(age.abs())
                ),
            ),
            FeedStatus::Inconsistent { reason } => raise(
                FindingKind::InconsistentFeed,
                Severity::Warning,
                device,
                pid,
                format!("feed of PID {} not used: {reason}", process.pid),
            ),
            FeedStatus::Fresh { .. } | FeedStatus::Refused { .. } | FeedStatus::Pending { .. } => {}
        }
    }
    if !unfed.is_empty() {
        let mut pids: Vec<u32> = unfed.iter().map(|p| p.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        let held: u64 = unfed.iter().filter_map(|p| p.used).sum();
        let who = match pids[..] {
            [one] => format!("Python process {one} holds"),
            _ => format!("{} Python processes hold", pids.len()),
        };
        raise(
            FindingKind::UnattributedMemory,
            Severity::Info,
            None,
            None,
            format!(
                "{who} {} without an allocator feed: run jobs under `strata run -- CMD` (or `strata attach PID`, Python 3.14+) to split it into layers",
                bytes(held)
            ),
        );
    }

    for record in &sample.feeds {
        let pid = record.pid();
        let who = pid.map_or_else(|| "a feed".to_string(), |p| format!("feed of PID {p}"));
        match &record.state {
            FeedState::Refused { reason } => raise(
                FindingKind::RefusedFeed,
                Severity::Warning,
                None,
                pid,
                format!("{who} refused ({}): {reason}", record.socket),
            ),
            FeedState::Dropped { reason } => raise(
                FindingKind::RefusedFeed,
                Severity::Warning,
                None,
                pid,
                format!("{who} dropped: {reason}"),
            ),
            FeedState::Connected | FeedState::Closed { .. } => {}
        }
        let c = &record.counters;
        if c.bad() > 0 {
            raise(
                FindingKind::FeedBadInput,
                Severity::Info,
                None,
                pid,
                format!(
                    "{who} sent {} line(s) that were skipped: {} malformed, {} oversized, {} unknown version, {} invalid, {} over the rate limit",
                    c.bad(),
                    c.malformed,
                    c.oversized,
                    c.unknown_version,
                    c.invalid,
                    c.rate_limited
                ),
            );
        }
    }
    for unlisted in &attachment.unlisted {
        raise(
            FindingKind::FeedDeviceUnlisted,
            Severity::Warning,
            unlisted.device_uuid.as_deref(),
            Some(unlisted.pid),
            format!("feed of PID {}: {}", unlisted.pid, unlisted.reason),
        );
    }

    for (gpu, gpu_account) in sample.gpus.iter().zip(&account.gpus) {
        let uuid = Some(gpu.uuid.as_str());
        if gpu.lost {
            raise(
                FindingKind::GpuLost,
                Severity::Critical,
                uuid,
                None,
                format!(
                    "GPU {} fell off the bus (GPU_IS_LOST): last known values shown greyed",
                    gpu.index
                ),
            );
            continue;
        }
        let mut devices = vec![(gpu.uuid.as_str(), gpu.memory.as_ref(), &gpu_account.layers)];
        for (m, m_account) in gpu.mig.iter().zip(&gpu_account.mig) {
            devices.push((m.uuid.as_str(), m.memory.as_ref(), &m_account.layers));
        }
        let is_mig = !gpu.mig.is_empty();
        for (i, (uuid, memory, layers)) in devices.into_iter().enumerate() {
            let place = device_name(sample, uuid);
            match layers {
                Err(gap @ (Gap::ProcessesExceedOccupied { .. } | Gap::FreeExceedsTotal { .. })) => {
                    raise(
                        FindingKind::InconsistentCounters,
                        Severity::Warning,
                        Some(uuid),
                        None,
                        format!("{place}: {}; layers not shown this instant", gap.describe()),
                    )
                }
                Ok(layers) if !(is_mig && i == 0) => {
                    let listed: Vec<&ProcessSample> = sample.processes_on(uuid).collect();
                    if let Some(unexplained) = unexplained_bytes(layers.other, memory, &listed) {
                        let unreported = listed.iter().filter(|p| p.used.is_none()).count();
                        let note = if unreported > 0 {
                            format!(" ({unreported} listed process(es) report no usage)")
                        } else {
                            String::new()
                        };
                        raise(
                            FindingKind::UnexplainedUsage,
                            Severity::Warning,
                            Some(uuid),
                            None,
                            format!(
                                "{} in use on {place} is held by no listed process{note}: another PID namespace or container?",
                                bytes(unexplained)
                            ),
                        );
                    }
                }
                _ => {}
            }
        }
    }
    sort_findings(&mut findings);
    findings
}

/// Bytes of `other` beyond the driver's reservation and the listed holders that are not
/// visible (already reported on their own), if enough to report.
fn unexplained_bytes(
    other: Option<u64>,
    memory: Option<&DeviceMemory>,
    listed: &[&ProcessSample],
) -> Option<u64> {
    let memory = memory?;
    let invisible: u64 = listed
        .iter()
        .filter(|p| !p.visible && p.feed.is_none())
        .filter_map(|p| p.used)
        .sum();
    let explained = invisible.saturating_add(memory.driver_reserved.unwrap_or(0));
    let unexplained = other?.saturating_sub(explained);
    let threshold = if memory.driver_reserved.is_some() {
        UNEXPLAINED_MIN_BYTES
    } else {
        UNEXPLAINED_MIN_BYTES_NO_RESERVED
    };
    (unexplained >= threshold).then_some(unexplained)
}

/// Whether a process runs a Python interpreter (`python`, `python3.11`, `pypy3`), from its
/// executable, else its command line: only those can be fed.
pub fn is_python(process: &ProcessSample) -> bool {
    let program = process.executable.as_deref().or_else(|| {
        process
            .command
            .as_deref()
            .and_then(|c| c.split_whitespace().next())
    });
    let Some(program) = program else {
        return false;
    };
    let name = program.rsplit('/').next().unwrap_or(program);
    let rest = name
        .strip_prefix("python")
        .or_else(|| name.strip_prefix("pypy"));
    rest.is_some_and(|r| {
        r.chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == 'd' || c == 'm' || c == 't')
    })
}

/// `GPU 2` or `GPU 3 MIG 2g.20gb`, for messages.
pub fn device_name(sample: &NodeSample, uuid: &str) -> String {
    match sample.locate(uuid) {
        Some((gpu, None)) => format!("GPU {}", gpu.index),
        Some((gpu, Some(m))) => format!(
            "GPU {} MIG {}",
            gpu.index,
            m.profile.as_deref().unwrap_or(uuid)
        ),
        None => uuid.to_string(),
    }
}

//! Findings about the processes NVML lists: zombie contexts, holders in other PID namespaces,
//! Python processes without a feed, feeds that cannot be combined.

use super::{device_name, FindingKind, Findings, Severity};
use crate::accounting::{FeedStatus, NodeAccount};
use crate::sample::{NodeSample, ProcessSample};
use crate::units::{bytes, duration};
use serde_json::json;

/// A process without a feed holding at least this much is worth counting.
const UNATTRIBUTED_MIN_BYTES: u64 = 256 << 20;

/// What `/proc` says of a holder, for the zombie rule.
fn holder_state(sample: &NodeSample, p: &ProcessSample) -> Holder {
    match (p.visible, p.proc_state.as_deref()) {
        (true, Some("Z")) => Holder::Defunct,
        (true, _) => Holder::Running,
        // Hidden by /proc (hidepid, permissions): it exists, it is not a zombie.
        (false, _) if p.hidden => Holder::Hidden,
        // In the host's PID namespace a PID /proc does not have is gone. Elsewhere it is in
        // another namespace, not gone.
        (false, _) if sample.host_pid_namespace == Some(true) => Holder::Gone,
        (false, _) => Holder::Elsewhere,
    }
}

enum Holder {
    Running,
    Defunct,
    Gone,
    Hidden,
    Elsewhere,
}

pub(super) fn detect(sample: &NodeSample, account: &NodeAccount, out: &mut Findings) {
    let mut unfed: Vec<&ProcessSample> = Vec::new();
    for (process, process_account) in sample.processes.iter().zip(&account.processes) {
        let place = device_name(sample, &process.device_uuid);
        let held = process
            .used
            .map_or_else(|| "memory (amount not reported)".into(), bytes);
        let device = Some(process.device_uuid.as_str());
        let pid = Some(process.pid);
        let evidence = json!({ "used": process.used });
        // PID 0 holding nothing is a quirk of some drivers, not a process.
        let quirk = process.pid == 0 && process.used == Some(0);
        match holder_state(sample, process) {
            _ if quirk => {}
            Holder::Defunct => out.raise(
                FindingKind::ZombieContext,
                Severity::Critical,
                device,
                pid,
                format!(
                    "PID {} is defunct but its CUDA context still holds {held} on {place}",
                    process.pid
                ),
                evidence,
            ),
            Holder::Gone => out.raise(
                FindingKind::ZombieContext,
                Severity::Critical,
                device,
                pid,
                format!(
                    "PID {} no longer exists but its CUDA context still holds {held} on {place}",
                    process.pid
                ),
                evidence,
            ),
            Holder::Elsewhere => out.raise(
                FindingKind::NotVisibleHolder,
                Severity::Info,
                device,
                pid,
                format!(
                    "PID {} (not in this PID namespace) holds {held} on {place}",
                    process.pid
                ),
                evidence,
            ),
            Holder::Running | Holder::Hidden => {}
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
            FeedStatus::Stale { age } => out.raise(
                FindingKind::StaleFeed,
                Severity::Warning,
                device,
                pid,
                format!(
                    "feed of PID {} is {} old: its allocator figures are shown, not combined with NVML",
                    process.pid,
                    duration(age.abs())
                ),
                json!({ "age": age }),
            ),
            FeedStatus::Inconsistent { reason } => out.raise(
                FindingKind::InconsistentFeed,
                Severity::Warning,
                device,
                pid,
                format!("feed of PID {} not used: {reason}", process.pid),
                json!({}),
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
        out.raise(
            FindingKind::UnattributedMemory,
            Severity::Info,
            None,
            None,
            format!(
                "{who} {} without an allocator feed: run jobs under `strata run -- CMD` (or `strata attach PID`, Python 3.14+) to split it into layers",
                bytes(held)
            ),
            json!({ "pids": pids, "bytes": held }),
        );
    }
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

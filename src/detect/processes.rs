//! Findings about the processes NVML lists: zombie contexts, holders in other PID namespaces,
//! Python processes without a feed, feeds that cannot be combined.

use super::evidence::units::{Bytes, IfKnown, Pid, Secs, Ticks};
use super::evidence::{self, Evidence, Holding, Nothing, Stale, Unattributed};
use super::{device_name, FindingKind, Findings, Severity};
use crate::accounting::{FeedStatus, NodeAccount};
use crate::sample::{DeviceHolder, NodeSample, ProcessSample};
use crate::units::{bytes, duration};

/// A process without a feed holding at least this much is worth counting.
const UNATTRIBUTED_MIN_BYTES: u64 = 256 << 20;

/// What `/proc` says of a holder, for the zombie rule (the same rule as
/// [`ProcessSample::is_gone_or_defunct`], which decides when the device files are searched).
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

/// Who holds open the device file of the GPU a zombie context is on, as evidence (`holders`,
/// those without a context of their own first), and what the message adds: the likely
/// culprit, or that nobody does. Nothing where the files were not searched.
fn device_file_holders(
    sample: &NodeSample,
    device_uuid: &str,
) -> Option<(Vec<evidence::Holder>, String, String)> {
    let scan = sample.device_files.as_ref()?;
    let minor = sample
        .locate(device_uuid)
        .and_then(|(gpu, _)| gpu.minor_number);
    let file = minor.map_or_else(
        || "/dev/nvidia-uvm".to_string(),
        |m| format!("/dev/nvidia{m}"),
    );
    let listed = |pid: u32| sample.processes.iter().any(|p| p.pid == pid);
    let mut holders: Vec<&DeviceHolder> = scan
        .holders
        .iter()
        .filter(|h| match minor {
            Some(m) => h.minors.contains(&m),
            // Without the GPU's minor number: every holder of the UVM file.
            None => h.uvm,
        })
        .collect();
    holders.sort_by_key(|h| (listed(h.pid), h.pid));
    let evidence: Vec<evidence::Holder> = holders
        .iter()
        .map(|h| evidence::Holder {
            command: h.command.clone(),
            listed: listed(h.pid),
            parent_command: h.parent_command.clone(),
            pid: Pid(h.pid),
            ppid: h.ppid.map(Pid),
            start_time: h.start_time.map(Ticks),
            state: h.state.clone(),
            user: h.user.clone(),
        })
        .collect();
    let suspects: Vec<&&DeviceHolder> = holders.iter().filter(|h| !listed(h.pid)).collect();
    let searched_all = scan.unreadable == 0;
    let note = match suspects[..] {
        [one] => format!(
            "; {file} is still held open by PID {} ({})",
            one.pid,
            one.command.as_deref().unwrap_or("command n/a")
        ),
        [] if holders.is_empty() && searched_all => {
            format!("; no process holds {file} open")
        }
        [] if !searched_all => format!(
            "; {} processes could not be searched for {file} (run strata as root)",
            scan.unreadable
        ),
        [] => String::new(),
        _ => {
            let pids: Vec<String> = suspects.iter().map(|h| h.pid.to_string()).collect();
            format!(
                "; {file} is still held open by {} processes without a context of their own (PIDs {})",
                suspects.len(),
                pids.join(", ")
            )
        }
    };
    Some((evidence, file, note))
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
        // Said only in a finding: made when one is raised (most processes raise none).
        let place = || device_name(sample, &process.device_uuid);
        let held = || {
            process
                .used
                .map_or_else(|| "memory (amount not reported)".into(), bytes)
        };
        let device = Some(&*process.device_uuid);
        let pid = Some(process.pid);
        let used = process.used.map(Bytes);
        let evidence = || {
            Evidence::NotVisibleHolder(Holding {
                device_file: IfKnown(None),
                holders: IfKnown(None),
                used,
            })
        };
        // PID 0 holding nothing is a quirk of some drivers, not a process.
        let quirk = process.pid == 0 && process.used == Some(0);
        let zombie = |what: &str| {
            let searched = device_file_holders(sample, &process.device_uuid);
            let (holders, file, note) = match searched {
                Some((holders, file, note)) => (Some(holders), Some(file), note),
                None => (None, None, String::new()),
            };
            let evidence = Evidence::ZombieContext(Holding {
                device_file: IfKnown(file),
                holders: IfKnown(holders),
                used,
            });
            let message = format!(
                "PID {} {what} but its CUDA context still holds {} on {}{note}",
                process.pid,
                held(),
                place()
            );
            (message, evidence)
        };
        match holder_state(sample, process) {
            _ if quirk => {}
            Holder::Defunct => {
                let (message, evidence) = zombie("is defunct");
                out.raise(
                    FindingKind::ZombieContext,
                    Severity::Critical,
                    device,
                    pid,
                    message,
                    evidence,
                )
            }
            Holder::Gone => {
                let (message, evidence) = zombie("no longer exists");
                out.raise(
                    FindingKind::ZombieContext,
                    Severity::Critical,
                    device,
                    pid,
                    message,
                    evidence,
                )
            }
            Holder::Elsewhere => out.raise(
                FindingKind::NotVisibleHolder,
                Severity::Info,
                device,
                pid,
                format!(
                    "PID {} (not in this PID namespace) holds {} on {}",
                    process.pid,
                    held(),
                    place()
                ),
                evidence(),
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
                Evidence::StaleFeed(Stale { age: Secs(*age) }),
            ),
            FeedStatus::Inconsistent { reason } => out.raise(
                FindingKind::InconsistentFeed,
                Severity::Warning,
                device,
                pid,
                format!("feed of PID {} not used: {reason}", process.pid),
                Evidence::InconsistentFeed(Nothing {}),
            ),
            FeedStatus::Fresh { .. } | FeedStatus::Refused { .. } | FeedStatus::Pending { .. } => {}
        }
    }
    if !unfed.is_empty() {
        let mut pids: Vec<u32> = unfed.iter().map(|p| p.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        let held: u64 = unfed.iter().filter_map(|p| p.used).sum();
        let (who, whose) = match pids[..] {
            [one] => (format!("Python process {one} holds"), "its"),
            _ => (format!("{} Python processes hold", pids.len()), "their"),
        };
        out.raise(
            FindingKind::UnattributedMemory,
            Severity::Info,
            None,
            None,
            format!(
                "{who} {} without an allocator feed: {whose} memory is not split into layers",
                bytes(held)
            ),
            Evidence::UnattributedMemory(Unattributed {
                bytes: Bytes(held),
                pids: pids.into_iter().map(Pid).collect(),
            }),
        );
    }
}

/// Whether a process runs a Python interpreter (`python`, `python3.11`, `pypy3`), from its
/// executable, else its command line: only those can be fed.
pub(crate) fn is_python(process: &ProcessSample) -> bool {
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

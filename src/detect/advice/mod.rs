//! What a finding calls for: one or two sentences of what the user can do next, chosen by its
//! evidence, the first the action itself (the one the findings list has room for).
//!
//! Advice is worked out from the typed evidence whenever it is shown or written, never stored:
//! a finding read back from a file gets the advice of the strata that reads it, and nothing
//! can say one thing in the advice and another in the figures. It claims nothing the
//! evidence does not show: a figure it names is one the evidence holds, and where the evidence
//! does not say (the allocator's settings, the request's size), the advice says "if".
//! Evidence read back in no typed shape gets its kind's advice, without figures.
//!
//! Along its seams: this file the findings of one instant (processes, feeds, devices),
//! `memory` those from history (climbs, pressure, OOMs, usage, forecasts, warm-ups).

mod memory;

use super::evidence::{
    BadInput, Contradiction, CutShort, HeldGroup, Holder, Holding, NvmlError, Suspicious,
};
use super::{Evidence, FindingKind};
use crate::units::duration;

/// The advice for a finding of `kind` with this evidence: one or two sentences, never none.
pub(crate) fn advice(kind: FindingKind, evidence: &Evidence) -> Vec<String> {
    use Evidence as E;
    let said = match evidence {
        E::ZombieContext(e) => zombie(e),
        E::ZombieContexts(e) => zombies(e),
        E::NotVisibleHolder(_) => not_visible(false),
        E::NotVisibleHolders(e) => not_visible(e.pids.len() > 1),
        E::UnattributedMemory(e) => unattributed(&pids(e.pids.iter().map(|p| p.0))),
        E::UnexplainedUsage(_) | E::UnexplainedUsages(_) => unexplained(),
        E::StaleFeed(e) => stale(Some(e.age.0)),
        E::InconsistentFeed(_) => inconsistent_feed(),
        E::GpuLost(_) => gpu_lost(),
        E::InconsistentCounters(e) => counters(Some(e)),
        E::RefusedFeed(e) => refused(Some(&e.socket)),
        E::FeedBadInput(e) => bad_input(Some(e)),
        E::FeedDeviceUnlisted(_) | E::FeedDevicesUnlisted(_) => unlisted(),
        E::FeedDirCutShort(e) => cut_short(Some(e), 1),
        E::FeedDirsCutShort(e) => cut_short(e.first.first(), e.dirs.0),
        E::SuspiciousFeedEntry(e) => suspicious(Some(e), 1),
        E::SuspiciousFeedEntries(e) => suspicious(e.first.first(), e.entries.0),
        E::NvmlProblem(e) => nvml(Some(e)),
        E::Untyped(_) => by_kind(kind),
        history => memory::advice(history).unwrap_or_else(|| by_kind(kind)),
    };
    if said.is_empty() {
        by_kind(kind)
    } else {
        said
    }
}

/// A kind's advice where its evidence says nothing typed (read back from another strata).
fn by_kind(kind: FindingKind) -> Vec<String> {
    use FindingKind as K;
    match kind {
        K::ZombieContext => unsearched(),
        K::NotVisibleHolder => not_visible(false),
        K::UnattributedMemory => unattributed(""),
        K::UnexplainedUsage => unexplained(),
        K::StaleFeed => stale(None),
        K::InconsistentFeed => inconsistent_feed(),
        K::GpuLost => gpu_lost(),
        K::InconsistentCounters => counters(None),
        K::RefusedFeed => refused(None),
        K::FeedBadInput => bad_input(None),
        K::FeedDeviceUnlisted => unlisted(),
        K::FeedDirCutShort => cut_short(None, 1),
        K::SuspiciousFeedEntry => suspicious(None, 1),
        K::NvmlProblem => nvml(None),
        history => memory::by_kind(history),
    }
}

/// `; PIDs 38811, 4021` (the first five), or nothing.
fn pids(pids: impl Iterator<Item = u32>) -> String {
    let all: Vec<u32> = pids.collect();
    let shown: Vec<String> = all.iter().take(5).map(u32::to_string).collect();
    match all.len() {
        0 => String::new(),
        1 => format!(" (PID {})", shown[0]),
        n if n > shown.len() => format!(" (PIDs {} and {} more)", shown.join(", "), n - 5),
        _ => format!(" (PIDs {})", shown.join(", ")),
    }
}

/// The advice on the holders of a device file a zombie context is on.
fn holders_advice(holders: &[Holder], file: &str, group: bool) -> Vec<String> {
    let these = if group {
        "these contexts'"
    } else {
        "this one's"
    };
    let the = if group {
        "The contexts'"
    } else {
        "The context's"
    };
    let suspects: Vec<&Holder> = holders.iter().filter(|h| !h.listed).collect();
    match suspects[..] {
        [] if holders.is_empty() => vec![
            format!("Run strata as root to search every process: none it could search holds {file} open, so nothing can be signalled."),
            "If no process holds it and the memory stays, only a GPU reset frees it (`nvidia-smi --gpu-reset -i N`, with nothing running on that GPU).".into(),
        ],
        [] => vec![
            format!("Select this finding and press K to signal one of the processes holding {file} open, once it is done."),
            "Each of them has a context of its own, so none is plainly the one keeping this memory: check the job's launcher and workers first.".into(),
        ],
        [one] => vec![
            format!(
                "Select this finding and press K to signal PID {} ({}), which holds {file} open.",
                one.pid.0,
                one.command.as_deref().unwrap_or("command n/a")
            ),
            format!("It has no context of its own but keeps {these} memory, which is freed once it exits."),
        ],
        _ => vec![
            format!(
                "Select this finding and press K to signal the {} processes holding {file} open without a context of their own{}.",
                suspects.len(),
                pids(suspects.iter().map(|h| h.pid.0))
            ),
            format!("{the} memory is freed once the last of them exits."),
        ],
    }
}

/// Where the device files were not searched: how to find the holders.
fn unsearched() -> Vec<String> {
    vec![
        "Find who holds the device open with `fuser -v /dev/nvidia*` and end it: the context's memory is freed once the last holder exits.".into(),
        "Where strata can read every process (as root), it names the holders here and K signals them.".into(),
    ]
}

fn zombie(e: &Holding) -> Vec<String> {
    let file = e.device_file.0.as_deref().unwrap_or("the device file");
    match e.holders.0.as_deref() {
        Some(holders) => holders_advice(holders, file, false),
        None => unsearched(),
    }
}

fn zombies(e: &HeldGroup) -> Vec<String> {
    match e.holders.0.as_deref() {
        Some(holders) => holders_advice(holders, "the device files", true),
        None => unsearched(),
    }
}

fn not_visible(many: bool) -> Vec<String> {
    let first = if many {
        "Look them up from the host or from their containers (`nvidia-smi` there names them): from this PID namespace strata cannot see who they are."
    } else {
        "Look it up from the host or from its container (`nvidia-smi` there names it): from this PID namespace strata cannot see who it is."
    };
    vec![
        first.into(),
        "Run strata in the host's PID namespace (e.g. `docker run --pid=host`) to name such holders.".into(),
    ]
}

fn unattributed(pids: &str) -> Vec<String> {
    vec![
        "Run the job under `strata run -- CMD` to split its memory into layers (no code change).".into(),
        format!("For a job already running on Python 3.14+{pids}, select it in the process table and press `a` (or run `strata attach PID`)."),
    ]
}

fn unexplained() -> Vec<String> {
    vec![
        "Look for a holder NVML does not list here: a process in another container or PID namespace (`nvidia-smi` on the host), or an MPS server.".into(),
        "`strata doctor` says what strata cannot see on this node.".into(),
    ]
}

fn stale(age: Option<f64>) -> Vec<String> {
    let old = age.map_or_else(String::new, |a| format!(" {}", duration(a.abs())));
    vec![
        format!("Check whether the job is stuck: its agent's figures are{old} old."),
        "A job blocked in a long CUDA call, or holding the GIL, stalls the agent's thread; this clears by itself once it sends again.".into(),
    ]
}

fn inconsistent_feed() -> Vec<String> {
    vec![
        "If this persists, restart the job under `strata run` (strata's own agent): its figures contradict NVML's, so they are shown but not used.".into(),
        "If it does not clear, send `strata snapshot --report` with a bug report.".into(),
    ]
}

fn gpu_lost() -> Vec<String> {
    vec![
        "Check the kernel log (`dmesg`, Xid 79) and the GPU's power and cooling.".into(),
        "A GPU off the bus needs a reset (`nvidia-smi --gpu-reset`) or a reboot, and the jobs on it a restart.".into(),
    ]
}

fn counters(e: Option<&Contradiction>) -> Vec<String> {
    match e.map(|e| e.reason.as_str()) {
        Some("implausible_process") => vec![
            "Check that the NVML library matches the kernel driver (`nvidia-smi` reports a mismatch; `strata doctor` checks NVML).".into(),
            "NVML listed a process record no driver writes, so this device's layers are not shown.".into(),
        ],
        Some("memory_unknown") => vec![
            "Check the device's memory with `nvidia-smi -q -d MEMORY` and `strata doctor`: NVML gave no memory figures for it.".into(),
        ],
        Some("lost") => gpu_lost(),
        _ => vec![
            "If this persists, check that the NVML library matches the driver (`strata doctor`).".into(),
            "NVML's counters contradicted each other at this instant, so no layers are shown for it; a passing contradiction clears by itself.".into(),
        ],
    }
}

fn refused(socket: Option<&str>) -> Vec<String> {
    let socket = socket.map_or_else(|| "the socket".to_string(), |s| s.to_string());
    vec![
        format!("Check who owns {socket} and that a strata agent made it: a feed is refused when a trust check fails and dropped when it floods."),
        "`strata doctor` checks the feed dirs and their owners.".into(),
    ]
}

fn bad_input(e: Option<&BadInput>) -> Vec<String> {
    let mut out = Vec::new();
    let Some(e) = e else {
        return vec![
            "Check that the job's agent is this strata's (`strata run` puts strata's own in): it sent lines strata skipped.".into(),
        ];
    };
    if e.unknown_version.0 > 0 {
        out.push("Update the job's agent to this strata's (`strata run` puts strata's own in): it speaks a protocol version strata does not read.".into());
    }
    if e.rate_limited.0 > 0 || e.floods.0 > 0 {
        out.push(
            "Slow the agent down (`strata run --feed-interval 1`): it sent more than strata reads."
                .into(),
        );
    }
    if e.malformed.0 + e.oversized.0 + e.invalid.0 + e.unknown_type.0 > 0 {
        out.push("Send `strata snapshot --report` with a bug report: the agent sent lines strata cannot read.".into());
    }
    out.truncate(2);
    if out.is_empty() {
        return bad_input(None);
    }
    out
}

fn unlisted() -> Vec<String> {
    vec![
        "Check which devices NVML lists the job on (`nvidia-smi --query-compute-apps=pid,gpu_uuid`) against those it uses: its figures for a device NVML does not list it on are not combined.".into(),
    ]
}

fn cut_short(first: Option<&CutShort>, dirs: u64) -> Vec<String> {
    let dir = first.map_or_else(|| "the feed dir".to_string(), |c| c.dir.clone());
    let which = if dirs > 1 {
        format!("the feed dirs (the first: {dir})")
    } else {
        dir
    };
    vec![
        format!("Remove what ended jobs left in {which}, or give jobs feed dirs of their own."),
        "Feeds past the scan's limit are found only for the processes NVML lists.".into(),
    ]
}

fn suspicious(first: Option<&Suspicious>, entries: u64) -> Vec<String> {
    let (what, it) = match (first, entries) {
        (Some(s), 1) => (format!("{} (uid {})", s.path, s.owner.0), "it"),
        (Some(s), n) => (format!("the {n} entries (the first: {})", s.path), "them"),
        (None, _) => ("the entry".into(), "it"),
    };
    vec![
        format!("Check who made {what} and remove {it} if nobody should have."),
        "strata never follows or opens such an entry: a link or file where a socket or feed dir belongs can be an attempt to make it read something else.".into(),
    ]
}

fn nvml(e: Option<&NvmlError>) -> Vec<String> {
    let error = e.map_or("", |e| e.error.as_str()).to_ascii_lowercase();
    let doctor = "`strata doctor` says what NVML gives on this node and what it refuses.";
    if error.contains("permission") {
        vec![
            "Run strata as root (or with the permissions NVML asks for) to read it.".into(),
            doctor.into(),
        ]
    } else if error.contains("not supported") {
        vec!["Nothing to fix: this GPU or driver does not give it, and strata shows it n/a.".into()]
    } else if error.contains("lost") {
        gpu_lost()
    } else if ["driver", "library", "function not found", "uninitialized"]
        .iter()
        .any(|w| error.contains(w))
    {
        vec![
            "Check that the driver is loaded and its NVML library matches it (`nvidia-smi`)."
                .into(),
            doctor.into(),
        ]
    } else {
        vec![
            "Run `strata doctor`: it says what NVML gives on this node and what it refuses.".into(),
        ]
    }
}

#[cfg(test)]
mod tests;

//! Matching feeds to NVML's processes, and judging each feed once per sample. Pure: no I/O.
//!
//! A feed speaks for the pid the kernel gave its socket (`SO_PEERCRED`, in this monitor's PID
//! namespace), which is the pid NVML lists when the monitor runs on the host. Each device the
//! agent reports is matched to NVML's devices by UUID (without prefix or case), else by PCI
//! bus id, which is how a MIG instance (whose framework may name only the parent GPU) or a
//! framework without UUIDs is matched. A feed device whose pid NVML does not list on it is a
//! finding, never a silent drop, while the feed is open (a closed one is kept a while after
//! its process exits, when NVML rightly lists it no more).

use crate::sample::feed::{FeedDevice, FeedRecord, FeedState, Hello};
use crate::sample::{AllocatorStats, FeedSample, GpuSample, NodeSample, ProcessSample};
use serde::Serialize;

/// A feed older (or newer) than this many sampling intervals is stale.
pub(crate) const STALE_INTERVALS: f64 = 3.0;

/// Whether a process's allocator feed can be combined with NVML's reading at this instant.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum FeedStatus {
    /// No feed from this process.
    Absent,
    /// A feed speaks for this pid but was refused (or dropped): nothing it says is used.
    Refused { reason: String },
    /// A trusted feed that has nothing for this device yet (CUDA not initialised, say); the
    /// kind says whether it waits, uses no framework, or failed.
    Pending { reason: String, kind: PendingKind },
    /// Recent enough to be combined with NVML's reading.
    Fresh { age: f64 },
    /// Too old to combine with this instant; shown, not used.
    Stale { age: f64 },
    /// Its numbers contradict themselves or NVML's: shown, not used.
    Inconsistent { reason: String },
}

/// Why a trusted feed has no statistics for a process, from its hello's `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingKind {
    /// A framework is imported and not initialised yet (or the agent says nothing more).
    Waiting,
    /// No framework for the GPU in this process (none imported, a launcher, JAX on the CPU).
    NoFramework,
    /// The agent itself failed: the reason is its error.
    AgentError,
    /// The agent reads the framework, but nothing the monitor can use (the note says why).
    Unusable,
}

impl PendingKind {
    /// From a hello: its `state`, and whether it names any device.
    pub(crate) fn of(hello: &Hello) -> Self {
        match hello.state.as_deref() {
            Some("error") => PendingKind::AgentError,
            Some("no_framework") => PendingKind::NoFramework,
            Some("reading") => PendingKind::Unusable,
            _ => PendingKind::Waiting,
        }
    }

    /// A word for the process table.
    pub(crate) fn label(self) -> &'static str {
        match self {
            PendingKind::Waiting => "waiting",
            PendingKind::NoFramework => "no framework",
            PendingKind::AgentError => "agent error",
            PendingKind::Unusable => "unreported",
        }
    }
}

impl FeedStatus {
    pub fn is_usable(&self) -> bool {
        matches!(self, FeedStatus::Fresh { .. })
    }

    /// A word for the process table.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            FeedStatus::Absent => "nofeed",
            FeedStatus::Refused { .. } => "refused",
            FeedStatus::Pending { kind, .. } => kind.label(),
            FeedStatus::Fresh { .. } => "fed",
            FeedStatus::Stale { .. } => "stale",
            FeedStatus::Inconsistent { .. } => "badfeed",
        }
    }
}

/// A device a trusted feed reports that NVML does not list its pid on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Unlisted {
    /// Position in [`NodeSample::feeds`].
    pub(crate) feed: usize,
    pub(crate) pid: u32,
    /// The framework's device index.
    pub(crate) index: u32,
    /// The NVML device it matched, if any.
    pub(crate) device_uuid: Option<String>,
    pub(crate) reason: String,
}

/// What matching found, beside the feeds it attached to the processes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Attachment {
    /// Parallel to the sample's processes.
    pub statuses: Vec<FeedStatus>,
    pub(crate) unlisted: Vec<Unlisted>,
}

/// A UUID without its `GPU-`/`MIG-` prefix, dashes or case: how frameworks and NVML compare.
pub(crate) fn normalize_uuid(uuid: &str) -> String {
    uuid_chars(uuid).collect()
}

/// A UUID without its surrounding space and `GPU-`/`MIG-` prefix.
fn bare_uuid(uuid: &str) -> &str {
    let trimmed = uuid.trim();
    ["GPU-", "MIG-", "gpu-", "mig-"]
        .iter()
        .find_map(|p| trimmed.strip_prefix(p))
        .unwrap_or(trimmed)
}

/// [`normalize_uuid`]'s characters, one by one (compared without a string made).
fn uuid_chars(uuid: &str) -> impl Iterator<Item = char> + '_ {
    bare_uuid(uuid)
        .chars()
        .filter(|c| *c != '-')
        .flat_map(char::to_lowercase)
}

/// Whether NVML's `uuid` is the one a feed named (already [`normalize_uuid`]d). Byte by
/// byte where both are ASCII (every UUID NVML and the frameworks write), where a byte's
/// lower case is its character's.
fn names(uuid: &str, normalized: &str) -> bool {
    let bare = bare_uuid(uuid);
    if bare.is_ascii() && normalized.is_ascii() {
        return bare
            .bytes()
            .filter(|b| *b != b'-')
            .map(|b| b.to_ascii_lowercase())
            .eq(normalized.bytes());
    }
    uuid_chars(uuid).eq(normalized.chars())
}

/// A PCI bus id as `DDDDDDDD:BB:DD` (upper case, 8-digit domain, function dropped): NVML's
/// `00000000:18:00.0`, the kernel's `0000:18:00.0` and a framework's spelling compare equal.
pub(crate) fn normalize_pci(id: &str) -> Option<String> {
    let id = id.trim();
    let (rest, _function) = id.rsplit_once('.').unwrap_or((id, "0"));
    let mut parts = rest.split(':').collect::<Vec<_>>();
    if parts.len() == 2 {
        parts.insert(0, "0");
    }
    let [domain, bus, device] = parts[..] else {
        return None;
    };
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    Some(format!(
        "{:08X}:{:02X}:{:02X}",
        hex(domain)?,
        hex(bus)?,
        hex(device)?
    ))
}

/// The NVML device (GPU or MIG instance UUID) a feed device names, for a process `pid`.
fn resolve<'s>(sample: &'s NodeSample, pid: u32, device: &FeedDevice) -> Result<&'s str, String> {
    let mut gpu: Option<&GpuSample> = None;
    if let Some(named) = device.uuid.as_deref() {
        // Spelled as NVML spells it (every framework that reports UUIDs does): that device.
        for g in &sample.gpus {
            if let Some(m) = g.mig.iter().find(|m| m.uuid == named) {
                return Ok(&m.uuid);
            }
        }
        gpu = sample.gpus.iter().find(|g| g.uuid == named);
        if gpu.is_none() {
            let uuid = normalize_uuid(named);
            for g in &sample.gpus {
                if let Some(m) = g.mig.iter().find(|m| names(&m.uuid, &uuid)) {
                    return Ok(&m.uuid);
                }
                if names(&g.uuid, &uuid) {
                    gpu = Some(g);
                }
            }
        }
    }
    if gpu.is_none() {
        let pci = device.pci_bus_id.as_deref().and_then(normalize_pci);
        gpu = pci.as_ref().and_then(|pci| {
            sample
                .gpus
                .iter()
                .find(|g| g.pci_bus_id.as_deref().and_then(normalize_pci).as_ref() == Some(pci))
        });
    }
    let Some(gpu) = gpu else {
        return Err(format!(
            "cuda:{} ({}) is none of this node's GPUs",
            device.index,
            describe(device)
        ));
    };
    if gpu.mig.is_empty() {
        return Ok(&gpu.uuid);
    }
    // A framework under MIG may name only the parent GPU (by UUID or PCI id): the instance
    // is the one NVML lists this pid on.
    let on: Vec<&str> = gpu
        .mig
        .iter()
        .filter(|m| sample.processes_on(&m.uuid).any(|p| p.pid == pid))
        .map(|m| m.uuid.as_str())
        .collect();
    match on[..] {
        [one] => Ok(one),
        [] => Err(format!(
            "cuda:{} is on GPU {} (MIG) but NVML lists PID {pid} on none of its instances",
            device.index, gpu.index
        )),
        _ => Err(format!(
            "cuda:{} names only GPU {} and PID {pid} is on {} of its MIG instances: cannot tell which",
            device.index,
            gpu.index,
            on.len()
        )),
    }
}

fn describe(device: &FeedDevice) -> String {
    match (&device.uuid, &device.pci_bus_id) {
        (Some(u), _) => format!("UUID {u}"),
        (None, Some(p)) => format!("PCI {p}"),
        (None, None) => "no UUID or PCI id".into(),
    }
}

/// Why a refused or dropped feed is not used, if it is.
fn refusal(record: &FeedRecord) -> Option<String> {
    match &record.state {
        FeedState::Refused { reason } => Some(format!("feed refused: {reason}")),
        FeedState::Dropped { reason } => Some(format!("feed dropped: {reason}")),
        _ if record.hello.is_none() => Some("feed connected, no hello yet".into()),
        _ => None,
    }
}

/// Matches every feed to NVML's processes: fills each process's `feed` with the statistics
/// of its device, judges it once, and lists feed devices NVML does not list the pid on.
pub(crate) fn attach(sample: &mut NodeSample) -> Attachment {
    attach_reusing(sample, &mut Vec::new())
}

/// Feeds taken off samples read before, each in the box a process holds it in: attached
/// again, box and all, with no allocation.
#[allow(clippy::vec_box)]
pub(crate) type SpareFeeds = Vec<Box<FeedSample>>;

/// [`attach`], the feeds it attaches made from `spare` (feeds taken off samples read before)
/// where it holds any, their strings' buffers reused: a long read does not allocate and free
/// every process's framework name at every sample.
pub(crate) fn attach_reusing(sample: &mut NodeSample, spare: &mut SpareFeeds) -> Attachment {
    take_feeds(sample, spare);
    let mut statuses = vec![FeedStatus::Absent; sample.processes.len()];
    // The trusted feed that first spoke for each process's pid: its hello is said where no
    // feed is matched to the process. The first feed's word stands (refused, or this).
    let mut pending_at: Vec<Option<usize>> = vec![None; sample.processes.len()];
    let unspoken = |statuses: &[FeedStatus], pending_at: &[Option<usize>], i: usize| {
        statuses[i] == FeedStatus::Absent && pending_at[i].is_none()
    };
    let mut unlisted = Vec::new();
    let mut matched: Vec<(usize, usize, usize, f64)> = Vec::new();
    let mut held: Vec<usize> = Vec::new();
    let by_pid = Positions::of(&sample.processes);
    for (feed_index, record) in sample.feeds.iter().enumerate() {
        let Some(pid) = record.pid() else { continue };
        held.clear();
        held.extend(by_pid.of_pid(pid));
        if let Some(reason) = refusal(record) {
            for &i in &held {
                if unspoken(&statuses, &pending_at, i) {
                    statuses[i] = FeedStatus::Refused {
                        reason: reason.clone(),
                    };
                }
            }
            continue;
        }
        let Some(hello) = &record.hello else { continue };
        for &i in &held {
            if unspoken(&statuses, &pending_at, i) {
                pending_at[i] = Some(feed_index);
            }
        }
        let interval = hello.interval.filter(|i| i.is_finite() && *i > 0.0);
        // A closed feed is kept a while after its process exits, when NVML no longer lists
        // it: its devices are what a gone process reported, not something NVML misses.
        let closed = matches!(record.state, FeedState::Closed { .. });
        for (device_index, device_feed) in record.devices.iter().enumerate() {
            let stats = &device_feed.latest;
            let unnamed;
            let identity = match hello.devices.iter().find(|d| d.index == stats.index) {
                Some(identity) => identity,
                None => {
                    unnamed = FeedDevice {
                        index: stats.index,
                        ..FeedDevice::default()
                    };
                    &unnamed
                }
            };
            let device_uuid = match resolve(sample, pid, identity) {
                Ok(uuid) => uuid,
                Err(_) if closed => continue,
                Err(reason) => {
                    unlisted.push(Unlisted {
                        feed: feed_index,
                        pid,
                        index: stats.index,
                        device_uuid: None,
                        reason,
                    });
                    continue;
                }
            };
            let Some(&i) = held
                .iter()
                .find(|&&i| *sample.processes[i].device_uuid == *device_uuid)
            else {
                if closed {
                    continue;
                }
                unlisted.push(Unlisted {
                    feed: feed_index,
                    pid,
                    index: stats.index,
                    reason: format!(
                        "the feed reports cuda:{} but NVML does not list PID {pid} on that device",
                        stats.index
                    ),
                    device_uuid: Some(device_uuid.to_string()),
                });
                continue;
            };
            matched.push((i, feed_index, device_index, interval.unwrap_or(0.0)));
        }
    }
    // Two feeds for one process and device (a socket seen twice): the freshest speaks.
    let latest = |feed: usize, device: usize| &sample.feeds[feed].devices[device].latest;
    matched.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then(latest(a.1, a.2).time.total_cmp(&latest(b.1, b.2).time))
    });
    matched.dedup_by(|later, earlier| {
        let same = later.0 == earlier.0;
        if same {
            *earlier = *later;
        }
        same
    });
    // No feed spoke for it, and where its socket (or feed dir) belongs is something else: say
    // so.
    for entry in &sample.feed_scan.suspicious {
        for &pid in &entry.pids {
            for i in by_pid.of_pid(pid) {
                if unspoken(&statuses, &pending_at, i) {
                    statuses[i] = FeedStatus::Refused {
                        reason: entry.describe(),
                    };
                }
            }
        }
    }
    for &(i, feed_index, device_index, agent_interval) in &matched {
        let stats = &sample.feeds[feed_index].devices[device_index].latest;
        let window = STALE_INTERVALS * sample.interval.max(agent_interval).max(0.0);
        statuses[i] = judge(sample.time, window, stats, sample.processes[i].used);
    }
    for (i, feed_index) in pending_at.iter().enumerate() {
        // A feed matched to it was judged (never absent).
        let hello = feed_index.and_then(|f| sample.feeds[f].hello.as_ref());
        if let (Some(hello), FeedStatus::Absent) = (hello, &statuses[i]) {
            statuses[i] = pending(hello);
        }
    }
    for (i, feed_index, device_index, _) in matched {
        let record = &sample.feeds[feed_index];
        let Some(hello) = &record.hello else { continue };
        let stats = &record.devices[device_index].latest;
        let framework = hello.framework.as_deref().unwrap_or("n/a");
        let backend = hello.backend.as_deref().unwrap_or("n/a");
        let feed = match spare.pop() {
            Some(mut feed) => {
                framework.clone_into(&mut feed.framework);
                feed.framework_version.clone_from(&hello.framework_version);
                backend.clone_into(&mut feed.backend);
                feed.feed = feed_index;
                feed.stats.clone_from(stats);
                feed
            }
            None => Box::new(FeedSample {
                framework: framework.into(),
                framework_version: hello.framework_version.clone(),
                backend: backend.into(),
                feed: feed_index,
                stats: stats.clone(),
            }),
        };
        sample.processes[i].feed = Some(feed);
    }
    Attachment { statuses, unlisted }
}

/// Takes the feeds attached to a sample's processes into `spare`, to be attached again
/// ([`attach_reusing`]) to this sample or another.
pub(crate) fn take_feeds(sample: &mut NodeSample, spare: &mut SpareFeeds) {
    spare.extend(sample.processes.iter_mut().filter_map(|p| p.feed.take()));
}

/// What a trusted feed with no usable statistics says: its error when the agent failed, else
/// its note.
fn pending(hello: &Hello) -> FeedStatus {
    let kind = PendingKind::of(hello);
    let reason = match (kind, &hello.error, &hello.note) {
        (PendingKind::AgentError, Some(error), _) => error.clone(),
        (_, _, Some(note)) => note.clone(),
        _ => "no statistics for this device yet".into(),
    };
    FeedStatus::Pending { reason, kind }
}

/// Where each pid stands in a sample's process list: sorted once a sample, so each feed
/// finds its process without a pass over the list.
pub(super) struct Positions(Vec<(u32, usize)>);

impl Positions {
    pub(super) fn of(processes: &[ProcessSample]) -> Positions {
        let mut at: Vec<(u32, usize)> = processes
            .iter()
            .enumerate()
            .map(|(i, p)| (p.pid, i))
            .collect();
        at.sort_unstable();
        Positions(at)
    }

    /// The places of `pid`'s processes, in the list's order.
    pub(super) fn of_pid(&self, pid: u32) -> impl Iterator<Item = usize> + '_ {
        let from = self.0.partition_point(|&(p, _)| p < pid);
        self.0[from..]
            .iter()
            .take_while(move |&&(p, _)| p == pid)
            .map(|&(_, i)| i)
    }
}

/// Judges a feed's statistics against the sample's instant and NVML's per-process reading.
pub(crate) fn judge(
    now: f64,
    window: f64,
    stats: &AllocatorStats,
    nvml_used: Option<u64>,
) -> FeedStatus {
    // Judged on the exact difference; said to the millisecond, as the difference of two
    // unix times carries float noise (0.40000009536743164) that means nothing.
    let exact = now - stats.time;
    let age = (exact * 1000.0).round() / 1000.0;
    if !exact.is_finite() || exact.abs() > window {
        return FeedStatus::Stale { age };
    }
    if let Some(reason) = contradiction(stats, nvml_used) {
        return FeedStatus::Inconsistent { reason };
    }
    FeedStatus::Fresh { age }
}

fn contradiction(stats: &AllocatorStats, nvml_used: Option<u64>) -> Option<String> {
    let pool_parts = u128::from(stats.allocated) + u128::from(stats.inactive_split.unwrap_or(0));
    let Some(reserved) = stats.reserved else {
        // No pool figure (XLA's cuda_async): what it does report must still fit in NVML's.
        return match nvml_used {
            Some(used) if pool_parts > u128::from(used) => Some(format!(
                "allocator allocated ({pool_parts} B) exceeds NVML used ({used} B)"
            )),
            _ => None,
        };
    };
    if pool_parts > u128::from(reserved) {
        return Some(format!(
            "allocated + inactive_split ({pool_parts} B) exceed reserved ({reserved} B)"
        ));
    }
    match nvml_used {
        Some(used) if reserved > used => Some(format!(
            "allocator reserved ({reserved} B) exceeds NVML used ({used} B)"
        )),
        _ => None,
    }
}

#[cfg(test)]
#[path = "attach_tests.rs"]
mod tests;

//! What allocator feeds said, as the monitor holds it at the instant of a node sample.
//!
//! These are raw fields (assets/python/PROTOCOL.md): what each agent sent and what the
//! monitor checked of its peer. Matching a feed to NVML's processes and judging its freshness
//! are derived, in [`crate::accounting::attach`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The allocator's statistics for one device at one instant (a `sample` device entry).
/// Bytes; `None` where the agent did not report it, with the reason in `unreported`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AllocatorStats {
    /// The framework's device index (not NVML's).
    pub index: u32,
    /// The agent's sample number; shared with `oom` messages.
    #[serde(default)]
    pub seq: u64,
    /// When the agent read these statistics (unix seconds).
    #[serde(default)]
    pub time: f64,
    /// Bytes held by live tensors (`allocated_bytes.all.current`).
    pub allocated: u64,
    /// Bytes the allocator holds from the driver (`reserved_bytes.all.current`); `None` where
    /// the allocator does not report its pool (XLA's cuda_async), with the reason in
    /// `unreported`: then only `allocated` splits the process's usage.
    pub reserved: Option<u64>,
    #[serde(default)]
    pub active: Option<u64>,
    /// Free split pieces (`inactive_split_bytes.all.current`).
    #[serde(default)]
    pub inactive_split: Option<u64>,
    #[serde(default)]
    pub requested: Option<u64>,
    #[serde(default)]
    pub peak_allocated: Option<u64>,
    #[serde(default)]
    pub peak_reserved: Option<u64>,
    #[serde(default)]
    pub peak_active: Option<u64>,
    #[serde(default)]
    pub peak_inactive_split: Option<u64>,
    #[serde(default)]
    pub peak_requested: Option<u64>,
    /// `num_alloc_retries`: allocations that had to free cache and retry.
    #[serde(default)]
    pub alloc_retries: Option<u64>,
    /// `num_ooms`: out-of-memory errors the allocator raised.
    #[serde(default)]
    pub ooms: Option<u64>,
    /// `num_device_alloc`: cudaMalloc (or cuMemMap) calls.
    #[serde(default)]
    pub device_allocs: Option<u64>,
    /// `num_device_free`: cudaFree (or cuMemUnmap) calls.
    #[serde(default)]
    pub device_frees: Option<u64>,
    /// The largest free cached block, measured at `largest_free_block_time`.
    #[serde(default)]
    pub largest_free_block: Option<u64>,
    #[serde(default)]
    pub largest_free_block_time: Option<f64>,
    /// The allocator's limit (JAX `bytes_limit`, CuPy's pool limit).
    #[serde(default)]
    pub limit: Option<u64>,
    /// Since when `reserved` (and the device alloc/free counters) held this value, as the
    /// agent saw it: an NVML reading taken between this and `time` saw the same pool.
    #[serde(default)]
    pub reserved_since: Option<f64>,
    /// Why a statistic is `None`, by field name.
    #[serde(default)]
    pub unreported: BTreeMap<String, String>,
    /// Training steps the process had completed when these were read (its optimizer's step
    /// hook, or `strata_feed.step()`); `None` where the framework gives no steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// Read at the end of a step (in the step hook), when the step's own tensors are freed:
    /// the readings a climb per step is judged on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_step_end: bool,
}

impl AllocatorStats {
    /// The step this reading ends, if it was taken at the end of one.
    pub(crate) fn step_end(&self) -> Option<u64> {
        self.step.filter(|_| self.at_step_end)
    }
}

/// The agent's own reading of its CUDA context on one device (a `hello` device's
/// `context`): NVML's used memory of its process, read once right after CUDA init while its
/// allocator's pool was empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportedContext {
    /// NVML's used memory of the process on this device at `time`, bytes.
    pub(crate) bytes: u64,
    /// When it was read (unix seconds).
    pub(crate) time: f64,
    /// The allocator's reserved bytes at that reading: the figure is the context only at 0.
    #[serde(default)]
    pub(crate) reserved: Option<u64>,
    /// How it was read, e.g. `nvml_process_used`.
    #[serde(default)]
    pub(crate) method: Option<String>,
}

impl ReportedContext {
    /// The context it says, if it can be one: read while the pool held nothing, at a real
    /// time.
    pub(crate) fn context_bytes(&self) -> Option<u64> {
        (self.reserved == Some(0) && self.time.is_finite()).then_some(self.bytes)
    }
}

/// One device as the agent names it in `hello`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FeedDevice {
    /// The framework's device index.
    pub index: u32,
    /// As the framework gives it: bare hex or `GPU-`/`MIG-` prefixed.
    #[serde(default)]
    pub uuid: Option<String>,
    /// `DDDDDDDD:BB:DD.0`, naming the physical GPU.
    #[serde(default)]
    pub pci_bus_id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    /// Its CUDA context, as the agent read it right after CUDA init.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ReportedContext>,
}

/// Who the agent says it is (the latest `hello`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// The pid as the agent sees it (its own PID namespace).
    pub pid: u32,
    pub time: f64,
    #[serde(default)]
    pub agent_version: Option<String>,
    #[serde(default)]
    pub python: Option<String>,
    #[serde(default)]
    pub executable: Option<String>,
    #[serde(default)]
    pub started: Option<f64>,
    /// Seconds between the agent's samples.
    #[serde(default)]
    pub interval: Option<f64>,
    #[serde(default)]
    pub framework: Option<String>,
    #[serde(default)]
    pub framework_version: Option<String>,
    #[serde(default)]
    pub backend: Option<String>,
    /// Allocator settings: values are strings, numbers, booleans or null.
    #[serde(default)]
    pub settings: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub devices: Vec<FeedDevice>,
    /// Why nothing is read yet.
    #[serde(default)]
    pub note: Option<String>,
    /// The feed protocol version the agent speaks (also every message's `v`).
    #[serde(default)]
    pub protocol: Option<u32>,
    /// `no_framework`, `waiting`, `reading` or `error` (older agents: none).
    #[serde(default)]
    pub state: Option<String>,
    /// The agent's own error, when `state` is `error`.
    #[serde(default)]
    pub error: Option<String>,
    /// Which copy of the agent runs: `embedded` (strata's), `environment` (the job's own
    /// install), `imported`.
    #[serde(default)]
    pub agent_copy: Option<String>,
    #[serde(default)]
    pub agent_path: Option<String>,
    /// The requests it answers (`sites`); empty for an agent that reads none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
}

impl Hello {
    /// Whether it answers requests of this type.
    pub(crate) fn answers(&self, request: &str) -> bool {
        self.requests.iter().any(|r| r == request)
    }
}

/// The framework's report of an out-of-memory error.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OomReport {
    pub(crate) time: f64,
    #[serde(default)]
    pub(crate) seq: u64,
    pub(crate) index: u32,
    #[serde(default)]
    pub(crate) requested: Option<u64>,
    #[serde(default)]
    pub(crate) device_free: Option<u64>,
    #[serde(default)]
    pub(crate) device_total: Option<u64>,
    #[serde(default)]
    pub(crate) stats: Option<AllocatorStats>,
}

/// The peer's credentials from `SO_PEERCRED`, in this monitor's namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerCred {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// Where the monitor stands with a feed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum FeedState {
    /// Connected and trusted.
    Connected,
    /// Not trusted: the reason says which check failed. Nothing it sent is used.
    Refused { reason: String },
    /// Was trusted, and dropped for its behaviour (a flood); retried later.
    Dropped { reason: String },
    /// The agent said `bye`, or the connection closed.
    Closed { reason: String },
}

/// How a feed's socket was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FoundVia {
    /// In a feed directory of this monitor's mount namespace.
    FeedDir,
    /// Through `/proc/<pid>/root` of a process NVML lists (a job in a container).
    ProcessRoot,
    /// Rebuilt from a recording of the snapshot's derived form (`processes[].feed`, no raw
    /// feed records): no socket or peer is known, and the pid is the recording's.
    Snapshot,
}

/// Bad input from a feed, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedCounters {
    /// Lines read and accepted.
    pub lines: u64,
    pub samples: u64,
    /// Lines over the 64 KiB limit.
    pub oversized: u64,
    /// Lines that are not a JSON object.
    pub malformed: u64,
    /// A `v` other than 1.
    pub unknown_version: u64,
    /// A `type` this monitor does not know.
    pub unknown_type: u64,
    /// Valid JSON with missing or wrongly typed fields.
    pub invalid: u64,
    /// Lines dropped over the rate limit.
    pub rate_limited: u64,
    /// Times the rate limit was hit.
    pub floods: u64,
}

impl FeedCounters {
    /// Lines that were not used for a fault of the sender.
    pub(crate) fn bad(&self) -> u64 {
        self.oversized + self.malformed + self.unknown_version + self.invalid + self.rate_limited
    }
}

/// One device of a feed: its latest statistics, and the ones received since the previous
/// node sample (oldest first; the backlog on a new connection), for history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceFeed {
    pub latest: AllocatorStats,
    #[serde(default)]
    pub earlier: Vec<AllocatorStats>,
}

/// One allocator feed, as the monitor holds it when a node sample is taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedRecord {
    /// The socket's path (through `/proc/<pid>/root` for a job in a container).
    pub socket: String,
    pub found_via: FoundVia,
    /// The peer's credentials; `None` when it could not be connected.
    pub peer: Option<PeerCred>,
    /// The peer's pid in its own PID namespace (last field of `NSpid:`).
    pub nspid: Option<u32>,
    pub state: FeedState,
    /// The latest `hello`, once trusted.
    /// Shared: it is the same from one sample to the next until the agent says a new one.
    pub hello: Option<std::sync::Arc<Hello>>,
    /// Per device index, in index order.
    #[serde(default)]
    pub devices: Vec<DeviceFeed>,
    /// The latest OOM report, and any received since the previous node sample.
    #[serde(default)]
    pub ooms: Vec<OomReport>,
    #[serde(default)]
    pub counters: FeedCounters,
    /// When the monitor connected (unix seconds).
    pub connected_at: Option<f64>,
    /// When the monitor last received a line from it.
    pub last_heard: Option<f64>,
    /// The latest segment map it sent (a `segments` message); null before the first.
    #[serde(default)]
    pub segments: Option<std::sync::Arc<crate::sample::pool::SegmentsReport>>,
    /// The latest sites window it reported on, or this monitor's own word on a request it
    /// could not send; null before the first.
    #[serde(default)]
    pub sites: Option<std::sync::Arc<crate::sample::pool::SitesReport>>,
}

impl FeedRecord {
    /// The pid this feed speaks for, in the monitor's PID namespace: the kernel's word
    /// (`SO_PEERCRED`), never the agent's.
    pub fn pid(&self) -> Option<u32> {
        match (self.peer, self.found_via) {
            (Some(peer), _) => Some(peer.pid),
            // Rebuilt from a recording that named the process, not the peer.
            (None, FoundVia::Snapshot) => self.hello.as_ref().map(|h| h.pid),
            (None, _) => None,
        }
        .filter(|&p| p != 0)
    }

    pub fn is_trusted(&self) -> bool {
        matches!(self.state, FeedState::Connected | FeedState::Closed { .. })
            && self.hello.is_some()
    }
}

/// What the monitor's search for feeds met that is not a feed, as of the latest scan: said so
/// that a feed it could not find, or would not open, is never silently `absent`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedScan {
    /// Feed dirs with more entries than one scan reads.
    #[serde(default)]
    pub(crate) cut_short: Vec<CutShort>,
    /// Entries where a feed dir or an agent's socket belongs that are something else (a
    /// symbolic link, a FIFO, a regular file...): never opened, never followed.
    #[serde(default)]
    pub(crate) suspicious: Vec<SuspiciousEntry>,
}

impl FeedScan {
    pub(crate) fn is_empty(&self) -> bool {
        self.cut_short.is_empty() && self.suspicious.is_empty()
    }
}

/// A directory whose listing stopped at the scan's budget: sockets past it are not found by
/// scanning (those of the processes NVML lists still are, looked up by their own path).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CutShort {
    /// The directory (`/tmp` itself when it holds more `strata-<uid>` dirs than are read).
    pub(crate) dir: String,
    /// Entries read.
    pub(crate) read: u64,
    /// Entries counted in all, at most a bound; `entries_capped`: there are more.
    pub(crate) entries: u64,
    #[serde(default)]
    pub(crate) entries_capped: bool,
}

/// An entry where a feed dir or a socket is looked for that is not one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SuspiciousEntry {
    /// As shown to the user (through `/proc/<pid>/root` for a job in a container).
    pub(crate) path: String,
    /// What it is: `symbolic link`, `FIFO`, `regular file`, `directory`, `character device`,
    /// `block device`.
    pub(crate) kind: String,
    /// What belongs there: `socket` (an agent's `<pid>.sock`) or `feed_dir`.
    pub(crate) in_place_of: String,
    /// Its owner (the kernel's word, `lstat`).
    pub(crate) owner: u32,
    /// The processes NVML lists whose own socket path this is, or goes through.
    #[serde(default)]
    pub(crate) pids: Vec<u32>,
    /// Where a symbolic link points (never followed).
    #[serde(default)]
    pub(crate) target: Option<String>,
}

impl SuspiciousEntry {
    /// One line: what it is, whose, where what belongs, and what to do.
    pub(crate) fn describe(&self) -> String {
        let to = self
            .target
            .as_deref()
            .map(|t| format!(" to {t}"))
            .unwrap_or_default();
        let whose = match &self.pids[..] {
            [] => String::new(),
            [one] => format!(" of PID {one}"),
            [first, rest @ ..] => format!(" of PID {first} and {} more", rest.len()),
        };
        let place = match self.in_place_of.as_str() {
            "socket" => format!("where the agent socket{whose} belongs"),
            _ => format!("where the feed dir{whose} belongs"),
        };
        let never = if self.kind == "symbolic link" {
            "never followed"
        } else {
            "never opened"
        };
        format!(
            "{} is a {}{to} (owner uid {}) {place}: {never}; its owner should remove it",
            self.path, self.kind, self.owner
        )
    }
}

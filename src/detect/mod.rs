//! Findings: pure functions from samples (and later history) to things a user must see.

mod instant;

pub use instant::{detect_instant, device_name, is_python};

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// How urgent a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warn",
            Severity::Critical => "crit",
        }
    }
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// A PID that has exited (or is defunct) still holds a CUDA context.
    ZombieContext,
    /// A PID outside this monitor's PID namespace holds memory.
    NotVisibleHolder,
    /// Processes without an allocator feed hold memory that cannot be split (one finding
    /// for the node, counting the Python processes that could be fed).
    UnattributedMemory,
    /// Device memory in use that no listed process accounts for.
    UnexplainedUsage,
    /// A feed too old to combine with the current instant.
    StaleFeed,
    /// A feed whose numbers contradict themselves or NVML.
    InconsistentFeed,
    /// A GPU that fell off the bus.
    GpuLost,
    /// NVML's counters for a device contradict each other: no layers this instant.
    InconsistentCounters,
    /// A feed that failed a trust check, or was dropped for flooding.
    RefusedFeed,
    /// A feed that sent lines it had to skip (malformed, oversized, unknown version...).
    FeedBadInput,
    /// A feed reports a device that NVML does not list its process on.
    FeedDeviceUnlisted,
}

/// One finding, as the findings panel and the snapshot show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub severity: Severity,
    pub device_uuid: Option<String>,
    pub pid: Option<u32>,
    /// When this finding was first raised (unix seconds) and has held since.
    pub since: f64,
    pub message: String,
}

/// Remembers when each finding was first raised, so `since` survives from sample to sample.
/// A finding that clears and comes back starts afresh.
#[derive(Debug, Default, Clone)]
pub struct FindingTracker {
    first_raised: HashMap<(FindingKind, Option<String>, Option<u32>), f64>,
}

impl FindingTracker {
    /// Stamps `since` on this instant's findings and forgets findings that cleared.
    pub fn stamp(&mut self, findings: &mut [Finding]) {
        let mut current = HashMap::with_capacity(findings.len());
        for finding in findings.iter_mut() {
            let key = (finding.kind, finding.device_uuid.clone(), finding.pid);
            let since = self
                .first_raised
                .get(&key)
                .copied()
                .unwrap_or(finding.since)
                .min(finding.since);
            finding.since = since;
            current.insert(key, since);
        }
        self.first_raised = current;
    }
}

/// Most severe first, then oldest first.
pub fn sort_findings(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.since.total_cmp(&b.since))
            .then(a.pid.cmp(&b.pid))
    });
}

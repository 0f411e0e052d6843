//! Findings: pure functions from a sample, its layers and the history to things a user must
//! see.

pub(crate) mod advice;
mod devices;
pub(crate) mod diagnosis;
pub(crate) mod evidence;
mod feeds;
mod grouping;
mod judged;
mod processes;
pub(crate) mod trend;
mod warmup;

pub use evidence::Evidence;
pub(crate) use warmup::WarmUp;

pub(crate) use diagnosis::{headroom_of, headrooms, Headroom, OomMemory};
pub(crate) use processes::is_python;

use crate::accounting::attach::Attachment;
use crate::accounting::NodeAccount;
use crate::history::SeriesKey;
use crate::sample::NodeSample;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// A holder must be gone this long before its context is called a zombie: a process that
/// exits is listed by NVML for a moment after `/proc` has let it go.
pub(crate) const ZOMBIE_CONFIRM_SECS: f64 = 5.0;
/// More findings of one kind than this become one grouped finding.
const GROUP_OVER: usize = 3;

/// How urgent a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub(crate) fn label(self) -> &'static str {
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
    /// A feed dir with more entries than one scan reads: feeds past them are found only for
    /// the processes NVML lists.
    FeedDirCutShort,
    /// A link, FIFO, regular file... where a feed dir or an agent's socket belongs: never
    /// followed or opened.
    SuspiciousFeedEntry,
    /// NVML refused something (a handle, a list, the device count): what is not known.
    NvmlProblem,
    /// A series rising steadily with no plateau; `evidence.cause` says which layer.
    Climb,
    /// Free split pieces large and growing as a share of the pool.
    Fragmentation,
    /// The allocator's retry counter rising: pressure before OOMs.
    AllocRetries,
    /// An out-of-memory error, classed `capacity` or `fragmentation`.
    Oom,
    /// Live tensors within a few percent of what the device holds.
    Capacity,
    /// Alive, SMs idle for minutes, holding memory.
    IdleHolder,
    /// A climb that will run out of memory within the hour at its present rate.
    OomForecast,
    /// A fed job's warm-up verdict, once its step-end memory and peak have held (or its
    /// forecast says it will not fit).
    WarmUp,
    /// A fed job that reports steps still warming up: its step-end live memory rising from
    /// its first step, not yet judged for a climb per step. Shown until the warm-up ends.
    WarmingUp,
}

impl FindingKind {
    /// Every kind, in the enum's order: for counts that say 0 rather than nothing, and for
    /// the tests that hold each kind's words (docs, advice, the man page). A kind added
    /// fails to compile in [`FindingKind::index`] until it is listed here too.
    pub const ALL: [FindingKind; 23] = [
        FindingKind::ZombieContext,
        FindingKind::NotVisibleHolder,
        FindingKind::UnattributedMemory,
        FindingKind::UnexplainedUsage,
        FindingKind::StaleFeed,
        FindingKind::InconsistentFeed,
        FindingKind::GpuLost,
        FindingKind::InconsistentCounters,
        FindingKind::RefusedFeed,
        FindingKind::FeedBadInput,
        FindingKind::FeedDeviceUnlisted,
        FindingKind::FeedDirCutShort,
        FindingKind::SuspiciousFeedEntry,
        FindingKind::NvmlProblem,
        FindingKind::Climb,
        FindingKind::Fragmentation,
        FindingKind::AllocRetries,
        FindingKind::Oom,
        FindingKind::Capacity,
        FindingKind::IdleHolder,
        FindingKind::OomForecast,
        FindingKind::WarmUp,
        FindingKind::WarmingUp,
    ];

    /// Its place in [`FindingKind::ALL`]: a match with no wildcard, so that a new kind is
    /// listed (a test holds `ALL[kind.index()] == kind`).
    #[cfg(test)]
    pub(crate) const fn index(self) -> usize {
        match self {
            FindingKind::ZombieContext => 0,
            FindingKind::NotVisibleHolder => 1,
            FindingKind::UnattributedMemory => 2,
            FindingKind::UnexplainedUsage => 3,
            FindingKind::StaleFeed => 4,
            FindingKind::InconsistentFeed => 5,
            FindingKind::GpuLost => 6,
            FindingKind::InconsistentCounters => 7,
            FindingKind::RefusedFeed => 8,
            FindingKind::FeedBadInput => 9,
            FindingKind::FeedDeviceUnlisted => 10,
            FindingKind::FeedDirCutShort => 11,
            FindingKind::SuspiciousFeedEntry => 12,
            FindingKind::NvmlProblem => 13,
            FindingKind::Climb => 14,
            FindingKind::Fragmentation => 15,
            FindingKind::AllocRetries => 16,
            FindingKind::Oom => 17,
            FindingKind::Capacity => 18,
            FindingKind::IdleHolder => 19,
            FindingKind::OomForecast => 20,
            FindingKind::WarmUp => 21,
            FindingKind::WarmingUp => 22,
        }
    }

    /// Its name in the JSON contract: `climb`, `zombie_context`...
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

/// One finding, as the findings panel and the snapshot show it. Written to JSON with its
/// [`advice`](Finding::advice), which is worked out, not kept: read back, a finding's advice
/// is the reader's.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "ReadFinding")]
pub struct Finding {
    pub kind: FindingKind,
    pub severity: Severity,
    pub device_uuid: Option<String>,
    pub pid: Option<u32>,
    /// When this finding was first raised (unix seconds) and has held since.
    pub(crate) since: f64,
    pub(crate) message: String,
    /// The figures behind it (bytes, ages, pids), by name, each with its unit.
    pub evidence: Evidence,
}

impl Finding {
    /// What the user can do next: one or two sentences chosen by the evidence
    /// ([`advice::advice`]), the first the action.
    pub(crate) fn advice(&self) -> Vec<String> {
        advice::advice(self.kind, &self.evidence)
    }
}

impl Serialize for Finding {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("Finding", 8)?;
        s.serialize_field("kind", &self.kind)?;
        s.serialize_field("severity", &self.severity)?;
        s.serialize_field("device_uuid", &self.device_uuid)?;
        s.serialize_field("pid", &self.pid)?;
        s.serialize_field("since", &self.since)?;
        s.serialize_field("message", &self.message)?;
        s.serialize_field("advice", &self.advice())?;
        s.serialize_field("evidence", &self.evidence)?;
        s.end()
    }
}

/// A finding as read back, its evidence typed by its kind ([`Evidence::read`]); its
/// `advice`, where the file has one, is left: it is worked out again.
#[derive(Deserialize)]
struct ReadFinding {
    kind: FindingKind,
    severity: Severity,
    device_uuid: Option<String>,
    pid: Option<u32>,
    since: f64,
    message: String,
    #[serde(default)]
    evidence: serde_json::Value,
}

impl From<ReadFinding> for Finding {
    fn from(read: ReadFinding) -> Self {
        Finding {
            kind: read.kind,
            severity: read.severity,
            device_uuid: read.device_uuid,
            pid: read.pid,
            since: read.since,
            message: read.message,
            evidence: Evidence::read(read.kind, read.evidence),
        }
    }
}

/// Findings of one instant as they are raised.
pub(crate) struct Findings {
    now: f64,
    list: Vec<Finding>,
    /// The series each climb raised reads, by the climb's index in `list`.
    climbs: Vec<(usize, SeriesKey)>,
}

impl Findings {
    fn new(now: f64) -> Self {
        Findings {
            now,
            list: Vec::new(),
            climbs: Vec::new(),
        }
    }

    /// The finding just raised is a climb of this series.
    fn climbed(&mut self, key: SeriesKey) {
        if let Some(last) = self.list.len().checked_sub(1) {
            self.climbs.push((last, key));
        }
    }

    fn raise(
        &mut self,
        kind: FindingKind,
        severity: Severity,
        device: Option<&str>,
        pid: Option<u32>,
        message: String,
        evidence: Evidence,
    ) {
        debug_assert_eq!(evidence.kind(), Some(kind), "evidence of another kind");
        self.list.push(Finding {
            kind,
            severity,
            device_uuid: device.map(str::to_string),
            pid,
            since: self.now,
            message,
            evidence,
        });
    }
}

/// Everything this one instant shows: zombie contexts, invisible holders, unattributed and
/// unexplained usage, stale, inconsistent, refused or misplaced feeds, lost GPUs, what NVML
/// refused, contradictory counters. `since` is this sample's time; [`FindingTracker`]
/// carries it forward and [`settle`] then confirms and groups.
pub fn detect_instant(
    sample: &NodeSample,
    attachment: &Attachment,
    account: &NodeAccount,
) -> Vec<Finding> {
    let mut out = Findings::new(sample.time);
    processes::detect(sample, account, &mut out);
    feeds::detect(sample, attachment, &mut out);
    devices::detect(sample, account, &mut out);
    sort_findings(&mut out.list);
    out.list
}

/// What the history shows up to this instant (which must be recorded in it already):
/// climbs with their cause, fragmentation, allocation retries, OOMs with their class,
/// capacity, idle holders.
pub fn detect_history(
    sample: &NodeSample,
    account: &NodeAccount,
    history: &crate::history::History,
) -> Vec<Finding> {
    let handles = crate::history::Handles::default();
    detect_history_keyed(sample, account, history, &handles, &Remembered::default()).0
}

/// What the detectors read that a sample may no longer carry, remembered by the pipeline:
/// each process's latest OOM report.
#[derive(Debug, Default, Clone)]
pub(crate) struct Remembered {
    pub(crate) ooms: OomMemory,
}

impl Remembered {
    /// Takes in a sample whose feeds are attached.
    pub(crate) fn observe(&mut self, sample: &NodeSample) {
        self.ooms.observe(sample);
    }
}

/// [`detect_history`] with what the pipeline remembers and the handles its writes of this
/// sample got, and the series each climb reads (for [`ClimbHold`]).
pub(crate) fn detect_history_keyed(
    sample: &NodeSample,
    account: &NodeAccount,
    history: &crate::history::History,
    handles: &crate::history::Handles,
    remembered: &Remembered,
) -> (Vec<Finding>, Vec<(usize, SeriesKey)>) {
    let mut out = Findings::new(sample.time);
    diagnosis::detect(
        sample,
        account,
        history,
        handles,
        &remembered.ooms,
        &mut out,
    );
    (out.list, out.climbs)
}

/// Climbs seen within [`trend::HOLD_SECS`], kept through readings that miss them while the
/// series they read has not fallen below where the climb had reached: one noisy minute does
/// not end a leak and start another. The detectors stay pure; this remembers.
#[derive(Debug, Default, Clone)]
pub(crate) struct ClimbHold {
    /// Each climb as last raised, its series, and when.
    seen: Vec<(Finding, SeriesKey, f64)>,
    /// The forecast of each climb as last raised: held with its climb, counting down to the
    /// same `oom_at`.
    forecasts: Vec<Finding>,
}

impl ClimbHold {
    /// Adds to `findings` (those of the instant `now`) the climbs held.
    pub(crate) fn apply(
        &mut self,
        findings: &mut Vec<Finding>,
        climbs: Vec<(usize, SeriesKey)>,
        history: &crate::history::History,
        now: f64,
    ) {
        let same = |a: &Finding, b: &Finding| {
            a.kind == b.kind && a.device_uuid == b.device_uuid && a.pid == b.pid
        };
        for (i, key) in climbs {
            let Some(f) = findings.get(i) else { continue };
            self.seen.retain(|(g, _, _)| !same(f, g));
            self.seen.push((f.clone(), key, now));
        }
        for f in findings
            .iter()
            .filter(|f| f.kind == FindingKind::OomForecast)
        {
            self.forecasts.retain(|g| !same(f, g));
            self.forecasts.push(f.clone());
        }
        self.seen
            .retain(|(_, _, at)| *at <= now && now - *at <= trend::HOLD_SECS);
        let mut held_forecasts = Vec::new();
        for (held, key, at) in &self.seen {
            if *at == now || findings.iter().any(|f| same(f, held)) {
                continue;
            }
            // Only a series still recorded: a process gone (exited, restarted) ends its climb.
            let series = history.get(key).filter(|s| s.last_time() > Some(*at));
            let reached = match &held.evidence {
                Evidence::Climb(climb) => Some(climb.to_bytes.0),
                _ => None,
            };
            let level = series.and_then(|s| s.last());
            if let (Some(reached), Some(level)) = (reached, level) {
                if level >= reached {
                    findings.push(held.clone());
                    held_forecasts.extend(
                        self.forecasts
                            .iter()
                            .filter(|f| f.device_uuid == held.device_uuid && f.pid == held.pid)
                            .filter_map(|f| counted_down(f, now)),
                    );
                }
            }
        }
        for f in held_forecasts {
            if !findings.iter().any(|g| same(g, &f)) {
                findings.push(f);
            }
        }
        let seen = &self.seen;
        self.forecasts.retain(|f| {
            seen.iter()
                .any(|(c, _, _)| c.device_uuid == f.device_uuid && c.pid == f.pid)
        });
    }
}

/// A forecast held through a reading that missed its climb: the same `oom_at`, the time
/// left to it now (`None` once it has passed).
fn counted_down(forecast: &Finding, now: f64) -> Option<Finding> {
    let Evidence::OomForecast(evidence) = &forecast.evidence else {
        return None;
    };
    let oom_at = Some(evidence.oom_at.0).filter(|t| t.is_finite())?;
    let old = Some(evidence.eta_secs.0).filter(|t| t.is_finite())?;
    let eta = (oom_at - now).round();
    if eta <= 0.0 {
        return None;
    }
    let mut f = forecast.clone();
    if let Evidence::OomForecast(evidence) = &mut f.evidence {
        evidence.eta_secs = evidence::units::Secs(eta);
    }
    f.message = f.message.replacen(
        &format!("in ~{}", crate::units::duration(old)),
        &format!("in ~{}", crate::units::duration(eta)),
        1,
    );
    Some(f)
}

/// After [`FindingTracker::stamp`]: holds back zombie contexts not yet gone for
/// [`ZOMBIE_CONFIRM_SECS`], turns many zombies, or many holders in other PID namespaces,
/// into one finding each, and unexplained usage on several devices, or several devices of
/// one feed that NVML does not list its process on, into one finding each.
pub(crate) fn settle(findings: &mut Vec<Finding>, now: f64) {
    grouping::group_devices(findings);
    findings
        .retain(|f| f.kind != FindingKind::ZombieContext || now - f.since >= ZOMBIE_CONFIRM_SECS);
    for (kind, what) in [
        (
            FindingKind::ZombieContext,
            "PIDs that no longer exist (or are defunct) still hold CUDA contexts",
        ),
        (
            FindingKind::NotVisibleHolder,
            "PIDs in other PID namespaces hold memory",
        ),
    ] {
        let count = findings.iter().filter(|f| f.kind == kind).count();
        if count <= GROUP_OVER {
            continue;
        }
        let (group, rest): (Vec<Finding>, Vec<Finding>) =
            findings.drain(..).partition(|f| f.kind == kind);
        *findings = rest;
        let mut pids: Vec<u32> = group.iter().filter_map(|f| f.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        let held: u64 = group
            .iter()
            .filter_map(|f| match &f.evidence {
                Evidence::ZombieContext(e) | Evidence::NotVisibleHolder(e) => e.used,
                _ => None,
            })
            .map(|used| used.0)
            .sum();
        let mut devices: Vec<String> = group.iter().filter_map(|f| f.device_uuid.clone()).collect();
        devices.sort_unstable();
        devices.dedup();
        let shown: Vec<String> = pids.iter().take(5).map(u32::to_string).collect();
        let more = pids.len().saturating_sub(shown.len());
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        let since = group.iter().map(|f| f.since).fold(f64::INFINITY, f64::min);
        let severity = group
            .iter()
            .map(|f| f.severity)
            .max()
            .unwrap_or(Severity::Info);
        findings.push(Finding {
            kind,
            severity,
            device_uuid: None,
            pid: None,
            since,
            message: format!(
                "{} {what}: {} on {} device(s); PIDs {}{tail}",
                pids.len(),
                crate::units::bytes(held),
                devices.len(),
                shown.join(", ")
            ),
            evidence: {
                let group = evidence::HeldGroup {
                    bytes: evidence::units::Bytes(held),
                    devices,
                    holders: grouped_holders(&group).into(),
                    pids: pids.iter().copied().map(evidence::units::Pid).collect(),
                };
                match kind {
                    FindingKind::ZombieContext => Evidence::ZombieContexts(group),
                    _ => Evidence::NotVisibleHolders(group),
                }
            },
        });
    }
    sort_findings(findings);
}

/// The holders of the device files named by the findings of a group, each once (by pid):
/// `None` where none of them names any.
fn grouped_holders(group: &[Finding]) -> Option<Vec<evidence::Holder>> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    let mut any = false;
    for holders in group.iter().filter_map(|f| f.evidence.holders()) {
        any = true;
        for holder in holders {
            if seen.insert(holder.pid) {
                out.push(holder.clone());
            }
        }
    }
    any.then_some(out)
}

/// Remembers when each finding was first raised, so `since` survives from sample to sample.
/// A finding that clears and comes back within [`trend::HOLD_SECS`] is the same one (one noisy
/// reading does not end a leak and start another); later, it starts afresh.
#[derive(Debug, Default, Clone)]
pub(crate) struct FindingTracker {
    /// Per finding: when first raised, and when last seen.
    first_raised: HashMap<FindingKey, (f64, f64)>,
}

/// A finding's identity from sample to sample: its kind, device and process.
type FindingKey = (FindingKind, Option<String>, Option<u32>);

impl FindingTracker {
    /// Stamps `since` on the findings of the instant `now`, and forgets those cleared for
    /// longer than the hold.
    pub(crate) fn stamp(&mut self, findings: &mut [Finding], now: f64) {
        for finding in findings.iter_mut() {
            let key = (finding.kind, finding.device_uuid.clone(), finding.pid);
            let since = self
                .first_raised
                .get(&key)
                .map_or(finding.since, |&(since, _)| since)
                .min(finding.since);
            finding.since = since;
            self.first_raised.insert(key, (since, now));
        }
        self.first_raised
            .retain(|_, (_, seen)| FindingTracker::holds(*seen, now));
    }

    /// Whether a finding last seen at `seen` is still held at `now` (within
    /// [`trend::HOLD_SECS`]): raised again, it is the same one, with the same `since`.
    pub(crate) fn holds(seen: f64, now: f64) -> bool {
        now - seen <= trend::HOLD_SECS && seen <= now
    }
}

/// Most severe first, then oldest first.
pub(crate) fn sort_findings(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.since.total_cmp(&b.since))
            .then(a.pid.cmp(&b.pid))
    });
}

/// `GPU 2` or `GPU 3 MIG 2g.20gb`, for messages.
pub(crate) fn device_name(sample: &NodeSample, uuid: &str) -> String {
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

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_defects;
#[cfg(test)]
mod tests_forecast;
#[cfg(test)]
mod tests_grouping;
#[cfg(test)]
mod tests_pool;
#[cfg(test)]
mod tests_scored;

//! The fleet as `strata fleet` holds it: nodes and their devices, the jobs whose ranks span
//! them, and the fleet's own findings; built by a source (Prometheus or endpoints), ranked
//! and judged here, the same for both.

use serde::Serialize;
use std::collections::BTreeMap;

/// A device's memory layers, by name (`live`, `fragmented`, `cached`, `outside_pool`,
/// `context`, `unattributed`, `other`, `free`), as `strata serve` exports them.
pub type Layers = BTreeMap<String, u64>;

/// Samples older than this many of the node's intervals are stale: shown as such, never as
/// current.
pub const STALE_INTERVALS: f64 = 3.0;

/// The device rows' order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    Urgency,
    Node,
    Used,
}

impl Sort {
    pub fn next(self) -> Sort {
        match self {
            Sort::Urgency => Sort::Node,
            Sort::Node => Sort::Used,
            Sort::Used => Sort::Urgency,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Sort::Urgency => "urgency",
            Sort::Node => "node",
            Sort::Used => "used %",
        }
    }
}

/// What a read asks of a source that can answer part of the fleet (Prometheus): at most
/// `rows` device rows and `rows` jobs, the first by the order and filter shown, picked by
/// Prometheus (`topk`) so that a refresh of a large fleet pulls what the screen shows, not
/// every series. A source that reads every node whole (endpoints) ignores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// `None`: every row.
    pub rows: Option<usize>,
    pub sort: Sort,
    pub reversed: bool,
    /// The filter, as typed (matched against node, device and finding, or job).
    pub filter: String,
}

impl Window {
    /// Every row, in the default order: what `--json` reads unless `--rows` is given.
    pub fn all() -> Window {
        Window {
            rows: None,
            sort: Sort::Urgency,
            reversed: false,
            filter: String::new(),
        }
    }
}

/// What a windowed read holds of the whole: the rows read and how many there are.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Part {
    /// The nodes there are, where the read listed only those it needs (every node down or
    /// stale, those of the rows read, those with no device); `None`: every node is listed.
    pub nodes: Option<u64>,
    /// Devices read, and devices that match the filter on nodes up.
    pub devices_read: u64,
    pub devices: u64,
    /// Jobs read, and jobs that match the filter; `None` where the jobs were not counted
    /// (built from the processes' series: then every job is read).
    pub jobs_read: u64,
    pub jobs: Option<u64>,
    /// The order the rows were picked by.
    pub sort: Sort,
    pub reversed: bool,
    /// The filter Prometheus picked the device rows by (it matches their processes' owners
    /// too, which a windowed read does not bring): the client does not filter them again.
    pub filter: String,
}

impl Fleet {
    /// Keeps the rows that match a filter (`--json --filter`): a node's devices that match
    /// (all of them where its name matches), a node down that matches, the jobs that match.
    /// The fleet's findings stay: they are the fleet's, not a row's.
    pub fn keep_matching(&mut self, filter: &str) {
        let filter = filter.to_lowercase();
        if filter.is_empty() {
            return;
        }
        self.jobs.retain(|j| job_matches(j, &filter));
        // Prometheus picked the device rows by this filter already, owners and all: a node
        // stays where it has a device that matches, read or not, or its name matches.
        if self
            .part
            .as_ref()
            .is_some_and(|p| p.filter.to_lowercase() == filter)
        {
            self.nodes.retain(|n| {
                !n.devices.is_empty()
                    || n.device_count.is_some_and(|c| c > 0)
                    || row_matches(n, None, &filter)
            });
            return;
        }
        self.nodes.retain_mut(|n| {
            if row_matches(n, None, &filter) {
                return true;
            }
            // Its name does not match: the devices that do, by their own.
            let had = n.devices.len();
            n.devices.retain(|d| device_matches(d, &filter));
            if let Some(count) = n.device_count.as_mut() {
                *count = count.saturating_sub((had - n.devices.len()) as u64);
            }
            !n.devices.is_empty()
        });
    }
}

impl Part {
    /// Whether some rows were left out.
    pub fn is_partial(&self) -> bool {
        self.devices_read < self.devices || self.jobs.is_some_and(|j| self.jobs_read < j)
    }
}

/// Whether a device row (a node's device, or the node itself where `None`) matches a filter
/// (lower case): its node's name or address, its GPU's name or MIG profile, a finding's kind,
/// or an owner of one of its processes (job, pod, namespace, user) contains it. What
/// Prometheus is asked for the same filter is `window::matching`.
pub fn row_matches(node: &Node, device: Option<&Device>, filter: &str) -> bool {
    filter.is_empty()
        || node.name.to_lowercase().contains(filter)
        || node.instance.to_lowercase().contains(filter)
        || device.is_some_and(|d| device_matches(d, filter))
}

/// The device's own part of [`row_matches`]: its name or profile, a finding's kind, an owner.
fn device_matches(d: &Device, filter: &str) -> bool {
    d.name
        .as_deref()
        .unwrap_or("")
        .to_lowercase()
        .contains(filter)
        || d.findings
            .iter()
            .any(|f| f.kind.to_lowercase().contains(filter))
        || d.owners.iter().any(|o| o.to_lowercase().contains(filter))
}

/// Whether a job's key (`slurm 9001`, `run llm-a`) contains a filter (lower case).
pub fn job_matches(job: &Job, filter: &str) -> bool {
    filter.is_empty() || job.key.to_lowercase().contains(filter)
}

/// The fleet at one read.
#[derive(Debug, Clone, Serialize)]
pub struct Fleet {
    pub schema: &'static str,
    /// Where it was read: `prometheus URL` or `N endpoints`.
    pub source: String,
    /// When it was read, unix seconds.
    pub time: f64,
    pub nodes: Vec<Node>,
    pub jobs: Vec<Job>,
    pub findings: Vec<FleetFinding>,
    /// What the source said went wrong that is not one node's: a partial response, a query
    /// refused, warnings. Each a line.
    pub problems: Vec<String>,
    /// Where the source read only the first rows by the order shown (`--rows`, and the
    /// screen on Prometheus): how many of how many. `None`: the whole fleet was read.
    pub part: Option<Part>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// Its data is current.
    Up,
    /// It answers, but its sample is older than a few intervals: its figures are not shown.
    Stale,
    /// Its target is down, or did not answer: its figures are not shown.
    Down,
}

/// One node: a `strata serve` target.
#[derive(Debug, Clone, Serialize)]
pub struct Node {
    /// The host name strata serve reports (`strata_node_info`), else the target's address.
    pub name: String,
    /// The target's address (`instance`, or the endpoint).
    pub instance: String,
    pub state: NodeState,
    /// Why it is down or stale, in a line.
    pub why: Option<String>,
    /// The age of its sample when read, seconds.
    pub age_secs: Option<f64>,
    /// strata's version on it.
    pub version: Option<String>,
    /// Its devices; empty unless it is up. In a windowed read ([`Part`]), those read.
    pub devices: Vec<Device>,
    /// In a windowed read, how many devices it has that match the filter (its devices not
    /// read are not rows); `None` where every device was read.
    pub device_count: Option<u64>,
    /// Whether its strata exports device findings (`strata_node_info`'s `exports`): where it
    /// does not (an older strata), its devices' findings are unknown, not none.
    pub findings_exported: bool,
}

/// A finding a node raised on a device: its kind and severity, and how many.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceFinding {
    pub kind: String,
    pub severity: String,
    pub count: u64,
}

/// A GPU or MIG instance of a node.
#[derive(Debug, Clone, Serialize)]
pub struct Device {
    /// The GPU's index on its node.
    pub gpu: String,
    pub uuid: String,
    /// The GPU's name; a MIG instance's profile.
    pub name: Option<String>,
    pub mig: bool,
    pub total: Option<u64>,
    pub layers: Layers,
    pub findings: Vec<DeviceFinding>,
    /// The soonest OOM forecast on it, seconds.
    pub oom_eta_secs: Option<f64>,
    /// Its fastest climb, bytes a second.
    pub climb_bytes_per_sec: Option<f64>,
    /// Its processes' owners, for the filter: job keys (`slurm 9001`), pods, namespaces,
    /// users; where the processes' series were read.
    #[serde(skip)]
    pub owners: Vec<String>,
}

impl Device {
    /// Used: every layer but `free`; `None` when its layers are unknown.
    pub fn used(&self) -> Option<u64> {
        if self.layers.is_empty() {
            return None;
        }
        Some(
            self.layers
                .iter()
                .filter(|(name, _)| name.as_str() != crate::layers::Layer::Free.name())
                .fold(0u64, |sum, (_, b)| sum.saturating_add(*b)),
        )
    }

    /// The worst finding: critical before warning before info, then by count.
    pub fn worst(&self) -> Option<&DeviceFinding> {
        self.findings
            .iter()
            .max_by_key(|f| (severity_rank(&f.severity), f.count))
    }

    fn count(&self, kind: &str) -> u64 {
        self.findings
            .iter()
            .filter(|f| f.kind == kind)
            .fold(0u64, |sum, f| sum.saturating_add(f.count))
    }
}

pub fn severity_rank(severity: &str) -> u8 {
    match severity {
        "critical" => 3,
        "warning" => 2,
        "info" => 1,
        _ => 0,
    }
}

/// A row's place in the urgency order: critical findings, then the shortest time to OOM,
/// then climbs, then fragmentation, then the fullest; a node down or stale before all.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Urgency {
    pub down: bool,
    pub critical: u64,
    /// Negated seconds to OOM (so that sooner is more urgent); `-inf` where none.
    pub oom: f64,
    pub climbs: u64,
    pub fragmentation: u64,
    pub used_share: f64,
}

impl Urgency {
    pub fn of(node: &Node, device: Option<&Device>) -> Urgency {
        let down = node.state != NodeState::Up;
        let Some(d) = device else {
            return Urgency {
                down,
                critical: 0,
                oom: f64::NEG_INFINITY,
                climbs: 0,
                fragmentation: 0,
                used_share: 0.0,
            };
        };
        let critical = d
            .findings
            .iter()
            .filter(|f| f.severity == "critical")
            .fold(0u64, |sum, f| sum.saturating_add(f.count));
        let used_share = match (d.used(), d.total) {
            (Some(u), Some(t)) if t > 0 => u as f64 / t as f64,
            _ => 0.0,
        };
        Urgency {
            down,
            critical,
            oom: d.oom_eta_secs.map_or(f64::NEG_INFINITY, |s| -s),
            climbs: d.count("climb"),
            fragmentation: d.count("fragmentation"),
            used_share,
        }
    }

    /// Most urgent first.
    pub fn cmp_desc(a: &Urgency, b: &Urgency) -> std::cmp::Ordering {
        b.partial_cmp(a).unwrap_or(std::cmp::Ordering::Equal)
    }
}

/// A process of a job, as the fleet knows it: enough to name it and place it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Rank {
    pub node: String,
    pub gpu: String,
    pub pid: String,
    pub rank: Option<String>,
    /// Its live tensors' climb, bytes a second, where its node raised one.
    pub live_bytes_per_sec: Option<f64>,
}

/// The least, median and most of one figure across a job's processes.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Spread {
    pub least: f64,
    pub median: f64,
    pub most: f64,
    /// Processes the figure is known for.
    pub known: u64,
}

impl Spread {
    /// From values; `None` when there are none.
    pub fn of(values: &mut [f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        Some(Spread {
            least: values[0],
            median,
            most: values[n - 1],
            known: n as u64,
        })
    }
}

/// A job whose processes the fleet sees, on one node or many: joined by its Slurm job, else
/// its torchrun run (`run`: the rendezvous id or address), else its pod
/// (`build::JOB_KINDS`).
#[derive(Debug, Clone, Serialize)]
pub struct Job {
    /// `slurm 81234`, `run llm-a`, `pod serving/t5-3b-0`.
    pub key: String,
    /// Its processes the fleet sees.
    pub processes: u64,
    /// The nodes they run on.
    pub nodes: u64,
    /// The world size its ranks report, where they agree.
    pub world_size: Option<u64>,
    /// By figure (`live`, `reserved`, `outside_pool`, `used`): the spread across processes.
    pub spread: BTreeMap<String, Spread>,
    /// Its processes whose live tensors climb, as their nodes judged.
    pub climbing: Vec<Rank>,
}

/// A finding only the fleet can make.
#[derive(Debug, Clone, Serialize)]
pub struct FleetFinding {
    /// `rank_outlier`.
    pub kind: &'static str,
    pub severity: &'static str,
    pub job: String,
    pub message: String,
    pub advice: String,
    pub evidence: OutlierEvidence,
}

#[derive(Debug, Clone, Serialize)]
pub struct OutlierEvidence {
    pub node: String,
    pub gpu: String,
    pub pid: String,
    pub rank: Option<String>,
    pub live_bytes_per_sec: f64,
    /// The job's processes the fleet sees, and how many of them climb.
    pub processes: u64,
    pub climbing: u64,
}

/// The fewest processes a job needs before one of them can stand apart.
pub const OUTLIER_MIN_PROCESSES: u64 = 3;

/// A job's climbing ranks that stand apart: at most one in ten of its processes (one, in a
/// job under twenty) climbs, and every other is flat as its node judged it. Where more climb,
/// the job climbs as a whole (each node's own climb findings say so): no rank stands apart.
pub fn rank_outliers(job: &Job) -> Vec<FleetFinding> {
    let n = job.processes;
    let climbing = job.climbing.len() as u64;
    if n < OUTLIER_MIN_PROCESSES || climbing == 0 || climbing > (n / 10).max(1) {
        return Vec::new();
    }
    let others = n - climbing;
    job.climbing
        .iter()
        .filter_map(|r| {
            let rate = r.live_bytes_per_sec.filter(|v| v.is_finite() && *v > 0.0)?;
            let who = match &r.rank {
                Some(rank) => format!("rank {rank}"),
                None => format!("pid {}", r.pid),
            };
            let per_min = crate::units::bytes((rate * 60.0).round() as u64);
            Some(FleetFinding {
                kind: "rank_outlier",
                severity: "warning",
                job: job.key.clone(),
                message: format!(
                    "{}: {who} on {} GPU {}: live +{per_min}/min, the other {others} flat",
                    job.key, r.node, r.gpu
                ),
                advice: format!(
                    "Look at that rank first: `ssh -t {} strata`, then `w` on pid {} for the lines that grow; what differs on that rank (its data shard, rank-0-only work, a cache keyed by rank) is the usual cause.",
                    r.node, r.pid
                ),
                evidence: OutlierEvidence {
                    node: r.node.clone(),
                    gpu: r.gpu.clone(),
                    pid: r.pid.clone(),
                    rank: r.rank.clone(),
                    live_bytes_per_sec: rate,
                    processes: n,
                    climbing,
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(processes: u64, climbing: &[(&str, f64)]) -> Job {
        Job {
            key: "slurm 81234".into(),
            processes,
            nodes: 64,
            world_size: Some(processes),
            spread: BTreeMap::new(),
            climbing: climbing
                .iter()
                .map(|(rank, rate)| Rank {
                    node: "node-17".into(),
                    gpu: "3".into(),
                    pid: "4242".into(),
                    rank: Some(rank.to_string()),
                    live_bytes_per_sec: Some(*rate),
                })
                .collect(),
        }
    }

    #[test]
    fn one_climbing_rank_of_a_flat_job_stands_apart() {
        let mib_min = (1u64 << 20) as f64 / 60.0;
        let found = rank_outliers(&job(512, &[("137", 80.0 * mib_min)]));
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].message,
            "slurm 81234: rank 137 on node-17 GPU 3: live +80.0 MiB/min, the other 511 flat"
        );
        assert_eq!(found[0].evidence.processes, 512);
        assert!(found[0].advice.contains("ssh -t node-17 strata"));
    }

    #[test]
    fn a_job_that_climbs_as_a_whole_has_no_outlier() {
        let r = 1e6;
        // Half the ranks climb: the job climbs, no rank stands apart.
        let many: Vec<(&str, f64)> = (0..4).map(|_| ("1", r)).collect();
        assert!(rank_outliers(&job(8, &many)).is_empty());
        // One in ten of a big job may.
        let some: Vec<(&str, f64)> = (0..51).map(|_| ("1", r)).collect();
        assert_eq!(rank_outliers(&job(512, &some)).len(), 51);
        let more: Vec<(&str, f64)> = (0..52).map(|_| ("1", r)).collect();
        assert!(rank_outliers(&job(512, &more)).is_empty());
        // Two ranks: nothing to stand apart from.
        assert!(rank_outliers(&job(2, &[("0", r)])).is_empty());
        // Nothing climbs.
        assert!(rank_outliers(&job(64, &[])).is_empty());
    }

    #[test]
    fn a_spread_is_least_median_and_most() {
        let s = Spread::of(&mut [5.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.least, s.median, s.most, s.known), (1.0, 2.5, 5.0, 4));
        assert_eq!(Spread::of(&mut []), None);
    }

    #[test]
    fn urgency_puts_down_nodes_then_critical_then_the_soonest_oom_first() {
        let node = |state| Node {
            name: "n".into(),
            instance: "n:9400".into(),
            state,
            why: None,
            age_secs: Some(1.0),
            version: None,
            devices: Vec::new(),
            device_count: None,
            findings_exported: true,
        };
        let device = |critical: u64, eta: Option<f64>, climbs: u64| Device {
            gpu: "0".into(),
            uuid: "GPU-0".into(),
            name: None,
            mig: false,
            total: Some(100),
            layers: [("live".to_string(), 50u64), ("free".to_string(), 50)].into(),
            findings: [
                ("oom_forecast", "critical", critical),
                ("climb", "warning", climbs),
            ]
            .iter()
            .filter(|f| f.2 > 0)
            .map(|(k, s, c)| DeviceFinding {
                kind: k.to_string(),
                severity: s.to_string(),
                count: *c,
            })
            .collect(),
            oom_eta_secs: eta,
            climb_bytes_per_sec: None,
            owners: Vec::new(),
        };
        let up = node(NodeState::Up);
        let mut rows = [
            Urgency::of(&up, Some(&device(0, None, 1))),
            Urgency::of(&up, Some(&device(1, Some(600.0), 1))),
            Urgency::of(&node(NodeState::Down), None),
            Urgency::of(&up, Some(&device(1, Some(60.0), 1))),
            Urgency::of(&up, Some(&device(0, None, 0))),
        ];
        rows.sort_by(Urgency::cmp_desc);
        assert!(rows[0].down);
        assert_eq!((rows[1].critical, rows[1].oom), (1, -60.0));
        assert_eq!((rows[2].critical, rows[2].oom), (1, -600.0));
        assert_eq!(rows[3].climbs, 1);
        assert_eq!(rows[4].climbs, 0);
        assert_eq!(device(0, None, 0).used(), Some(50));
    }
}

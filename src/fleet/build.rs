//! The fleet from `strata serve`'s series, whichever source read them: nodes by `instance`,
//! their devices, the jobs whose processes they list, and the fleet's findings.

use super::model::{
    rank_outliers, Device, DeviceFinding, Fleet, Job, Layers, Node, NodeState, Rank, Spread,
    STALE_INTERVALS,
};
use super::Series;
use crate::layers::Layer;
use std::collections::{BTreeMap, BTreeSet};

/// A target as its source saw it: its address, whether it answered, and, where it did not,
/// why.
#[derive(Debug, Clone)]
pub struct Target {
    pub instance: String,
    pub up: bool,
    pub why: Option<String>,
    /// Seconds between the sample's scrape and the read (Prometheus: now minus the scrape's
    /// timestamp; an endpoint read directly: 0).
    pub since_scrape: f64,
}

/// The figures of a job's spread: the layers each sums, that must be known, and those
/// added where known. Reserved is the allocator's pool as `strata serve` exports it
/// (`strata_process_reserved_bytes`): where the allocator reports no splits the fragmented
/// layer is absent and cached holds it.
const SPREAD: [(&str, &[Layer], &[Layer]); 3] = [
    (Layer::Live.name(), &[Layer::Live], &[]),
    (
        "reserved",
        &[Layer::Live, Layer::Cached],
        &[Layer::Fragmented],
    ),
    (Layer::OutsidePool.name(), &[Layer::OutsidePool], &[]),
];

pub struct Built {
    pub nodes: Vec<Node>,
    pub jobs: Vec<Job>,
}

fn label<'a>(s: &'a Series, key: &str) -> &'a str {
    s.labels.get(key).map_or("", String::as_str)
}

fn bytes(value: f64) -> Option<u64> {
    (value.is_finite() && value >= 0.0).then_some(value as u64)
}

/// Builds the fleet's nodes and jobs. `scrape_interval`: how often the source reads each
/// target (Prometheus's scrape interval, or the refresh of endpoints read directly).
pub fn build(targets: &[Target], series: &[Series], scrape_interval: f64) -> Built {
    let mut by_instance: BTreeMap<&str, Vec<&Series>> = BTreeMap::new();
    for s in series {
        by_instance.entry(label(s, "instance")).or_default().push(s);
    }
    let mut nodes = Vec::new();
    let mut processes: Vec<Process> = Vec::new();
    for target in targets {
        let own = by_instance
            .get(target.instance.as_str())
            .map_or(&[][..], Vec::as_slice);
        let (node, mut procs) = node(target, own, scrape_interval);
        if node.state == NodeState::Up {
            processes.append(&mut procs);
        }
        nodes.push(node);
    }
    // Two targets that report one host name: both kept, each named by its address too.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for n in &nodes {
        *seen.entry(n.name.clone()).or_default() += 1;
    }
    for n in &mut nodes {
        if seen[&n.name] > 1 && n.name != n.instance {
            n.name = format!("{} ({})", n.name, n.instance);
        }
    }
    let names: BTreeMap<String, String> = nodes
        .iter()
        .map(|n| (n.instance.clone(), n.name.clone()))
        .collect();
    let jobs = jobs(&processes, &names);
    Built { nodes, jobs }
}

/// The jobs of the processes in `series` on the nodes `up`, joined as a whole read joins
/// them (a process of any other node is left out); a climbing rank is named by its node's
/// address. What a windowed read joins itself of a job with a process on a stale node.
pub fn jobs_on(series: &[Series], up: &BTreeSet<String>) -> Vec<Job> {
    let mut by_instance: BTreeMap<&str, Vec<&Series>> = BTreeMap::new();
    for s in series {
        let instance = label(s, "instance");
        if up.contains(instance) {
            by_instance.entry(instance).or_default().push(s);
        }
    }
    let processes: Vec<Process> = by_instance
        .into_iter()
        .flat_map(|(instance, own)| processes(instance, &own))
        .collect();
    jobs(&processes, &BTreeMap::new())
}

/// A process of a node, as its series give it.
struct Process {
    instance: String,
    gpu: String,
    pid: String,
    job: Option<String>,
    rank: Option<String>,
    world_size: Option<u64>,
    layers: Layers,
    used: Option<u64>,
    live_climb: Option<f64>,
}

fn node(target: &Target, own: &[&Series], scrape_interval: f64) -> (Node, Vec<Process>) {
    let find = |name: &str| own.iter().find(|s| s.name == name);
    let info = find("strata_node_info");
    // A node down now is named by what it last said (Prometheus keeps it).
    let last = info.or_else(|| find("strata_node_info_last"));
    let name = last
        .map(|s| crate::text::clean(label(s, "host")).into_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| target.instance.clone());
    let version = last
        .map(|s| crate::text::clean(label(s, "version")).into_owned())
        .filter(|v| !v.is_empty());
    let age = find("strata_sample_age_seconds")
        .map(|s| s.value)
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(|a| a + target.since_scrape.max(0.0));
    let interval = find("strata_sample_interval_seconds")
        .map(|s| s.value)
        .filter(|v| v.is_finite() && *v > 0.0)
        .unwrap_or(1.0);
    let limit = STALE_INTERVALS * interval.max(scrape_interval);
    let (state, why) = if !target.up {
        (
            NodeState::Down,
            Some(target.why.clone().unwrap_or_else(|| "target down".into())),
        )
    } else if info.is_none() {
        (
            NodeState::Down,
            Some("answers, but with no strata metrics (not strata serve, or a version that names them otherwise)".into()),
        )
    } else {
        match age {
            None => (
                NodeState::Stale,
                Some("its sample's age is not known".into()),
            ),
            Some(a) if a > limit => (
                NodeState::Stale,
                Some(format!(
                    "its sample is {} old (more than {})",
                    crate::units::duration(a),
                    crate::units::duration(limit)
                )),
            ),
            Some(_) => (NodeState::Up, None),
        }
    };
    let mut node = Node {
        name,
        instance: target.instance.clone(),
        state,
        why,
        age_secs: age,
        version,
        devices: Vec::new(),
        device_count: None,
        findings_exported: info.is_some_and(|s| {
            label(s, "exports")
                .split(',')
                .any(|e| e.trim() == "device_findings")
        }),
    };
    if state != NodeState::Up {
        return (node, Vec::new());
    }
    node.devices = devices(own);
    (node, processes(&target.instance, own))
}

fn devices(own: &[&Series]) -> Vec<Device> {
    let mut devices: BTreeMap<String, Device> = BTreeMap::new();
    let mut device = |s: &Series, mig: bool| {
        let uuid = label(s, "uuid").to_string();
        devices.entry(uuid.clone()).or_insert_with(|| Device {
            gpu: crate::text::clean(label(s, "gpu")).into_owned(),
            uuid: crate::text::clean(&uuid).into_owned(),
            name: Some(if mig {
                label(s, "profile")
            } else {
                label(s, "name")
            })
            .filter(|n| !n.is_empty())
            .map(|n| crate::text::clean(n).into_owned()),
            mig,
            total: None,
            layers: Layers::new(),
            findings: Vec::new(),
            oom_eta_secs: None,
            climb_bytes_per_sec: None,
            owners: Vec::new(),
        });
        uuid
    };
    let mut keys = Vec::new();
    for s in own {
        let mig = match s.name.as_str() {
            "strata_gpu_memory_total_bytes" | "strata_gpu_layer_bytes" => false,
            "strata_mig_memory_total_bytes" | "strata_mig_layer_bytes" => true,
            _ => continue,
        };
        keys.push((device(s, mig), *s));
    }
    for (uuid, s) in keys {
        let Some(d) = devices.get_mut(&uuid) else {
            continue;
        };
        if s.name.ends_with("_memory_total_bytes") {
            d.total = bytes(s.value);
        } else if let Some(b) = bytes(s.value) {
            d.layers
                .insert(crate::text::clean(label(s, "layer")).into_owned(), b);
        }
    }
    for s in own {
        let Some(d) = devices.get_mut(label(s, "uuid")) else {
            continue;
        };
        match s.name.as_str() {
            "strata_device_findings" if s.value >= 1.0 => d.findings.push(DeviceFinding {
                kind: crate::text::clean(label(s, "kind")).into_owned(),
                severity: crate::text::clean(label(s, "severity")).into_owned(),
                count: s.value as u64,
            }),
            "strata_oom_forecast_seconds" if s.value.is_finite() => {
                d.oom_eta_secs = Some(d.oom_eta_secs.map_or(s.value, |e: f64| e.min(s.value)));
            }
            "strata_climb_rate_bytes_per_second" if s.value.is_finite() => {
                d.climb_bytes_per_sec = Some(
                    d.climb_bytes_per_sec
                        .map_or(s.value, |e: f64| e.max(s.value)),
                );
            }
            "strata_process_used_bytes" => {
                let owners = job_key(s).into_iter().chain(
                    ["pod", "namespace", "user"]
                        .iter()
                        .map(|k| label(s, k))
                        .filter(|v| !v.is_empty())
                        .map(|v| crate::text::clean(v).into_owned()),
                );
                for o in owners {
                    if !d.owners.contains(&o) {
                        d.owners.push(o);
                    }
                }
            }
            _ => {}
        }
    }
    let mut out: Vec<Device> = devices.into_values().collect();
    // By the GPU's index, a GPU before its MIG instances, then by the instance's UUID.
    out.sort_by(|a, b| {
        let index = |d: &Device| d.gpu.parse::<u64>().unwrap_or(u64::MAX);
        (index(a), a.mig, &a.uuid).cmp(&(index(b), b.mig, &b.uuid))
    });
    out
}

/// The job a process belongs to across nodes ([`JOB_KINDS`]).
fn job_key(s: &Series) -> Option<String> {
    job_key_of(|k| label(s, k))
}

/// What names a job across nodes, a kind of name: the word its key begins with, the labels
/// whose values make the rest, and the matchers that pick the processes it names (a process
/// named by an earlier kind is not named by a later one).
pub struct JobKind {
    pub word: &'static str,
    pub labels: &'static [&'static str],
    pub picks: &'static str,
}

/// A process's job is its Slurm job; else its run (torchrun's run id or the rendezvous
/// address, which the pods of one Kubernetes job share); else its pod, a job of one pod.
pub const JOB_KINDS: [JobKind; 3] = [
    JobKind {
        word: "slurm",
        labels: &["slurm_job"],
        picks: "slurm_job!=\"\"",
    },
    JobKind {
        word: "run",
        labels: &["run"],
        picks: "slurm_job=\"\",run!=\"\"",
    },
    JobKind {
        word: "pod",
        labels: &["namespace", "pod"],
        picks: "slurm_job=\"\",run=\"\",pod!=\"\"",
    },
];

/// Every label of [`JOB_KINDS`], for a PromQL `by` or `on`.
pub const JOB_LABELS: &str = "slurm_job, run, namespace, pod";

/// A job's key from a process's labels (`label` gives each, empty where absent): `slurm
/// 81234`, `run llm-a`, `pod train/llama-7b-0` (`pod llama-7b-0` without a namespace).
pub fn job_key_of<'a>(label: impl Fn(&str) -> &'a str) -> Option<String> {
    let clean = |v: &str| crate::text::clean(v).into_owned();
    let (slurm, run, pod) = (label("slurm_job"), label("run"), label("pod"));
    if !slurm.is_empty() {
        Some(format!("slurm {}", clean(slurm)))
    } else if !run.is_empty() {
        Some(format!("run {}", clean(run)))
    } else if !pod.is_empty() {
        Some(match label("namespace") {
            "" => format!("pod {}", clean(pod)),
            namespace => format!("pod {}/{}", clean(namespace), clean(pod)),
        })
    } else {
        None
    }
}

fn processes(instance: &str, own: &[&Series]) -> Vec<Process> {
    let mut procs: BTreeMap<(String, String), Process> = BTreeMap::new();
    for s in own {
        let layer = match s.name.as_str() {
            "strata_process_used_bytes" => None,
            "strata_process_layer_bytes" => Some(label(s, "layer")),
            _ => continue,
        };
        let pid = label(s, "pid");
        if pid.is_empty() || pid == "other" {
            continue;
        }
        let key = (label(s, "uuid").to_string(), pid.to_string());
        let p = procs.entry(key).or_insert_with(|| Process {
            instance: instance.to_string(),
            gpu: crate::text::clean(label(s, "gpu")).into_owned(),
            pid: crate::text::clean(pid).into_owned(),
            job: job_key(s),
            rank: Some(label(s, "rank"))
                .filter(|r| !r.is_empty())
                .map(|r| crate::text::clean(r).into_owned()),
            world_size: label(s, "world_size").parse().ok(),
            layers: Layers::new(),
            used: None,
            live_climb: None,
        });
        match layer {
            None => p.used = bytes(s.value),
            Some(layer) => {
                if let Some(b) = bytes(s.value) {
                    p.layers.insert(layer.to_string(), b);
                }
            }
        }
    }
    for s in own {
        if s.name == "strata_climb_rate_bytes_per_second" && label(s, "cause") == Layer::Live.name()
        {
            let key = (label(s, "uuid").to_string(), label(s, "pid").to_string());
            if let Some(p) = procs.get_mut(&key) {
                if s.value.is_finite() && s.value > 0.0 {
                    p.live_climb = Some(p.live_climb.map_or(s.value, |e| e.max(s.value)));
                }
            }
        }
    }
    procs.into_values().collect()
}

fn jobs(processes: &[Process], names: &BTreeMap<String, String>) -> Vec<Job> {
    let mut by_job: BTreeMap<&str, Vec<&Process>> = BTreeMap::new();
    for p in processes {
        if let Some(job) = &p.job {
            by_job.entry(job).or_default().push(p);
        }
    }
    let mut jobs: Vec<Job> = by_job
        .into_iter()
        .map(|(key, procs)| {
            let node_set: BTreeSet<&str> = procs.iter().map(|p| p.instance.as_str()).collect();
            let mut spread = BTreeMap::new();
            for (figure, layers, where_known) in SPREAD {
                let mut values: Vec<f64> = procs
                    .iter()
                    .filter_map(|p| {
                        // Summed as the spread keeps it: a target's figures may be any
                        // u64, and two near its top would overflow one.
                        let parts: Option<f64> = layers
                            .iter()
                            .map(|l| p.layers.get(l.name()).map(|&b| b as f64))
                            .sum();
                        let more = where_known.iter().filter_map(|l| p.layers.get(l.name()));
                        parts.map(|v| v + more.map(|&b| b as f64).sum::<f64>())
                    })
                    .collect();
                if let Some(s) = Spread::of(&mut values) {
                    spread.insert(figure.to_string(), s);
                }
            }
            let mut used: Vec<f64> = procs
                .iter()
                .filter_map(|p| p.used)
                .map(|u| u as f64)
                .collect();
            if let Some(s) = Spread::of(&mut used) {
                spread.insert("used".to_string(), s);
            }
            let sizes: BTreeSet<u64> = procs.iter().filter_map(|p| p.world_size).collect();
            let climbing = procs
                .iter()
                .filter(|p| p.live_climb.is_some())
                .map(|p| Rank {
                    node: names
                        .get(&p.instance)
                        .cloned()
                        .unwrap_or_else(|| p.instance.clone()),
                    gpu: p.gpu.clone(),
                    pid: p.pid.clone(),
                    rank: p.rank.clone(),
                    live_bytes_per_sec: p.live_climb,
                })
                .collect();
            Job {
                key: key.to_string(),
                processes: procs.len() as u64,
                nodes: node_set.len() as u64,
                world_size: (sizes.len() == 1)
                    .then(|| sizes.into_iter().next())
                    .flatten(),
                spread,
                climbing,
            }
        })
        .collect();
    sort_jobs(&mut jobs);
    jobs
}

/// Jobs a source aggregated itself, their climbing ranks named by their nodes' names (the
/// source knows their addresses; `more` names nodes a windowed read did not list), in the
/// order [`build`] gives.
pub fn named(mut jobs: Vec<Job>, nodes: &[Node], more: &BTreeMap<String, String>) -> Vec<Job> {
    let mut names: BTreeMap<&str, &str> =
        more.iter().map(|(i, n)| (i.as_str(), n.as_str())).collect();
    names.extend(nodes.iter().map(|n| (n.instance.as_str(), n.name.as_str())));
    for job in &mut jobs {
        for rank in &mut job.climbing {
            if let Some(name) = names.get(rank.node.as_str()) {
                rank.node = name.to_string();
            }
        }
    }
    sort_jobs(&mut jobs);
    jobs
}

fn sort_jobs(jobs: &mut [Job]) {
    jobs.sort_by(|a, b| {
        b.processes
            .cmp(&a.processes)
            .then_with(|| a.key.cmp(&b.key))
    });
}

/// The fleet: nodes, jobs, and the findings only the fleet can make.
pub fn fleet(source: String, time: f64, built: Built, problems: Vec<String>) -> Fleet {
    let findings = built.jobs.iter().flat_map(rank_outliers).collect();
    Fleet {
        schema: "strata.fleet/1",
        source,
        time,
        nodes: built.nodes,
        jobs: built.jobs,
        findings,
        problems,
        part: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node with one GPU and one rank of job 7, climbing or not.
    fn node_series(instance: &str, host: &str, rank: &str, climb: Option<f64>) -> Vec<Series> {
        let i = ("instance", instance);
        let p = [
            i,
            ("gpu", "0"),
            ("uuid", "GPU-a"),
            ("pid", "100"),
            ("slurm_job", "7"),
            ("run", ""),
            ("rank", rank),
            ("world_size", "4"),
        ];
        let mut out = vec![
            Series::of(
                "strata_node_info",
                &[i, ("host", host), ("version", "0.1.0")],
                1.0,
            ),
            Series::of("strata_sample_age_seconds", &[i], 0.5),
            Series::of("strata_sample_interval_seconds", &[i], 1.0),
            Series::of(
                "strata_gpu_memory_total_bytes",
                &[i, ("gpu", "0"), ("uuid", "GPU-a")],
                100.0,
            ),
            Series::of(
                "strata_gpu_layer_bytes",
                &[i, ("gpu", "0"), ("uuid", "GPU-a"), ("layer", "live")],
                60.0,
            ),
            Series::of(
                "strata_gpu_layer_bytes",
                &[i, ("gpu", "0"), ("uuid", "GPU-a"), ("layer", "free")],
                40.0,
            ),
            Series::of("strata_process_used_bytes", &p, 60.0),
            Series::of(
                "strata_process_layer_bytes",
                &[&p[..], &[("layer", "live")]].concat(),
                50.0,
            ),
        ];
        if let Some(rate) = climb {
            out.push(Series::of(
                "strata_climb_rate_bytes_per_second",
                &[
                    i,
                    ("gpu", "0"),
                    ("uuid", "GPU-a"),
                    ("pid", "100"),
                    ("series", "allocated"),
                    ("cause", "live"),
                ],
                rate,
            ));
        }
        out
    }

    fn up(instance: &str) -> Target {
        Target {
            instance: instance.into(),
            up: true,
            why: None,
            since_scrape: 0.0,
        }
    }

    /// A node whose strata exports no device findings (an older one: no `exports` on its
    /// info) has findings unknown, not none; one that says so has them known.
    #[test]
    fn a_node_that_exports_no_findings_is_told_from_one_with_none() {
        let t = |i: &str| Target {
            instance: i.into(),
            up: true,
            why: None,
            since_scrape: 0.0,
        };
        let old = node_series("a:9842", "node-a", "0", None);
        let mut new = node_series("b:9842", "node-b", "1", None);
        new[0]
            .labels
            .insert("exports".into(), "other,device_findings".into());
        let mut s = old;
        s.extend(new);
        let built = build(&[t("a:9842"), t("b:9842")], &s, 15.0);
        let exported: Vec<(&str, bool)> = built
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.findings_exported))
            .collect();
        assert_eq!(exported, [("node-a", false), ("node-b", true)]);
    }

    /// A device's processes' owners are what the filter matches it by, where its processes'
    /// series were read (endpoints; Prometheus without the rules).
    #[test]
    fn a_device_is_filtered_by_its_processes_owners() {
        let t = Target {
            instance: "a:9842".into(),
            up: true,
            why: None,
            since_scrape: 0.0,
        };
        let mut s = node_series("a:9842", "node-a", "3", None);
        s.push(Series::of(
            "strata_process_used_bytes",
            &[
                ("instance", "a:9842"),
                ("gpu", "0"),
                ("uuid", "GPU-a"),
                ("pid", "200"),
                ("pod", "trainer-0"),
                ("namespace", "ml"),
                ("user", "alice"),
            ],
            10.0,
        ));
        let built = build(&[t], &s, 15.0);
        let node = &built.nodes[0];
        let d = &node.devices[0];
        // The second process names no Slurm job or run: its job is its pod.
        assert_eq!(
            d.owners,
            ["slurm 7", "pod ml/trainer-0", "trainer-0", "ml", "alice"]
        );
        for (filter, matches) in [
            ("alice", true),
            ("ml/trainer", true),
            ("slurm 7", true),
            ("rm 7", true),
            ("trainer", true),
            ("bob", false),
        ] {
            assert_eq!(
                super::super::model::row_matches(node, Some(d), filter),
                matches,
                "{filter}"
            );
        }
    }

    #[test]
    fn a_job_across_nodes_and_its_one_climbing_rank() {
        let mut all = Vec::new();
        let mut targets = Vec::new();
        for n in 0..4 {
            let instance = format!("10.0.0.{n}:9842");
            let climb = (n == 2).then_some(1e6);
            all.extend(node_series(
                &instance,
                &format!("node-{n}"),
                &n.to_string(),
                climb,
            ));
            targets.push(up(&instance));
        }
        let built = build(&targets, &all, 15.0);
        assert_eq!(built.nodes.len(), 4);
        assert_eq!(built.nodes[0].devices[0].used(), Some(60));
        let job = &built.jobs[0];
        assert_eq!(
            (job.key.as_str(), job.processes, job.nodes),
            ("slurm 7", 4, 4)
        );
        assert_eq!(job.world_size, Some(4));
        assert_eq!(job.spread["live"].median, 50.0);
        let f = fleet("test".into(), 0.0, built, Vec::new());
        assert_eq!(f.findings.len(), 1);
        assert!(
            f.findings[0]
                .message
                .starts_with("slurm 7: rank 2 on node-2 GPU 0: live +"),
            "{}",
            f.findings[0].message
        );
        assert!(f.findings[0].message.ends_with("the other 3 flat"));
    }

    /// A rank whose allocator reports no splits has no fragmented layer, and its cached
    /// holds them: its pool is live + cached, as `strata serve` exports it, not unknown.
    #[test]
    fn a_rank_without_splits_has_its_pool_in_the_jobs_reserved_spread() {
        let mut all = Vec::new();
        let mut targets = Vec::new();
        for (n, layers) in [
            [("cached", 30.0), ("fragmented", 10.0)].as_slice(),
            &[("cached", 50.0)],
            &[("fragmented", 10.0)],
        ]
        .into_iter()
        .enumerate()
        {
            let instance = format!("10.0.0.{n}:9842");
            let mut node = node_series(&instance, &format!("node-{n}"), &n.to_string(), None);
            let process = node
                .iter()
                .find(|s| s.name == "strata_process_layer_bytes")
                .map(|s| s.labels.clone())
                .unwrap_or_default();
            for (layer, bytes) in layers {
                let mut labels = process.clone();
                labels.insert("layer".into(), layer.to_string());
                node.push(Series {
                    name: "strata_process_layer_bytes".into(),
                    labels,
                    value: *bytes,
                });
            }
            all.extend(node);
            targets.push(up(&instance));
        }
        let built = build(&targets, &all, 15.0);
        let reserved = built.jobs[0].spread["reserved"];
        // Live 50 on each; the third rank's cached is unknown, so its pool is.
        assert_eq!(reserved.known, 2);
        assert_eq!((reserved.least, reserved.most), (90.0, 100.0));
    }

    /// The jobs a windowed read joins itself (a process on a stale node): those of the nodes
    /// up only, as `build` joins them where that node is stale; a climbing rank named by its
    /// node's address (the read names it after).
    #[test]
    fn the_jobs_joined_of_some_nodes_leave_the_others_out() {
        let mut all = Vec::new();
        for (n, climb) in [(0, None), (1, Some(2e6)), (2, Some(9e6))] {
            let instance = format!("10.0.0.{n}:9842");
            all.extend(node_series(
                &instance,
                &format!("node-{n}"),
                &n.to_string(),
                climb,
            ));
        }
        let nodes_up: BTreeSet<String> =
            ["10.0.0.0:9842", "10.0.0.1:9842"].map(String::from).into();
        let jobs = jobs_on(&all, &nodes_up);
        assert_eq!(jobs.len(), 1);
        let job = &jobs[0];
        assert_eq!(
            (job.key.as_str(), job.processes, job.nodes),
            ("slurm 7", 2, 2)
        );
        let ranks: Vec<(&str, Option<&str>)> = job
            .climbing
            .iter()
            .map(|r| (r.node.as_str(), r.rank.as_deref()))
            .collect();
        assert_eq!(ranks, [("10.0.0.1:9842", Some("1"))]);
        // The same as build's join with the third node stale.
        let mut targets: Vec<Target> = ["10.0.0.0:9842", "10.0.0.1:9842"]
            .into_iter()
            .map(up)
            .collect();
        targets.push(up("10.0.0.2:9842"));
        let stale: Vec<Series> = all
            .iter()
            .map(|s| {
                let mut s = s.clone();
                if s.name == "strata_sample_age_seconds" && label(&s, "instance") == "10.0.0.2:9842"
                {
                    s.value = 1e4;
                }
                s
            })
            .collect();
        let built = build(&targets, &stale, 15.0);
        assert_eq!(built.nodes[2].state, NodeState::Stale);
        assert_eq!(
            (
                built.jobs[0].processes,
                built.jobs[0].nodes,
                &built.jobs[0].spread
            ),
            (job.processes, job.nodes, &job.spread)
        );
    }

    /// Figures from Prometheus are whatever a target exported: two layers near u64's top
    /// make a pool past it, which is summed as the spread keeps it (f64), not overflowed.
    #[test]
    fn a_pool_past_u64_is_summed_not_overflowed() {
        let mut all = node_series("a:1", "node-a", "0", None);
        let process = all
            .iter()
            .find(|s| s.name == "strata_process_layer_bytes")
            .map(|s| s.labels.clone())
            .unwrap_or_default();
        for layer in ["cached", "fragmented"] {
            let mut labels = process.clone();
            labels.insert("layer".into(), layer.to_string());
            all.push(Series {
                name: "strata_process_layer_bytes".into(),
                labels,
                value: 1e19,
            });
        }
        let built = build(&[up("a:1")], &all, 15.0);
        let reserved = built.jobs[0].spread["reserved"];
        assert_eq!(reserved.known, 1);
        assert!(reserved.most > 1.8e19, "{}", reserved.most);
    }

    /// A device's used memory and its findings' counts from figures near u64's top: held at
    /// its top, not overflowed, and the device still ranked.
    #[test]
    fn a_device_past_u64_is_held_at_its_top_not_overflowed() {
        let mut all = node_series("a:1", "node-a", "0", None);
        let i = ("instance", "a:1");
        let dev = [i, ("gpu", "0"), ("uuid", "GPU-a")];
        for layer in ["cached", "fragmented"] {
            all.push(Series::of(
                "strata_gpu_layer_bytes",
                &[&dev[..], &[("layer", layer)]].concat(),
                1e19,
            ));
        }
        for kind in ["zombie_context", "oom_forecast"] {
            all.push(Series::of(
                "strata_device_findings",
                &[&dev[..], &[("kind", kind), ("severity", "critical")]].concat(),
                1e19,
            ));
        }
        let built = build(&[up("a:1")], &all, 15.0);
        let node = &built.nodes[0];
        let device = &node.devices[0];
        assert_eq!(device.used(), Some(u64::MAX));
        let urgency = super::super::model::Urgency::of(node, Some(device));
        assert_eq!(urgency.critical, u64::MAX);
    }

    #[test]
    fn a_node_down_or_stale_shows_no_figures() {
        let mut all = node_series("a:1", "node-a", "0", None);
        all.extend(node_series("b:1", "node-b", "1", None));
        // c answers with its last sample three scrape intervals old.
        let mut old = node_series("c:1", "node-c", "2", None);
        old[1].value = 50.0;
        all.extend(old);
        let down = Target {
            instance: "b:1".into(),
            up: false,
            why: Some("connection refused".into()),
            since_scrape: 0.0,
        };
        let built = build(&[up("a:1"), down, up("c:1"), up("d:1")], &all, 15.0);
        let states: Vec<_> = built
            .nodes
            .iter()
            .map(|n| (n.state, n.devices.len()))
            .collect();
        assert_eq!(
            states,
            [
                (NodeState::Up, 1),
                (NodeState::Down, 0),
                (NodeState::Stale, 0),
                (NodeState::Down, 0)
            ]
        );
        assert_eq!(built.nodes[1].why.as_deref(), Some("connection refused"));
        assert!(built.nodes[3]
            .why
            .as_deref()
            .unwrap()
            .contains("no strata metrics"));
        // Only the live node's rank counts in its job.
        assert_eq!(built.jobs[0].processes, 1);
    }

    #[test]
    fn two_targets_with_one_host_name_are_told_apart_and_strings_are_cleaned() {
        let mut all = node_series("a:1", "same", "0", None);
        all.extend(node_series("b:1", "same", "1", None));
        all.extend(node_series("c:1", "evil\u{1b}[2J", "2", None));
        let built = build(&[up("a:1"), up("b:1"), up("c:1")], &all, 15.0);
        assert_eq!(built.nodes[0].name, "same (a:1)");
        assert_eq!(built.nodes[1].name, "same (b:1)");
        assert!(
            !built.nodes[2].name.contains('\u{1b}'),
            "{:?}",
            built.nodes[2].name
        );
    }
}

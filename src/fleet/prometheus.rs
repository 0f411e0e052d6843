//! `strata fleet --prometheus URL`: the fleet from Prometheus's HTTP API, a few instant
//! queries a refresh, each asking only for strata's series the view uses. Prometheus
//! scrapes and stores; the fleet only reads.

use super::build::{job_key_of, Target, JOB_KINDS, JOB_LABELS};
use super::http::Client;
use super::model::{Job, NodeState, Rank, Sort, Spread, Window};
use super::window::{self, Pick, Recorded, NODE_SERIES};
use super::{Read, Series};
use crate::layers::Layer;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Without the recording rules: every series of the processes that name a job, and every
/// live climb, whose device a window may not read: a job's climbing ranks.
fn process_series() -> String {
    let mut parts: Vec<String> = JOB_KINDS
        .iter()
        .map(|kind| {
            format!(
                "{{__name__=~\"strata_process_used_bytes|strata_process_layer_bytes\",{}}}",
                kind.picks
            )
        })
        .collect();
    parts.push("strata_climb_rate_bytes_per_second{cause=\"live\"}".into());
    parts.join(" or ")
}

/// The queries of one refresh that do not depend on another's answer, by what each is for:
/// every node's own series (one to five a node; from the rules Prometheus has), and, for a
/// windowed or filtered read, each node's devices that match the filter (`counts`). A node
/// seen in the last hour and not now is down, never dropped: its target's `up` says why.
/// The device rows and the jobs are asked after them.
pub fn queries(window: &Window, recorded: &Recorded) -> Vec<(&'static str, String)> {
    let seen = recorded.seen();
    let mut out = vec![
        ("nodes", seen.clone()),
        ("up", format!("up and on(instance) {seen}")),
        ("series", format!("{{__name__=~\"{NODE_SERIES}\"}}")),
        (
            "scraped",
            "timestamp(strata_sample_age_seconds)".to_string(),
        ),
    ];
    if window.rows.is_some() || !window.filter.is_empty() {
        out.push(("counts", window::counts(&window.filter, recorded)));
    }
    out
}

/// The recording rules that answer [`job_rules`], where Prometheus loads them:
/// `assets/prometheus/strata-fleet-rules.yml`.
pub const RECORDED: [(&str, &str); 2] = [
    ("jobs", "strata_job:figures:spread"),
    ("climbing", "strata_job:live_climb_bytes_per_second:max"),
];

/// A figure's per-process series, from the matchers that pick a job's processes.
type Figure<'a> = dyn Fn(&str) -> String + 'a;

/// A kind of job's aggregation, from its key's labels and the matchers of its processes.
type Part<'a> = dyn Fn(&str, &str) -> String + 'a;

/// One recording rule: the series it records ([`RECORDED`]), the labels it sets on each
/// (`figure`, `stat`) and its expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub record: &'static str,
    pub labels: Vec<(&'static str, &'static str)>,
    pub expr: String,
}

/// The rules that record the jobs: each job's spread (`jobs`: a few series a job, labelled
/// `figure` and `stat`, keyed by the labels of its [`super::build::JobKind`]), a rule a
/// figure and statistic, whose `labels` name them; and the climbing processes joined with
/// their job's labels (`climbing`: one series a climb). A rule's three parts, one a kind
/// of job, answer disjoint keys. Rules of one group are evaluated at one instant, so the
/// spread's series are as simultaneous as one expression's; as separate rules they cost
/// Prometheus the selections and aggregations only, without relabelling every job's
/// answer and joining them (a quarter less at 1000 nodes). Asked at each refresh they
/// would cost Prometheus three times the per-process query (the processes' series are read
/// once for each figure and statistic): they pay as rules, evaluated once for every viewer.
pub fn job_rules() -> Vec<Rule> {
    let used = |job: &str| format!("strata_process_used_bytes{{pid!=\"other\",{job}}}");
    let layer = |job: &str, l: Layer| {
        format!(
            "strata_process_layer_bytes{{pid!=\"other\",layer=\"{}\",{job}}}",
            l.name()
        )
    };
    // The allocator's pool, as `strata serve` exports it: one series a fed process, where
    // matching its three layers would read three (and leave out an allocator that reports
    // no splits, whose cached holds them).
    let reserved = |job: &str| format!("strata_process_reserved_bytes{{pid!=\"other\",{job}}}");
    let figures: [(&'static str, &Figure); 4] = [
        (Layer::Live.name(), &|job| layer(job, Layer::Live)),
        ("reserved", &reserved),
        (Layer::OutsidePool.name(), &|job| {
            layer(job, Layer::OutsidePool)
        }),
        ("used", &used),
    ];
    let spread = RECORDED[0].1;
    // One part a kind of job, joined: `part(key, picks)` is that kind's aggregation.
    let of_kinds = |part: &Part| {
        JOB_KINDS
            .iter()
            .map(|kind| part(&kind.labels.join(", "), kind.picks))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    let mut rules = Vec::new();
    for (figure, expr) in &figures {
        let stats: [(&'static str, &Part); 4] = [
            ("known", &|key, job| {
                format!("count by ({key}) ({})", expr(job))
            }),
            ("least", &|key, job| {
                format!("min by ({key}) ({})", expr(job))
            }),
            ("median", &|key, job| {
                format!("quantile by ({key}) (0.5, {})", expr(job))
            }),
            ("most", &|key, job| {
                format!("max by ({key}) ({})", expr(job))
            }),
        ];
        for (stat, aggregate) in stats {
            rules.push(Rule {
                record: spread,
                labels: vec![("figure", figure), ("stat", stat)],
                expr: of_kinds(aggregate),
            });
        }
    }
    rules.push(Rule {
        record: spread,
        labels: vec![("stat", "processes")],
        expr: of_kinds(&|key, job| format!("count by ({key}, world_size) ({})", used(job))),
    });
    rules.push(Rule {
        record: spread,
        labels: vec![("stat", "nodes")],
        expr: of_kinds(&|key, job| {
            format!(
                "count by ({key}) (count by ({key}, instance) ({}))",
                used(job)
            )
        }),
    });
    rules.push(Rule {
        record: RECORDED[1].1,
        labels: vec![],
        expr: format!("max by (instance, gpu, uuid, pid, {JOB_LABELS}, rank) ((strata_climb_rate_bytes_per_second{{cause=\"live\"}} > 0) + on(instance, uuid, pid) group_left({JOB_LABELS}, rank) (0 * strata_process_used_bytes{{pid!=\"other\"}}))"),
    });
    rules
}

/// The jobs from the answers of [`job_rules`]: each job's processes, nodes, world size and
/// spread by figure, and its climbing ranks named by their node's address.
pub fn jobs_of(spread: &[Series], climbing: &[Series]) -> Vec<Job> {
    let label = |s: &Series, k: &str| s.labels.get(k).cloned().unwrap_or_default();
    let key_of = |s: &Series| job_key_of(|k| s.labels.get(k).map_or("", String::as_str));
    let mut jobs: BTreeMap<String, Job> = BTreeMap::new();
    let mut figures: BTreeMap<(String, String), [Option<f64>; 4]> = BTreeMap::new();
    let mut sizes: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for s in spread {
        let Some(key) = key_of(s) else {
            continue;
        };
        let job = jobs.entry(key.clone()).or_insert_with(|| Job {
            key: key.clone(),
            processes: 0,
            nodes: 0,
            world_size: None,
            spread: BTreeMap::new(),
            climbing: Vec::new(),
        });
        let count = if s.value.is_finite() && s.value >= 0.0 {
            s.value as u64
        } else {
            0
        };
        match label(s, "stat").as_str() {
            "processes" => {
                job.processes += count;
                if let Ok(size) = label(s, "world_size").parse() {
                    sizes.entry(key).or_default().insert(size);
                }
            }
            "nodes" => job.nodes = count,
            stat => {
                let slot = match stat {
                    "known" => 0,
                    "least" => 1,
                    "median" => 2,
                    "most" => 3,
                    _ => continue,
                };
                figures.entry((key, label(s, "figure"))).or_default()[slot] = Some(s.value);
            }
        }
    }
    for ((key, figure), [known, least, median, most]) in figures {
        let (Some(known), Some(least), Some(median), Some(most), Some(job)) =
            (known, least, median, most, jobs.get_mut(&key))
        else {
            continue;
        };
        if known >= 1.0 {
            job.spread.insert(
                crate::text::clean(&figure).into_owned(),
                Spread {
                    least,
                    median,
                    most,
                    known: known as u64,
                },
            );
        }
    }
    for (key, sizes) in sizes {
        if let Some(job) = jobs.get_mut(&key) {
            job.world_size = (sizes.len() == 1)
                .then(|| sizes.into_iter().next())
                .flatten();
        }
    }
    // In the order the client's own join gives: by node, device and pid.
    let mut climbing: Vec<&Series> = climbing.iter().collect();
    climbing.sort_by_key(|s| (label(s, "instance"), label(s, "uuid"), label(s, "pid")));
    for s in climbing {
        let Some(job) = key_of(s).and_then(|key| jobs.get_mut(&key)) else {
            continue;
        };
        let rank = label(s, "rank");
        job.climbing.push(Rank {
            node: label(s, "instance"),
            gpu: crate::text::clean(&label(s, "gpu")).into_owned(),
            pid: crate::text::clean(&label(s, "pid")).into_owned(),
            rank: (!rank.is_empty()).then(|| crate::text::clean(&rank).into_owned()),
            live_bytes_per_sec: (s.value.is_finite() && s.value > 0.0).then_some(s.value),
        });
    }
    jobs.into_values().filter(|j| j.processes > 0).collect()
}

/// The jobs of `picked` (a windowed read's) with a process on a `stale` node, joined by the
/// client from their processes' series on the nodes up, as a whole read joins every job: a
/// stale node's figures are not current, and the recorded spread cannot leave them out.
/// Their keys, and the jobs joined (none for a job whose every process is on a node not
/// up). `None` where no job read has such a process, or where it could not be told: the
/// read's problems then say which query failed, and the recorded spread is read unchanged.
fn rejoin(
    client: &Client,
    base: &str,
    time: f64,
    picked: &[Series],
    stale: &[String],
    not_up: &BTreeSet<String>,
    problems: &mut Vec<String>,
) -> Option<(BTreeSet<String>, Vec<Job>)> {
    let key_of = |s: &Series| job_key_of(|k| s.labels.get(k).map_or("", String::as_str));
    let on_stale = query(
        client,
        base,
        "jobs on stale nodes",
        &window::jobs_on_nodes(stale),
        time,
        problems,
    )
    .map_err(|why| problems.push(why))
    .ok()?;
    let on_stale: BTreeSet<String> = on_stale.iter().filter_map(key_of).collect();
    let keys: BTreeSet<String> = picked
        .iter()
        .filter_map(key_of)
        .filter(|k| on_stale.contains(k))
        .collect();
    if keys.is_empty() {
        return None;
    }
    let affected: Vec<Series> = picked
        .iter()
        .filter(|s| key_of(s).is_some_and(|k| keys.contains(&k)))
        .cloned()
        .collect();
    let mut series = query(
        client,
        base,
        "their processes",
        &window::processes_of_jobs(&affected),
        time,
        problems,
    )
    .map_err(|why| problems.push(why))
    .ok()?;
    let up: BTreeSet<String> = series
        .iter()
        .filter_map(|s| s.labels.get("instance"))
        .filter(|i| !not_up.contains(*i))
        .cloned()
        .collect();
    if !up.is_empty() {
        let nodes: Vec<String> = up.iter().cloned().collect();
        match query(
            client,
            base,
            "their climbs",
            &window::live_climbs_on(&nodes),
            time,
            problems,
        ) {
            Ok(climbs) => series.extend(climbs.into_iter().map(|mut s| {
                s.name = "strata_climb_rate_bytes_per_second".into();
                s
            })),
            Err(why) => {
                problems.push(why);
                return None;
            }
        }
    }
    Some((keys, super::build::jobs_on(&series, &up)))
}

/// The nodes up that the recorded count names not, told apart (`told_apart`).
#[derive(Default)]
struct Late {
    /// Those with devices now, and how many: they came after the rules' evaluation (or
    /// could not be told: then 0, and no row either).
    with_devices: BTreeMap<String, u64>,
    /// How many of them the recorded `seen_1h` holds not: they came since.
    nodes: u64,
}

/// Asks the nodes up that the recorded count names not (`candidates`) for their devices
/// now, by name, and, where `ask_seen`, whether the recorded nodes seen in the hour hold
/// them.
fn told_apart(
    client: &Client,
    base: &str,
    time: f64,
    candidates: &[String],
    ask_seen: bool,
    problems: &mut Vec<String>,
) -> Late {
    let with_devices: BTreeMap<String, u64> = match query(
        client,
        base,
        "devices now",
        &window::devices_of_nodes(candidates),
        time,
        problems,
    ) {
        Ok(v) => v
            .iter()
            .filter(|s| s.value.is_finite() && s.value >= 1.0)
            .filter_map(|s| Some((s.labels.get("instance")?.clone(), s.value as u64)))
            .collect(),
        Err(why) => {
            problems.push(why);
            candidates.iter().map(|i| (i.clone(), 0)).collect()
        }
    };
    let mut nodes = 0;
    if ask_seen {
        match query(
            client,
            base,
            "seen",
            &window::seen_of(candidates),
            time,
            problems,
        ) {
            Ok(v) => {
                let seen: BTreeSet<&str> = v
                    .iter()
                    .filter_map(|s| s.labels.get("instance").map(String::as_str))
                    .collect();
                nodes = candidates
                    .iter()
                    .filter(|i| !seen.contains(i.as_str()))
                    .count() as u64;
            }
            Err(why) => problems.push(why),
        }
    }
    Late {
        with_devices,
        nodes,
    }
}

/// The value of a `count(...)` or `sum(...)` answer, one series: `None` where it has none
/// (PromQL's count of nothing is no series, not 0).
fn count_of(answer: &[Series]) -> Option<u64> {
    answer.first().map(|s| s.value.max(0.0) as u64)
}

/// One query's instant vector, or why not. Prometheus's warnings (a partial response) go to
/// `problems`.
fn query(
    client: &Client,
    base: &str,
    what: &str,
    promql: &str,
    time: f64,
    problems: &mut Vec<String>,
) -> Result<Vec<Series>, String> {
    let at = format!("{time:.3}");
    let params = [("query", promql), ("time", at.as_str())];
    let data = super::detail::api(client, base, "/api/v1/query", &params, what, problems)?;
    if data["resultType"] != "vector" {
        return Err(format!("query {what}: not an instant vector"));
    }
    Ok(vector(&data))
}

/// The series of an instant vector's `data`, each named by its `__name__`.
pub(super) fn vector(data: &Value) -> Vec<Series> {
    let mut out = Vec::new();
    for r in data["result"].as_array().into_iter().flatten() {
        let labels: BTreeMap<String, String> = r["metric"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect();
        let value = r["value"][1]
            .as_str()
            .and_then(|s| match s {
                "+Inf" => Some(f64::INFINITY),
                "-Inf" => Some(f64::NEG_INFINITY),
                "NaN" => Some(f64::NAN),
                s => s.parse().ok(),
            })
            .unwrap_or(f64::NAN);
        let name = labels.get("__name__").cloned().unwrap_or_default();
        out.push(Series {
            name,
            labels,
            value,
        });
    }
    out
}

/// Reads the fleet at `time`, the rows `window` asks for: its targets, their series, and
/// what went wrong on the way. `Err` when Prometheus could not be asked at all. A windowed
/// read with the jobs recorded lists only the nodes it needs.
pub fn read(
    client: &Client,
    base: &str,
    time: f64,
    scrape_interval: f64,
    window: &Window,
) -> Result<Read, String> {
    let fatal = |why: String| format!("Prometheus at {}: {why}", crate::text::clean(base));
    let mut problems = Vec::new();
    // Which of the fleet's rules Prometheus has (their answers cost a series a node or
    // device, where the expressions they record read every device's series): the
    // fleet-wide rules say which, and the totals, in a series each; where Prometheus has
    // none of them (an older rule file), the rules themselves are asked.
    let mut recorded = Recorded::default();
    let fleetwide = match query(client, base, "fleet", &window::fleet(), time, &mut problems) {
        Ok(v) => recorded.add_fleet(&v),
        Err(why) => {
            problems.push(why);
            None
        }
    };
    if fleetwide.is_none() {
        match query(
            client,
            base,
            "rules",
            &window::recorded_now(None),
            time,
            &mut problems,
        ) {
            Ok(v) => recorded.add(&v),
            // Asked as if none: the expressions answer the same.
            Err(why) => problems.push(why),
        }
    }
    // Whether the jobs' spread is recorded, and how many jobs it holds.
    let jobs_recorded = |problems: &mut Vec<String>| {
        if let Some(fleet) = &fleetwide {
            return fleet.jobs;
        }
        match query(
            client,
            base,
            "jobs recorded",
            window::JOBS_RECORDED,
            time,
            problems,
        ) {
            Ok(v) => count_of(&v),
            Err(why) => {
                problems.push(why);
                None
            }
        }
    };
    // The totals the fleet-wide rules hold, as of their evaluation.
    let fleet_nodes = fleetwide.as_ref().and_then(|f| f.nodes);
    let fleet_devices = fleetwide
        .as_ref()
        .and_then(|f| f.devices)
        .filter(|_| window.filter.is_empty());
    // A windowed read with the jobs recorded answers the nodes it needs and counts
    // (`window::NodeQueries`); any other read, every node's own series (the client's join
    // of the jobs needs every node's state).
    let recorded_jobs = if window.rows.is_some() {
        jobs_recorded(&mut problems)
    } else {
        None
    };
    let bounded = recorded_jobs.is_some();
    let first: Vec<(&str, String)> = if bounded {
        let nodes_asked = window::NodeQueries::new(&recorded, scrape_interval, time);
        let mut first = vec![
            ("not up", nodes_asked.not_up()),
            ("no devices", nodes_asked.no_devices()),
        ];
        if fleet_nodes.is_none() {
            first.push(("total", nodes_asked.total()));
        }
        if fleet_devices.is_none() {
            first.push(("devices", nodes_asked.devices(&window.filter)));
        }
        if fleetwide.is_none() {
            first.push(("one node", nodes_asked.one_node()));
        }
        // The node order picks whole nodes by name: every node's name and count.
        if window.sort == Sort::Node {
            first.push(("counts", window::counts(&window.filter, &recorded)));
            first.push((
                "names",
                "group by (instance, host) (strata_node_info)".into(),
            ));
        }
        first
    } else {
        queries(window, &recorded)
    };
    let mut got: BTreeMap<&str, Vec<Series>> = BTreeMap::new();
    for (what, promql) in first {
        match query(client, base, what, &promql, time, &mut problems) {
            Ok(v) => {
                got.insert(what, v);
            }
            // Without the nodes nothing can be drawn; without another, less can.
            Err(why) if matches!(what, "nodes" | "series" | "total" | "not up") => {
                return Err(fatal(why))
            }
            Err(why) => problems.push(why),
        }
    }
    let counts: Option<BTreeMap<String, u64>> = got.get("counts").map(|v| {
        v.iter()
            .filter_map(|s| {
                let n = (s.value.is_finite() && s.value >= 0.0).then_some(s.value as u64)?;
                Some((s.labels.get("instance")?.clone(), n))
            })
            .collect()
    });
    let instances = |v: Option<&Vec<Series>>| -> BTreeSet<String> {
        v.into_iter()
            .flatten()
            .filter_map(|s| s.labels.get("instance").cloned())
            .collect()
    };
    // The nodes with no device, by the recorded count, hold those that came after the rule's
    // last evaluation too: their devices now tell them apart. One the rules know not yet is
    // no row (its devices are not ranked yet) and its devices are counted; one that cannot
    // be told is no row either (the failed query is a problem of the read).
    let mut late = Late::default();
    if bounded && recorded.0.contains(&"count") {
        let candidates: Vec<String> = instances(got.get("no devices")).into_iter().collect();
        if !candidates.is_empty() {
            let ask_seen = fleet_nodes.is_some();
            late = told_apart(client, base, time, &candidates, ask_seen, &mut problems);
            if let Some(none) = got.get_mut("no devices") {
                none.retain(|s| {
                    s.labels
                        .get("instance")
                        .is_none_or(|i| !late.with_devices.contains_key(i))
                });
            }
        }
    }
    let (late_nodes, late_devices) = (late.nodes, late.with_devices.values().sum::<u64>());
    let mut series = got.remove("series").unwrap_or_default();
    let current_of = |series: &[Series]| -> BTreeSet<String> {
        series
            .iter()
            .filter(|s| s.name == "strata_node_info")
            .filter_map(|s| s.labels.get("instance").cloned())
            .collect()
    };
    // The device rules, asked of one node's devices: one the count names (the recorded
    // count is evaluated with them), else any node up. (The fleet-wide rules said already.)
    let one = if fleetwide.is_some() {
        None
    } else if bounded {
        instances(got.get("one node")).into_iter().next()
    } else {
        counts
            .as_ref()
            .and_then(|c| c.keys().next().cloned())
            .or_else(|| current_of(&series).into_iter().next())
    };
    if let Some(one) = one {
        match query(
            client,
            base,
            "device rules",
            &window::recorded_now(Some(&one)),
            time,
            &mut problems,
        ) {
            Ok(v) => recorded.add(&v),
            Err(why) => problems.push(why),
        }
    }
    // The node order picks nodes by name here: Prometheus orders numbers only.
    let by_node = match (&counts, window.sort) {
        (Some(counts), Sort::Node) => {
            let named = got.get("names").unwrap_or(&series);
            let names: BTreeMap<&str, &str> = named
                .iter()
                .filter(|s| bounded || s.name == "strata_node_info")
                .filter_map(|s| {
                    let host = s.labels.get("host").filter(|h| !h.is_empty())?;
                    Some((s.labels.get("instance")?.as_str(), host.as_str()))
                })
                .collect();
            let nodes = counts
                .iter()
                .map(|(i, n)| {
                    let name = names.get(i.as_str()).map_or(i.as_str(), |h| h);
                    (i.clone(), crate::text::clean(name).into_owned(), *n)
                })
                .collect();
            window::nodes_for(nodes, window)
        }
        _ => Vec::new(),
    };
    // The device rows: every device's series, or those of the devices Prometheus picks
    // (asked first, then their series by name: the index finds them, no join reads every
    // device's series).
    let rows = match window::pick(window, &by_node, &recorded) {
        Pick::All(matching) => Some((window::rows(matching.as_deref()), None)),
        Pick::Nodes(nodes) => Some((window::rows_of_nodes(&nodes), None)),
        Pick::Devices(promql) => {
            let picked: BTreeSet<(String, String)> =
                match query(client, base, "picked", &promql, time, &mut problems) {
                    Ok(v) => v
                        .iter()
                        .filter_map(|s| {
                            Some((
                                s.labels.get("instance")?.clone(),
                                s.labels.get("uuid")?.clone(),
                            ))
                        })
                        .collect(),
                    Err(why) => return Err(fatal(why)),
                };
            let list: Vec<(String, String)> = picked.iter().cloned().collect();
            (!list.is_empty()).then(|| (window::rows_of(&list), Some(picked)))
        }
    };
    let mut rows_read: Vec<Series> = Vec::new();
    if let Some((promql, only)) = rows {
        match query(client, base, "rows", &promql, time, &mut problems) {
            Ok(v) => rows_read.extend(v.into_iter().filter(|s| {
                only.as_ref().is_none_or(|only| {
                    let key = (
                        s.labels.get("instance").cloned().unwrap_or_default(),
                        s.labels.get("uuid").cloned().unwrap_or_default(),
                    );
                    only.contains(&key)
                })
            })),
            Err(why) => return Err(fatal(why)),
        }
    }
    // A windowed read's nodes: each not up, each with no device, and those of the rows read
    // (of the node order's picks); their own series by name.
    let mut listed: BTreeSet<String> = BTreeSet::new();
    if bounded {
        listed.extend(instances(got.get("not up")));
        listed.extend(instances(got.get("no devices")));
        listed.extend(instances(Some(&rows_read)));
        listed.extend(by_node.iter().cloned());
        if !listed.is_empty() {
            let list: Vec<String> = listed.iter().cloned().collect();
            for (what, promql) in window::of_nodes(&list) {
                match query(client, base, what, &promql, time, &mut problems) {
                    Ok(v) if what == "series" => series.extend(v),
                    Ok(v) => {
                        got.insert(what, v);
                    }
                    Err(why) if what == "series" => return Err(fatal(why)),
                    Err(why) => problems.push(why),
                }
            }
        }
        // What the nodes down last said is among the answer of those not up.
        if let Some(not_up) = got.remove("not up") {
            got.insert("nodes", not_up);
        }
    }
    series.extend(rows_read);
    let mut seen: BTreeSet<String> = instances(got.get("nodes"));
    seen.extend(listed);
    let mut up: BTreeMap<String, f64> = BTreeMap::new();
    for s in got.get("up").into_iter().flatten() {
        if let Some(i) = s.labels.get("instance") {
            up.insert(i.clone(), s.value);
            seen.insert(i.clone());
        }
    }
    let mut scraped: BTreeMap<String, f64> = BTreeMap::new();
    for s in got.get("scraped").into_iter().flatten() {
        if let Some(i) = s.labels.get("instance") {
            scraped.insert(i.clone(), s.value);
        }
    }
    let current = current_of(&series);
    // A node seen in the hour and not now: its last info names it (host, version).
    for s in got.get("nodes").into_iter().flatten() {
        if let Some(i) = s.labels.get("instance") {
            if !current.contains(i) {
                let mut old = s.clone();
                old.name = "strata_node_info_last".into();
                series.push(old);
            }
        }
    }
    let total = |what: &str| got.get(what).map(|v| count_of(v).unwrap_or(0));
    // The recorded totals hold the nodes and devices as of the rules' evaluation: with those
    // that came since. (A filter's count is asked of the devices themselves: it holds them.)
    let nodes_total = match fleet_nodes {
        Some(n) if bounded => Some(n.saturating_add(late_nodes)),
        _ => total("total"),
    };
    let devices_total = fleet_devices
        .filter(|_| bounded)
        .or_else(|| total("devices"))
        .map(|d| {
            if window.filter.is_empty() {
                d.saturating_add(late_devices)
            } else {
                d
            }
        });
    let no_devices = bounded.then(|| instances(got.get("no devices")));
    let targets = seen
        .into_iter()
        .map(|instance| {
            let is_up = up.get(&instance).is_none_or(|v| *v >= 1.0) && current.contains(&instance);
            let why = if is_up {
                None
            } else if up.get(&instance).is_some_and(|v| *v < 1.0) {
                Some("target down (Prometheus's up is 0)".to_string())
            } else {
                Some("no current samples (not scraped, or its series went stale)".to_string())
            };
            Target {
                since_scrape: scraped.get(&instance).map_or(0.0, |t| (time - t).max(0.0)),
                instance,
                up: is_up,
                why,
            }
        })
        .collect::<Vec<Target>>();
    // A node whose figures the fleet will not show (stale) is left out of its jobs by the
    // client's own join; the rules cannot know it. A windowed read joins the jobs it reads
    // that have a process on one itself (`rejoin`); a whole read joins every job.
    let built = super::build::build(&targets, &series, scrape_interval);
    let stale: Vec<String> = built
        .nodes
        .iter()
        .filter(|n| n.state != NodeState::Up && current.contains(&n.instance))
        .map(|n| n.instance.clone())
        .collect();
    let not_up: BTreeSet<String> = built
        .nodes
        .iter()
        .filter(|n| n.state != NodeState::Up)
        .map(|n| n.instance.clone())
        .collect();
    // The devices counted hold a stale node's, which the fleet does not show.
    let devices_total = match devices_total {
        Some(d) if bounded && !stale.is_empty() => {
            let promql = window::devices_on(&window.filter, &recorded, &stale);
            match query(client, base, "stale devices", &promql, time, &mut problems) {
                Ok(v) => Some(d.saturating_sub(count_of(&v).unwrap_or(0))),
                Err(why) => {
                    problems.push(why);
                    None
                }
            }
        }
        other => other,
    };
    let mut answers: BTreeMap<&str, Vec<Series>> = BTreeMap::new();
    let mut jobs_total = None;
    let mut rejoined: Option<(BTreeSet<String>, Vec<Job>)> = None;
    let recorded_jobs = if bounded {
        recorded_jobs
    } else if !stale.is_empty() {
        None
    } else {
        jobs_recorded(&mut problems)
    };
    if let Some(recorded_jobs) = recorded_jobs {
        // The jobs to read, asked first where the window takes some, then their spread by
        // name.
        let spread = match window::job_pick(window, &recorded) {
            None => Some(window::jobs(None)),
            Some(promql) => {
                match query(client, base, "jobs picked", &promql, time, &mut problems) {
                    Ok(picked) => {
                        if !stale.is_empty() {
                            rejoined =
                                rejoin(client, base, time, &picked, &stale, &not_up, &mut problems);
                        }
                        Some(window::jobs(Some(&picked)))
                    }
                    Err(why) => {
                        problems.push(why);
                        None
                    }
                }
            }
        };
        if let Some(spread) = spread {
            let climbing = RECORDED[1].1.to_string();
            for (what, promql) in [("jobs", spread), ("climbing", climbing)] {
                match query(client, base, what, &promql, time, &mut problems) {
                    Ok(v) => {
                        answers.insert(what, v);
                    }
                    Err(why) => problems.push(why),
                }
            }
            // A window's jobs are counted: all of them, or those that match its filter.
            if window.rows.is_some() && answers.contains_key("jobs") {
                if window.filter.is_empty() {
                    jobs_total = Some(recorded_jobs);
                } else {
                    let promql = window::job_count(&window.filter);
                    match query(client, base, "job count", &promql, time, &mut problems) {
                        Ok(v) => {
                            jobs_total = Some(count_of(&v).unwrap_or(0));
                        }
                        Err(why) => problems.push(why),
                    }
                }
            }
        }
    }
    let mut jobs = answers.get("jobs").map(|spread| {
        jobs_of(
            spread,
            answers.get("climbing").map_or(&[][..], Vec::as_slice),
        )
    });
    // The jobs with a process on a stale node, as the client joins them.
    if let (Some(jobs), Some((keys, joined))) = (jobs.as_mut(), rejoined) {
        jobs.retain(|j| !keys.contains(&j.key));
        jobs.extend(joined);
    }
    // A climbing rank on a node not listed is named by its node's host all the same.
    let mut names = BTreeMap::new();
    if bounded {
        let listed: BTreeSet<&str> = targets.iter().map(|t| t.instance.as_str()).collect();
        let unnamed: BTreeSet<String> = jobs
            .iter()
            .flatten()
            .flat_map(|j| j.climbing.iter().map(|r| r.node.clone()))
            .filter(|i| !listed.contains(i.as_str()))
            .collect();
        if !unnamed.is_empty() {
            let list: Vec<String> = unnamed.into_iter().collect();
            let promql = format!(
                "group by (instance, host) (strata_node_info{{instance=~{}}})",
                super::detail::promql_string(&window::one_of(&list))
            );
            match query(client, base, "names", &promql, time, &mut problems) {
                Ok(v) => {
                    for s in v {
                        let host = s.labels.get("host").filter(|h| !h.is_empty());
                        if let (Some(i), Some(h)) = (s.labels.get("instance"), host) {
                            names.insert(i.clone(), crate::text::clean(h).into_owned());
                        }
                    }
                }
                Err(why) => problems.push(why),
            }
        }
    }
    if jobs.is_none() {
        match query(client, base, "jobs", &process_series(), time, &mut problems) {
            Ok(v) => series.extend(v),
            Err(why) => problems.push(why),
        }
    }
    Ok(Read {
        targets,
        series,
        problems,
        jobs,
        counts,
        jobs_total,
        nodes_total,
        devices_total,
        no_devices,
        names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(labels: &[(&str, &str)], value: f64) -> Series {
        Series::of("", labels, value)
    }

    #[test]
    fn a_jobs_aggregated_answer_gives_its_spread_size_and_climbing_rank() {
        let job = ("slurm_job", "9001");
        let mut spread = Vec::new();
        for (stat, value) in [
            ("known", 4.0),
            ("least", 10.0),
            ("median", 25.0),
            ("most", 70.0),
        ] {
            spread.push(series(&[job, ("figure", "live"), ("stat", stat)], value));
        }
        // A figure with a stat missing is not shown half-known.
        spread.push(series(&[job, ("figure", "used"), ("stat", "known")], 4.0));
        spread.push(series(
            &[job, ("world_size", "4"), ("stat", "processes")],
            4.0,
        ));
        spread.push(series(&[job, ("stat", "nodes")], 2.0));
        // A run's ranks that disagree on the world size: none is said.
        let run = ("run", "llm-a");
        spread.push(series(
            &[run, ("world_size", "2"), ("stat", "processes")],
            1.0,
        ));
        spread.push(series(
            &[run, ("world_size", "3"), ("stat", "processes")],
            2.0,
        ));
        spread.push(series(&[run, ("stat", "nodes")], 1.0));
        // Neither label: no job.
        spread.push(series(&[("stat", "nodes")], 5.0));
        let climbing = [
            series(
                &[
                    job,
                    ("instance", "b:9842"),
                    ("gpu", "1"),
                    ("uuid", "GPU-b"),
                    ("pid", "7"),
                    ("rank", "3"),
                ],
                1e6,
            ),
            series(
                &[
                    job,
                    ("instance", "a:9842"),
                    ("gpu", "0"),
                    ("uuid", "GPU-a"),
                    ("pid", "9"),
                    ("rank", ""),
                ],
                2e6,
            ),
        ];
        let jobs = jobs_of(&spread, &climbing);
        assert_eq!(jobs.len(), 2, "{jobs:?}");
        let run = &jobs[0];
        assert_eq!(
            (run.key.as_str(), run.processes, run.nodes),
            ("run llm-a", 3, 1)
        );
        assert_eq!(run.world_size, None);
        let slurm = &jobs[1];
        assert_eq!(
            (slurm.key.as_str(), slurm.processes, slurm.nodes),
            ("slurm 9001", 4, 2)
        );
        assert_eq!(slurm.world_size, Some(4));
        assert_eq!(
            slurm.spread.keys().collect::<Vec<_>>(),
            ["live"],
            "used lacks its least, median and most"
        );
        let live = slurm.spread["live"];
        assert_eq!(
            (live.least, live.median, live.most, live.known),
            (10.0, 25.0, 70.0, 4)
        );
        let ranks: Vec<_> = slurm
            .climbing
            .iter()
            .map(|r| {
                (
                    r.node.as_str(),
                    r.gpu.as_str(),
                    r.rank.as_deref(),
                    r.live_bytes_per_sec,
                )
            })
            .collect();
        assert_eq!(
            ranks,
            [
                ("a:9842", "0", None, Some(2e6)),
                ("b:9842", "1", Some("3"), Some(1e6))
            ]
        );
    }

    /// The line of `lines` (a rule file's) that starts the rule recording `record`.
    fn rule_at(lines: &[&str], record: &str) -> Option<usize> {
        lines
            .iter()
            .position(|l| l.trim() == format!("- record: {record}"))
    }

    #[test]
    fn the_recording_rules_record_the_raw_job_queries() {
        let text = include_str!("../../assets/prometheus/strata-fleet-rules.yml");
        let file: serde_norway::Value =
            serde_norway::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        let str_of = |v: &serde_norway::Value| v.as_str().unwrap_or_default().trim().to_string();
        // Each rule of the file that records a job series: what, its labels, its expression.
        let mut found = Vec::new();
        for group in file["groups"].as_sequence().into_iter().flatten() {
            for rule in group["rules"].as_sequence().into_iter().flatten() {
                let record = str_of(&rule["record"]);
                if !RECORDED.iter().any(|(_, r)| *r == record) {
                    continue;
                }
                let labels: Vec<(String, String)> = rule["labels"]
                    .as_mapping()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (str_of(k), str_of(v)))
                    .collect();
                found.push((record, labels, str_of(&rule["expr"])));
            }
        }
        let want: Vec<_> = job_rules()
            .into_iter()
            .map(|r| {
                let labels = r.labels.iter().map(|(k, v)| (k.to_string(), v.to_string()));
                (r.record.to_string(), labels.collect::<Vec<_>>(), r.expr)
            })
            .collect();
        for (at, (found, want)) in found.iter().zip(&want).enumerate() {
            assert_eq!(found, want, "rule {at}: {}", want.2);
        }
        assert_eq!(found.len(), want.len());
        let lines: Vec<&str> = text.lines().collect();
        // And those of every node and device that a refresh asks (window::NODE_RULES).
        for (record, what) in window::NODE_RULES {
            let at = rule_at(&lines, record).unwrap_or_else(|| {
                panic!("no rule records {record}: {}", window::recorded_expr(what))
            });
            assert_eq!(lines[at + 1].trim(), "expr: |");
            assert_eq!(
                lines[at + 2].trim(),
                window::recorded_expr(what),
                "{record}"
            );
        }
        // And the fleet-wide ones, each after the rule it counts (a group's rules are
        // evaluated in order: each sees those before it at the same instant).
        assert_eq!(window::rule_of("jobs"), RECORDED[0].1);
        for (record, what) in window::FLEET_RULES {
            let at = rule_at(&lines, record).unwrap_or_else(|| panic!("no rule records {record}"));
            assert_eq!(lines[at + 1].trim(), "expr: |");
            assert_eq!(lines[at + 2].trim(), window::fleet_expr(what), "{record}");
            let counted = window::rule_of(what);
            assert!(lines[at + 2].contains(counted), "{record} counts {counted}");
            assert!(
                rule_at(&lines, counted).is_some_and(|c| c < at),
                "{record} is evaluated after {counted}"
            );
        }
    }

    #[test]
    fn the_recorded_tops_pick_from_the_rules_before_them() {
        let text = include_str!("../../assets/prometheus/strata-fleet-rules.yml");
        let lines: Vec<&str> = text.lines().collect();
        for (record, what, bottom) in window::TOP_RULES {
            let at = rule_at(&lines, record).unwrap_or_else(|| panic!("no rule records {record}"));
            assert_eq!(lines[at + 1].trim(), "expr: |");
            assert_eq!(
                lines[at + 2].trim(),
                window::top_expr(what, bottom),
                "{record}"
            );
            let from = window::rule_of(what);
            assert!(lines[at + 2].contains(from), "{record} picks from {from}");
            assert!(
                rule_at(&lines, from).is_some_and(|f| f < at),
                "{record} is evaluated after {from}"
            );
        }
    }

    #[test]
    fn the_fleet_wide_rules_say_which_rules_and_the_totals() {
        let s = |name: &str, value: f64| Series::of(name, &[("__name__", name)], value);
        let mut recorded = window::Recorded::default();
        let fleet = recorded.add_fleet(&[
            s("strata_fleet:nodes:count", 1000.0),
            s("strata_fleet:devices:count", 8000.0),
            s("strata_fleet:ranked_devices:count", 8000.0),
            s("strata_fleet:jobs:count", 7937.0),
        ]);
        assert_eq!(
            fleet,
            Some(window::Fleetwide {
                nodes: Some(1000),
                devices: Some(8000),
                jobs: Some(7937),
            })
        );
        // The used share has no count: Prometheus has not that rule, and it is asked.
        assert_eq!(recorded.0, ["seen", "count", "urgency", "top"]);
        assert_eq!(recorded.of("used"), window::used());
        assert_eq!(recorded.of("urgency"), "strata_device:fleet_urgency:score");
        // None of them: an older rule file, or none loaded.
        let mut none = window::Recorded::default();
        assert_eq!(none.add_fleet(&[s("up", 1.0)]), None);
        assert!(none.0.is_empty());
        // The query asks the five by name.
        let q = window::fleet();
        for (name, _) in window::FLEET_RULES {
            assert!(q.contains(name), "{q}");
        }
    }
}

//! `strata serve`'s metrics, built from observed samples and parsed back by a parser of the
//! text format written for the tests: every family has HELP and TYPE, every demo GPU and MIG
//! instance has its known layers (and only those), equal to the JSON snapshot's and adding
//! up to NVML's total; hostile command lines are cleaned; the number of process series is
//! bounded while sums over processes still hold; unknown is absent, never 0.

use crate::common;

use common::exposition::{parse, Exposition};
use serde_json::Value;
use strata::fixtures::{feed, gpu, memory, node, process, GIB, MIB};
use strata::pipeline::{Observed, Pipeline};
use strata::serve::exposition::{self, SamplerCounts};
use strata::serve::labels::COMMAND_CHARS;
use strata::snapshot::Snapshot;
use strata::source::demo::{DemoSource, SNAPSHOT_AT};
use strata::source::Source;

fn demo_observed() -> Observed {
    let mut source = DemoSource::new(0, 1.0, 10.0, SNAPSHOT_AT);
    let mut pipeline = Pipeline::new(None);
    for earlier in source.backlog() {
        pipeline.ingest(earlier);
    }
    pipeline.ingest(source.sample().expect("demo sample"))
}

fn exported(observed: &Observed, max_processes: usize) -> Exposition {
    let counts = SamplerCounts {
        samples: 3,
        errors: 1,
    };
    let body = exposition::encode(observed, counts, max_processes);
    parse(&exposition::finish(&body.prometheus, Some(0.25), false))
}

/// The layers a device has in the JSON snapshot: name → bytes, known ones only.
fn json_layers(device: &Value) -> Vec<(String, u64)> {
    device["layers"]
        .as_object()
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| v.as_u64().map(|b| (k.clone(), b)))
                .collect()
        })
        .unwrap_or_default()
}

/// `layer` → bytes of one device's samples of `metric`.
fn metric_layers(e: &Exposition, metric: &str, uuid: &str) -> Vec<(String, u64)> {
    let mut layers: Vec<(String, u64)> = e
        .select(metric, &[("uuid", uuid)])
        .into_iter()
        .map(|(labels, v)| (labels["layer"].clone(), v as u64))
        .collect();
    layers.sort();
    layers
}

#[test]
fn every_family_has_help_and_a_type() {
    let e = exported(&demo_observed(), 64);
    assert!(e.order.len() >= 15, "{:?}", e.order);
    for name in &e.order {
        let family = &e.families[name];
        assert!(
            family.help.as_deref().is_some_and(|h| h.len() > 10),
            "{name} has no HELP"
        );
        let kind = family.kind.as_deref().unwrap_or_default();
        assert!(matches!(kind, "gauge" | "counter"), "{name}: {kind}");
        // Prometheus's conventions: counters end in _total, and nothing else does.
        assert_eq!(kind == "counter", name.ends_with("_total"), "{name}");
        assert!(name.starts_with("strata_"), "{name}");
    }
    assert_eq!(e.family("strata_samples_total").samples[0].1, 3.0);
    assert_eq!(e.family("strata_sample_errors_total").samples[0].1, 1.0);
    assert_eq!(e.family("strata_sample_age_seconds").samples[0].1, 0.25);
}

#[test]
fn every_demo_gpu_and_mig_layer_is_there_and_adds_up_to_the_total() {
    let observed = demo_observed();
    let snapshot = serde_json::to_value(Snapshot::of(&observed)).expect("json");
    let e = exported(&observed, 64);
    let mut devices = 0;
    let mut migs = 0;
    for g in snapshot["gpus"].as_array().expect("gpus") {
        let uuid = g["uuid"].as_str().expect("uuid");
        let total = g["memory"]["total"].as_u64().expect("a demo GPU's total");
        let mut want = json_layers(g);
        want.sort();
        assert!(
            !want.is_empty(),
            "{uuid}: the demo knows every GPU's layers"
        );
        let got = metric_layers(&e, "strata_gpu_layer_bytes", uuid);
        assert_eq!(got, want, "{uuid}");
        assert_eq!(got.iter().map(|(_, b)| b).sum::<u64>(), total, "{uuid}");
        let totals = e.select("strata_gpu_memory_total_bytes", &[("uuid", uuid)]);
        assert_eq!(totals.len(), 1);
        assert_eq!(totals[0].1 as u64, total);
        let labels = &totals[0].0;
        assert_eq!(labels["gpu"], g["index"].to_string());
        assert_eq!(Some(labels["name"].as_str()), g["name"].as_str());
        devices += 1;
        for m in g["mig"].as_array().expect("mig") {
            let uuid = m["uuid"].as_str().expect("uuid");
            let total = m["memory"]["total"].as_u64().expect("a demo MIG total");
            let mut want = json_layers(m);
            want.sort();
            let got = metric_layers(&e, "strata_mig_layer_bytes", uuid);
            assert_eq!(got, want, "{uuid}");
            assert_eq!(got.iter().map(|(_, b)| b).sum::<u64>(), total, "{uuid}");
            let (labels, value) = &e.select("strata_mig_memory_total_bytes", &[("uuid", uuid)])[0];
            assert_eq!(*value as u64, total);
            assert_eq!(Some(labels["profile"].as_str()), m["profile"].as_str());
            assert_eq!(labels["gpu"], g["index"].to_string());
            assert_eq!(labels["gpu_instance"], m["gpu_instance_id"].to_string());
            migs += 1;
        }
    }
    assert_eq!(
        (devices, migs),
        (4, 3),
        "the demo's 4 GPUs and 3 MIG instances"
    );
    // The demo's 1g.10gb instance has processes without feeds: its allocator layers are
    // unknown, and absent rather than 0.
    let small = snapshot["gpus"][3]["mig"][2]["uuid"]
        .as_str()
        .expect("uuid");
    let layers = metric_layers(&e, "strata_mig_layer_bytes", small);
    assert!(
        layers.iter().all(|(l, _)| l != "live" && l != "cached"),
        "{layers:?}"
    );
}

#[test]
fn findings_processes_and_climbs_are_exported() {
    let observed = demo_observed();
    let e = exported(&observed, 64);
    // Counts by kind and severity, against the findings themselves.
    for f in &observed.findings {
        let kind = f.kind.name();
        let severity = serde_json::to_value(f.severity).expect("severity");
        let severity = match severity.as_str() {
            Some("warning") => "warning",
            Some("critical") => "critical",
            _ => "info",
        };
        let want = observed
            .findings
            .iter()
            .filter(|g| g.kind == f.kind && g.severity == f.severity)
            .count() as f64;
        let got = e.select(
            "strata_findings",
            &[("kind", kind.as_str()), ("severity", severity)],
        );
        assert_eq!(got.len(), 1, "{kind} {severity}");
        assert_eq!(got[0].1, want, "{kind} {severity}");
    }
    let total: f64 = e
        .family("strata_findings")
        .samples
        .iter()
        .map(|s| s.1)
        .sum();
    assert_eq!(total, observed.findings.len() as f64);
    // Climbs: rate from the evidence's MiB a minute, in bytes a second.
    let climbs: Vec<_> = observed
        .findings
        .iter()
        .filter(|f| f.kind.name() == "climb")
        .collect();
    assert!(!climbs.is_empty(), "the demo climbs at {SNAPSHOT_AT}");
    for c in climbs {
        let pid = c.pid.expect("a process climb").to_string();
        let got = e.select("strata_climb_rate_bytes_per_second", &[("pid", &pid)]);
        assert_eq!(got.len(), 1, "{pid}");
        let strata::detect::Evidence::Climb(climb) = &c.evidence else {
            panic!("a climb's evidence: {:?}", c.evidence);
        };
        let mib_per_min = climb.rate_mib_per_min.0;
        assert!((got[0].1 - mib_per_min * MIB as f64 / 60.0).abs() < 1.0);
        assert_eq!(Some(got[0].0["uuid"].as_str()), c.device_uuid.as_deref());
    }
    // Every process: its NVML used, and one feed state set to 1.
    for p in &observed.sample.processes {
        let pid = p.pid.to_string();
        let used = e.select("strata_process_used_bytes", &[("pid", &pid)]);
        assert_eq!(used.len(), 1, "{pid}");
        assert_eq!(Some(used[0].1 as u64), p.used, "{pid}");
        let states = e.select("strata_process_feed_state", &[("pid", &pid)]);
        assert_eq!(states.len(), 6, "{pid}");
        assert_eq!(states.iter().filter(|s| s.1 == 1.0).count(), 1, "{pid}");
    }
    let ooms = e.select("strata_process_ooms_total", &[("pid", "60112")]);
    assert_eq!(ooms[0].1, 1.0, "the demo's fragmentation OOM");
}

/// Each process's series carry its owner: the pod's namespace, pod and container, the Slurm
/// job; empty where nothing names them. The sums over processes stay what they were.
#[test]
fn process_series_carry_their_owner() {
    let observed = demo_observed();
    let e = exported(&observed, 64);
    let mut kinds = std::collections::BTreeSet::new();
    for p in &observed.sample.processes {
        let pid = p.pid.to_string();
        let used = e.select("strata_process_used_bytes", &[("pid", &pid)]);
        assert_eq!(used.len(), 1, "{pid}");
        let labels = &used[0].0;
        let owner = p.owner.as_deref();
        let want = |value: Option<&String>| value.cloned().unwrap_or_default();
        let got = |key: &str| labels.get(key).cloned().unwrap_or_default();
        assert_eq!(
            got("namespace"),
            want(owner.and_then(|o| o.namespace.as_ref())),
            "{pid}"
        );
        assert_eq!(
            got("pod"),
            want(owner.and_then(|o| o.pod.as_ref())),
            "{pid}"
        );
        assert_eq!(
            got("container"),
            want(owner.and_then(|o| o.container.as_ref())),
            "{pid}"
        );
        assert_eq!(
            got("slurm_job"),
            want(owner.and_then(|o| o.slurm_job.as_ref())),
            "{pid}"
        );
        for (key, value) in [
            ("rank", owner.and_then(|o| o.rank.as_ref())),
            ("local_rank", owner.and_then(|o| o.local_rank.as_ref())),
            ("world_size", owner.and_then(|o| o.world_size.as_ref())),
            ("run", owner.and_then(|o| o.run_id.as_ref())),
        ] {
            assert_eq!(got(key), want(value), "{pid} {key}");
        }
        if let Some(o) = owner {
            kinds.insert(o.kind.as_str());
        }
    }
    assert!(kinds.contains("pod") && kinds.contains("slurm") && kinds.contains("container"));
    // The demo's two training ranks say which they are.
    let ranks: Vec<String> = e
        .select("strata_process_used_bytes", &[("slurm_job", "81234")])
        .iter()
        .map(|s| s.0.get("rank").cloned().unwrap_or_default())
        .collect();
    assert_eq!(ranks.len(), 2, "{ranks:?}");
    assert!(ranks.contains(&"0".to_string()) && ranks.contains(&"1".to_string()));
    // A pod's memory, summed by PromQL's way: every series of its pod.
    let by_pod: f64 = e
        .select("strata_process_used_bytes", &[("pod", "t5-3b-0")])
        .iter()
        .map(|s| s.1)
        .sum();
    let expected: u64 = observed
        .sample
        .processes
        .iter()
        .filter(|p| p.owner.as_deref().and_then(|o| o.pod.as_deref()) == Some("t5-3b-0"))
        .filter_map(|p| p.used)
        .sum();
    assert_eq!(by_pod as u64, expected);
}

#[test]
fn hostile_command_lines_and_users_are_cleaned_and_cut() {
    let mut sample = node();
    sample.gpus.push(gpu(0, memory(80 * GIB, 10 * GIB)));
    let mut p = process(4242, "GPU-test-0", Some(10 * GIB));
    let hostile = "evil\u{1b}]0;pwned\u{7}\"quoted\"\\back\nnext\u{202e}rtl";
    p.command = Some(format!("{hostile} {}", "x".repeat(200)));
    p.user = Some("mal\u{1b}[31mlory\"".into());
    sample.processes.push(p);
    let observed = Pipeline::new(None).ingest(sample);
    let body = exposition::encode(&observed, SamplerCounts::default(), 64);
    for text in [&body.prometheus, &body.openmetrics] {
        assert!(!text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\u{202e}'));
    }
    let e = parse(&exposition::finish(&body.prometheus, None, false));
    let (labels, _) = &e.select("strata_process_used_bytes", &[("pid", "4242")])[0];
    let command = &labels["command"];
    assert_eq!(command.chars().count(), COMMAND_CHARS);
    assert!(
        command
            .starts_with("evil\u{fffd}]0;pwned\u{fffd}\"quoted\"\\back\u{fffd}next\u{fffd}rtl xxx"),
        "{command:?}"
    );
    assert!(!command.chars().any(char::is_control), "{command:?}");
    assert_eq!(labels["user"], "mal\u{fffd}[31mlory\"");
    // The OpenMetrics body parses the same.
    let om = parse(&exposition::finish(&body.openmetrics, None, true));
    assert_eq!(
        om.select("strata_process_used_bytes", &[("pid", "4242")])[0].0["command"],
        *command
    );
}

#[test]
fn process_series_are_bounded_and_sums_over_processes_hold() {
    let mut sample = node();
    let gpus = 8u32;
    for i in 0..gpus {
        sample.gpus.push(gpu(i, memory(80 * GIB, 70 * GIB)));
    }
    // 200 processes of different sizes; every third one fed.
    let mut want_used = vec![0u64; gpus as usize];
    let mut all: Vec<(u64, u32)> = Vec::new();
    for pid in 1000..1200u32 {
        let device = pid % gpus;
        let used = u64::from(pid % 37 + 1) * 64 * MIB + u64::from(pid) * 4096;
        let mut p = process(pid, &format!("GPU-test-{device}"), Some(used));
        if pid % 3 == 0 {
            p.feed = Some(Box::new(feed(used / 4, used / 2, Some(used / 16), 1000.0)));
        }
        want_used[device as usize] += used;
        all.push((used, pid));
        sample.processes.push(p);
    }
    let observed = Pipeline::new(None).ingest(sample);
    let max = 10;
    let e = exported(&observed, max);
    let used = e.family("strata_process_used_bytes");
    let named: Vec<&str> = used
        .samples
        .iter()
        .map(|(l, _)| l["pid"].as_str())
        .filter(|pid| *pid != "other")
        .collect();
    // The largest `max`, by the input's own ranking.
    all.sort_by(|a, b| b.cmp(a));
    let mut want: Vec<String> = all
        .iter()
        .take(max)
        .map(|(_, pid)| pid.to_string())
        .collect();
    let mut got: Vec<String> = named.iter().map(|s| s.to_string()).collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    // Every family that names processes stays within the bound: `max` processes, plus one
    // "other" per device.
    for (name, family) in &e.families {
        let mut pids: Vec<&str> = family
            .samples
            .iter()
            .filter_map(|(l, _)| l.get("pid").map(String::as_str))
            .collect();
        pids.sort();
        pids.dedup();
        assert!(pids.len() <= max + 1, "{name}: {}", pids.len());
    }
    for device in 0..gpus {
        let uuid = format!("GPU-test-{device}");
        let sum: u64 = e
            .select("strata_process_used_bytes", &[("uuid", &uuid)])
            .iter()
            .map(|s| s.1 as u64)
            .sum();
        assert_eq!(sum, want_used[device as usize], "{uuid}");
        let named_here = e
            .select("strata_process_used_bytes", &[("uuid", &uuid)])
            .iter()
            .filter(|s| s.0["pid"] != "other")
            .count();
        let omitted = e.select("strata_processes_omitted", &[("uuid", &uuid)]);
        assert_eq!(omitted[0].1 as usize + named_here, 25, "{uuid}");
        // The process layers, "other" included, add up to the processes' share of the GPU.
        let process_layers: u64 = e
            .select("strata_process_layer_bytes", &[("uuid", &uuid)])
            .iter()
            .map(|s| s.1 as u64)
            .sum();
        let gpu_layers: u64 = e
            .select("strata_gpu_layer_bytes", &[("uuid", &uuid)])
            .iter()
            .filter(|s| s.0["layer"] != "other" && s.0["layer"] != "free")
            .map(|s| s.1 as u64)
            .sum();
        assert_eq!(process_layers, gpu_layers, "{uuid}");
    }
}

#[test]
fn each_demo_gpu_has_its_vitals_in_base_units() {
    let observed = demo_observed();
    let snapshot = serde_json::to_value(Snapshot::of(&observed)).expect("json");
    let e = exported(&observed, 64);
    for g in snapshot["gpus"].as_array().expect("gpus") {
        let uuid = g["uuid"].as_str().expect("uuid");
        let one = |metric: &str| {
            let series = e.select(metric, &[("uuid", uuid), ("gpu", &g["index"].to_string())]);
            assert_eq!(series.len(), 1, "{metric} of {uuid}: {series:?}");
            series[0].1
        };
        let figure = |key: &str| g[key].as_f64().unwrap_or_else(|| panic!("demo {key}: {g}"));
        assert_eq!(one("strata_gpu_temperature_celsius"), figure("temperature"));
        assert_eq!(one("strata_gpu_power_watts"), figure("power_mw") / 1000.0);
        assert_eq!(
            one("strata_gpu_power_limit_watts"),
            figure("power_limit_mw") / 1000.0
        );
        assert_eq!(
            one("strata_gpu_sm_clock_hertz"),
            figure("sm_clock_mhz") * 1e6
        );
        assert!(
            one("strata_gpu_power_watts") <= one("strata_gpu_power_limit_watts"),
            "{uuid}"
        );
    }
}

/// A fed process's allocator pool is exported beside its layers, as its three pool layers
/// add up: live + fragmented + cached, or live + cached where the allocator reports no
/// splits (its cached then holds them, and it is as much the pool); a process without a
/// feed has none. The job rules read this one series, not three layers matched.
#[test]
fn a_fed_process_exports_its_pool_whether_or_not_it_reports_splits() {
    let mut sample = node();
    sample.gpus.push(gpu(0, memory(80 * GIB, 40 * GIB)));
    let mut split = process(7, "GPU-test-0", Some(22 * GIB));
    split.feed = Some(Box::new(feed(12 * GIB, 20 * GIB, Some(GIB), 1000.0)));
    let mut unsplit = process(8, "GPU-test-0", Some(12 * GIB));
    unsplit.feed = Some(Box::new(feed(6 * GIB, 10 * GIB, None, 1000.0)));
    let unfed = process(9, "GPU-test-0", Some(GIB));
    sample.processes.extend([split, unsplit, unfed]);
    let observed = Pipeline::new(None).ingest(sample);
    let e = exported(&observed, 64);
    let pool = |pid: &str| {
        let got = e.select("strata_process_reserved_bytes", &[("pid", pid)]);
        assert!(got.len() <= 1, "{pid}: {got:?}");
        got.first().map(|s| s.1 as u64)
    };
    let pool_layers = |pid: &str| -> u64 {
        e.select("strata_process_layer_bytes", &[("pid", pid)])
            .into_iter()
            .filter(|(l, _)| ["live", "fragmented", "cached"].contains(&l["layer"].as_str()))
            .map(|(_, v)| v as u64)
            .sum()
    };
    assert_eq!(pool("7"), Some(20 * GIB));
    assert_eq!(pool("7"), Some(pool_layers("7")));
    assert!(e
        .select(
            "strata_process_layer_bytes",
            &[("pid", "8"), ("layer", "fragmented")]
        )
        .is_empty());
    assert_eq!(pool("8"), Some(10 * GIB));
    assert_eq!(pool("8"), Some(pool_layers("8")));
    assert_eq!(pool("9"), None);
}

#[test]
fn unknown_figures_are_absent_not_zero() {
    let mut sample = node();
    let mut g = gpu(0, memory(80 * GIB, 10 * GIB));
    g.memory = None;
    sample.gpus.push(g);
    sample.processes.push(process(7, "GPU-test-0", None));
    let observed = Pipeline::new(None).ingest(sample);
    let e = exported(&observed, 64);
    assert!(e.select("strata_gpu_memory_total_bytes", &[]).is_empty());
    assert!(e.select("strata_gpu_layer_bytes", &[]).is_empty());
    assert!(e.select("strata_process_used_bytes", &[]).is_empty());
    assert!(e.select("strata_sample_poll_seconds", &[]).is_empty());
    for vital in [
        "strata_gpu_temperature_celsius",
        "strata_gpu_power_watts",
        "strata_gpu_power_limit_watts",
        "strata_gpu_sm_clock_hertz",
    ] {
        assert!(e.select(vital, &[]).is_empty(), "{vital}");
    }
    // What is known is there: the GPU is listed and not lost, the process's feed is absent.
    assert_eq!(
        e.select("strata_gpu_lost", &[("uuid", "GPU-test-0")])[0].1,
        0.0
    );
    assert_eq!(
        e.select(
            "strata_process_feed_state",
            &[("pid", "7"), ("state", "absent")]
        )[0]
        .1,
        1.0
    );
}

#[test]
fn openmetrics_ends_with_eof_and_the_age_at_scrape_time() {
    let body = exposition::encode(&demo_observed(), SamplerCounts::default(), 64);
    let text = exposition::finish(&body.openmetrics, Some(1.5), true);
    assert!(
        text.ends_with("# EOF\n"),
        "{}",
        &text[text.len().saturating_sub(200)..]
    );
    assert_eq!(text.matches("# EOF").count(), 1);
    assert!(text.contains("strata_sample_age_seconds 1.5\n"));
    let e = parse(&text);
    assert_eq!(e.family("strata_samples").kind.as_deref(), Some("counter"));
    assert_eq!(e.family("strata_samples").samples[0].1, 0.0);
}

/// The table of metrics in `docs/prometheus.md`: name → type.
fn readme_metrics() -> std::collections::BTreeMap<String, String> {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/prometheus.md"))
        .expect("docs/prometheus.md");
    docs.lines()
        .filter_map(|l| l.strip_prefix("| `strata_"))
        .filter_map(|rest| {
            let (name, rest) = rest.split_once('`')?;
            let kind = rest.split('|').nth(1)?.trim();
            Some((format!("strata_{name}"), kind.to_string()))
        })
        .collect()
}

#[test]
fn every_metric_is_in_the_readme_table_with_its_type() {
    let documented = readme_metrics();
    assert!(documented.len() >= 20, "{documented:?}");
    // The demo, and a node with more processes than are exported one by one.
    let mut seen = std::collections::BTreeMap::new();
    let mut many = node();
    many.gpus.push(gpu(0, memory(80 * GIB, 8 * GIB)));
    for pid in 1..=4 {
        many.processes
            .push(process(pid, "GPU-test-0", Some(u64::from(pid) * GIB)));
    }
    many.poll_secs = Some(0.01);
    for e in [
        exported(&demo_observed(), 64),
        exported(&Pipeline::new(None).ingest(many), 2),
    ] {
        for (name, family) in e.families {
            seen.insert(name, family.kind.unwrap_or_default());
        }
    }
    for (name, kind) in &seen {
        assert_eq!(
            documented.get(name),
            Some(kind),
            "{name} ({kind}) is not in docs/prometheus.md's table as such"
        );
    }
    for name in documented.keys() {
        assert!(
            seen.contains_key(name),
            "docs/prometheus.md documents {name}, which is never exported"
        );
    }
}

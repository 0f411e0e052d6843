//! The Prometheus rules of `assets/prometheus/`: `promtool check rules` passes both files,
//! `promtool test rules` passes their unit tests, and those tests cover every rule (each
//! recording rule evaluated, each alert both firing and not). Every metric a rule names is
//! one `strata serve --demo` exports (a renamed metric fails here, not as an alert that
//! silently never fires), every label it names is one those metrics carry, and each alert
//! says what to do. Then a real Prometheus, with both files loaded, scrapes the demo: every
//! recording rule yields series, used is total less free as strata serves them, and every
//! expression of the fleet dashboard finds data. promtool and prometheus come from Debian's
//! `prometheus` package (tests/all installs it); a missing binary fails with a hint.

use crate::common;

use common::exposition::{Exposition, Server};
use common::grafana::{expressions, fleet_dashboard};
use common::prometheus::{query, start_prometheus, tool};
use common::promql::names;
use common::rules::{path, read, rules, Rule};
use serde_norway::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

const RULES: &str = "strata-rules.yml";
const ALERTS: &str = "strata-alerts.yml";

/// Labels that are not strata's: Prometheus's target labels (and the node name the
/// ServiceMonitor adds), and the ones the rules make with label_replace.
const OTHER_LABELS: [&str; 4] = ["instance", "job", "node", "device_type"];

/// Runs promtool with these arguments in assets/prometheus/; fails with its output.
fn promtool(args: &[&str]) -> String {
    let out = Command::new(tool("promtool"))
        .args(args)
        .current_dir(path(""))
        .output()
        .expect("promtool runs");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "promtool {}:\n{said}", args.join(" "));
    said
}

/// The fleet's job rules: evaluated in a real Prometheus by `fleet_backfill.rs` (the fleet
/// reads the same jobs from them as from the processes' series), checked here.
const FLEET_RULES: &str = "strata-fleet-rules.yml";

#[test]
fn promtool_checks_the_rule_files() {
    let said = promtool(&["check", "rules", RULES, ALERTS, FLEET_RULES]);
    assert_eq!(said.matches("SUCCESS").count(), 3, "{said}");
}

/// The rule files are loaded together (docs/fleet.md: the fleet's beside strata-rules.yml),
/// so no two rules of them may record one series name: Prometheus would keep both answers
/// under it, two series a device on two scales where the fleet's `topk` reads one. (A name
/// recorded by several rules of one file is one family, each rule setting its own labels.)
#[test]
fn the_rule_files_loaded_together_record_no_series_name_twice() {
    let mut by_name: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for file in [RULES, ALERTS, FLEET_RULES] {
        let names: std::collections::BTreeSet<String> = rules(file)
            .into_iter()
            .filter(|r| r.body.get("record").is_some())
            .map(|r| r.name)
            .collect();
        for name in names {
            by_name.entry(name).or_default().push(file);
        }
    }
    let twice: Vec<_> = by_name
        .iter()
        .filter(|(_, files)| files.len() > 1)
        .collect();
    assert!(
        twice.is_empty(),
        "recorded by more than one file: {twice:?}"
    );
}

#[test]
fn promtool_unit_tests_pass() {
    let said = promtool(&[
        "test",
        "rules",
        "strata-rules.test.yml",
        "strata-alerts.test.yml",
    ]);
    assert_eq!(said.matches("SUCCESS").count(), 2, "{said}");
}

/// The `tests` of a promtool unit test file.
fn unit_tests(name: &str) -> Vec<Value> {
    read(name)["tests"].as_sequence().expect("tests").to_vec()
}

#[test]
fn the_unit_tests_cover_every_rule_and_alert_both_ways() {
    // Every recording rule is an expression some case evaluates.
    let evaluated: BTreeSet<String> = unit_tests("strata-rules.test.yml")
        .iter()
        .flat_map(|t| {
            t["promql_expr_test"]
                .as_sequence()
                .cloned()
                .unwrap_or_default()
        })
        .flat_map(|case| names(case["expr"].as_str().expect("an expr")).0)
        .collect();
    for rule in rules(RULES) {
        assert!(
            evaluated.contains(&rule.name),
            "strata-rules.test.yml never evaluates {}",
            rule.name
        );
    }
    // Every alert fires in one case, with its labels and annotations checked, and is
    // expected not to in another.
    let mut fires = BTreeSet::new();
    let mut silent = BTreeSet::new();
    for test in unit_tests("strata-alerts.test.yml") {
        for case in test["alert_rule_test"].as_sequence().expect("alert cases") {
            let name = case["alertname"].as_str().expect("alertname").to_string();
            let expected = case["exp_alerts"].as_sequence().expect("exp_alerts");
            if expected.is_empty() {
                silent.insert(name);
            } else {
                for alert in expected {
                    let annotations = alert["exp_annotations"].as_mapping().expect("checked");
                    assert!(
                        annotations.contains_key("summary")
                            && annotations.contains_key("description"),
                        "{name}: its annotations are not checked"
                    );
                }
                fires.insert(name);
            }
        }
    }
    for rule in rules(ALERTS) {
        assert!(
            fires.contains(&rule.name),
            "no case where {} fires",
            rule.name
        );
        assert!(
            silent.contains(&rule.name),
            "no case where {} must not fire",
            rule.name
        );
    }
}

#[test]
fn every_alert_has_a_severity_and_says_what_to_do() {
    for Rule { name, body, .. } in rules(ALERTS) {
        let severity = body["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["critical", "warning"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        let summary = body["annotations"]["summary"].as_str().unwrap_or_default();
        let description = body["annotations"]["description"]
            .as_str()
            .unwrap_or_default();
        assert!(!summary.is_empty(), "{name}: no summary");
        // Where to look: the node by name, and a command to run there.
        assert!(
            description.contains("ssh"),
            "{name}: the description says no command to run: {description}"
        );
        assert!(
            description.contains("{{ $labels.host }}") || description.contains("$labels.node"),
            "{name}: the description names no node: {description}"
        );
    }
}

/// Labels of `metric` in the exposition.
fn labels_of(e: &Exposition, metric: &str) -> BTreeSet<String> {
    e.families
        .get(metric)
        .map(|f| {
            f.samples
                .iter()
                .flat_map(|(l, _)| l.keys().cloned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_metric_and_label_a_rule_names_is_one_strata_serve_exports() {
    // 905 s into the demo's story every kind of series is there: climbs, an OOM forecast
    // (strata_oom_forecast_seconds is served only while one is active: at 905 PID 60112's,
    // until about 960), fragmentation with retries, a zombie context, findings by device
    // (tests/integration/serve_prometheus.rs).
    let server = Server::start(&["--demo", "--demo-at", "905", "--demo-speed", "1"], &[]);
    let e = server.metrics();
    let mut strata_labels: BTreeSet<String> = e
        .families
        .keys()
        .filter(|m| m.starts_with("strata_"))
        .flat_map(|m| labels_of(&e, m))
        .collect();
    strata_labels.extend(OTHER_LABELS.iter().map(|l| l.to_string()));
    let all: Vec<Rule> = rules(RULES).into_iter().chain(rules(ALERTS)).collect();
    let recorded: BTreeSet<&str> = all
        .iter()
        .filter(|r| r.body.get("record").is_some())
        .map(|r| r.name.as_str())
        .collect();
    let mut exported_names = BTreeSet::new();
    for rule in &all {
        let (metrics, labels) = names(&rule.expr);
        for metric in &metrics {
            if metric.contains(':') {
                assert!(
                    recorded.contains(metric.as_str()),
                    "{}: {metric} is no recording rule",
                    rule.name
                );
            } else {
                let family = e.families.get(metric);
                assert!(
                    family.is_some_and(|f| !f.samples.is_empty()),
                    "{}: strata serve --demo exports no {metric}; it has {:?}",
                    rule.name,
                    e.order
                );
                exported_names.insert(metric.clone());
            }
        }
        for label in &labels {
            assert!(
                strata_labels.contains(label),
                "{}: no strata metric has the label {label}",
                rule.name
            );
        }
    }
    // The scanner found the metrics the rules are about (it reads them at all).
    for metric in [
        "strata_gpu_layer_bytes",
        "strata_mig_layer_bytes",
        "strata_findings",
        "strata_device_findings",
        "strata_oom_forecast_seconds",
        "strata_climb_rate_bytes_per_second",
        "strata_process_used_bytes",
        "strata_process_alloc_retries_total",
        "strata_sample_age_seconds",
    ] {
        assert!(exported_names.contains(metric), "no rule reads {metric}");
    }
}

#[test]
fn a_real_prometheus_evaluates_the_rules_on_the_demo() {
    let server = Server::start(&["--demo", "--demo-at", "905", "--demo-speed", "1"], &[]);
    let (rules_file, alerts_file) = (path(RULES), path(ALERTS));
    let prometheus = start_prometheus(&server.addr, &[&rules_file, &alerts_file]);
    prometheus.wait_ready(Duration::from_secs(20));
    let records: Vec<String> = rules(RULES).into_iter().map(|r| r.name).collect();
    // Every recording rule has series once Prometheus has scraped and evaluated.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let empty: Vec<&String> = records
            .iter()
            .filter(|r| query(&prometheus, r).is_empty())
            .collect();
        if empty.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after 30 s these recording rules have no series: {empty:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Used is total less free as strata serves them, for every GPU and MIG instance
    // (the demo moves on 1 story second a second: compared at one instant of Prometheus's).
    let per_uuid = |promql: &str| -> BTreeMap<String, f64> {
        query(&prometheus, promql)
            .into_iter()
            .map(|(l, v)| (l["uuid"].clone(), v))
            .collect()
    };
    let used = per_uuid("strata_device:memory_used_bytes:sum");
    let free = per_uuid(
        r#"sum by (uuid) (strata_gpu_layer_bytes{layer="free"}) or sum by (uuid) (strata_mig_layer_bytes{layer="free"})"#,
    );
    let total = per_uuid(
        "sum by (uuid) (strata_gpu_memory_total_bytes) or sum by (uuid) (strata_mig_memory_total_bytes)",
    );
    assert_eq!(used.len(), 7, "4 GPUs and 3 MIG instances: {used:?}");
    for (uuid, used) in &used {
        assert_eq!(*used, total[uuid] - free[uuid], "{uuid}");
    }
    // Each device row names its node as strata_node_info does.
    for (labels, _) in query(&prometheus, "strata_device:urgency:score") {
        assert_eq!(labels["host"], "demo-node", "{labels:?}");
        assert!(["gpu", "mig"].contains(&labels["device_type"].as_str()));
    }
    // Each device's worst finding is its own, as strata_device_findings has it (the demo's
    // GPU 2 a critical zombie, the MIG instance of PID 60112 a critical forecast, GPU 0
    // none), not its node's copied to every device.
    let mut worst: BTreeMap<String, f64> = per_uuid("strata_device:info:max")
        .into_keys()
        .map(|uuid| (uuid, 0.0))
        .collect();
    for (labels, count) in query(&prometheus, "strata_device_findings") {
        let rank = match labels["severity"].as_str() {
            "critical" => 3.0,
            "warning" => 2.0,
            "info" => 1.0,
            other => panic!("severity {other}"),
        };
        if count > 0.0 {
            let w = worst.entry(labels["uuid"].clone()).or_default();
            *w = w.max(rank);
        }
    }
    assert_eq!(per_uuid("strata_device:finding_severity:max"), worst);
    assert!(
        worst.values().any(|&w| w == 0.0) && worst.values().any(|&w| w == 3.0),
        "the demo has devices with no finding and with a critical one: {worst:?}"
    );
    // The job's rank holding most keeps its rank.
    let top = query(&prometheus, "strata_job:process_used_bytes:topk1");
    assert!(
        top.iter()
            .any(|(l, _)| l.get("slurm_job").is_some() && l.get("rank").is_some()),
        "{top:?}"
    );
    // Every expression of the fleet dashboard finds data, for every node.
    for (expr, _) in expressions(&fleet_dashboard()) {
        let expr = expr.replace("$node", ".+");
        let promql = match expr
            .strip_prefix("label_values(")
            .and_then(|rest| rest.strip_suffix(')'))
            .and_then(|inner| inner.rsplit_once(", "))
        {
            Some((selector, _)) => selector.to_string(),
            None => expr.clone(),
        };
        assert!(
            !query(&prometheus, &promql).is_empty(),
            "the fleet dashboard's {promql} finds nothing"
        );
    }
}

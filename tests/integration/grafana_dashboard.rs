//! The Grafana dashboards ask only for what exists. `assets/grafana/strata.json`: every
//! metric a PromQL expression or variable names is in the exposition of `strata serve --demo`
//! (with samples), every label it groups, matches or shows exists on those metrics (or is one
//! Prometheus adds: instance, job). `assets/grafana/strata-fleet.json`: every name with a
//! colon is a recording rule of `assets/prometheus/strata-rules.yml`, every label one that
//! rule can carry, and its device table ranks by urgency. In both, every `$variable` is
//! defined. (tests/integration/serve_prometheus.rs runs the first's expressions through a
//! real Prometheus; tests/integration/prometheus_rules.rs the fleet's, with the rules loaded.)

use crate::common;

use common::exposition::{Exposition, Server};
use common::grafana::{dashboard, expressions, fleet_dashboard};
use common::promql::names;
use std::collections::{BTreeMap, BTreeSet};

/// Labels Prometheus attaches to every scraped series.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

/// The labels a legend shows: `{{label}}`.
fn legend_labels(legend: &str) -> BTreeSet<String> {
    legend
        .split("{{")
        .skip(1)
        .filter_map(|s| s.split_once("}}"))
        .map(|(l, _)| l.trim().to_string())
        .collect()
}

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
fn the_dashboard_names_only_metrics_and_labels_that_strata_serve_exports() {
    let dashboard = dashboard();
    // Story speed 1: the OOM forecast the rules read is served from 905 to about 960 s of
    // story, which is 55 s of a loaded machine here rather than 5.5 at the default speed.
    let server = Server::start(&["--demo", "--demo-at", "905", "--demo-speed", "1"], &[]);
    let e = server.metrics();
    let exprs = expressions(&dashboard);
    assert!(exprs.len() >= 8, "{exprs:?}");
    let mut named = BTreeSet::new();
    for (expr, legend) in &exprs {
        let (metrics, labels) = names(expr);
        assert!(!metrics.is_empty(), "no strata metric in {expr}");
        let mut known: BTreeSet<String> = TARGET_LABELS.iter().map(|l| l.to_string()).collect();
        for metric in &metrics {
            let family = e.families.get(metric);
            assert!(
                family.is_some_and(|f| !f.samples.is_empty()),
                "{expr}: strata serve --demo exports no {metric}"
            );
            known.extend(labels_of(&e, metric));
            named.insert(metric.clone());
        }
        for label in &labels {
            assert!(
                known.contains(label),
                "{expr}: no metric of it has the label {label}"
            );
        }
        if let Some(legend) = legend {
            for label in legend_labels(legend) {
                assert!(
                    known.contains(&label),
                    "{expr}: legend {{{{{label}}}}} is no label"
                );
                // After `sum by (...)`, only those labels are left.
                if expr.contains(" by (") {
                    assert!(labels.contains(&label), "{expr}: {label} is summed away");
                }
            }
        }
    }
    // The three things the dashboard is for.
    for metric in [
        "strata_gpu_layer_bytes",
        "strata_mig_layer_bytes",
        "strata_climb_rate_bytes_per_second",
        "strata_process_fragmentation_ratio",
    ] {
        assert!(named.contains(metric), "the dashboard never shows {metric}");
    }
}

/// Labels the recording rules make themselves (with label_replace, whose strings the name
/// scanner does not read).
const RULE_MADE_LABELS: [&str; 1] = ["device_type"];

/// The labels a recording rule's series can carry: those its expression names, and those of
/// the metrics and rules it reads (more than it keeps, which is enough to catch a name that
/// none of them has).
fn rule_labels(
    record: &str,
    exprs: &BTreeMap<String, String>,
    e: &Exposition,
    seen: &mut BTreeSet<String>,
) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = TARGET_LABELS
        .iter()
        .chain(RULE_MADE_LABELS.iter())
        .map(|l| l.to_string())
        .collect();
    if !seen.insert(record.to_string()) {
        return out;
    }
    let (metrics, labels) = names(&exprs[record]);
    out.extend(labels);
    for metric in metrics {
        if exprs.contains_key(&metric) {
            out.extend(rule_labels(&metric, exprs, e, seen));
        } else {
            out.extend(labels_of(e, &metric));
        }
    }
    out
}

#[test]
fn the_fleet_dashboard_reads_recording_rules_with_their_labels() {
    let dashboard = fleet_dashboard();
    let records: BTreeMap<String, String> = common::rules::rules("strata-rules.yml")
        .into_iter()
        .map(|r| (r.name, r.expr))
        .collect();
    // Story speed 1: the OOM forecast the rules read is served from 905 to about 960 s of
    // story, which is 55 s of a loaded machine here rather than 5.5 at the default speed.
    let server = Server::start(&["--demo", "--demo-at", "905", "--demo-speed", "1"], &[]);
    let e = server.metrics();
    let exprs = expressions(&dashboard);
    assert!(exprs.len() >= 10, "{exprs:?}");
    let mut named = BTreeSet::new();
    for (expr, _) in &exprs {
        let (metrics, labels) = names(expr);
        assert!(!metrics.is_empty(), "no strata metric in {expr}");
        let mut known = BTreeSet::new();
        for metric in &metrics {
            if metric.contains(':') {
                assert!(
                    records.contains_key(metric),
                    "{expr}: {metric} is no recording rule of strata-rules.yml"
                );
                known.extend(rule_labels(metric, &records, &e, &mut BTreeSet::new()));
            } else {
                let family = e.families.get(metric);
                assert!(
                    family.is_some_and(|f| !f.samples.is_empty()),
                    "{expr}: strata serve --demo exports no {metric}"
                );
                known.extend(labels_of(&e, metric));
            }
            named.insert(metric.clone());
        }
        for label in &labels {
            assert!(
                known.contains(label),
                "{expr}: no series of it has the label {label}"
            );
        }
    }
    // What the fleet page is for: devices ranked by urgency, with each device's own worst
    // finding, the shortest OOM forecast and climbs beside; jobs across their ranks, and
    // the rank that holds most.
    for metric in [
        "strata_device:urgency:score",
        "strata_device:finding_severity:max",
        "strata_device:oom_forecast_seconds:min",
        "strata_device:climb_rate_bytes_per_second:max",
        "strata_job:process_used_bytes:max",
        "strata_job:process_used_bytes:topk1",
    ] {
        assert!(
            named.contains(metric),
            "the fleet page never shows {metric}"
        );
    }
    let panels = dashboard["panels"].as_array().expect("panels");
    let ranked = panels
        .iter()
        .find(|p| p["title"] == "Devices ranked by urgency")
        .expect("the device table");
    assert_eq!(ranked["type"], "table");
    assert_eq!(
        ranked["options"]["sortBy"][0],
        serde_json::json!({"displayName": "urgency", "desc": true})
    );
    let first = &ranked["targets"][0];
    assert!(
        first["expr"]
            .as_str()
            .is_some_and(|x| x.contains("strata_device:urgency:score")),
        "{first}"
    );
}

#[test]
fn every_variable_used_is_defined() {
    for dashboard in [dashboard(), fleet_dashboard()] {
        variables_are_defined(&dashboard);
    }
}

fn variables_are_defined(dashboard: &serde_json::Value) {
    let defined: BTreeSet<String> = dashboard["templating"]["list"]
        .as_array()
        .expect("variables")
        .iter()
        .filter_map(|v| v["name"].as_str().map(str::to_string))
        .collect();
    let text = dashboard.to_string();
    let mut used = BTreeSet::new();
    for part in text.split('$').skip(1) {
        let name: String = part
            .trim_start_matches('{')
            .chars()
            .take_while(|&c| c.is_ascii_alphanumeric() || c == '_')
            .collect();
        if !name.is_empty() && !name.starts_with("__") {
            used.insert(name);
        }
    }
    assert!(used.contains("node"), "{used:?}");
    for name in &used {
        assert!(
            defined.contains(name),
            "${name} is not a variable: {defined:?}"
        );
    }
    // Panel ids are unique (Grafana keys state by them).
    let mut ids = BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        let id = panel["id"].as_u64().expect("an id");
        assert!(ids.insert(id), "id {id} twice");
    }
}

#[test]
fn the_name_scanner_finds_metrics_and_labels() {
    // The scanner itself, on an expression whose names are known.
    let (metrics, labels) = names(
        r#"sum by (gpu, layer) (strata_gpu_layer_bytes{instance=~"$node", layer!="free"}) / on (uuid) strata_x_total"#,
    );
    assert_eq!(
        metrics,
        BTreeSet::from([
            "strata_gpu_layer_bytes".to_string(),
            "strata_x_total".to_string()
        ])
    );
    assert_eq!(
        labels,
        ["gpu", "layer", "instance", "uuid"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    let (metrics, labels) = names(r#"label_values(strata_node_info{a="b"}, instance)"#);
    assert_eq!(metrics, BTreeSet::from(["strata_node_info".to_string()]));
    assert_eq!(
        labels,
        BTreeSet::from(["a".to_string(), "instance".to_string()])
    );
}

//! The Grafana dashboard (`assets/grafana/strata.json`) asks only for what `strata serve`
//! exports: every metric a PromQL expression or variable names is in the exposition of
//! `strata serve --demo` (with samples), every label it groups, matches or shows exists on
//! those metrics (or is one Prometheus adds: instance, job), and every `$variable` is
//! defined. (tests/integration/serve_prometheus.rs runs each expression through a real Prometheus.)

use crate::common;

use common::exposition::{Exposition, Server};
use common::grafana::{dashboard, expressions};
use std::collections::BTreeSet;

/// Labels Prometheus attaches to every scraped series.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// The expression with string literals emptied (their contents are not names).
fn without_strings(expr: &str) -> String {
    let mut out = String::new();
    let mut quote = None;
    let mut escaped = false;
    for c in expr.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                    out.push(c);
                }
            }
            None => {
                if c == '"' || c == '\'' || c == '`' {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

/// Identifiers with where each starts.
fn idents(expr: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in expr
        .char_indices()
        .chain(std::iter::once((expr.len(), ' ')))
    {
        match (start, is_ident(c)) {
            (None, true) if !c.is_ascii_digit() && c != '$' => start = Some(i),
            (Some(s), false) => {
                // A `$var` is a variable, not a name.
                if s == 0 || !expr[..s].ends_with('$') {
                    out.push((s, expr[s..i].to_string()));
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Metric names, and label names (matched in `{}`, or listed after by/without/on/ignoring/
/// group_left/group_right, or label_values' second argument).
fn names(expr: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let stripped = without_strings(expr);
    let mut metrics = BTreeSet::new();
    let mut labels = BTreeSet::new();
    let tokens = idents(&stripped);
    for (i, (at, name)) in tokens.iter().enumerate() {
        let after = stripped[at + name.len()..].trim_start();
        if name.starts_with("strata_") && !after.starts_with(['=', '!']) {
            metrics.insert(name.clone());
            continue;
        }
        if ["=~", "!~", "!=", "="]
            .iter()
            .any(|op| after.starts_with(op))
            && !after.starts_with("==")
        {
            labels.insert(name.clone());
            continue;
        }
        let grouping = [
            "by",
            "without",
            "on",
            "ignoring",
            "group_left",
            "group_right",
        ];
        if grouping.contains(&name.as_str()) && after.starts_with('(') {
            let list = &after[1..after.find(')').expect("a closed list")];
            labels.extend(
                list.split(',')
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string),
            );
        }
        if name == "label_values" {
            if let Some((_, label)) = tokens
                .get(i + 1..)
                .and_then(|rest| rest.iter().find(|(a, _)| stripped[..*a].ends_with(", ")))
            {
                labels.insert(label.clone());
            }
        }
    }
    (metrics, labels)
}

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
    let server = Server::start(&["--demo", "--demo-at", "905"], &[]);
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

#[test]
fn every_variable_used_is_defined() {
    let dashboard = dashboard();
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

//! A real Prometheus server (Debian's `prometheus` package; `.ci/run` installs it) scrapes
//! `strata serve --demo` every second, on loopback, with a temporary config and data dir.
//! PromQL through its HTTP API returns the layers of every demo GPU and MIG instance, and
//! they add up to each device's total. `promtool check metrics` (same package) lints the
//! exposition. A missing binary fails with a hint: this test is never skipped.

use crate::common;

use common::exposition::{get, parse, Server};
use common::grafana::{dashboard, expressions};
use common::prometheus::{encode_query, query, start_prometheus, tool};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Each device's layers, `uuid → {layer}`, from a vector of layer samples.
fn layer_sets(samples: &[(BTreeMap<String, String>, f64)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut sets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (labels, _) in samples {
        sets.entry(labels["uuid"].clone())
            .or_default()
            .insert(labels["layer"].clone());
    }
    sets
}

#[test]
fn prometheus_scrapes_serve_demo_and_the_layers_add_up() {
    let promtool = tool("promtool");
    let server = Server::start(&["--demo", "--demo-at", "905"], &[]);
    // The exposition as strata serves it: promtool's lint (names, units, _total) passes.
    let text = server.metrics_text();
    let mut lint = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    lint.stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("to promtool");
    let linted = lint.wait_with_output().expect("promtool");
    assert!(
        linted.status.success() && linted.stdout.is_empty() && linted.stderr.is_empty(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&linted.stdout),
        String::from_utf8_lossy(&linted.stderr)
    );
    let direct = parse(&text);

    let prometheus = start_prometheus(&server.addr, &[]);
    // Wait for a scrape that has every GPU's and MIG instance's layers.
    let deadline = Instant::now() + Duration::from_secs(20);
    // The demo moves on 10 story seconds a sample (its fine-tune ends at 960 s, changing a
    // MIG instance's layers), so Prometheus's last scrape is compared with the exposition
    // read right after it, until the two are of the same sample.
    let (gpus, migs, same_sample) = loop {
        let up = get(&prometheus.addr, "/-/ready", None).is_ok_and(|r| r.status == 200);
        if up {
            let gpus = query(&prometheus, "strata_gpu_layer_bytes");
            let migs = query(&prometheus, "strata_mig_layer_bytes");
            let now = parse(&server.metrics_text());
            let same = layer_sets(&gpus) == layer_sets(&now.select("strata_gpu_layer_bytes", &[]))
                && layer_sets(&migs) == layer_sets(&now.select("strata_mig_layer_bytes", &[]));
            if layer_sets(&gpus).len() == 4 && layer_sets(&migs).len() == 3 && same {
                break (gpus, migs, now);
            }
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus scraped nothing in 20 s that strata serves: {:?} vs {:?}",
            layer_sets(&query(&prometheus, "strata_gpu_layer_bytes")),
            layer_sets(&direct.select("strata_gpu_layer_bytes", &[]))
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // Every layer strata exports for each device reached Prometheus: the same sets.
    assert_eq!(
        layer_sets(&gpus),
        layer_sets(&same_sample.select("strata_gpu_layer_bytes", &[]))
    );
    assert_eq!(
        layer_sets(&migs),
        layer_sets(&same_sample.select("strata_mig_layer_bytes", &[]))
    );
    // At 905 s (the first sample, read before Prometheus started) every GPU's layers are
    // known; later a feed may go quiet and a layer with it.
    for layers in layer_sets(&direct.select("strata_gpu_layer_bytes", &[])).values() {
        assert_eq!(
            layers.len(),
            8,
            "the demo knows all 8 layers of each GPU: {layers:?}"
        );
    }
    for (labels, _) in &gpus {
        assert_eq!(labels["job"], "strata");
        assert_eq!(labels["instance"], server.addr);
    }
    // The layers add up to each device's total, in PromQL, at one evaluation instant.
    for (metric, total, count) in [
        ("strata_gpu_layer_bytes", "strata_gpu_memory_total_bytes", 4),
        ("strata_mig_layer_bytes", "strata_mig_memory_total_bytes", 3),
    ] {
        let promql = format!("sum by (uuid) ({metric}) - on (uuid) sum by (uuid) ({total})");
        let differences = query(&prometheus, &promql);
        assert_eq!(differences.len(), count, "{promql}");
        for (labels, difference) in differences {
            assert_eq!(difference, 0.0, "{} does not add up", labels["uuid"]);
        }
        let totals = query(&prometheus, total);
        assert_eq!(totals.len(), count);
        assert!(totals.iter().all(|(_, v)| *v > 1e9), "{totals:?}");
    }
    // A finding count and a climb rate, as the dashboard's fleet table reads them.
    let climbs = query(&prometheus, "strata_climb_rate_bytes_per_second");
    assert!(!climbs.is_empty(), "the demo climbs at 905 s");
    let findings = query(&prometheus, "sum(strata_findings)");
    assert!(findings[0].1 >= 1.0, "{findings:?}");
    // Every expression of the Grafana dashboard runs, and finds data, with its variables
    // set to every node and GPU.
    for (expr, _) in expressions(&dashboard()) {
        let expr = expr.replace("$node", ".+").replace("$gpu", ".+");
        // Grafana's label_values(SELECTOR, LABEL) is no PromQL: ask for the selector, and
        // for the label on what it finds.
        let (promql, label) = match expr
            .strip_prefix("label_values(")
            .and_then(|rest| rest.strip_suffix(')'))
            .and_then(|inner| inner.rsplit_once(", "))
        {
            Some((selector, label)) => (selector.to_string(), Some(label.to_string())),
            None => (expr.clone(), None),
        };
        let path = format!("/api/v1/query?query={}", encode_query(&promql));
        let response = get(&prometheus.addr, &path, None).expect("HTTP API");
        assert_eq!(response.status, 200, "{promql}: {}", response.body);
        let body: Value = serde_json::from_str(&response.body).expect("JSON");
        let result = &body["data"]["result"];
        let found = result.as_array().is_some_and(|r| !r.is_empty());
        assert!(found, "the dashboard's {promql} finds nothing: {body}");
        if let Some(label) = label {
            let with_label = result.as_array().into_iter().flatten();
            let values: Vec<_> = with_label
                .filter_map(|r| r["metric"][&label].as_str())
                .collect();
            assert!(!values.is_empty(), "{expr}: no series has {label}");
        }
    }
}

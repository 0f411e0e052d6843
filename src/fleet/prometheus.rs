//! `strata fleet --prometheus URL`: the fleet from Prometheus's HTTP API, a few instant
//! queries a refresh, each asking only for strata's series the view uses. Prometheus
//! scrapes and stores; the fleet only reads.

use super::build::Target;
use super::http::Client;
use super::{Read, Series};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The series of a node's devices and findings the view reads, current values.
const DEVICE_SERIES: &str = "strata_node_info|strata_sample_age_seconds|strata_sample_interval_seconds|strata_gpu_memory_total_bytes|strata_gpu_layer_bytes|strata_mig_memory_total_bytes|strata_mig_layer_bytes|strata_device_findings|strata_oom_forecast_seconds|strata_climb_rate_bytes_per_second";

/// The queries of one refresh, by what each is for. A node seen in the last hour and not
/// now is down, never dropped: its target's `up` says why.
pub fn queries() -> Vec<(&'static str, String)> {
    vec![
        ("nodes", "max_over_time(strata_node_info[1h])".to_string()),
        (
            "up",
            "up and on(instance) max_over_time(strata_node_info[1h])".to_string(),
        ),
        ("series", format!("{{__name__=~\"{DEVICE_SERIES}\"}}")),
        ("scraped", "timestamp(strata_sample_age_seconds)".to_string()),
        (
            "jobs",
            "{__name__=~\"strata_process_used_bytes|strata_process_layer_bytes\",slurm_job!=\"\"} or {__name__=~\"strata_process_used_bytes|strata_process_layer_bytes\",run!=\"\"}"
                .to_string(),
        ),
    ]
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
    let url = format!("{}/api/v1/query", base.trim_end_matches('/'));
    let at = format!("{time:.3}");
    let (status, body) = client.get_with(&url, &[("query", promql), ("time", &at)])?;
    let v: Value = serde_json::from_str(&body).map_err(|_| {
        if status == 200 {
            "its answer is not Prometheus's JSON (hint: --prometheus is the server's base URL, e.g. http://prometheus:9090)".to_string()
        } else if status == 401 || status == 403 {
            format!("HTTP {status} ({})", Client::AUTH_HINT)
        } else {
            format!("HTTP {status}")
        }
    })?;
    if v["status"] != "success" {
        let kind = v["errorType"].as_str().unwrap_or("error");
        let error = v["error"].as_str().unwrap_or("no reason given");
        let hint = if status == 401 || status == 403 {
            format!("; {}", Client::AUTH_HINT)
        } else {
            String::new()
        };
        return Err(format!(
            "query {what}: {} ({}{hint})",
            crate::text::clean(error),
            crate::text::clean(kind)
        ));
    }
    for w in v["warnings"].as_array().into_iter().flatten() {
        if let Some(w) = w.as_str() {
            problems.push(format!("query {what}: {}", crate::text::clean(w)));
        }
    }
    if v["data"]["resultType"] != "vector" {
        return Err(format!("query {what}: not an instant vector"));
    }
    let mut out = Vec::new();
    for r in v["data"]["result"].as_array().into_iter().flatten() {
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
    Ok(out)
}

/// Reads the fleet at `time`: its targets, their series, and what went wrong on the way.
/// `Err` when Prometheus could not be asked at all.
pub fn read(client: &Client, base: &str, time: f64) -> Result<Read, String> {
    let mut problems = Vec::new();
    let mut got: BTreeMap<&str, Vec<Series>> = BTreeMap::new();
    for (what, promql) in queries() {
        match query(client, base, what, &promql, time, &mut problems) {
            Ok(v) => {
                got.insert(what, v);
            }
            // Without the nodes nothing can be drawn; without another, less can.
            Err(why) if what == "nodes" || what == "series" => {
                return Err(format!("Prometheus at {}: {why}", crate::text::clean(base)))
            }
            Err(why) => problems.push(why),
        }
    }
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut up: BTreeMap<String, f64> = BTreeMap::new();
    for s in got.get("nodes").into_iter().flatten() {
        if let Some(i) = s.labels.get("instance") {
            seen.insert(i.clone());
        }
    }
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
    let mut series = got.remove("series").unwrap_or_default();
    let current: BTreeSet<String> = series
        .iter()
        .filter(|s| s.name == "strata_node_info")
        .filter_map(|s| s.labels.get("instance").cloned())
        .collect();
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
    series.extend(got.remove("jobs").unwrap_or_default());
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
        .collect();
    Ok(Read {
        targets,
        series,
        problems,
    })
}

//! A node opened in the fleet (Enter): its processes now, and each device's used memory over
//! the last hour where Prometheus keeps it (a range query); read when the node is opened and
//! at each refresh while it is open, for that node only.

use super::http::Client;
use super::Series;
use crate::layers::Layer;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// How far back a device's history goes, and its step.
pub const HISTORY_SECS: f64 = 3600.0;
pub const HISTORY_STEP: f64 = 60.0;

/// A process of the node open.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Process {
    pub gpu: String,
    pub uuid: String,
    pub pid: String,
    pub user: Option<String>,
    pub command: Option<String>,
    /// Its owner in a few words: `slurm 81234 rank 3`, `run llm-a rank 0`, `pod ns/name`.
    pub owner: Option<String>,
    pub used: Option<u64>,
    pub live: Option<u64>,
    /// Its climb, bytes a second, where its node raised one.
    pub climb_bytes_per_sec: Option<f64>,
}

/// A finding's evidence as the node's series give it (what its `strata serve` exports of
/// it): a climb's rate, its series and the layer that grows, or a forecast's time left; and
/// the process, where the finding names one.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Evidence {
    pub uuid: String,
    /// `climb` or `oom_forecast`.
    pub kind: &'static str,
    pub pid: Option<String>,
    /// Its user, command and owner, as far as they are known.
    pub who: Option<String>,
    /// A climb's series (`allocated`, `reserved`, `used`...) and cause (the layer).
    pub series: Option<String>,
    pub cause: Option<String>,
    pub bytes_per_sec: Option<f64>,
    pub eta_secs: Option<f64>,
    /// A climb's own figure (its process's layer that grows, else its used memory) at each
    /// step of the last hour, oldest first, where Prometheus keeps it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Option<f64>>>,
}

/// The evidence of the climbs and forecasts among a node's series, by device, the soonest
/// forecast and the fastest climb first.
pub fn evidence(series: &[Series]) -> Vec<Evidence> {
    let mut out = Vec::new();
    for s in series {
        let (kind, rate, eta) = match s.name.as_str() {
            "strata_climb_rate_bytes_per_second" if s.value.is_finite() => {
                ("climb", Some(s.value), None)
            }
            "strata_oom_forecast_seconds" if s.value.is_finite() => {
                ("oom_forecast", None, Some(s.value))
            }
            _ => continue,
        };
        let who: Vec<String> = [some_clean(s, "user"), some_clean(s, "command"), owner(s)]
            .into_iter()
            .flatten()
            .collect();
        out.push(Evidence {
            uuid: crate::text::clean(label(s, "uuid")).into_owned(),
            kind,
            pid: some_clean(s, "pid"),
            who: (!who.is_empty()).then(|| who.join(" · ")),
            series: some_clean(s, "series"),
            cause: some_clean(s, "cause"),
            bytes_per_sec: rate,
            eta_secs: eta,
            history: None,
        });
    }
    out.sort_by(|a, b| {
        (a.uuid.as_str(), a.kind)
            .cmp(&(b.uuid.as_str(), b.kind))
            .then_with(|| {
                let key = |e: &Evidence| e.eta_secs.unwrap_or(-e.bytes_per_sec.unwrap_or(0.0));
                key(a).total_cmp(&key(b))
            })
    });
    out
}

/// What the node open shows besides its devices.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Detail {
    pub instance: String,
    pub processes: Vec<Process>,
    /// Its findings' evidence, where its series carry it.
    pub evidence: Vec<Evidence>,
    /// By device UUID: used bytes at each step of the last hour, oldest first (`None` where
    /// Prometheus has no sample).
    pub history: BTreeMap<String, Vec<Option<f64>>>,
    /// Why there is no history, where there is none.
    pub no_history: Option<String>,
    pub problems: Vec<String>,
}

fn label<'a>(s: &'a Series, key: &str) -> &'a str {
    s.labels.get(key).map_or("", String::as_str)
}

fn some_clean(s: &Series, key: &str) -> Option<String> {
    Some(label(s, key))
        .filter(|v| !v.is_empty())
        .map(|v| crate::text::clean(v).into_owned())
}

fn owner(s: &Series) -> Option<String> {
    let rank = some_clean(s, "rank")
        .map(|r| format!(" rank {r}"))
        .unwrap_or_default();
    if let Some(job) = some_clean(s, "slurm_job") {
        return Some(format!("slurm {job}{rank}"));
    }
    if let Some(run) = some_clean(s, "run") {
        return Some(format!("run {run}{rank}"));
    }
    match (some_clean(s, "namespace"), some_clean(s, "pod")) {
        (Some(ns), Some(pod)) => Some(format!("pod {ns}/{pod}")),
        (None, Some(pod)) => Some(format!("pod {pod}")),
        _ => some_clean(s, "container").map(|c| format!("container {c}")),
    }
}

/// The node's processes from its series (the per-process and climb series of one instance).
pub fn processes(series: &[Series]) -> Vec<Process> {
    let mut by: BTreeMap<(String, String), Process> = BTreeMap::new();
    for s in series {
        let is_used = s.name == "strata_process_used_bytes";
        let is_live =
            s.name == "strata_process_layer_bytes" && label(s, "layer") == Layer::Live.name();
        if !(is_used || is_live) {
            continue;
        }
        let key = (label(s, "uuid").to_string(), label(s, "pid").to_string());
        let p = by.entry(key).or_insert_with(|| Process {
            gpu: crate::text::clean(label(s, "gpu")).into_owned(),
            uuid: crate::text::clean(label(s, "uuid")).into_owned(),
            pid: crate::text::clean(label(s, "pid")).into_owned(),
            user: some_clean(s, "user"),
            command: some_clean(s, "command"),
            owner: owner(s),
            used: None,
            live: None,
            climb_bytes_per_sec: None,
        });
        let value = (s.value.is_finite() && s.value >= 0.0).then_some(s.value as u64);
        if is_used {
            p.used = value;
        } else {
            p.live = value;
        }
    }
    for s in series {
        if s.name == "strata_climb_rate_bytes_per_second" && s.value.is_finite() {
            let key = (label(s, "uuid").to_string(), label(s, "pid").to_string());
            if let Some(p) = by.get_mut(&key) {
                p.climb_bytes_per_sec =
                    Some(p.climb_bytes_per_sec.map_or(s.value, |c| c.max(s.value)));
            }
        }
    }
    let mut out: Vec<Process> = by.into_values().collect();
    out.sort_by(|a, b| b.used.cmp(&a.used).then_with(|| a.pid.cmp(&b.pid)));
    out
}

/// A PromQL string literal of `text`.
pub fn promql_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One call of Prometheus's HTTP API: its `data`, or why not. Its warnings go to `problems`.
/// The bytes of a query's parameters past which it is sent as a form (POST), not in the URL.
const LONG_QUERY: usize = 2048;

pub(super) fn api(
    client: &Client,
    base: &str,
    path: &str,
    params: &[(&str, &str)],
    what: &str,
    problems: &mut Vec<String>,
) -> Result<Value, String> {
    let url = format!("{}{path}", base.trim_end_matches('/'));
    // A long query (the rows picked, by name) goes as a form: a URL has limits on the way.
    let long = params.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() > LONG_QUERY;
    let (status, body) = if long {
        client.post_form(&url, params)?
    } else {
        client.get_with(&url, params)?
    };
    let mut v: Value = serde_json::from_str(&body).map_err(|_| {
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
    Ok(v["data"].take())
}

fn number(v: &Value) -> Option<f64> {
    v.as_str()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|x| x.is_finite())
}

/// The history of a range query's matrix: by `uuid`, a value at each step from `start`.
pub fn history(data: &Value, start: f64, steps: usize) -> BTreeMap<String, Vec<Option<f64>>> {
    let mut out = BTreeMap::new();
    for (metric, points) in matrix(data, start, steps) {
        if let Some(uuid) = metric["uuid"].as_str() {
            out.insert(crate::text::clean(uuid).into_owned(), points);
        }
    }
    out
}

/// Each series of a range query's matrix: its labels, and its value at each step from
/// `start` (`None` where it has none).
fn matrix(data: &Value, start: f64, steps: usize) -> Vec<(&Value, Vec<Option<f64>>)> {
    let mut out = Vec::new();
    for r in data["result"].as_array().into_iter().flatten() {
        let mut points = vec![None; steps];
        for pair in r["values"].as_array().into_iter().flatten() {
            let (Some(t), Some(v)) = (pair[0].as_f64(), number(&pair[1])) else {
                continue;
            };
            let i = ((t - start) / HISTORY_STEP).round();
            if i >= 0.0 && (i as usize) < steps {
                points[i as usize] = Some(v);
            }
        }
        out.push((&r["metric"], points));
    }
    out
}

/// The series a climb's history is read from: its process's layer that grows, where its
/// cause is a layer, else its used memory.
fn climb_figure(e: &Evidence) -> (&'static str, Option<&str>) {
    match e.cause.as_deref() {
        Some(cause) if Layer::ALL.iter().any(|l| l.name() == cause) => {
            ("strata_process_layer_bytes", Some(cause))
        }
        _ => ("strata_process_used_bytes", None),
    }
}

/// The range query of the climbing processes' figures on a node (`None` where no climb
/// names a process): their layers and used memory, by pid.
fn climbs_query(evidence: &[Evidence], instance: &str) -> Option<String> {
    let pids: std::collections::BTreeSet<&str> = evidence
        .iter()
        .filter(|e| e.kind == "climb")
        .filter_map(|e| e.pid.as_deref())
        .collect();
    if pids.is_empty() {
        return None;
    }
    let pids: Vec<&str> = pids.into_iter().collect();
    Some(format!(
        "{{__name__=~\"strata_process_layer_bytes|strata_process_used_bytes\",instance={},pid=~{}}}",
        promql_string(instance),
        promql_string(&super::window::one_of(&pids))
    ))
}

/// Gives each climb the history of its own figure from the answer of [`climbs_query`]: the
/// series of its device, process and layer (its used memory where its cause is no layer).
fn attach_climbs(evidence: &mut [Evidence], data: &Value, start: f64, steps: usize) {
    let series = matrix(data, start, steps);
    let text = |m: &Value, k: &str| crate::text::clean(m[k].as_str().unwrap_or("")).into_owned();
    for e in evidence.iter_mut().filter(|e| e.kind == "climb") {
        let Some(pid) = e.pid.clone() else { continue };
        let (name, layer) = climb_figure(e);
        e.history = series
            .iter()
            .find(|(m, _)| {
                m["__name__"] == name
                    && text(m, "uuid") == e.uuid
                    && text(m, "pid") == pid
                    && layer.is_none_or(|l| m["layer"] == l)
            })
            .map(|(_, points)| points.clone());
    }
}

/// The node open, from Prometheus at `now`.
pub fn from_prometheus(
    client: &Client,
    base: &str,
    instance: &str,
    now: f64,
) -> Result<Detail, String> {
    let mut problems = Vec::new();
    let i = promql_string(instance);
    let promql = format!(
        "{{__name__=~\"strata_process_used_bytes|strata_process_layer_bytes|strata_climb_rate_bytes_per_second|strata_oom_forecast_seconds\",instance={i}}}"
    );
    let at = format!("{now:.3}");
    let data = api(
        client,
        base,
        "/api/v1/query",
        &[("query", &promql), ("time", &at)],
        "processes",
        &mut problems,
    )?;
    let series = super::prometheus::vector(&data);
    let steps = (HISTORY_SECS / HISTORY_STEP) as usize + 1;
    // Steps that end now: the newest point is the node's present, whenever it was scraped.
    let start = now - HISTORY_SECS;
    let used = format!(
        "sum by (uuid) ({{__name__=~\"strata_gpu_layer_bytes|strata_mig_layer_bytes\",instance={i},layer!={}}})",
        promql_string(Layer::Free.name())
    );
    let (start_s, end_s, step_s) = (
        format!("{start:.3}"),
        format!("{:.3}", start + HISTORY_STEP * (steps - 1) as f64),
        format!("{HISTORY_STEP:.0}"),
    );
    let (history_map, no_history) = match api(
        client,
        base,
        "/api/v1/query_range",
        &[
            ("query", &used),
            ("start", &start_s),
            ("end", &end_s),
            ("step", &step_s),
        ],
        "history",
        &mut problems,
    ) {
        Ok(data) => (history(&data, start, steps), None),
        Err(why) => (BTreeMap::new(), Some(why)),
    };
    // Each climb's own figure over the hour: the evidence of a leak is its slope.
    let mut evidence = evidence(&series);
    if let Some(climbs) = climbs_query(&evidence, instance) {
        match api(
            client,
            base,
            "/api/v1/query_range",
            &[
                ("query", &climbs),
                ("start", &start_s),
                ("end", &end_s),
                ("step", &step_s),
            ],
            "climbs' history",
            &mut problems,
        ) {
            Ok(data) => attach_climbs(&mut evidence, &data, start, steps),
            Err(why) => problems.push(why),
        }
    }
    Ok(Detail {
        instance: instance.to_string(),
        processes: processes(&series),
        evidence,
        history: history_map,
        no_history,
        problems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node's climbs and forecasts are its findings' evidence on its page: the process,
    /// its owner, the rate or the time left; a forecast with no process names the device.
    #[test]
    fn climbs_and_forecasts_are_the_evidence_with_their_process() {
        let s = Series::of;
        let series = [
            s(
                "strata_climb_rate_bytes_per_second",
                &[
                    ("uuid", "GPU-a"),
                    ("pid", "7"),
                    ("user", "ml"),
                    ("command", "python\u{1b}[31m train.py"),
                    ("slurm_job", "9001"),
                    ("rank", "29"),
                    ("series", "allocated"),
                    ("cause", "live"),
                ],
                1e6,
            ),
            s(
                "strata_oom_forecast_seconds",
                &[("uuid", "GPU-a"), ("pid", "7")],
                600.0,
            ),
            s(
                "strata_oom_forecast_seconds",
                &[("uuid", "GPU-b")],
                f64::NAN,
            ),
            s(
                "strata_process_used_bytes",
                &[("uuid", "GPU-a"), ("pid", "7")],
                1.0,
            ),
        ];
        let e = evidence(&series);
        assert_eq!(e.len(), 2, "{e:?}");
        assert_eq!((e[0].kind, e[0].bytes_per_sec), ("climb", Some(1e6)));
        assert_eq!(
            e[0].who.as_deref(),
            Some("ml · python\u{fffd}[31m train.py · slurm 9001 rank 29"),
            "cleaned of the escape"
        );
        assert_eq!(
            (e[0].series.as_deref(), e[0].cause.as_deref()),
            (Some("allocated"), Some("live"))
        );
        assert_eq!(
            (e[1].kind, e[1].eta_secs, e[1].who.as_deref()),
            ("oom_forecast", Some(600.0), None)
        );
    }

    #[test]
    fn promql_strings_are_escaped() {
        assert_eq!(promql_string("10.0.0.1:9842"), "\"10.0.0.1:9842\"");
        assert_eq!(promql_string("a\"b\\c\nd"), "\"a\\\"b\\\\c\\nd\"");
    }

    #[test]
    fn a_matrix_becomes_a_history_by_step_with_gaps() {
        let data = serde_json::json!({"resultType": "matrix", "result": [
            {"metric": {"uuid": "GPU-a"}, "values": [[1000, "5"], [1120, "7"], [1180, "NaN"]]}
        ]});
        let h = history(&data, 1000.0, 4);
        assert_eq!(h["GPU-a"], [Some(5.0), None, Some(7.0), None]);
    }

    #[test]
    fn processes_with_their_owner_and_climb() {
        let s = Series::of;
        let p = [
            ("gpu", "0"),
            ("uuid", "G"),
            ("pid", "7"),
            ("slurm_job", "81"),
            ("rank", "3"),
        ];
        let q = [
            ("gpu", "1"),
            ("uuid", "H"),
            ("pid", "8"),
            ("namespace", "ns"),
            ("pod", "web\u{1b}[2J"),
        ];
        let got = processes(&[
            s("strata_process_used_bytes", &p, 10.0),
            s(
                "strata_process_layer_bytes",
                &[&p[..], &[("layer", "live")]].concat(),
                6.0,
            ),
            s("strata_process_used_bytes", &q, 20.0),
            s(
                "strata_climb_rate_bytes_per_second",
                &[("uuid", "G"), ("pid", "7")],
                99.0,
            ),
        ]);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].pid.as_str(), got[0].used), ("8", Some(20)));
        assert!(!got[0].owner.as_deref().unwrap().contains('\u{1b}'));
        assert_eq!(got[1].owner.as_deref(), Some("slurm 81 rank 3"));
        assert_eq!(
            (got[1].live, got[1].climb_bytes_per_sec),
            (Some(6), Some(99.0))
        );
    }

    /// Each climb gets the history of its own figure: its process's layer that grows on its
    /// device, else its used memory; a forecast and a climb with no series get none.
    #[test]
    fn each_climb_has_the_hour_of_its_own_figure() {
        let climb = |uuid: &str, pid: &str, cause: Option<&str>| Evidence {
            uuid: uuid.into(),
            kind: "climb",
            pid: Some(pid.into()),
            who: None,
            series: Some("allocated".into()),
            cause: cause.map(String::from),
            bytes_per_sec: Some(1.0),
            eta_secs: None,
            history: None,
        };
        let mut evidence = vec![
            climb("GPU-a", "7", Some("live")),
            climb("GPU-b", "7", Some("live")),
            climb("GPU-a", "8", None),
            climb("GPU-a", "9", Some("live")),
            Evidence {
                kind: "oom_forecast",
                bytes_per_sec: None,
                eta_secs: Some(60.0),
                ..climb("GPU-a", "7", Some("live"))
            },
        ];
        let q = climbs_query(&evidence, "n:1").expect("a query");
        assert_eq!(
            q,
            "{__name__=~\"strata_process_layer_bytes|strata_process_used_bytes\",instance=\"n:1\",pid=~\"(?:7|8|9)\"}"
        );
        assert_eq!(climbs_query(&evidence[4..], "n:1"), None);
        let series = |name: &str, uuid: &str, pid: &str, layer: Option<&str>, v: &str| {
            let mut metric = serde_json::json!({ "__name__": name, "uuid": uuid, "pid": pid });
            if let Some(l) = layer {
                metric["layer"] = l.into();
            }
            serde_json::json!({ "metric": metric, "values": [[1000.0, v], [1120.0, "5"]] })
        };
        let data = serde_json::json!({ "result": [
            series("strata_process_layer_bytes", "GPU-a", "7", Some("cached"), "100"),
            series("strata_process_layer_bytes", "GPU-a", "7", Some("live"), "1"),
            series("strata_process_layer_bytes", "GPU-b", "7", Some("live"), "2"),
            series("strata_process_used_bytes", "GPU-a", "8", None, "3"),
            series("strata_process_layer_bytes", "GPU-a", "8", Some("live"), "30"),
        ]});
        attach_climbs(&mut evidence, &data, 1000.0, 3);
        let got: Vec<Option<Vec<Option<f64>>>> =
            evidence.iter().map(|e| e.history.clone()).collect();
        assert_eq!(
            got,
            [
                Some(vec![Some(1.0), None, Some(5.0)]),
                Some(vec![Some(2.0), None, Some(5.0)]),
                Some(vec![Some(3.0), None, Some(5.0)]),
                None,
                None,
            ]
        );
    }
}

//! Scoring `strata analyze --json` against the corpus's labels, and the report
//! (`tests/corpus.rs`; the labels' format is in `tests/traces/README.md`).
//!
//! A finding matches an expected event when its kind is the same, its pid is the same (or
//! both are null), its device is the same where the label names one, its `evidence.cause`
//! is the same for a `climb` and its `evidence.class` for an `oom`, and it was not raised
//! more than [`EARLY_SECS`] before the event's start. An expected event counts as flagged
//! from the earliest finding that matches it; a climb is on time when that is within its
//! deadline. Some events say more: an OOM's `evidence` must be what the finding shows from
//! first to last; an `oom_forecast` must come at least [`FORECAST_LEAD_SECS`] before its
//! `oom_at` with a first ETA within [`FORECAST_ETA_ERROR`] of the truth; a climb of a job
//! with steps must be flagged within [`STEP_DEADLINE`] steps of `step_secs`, its first
//! `bytes_per_step` within [`BYTES_PER_STEP_ERROR`] of the truth.

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The finding kinds the corpus scores (the JSON contract).
pub const KINDS: [&str; 10] = [
    "climb",
    "fragmentation",
    "alloc_retries",
    "oom",
    "capacity",
    "zombie_context",
    "idle_holder",
    "unexplained_usage",
    "oom_forecast",
    "warm_up",
];
/// A climb's `evidence.cause`.
pub const CAUSES: [&str; 5] = [
    "live",
    "cached",
    "outside_pool",
    "unattributed",
    "no_process",
];
/// An OOM's `evidence.class`.
pub const CLASSES: [&str; 3] = ["capacity", "fragmentation", "uncertain"];

/// A finding raised this long before an event's labelled start was raised on what came
/// before it, not on the event.
pub const EARLY_SECS: f64 = 60.0;
/// Climbs this fast (MiB/min) must be flagged within [`FAST_DEADLINE_SECS`] of their start,
/// slower ones within [`SLOW_DEADLINE_SECS`].
pub const FAST_MIB_PER_MIN: f64 = 50.0;
pub const FAST_DEADLINE_SECS: f64 = 600.0;
pub const SLOW_DEADLINE_SECS: f64 = 1200.0;
/// A climb of a job that reports steps is flagged within this many steps.
pub const STEP_DEADLINE: f64 = 300.0;
/// Its first `bytes_per_step` is within this share of the truth.
pub const BYTES_PER_STEP_ERROR: f64 = 0.25;
/// A forecast comes at least this long before the OOM...
pub const FORECAST_LEAD_SECS: f64 = 300.0;
/// ...its first ETA within this share of the time actually left.
pub const FORECAST_ETA_ERROR: f64 = 0.3;

/// `<name>.labels.json`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Labels {
    pub description: String,
    /// How long the story lasts.
    pub minutes: f64,
    pub expect: Vec<Expected>,
    /// No `climb` (nor `oom_forecast`) may be raised on this trace at all.
    pub normal: bool,
    /// `exact`: every fed process's context and memory outside the pool within 5 % of the
    /// truth from its first pairing; `bounds`: where not, marked as bounds on the right
    /// side of it (every trace is held to that).
    #[serde(default)]
    pub layers: Option<String>,
    /// Finding kinds (any, scored or not) that must not be raised on this trace at all.
    #[serde(default)]
    pub never: Vec<String>,
}

/// One event a correct monitor must flag.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    pub kind: String,
    /// A climb's cause.
    #[serde(default)]
    pub cause: Option<String>,
    /// An OOM's class.
    #[serde(default)]
    pub class: Option<String>,
    pub pid: Option<u32>,
    /// When given, the finding must name this device.
    #[serde(default)]
    pub device_uuid: Option<String>,
    /// When the event starts (unix seconds).
    pub start: f64,
    /// A climb's rate.
    #[serde(default)]
    pub rate_mib_per_min: Option<f64>,
    /// A climb of a job that reports steps: the truth per step, and the seconds a step.
    #[serde(default)]
    pub bytes_per_step: Option<f64>,
    #[serde(default)]
    pub step_secs: Option<f64>,
    /// An `oom_forecast`: when the OOM happens.
    #[serde(default)]
    pub oom_at: Option<f64>,
    /// Figures the finding's evidence must show, first to last.
    #[serde(default)]
    pub evidence: Option<BTreeMap<String, Value>>,
}

impl Expected {
    /// The latest `since` that is on time: climbs only; other kinds need only be flagged.
    pub fn deadline(&self) -> Option<f64> {
        if let (Some(oom_at), "oom_forecast") = (self.oom_at, self.kind.as_str()) {
            return Some(oom_at - FORECAST_LEAD_SECS);
        }
        let rate = self.rate_mib_per_min?;
        if let (Some(secs), "climb") = (self.step_secs, self.kind.as_str()) {
            return Some(self.start + STEP_DEADLINE * secs);
        }
        (self.kind == "climb").then(|| {
            let secs = if rate >= FAST_MIB_PER_MIN {
                FAST_DEADLINE_SECS
            } else {
                SLOW_DEADLINE_SECS
            };
            self.start + secs
        })
    }

    fn describe(&self, origin: f64) -> String {
        let mut out = self.kind.clone();
        if let Some(qualifier) = self.cause.as_ref().or(self.class.as_ref()) {
            let _ = write!(out, "/{qualifier}");
        }
        let _ = write!(out, " {}", who(self.pid, self.device_uuid.as_deref()));
        let _ = write!(out, " from {}", offset(self.start - origin));
        if let Some(rate) = self.rate_mib_per_min {
            let _ = write!(out, " at {rate} MiB/min");
        }
        out
    }
}

/// One finding of `strata analyze --json`, as far as scoring needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Flagged {
    pub kind: String,
    pub pid: Option<u32>,
    pub device_uuid: Option<String>,
    /// When it was first raised.
    pub since: f64,
    pub until: Option<f64>,
    pub cause: Option<String>,
    pub class: Option<String>,
    /// `evidence.rate_mib_per_min`, where given: reported, not scored.
    pub rate: Option<f64>,
    /// Its evidence when last seen and when first raised.
    pub evidence: Value,
    pub first_evidence: Value,
}

impl Flagged {
    fn describe(&self, origin: f64) -> String {
        let mut out = self.kind.clone();
        if let Some(qualifier) = self.cause.as_ref().or(self.class.as_ref()) {
            let _ = write!(out, "/{qualifier}");
        }
        let _ = write!(
            out,
            " {} raised at {}",
            who(self.pid, self.device_uuid.as_deref()),
            offset(self.since - origin)
        );
        out
    }
}

fn who(pid: Option<u32>, device: Option<&str>) -> String {
    let device = device.map_or_else(|| "any device".to_string(), short_uuid);
    match pid {
        Some(pid) => format!("pid {pid} on {device}"),
        None => format!("no pid on {device}"),
    }
}

fn short_uuid(uuid: &str) -> String {
    uuid.chars().take(12).collect()
}

/// The findings of `strata analyze FILE --json`: `{"findings": [...]}`.
pub fn parse_findings(stdout: &str) -> Result<Vec<Flagged>, String> {
    let value: Value =
        serde_json::from_str(stdout.trim()).map_err(|e| format!("not one JSON object: {e}"))?;
    let list = value
        .get("findings")
        .and_then(Value::as_array)
        .ok_or("no `findings` array")?;
    list.iter()
        .enumerate()
        .map(|(i, f)| parse_finding(f).map_err(|e| format!("finding {i}: {e}: {f}")))
        .collect()
}

fn parse_finding(f: &Value) -> Result<Flagged, String> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let kind = text(f.get("kind")).ok_or("no kind")?;
    let pid = match f.get("pid") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|p| u32::try_from(p).ok())
                .ok_or("pid is not a pid")?,
        ),
    };
    let since = f.get("since").and_then(Value::as_f64).ok_or("no since")?;
    let evidence = f.get("evidence");
    Ok(Flagged {
        kind,
        pid,
        device_uuid: text(f.get("device_uuid")),
        since,
        until: f.get("until").and_then(Value::as_f64),
        cause: text(evidence.and_then(|e| e.get("cause"))),
        class: text(evidence.and_then(|e| e.get("class"))),
        rate: evidence
            .and_then(|e| e.get("rate_mib_per_min"))
            .and_then(Value::as_f64),
        evidence: evidence.cloned().unwrap_or(Value::Null),
        first_evidence: f
            .get("first_evidence")
            .cloned()
            .or_else(|| evidence.cloned())
            .unwrap_or(Value::Null),
    })
}

/// Whether `flagged` is a flag of `expected`.
pub fn matches(expected: &Expected, flagged: &Flagged) -> bool {
    expected.kind == flagged.kind
        && expected.pid == flagged.pid
        && expected
            .device_uuid
            .as_ref()
            .is_none_or(|d| flagged.device_uuid.as_ref() == Some(d))
        && (expected.kind != "climb" || expected.cause == flagged.cause)
        && (expected.kind != "oom" || expected.class == flagged.class)
        && flagged.since >= expected.start - EARLY_SECS
}

/// What became of one expected event.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub expected: Expected,
    /// The earliest finding that matches it.
    pub flagged: Option<Flagged>,
}

impl Outcome {
    pub fn time_to_flag(&self) -> Option<f64> {
        self.flagged.as_ref().map(|f| f.since - self.expected.start)
    }

    /// Flagged, and within the deadline where there is one.
    pub fn on_time(&self) -> bool {
        match (&self.flagged, self.expected.deadline()) {
            (Some(f), Some(deadline)) => f.since <= deadline,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// What the flag's evidence gets wrong against the label: its figures, a climb's first
    /// pace per step, a forecast's first ETA.
    pub fn evidence_problems(&self) -> Vec<String> {
        let Some(f) = &self.flagged else {
            return Vec::new();
        };
        let e = &self.expected;
        let mut out = Vec::new();
        for (key, want) in e.evidence.iter().flatten() {
            for (when, evidence) in [("first", &f.first_evidence), ("last", &f.evidence)] {
                if evidence.get(key) != Some(want) {
                    out.push(format!(
                        "evidence.{key} {} when {when} seen, {want} expected",
                        evidence.get(key).unwrap_or(&Value::Null)
                    ));
                }
            }
        }
        if let Some(truth) = e.bytes_per_step {
            match f
                .first_evidence
                .get("bytes_per_step")
                .and_then(Value::as_f64)
            {
                Some(given) if (given / truth - 1.0).abs() <= BYTES_PER_STEP_ERROR => {}
                given => out.push(format!(
                    "bytes_per_step {given:?} when first raised, {truth} (±{:.0}%) expected",
                    BYTES_PER_STEP_ERROR * 100.0
                )),
            }
        }
        if let (Some(oom_at), "oom_forecast") = (e.oom_at, e.kind.as_str()) {
            let left = oom_at - f.since;
            match f.first_evidence.get("eta_secs").and_then(Value::as_f64) {
                Some(eta) if (eta - left).abs() <= FORECAST_ETA_ERROR * left => {}
                eta => out.push(format!(
                    "first ETA {eta:?} s, {left:.0} s left (±{:.0}%)",
                    FORECAST_ETA_ERROR * 100.0
                )),
            }
        }
        out
    }
}

/// One trace, scored.
#[derive(Debug, Clone)]
pub struct TraceScore {
    pub name: String,
    /// The trace's first time: offsets in the report are from here.
    pub origin: f64,
    pub normal: bool,
    pub outcomes: Vec<Outcome>,
    /// Every `climb` raised, and whether it matches an expected climb.
    pub climbs: Vec<(Flagged, bool)>,
    /// Every `oom_forecast` raised.
    pub forecasts: Vec<Flagged>,
    /// Every finding of the other scored kinds raised, and whether it matches an expected
    /// event.
    pub others: Vec<(Flagged, bool)>,
    /// Findings raised, by kind (the scored kinds only).
    pub raised: BTreeMap<String, usize>,
    /// Why there are no findings to score (analyze failed).
    pub error: Option<String>,
    /// Findings of a kind the labels say must never be raised on this trace.
    pub never_raised: Vec<Flagged>,
}

/// Scores the findings of one trace against its labels.
pub fn score(name: &str, origin: f64, labels: &Labels, findings: &[Flagged]) -> TraceScore {
    let outcomes = labels
        .expect
        .iter()
        .map(|expected| Outcome {
            expected: expected.clone(),
            flagged: findings
                .iter()
                .filter(|f| matches(expected, f))
                .min_by(|a, b| a.since.total_cmp(&b.since))
                .cloned(),
        })
        .collect();
    let climbs = findings
        .iter()
        .filter(|f| f.kind == "climb")
        .map(|f| {
            let true_positive = labels
                .expect
                .iter()
                .any(|e| e.kind == "climb" && matches(e, f));
            (f.clone(), true_positive)
        })
        .collect();
    let forecasts = findings
        .iter()
        .filter(|f| f.kind == "oom_forecast")
        .cloned()
        .collect();
    let others = findings
        .iter()
        .filter(|f| f.kind != "climb" && KINDS.contains(&f.kind.as_str()))
        .map(|f| {
            let true_positive = labels.expect.iter().any(|e| matches(e, f));
            (f.clone(), true_positive)
        })
        .collect();
    let mut raised = BTreeMap::new();
    for f in findings.iter().filter(|f| KINDS.contains(&f.kind.as_str())) {
        *raised.entry(f.kind.clone()).or_insert(0) += 1;
    }
    let never_raised = findings
        .iter()
        .filter(|f| labels.never.contains(&f.kind))
        .cloned()
        .collect();
    TraceScore {
        name: name.to_string(),
        origin,
        normal: labels.normal,
        outcomes,
        climbs,
        forecasts,
        others,
        raised,
        error: None,
        never_raised,
    }
}

/// A trace whose findings could not be had: every expected event is missed.
pub fn failed(name: &str, origin: f64, labels: &Labels, error: String) -> TraceScore {
    TraceScore {
        error: Some(error),
        ..score(name, origin, labels, &[])
    }
}

/// Where the trace misses the corpus's targets: an expected climb not flagged with the right
/// cause within its deadline, another expected event not flagged, a climb on a normal trace.
pub fn failures(trace: &TraceScore) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(error) = &trace.error {
        out.push(format!("{}: {error}", trace.name));
    }
    for outcome in &trace.outcomes {
        for problem in outcome.evidence_problems() {
            out.push(format!(
                "{}: {}: {problem}",
                trace.name,
                outcome.expected.describe(trace.origin)
            ));
        }
        if outcome.on_time() {
            continue;
        }
        let what = outcome.expected.describe(trace.origin);
        let why = match (&outcome.flagged, outcome.expected.deadline()) {
            (Some(f), Some(deadline)) => format!(
                "flagged after {}, past its {} deadline",
                duration(f.since - outcome.expected.start),
                duration(deadline - outcome.expected.start)
            ),
            _ => "not flagged".to_string(),
        };
        out.push(format!("{}: {what}: {why}", trace.name));
    }
    for f in &trace.never_raised {
        out.push(format!(
            "{}: never to be raised, yet {}",
            trace.name,
            f.describe(trace.origin)
        ));
    }
    if trace.normal {
        for (climb, _) in &trace.climbs {
            out.push(format!(
                "{}: a normal trace, yet {}",
                trace.name,
                climb.describe(trace.origin)
            ));
        }
        for forecast in &trace.forecasts {
            out.push(format!(
                "{}: a normal trace, yet {}",
                trace.name,
                forecast.describe(trace.origin)
            ));
        }
    }
    out
}

mod totals;
pub mod validate;

pub use totals::*;

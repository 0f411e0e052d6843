//! Precision, recall and time-to-flag over the corpus, and the report: a module of
//! `common::corpus`.

use super::TraceScore;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Precision, recall and time-to-flag over the corpus.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Climbs raised, and those matching an expected climb.
    pub climbs_raised: usize,
    pub climbs_true: usize,
    /// Expected climbs, those flagged at all and those flagged on time.
    pub climbs_expected: usize,
    pub climbs_flagged: usize,
    pub climbs_on_time: usize,
    /// Mean `since - start` over the expected climbs that were flagged.
    pub mean_time_to_flag: Option<f64>,
    /// Per other kind: (flagged, expected).
    pub recall: BTreeMap<String, (usize, usize)>,
    /// Per other kind: (raised matching an expected event, raised).
    pub precision_by_kind: BTreeMap<String, (usize, usize)>,
    /// Per other kind: mean `since - start` over its expected events flagged.
    pub time_to_flag_by_kind: BTreeMap<String, f64>,
    pub normal_traces: usize,
    pub normal_with_climb: usize,
}

impl Totals {
    pub fn precision(&self) -> Option<f64> {
        ratio(self.climbs_true, self.climbs_raised)
    }

    pub fn climb_recall(&self) -> Option<f64> {
        ratio(self.climbs_on_time, self.climbs_expected)
    }
}

fn ratio(part: usize, whole: usize) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

pub fn totals(traces: &[TraceScore]) -> Totals {
    let mut t = Totals::default();
    let mut flag_times = Vec::new();
    let mut kind_times: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for trace in traces {
        for (f, true_positive) in &trace.others {
            let entry = t.precision_by_kind.entry(f.kind.clone()).or_insert((0, 0));
            entry.0 += usize::from(*true_positive);
            entry.1 += 1;
        }
        t.climbs_raised += trace.climbs.len();
        t.climbs_true += trace.climbs.iter().filter(|(_, ok)| *ok).count();
        if trace.normal {
            t.normal_traces += 1;
            t.normal_with_climb +=
                usize::from(!trace.climbs.is_empty() || !trace.forecasts.is_empty());
        }
        for outcome in &trace.outcomes {
            if outcome.expected.kind == "climb" {
                t.climbs_expected += 1;
                t.climbs_on_time += usize::from(outcome.on_time());
                if let Some(ttf) = outcome.time_to_flag() {
                    t.climbs_flagged += 1;
                    flag_times.push(ttf);
                }
            } else {
                let entry = t
                    .recall
                    .entry(outcome.expected.kind.clone())
                    .or_insert((0, 0));
                entry.0 += usize::from(outcome.on_time());
                entry.1 += 1;
                if let Some(ttf) = outcome.time_to_flag() {
                    kind_times
                        .entry(outcome.expected.kind.clone())
                        .or_default()
                        .push(ttf);
                }
            }
        }
    }
    for (kind, times) in kind_times {
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        t.time_to_flag_by_kind.insert(kind, mean);
    }
    t.mean_time_to_flag =
        (!flag_times.is_empty()).then(|| flag_times.iter().sum::<f64>() / flag_times.len() as f64);
    t
}

/// The table: per trace what was expected, what was raised and what matched, then totals.
pub fn report(traces: &[TraceScore]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:<32} {:<7} raised", "trace", "normal");
    for trace in traces {
        let raised: Vec<String> = trace
            .raised
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        let raised = if raised.is_empty() {
            "-".to_string()
        } else {
            raised.join(", ")
        };
        let normal = if trace.normal { "yes" } else { "no" };
        let _ = writeln!(out, "{:<32} {normal:<7} {raised}", trace.name);
        if let Some(error) = &trace.error {
            let _ = writeln!(out, "  ERROR {error}");
        }
        for outcome in &trace.outcomes {
            let verdict = match (&outcome.flagged, outcome.on_time()) {
                (_, true) => "ok",
                (Some(_), false) => "LATE",
                (None, false) => "MISS",
            };
            let mut line = format!("  {verdict:<5} {}", outcome.expected.describe(trace.origin));
            if let Some(f) = &outcome.flagged {
                let _ = write!(
                    line,
                    ": flagged after {}",
                    duration(f.since - outcome.expected.start)
                );
                if let Some(rate) = f.rate {
                    let _ = write!(line, " (rate given {rate:.0} MiB/min)");
                }
            }
            let _ = writeln!(out, "{line}");
        }
        for (climb, true_positive) in &trace.climbs {
            if !true_positive {
                let _ = writeln!(out, "  FALSE {}", climb.describe(trace.origin));
            }
        }
    }
    let t = totals(traces);
    let percent =
        |r: Option<f64>| r.map_or_else(|| "n/a".to_string(), |r| format!("{:.1}%", 100.0 * r));
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "climb: precision {}/{} ({}), recall {}/{} within the deadline ({}), flagged at all {}/{}, mean time-to-flag {}",
        t.climbs_true,
        t.climbs_raised,
        percent(t.precision()),
        t.climbs_on_time,
        t.climbs_expected,
        percent(t.climb_recall()),
        t.climbs_flagged,
        t.climbs_expected,
        t.mean_time_to_flag
            .map_or_else(|| "n/a".to_string(), duration),
    );
    for (kind, (flagged, expected)) in &t.recall {
        let (true_raised, raised) = t.precision_by_kind.get(kind).copied().unwrap_or((0, 0));
        let _ = writeln!(
            out,
            "{kind}: recall {flagged}/{expected} ({}), precision {true_raised}/{raised} ({}), mean time-to-flag {}",
            percent(ratio(*flagged, *expected)),
            percent(ratio(true_raised, raised)),
            t.time_to_flag_by_kind
                .get(kind)
                .map_or_else(|| "n/a".to_string(), |s| duration(*s)),
        );
    }
    let _ = writeln!(
        out,
        "normal traces with a climb or a forecast: {} of {}",
        t.normal_with_climb, t.normal_traces
    );
    out
}

/// `+12m05s` from the trace's start.
pub(super) fn offset(secs: f64) -> String {
    if secs < 0.0 {
        format!("-{}", duration(-secs))
    } else {
        format!("+{}", duration(secs))
    }
}

/// `3m05s`, `-40s`.
pub fn duration(secs: f64) -> String {
    let sign = if secs < 0.0 { "-" } else { "" };
    let whole = secs.abs().round() as u64;
    match (whole / 60, whole % 60) {
        (0, s) => format!("{sign}{s}s"),
        (m, s) => format!("{sign}{m}m{s:02}s"),
    }
}

//! A sample's numbers at the edges of what their types hold, and clocks that cannot be:
//! reading ends, loses at most the sample that holds them, and says it; the other samples are
//! analysed as before.

use crate::support::{analyze_bytes, jsonl, story};
use serde_json::Value;

/// Values at the edges of the numeric types the samples' fields are read as (u64, i64, u32,
/// f64), and beyond them.
fn edges() -> Vec<Value> {
    [
        "0",
        "-1",
        "1e-300",
        "1e19",
        "1e20",
        "1.7976931348623157e308",
        "-1.7976931348623157e308",
        "18446744073709551615",
        "-9223372036854775808",
        "4294967296",
        "9007199254740993",
    ]
    .iter()
    .map(|v| serde_json::from_str(v).expect("a number"))
    .collect()
}

/// Every number's place in a sample: the path of keys and indexes to it, each array cut to
/// its first element (the others are the same fields again).
fn number_paths(value: &Value, path: &mut Vec<PathStep>, out: &mut Vec<Vec<PathStep>>) {
    match value {
        Value::Number(_) => out.push(path.clone()),
        Value::Object(map) => {
            for (key, field) in map {
                path.push(PathStep::Key(key.clone()));
                number_paths(field, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            if let Some(first) = items.first() {
                path.push(PathStep::Index(0));
                number_paths(first, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
enum PathStep {
    Key(String),
    Index(usize),
}

fn at_mut<'a>(value: &'a mut Value, path: &[PathStep]) -> &'a mut Value {
    path.iter().fold(value, |v, step| match step {
        PathStep::Key(k) => &mut v[k.as_str()],
        PathStep::Index(i) => &mut v[*i],
    })
}

/// One sample in the middle whose `time` cannot be (1e20: past what a u64 of nanoseconds
/// holds): before, `analyze` spun past 30 s (a debug build panicked on an overflow); now the
/// sample is skipped with its reason, and the rest analysed.
#[test]
fn a_time_that_cannot_be_costs_its_sample_and_is_said() {
    let samples = story(30, 10);
    for time in [1e20, 1e19, -5.0, 0.0, 1.0e12] {
        let mut damaged = samples.clone();
        damaged[15]["time"] = serde_json::json!(time);
        let analysis = analyze_bytes(jsonl(&damaged)).expect("ends");
        assert_eq!(analysis.samples, 29, "time {time}");
        assert!(analysis.lost_some(), "time {time}");
        let bad = &analysis.bad_lines[0];
        assert_eq!(bad.line, 16, "time {time}");
        assert!(
            bad.error.contains("is no time a clock gives"),
            "time {time}: {}",
            bad.error
        );
    }
}

/// One sample dated a year ahead, at sample 27 of 81: before, `analyze` read 27 samples
/// "from 09:00:00 to 09:04:20 (8760h04m)", raised six false `stale_feed`s 8760 hours old,
/// and skipped the other 53 as out of order, exit 0. Now that sample alone is skipped, said
/// as a clock's jump.
#[test]
fn one_clock_jump_costs_one_sample() {
    let samples = story(81, 10);
    let clean = analyze_bytes(jsonl(&samples)).expect("ends");
    let mut damaged = samples.clone();
    let year = 365.0 * 86_400.0;
    let t = damaged[26]["time"].as_f64().expect("time");
    damaged[26]["time"] = serde_json::json!(t + year);
    let analysis = analyze_bytes(jsonl(&damaged)).expect("ends");
    assert_eq!(analysis.samples, 80);
    assert_eq!(analysis.out_of_order, 0);
    assert_eq!(analysis.bad_lines.len(), 1);
    assert_eq!(analysis.bad_lines[0].line, 27);
    assert!(
        analysis.bad_lines[0].error.contains("a clock that jumped"),
        "{}",
        analysis.bad_lines[0].error
    );
    assert_eq!(analysis.last_time, clean.last_time);
    let kinds = |a: &strata::analyze::Analysis| {
        let mut k: Vec<String> = a
            .findings
            .iter()
            .map(|e| format!("{:?} {:?}", e.kind, e.pid))
            .collect();
        k.sort();
        k
    };
    assert_eq!(kinds(&analysis), kinds(&clean), "no finding made or lost");
    // A real gap (the recording goes on after it) is read as one.
    let mut gap = samples.clone();
    for s in &mut gap[26..] {
        let t = s["time"].as_f64().expect("time");
        s["time"] = serde_json::json!(t + 3600.0);
    }
    let analysis = analyze_bytes(jsonl(&gap)).expect("ends");
    assert_eq!(analysis.samples, 81);
    assert!(!analysis.lost_some());
}

/// Each number of a sample (the node's, a GPU's, a MIG instance's, a process's, a feed's
/// readings and counters), set in turn to each value at the edges of the numeric types, in
/// the middle of a short recording: reading ends, no panic (a debug build panics on an
/// overflow), and at most that sample is lost, and said.
#[test]
fn any_number_at_any_edge_costs_its_sample_at_most() {
    let samples = story(8, 10);
    let mut paths = Vec::new();
    number_paths(&samples[4], &mut Vec::new(), &mut paths);
    assert!(paths.len() > 60, "{} numbers in a sample", paths.len());
    let cases: Vec<(Vec<PathStep>, Value)> = paths
        .iter()
        .flat_map(|path| edges().into_iter().map(move |edge| (path.clone(), edge)))
        .collect();
    assert!(cases.len() > 600, "{} cases", cases.len());
    // The cases share the machine's cores: each analysis is small and stands alone.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for share in cases.chunks(cases.len().div_ceil(workers)) {
            let samples = &samples;
            scope.spawn(move || {
                for (path, edge) in share {
                    let mut damaged = samples.clone();
                    *at_mut(&mut damaged[4], path) = edge.clone();
                    let case = format!("{path:?} = {edge}");
                    let analysis = analyze_bytes(jsonl(&damaged))
                        .unwrap_or_else(|| panic!("{case}: the analysis did not end"));
                    assert!(
                        analysis.samples >= 7,
                        "{case}: {} samples",
                        analysis.samples
                    );
                    assert!(
                        analysis.samples == 8 || analysis.lost_some(),
                        "{case}: a sample lost unsaid"
                    );
                    // What is shown of it is shown whole.
                    let _ = strata::analyze::timeline(&analysis);
                    serde_json::to_string(&analysis).unwrap_or_else(|e| panic!("{case}: {e}"));
                }
            });
        }
    });
}

//! The labelled corpus (`tests/traces`, issue 8 §3): `strata analyze --json` over every
//! trace, scored against its labels. Targets: every climb of 50 MiB/min or more flagged
//! with the right cause within 10 minutes of its start, slower ones within 20; no `climb`
//! on a normal trace; every other expected event flagged. The table and the totals
//! (precision, recall, mean time-to-flag) are printed: `tests/traces/evaluate.sh`, or
//! `cargo test --test corpus -- --nocapture`.

#[path = "traces/harness.rs"]
mod harness;
#[path = "traces/validate.rs"]
mod validate;

use harness::{Labels, TraceScore};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/traces");
/// Kept small: a trace packed (gzip) under this, the whole corpus under [`CORPUS_MAX_BYTES`].
const TRACE_MAX_BYTES: u64 = 150 << 10;
const CORPUS_MAX_BYTES: u64 = 4 << 20;

struct Trace {
    name: String,
    packed: PathBuf,
    labels: Labels,
}

/// Every `<name>.jsonl.gz` with its `<name>.labels.json`, by name.
fn corpus() -> Vec<Trace> {
    let mut names: Vec<String> = std::fs::read_dir(TRACES)
        .expect("tests/traces")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".jsonl.gz").map(str::to_string)
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let path = Path::new(TRACES).join(format!("{name}.labels.json"));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let labels =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            Trace {
                packed: Path::new(TRACES).join(format!("{name}.jsonl.gz")),
                name,
                labels,
            }
        })
        .collect()
}

/// The trace's lines (`gzip -dc`: the corpus is checked in packed).
fn unpack(packed: &Path) -> String {
    let out = Command::new("gzip")
        .arg("-dc")
        .arg(packed)
        .output()
        .unwrap_or_else(|e| panic!("gzip -dc {}: {e} (gzip is needed)", packed.display()));
    assert!(
        out.status.success(),
        "gzip -dc {}: {}",
        packed.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("a trace is UTF-8")
}

fn first_time(lines: &str) -> f64 {
    lines
        .lines()
        .next()
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|v| v.get("time").and_then(serde_json::Value::as_f64))
        .expect("a trace's first line has a time")
}

/// Unpacks the trace, runs `strata analyze FILE --json` on it and scores the findings.
fn analyze(trace: &Trace, scratch: &Path) -> TraceScore {
    let lines = unpack(&trace.packed);
    let origin = first_time(&lines);
    let file = scratch.join(format!("{}.jsonl", trace.name));
    std::fs::write(&file, &lines).expect("write the unpacked trace");
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("analyze")
        .arg(&file)
        .arg("--json")
        .output()
        .expect("run strata analyze");
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let error = format!(
            "strata analyze exited with {}: {}",
            out.status,
            stderr.lines().next().unwrap_or("")
        );
        return harness::failed(&trace.name, origin, &trace.labels, error);
    }
    match harness::parse_findings(&String::from_utf8_lossy(&out.stdout)) {
        Ok(findings) => harness::score(&trace.name, origin, &trace.labels, &findings),
        Err(e) => harness::failed(
            &trace.name,
            origin,
            &trace.labels,
            format!("strata analyze --json: {e}"),
        ),
    }
}

#[test]
fn corpus_meets_the_targets() {
    let traces = corpus();
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("corpus");
    std::fs::create_dir_all(&scratch).expect("scratch directory");
    let next = AtomicUsize::new(0);
    let scores = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(4, |n| n.get().min(8));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(trace) = traces.get(i) else { break };
                let score = analyze(trace, &scratch);
                scores.lock().expect("scores").push((i, score));
            });
        }
    });
    let mut scores = scores.into_inner().expect("scores");
    scores.sort_by_key(|(i, _)| *i);
    let scores: Vec<TraceScore> = scores.into_iter().map(|(_, s)| s).collect();
    println!("{}", harness::report(&scores));
    let failures: Vec<String> = scores.iter().flat_map(harness::failures).collect();
    assert!(
        failures.is_empty(),
        "{} target(s) missed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_trace_is_well_formed() {
    let mut problems = Vec::new();
    for trace in corpus() {
        let (lines, seen) = validate::check_lines(&unpack(&trace.packed));
        let labels = validate::check_labels(&trace.labels, &seen);
        for problem in lines.iter().chain(&labels).take(10) {
            problems.push(format!("{}: {problem}", trace.name));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The corpus holds what the issue asks of it, and stays small.
#[test]
fn corpus_covers_the_issue() {
    let traces = corpus();
    assert!(traces.len() >= 30, "{} traces, 30 wanted", traces.len());
    let expected: Vec<&harness::Expected> = traces.iter().flat_map(|t| &t.labels.expect).collect();
    for kind in harness::KINDS {
        assert!(
            expected.iter().any(|e| e.kind == kind),
            "no trace expects {kind}"
        );
    }
    for cause in harness::CAUSES {
        assert!(
            expected.iter().any(|e| e.cause.as_deref() == Some(cause)),
            "no climb of cause {cause}"
        );
    }
    for class in harness::CLASSES {
        assert!(
            expected.iter().any(|e| e.class.as_deref() == Some(class)),
            "no OOM of class {class}"
        );
    }
    let rates: Vec<f64> = expected.iter().filter_map(|e| e.rate_mib_per_min).collect();
    assert!(rates.iter().any(|&r| r <= 20.0) && rates.iter().any(|&r| r >= 500.0));
    assert!(rates.iter().any(|&r| r < harness::FAST_MIB_PER_MIN));
    let normal = traces.iter().filter(|t| t.labels.normal).count();
    assert!(normal >= 10, "{normal} normal traces");
    let mut total = 0;
    for trace in &traces {
        let size = std::fs::metadata(&trace.packed).expect("trace").len();
        assert!(size < TRACE_MAX_BYTES, "{}: {size} bytes", trace.name);
        total += size;
    }
    assert!(total < CORPUS_MAX_BYTES, "the corpus is {total} bytes");
    // Nothing in the directory that the corpus does not account for.
    for entry in std::fs::read_dir(TRACES).expect("tests/traces") {
        let name = entry
            .expect("entry")
            .file_name()
            .into_string()
            .expect("name");
        let known = name.ends_with(".jsonl.gz")
            || name.ends_with(".labels.json")
                && traces
                    .iter()
                    .any(|t| name == format!("{}.labels.json", t.name))
            || [
                "README.md",
                "make_traces.py",
                "tracegen.py",
                "evaluate.sh",
                "harness.rs",
                "validate.rs",
                "__pycache__",
            ]
            .contains(&name.as_str());
        assert!(known, "tests/traces/{name} is not part of the corpus");
    }
}

/// The scoring itself, on hand-written findings.
mod scoring {
    use super::harness::*;

    const T0: f64 = 1_767_258_000.0;
    const GPU: &str = "GPU-aaaa";

    fn labels(normal: bool, expect: Vec<Expected>) -> Labels {
        Labels {
            description: String::new(),
            minutes: 40.0,
            expect,
            normal,
        }
    }

    fn climb(cause: &str, pid: Option<u32>, start_min: f64, rate: f64) -> Expected {
        Expected {
            kind: "climb".into(),
            cause: Some(cause.into()),
            class: None,
            pid,
            device_uuid: Some(GPU.into()),
            start: T0 + 60.0 * start_min,
            rate_mib_per_min: Some(rate),
        }
    }

    fn event(kind: &str, pid: Option<u32>, start_min: f64) -> Expected {
        Expected {
            kind: kind.into(),
            cause: None,
            class: None,
            pid,
            device_uuid: Some(GPU.into()),
            start: T0 + 60.0 * start_min,
            rate_mib_per_min: None,
        }
    }

    /// A finding as `strata analyze --json` would print it.
    fn finding(kind: &str, pid: Option<u32>, since_min: f64, evidence: &str) -> String {
        let pid = pid.map_or("null".to_string(), |p| p.to_string());
        format!(
            r#"{{"kind":"{kind}","severity":"warning","device_uuid":"{GPU}","pid":{pid},"since":{},"until":null,"message":"m","evidence":{evidence}}}"#,
            T0 + 60.0 * since_min
        )
    }

    fn findings(list: &[String]) -> Vec<Flagged> {
        parse_findings(&format!(r#"{{"findings":[{}]}}"#, list.join(","))).expect("parses")
    }

    #[test]
    fn a_climb_with_its_cause_within_the_deadline_is_on_time() {
        let l = labels(false, vec![climb("live", Some(7), 10.0, 85.0)]);
        let f = findings(&[finding(
            "climb",
            Some(7),
            13.5,
            r#"{"cause":"live","rate_mib_per_min":83.0}"#,
        )]);
        let s = score("t", T0, &l, &f);
        assert!(s.outcomes[0].on_time());
        assert_eq!(s.outcomes[0].time_to_flag(), Some(210.0));
        assert!(failures(&s).is_empty());
        let t = totals(&[s]);
        assert_eq!(
            (t.climbs_true, t.climbs_raised, t.climbs_on_time),
            (1, 1, 1)
        );
        assert_eq!(t.mean_time_to_flag, Some(210.0));
    }

    #[test]
    fn a_climb_with_another_cause_is_a_false_flag_and_a_miss() {
        let l = labels(false, vec![climb("live", Some(7), 10.0, 85.0)]);
        let f = findings(&[finding("climb", Some(7), 12.0, r#"{"cause":"cache"}"#)]);
        let s = score("t", T0, &l, &f);
        assert!(s.outcomes[0].flagged.is_none());
        assert_eq!(s.climbs, vec![(f[0].clone(), false)]);
        assert_eq!(failures(&s).len(), 1);
        assert_eq!(totals(&[s]).precision(), Some(0.0));
    }

    #[test]
    fn deadlines_are_10_minutes_from_50_mib_per_min_and_20_below() {
        let fast = labels(false, vec![climb("live", Some(7), 10.0, 50.0)]);
        let slow = labels(false, vec![climb("live", Some(7), 10.0, 49.0)]);
        let at_15 = findings(&[finding("climb", Some(7), 25.0, r#"{"cause":"live"}"#)]);
        let fast = score("fast", T0, &fast, &at_15);
        let slow = score("slow", T0, &slow, &at_15);
        assert!(!fast.outcomes[0].on_time(), "15 min is past 10");
        assert!(slow.outcomes[0].on_time(), "15 min is within 20");
        let late = failures(&fast);
        assert_eq!(late.len(), 1);
        assert!(late[0].contains("past its 10m00s deadline"), "{late:?}");
        let t = totals(&[fast, slow]);
        assert_eq!(
            (t.climbs_on_time, t.climbs_flagged, t.climbs_expected),
            (1, 2, 2)
        );
        assert_eq!(t.climb_recall(), Some(0.5));
    }

    #[test]
    fn a_flag_raised_well_before_the_start_is_not_the_event() {
        let l = labels(false, vec![climb("live", Some(7), 10.0, 85.0)]);
        let early = findings(&[finding("climb", Some(7), 8.9, r#"{"cause":"live"}"#)]);
        assert!(score("t", T0, &l, &early).outcomes[0].flagged.is_none());
        let close = findings(&[finding("climb", Some(7), 9.5, r#"{"cause":"live"}"#)]);
        assert!(score("t", T0, &l, &close).outcomes[0].on_time());
    }

    #[test]
    fn pid_and_device_must_agree_and_a_label_without_a_device_takes_any() {
        let mut e = climb("no_process", None, 5.0, 100.0);
        let with_pid = findings(&[finding("climb", Some(3), 7.0, r#"{"cause":"no_process"}"#)]);
        let l = labels(false, vec![e.clone()]);
        assert!(score("t", T0, &l, &with_pid).outcomes[0].flagged.is_none());
        let other_gpu = findings(&[
            finding("climb", None, 7.0, r#"{"cause":"no_process"}"#).replace(GPU, "GPU-bbbb")
        ]);
        assert!(score("t", T0, &l, &other_gpu).outcomes[0].flagged.is_none());
        e.device_uuid = None;
        let l = labels(false, vec![e]);
        assert!(score("t", T0, &l, &other_gpu).outcomes[0].on_time());
    }

    #[test]
    fn an_oom_must_carry_its_class_and_other_kinds_need_only_be_flagged() {
        let mut oom = event("oom", Some(9), 20.0);
        oom.class = Some("fragmentation".into());
        let l = labels(true, vec![oom, event("zombie_context", Some(4), 10.0)]);
        let f = findings(&[
            finding("oom", Some(9), 20.1, r#"{"class":"capacity"}"#),
            finding("zombie_context", Some(4), 39.0, "{}"),
        ]);
        let s = score("t", T0, &l, &f);
        assert!(s.outcomes[0].flagged.is_none());
        assert!(s.outcomes[1].on_time(), "no deadline but the trace's end");
        assert_eq!(failures(&s).len(), 1);
        let t = totals(&[s]);
        assert_eq!(t.recall["oom"], (0, 1));
        assert_eq!(t.recall["zombie_context"], (1, 1));
        assert_eq!(t.climbs_expected, 0);
    }

    #[test]
    fn any_climb_on_a_normal_trace_fails_it() {
        let l = labels(true, vec![]);
        let f = findings(&[
            finding("climb", Some(7), 12.0, r#"{"cause":"live"}"#),
            finding("unexplained_usage", None, 12.0, "{}"),
            finding("stale_feed", Some(7), 12.0, "{}"),
        ]);
        let s = score("t", T0, &l, &f);
        let why = failures(&s);
        assert_eq!(why.len(), 1);
        assert!(
            why[0].contains("a normal trace, yet climb/live pid 7"),
            "{why:?}"
        );
        assert_eq!(s.raised.len(), 2, "only the issue's kinds are counted");
        let t = totals(&[s]);
        assert_eq!((t.normal_traces, t.normal_with_climb), (1, 1));
        assert_eq!(t.precision(), Some(0.0));
    }

    #[test]
    fn the_earliest_matching_flag_counts_and_repeats_are_true_positives() {
        let l = labels(false, vec![climb("cache", Some(2), 8.0, 120.0)]);
        let f = findings(&[
            finding("climb", Some(2), 30.0, r#"{"cause":"cache"}"#),
            finding("climb", Some(2), 14.0, r#"{"cause":"cache"}"#),
        ]);
        let s = score("t", T0, &l, &f);
        assert_eq!(s.outcomes[0].time_to_flag(), Some(360.0));
        assert_eq!(totals(&[s]).precision(), Some(1.0));
    }

    #[test]
    fn a_failed_analysis_misses_everything_and_says_why() {
        let l = labels(false, vec![climb("live", Some(7), 10.0, 85.0)]);
        let s = failed("t", T0, &l, "strata analyze exited with 2".into());
        let why = failures(&s);
        assert_eq!(why.len(), 2);
        assert!(why[0].contains("exited with 2"));
        assert!(report(&[s]).contains("MISS"));
    }

    #[test]
    fn output_that_is_not_findings_is_an_error() {
        assert!(parse_findings("").is_err());
        assert!(parse_findings(r#"{"findings": [{"kind": "climb"}]}"#).is_err());
        assert!(
            parse_findings(r#"{"findings": [{"kind":"climb","since":1.0,"pid":-1}]}"#).is_err()
        );
        let ok = parse_findings(
            r#"{"findings":[{"kind":"oom","since":5.5,"pid":null,"device_uuid":null}]}"#,
        )
        .expect("minimal");
        assert_eq!(ok[0].since, 5.5);
        assert_eq!(ok[0].cause, None);
    }

    #[test]
    fn the_report_has_a_row_per_expected_event_and_the_totals() {
        let l = labels(
            false,
            vec![
                climb("live", Some(7), 10.0, 85.0),
                event("idle_holder", Some(8), 4.0),
            ],
        );
        let f = findings(&[
            finding("climb", Some(7), 13.0, r#"{"cause":"live"}"#),
            finding("climb", Some(8), 13.0, r#"{"cause":"cache"}"#),
        ]);
        let text = report(&[score("leak", T0, &l, &f)]);
        assert!(text.contains("ok    climb/live pid 7 on GPU-aaaa from +10m00s at 85 MiB/min: flagged after 3m00s"), "{text}");
        assert!(text.contains("MISS  idle_holder pid 8"), "{text}");
        assert!(text.contains("FALSE climb/cache pid 8"), "{text}");
        assert!(
            text.contains("climb: precision 1/2 (50.0%), recall 1/1"),
            "{text}"
        );
        assert!(text.contains("idle_holder: recall 0/1 (0.0%)"), "{text}");
    }

    #[test]
    fn durations_read_as_minutes_and_seconds() {
        assert_eq!(duration(0.4), "0s");
        assert_eq!(duration(185.0), "3m05s");
        assert_eq!(duration(-40.0), "-40s");
    }
}

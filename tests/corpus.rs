//! The labelled corpus (`tests/traces`): `strata analyze --json` over every trace, scored
//! against its labels. Targets: every climb of 50 MiB/min or more flagged
//! with the right cause within 10 minutes of its start, slower ones within 20; no `climb`
//! on a normal trace; every other expected event flagged. The table and the totals
//! (precision, recall, mean time-to-flag) are printed: `tests/traces/evaluate.sh`, or
//! `cargo test --test corpus -- --nocapture`.

// Tests may panic: `unwrap` and `expect` say which of a test's assumptions failed, in its
// helpers too (clippy.toml allows them only in `#[test]` functions and `#[cfg(test)]` code).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::corpus::{validate, Labels, TraceScore};
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

/// Unpacks the trace, runs `strata analyze FILE --json --every-sample` on it (the detectors
/// at every sample, as the monitor runs them) and scores the findings.
fn analyze(trace: &Trace, scratch: &Path) -> TraceScore {
    analyze_lines(&trace.name, &unpack(&trace.packed), &trace.labels, scratch).0
}

/// Runs `strata analyze FILE --json --every-sample` on these lines and scores the findings;
/// also its whole answer.
fn analyze_lines(
    name: &str,
    lines: &str,
    labels: &Labels,
    scratch: &Path,
) -> (TraceScore, serde_json::Value) {
    let trace = Trace {
        name: name.to_string(),
        packed: PathBuf::new(),
        labels: labels.clone(),
    };
    let origin = first_time(lines);
    let file = scratch.join(format!("{}.jsonl", trace.name));
    std::fs::write(&file, lines).expect("write the unpacked trace");
    let out = Command::new(common::strata())
        .arg("analyze")
        .arg(&file)
        .args(["--json", "--every-sample"])
        .output()
        .expect("run strata analyze");
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let error = format!(
            "strata analyze exited with {}: {}",
            out.status,
            stderr.lines().next().unwrap_or("")
        );
        let _ = std::fs::remove_file(&file);
        return (
            common::corpus::failed(&trace.name, origin, &trace.labels, error),
            serde_json::Value::Null,
        );
    }
    let _ = std::fs::remove_file(&file);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let whole = serde_json::from_str(stdout.trim()).unwrap_or(serde_json::Value::Null);
    let score = match common::corpus::parse_findings(&stdout) {
        Ok(findings) => common::corpus::score(&trace.name, origin, &trace.labels, &findings),
        Err(e) => common::corpus::failed(
            &trace.name,
            origin,
            &trace.labels,
            format!("strata analyze --json: {e}"),
        ),
    };
    (score, whole)
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
    println!("{}", common::corpus::report(&scores));
    let failures: Vec<String> = scores.iter().flat_map(common::corpus::failures).collect();
    assert!(
        failures.is_empty(),
        "{} target(s) missed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `strata analyze` on its default clock (the detectors that read the history every 10 s of
/// recording time, and at a process's last sample) finds what it finds at every sample: on
/// every trace, and on its older shape, the same findings (kind, device, pid), each first
/// raised at most 10 s and one sample interval later, and last seen at most that much
/// earlier.
#[test]
fn the_coarse_clock_finds_what_every_sample_finds() {
    let traces = corpus();
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("corpus-clock");
    std::fs::create_dir_all(&scratch).expect("scratch directory");
    let next = AtomicUsize::new(0);
    let problems = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(4, |n| n.get().min(8));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(trace) = traces.get(i) else { break };
                let lines = unpack(&trace.packed);
                let derived: String = lines.lines().map(|l| derived_form(l) + "\n").collect();
                let mut found = clocks_agree(&trace.name, &lines, &scratch);
                let older = format!("{} (older shape)", trace.name);
                found.extend(clocks_agree(&older, &derived, &scratch));
                problems.lock().expect("problems").extend(found);
            });
        }
    });
    let problems = problems.into_inner().expect("problems");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Where `strata analyze` on these lines disagrees between its two clocks.
fn clocks_agree(name: &str, lines: &str, scratch: &Path) -> Vec<String> {
    let file = scratch.join(format!("{}.jsonl", name.replace(' ', "-")));
    std::fs::write(&file, lines).expect("write the unpacked trace");
    let spans = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("analyze")
            .arg(&file)
            .arg("--json")
            .args(extra)
            .output()
            .expect("run strata analyze");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("analyze --json");
        let mut spans: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
        for f in v["findings"].as_array().expect("findings") {
            let key = format!("{} {} {}", f["kind"], f["device_uuid"], f["pid"]);
            let since = f["since"].as_f64().expect("since");
            let until = f["until"].as_f64().expect("until");
            let e = spans.entry(key).or_insert((since, until));
            e.0 = e.0.min(since);
            e.1 = e.1.max(until);
        }
        spans
    };
    let exact = spans(&["--every-sample"]);
    let coarse = spans(&[]);
    let _ = std::fs::remove_file(&file);
    let times: Vec<f64> = lines
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["time"].as_f64())
        .collect();
    let gap = times.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    let slack = 10.0 + gap + 1e-6;
    let mut found = Vec::new();
    for (key, (since, until)) in &exact {
        match coarse.get(key) {
            None => found.push(format!("{name}: {key} missed")),
            Some((s, u)) => {
                if !(*s >= since - 1e-6 && *s <= since + slack) {
                    found.push(format!("{name}: {key} since {s} against {since}"));
                }
                if !(*u <= until + 1e-6 && *u >= until - slack) {
                    found.push(format!("{name}: {key} until {u} against {until}"));
                }
            }
        }
    }
    for key in coarse.keys().filter(|k| !exact.contains_key(*k)) {
        found.push(format!("{name}: {key} only on the coarse clock"));
    }
    found
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

/// The corpus holds every scored kind, climb cause and OOM class, slow and fast climbs and
/// normal traces, and stays small.
#[test]
fn corpus_covers_every_kind_cause_and_class() {
    let traces = corpus();
    assert!(traces.len() >= 30, "{} traces, 30 wanted", traces.len());
    let expected: Vec<&common::corpus::Expected> =
        traces.iter().flat_map(|t| &t.labels.expect).collect();
    for kind in common::corpus::KINDS {
        assert!(
            expected.iter().any(|e| e.kind == kind),
            "no trace expects {kind}"
        );
    }
    for cause in common::corpus::CAUSES {
        assert!(
            expected.iter().any(|e| e.cause.as_deref() == Some(cause)),
            "no climb of cause {cause}"
        );
    }
    for class in common::corpus::CLASSES {
        assert!(
            expected.iter().any(|e| e.class.as_deref() == Some(class)),
            "no OOM of class {class}"
        );
    }
    let rates: Vec<f64> = expected.iter().filter_map(|e| e.rate_mib_per_min).collect();
    assert!(rates.iter().any(|&r| r <= 20.0) && rates.iter().any(|&r| r >= 500.0));
    assert!(rates.iter().any(|&r| r < common::corpus::FAST_MIB_PER_MIN));
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
                "scoring.rs",
                "totals.rs",
                "__pycache__",
            ]
            .contains(&name.as_str());
        assert!(known, "tests/traces/{name} is not part of the corpus");
    }
}

/// A line in the snapshot's derived form, as older recordings kept it: each fed process's
/// allocator figures in its `feed` (as the snapshot matches them), no raw `feeds`.
fn derived_form(line: &str) -> String {
    let mut value: serde_json::Value = serde_json::from_str(line).expect("a line");
    let feeds = value
        .as_object_mut()
        .and_then(|o| o.remove("feeds"))
        .unwrap_or_default();
    for (i, record) in feeds.as_array().into_iter().flatten().enumerate() {
        let pid = record.pointer("/peer/pid").cloned();
        let hello = &record["hello"];
        let Some(latest) = record.pointer("/devices/0/latest") else {
            continue;
        };
        let mut feed = serde_json::json!({
            "framework": hello["framework"],
            "framework_version": hello["framework_version"],
            "backend": hello["backend"],
            "feed": i,
        });
        for (k, v) in latest.as_object().into_iter().flatten() {
            feed[k] = v.clone();
        }
        for p in value["processes"].as_array_mut().into_iter().flatten() {
            if p.get("pid") == pid.as_ref() {
                p["feed"] = feed.clone();
            }
        }
    }
    value["schema"] = "strata.snapshot/1".into();
    serde_json::to_string(&value).expect("json")
}

/// The corpus in the derived form of older recordings (§ "Recordings in an older shape"): read
/// with the feeds rebuilt from `processes[].feed`, every line counted as such, and scored as
/// the raw corpus is. What that form never held is not asked of it: an OOM's report (so its
/// class is `uncertain`, from the counter alone), and the step-end readings.
#[test]
fn a_corpus_of_the_older_shape_is_read_with_its_feeds() {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("corpus-derived");
    std::fs::create_dir_all(&scratch).expect("scratch directory");
    let mut failures = Vec::new();
    let mut read = 0;
    for trace in corpus() {
        let steps = trace
            .labels
            .expect
            .iter()
            .any(|e| e.step_secs.is_some() || e.kind == "warm_up");
        if steps || trace.name.contains("derived") {
            continue;
        }
        let mut labels = trace.labels.clone();
        for e in &mut labels.expect {
            if e.kind == "oom" {
                e.class = Some("uncertain".into());
            }
            e.evidence = None;
        }
        let lines: String = unpack(&trace.packed)
            .lines()
            .map(|l| derived_form(l) + "\n")
            .collect();
        // The lines with a fed process: each must be read as the older shape.
        let fed = lines.lines().filter(|l| l.contains(r#""feed":{"#)).count() as u64;
        let (score, whole) = analyze_lines(&trace.name, &lines, &labels, &scratch);
        if whole["older_shape"].as_u64() != Some(fed) {
            failures.push(format!(
                "{}: {fed} lines with a fed process, {} read as the older shape",
                trace.name, whole["older_shape"]
            ));
        }
        failures.extend(common::corpus::failures(&score));
        read += 1;
    }
    assert!(read >= 40, "{read} traces");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every fed process's context and memory outside the pool, at every line from the first
/// that split them: within 5 % of the generator's truth, or marked as bounds on the right
/// side of it (`bounds`: context `upper`, outside_pool `lower`). A trace labelled
/// `layers: exact` (its agents reported the context read at CUDA init) must be within 5 %.
#[test]
fn contexts_are_true_or_marked_as_bounds() {
    use serde_json::Value;
    let mut problems = Vec::new();
    for trace in corpus() {
        let exact = trace.labels.layers.as_deref() == Some("exact");
        let mut pipeline = strata::pipeline::Pipeline::new(None);
        let mut checked = 0;
        for (n, line) in unpack(&trace.packed).lines().enumerate() {
            let raw: Value = serde_json::from_str(line).expect("a line");
            let sample: strata::sample::NodeSample =
                serde_json::from_value(raw.clone()).expect("a sample");
            let observed = pipeline.ingest(sample);
            let shown =
                serde_json::to_value(strata::snapshot::Snapshot::of(&observed)).expect("json");
            for p in shown["processes"].as_array().into_iter().flatten() {
                let source = p["context_source"].as_str();
                if p.pointer("/feed_status/state") != Some(&Value::from("fresh"))
                    || matches!(source, None | Some("unsplit"))
                {
                    continue;
                }
                let truth = raw["processes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|t| t["pid"] == p["pid"] && t["device_uuid"] == p["device_uuid"])
                    .map(|t| t["layers"].clone())
                    .unwrap_or_default();
                for (layer, bound) in [("context", "upper"), ("outside_pool", "lower")] {
                    let (Some(shown_bytes), Some(true_bytes)) =
                        (p["layers"][layer].as_u64(), truth[layer].as_u64())
                    else {
                        continue;
                    };
                    checked += 1;
                    let within =
                        shown_bytes.abs_diff(true_bytes) as f64 <= 0.05 * true_bytes as f64;
                    let marked = p["bounds"][layer] == bound
                        && if bound == "upper" {
                            shown_bytes >= true_bytes
                        } else {
                            shown_bytes <= true_bytes
                        };
                    if !within && (exact || !marked) && problems.len() < 20 {
                        problems.push(format!(
                            "{} line {}: PID {} {layer} {shown_bytes} ({}, bounds {}), truth {true_bytes}",
                            trace.name,
                            n + 1,
                            p["pid"],
                            source.unwrap_or("n/a"),
                            p["bounds"]
                        ));
                    }
                }
            }
        }
        if exact && checked == 0 {
            problems.push(format!("{}: nothing split to check", trace.name));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The scoring itself, on hand-written findings.
#[path = "traces/scoring.rs"]
mod scoring;

/// A forecast's ETA within this share of the time truly left at every sample after its
/// first...
const ETA_LATER_ERROR: f64 = 0.3;
/// ...or within this many seconds, whichever is more (near the end, 30 % is seconds).
const ETA_LATER_SECS: f64 = 60.0;

/// Every trace with an expected `oom_forecast`, sample by sample as the monitor judges it
/// (every detector at every sample): from its first raise to the OOM, the forecast of that
/// process is raised at every sample, its ETA within 30 % (or 60 s) of the time the trace's
/// generator says is left. The first ETA is scored by `corpus_meets_the_targets`; the errors
/// are printed (`-- --nocapture`).
#[test]
fn forecasts_hold_their_eta_at_every_sample() {
    use serde_json::Value;
    let mut problems = Vec::new();
    let mut table = String::from(
        "trace                      first raised   first ETA error   later, 5 min or more left: worst, median   under 5 min: worst   samples with 5 min or more\n",
    );
    let mut checked = 0;
    for trace in corpus() {
        let Some(expected) = trace
            .labels
            .expect
            .iter()
            .find(|e| e.kind == "oom_forecast")
        else {
            continue;
        };
        let oom_at = expected.oom_at.expect("a forecast's oom_at");
        let mut pipeline = strata::pipeline::Pipeline::new(None);
        let mut first: Option<(f64, f64)> = None;
        let mut errors: Vec<f64> = Vec::new();
        let mut missing = Vec::new();
        let mut worst_near_end: f64 = 0.0;
        let origin = first_time(&unpack(&trace.packed));
        for line in unpack(&trace.packed).lines() {
            let sample: strata::sample::NodeSample = serde_json::from_str(line).expect("a sample");
            let now = sample.time;
            if now >= oom_at {
                break;
            }
            let observed = pipeline.ingest(sample);
            let left = oom_at - now;
            let forecast = observed
                .findings
                .iter()
                .find(|f| f.kind.name() == "oom_forecast" && f.pid == expected.pid);
            let evidence = forecast.map(|f| f.evidence.to_json());
            let eta = evidence
                .as_ref()
                .and_then(|e| e.get("eta_secs").and_then(Value::as_f64));
            let read = |key: &str| {
                evidence
                    .as_ref()
                    .and_then(|e| e.get(key))
                    .map_or_else(|| "n/a".to_string(), Value::to_string)
            };
            match (eta, first) {
                (Some(eta), None) => first = Some((now, (eta - left) / left)),
                (Some(eta), Some(_)) => {
                    let error = (eta - left).abs();
                    if left >= 300.0 {
                        errors.push(error / left);
                    } else {
                        worst_near_end = worst_near_end.max(error);
                    }
                    if error > (ETA_LATER_ERROR * left).max(ETA_LATER_SECS) {
                        problems.push(format!(
                            "{} at +{:.0}s: ETA {eta:.0} s, {left:.0} s left (series {}, level {}, limit {}, {} B/s)",
                            trace.name,
                            now - origin,
                            read("series"),
                            read("level_bytes"),
                            read("limit_bytes"),
                            read("rate_bytes_per_sec"),
                        ));
                    }
                }
                (None, Some(_)) => missing.push(now - origin),
                (None, None) => {}
            }
        }
        checked += 1;
        let Some((raised, first_error)) = first else {
            problems.push(format!("{}: no forecast before the OOM", trace.name));
            continue;
        };
        if !missing.is_empty() {
            problems.push(format!(
                "{}: no forecast at {} sample(s) after its first (from +{:.0}s)",
                trace.name,
                missing.len(),
                missing[0]
            ));
        }
        errors.sort_by(f64::total_cmp);
        let worst = errors.last().copied().unwrap_or(0.0);
        let median = errors.get(errors.len() / 2).copied().unwrap_or(0.0);
        table.push_str(&format!(
            "{:<26} +{:>5.0}s        {:>+6.1}%           {:>5.1}%, {:>5.1}%                          {:>4.0} s               {}\n",
            trace.name,
            raised - origin,
            100.0 * first_error,
            100.0 * worst,
            100.0 * median,
            worst_near_end,
            errors.len() + 1
        ));
    }
    println!("{table}");
    assert!(checked >= 4, "only {checked} forecast traces");
    problems.truncate(30);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

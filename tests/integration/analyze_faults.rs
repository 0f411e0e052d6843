//! `strata analyze` over recordings spoiled the ways real ones are: a gap of minutes, lines
//! repeated and out of order, a process that leaves the list and comes back, allocator
//! counters reset to zero mid-run, a garbage line and a cut last line. None of it may raise a
//! finding the clean recording does not raise, or lose one it does, or panic.

use crate::common;

use common::strata;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};

const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/traces");

fn trace(name: &str) -> Vec<Value> {
    let out = Command::new("gzip")
        .args(["-dc", &format!("{TRACES}/{name}.jsonl.gz")])
        .output()
        .expect("gzip");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a sample"))
        .collect()
}

/// The lines as a recording's text.
fn text_of(lines: &[Value]) -> String {
    lines.iter().map(|l| l.to_string() + "\n").collect()
}

/// `strata analyze --json -` over this text; its exit status must be `status`.
fn analyze_with_status(text: String, status: i32) -> Value {
    let mut child = Command::new(strata())
        .args(["analyze", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("strata");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child.wait_with_output().expect("strata");
    writer.join().expect("writer").expect("write");
    assert_eq!(
        out.status.code(),
        Some(status),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// `strata analyze --json -` over a recording read whole.
fn analyze(text: String) -> Value {
    analyze_with_status(text, 0)
}

/// Each finding's kind, pid and device (and a climb's or OOM's cause or class).
fn findings(analysis: &Value) -> BTreeSet<String> {
    analysis["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            format!(
                "{} {} {} {}",
                f["kind"].as_str().unwrap_or("?"),
                f["pid"],
                f["device_uuid"],
                f["evidence"]["cause"]
                    .as_str()
                    .or(f["evidence"]["class"].as_str())
                    .unwrap_or("")
            )
        })
        .collect()
}

fn time(line: &Value) -> f64 {
    line["time"].as_f64().expect("time")
}

/// The same recording, spoiled.
fn spoil(clean: &[Value]) -> Vec<Value> {
    let t0 = time(&clean[0]);
    let minute = |line: &Value| (time(line) - t0) / 60.0;
    let mut out: Vec<Value> = Vec::new();
    for (i, line) in clean.iter().enumerate() {
        let m = minute(line);
        // Five minutes not sampled at all.
        if (12.0..17.0).contains(&m) {
            continue;
        }
        let mut line = line.clone();
        // Every counter read from minute 20 on is reset (reset_accumulated_memory_stats).
        if m >= 20.0 {
            for feed in line["feeds"].as_array_mut().into_iter().flatten() {
                for device in feed["devices"].as_array_mut().into_iter().flatten() {
                    let Some(device) = device.as_object_mut() else {
                        continue;
                    };
                    let mut all: Vec<&mut Value> = Vec::new();
                    for (key, value) in device.iter_mut() {
                        match key.as_str() {
                            "latest" => all.push(value),
                            "earlier" => all.extend(value.as_array_mut().into_iter().flatten()),
                            _ => {}
                        }
                    }
                    for stats in all {
                        for counter in ["alloc_retries", "ooms"] {
                            if stats[counter].is_u64() {
                                stats[counter] = Value::from(0u64);
                            }
                        }
                    }
                }
            }
        }
        // A process that is not listed for two minutes, with its feed (its memory freed).
        if (25.0..27.0).contains(&m) {
            let processes = line["processes"].as_array().cloned().unwrap_or_default();
            if let Some(gone) = processes.first() {
                let pid = gone["pid"].clone();
                let used = gone["used"].as_u64().unwrap_or(0);
                let device = gone["device_uuid"].clone();
                line["processes"]
                    .as_array_mut()
                    .expect("processes")
                    .retain(|p| p["pid"] != pid);
                line["feeds"]
                    .as_array_mut()
                    .expect("feeds")
                    .retain(|f| f["peer"]["pid"] != pid);
                for gpu in line["gpus"].as_array_mut().expect("gpus") {
                    if gpu["uuid"] == device {
                        let memory = &mut gpu["memory"];
                        let u = memory["used"].as_u64().expect("used") - used;
                        let f = memory["free"].as_u64().expect("free") + used;
                        memory["used"] = u.into();
                        memory["free"] = f.into();
                    }
                }
            }
        }
        out.push(line.clone());
        // Repeated now and then, and now and then a line from before.
        if i % 40 == 0 {
            out.push(line);
        }
        if i % 55 == 0 && i > 0 {
            out.push(clean[i - 1].clone());
        }
    }
    out
}

#[test]
fn a_spoiled_recording_says_what_the_clean_one_says() {
    for name in [
        "warmup_plateau",
        "sawtooth_90s",
        "leak_live_85",
        "alloc_retries_pressure",
    ] {
        let clean = trace(name);
        let want = analyze(text_of(&clean));
        // Spoiled, with a garbage line in the middle and its last line cut short.
        let spoiled = spoil(&clean);
        let (body, last) = spoiled.split_at(spoiled.len() - 1);
        let cut = last[0].to_string();
        let (before, after) = body.split_at(body.len() / 2);
        // The garbage line is a line lost: exit status 3, the analysis printed.
        let got = analyze_with_status(
            format!(
                "{}this is not a sample\n{}{}",
                text_of(before),
                text_of(after),
                &cut[..cut.len() / 2]
            ),
            3,
        );
        assert_eq!(got["bad_lines"].as_array().map(Vec::len), Some(1), "{name}");
        assert_eq!(got["truncated"], Value::Bool(true), "{name}");
        assert!(got["out_of_order"].as_u64().unwrap_or(0) > 0, "{name}");
        let (want, got) = (findings(&want), findings(&got));
        // Counters reset after minute 20: retries seen before still are; nothing new.
        assert!(
            got.is_subset(&want),
            "{name}: the spoiled recording raised {:?}",
            got.difference(&want).collect::<Vec<_>>()
        );
        for lost in want.difference(&got) {
            assert!(
                lost.starts_with("unexplained_usage") || lost.starts_with("stale_feed"),
                "{name}: the spoiled recording lost {lost}"
            );
        }
    }
}

/// What spoils a sample.
type Spoil = fn(&mut strata::sample::NodeSample);

/// Samples of one GPU, one a second from 0 to 59 s, `spoiled` from 10 s to 19 s (and again
/// from 55 s when `again`), as a recording's text.
fn episode_recording(spoil: Spoil, again: bool) -> String {
    use strata::fixtures::{gpu, memory, node, GIB, MIB};
    let mut text = String::new();
    for t in 0..60 {
        let mut sample = node();
        sample.time = 1_767_258_000.0 + f64::from(t);
        sample.gpus.push(gpu(0, memory(80 * GIB, 256 * MIB)));
        if (10..20).contains(&t) || (again && t >= 55) {
            spoil(&mut sample);
        }
        text += &serde_json::to_string(&sample).expect("json");
        text.push('\n');
    }
    text
}

/// An episode ends when its condition ends, as on the monitor: a GPU lost for 10 s and well
/// for the last 40 s is over at 19 s, not "still at the end"; so are an NVML refusal and
/// counters that contradict themselves. One that comes back within the monitor's hold
/// (120 s) is the same episode, with the same start, open at the end.
#[test]
fn an_episode_ends_when_its_condition_ends() {
    let cases: [(&str, Spoil); 3] = [
        ("gpu_lost", |s| s.gpus[0].lost = true),
        ("nvml_problem", |s| {
            s.gpus[0]
                .problems
                .insert("utilization".into(), "Unknown Error".into());
        }),
        ("inconsistent_counters", |s| {
            let memory = s.gpus[0].memory.as_mut().expect("memory");
            memory.free = memory.total + 1;
        }),
    ];
    let t0 = 1_767_258_000.0;
    for (kind, spoil) in cases {
        let analysis = analyze(episode_recording(spoil, false));
        let episodes: Vec<&Value> = analysis["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["kind"] == kind)
            .collect();
        assert_eq!(episodes.len(), 1, "{kind}: {analysis}");
        let e = episodes[0];
        assert_eq!(
            (e["since"].as_f64(), e["until"].as_f64(), &e["open"]),
            (Some(t0 + 10.0), Some(t0 + 19.0), &Value::Bool(false)),
            "{kind}: {e}"
        );
        let again = analyze(episode_recording(spoil, true));
        let episodes: Vec<&Value> = again["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["kind"] == kind)
            .collect();
        assert_eq!(episodes.len(), 1, "{kind}: {again}");
        let e = episodes[0];
        assert_eq!(
            (e["since"].as_f64(), e["until"].as_f64(), &e["open"]),
            (Some(t0 + 10.0), Some(t0 + 59.0), &Value::Bool(true)),
            "{kind}: {e}"
        );
    }
    // The timeline says when it ended.
    let out = Command::new(strata())
        .args(["analyze", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            let text = episode_recording(|s| s.gpus[0].lost = true, false);
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(text.as_bytes())?;
            child.wait_with_output()
        })
        .expect("strata");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("gpu_lost"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.starts_with("09:00:10 → 09:00:19"), "{line}");
    assert!(!text.contains("still at the end"), "{text}");
}

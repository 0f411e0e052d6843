//! `strata analyze` over recordings spoiled the ways real ones are: a gap of minutes, lines
//! repeated and out of order, a process that leaves the list and comes back, allocator
//! counters reset to zero mid-run, a garbage line and a cut last line. None of it may raise a
//! finding the clean recording does not raise, or lose one it does, or panic.

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

/// `strata analyze --json -` over this text.
fn analyze(text: String) -> Value {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
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
        let got = analyze(format!(
            "{}this is not a sample\n{}{}",
            text_of(before),
            text_of(after),
            &cut[..cut.len() / 2]
        ));
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

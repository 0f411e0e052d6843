//! NVML failing call by call, in the stand-in library (`tests/fake-nvml`): every function it
//! exports, made to answer each of three errors on every call, on a plain node and a MIG
//! node. Whatever fails, `strata snapshot` still answers, its layers still add up (or are
//! withheld with a reason), `other` is a bound where a process list is unread, and anything
//! the failure changed in what strata says is said in `problems`: a refusal is never taken
//! for a value NVML does not have.

use crate::common::fake_nvml::{fake_nvml_lib, scenario, workspace_root, SCENARIO_ENV};
use crate::common::{strata, Scratch};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

/// The names a list of the fake's `faults.rs` holds (`DEVICE_CALLS`, `SYSTEM_CALLS`): every
/// function it exports, read from its source so that a new one is tested too.
fn exported(list: &str) -> Vec<String> {
    let source = std::fs::read_to_string(workspace_root().join("tests/fake-nvml/src/faults.rs"))
        .expect("faults.rs");
    let start = source
        .find(&format!("pub const {list}: &[&str] = &["))
        .unwrap_or_else(|| panic!("{list} in faults.rs"));
    let body = &source[start..];
    let body = &body[body.find("&[").expect("list") + 2..body.find("];").expect("end")];
    body.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Two samples of `strata snapshot --json` on the scenario at `path`: its exit status, its
/// samples, its stderr.
fn snapshot(path: &Path) -> (Option<i32>, Vec<Value>, String) {
    let out = Command::new(strata())
        .args(["snapshot", "--json", "--count", "2", "--interval", "0.05"])
        .arg("--nvml-lib")
        .arg(fake_nvml_lib())
        .env(SCENARIO_ENV, path)
        .env_remove("STRATA_FEED_DIR")
        .output()
        .expect("strata runs");
    let samples = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect();
    (
        out.status.code(),
        samples,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A snapshot without what moves from one run to the next (times, the host's own figures).
fn steady(sample: &Value) -> Value {
    let mut s = sample.clone();
    for key in [
        "time",
        "poll_secs",
        "host_cpu_percent",
        "host_memory",
        "device_files",
    ] {
        s.as_object_mut().expect("object").remove(key);
    }
    for p in s["processes"].as_array_mut().expect("processes") {
        for key in ["cpu_percent", "host_memory", "elapsed"] {
            p.as_object_mut().expect("object").remove(key);
        }
    }
    s
}

/// Everything `problems` says, at the node, each GPU and each MIG instance.
fn said(sample: &Value) -> Vec<String> {
    let mut out: Vec<String> = sample["problems"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    for g in sample["gpus"].as_array().expect("gpus") {
        let mut devices = vec![g];
        devices.extend(g["mig"].as_array().expect("mig"));
        for d in devices {
            if let Some(p) = d["problems"].as_object() {
                out.extend(p.keys().cloned());
            }
        }
    }
    out
}

fn check(sample: &Value, clean: &Value, case: &str) {
    crate::common::snapshot::assert_layers_add_up(sample, true);
    for g in sample["gpus"].as_array().expect("gpus") {
        let mut devices = vec![g];
        devices.extend(g["mig"].as_array().expect("mig"));
        for d in devices {
            if d["processes_known"] == false && d["layers"].is_object() {
                assert_eq!(
                    d["bounds"]["other"], "upper",
                    "{case}: other is a bound while a process list is unread: {d}"
                );
            }
        }
    }
    let lost = sample["gpus"]
        .as_array()
        .expect("gpus")
        .iter()
        .any(|g| g["lost"] == true);
    if steady(sample) != steady(clean) && !lost {
        assert!(
            !said(sample).is_empty(),
            "{case}: what strata says changed, and no problem says why:\n{sample}"
        );
    }
}

#[test]
fn any_nvml_call_failing_is_said_never_taken_for_a_value() {
    let scratch = Scratch::new("adv-nvml");
    let devices = exported("DEVICE_CALLS");
    let system = exported("SYSTEM_CALLS");
    assert!(
        devices.len() >= 20 && system.len() >= 4,
        "{devices:?} {system:?}"
    );
    let mut cases = Vec::new();
    for name in ["two_gpus", "mig"] {
        let base: Value =
            serde_json::from_str(&std::fs::read_to_string(scenario(name)).expect("scenario"))
                .expect("JSON");
        for error in ["Unknown", "NoPermission", "GpuIsLost"] {
            for call in devices.iter().chain(&system) {
                let mut s = base.clone();
                let fault = json!({ "call": call, "error": error });
                if system.contains(call) {
                    s["system"]["faults"] = json!([fault]);
                } else {
                    s["devices"][0]["faults"] = json!([fault]);
                }
                cases.push((name, format!("{name}: {call} answers {error}"), s));
            }
        }
    }
    let clean: std::collections::HashMap<&str, Value> = ["two_gpus", "mig"]
        .into_iter()
        .map(|name| {
            let (status, samples, stderr) = snapshot(&scenario(name));
            assert_eq!(status, Some(0), "{name}: {stderr}");
            (name, samples[1].clone())
        })
        .collect();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for (w, share) in cases.chunks(cases.len().div_ceil(workers)).enumerate() {
            let (clean, dir) = (&clean, &scratch.dir);
            scope.spawn(move || {
                let path = dir.join(format!("scenario-{w}.json"));
                for (name, case, s) in share {
                    std::fs::write(&path, s.to_string()).expect("scenario");
                    let (status, samples, stderr) = snapshot(&path);
                    assert_eq!(status, Some(0), "{case}: {stderr}");
                    assert_eq!(samples.len(), 2, "{case}: {stderr}");
                    check(&samples[1], &clean[name], case);
                }
            });
        }
    });
}

//! `snapshot --json --group-by BY`: each group row against an oracle that groups the
//! snapshot's own processes by their owner, its own way, and sums them per device.

use crate::common;

use common::strata;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;

const PROCESS_LAYERS: [&str; 6] = [
    "live",
    "fragmented",
    "cached",
    "outside_pool",
    "context",
    "unattributed",
];

fn snapshot(by: &str, at: &str) -> Value {
    let output = Command::new(strata())
        .args([
            "snapshot",
            "--demo",
            "--demo-at",
            at,
            "--json",
            "--group-by",
            by,
        ])
        .output()
        .expect("strata runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON sample")
}

/// The oracle's key of a process: read from the owner object as a person would.
fn key(by: &str, p: &Value) -> Option<String> {
    let o = &p["owner"];
    let s = |k: &str| o[k].as_str().map(str::to_string);
    match by {
        "launcher" => Some(format!(
            "{} {}",
            s("launcher").unwrap_or_else(|| "launcher".into()),
            o["launcher_pid"].as_u64()?
        )),
        "slurm" => Some(format!("slurm {}", s("slurm_job")?)),
        "user" => Some(format!("user {}", p["user"].as_str()?)),
        "pod" => match o["kind"].as_str()? {
            "pod" => Some(format!("pod {}/{}", s("namespace")?, s("pod")?)),
            "container" => Some(format!("{} {}", s("runtime")?, s("container")?)),
            _ => None,
        },
        _ => None,
    }
}

/// Sums `field` over processes: `None` when every member's is unknown; `partial` when some is.
fn sum(members: &[&Value], field: impl Fn(&Value) -> Option<u64>) -> (Option<u64>, bool) {
    let known: Vec<u64> = members.iter().filter_map(|m| field(m)).collect();
    let total = (!known.is_empty()).then(|| known.iter().sum());
    (total, known.len() < members.len())
}

#[test]
fn every_group_row_is_the_sum_of_its_members_on_its_device() {
    for at in ["300", "905"] {
        for by in ["launcher", "pod", "slurm", "user"] {
            let snap = snapshot(by, at);
            assert_eq!(snap["groups"]["by"], by);
            let rows = snap["groups"]["rows"].as_array().expect("rows");
            let processes = snap["processes"].as_array().expect("processes");
            let mut expected: BTreeMap<(String, String), Vec<&Value>> = BTreeMap::new();
            for p in processes {
                if let Some(k) = key(by, p) {
                    let device = p["device_uuid"].as_str().expect("device").to_string();
                    expected.entry((k, device)).or_default().push(p);
                }
            }
            assert_eq!(rows.len(), expected.len(), "{by} at {at}: {rows:?}");
            assert!(!rows.is_empty(), "the demo has {by} groups");
            for row in rows {
                let k = (
                    row["key"].as_str().expect("key").to_string(),
                    row["device_uuid"].as_str().expect("device").to_string(),
                );
                let members = expected
                    .get(&k)
                    .unwrap_or_else(|| panic!("{k:?} unexpected"));
                let pids: Vec<u64> = members.iter().filter_map(|m| m["pid"].as_u64()).collect();
                let got: Vec<u64> = row["pids"]
                    .as_array()
                    .expect("pids")
                    .iter()
                    .filter_map(Value::as_u64)
                    .collect();
                assert_eq!(got, pids, "{k:?}");
                let (used, used_partial) = sum(members, |m| m["used"].as_u64());
                assert_eq!(row["used"].as_u64(), used, "{k:?} used");
                assert_eq!(row["used_partial"], used_partial && used.is_some(), "{k:?}");
                for layer in PROCESS_LAYERS {
                    // A fed process reports the pool's layers and its context, an unfed one
                    // its NVML used as unattributed: a null where it reports is unknown.
                    let reports = |m: &Value| (layer == "unattributed") == m["feed"].is_null();
                    let unknown = members
                        .iter()
                        .any(|m| reports(m) && m["layers"][layer].is_null());
                    let (total, _) = sum(members, |m| m["layers"][layer].as_u64());
                    let shown = row["layers"][layer].as_u64();
                    let partial = row["partial"]
                        .as_array()
                        .expect("partial")
                        .iter()
                        .any(|l| l == layer);
                    // No member reporting it: n/a, as in each member's own row.
                    let want = total;
                    assert_eq!(shown, want, "{k:?} {layer}");
                    assert_eq!(partial, unknown && total.is_some(), "{k:?} {layer} partial");
                }
                assert!(row["layers"]["other"].is_null() && row["layers"]["free"].is_null());
                // A member's bound makes the group's sum the same bound.
                for (layer, bound) in row["bounds"].as_object().expect("bounds") {
                    assert!(
                        members.iter().any(|m| m["bounds"][layer] == *bound),
                        "{k:?}: {layer} is {bound} with no member so"
                    );
                }
                for m in members {
                    for (layer, bound) in m["bounds"].as_object().into_iter().flatten() {
                        assert_eq!(row["bounds"][layer], *bound, "{k:?} {layer}");
                    }
                }
            }
        }
    }
}

#[test]
fn group_by_needs_json_and_a_known_grouping() {
    let run = |args: &[&str]| {
        Command::new(strata())
            .args(args)
            .output()
            .expect("strata runs")
    };
    let out = run(&["snapshot", "--demo", "--group-by", "pod"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["snapshot", "--demo", "--json", "--group-by", "rack"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("none, launcher, pod, slurm or user"));
}

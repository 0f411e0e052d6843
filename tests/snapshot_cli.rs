//! `strata snapshot --demo --json`: the public contract scripts and later views rely on.

mod common;

use assert_cmd::Command;
use common::snapshot::{assert_layers_add_up, LAYERS};
use serde_json::Value;

fn snapshot(args: &[&str]) -> Vec<Value> {
    let out = Command::cargo_bin("strata")
        .expect("binary")
        .args(["snapshot", "--demo", "--json"])
        .args(args)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
        .collect()
}

fn has(object: &Value, keys: &[&str], what: &str) {
    for key in keys {
        assert!(object.get(key).is_some(), "{what} lacks `{key}`: {object}");
    }
}

#[test]
fn snapshot_has_the_documented_fields() {
    let snap = &snapshot(&[])[0];
    has(
        snap,
        &[
            "schema",
            "time",
            "host",
            "driver_version",
            "cuda_driver_version",
            "gpus",
            "processes",
            "findings",
        ],
        "snapshot",
    );
    assert_eq!(snap["schema"], "strata.snapshot/1");
    assert!(snap["time"].is_number());
    let gpus = snap["gpus"].as_array().expect("gpus");
    assert_eq!(gpus.len(), 4);
    for g in gpus {
        has(
            g,
            &[
                "index",
                "uuid",
                "name",
                "memory",
                "utilization_gpu",
                "mig_mode",
                "lost",
                "layers",
                "mig",
            ],
            "gpu",
        );
        has(
            &g["memory"],
            &["total", "used", "free", "driver_reserved"],
            "gpu memory",
        );
        has(&g["layers"], &LAYERS, "gpu layers");
        for m in g["mig"].as_array().expect("mig list") {
            has(
                m,
                &[
                    "uuid",
                    "profile",
                    "gpu_instance_id",
                    "compute_instance_id",
                    "memory",
                    "layers",
                ],
                "mig",
            );
        }
    }
    let processes = snap["processes"].as_array().expect("processes");
    assert!(!processes.is_empty());
    for p in processes {
        has(
            p,
            &[
                "pid",
                "device_uuid",
                "used",
                "visible",
                "proc_state",
                "user",
                "command",
                "sm_util",
                "feed",
                "layers",
            ],
            "process",
        );
        if !p["feed"].is_null() {
            has(
                &p["feed"],
                &[
                    "framework",
                    "framework_version",
                    "backend",
                    "allocated",
                    "reserved",
                    "inactive_split",
                    "peak_allocated",
                    "peak_reserved",
                    "alloc_retries",
                    "ooms",
                    "largest_free_block",
                    "time",
                ],
                "feed",
            );
        }
    }
    let findings = snap["findings"].as_array().expect("findings");
    assert!(!findings.is_empty());
    for f in findings {
        has(
            f,
            &["kind", "severity", "device_uuid", "pid", "since", "message"],
            "finding",
        );
    }
}

#[test]
fn every_gpu_and_mig_instance_adds_up_to_its_total() {
    for snap in snapshot(&["--count", "5", "--demo-at", "0"])
        .iter()
        .chain(&snapshot(&[]))
    {
        assert_layers_add_up(snap, false);
    }
}

#[test]
fn demo_shows_the_situations_the_product_is_for() {
    let snap = &snapshot(&[])[0];
    let processes = snap["processes"].as_array().expect("processes");
    let async_backend = processes
        .iter()
        .find(|p| p["feed"]["backend"] == "cudaMallocAsync")
        .expect("a cudaMallocAsync process");
    assert!(
        async_backend["layers"]["fragmented"].is_null(),
        "unknown is null, not 0"
    );
    assert!(processes
        .iter()
        .any(|p| p["feed"].is_null() && p["visible"] == true));
    let kinds: Vec<&str> = snap["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"zombie_context"), "{kinds:?}");
    assert!(kinds.contains(&"unexplained_usage"), "{kinds:?}");
    let mig: Vec<&str> = snap["gpus"][3]["mig"]
        .as_array()
        .expect("mig")
        .iter()
        .filter_map(|m| m["profile"].as_str())
        .collect();
    assert_eq!(mig, ["3g.40gb", "2g.20gb", "1g.10gb"]);
}

#[test]
fn the_same_demo_instant_is_the_same_snapshot() {
    assert_eq!(
        snapshot(&["--demo-at", "333"]),
        snapshot(&["--demo-at", "333"])
    );
}

#[test]
fn unknown_flags_are_usage_errors() {
    let out = Command::cargo_bin("strata")
        .expect("binary")
        .arg("--frobnicate")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage"));
}

#[test]
fn without_the_driver_library_one_line_and_a_hint() {
    for args in [vec!["snapshot", "--json"], vec![]] {
        let out = Command::cargo_bin("strata")
            .expect("binary")
            .args(&args)
            .env("STRATA_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        assert!(err.contains("NVIDIA driver library was not found"), "{err}");
        assert!(err.contains("--demo"), "{err}");
        assert!(out.stdout.is_empty(), "nothing half-drawn on stdout");
    }
}

//! `strata fleet` against a fleet larger than the machine: `benches/fleet_scale.py` writes 64
//! nodes x 8 GPUs x 8 processes as OpenMetrics in `strata serve`'s shape (a job of 512 ranks
//! across the 64 nodes, one of which leaks), loads them into a real Prometheus with `promtool
//! tsdb create-blocks-from openmetrics`, scrapes two live `strata serve --demo` targets beside
//! them, and reads the fleet once with `--json`: through the per-process series, then through
//! the recording rules of `assets/prometheus/strata-fleet-rules.yml`. Both must find the 64 nodes up,
//! the job whole and its one leaking rank, and say the same.

use crate::common;

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs the bench once at 64 nodes (`extra`: its rule options) and returns the fleet it read.
fn backfilled(dir: &Path, extra: &[&str]) -> Value {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(repo.join("benches/fleet_scale.py"))
        .args(["--nodes", "64", "--runs", "1", "--history", "60", "--keep"])
        .arg(dir)
        .args(["--strata", common::strata()])
        .args(extra)
        .current_dir(repo)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "benches/fleet_scale.py failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let kept = dir.join("64");
    let json = std::fs::read_dir(&kept)
        .expect("the kept folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap_or_else(|| panic!("no fleet JSON in {}", kept.display()));
    serde_json::from_str(&std::fs::read_to_string(json).expect("the JSON")).expect("JSON")
}

fn check(f: &Value, how: &str) {
    assert_eq!(f["problems"], serde_json::json!([]), "{how}");
    let nodes = f["nodes"].as_array().expect("nodes");
    // The bench keeps the read less what moves between reads: the live demo targets.
    assert_eq!(nodes.len(), 64, "{how}: the backfilled nodes");
    assert!(nodes.iter().all(|n| n["state"] == "up"), "{how}");
    let job = f["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|j| j["key"] == "slurm 9001")
        .unwrap_or_else(|| panic!("{how}: no job 9001"));
    assert_eq!(
        (
            job["processes"].as_u64(),
            job["nodes"].as_u64(),
            job["world_size"].as_u64()
        ),
        (Some(512), Some(64), Some(512)),
        "{how}"
    );
    let findings = f["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 1, "{how}: {findings:?}");
    assert_eq!(
        findings[0]["message"],
        "slurm 9001: rank 29 on node-0003 GPU 5: live +80.0 MiB/min, the other 511 flat",
        "{how}"
    );
}

#[test]
fn a_backfilled_fleet_of_64_nodes_and_its_leaking_rank() {
    let scratch = common::Scratch::new("fleet-backfill");
    let raw = backfilled(&scratch.dir.join("raw"), &[]);
    check(&raw, "from the processes' series");
    let rules =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/prometheus/strata-fleet-rules.yml");
    let ruled = backfilled(
        &scratch.dir.join("rules"),
        &[
            "--rules",
            rules.to_str().expect("utf-8"),
            "--evaluation-interval",
            "2s",
        ],
    );
    check(&ruled, "from the recording rules");
    // The two paths read the same fleet (the bench keeps each read less the live targets).
    assert_eq!(raw, ruled);
}

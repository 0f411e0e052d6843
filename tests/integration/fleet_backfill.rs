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

/// Runs the bench once at 64 nodes (`extra`: its options) and returns the fleets it read, in
/// the order of its reads (`--read`).
fn backfilled(dir: &Path, extra: &[&str]) -> Vec<Value> {
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
    let mut reads: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(&kept)
        .expect("the kept folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| {
            let stem = p.file_stem()?.to_str()?;
            Some((stem.rsplit('-').next()?.parse().ok()?, p.clone()))
        })
        .collect();
    reads.sort();
    assert!(!reads.is_empty(), "no fleet JSON in {}", kept.display());
    reads
        .into_iter()
        .map(|(_, p)| {
            serde_json::from_str(&std::fs::read_to_string(p).expect("the JSON")).expect("JSON")
        })
        .collect()
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
    let mut reads = Vec::new();
    for read in WINDOWS {
        reads.extend(["--read", read]);
    }
    let raw = backfilled(&scratch.dir.join("raw"), &reads);
    check(&raw[0], "from the processes' series");
    windows(&raw[0], &raw[1..], false);
    let rules =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/prometheus/strata-fleet-rules.yml");
    let mut args = vec![
        "--rules",
        rules.to_str().expect("utf-8"),
        "--evaluation-interval",
        "2s",
    ];
    args.extend(reads);
    let ruled = backfilled(&scratch.dir.join("rules"), &args);
    check(&ruled[0], "from the recording rules");
    // The two paths read the same fleet (the bench keeps each read less the live targets).
    assert_eq!(raw[0], ruled[0]);
    windows(&ruled[0], &ruled[1..], true);
}

/// The reads of the windowed test, after a whole one: the first 20 rows by each order, a
/// filter, and the emptiest 20.
const WINDOWS: [&str; 6] = [
    "",
    "--rows 20",
    "--rows 20 --sort used",
    "--rows 20 --sort node",
    "--rows 20 --filter NODE-0003",
    "--rows 20 --sort used --reversed",
];

/// A device of a read, by node and UUID, and its place in the urgency order as the client
/// works it (`model::Urgency`): critical findings, the soonest OOM, climbs, fragmentation,
/// the used share.
fn devices(f: &Value) -> Vec<((String, String), [f64; 5])> {
    let mut out = Vec::new();
    for n in f["nodes"].as_array().expect("nodes") {
        for d in n["devices"].as_array().expect("devices") {
            let findings = d["findings"].as_array().expect("findings");
            let count = |ok: &dyn Fn(&Value) -> bool| -> f64 {
                findings
                    .iter()
                    .filter(|x| ok(x))
                    .map(|x| x["count"].as_f64().expect("count"))
                    .sum()
            };
            let layers = d["layers"].as_object().expect("layers");
            let used: f64 = layers
                .iter()
                .filter(|(k, _)| *k != "free")
                .map(|(_, v)| v.as_f64().expect("bytes"))
                .sum();
            let share = d["total"].as_f64().map_or(0.0, |t| used / t);
            out.push((
                (
                    n["instance"].as_str().expect("instance").to_string(),
                    d["uuid"].as_str().expect("uuid").to_string(),
                ),
                [
                    count(&|x| x["severity"] == "critical"),
                    d["oom_eta_secs"].as_f64().map_or(f64::NEG_INFINITY, |s| -s),
                    count(&|x| x["kind"] == "climb"),
                    count(&|x| x["kind"] == "fragmentation"),
                    share,
                ],
            ));
        }
    }
    out
}

/// Each windowed read holds the rows a whole read puts first, by its order: no device left
/// out comes before one read. Prometheus picked them (`topk`, of the recorded score where
/// `ruled`, else of the expression); the whole read is sorted by the client.
fn windows(whole: &Value, windowed: &[Value], ruled: bool) {
    let all = devices(whole);
    assert_eq!(all.len(), 512, "the whole read's backfilled devices");
    let by_urgency = |a: &[f64; 5], b: &[f64; 5]| a.partial_cmp(b).expect("no NaN");
    let by_used = |a: &[f64; 5], b: &[f64; 5]| a[4].total_cmp(&b[4]);
    let by_used_reversed = |a: &[f64; 5], b: &[f64; 5]| b[4].total_cmp(&a[4]);
    for (read, (name, w)) in WINDOWS[1..].iter().zip(windowed.iter().enumerate()) {
        let part = &w["part"];
        let devices_read = part["devices_read"].as_u64().expect("devices_read");
        match name {
            // Whole nodes: the live targets' and the first backfilled ones.
            2 => assert!(devices_read >= 20, "{read}: {part}"),
            3 => assert_eq!(devices_read, 8, "{read}: {part}"),
            _ => assert_eq!(devices_read, 20, "{read}: {part}"),
        }
        let read_now: Vec<(String, String)> = devices(w).into_iter().map(|d| d.0).collect();
        // With the jobs recorded, a window lists only the nodes it needs (every node is up
        // here: those of the rows read) and counts the rest; else every node is listed.
        let nodes = w["nodes"].as_array().expect("nodes");
        let whole_nodes = whole["nodes"].as_array().expect("nodes").len();
        if ruled {
            // (The reads kept leave the two live targets out; the count has them.)
            assert_eq!(
                part["nodes"].as_u64(),
                Some(whole_nodes as u64 + 2),
                "{read}: {part}"
            );
            let of_rows: std::collections::BTreeSet<&str> =
                read_now.iter().map(|(i, _)| i.as_str()).collect();
            assert!(
                nodes.len() == of_rows.len() && nodes.len() < whole_nodes,
                "{read}: {} nodes listed for the rows of {:?}",
                nodes.len(),
                of_rows
            );
        } else {
            assert_eq!(part["nodes"], Value::Null, "{read}: {part}");
            // (`--json --filter` keeps the nodes that match.)
            if name != 3 {
                assert_eq!(nodes.len(), whole_nodes, "{read}");
            }
        }
        let (inside, outside): (Vec<_>, Vec<_>) = all.iter().partition(|d| read_now.contains(&d.0));
        // The backfilled devices read are a device's own figures, as the whole read has them.
        assert_eq!(inside.len(), read_now.len(), "{read}");
        match name {
            // The first by the order: no device left out comes before one read (reversed:
            // none is emptier).
            0 | 1 | 4 => {
                let order = match name {
                    0 => by_urgency,
                    1 => by_used,
                    _ => by_used_reversed,
                };
                let least_in = inside.iter().map(|d| d.1).min_by(order);
                let most_out = outside.iter().map(|d| d.1).max_by(order);
                if let (Some(i), Some(o)) = (least_in, most_out) {
                    assert!(
                        order(&i, &o).is_ge(),
                        "{read}: a device left out ({o:?}) comes before one read ({i:?})"
                    );
                }
                if name == 0 {
                    // The leaking rank's device is the most urgent backfilled one.
                    assert!(
                        read_now.iter().any(|(i, _)| i == "node-0003:9842"),
                        "{read}: {read_now:?}"
                    );
                }
            }
            2 => {
                // The live targets' hosts (demo-node-N) come first; then whole nodes, by name.
                let nodes: std::collections::BTreeSet<&str> =
                    read_now.iter().map(|(i, _)| i.as_str()).collect();
                let names: Vec<&str> = w["nodes"]
                    .as_array()
                    .expect("nodes")
                    .iter()
                    .filter(|n| nodes.contains(n["instance"].as_str().expect("instance")))
                    .map(|n| n["name"].as_str().expect("name"))
                    .collect();
                // The first nodes by name, whole; how many depends on whether the live
                // targets were counted yet (a recorded count is as old as its evaluation).
                let first: Vec<String> = (0..names.len()).map(|n| format!("node-{n:04}")).collect();
                assert!(!names.is_empty() && names == first, "{read}: {names:?}");
                assert_eq!(read_now.len(), 8 * names.len(), "{read}: whole nodes");
            }
            _ => {
                assert_eq!(part["devices"], 8, "{read}: {part}");
                assert_eq!(read_now.len(), 8, "{read}");
                let names: std::collections::BTreeSet<&str> = w["nodes"]
                    .as_array()
                    .expect("nodes")
                    .iter()
                    .map(|n| n["name"].as_str().expect("name"))
                    .collect();
                assert_eq!(
                    names.into_iter().collect::<Vec<_>>(),
                    ["node-0003"],
                    "{read}"
                );
                if ruled {
                    // No job's key holds the filter; the climbing job is read for its finding.
                    assert_eq!(part["jobs"], 0, "{read}: {part}");
                }
            }
        }
        // Every read, whatever its window, finds the one leaking rank.
        assert_eq!(w["findings"], whole["findings"], "{read}");
        if !ruled {
            // The jobs from every process: all of them, not counted.
            assert_eq!(part["jobs"], Value::Null, "{read}: {part}");
            // (No job's key holds the filter's text.)
            let expected = if name == 3 {
                &[][..]
            } else {
                whole["jobs"].as_array().expect("jobs")
            };
            assert!(
                w["jobs"].as_array() == Some(&expected.to_vec()),
                "{read}: the jobs differ"
            );
        } else if name != 3 {
            let jobs = w["jobs"].as_array().expect("jobs");
            assert!(part["jobs_read"].as_u64() <= Some(21), "{read}: {part}");
            assert!(
                part["jobs"].as_u64() > part["jobs_read"].as_u64(),
                "{read}: {part}"
            );
            // The largest job first, whole.
            assert_eq!(jobs[0]["key"], "slurm 9001", "{read}");
            assert_eq!(jobs[0]["processes"], 512, "{read}");
        }
    }
}

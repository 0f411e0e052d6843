//! `strata snapshot --report`: the Markdown report of a fixed demo instant, reviewed line by
//! line as a snapshot file, and every exact-byte figure in it equal to the JSON snapshot's of
//! the same instant, field by field.

use crate::common;

use assert_cmd::Command;
use common::fake_nvml::{fake_nvml_lib, scenario, SCENARIO_ENV};
use common::strata;
use serde_json::Value;

const AT: &str = "905";

fn run(args: &[&str]) -> String {
    let out = Command::new(strata())
        .args(["snapshot", "--demo", "--demo-at", AT])
        .args(args)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn the_report_of_a_fixed_demo_instant_matches_its_snapshot() {
    insta::assert_snapshot!("demo_report_905", run(&["--report"]));
}

/// The exact bytes of a figure: `54.6 GiB (58,594,426,880 B)` is 58594426880; `n/a` is
/// `None`. A value that is neither is a failure.
fn exact(cell: &str) -> Option<u64> {
    let cell = cell.trim();
    if cell == "n/a" {
        return None;
    }
    let open = cell
        .rfind('(')
        .unwrap_or_else(|| panic!("no exact bytes in {cell:?}"));
    let digits: String = cell[open + 1..]
        .trim_end_matches(')')
        .trim_end_matches(" B")
        .chars()
        .filter(|c| *c != ',')
        .collect();
    Some(
        digits
            .parse()
            .unwrap_or_else(|_| panic!("not a byte count: {cell:?}")),
    )
}

/// The cells of a Markdown table row, split on the `|` that are not escaped.
fn cells(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = line.trim().trim_matches('|').chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                out.last_mut().expect("a cell").push(c);
                if let Some(next) = chars.next() {
                    out.last_mut().expect("a cell").push(next);
                }
            }
            '|' => out.push(String::new()),
            _ => out.last_mut().expect("a cell").push(c),
        }
    }
    out.into_iter().map(|c| c.trim().to_string()).collect()
}

/// The sections of the report (`### ...` to the next heading), by their first line.
fn sections(report: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in report.lines() {
        if let Some(title) = line.strip_prefix("### ") {
            out.push((title.to_string(), Vec::new()));
        } else if line.starts_with("## ") {
            out.push((line.to_string(), Vec::new()));
        } else if let Some((_, lines)) = out.last_mut() {
            lines.push(line.to_string());
        }
    }
    out
}

/// The value cell (the third) of the row whose first cell is `name`.
fn row_value(lines: &[String], name: &str) -> Option<u64> {
    let row = lines
        .iter()
        .map(|l| cells(l))
        .find(|c| c.first().map(String::as_str) == Some(name))
        .unwrap_or_else(|| panic!("no row {name:?} in {lines:#?}"));
    exact(row[2].trim_start_matches("≥ "))
}

const LAYERS: [&str; 8] = [
    "live",
    "fragmented",
    "cached",
    "outside_pool",
    "context",
    "unattributed",
    "other",
    "free",
];

#[test]
fn every_figure_in_the_report_equals_the_json_snapshots() {
    let report = run(&["--report"]);
    let json: Value = serde_json::from_str(&run(&["--json"])).expect("JSON");
    let sections = sections(&report);
    let uuid_of = |lines: &[String], prefix: &str| -> Option<String> {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .map(|rest| rest.split(' ').next().unwrap_or_default().replace("\\", ""))
    };

    // Each device: NVML's figures and every layer, found by its UUID.
    let mut devices = 0;
    for g in json["gpus"].as_array().expect("gpus") {
        let mut of_gpu = vec![g];
        of_gpu.extend(
            g["mig"]
                .as_array()
                .expect("mig")
                .iter()
                // Compute instances of one GPU instance share its memory: told once.
                .filter(|m| m["gpu_instance_members"][0] == m["uuid"]),
        );
        for d in of_gpu {
            let uuid = d["uuid"].as_str().expect("uuid");
            let (_, lines) = sections
                .iter()
                .find(|(_, lines)| uuid_of(lines, "UUID ").as_deref() == Some(uuid))
                .unwrap_or_else(|| panic!("no section for {uuid}"));
            for (row, field) in [
                ("total memory", "total"),
                ("used", "used"),
                ("free", "free"),
                ("driver reserved", "driver_reserved"),
            ] {
                assert_eq!(
                    row_value(lines, row),
                    d["memory"][field].as_u64(),
                    "{uuid} {field}"
                );
            }
            for layer in LAYERS {
                assert_eq!(
                    row_value(lines, layer),
                    d["layers"][layer].as_u64(),
                    "{uuid} layer {layer}"
                );
                let partial = d["partial"]
                    .as_array()
                    .expect("partial")
                    .iter()
                    .any(|p| p == layer);
                // A lower bound: a partial sum, or the memory outside the pool beside an
                // estimated context (the JSON's `bounds`).
                let lower = d["bounds"][layer] == "lower";
                let marked = lines
                    .iter()
                    .any(|l| l.starts_with(&format!("| {layer} |")) && l.contains("| ≥ "));
                assert_eq!(marked, partial || lower, "{uuid} {layer} partial or lower");
            }
            devices += 1;
        }
    }
    assert_eq!(devices, 7, "4 GPUs and 3 MIG instances");

    // Each process: NVML's used in the table; a fed one's allocator figures in its section.
    let table: Vec<Vec<String>> = sections
        .iter()
        .find(|(t, _)| t == "## Processes")
        .expect("processes")
        .1
        .iter()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| PID"))
        .map(|l| cells(l))
        .collect();
    let processes = json["processes"].as_array().expect("processes");
    assert_eq!(table.len(), processes.len());
    let mut fed = 0;
    for (p, row) in processes.iter().zip(&table) {
        let pid = p["pid"].as_u64().expect("pid");
        assert_eq!(row[0], pid.to_string());
        assert_eq!(exact(&row[6]), p["used"].as_u64(), "PID {pid} used");
        // The owner cell names what the JSON's owner names.
        let kind = p["owner"]["kind"].as_str().unwrap_or("n/a");
        match kind {
            "pod" => assert!(row[2].starts_with("pod "), "{row:?}"),
            "slurm" => assert!(row[2].starts_with("slurm "), "{row:?}"),
            "container" => assert!(
                row[2].contains(p["owner"]["container"].as_str().unwrap_or("?")),
                "{row:?}"
            ),
            "unit" => assert!(row[2].starts_with("unit "), "{row:?}"),
            "none" => assert_eq!(row[2], "none"),
            _ => assert!(row[2].starts_with("n/a"), "{row:?}"),
        }
        if p["feed"].is_null() {
            continue;
        }
        let uuid = p["device_uuid"].as_str().expect("device");
        let (_, lines) = sections
            .iter()
            .find(|(title, lines)| {
                title.starts_with(&format!("PID {pid} · "))
                    && lines
                        .iter()
                        .any(|l| l.ends_with(&format!("device UUID {uuid}")))
            })
            .unwrap_or_else(|| panic!("no section for PID {pid} on {uuid}"));
        let feed = &p["feed"];
        for (row, value) in [
            ("used", &p["used"]),
            ("allocated", &feed["allocated"]),
            ("reserved", &feed["reserved"]),
            ("fragmented", &feed["inactive_split"]),
            ("largest free block", &feed["largest_free_block"]),
            ("peak allocated (allocator)", &feed["peak_allocated"]),
            ("peak reserved (allocator)", &feed["peak_reserved"]),
            ("context", &p["layers"]["context"]),
            ("outside_pool", &p["layers"]["outside_pool"]),
            ("cached", &p["layers"]["cached"]),
        ] {
            assert_eq!(row_value(lines, row), value.as_u64(), "PID {pid} {row}");
        }
        fed += 1;
    }
    assert!(fed >= 5, "the demo feeds five processes at {AT}: {fed}");

    // The last OOM: the latest any feed reported.
    let oom = json["feeds"]
        .as_array()
        .expect("feeds")
        .iter()
        .flat_map(|f| f["ooms"].as_array().cloned().unwrap_or_default())
        .max_by(|a, b| {
            a["time"]
                .as_f64()
                .unwrap_or(0.0)
                .total_cmp(&b["time"].as_f64().unwrap_or(0.0))
        })
        .expect("the demo has had an OOM by 905 s");
    let (_, lines) = sections
        .iter()
        .find(|(t, _)| t == "## Last OOM")
        .expect("the last OOM");
    assert_eq!(row_value(lines, "requested"), oom["requested"].as_u64());
    assert_eq!(row_value(lines, "device free"), oom["device_free"].as_u64());
    assert_eq!(
        row_value(lines, "device total"),
        oom["device_total"].as_u64()
    );
    assert!(oom["requested"].as_u64().is_some());
}

#[test]
fn report_and_json_cannot_be_asked_together() {
    let out = Command::new(strata())
        .args(["snapshot", "--demo", "--json", "--report"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
}

/// Through NVML (the fake library, a MIG scenario): the time is UTC, the driver and CUDA
/// versions are NVML's, and each device's total is the scenario's, in exact bytes.
#[test]
fn the_report_reads_nvml_and_tells_utc_time() {
    let file = scenario("mig");
    let out = Command::new(strata())
        .args(["snapshot", "--report", "--interval", "0.05", "--nvml-lib"])
        .arg(fake_nvml_lib())
        .env(SCENARIO_ENV, &file)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = String::from_utf8(out.stdout).expect("utf-8");
    let title = report.lines().next().unwrap_or_default();
    assert!(
        title.ends_with(" UTC") && !title.contains("story"),
        "{title}"
    );
    assert!(
        report.contains("| NVIDIA driver | 535.161.08 (NVML"),
        "{report}"
    );
    assert!(report.contains("| CUDA | 12.2 (NVML"), "{report}");
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("scenario")).expect("JSON");
    let sections = sections(&report);
    for device in written["devices"].as_array().expect("devices") {
        let uuid = device["uuid"].as_str().expect("uuid");
        let (_, lines) = sections
            .iter()
            .find(|(_, lines)| lines.iter().any(|l| l == &format!("UUID {uuid}")))
            .unwrap_or_else(|| panic!("no section for {uuid}:\n{report}"));
        assert_eq!(
            row_value(lines, "total memory"),
            device["memory"]["total"].as_u64(),
            "{uuid}"
        );
    }
}

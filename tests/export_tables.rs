//! `strata export FILE --to parquet|csv OUT`, read back by real readers: pyarrow and DuckDB,
//! pinned in `tests/export/requirements.txt`, from the venv the test command makes
//! (`target/export-venv`, or `$STRATA_EXPORT_VENV`). Without it these tests say so and pass,
//! unless `STRATA_REQUIRE_EXPORT_READERS=1` (set by the test command) makes that a failure.
//!
//! The tables of the demo's 20-minute story (JSON lines from `strata snapshot --json
//! --count`, and the same re-encoded into format 2 by `strata record --from`) are held to
//! what strata itself says of each instant: every device's layers, partial marks and bounds
//! as `snapshot --json` gave them, each process's NVML and allocator figures, and the
//! findings of `strata analyze --json`. Both formats and both recordings give the same
//! tables, and both readers read them alike.

mod common;

use common::fake_nvml::workspace_root;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strata-export-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .expect("strata runs")
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// The demo's story, as the tests read it.
struct Story {
    jsonl: PathBuf,
    v2: PathBuf,
    /// Every line of the JSON lines: `snapshot --json` of each instant.
    snapshots: Vec<Value>,
    /// `strata analyze --json` of it.
    analysis: Value,
}

fn story() -> &'static Story {
    static STORY: OnceLock<Story> = OnceLock::new();
    STORY.get_or_init(|| {
        let dir = scratch("story");
        let jsonl = dir.join("demo.jsonl");
        let out = strata(&[
            "snapshot",
            "--demo",
            "--demo-at",
            "0",
            "--demo-speed",
            "1",
            "--json",
            "--count",
            "121",
            "--interval",
            "10",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(&jsonl, &out.stdout).expect("write the story");
        let v2 = dir.join("demo.zst");
        let out = strata(&["record", path(&v2), "--from", path(&jsonl)]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let snapshots: Vec<Value> = String::from_utf8_lossy(&std::fs::read(&jsonl).expect("read"))
            .lines()
            .map(|l| serde_json::from_str(l).expect("a snapshot"))
            .collect();
        assert_eq!(snapshots.len(), 121);
        let out = strata(&["analyze", path(&jsonl), "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let analysis: Value = serde_json::from_slice(&out.stdout).expect("analysis JSON");
        assert!(
            analysis["findings"].as_array().is_some_and(|f| f.len() > 3),
            "the story has findings to compare"
        );
        Story {
            jsonl,
            v2,
            snapshots,
            analysis,
        }
    })
}

/// The venv's python with the pinned readers, or `None` (said) where it is absent and not
/// required.
fn readers() -> Option<PathBuf> {
    let venv = std::env::var_os("STRATA_EXPORT_VENV")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/export-venv"));
    let python = venv.join("bin/python");
    if python.exists() {
        return Some(python);
    }
    assert!(
        std::env::var_os("STRATA_REQUIRE_EXPORT_READERS").is_none(),
        "STRATA_REQUIRE_EXPORT_READERS is set but {} is missing",
        python.display()
    );
    eprintln!(
        "skipped: no {} (tests/all installs tests/export/requirements.txt into it)",
        python.display()
    );
    None
}

/// The pins of tests/export/requirements.txt: name → version.
fn pins() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(workspace_root().join("tests/export/requirements.txt"))
        .expect("requirements");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_once("=="))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// Every table in `dir`, as both readers read it.
fn read_back(python: &Path, dir: &Path, format: &str) -> Value {
    let script = workspace_root().join("tests/export/read_tables.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(dir)
        .arg(format)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "the readers failed on {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let tables: Value = serde_json::from_slice(&out.stdout).expect("the readers' JSON");
    for (name, version) in pins() {
        assert_eq!(
            tables["versions"][&name].as_str(),
            Some(version.as_str()),
            "{name} is not the pinned version"
        );
    }
    tables
}

fn export(input: &Path, format: &str, out: &Path) -> Output {
    let result = strata(&["export", path(input), "--to", format, path(out)]);
    assert!(
        result.status.success(),
        "export failed: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    result
}

const DEVICE_COLUMNS: [&str; 10] = [
    "time_unix_s",
    "gpu_index",
    "gpu_uuid",
    "mig_uuid",
    "device_uuid",
    "layer",
    "bytes",
    "partial",
    "bound",
    "layers_gap",
];
const PROCESS_COLUMNS: [&str; 9] = [
    "time_unix_s",
    "pid",
    "start_time_ticks",
    "device_uuid",
    "metric",
    "unit",
    "value",
    "step",
    "at_step_end",
];
const FINDING_COLUMNS: [&str; 11] = [
    "kind",
    "severity",
    "since_unix_s",
    "until_unix_s",
    "open",
    "pid",
    "device_uuid",
    "message",
    "evidence_json",
    "first_message",
    "first_evidence_json",
];
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

/// One table as one reader read it: rows of cells by column name.
struct Read<'a> {
    columns: Vec<&'a str>,
    rows: &'a [Value],
}

impl<'a> Read<'a> {
    fn of(tables: &'a Value, reader: &str, table: &str) -> Self {
        let t = &tables[reader][table];
        Read {
            columns: t["columns"]
                .as_array()
                .expect("columns")
                .iter()
                .map(|c| c.as_str().expect("a name"))
                .collect(),
            rows: t["rows"].as_array().expect("rows"),
        }
    }

    fn at<'r>(&self, row: &'r Value, column: &str) -> &'r Value {
        let i = self
            .columns
            .iter()
            .position(|c| *c == column)
            .unwrap_or_else(|| panic!("no column {column}"));
        &row[i]
    }

    /// Each row's cells, numbers as floats (a CSV reader may take a whole time for an
    /// integer), for comparing readers and formats.
    fn normal(&self) -> Vec<Vec<Value>> {
        self.rows
            .iter()
            .map(|r| {
                r.as_array()
                    .expect("a row")
                    .iter()
                    .map(|v| match v.as_f64() {
                        Some(f) if v.is_number() => Value::from(f),
                        _ => v.clone(),
                    })
                    .collect()
            })
            .collect()
    }
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// The devices table holds, for every instant, every layer of every GPU and MIG instance
/// as `snapshot --json` gave it, and nothing else.
fn check_devices(story: &Story, devices: &Read) {
    assert_eq!(devices.columns, DEVICE_COLUMNS);
    let mut by_key: HashMap<(u64, String, String), &Value> = HashMap::new();
    for row in devices.rows {
        let time = num(devices.at(row, "time_unix_s")).expect("a time");
        let key = (
            time.to_bits(),
            devices
                .at(row, "device_uuid")
                .as_str()
                .expect("device")
                .to_string(),
            devices
                .at(row, "layer")
                .as_str()
                .expect("layer")
                .to_string(),
        );
        assert!(
            by_key.insert(key, row).is_none(),
            "one row per device, layer and instant"
        );
    }
    let mut expected = 0;
    for snapshot in &story.snapshots {
        let time = snapshot["time"].as_f64().expect("time");
        for gpu in snapshot["gpus"].as_array().expect("gpus") {
            let mut devices_of_gpu = vec![(gpu, None)];
            for m in gpu["mig"].as_array().expect("mig") {
                devices_of_gpu.push((m, m["uuid"].as_str()));
            }
            for (device, mig) in devices_of_gpu {
                let uuid = device["uuid"].as_str().expect("uuid");
                let mut known_sum = 0u64;
                for layer in LAYERS {
                    expected += 1;
                    let row = by_key
                        .get(&(time.to_bits(), uuid.to_string(), layer.to_string()))
                        .unwrap_or_else(|| panic!("no row of {uuid} {layer} at {time}"));
                    let want = &device["layers"][layer];
                    let got = devices.at(row, "bytes");
                    assert_eq!(
                        got.as_u64(),
                        want.as_u64(),
                        "{uuid} {layer} at {time}: {got} against the snapshot's {want}"
                    );
                    assert_eq!(
                        got.is_null(),
                        want.is_null(),
                        "{uuid} {layer}: null is null"
                    );
                    known_sum += got.as_u64().unwrap_or(0);
                    let partial = device["partial"]
                        .as_array()
                        .expect("partial")
                        .iter()
                        .any(|l| l == layer);
                    assert_eq!(devices.at(row, "partial").as_bool(), Some(partial));
                    assert_eq!(devices.at(row, "bound"), &device["bounds"][layer]);
                    assert_eq!(devices.at(row, "gpu_index"), &gpu["index"]);
                    assert_eq!(devices.at(row, "gpu_uuid"), &gpu["uuid"]);
                    assert_eq!(devices.at(row, "mig_uuid").as_str(), mig);
                    assert_eq!(
                        devices.at(row, "layers_gap").is_null(),
                        device["layers_gap"].is_null()
                    );
                }
                // The known layers partition the device's NVML total.
                if !device["layers"].is_null() {
                    assert_eq!(
                        Some(known_sum),
                        device["memory"]["total"].as_u64(),
                        "{uuid} at {time}"
                    );
                }
            }
        }
    }
    assert_eq!(devices.rows.len(), expected, "no row beyond the snapshots'");
}

/// The processes table holds each process's NVML figures at each instant and the
/// allocator's readings at the agent's time, as `snapshot --json` gave them.
fn check_processes(story: &Story, processes: &Read) {
    assert_eq!(processes.columns, PROCESS_COLUMNS);
    let mut by_key: HashMap<(u64, u64, String, String), &Value> = HashMap::new();
    for row in processes.rows {
        let time = num(processes.at(row, "time_unix_s")).expect("a time");
        let key = (
            time.to_bits(),
            processes.at(row, "pid").as_u64().expect("pid"),
            processes
                .at(row, "device_uuid")
                .as_str()
                .expect("device")
                .to_string(),
            processes
                .at(row, "metric")
                .as_str()
                .expect("metric")
                .to_string(),
        );
        assert!(
            by_key.insert(key, row).is_none(),
            "one row per reading: {row}"
        );
        let unit = match processes.at(row, "metric").as_str() {
            Some("sm") => "percent",
            Some("alloc_retries" | "ooms") => "count",
            _ => "bytes",
        };
        assert_eq!(processes.at(row, "unit").as_str(), Some(unit), "{row}");
    }
    let row = |time: f64, p: &Value, metric: &str| {
        by_key
            .get(&(
                time.to_bits(),
                p["pid"].as_u64().expect("pid"),
                p["device_uuid"].as_str().expect("device").to_string(),
                metric.to_string(),
            ))
            .copied()
    };
    let (mut used, mut fed) = (0, 0);
    for snapshot in &story.snapshots {
        let time = snapshot["time"].as_f64().expect("time");
        for p in snapshot["processes"].as_array().expect("processes") {
            used += 1;
            let r = row(time, p, "used").unwrap_or_else(|| panic!("no used of {p}"));
            assert_eq!(processes.at(r, "value"), &p["used"]);
            assert_eq!(processes.at(r, "start_time_ticks"), &p["start_time"]);
            assert!(processes.at(r, "step").is_null());
            if !p["sm_util"].is_null() {
                let r = row(time, p, "sm").expect("sm");
                assert_eq!(processes.at(r, "value"), &p["sm_util"]);
            }
            if !p["layers"]["outside_pool"].is_null() {
                let r = row(time, p, "outside_pool").expect("outside_pool");
                assert_eq!(processes.at(r, "value"), &p["layers"]["outside_pool"]);
            }
            let feed = &p["feed"];
            if feed.is_null() {
                continue;
            }
            fed += 1;
            let at = feed["time"].as_f64().expect("the reading's time");
            for metric in [
                "allocated",
                "reserved",
                "inactive_split",
                "alloc_retries",
                "ooms",
            ] {
                if feed[metric].is_null() {
                    continue;
                }
                let r = row(at, p, metric)
                    .unwrap_or_else(|| panic!("no {metric} of {} at {at}", p["pid"]));
                assert_eq!(processes.at(r, "value"), &feed[metric], "{metric}");
                assert_eq!(
                    processes.at(r, "step"),
                    &feed.get("step").cloned().unwrap_or(Value::Null)
                );
            }
        }
    }
    let count = |metric: &str| {
        processes
            .rows
            .iter()
            .filter(|r| processes.at(r, "metric").as_str() == Some(metric))
            .count()
    };
    assert_eq!(count("used"), used, "one used per process per instant");
    assert!(
        fed > 100 && count("allocated") > 0,
        "the story has fed processes"
    );
}

/// The findings table is `strata analyze --json`'s findings, in its order.
fn check_findings(story: &Story, findings: &Read) {
    assert_eq!(findings.columns, FINDING_COLUMNS);
    let want = story.analysis["findings"].as_array().expect("findings");
    assert_eq!(findings.rows.len(), want.len());
    for (row, e) in findings.rows.iter().zip(want) {
        for (column, field) in [
            ("kind", "kind"),
            ("severity", "severity"),
            ("open", "open"),
            ("pid", "pid"),
            ("device_uuid", "device_uuid"),
            ("message", "message"),
            ("first_message", "first_message"),
        ] {
            assert_eq!(findings.at(row, column), &e[field], "{column} of {e}");
        }
        assert_eq!(num(findings.at(row, "since_unix_s")), e["since"].as_f64());
        assert_eq!(num(findings.at(row, "until_unix_s")), e["until"].as_f64());
        for (column, field) in [
            ("evidence_json", "evidence"),
            ("first_evidence_json", "first_evidence"),
        ] {
            let text = findings.at(row, column).as_str().expect("JSON text");
            let parsed: Value = serde_json::from_str(text).expect("evidence is JSON");
            assert_eq!(parsed, e[field], "{column}");
        }
    }
}

fn check(story: &Story, tables: &Value) {
    for reader in ["pyarrow", "duckdb"] {
        check_devices(story, &Read::of(tables, reader, "devices"));
        check_processes(story, &Read::of(tables, reader, "processes"));
        check_findings(story, &Read::of(tables, reader, "findings"));
    }
    for table in ["devices", "processes", "findings"] {
        assert_eq!(
            Read::of(tables, "pyarrow", table).normal(),
            Read::of(tables, "duckdb", table).normal(),
            "{table}: the readers agree"
        );
    }
}

/// What a table holds, to compare formats and recordings.
fn normal(tables: &Value) -> Vec<Vec<Vec<Value>>> {
    ["devices", "processes", "findings"]
        .iter()
        .map(|t| Read::of(tables, "pyarrow", t).normal())
        .collect()
}

#[test]
fn parquet_tables_hold_what_strata_shows_of_each_instant_with_their_meaning() {
    let Some(python) = readers() else { return };
    let story = story();
    let dir = scratch("parquet");
    let mut seen = Vec::new();
    for (name, input) in [("jsonl", &story.jsonl), ("v2", &story.v2)] {
        let out = dir.join(name);
        let said = export(input, "parquet", &out);
        let said = String::from_utf8_lossy(&said.stdout).into_owned();
        assert!(said.contains("121 sample(s)"), "{said}");
        let tables = read_back(&python, &out, "parquet");
        check(story, &tables);
        // The types, as pandas, polars and DuckDB take them without being told.
        let types = |t: &str| tables["pyarrow"][t]["types"].clone();
        assert_eq!(
            types("devices"),
            serde_json::json!([
                "double", "int64", "string", "string", "string", "string", "int64", "bool",
                "string", "string"
            ])
        );
        assert_eq!(
            types("processes"),
            serde_json::json!([
                "double", "int64", "int64", "string", "string", "string", "int64", "int64", "bool"
            ])
        );
        for table in ["devices", "processes", "findings"] {
            let meta = &tables["metadata"][table];
            assert_eq!(meta["strata.schema"], "strata.export/1");
            assert_eq!(
                &tables["schema_metadata"][table], meta,
                "{table}: pyarrow's schema.metadata says the same"
            );
            assert_eq!(meta["strata.table"], table);
            let columns = &tables["pyarrow"][table]["columns"];
            for c in columns.as_array().expect("columns") {
                let c = c.as_str().expect("name");
                let key = format!("strata.column.{c}");
                assert!(
                    meta[&key].as_str().is_some_and(|m| !m.is_empty()),
                    "{table}: no {key}"
                );
                assert_eq!(
                    tables["field_metadata"][table][c]["description"], meta[&key],
                    "{table}.{c}: the field's own metadata"
                );
            }
        }
        let meta = &tables["metadata"]["processes"];
        for row in Read::of(&tables, "pyarrow", "processes").rows {
            let metric = row[4].as_str().expect("metric");
            let unit = row[5].as_str().expect("unit");
            let said = meta[format!("strata.metric.{metric}")].as_str();
            assert!(
                said.is_some_and(|s| s.starts_with(&format!("{unit}: "))),
                "strata.metric.{metric}: {said:?}"
            );
        }
        seen.push(normal(&tables));
    }
    assert!(
        seen[0] == seen[1],
        "format 1 and format 2 give the same tables"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn csv_tables_hold_the_same_as_parquet() {
    let Some(python) = readers() else { return };
    let story = story();
    let dir = scratch("csv");
    let mut seen = Vec::new();
    for (name, input, format) in [
        ("jsonl", &story.jsonl, "csv"),
        ("v2", &story.v2, "csv"),
        ("parquet", &story.v2, "parquet"),
    ] {
        let out = dir.join(name);
        export(input, format, &out);
        let tables = read_back(&python, &out, format);
        if format == "csv" {
            check(story, &tables);
        }
        seen.push(normal(&tables));
    }
    assert!(
        seen[0] == seen[1],
        "format 1 and format 2 give the same CSV"
    );
    assert!(seen[1] == seen[2], "CSV and Parquet hold the same");
    let _ = std::fs::remove_dir_all(&dir);
}

//! What tests/integration/export_tables.rs holds `strata export`'s tables to, as the readers read them
//! back: each oracle computes what a table must hold from `snapshot --json` of each instant
//! (the layers, each process's figures) or from `strata analyze --json` (the findings).

use serde_json::Value;
use std::collections::HashMap;

/// What strata itself says of the recording exported.
pub struct Story {
    /// `snapshot --json` of each instant, in order.
    pub snapshots: Vec<Value>,
    /// `strata analyze --json` of the recording.
    pub analysis: Value,
}

pub const DEVICE_COLUMNS: [&str; 10] = [
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
pub const PROCESS_COLUMNS: [&str; 9] = [
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
pub const FINDING_COLUMNS: [&str; 11] = [
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
pub const LAYERS: [&str; 8] = [
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
pub struct Read<'a> {
    pub columns: Vec<&'a str>,
    pub rows: &'a [Value],
}

impl<'a> Read<'a> {
    pub fn of(tables: &'a Value, reader: &str, table: &str) -> Self {
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

    pub fn at<'r>(&self, row: &'r Value, column: &str) -> &'r Value {
        let i = self
            .columns
            .iter()
            .position(|c| *c == column)
            .unwrap_or_else(|| panic!("no column {column}"));
        &row[i]
    }

    /// Each row's cells, numbers as floats (a CSV reader may take a whole time for an
    /// integer), for comparing readers and formats.
    pub fn normal(&self) -> Vec<Vec<Value>> {
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

pub fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// The devices table holds, for every instant, every layer of every GPU and MIG instance
/// as `snapshot --json` gave it, and nothing else.
pub fn check_devices(story: &Story, devices: &Read) {
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
pub fn check_processes(story: &Story, processes: &Read) {
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
pub fn check_findings(story: &Story, findings: &Read) {
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

pub fn check(story: &Story, tables: &Value) {
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
pub fn normal(tables: &Value) -> Vec<Vec<Vec<Value>>> {
    ["devices", "processes", "findings"]
        .iter()
        .map(|t| Read::of(tables, "pyarrow", t).normal())
        .collect()
}

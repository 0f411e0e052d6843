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

#[path = "../export/checks.rs"]
mod checks;

use crate::common;

use checks::{check, normal, Read, Story};
use common::fake_nvml::workspace_root;
use common::{strata_output as strata, utf8 as path, Scratch};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The demo's story, as the tests read it: the recordings, and what strata says of them.
struct Demo {
    jsonl: PathBuf,
    v2: PathBuf,
    /// Every line of the JSON lines (`snapshot --json` of each instant), and `strata analyze
    /// --json` of it.
    story: Story,
}

fn demo() -> &'static Demo {
    static STORY: OnceLock<Demo> = OnceLock::new();
    STORY.get_or_init(|| {
        // Kept for the whole run, so never dropped: under the build's own scratch directory
        // (cleared here, at the next run, and by `cargo clean`), not the system's.
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("export-story");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the story's directory");
        let jsonl = dir.join("demo.jsonl");
        std::fs::write(&jsonl, common::snapshot::demo_story()).expect("write the story");
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
        Demo {
            jsonl,
            v2,
            story: Story {
                snapshots,
                analysis,
            },
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
    common::skip(
        "STRATA_REQUIRE_EXPORT_READERS",
        &format!(
            "no {} (tests/all installs tests/export/requirements.txt into it)",
            python.display()
        ),
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

#[test]
fn parquet_tables_hold_what_strata_shows_of_each_instant_with_their_meaning() {
    let Some(python) = readers() else { return };
    let demo = demo();
    let story = &demo.story;
    let scratch = Scratch::new("export-parquet");
    let dir = scratch.dir.clone();
    let mut seen = Vec::new();
    for (name, input) in [("jsonl", &demo.jsonl), ("v2", &demo.v2)] {
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
    let demo = demo();
    let story = &demo.story;
    let scratch = Scratch::new("export-csv");
    let dir = scratch.dir.clone();
    let mut seen = Vec::new();
    for (name, input, format) in [
        ("jsonl", &demo.jsonl, "csv"),
        ("v2", &demo.v2, "csv"),
        ("parquet", &demo.v2, "parquet"),
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

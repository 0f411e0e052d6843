//! The reference under `docs/` held to the code: every finding kind has its section in
//! `docs/findings.md` and the page names no kind that does not exist; each table of
//! `docs/export.md` lists exactly the columns `strata export` writes, with their types, and
//! the processes table's metrics with their units.

use crate::detect::FindingKind;
use crate::export::tables::{Kind, DEVICES, FINDINGS, METRICS, PROCESSES};

fn page(name: &str) -> String {
    let path = format!("{}/docs/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every kind the code can raise (`FindingKind::ALL`, which a new kind joins or does not
/// compile).
fn every_kind() -> Vec<FindingKind> {
    FindingKind::ALL.to_vec()
}

/// The kinds `docs/findings.md` gives a section: its headings `` ### `kind` ``.
fn documented_kinds(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("### `"))
        .filter_map(|rest| rest.strip_suffix('`'))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_finding_kind_has_its_section_and_no_other() {
    let documented = documented_kinds(&page("findings.md"));
    let names: Vec<String> = every_kind().into_iter().map(FindingKind::name).collect();
    for name in &names {
        assert_eq!(
            documented.iter().filter(|d| *d == name).count(),
            1,
            "docs/findings.md has no section (or more than one) `### \\`{name}\\``"
        );
    }
    for d in &documented {
        assert!(
            serde_json::from_value::<FindingKind>(serde_json::Value::String(d.clone())).is_ok()
                && names.contains(d),
            "docs/findings.md documents `{d}`, which is no finding kind"
        );
    }
}

/// The rows of the first table after `heading` whose first header cell is `first`: each
/// row's cells, the names in the first cell split at commas.
fn table_after(text: &str, heading: &str, first: &str) -> Vec<Vec<String>> {
    let from = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("docs/export.md has no `{heading}`"));
    let mut lines = text[from..]
        .lines()
        .skip_while(|l| !l.starts_with(&format!("| {first} |")))
        .skip(2);
    let mut rows = Vec::new();
    for line in lines.by_ref() {
        let Some(inner) = line.strip_prefix('|') else {
            break;
        };
        rows.push(
            inner
                .trim_end_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect(),
        );
    }
    assert!(!rows.is_empty(), "no `{first}` table under {heading}");
    rows
}

/// Names in backticks, and the comma-separated words beside them (`a`, `b` → a, b).
fn split(cell: &str) -> Vec<String> {
    cell.split(',')
        .map(|w| w.trim().trim_matches('`').to_string())
        .collect()
}

fn type_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Float => "float64",
        Kind::Int => "int64",
        Kind::Bool => "bool",
        Kind::Text => "string",
    }
}

/// Each documented column, in order, with its type.
fn documented_columns(text: &str, heading: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for row in table_after(text, heading, "column") {
        let names = split(&row[0]);
        let types = split(&row[1]);
        assert_eq!(names.len(), types.len(), "{heading}: {row:?}");
        out.extend(names.into_iter().zip(types));
    }
    out
}

#[test]
fn the_export_tables_columns_are_the_documented_ones() {
    let text = page("export.md");
    for (heading, table) in [
        ("### devices", &DEVICES),
        ("### processes", &PROCESSES),
        ("### findings", &FINDINGS),
    ] {
        let written: Vec<(String, String)> = table
            .columns
            .iter()
            .map(|c| (c.name.to_string(), type_name(c.kind).to_string()))
            .collect();
        assert_eq!(
            documented_columns(&text, heading),
            written,
            "docs/export.md, {heading}: the columns and types against what strata export writes"
        );
    }
    let mut documented: Vec<(String, String)> = Vec::new();
    for row in table_after(&text, "### processes", "metric") {
        for name in split(&row[0]) {
            documented.push((name, row[1].clone()));
        }
    }
    let written: Vec<(String, String)> = METRICS
        .iter()
        .map(|(name, unit, _)| (name.to_string(), unit.to_string()))
        .collect();
    assert_eq!(
        documented, written,
        "docs/export.md: the processes table's metrics and units against what strata export writes"
    );
}

/// The parsing the tests above rely on: a heading's table, names split at commas.
#[test]
fn a_documented_table_is_read_as_written() {
    let text = "\n### t\n\nabout\n\n| column | type | meaning |\n|---|---|---|\n\
                | `a`, `b` | int64, bool | two |\n| `c` | string | x, y |\n\nafter\n";
    assert_eq!(
        documented_columns(text, "### t"),
        [("a", "int64"), ("b", "bool"), ("c", "string")]
            .map(|(n, t)| (n.to_string(), t.to_string()))
    );
    assert_eq!(
        documented_kinds("### `climb`\n### `oom` x\n## `gpu_lost`\n### `gpu_lost`"),
        ["climb", "gpu_lost"]
    );
}

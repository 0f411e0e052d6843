//! The Prometheus rule files in `assets/prometheus/`, read by the tests: each rule's name
//! (`record` or `alert`) and expression, and the promtool unit tests beside them.

use serde_norway::Value;
use std::path::PathBuf;

/// `assets/prometheus/NAME`.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("assets/prometheus")
        .join(name)
}

/// A YAML file of `assets/prometheus/`.
pub fn read(name: &str) -> Value {
    let path = path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// One rule: its name, its expression, and the whole rule (labels, annotations, `for`).
pub struct Rule {
    pub name: String,
    pub expr: String,
    pub body: Value,
}

/// The rules of a rule file, in order, of every group.
pub fn rules(name: &str) -> Vec<Rule> {
    let file = read(name);
    let groups = file["groups"].as_sequence().expect("groups");
    groups
        .iter()
        .flat_map(|g| g["rules"].as_sequence().expect("rules").iter())
        .map(|r| Rule {
            name: r
                .get("record")
                .or_else(|| r.get("alert"))
                .and_then(Value::as_str)
                .expect("a record or an alert")
                .to_string(),
            expr: r["expr"].as_str().expect("an expr").to_string(),
            body: r.clone(),
        })
        .collect()
}

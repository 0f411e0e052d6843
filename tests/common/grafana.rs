//! The Grafana dashboards in `assets/grafana/`, read by the tests: `strata.json` (a node's
//! layers, from strata serve's metrics) and `strata-fleet.json` (the fleet ranked by urgency,
//! from the recording rules of `assets/prometheus/strata-rules.yml`).
use serde_json::Value;

fn read(name: &str) -> Value {
    let path = format!("{}/assets/grafana/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub fn dashboard() -> Value {
    read("strata.json")
}

pub fn fleet_dashboard() -> Value {
    read("strata-fleet.json")
}

/// Every PromQL expression: the panels' targets, with their legends, and the variables'
/// queries.
pub fn expressions(dashboard: &Value) -> Vec<(String, Option<String>)> {
    fn walk(v: &Value, out: &mut Vec<(String, Option<String>)>) {
        match v {
            Value::Object(o) => {
                if let Some(expr) = o.get("expr").and_then(Value::as_str) {
                    let legend = o.get("legendFormat").and_then(Value::as_str);
                    out.push((expr.to_string(), legend.map(str::to_string)));
                }
                o.values().for_each(|v| walk(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    for var in dashboard["templating"]["list"]
        .as_array()
        .expect("variables")
    {
        if let Some(q) = var["query"]["query"].as_str() {
            out.push((q.to_string(), None));
        }
    }
    out
}

//! The Grafana dashboard in `assets/grafana/`, read by the tests.
use serde_json::Value;

pub fn dashboard() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/grafana/strata.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("the dashboard")).expect("JSON")
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

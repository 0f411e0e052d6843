//! The active findings, each with its evidence, every number with its unit.

use super::markdown::{escape, Clock};
use crate::detect::device_name;
use crate::pipeline::Observed;
use crate::present::evidence as fields;
use serde_json::Value;
use std::fmt::Write;

pub(super) fn findings(out: &mut String, observed: &Observed, clock: Clock) {
    let s = &observed.sample;
    let _ = writeln!(out, "## Findings\n");
    if observed.findings.is_empty() {
        let _ = writeln!(out, "None active at this instant.\n");
        return;
    }
    for (n, f) in observed.findings.iter().enumerate() {
        let mut about = Vec::new();
        if let Some(uuid) = &f.device_uuid {
            about.push(escape(&device_name(s, uuid)));
        }
        if let Some(pid) = f.pid {
            about.push(format!("PID {pid}"));
        }
        let about = if about.is_empty() {
            String::new()
        } else {
            format!(" · {}", about.join(" · "))
        };
        let _ = writeln!(
            out,
            "### {}. {} `{}`{about}\n",
            n + 1,
            f.severity.label(),
            f.kind.name()
        );
        let _ = writeln!(out, "{}\n", escape(&f.message));
        let _ = writeln!(
            out,
            "Raised at {} ({} before this instant), and held since.\n",
            clock.at(f.since),
            crate::units::duration(s.time - f.since)
        );
        let mut lines = Vec::new();
        walk(&f.evidence, 0, clock, s.time, &mut lines);
        if !lines.is_empty() {
            let _ = writeln!(out, "Evidence:\n");
            for line in lines {
                let _ = writeln!(out, "{line}");
            }
            out.push('\n');
        }
    }
}

/// The evidence as a nested list: `- name: value with its unit`.
fn walk(value: &Value, depth: usize, clock: Clock, now: f64, out: &mut Vec<String>) {
    let indent = "  ".repeat(depth);
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let name = escape(key);
                match v {
                    Value::Object(inner) if !inner.is_empty() => {
                        out.push(format!("{indent}- {name}:"));
                        walk(v, depth + 1, clock, now, out);
                    }
                    Value::Array(items)
                        if !items.is_empty() && items.iter().all(Value::is_object) =>
                    {
                        out.push(format!("{indent}- {name}: {} of them", items.len()));
                        for item in items {
                            let fields: Vec<String> = item
                                .as_object()
                                .into_iter()
                                .flatten()
                                .filter(|(_, v)| !v.is_null())
                                .map(|(k, v)| format!("{} {}", escape(k), shown(k, v, clock, now)))
                                .collect();
                            out.push(format!("{indent}  - {}", fields.join(" · ")));
                        }
                    }
                    _ => out.push(format!("{indent}- {name}: {}", shown(key, v, clock, now))),
                }
            }
        }
        Value::Null => {}
        other => out.push(format!("{indent}- {}", shown("", other, clock, now))),
    }
}

/// One value with its unit, as the evidence view writes it, instants told by `clock`, and
/// strings escaped for Markdown.
fn shown(key: &str, value: &Value, clock: Clock, now: f64) -> String {
    match value {
        Value::String(text) => escape(text),
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|v| shown(key, v, clock, now))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Number(n) if fields::is_time(key) => match n.as_f64() {
            Some(t) if t > now => {
                format!("{} (in {})", clock.at(t), crate::units::duration(t - now))
            }
            Some(t) if t > 1e8 => format!(
                "{} ({} before this instant)",
                clock.at(t),
                crate::units::duration(now - t)
            ),
            _ => escape(&fields::value(key, value, now)),
        },
        _ => escape(&fields::value(key, value, now)),
    }
}

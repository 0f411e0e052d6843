//! The active findings, each with what to do about it and its evidence, every number with its
//! unit.

use super::markdown::{escape, Clock};
use crate::detect::device_name;
use crate::detect::evidence::{Fields, Figure, Holder};
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
        let advice = f.advice();
        let _ = writeln!(out, "What to do:\n");
        for sentence in &advice {
            let _ = writeln!(out, "- {}", escape(sentence));
        }
        out.push('\n');
        let _ = writeln!(
            out,
            "Raised at {} ({} before this instant), and held since.\n",
            clock.at(f.since),
            crate::units::duration(s.time - f.since)
        );
        let mut lines = Vec::new();
        walk(&f.evidence.fields(), 0, clock, s.time, &mut lines);
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
fn walk(fields: &Fields, depth: usize, clock: Clock, now: f64, out: &mut Vec<String>) {
    let indent = "  ".repeat(depth);
    for (key, figure) in fields {
        let name = escape(key);
        let records: Vec<Fields> = match figure {
            Figure::Json(Value::Object(inner)) if !inner.is_empty() => {
                out.push(format!("{indent}- {name}:"));
                walk(&fields::untyped(inner), depth + 1, clock, now, out);
                continue;
            }
            Figure::Records(items) => items.clone(),
            Figure::Holders(holders) => holders.iter().map(Holder::fields).collect(),
            Figure::Json(Value::Array(items)) if items.iter().all(Value::is_object) => items
                .iter()
                .filter_map(Value::as_object)
                .map(fields::untyped)
                .collect(),
            _ => Vec::new(),
        };
        if records.is_empty() {
            out.push(format!("{indent}- {name}: {}", shown(figure, clock, now)));
            continue;
        }
        out.push(format!("{indent}- {name}: {} of them", records.len()));
        for record in records {
            let fields: Vec<String> = record
                .iter()
                .filter(|(_, figure)| !fields::is_unknown(figure))
                .map(|(k, figure)| format!("{} {}", escape(k), shown(figure, clock, now)))
                .collect();
            out.push(format!("{indent}  - {}", fields.join(" · ")));
        }
    }
}

/// One value with its unit, as the evidence view writes it, instants told by `clock`, and
/// strings escaped for Markdown.
fn shown(figure: &Figure, clock: Clock, now: f64) -> String {
    let instant = |t: f64| {
        if t > now {
            format!("{} (in {})", clock.at(t), crate::units::duration(t - now))
        } else if t > 1e8 {
            format!(
                "{} ({} before this instant)",
                clock.at(t),
                crate::units::duration(now - t)
            )
        } else {
            escape(&fields::value(figure, now))
        }
    };
    match *figure {
        Figure::Text(text) => escape(text),
        Figure::Json(Value::String(ref text)) => escape(text),
        Figure::List(ref items) if !items.is_empty() => items
            .iter()
            .map(|item| shown(item, clock, now))
            .collect::<Vec<_>>()
            .join(", "),
        Figure::Json(Value::Array(ref items)) if !items.is_empty() => items
            .iter()
            .map(|item| shown(&Figure::Json(item), clock, now))
            .collect::<Vec<_>>()
            .join(", "),
        Figure::Time(t) if t.is_finite() => instant(t),
        // As the evidence has always shown it: read as an instant once past 1e8.
        Figure::Ticks(t) => instant(t as f64),
        _ => escape(&fields::value(figure, now)),
    }
}

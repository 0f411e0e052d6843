//! A finding's evidence, field by field, whatever its kind: each field under its own name (the
//! JSON's), its value in the unit its type says ([`Figure`]): bytes humanised with the exact
//! count beside them, rates per second, step or minute, seconds as durations, instants as UTC
//! times with how long ago, shares and percentages as percentages. Evidence read back in no
//! typed shape is shown as it was read, without units.

use super::grouped;
use crate::detect::evidence::{Fields, Figure, Holder};
use crate::detect::Evidence;
use crate::units;
use serde_json::Value;

/// A finding on one line of `width` cells, as the findings list shows it: its message, then
/// the first sentence of its advice (the action) where the whole of it fits beside the whole
/// message; the message alone, cut to the width, where it does not.
pub(crate) fn finding_line(finding: &crate::detect::Finding, width: usize) -> String {
    use unicode_width::UnicodeWidthStr;
    let message = crate::text::clean(&finding.message);
    let line = finding
        .advice()
        .into_iter()
        .next()
        .map(|first| format!("{message} → {}", crate::text::clean(&first)));
    match line {
        Some(line) if line.width() <= width => line,
        _ => super::fit(&message, width),
    }
}

/// A number as JSON would print it, without a trailing `.0`.
fn plain(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{n:.0}")
    } else {
        format!("{n}")
    }
}

/// Exact bytes beside their humanised figure.
fn bytes(b: u64) -> String {
    format!("{} ({} B)", units::bytes(b), grouped(b))
}

/// An instant (unix seconds) in UTC, with how long ago it was (or how long until), once it is
/// past 1e8 (1973): a smaller figure is written as a number.
fn instant(t: f64, now: f64) -> String {
    if t <= 1e8 {
        return plain(t);
    }
    let ago = now - t;
    let when = if ago >= 0.0 {
        format!("{} ago", units::duration(ago))
    } else {
        format!("in {}", units::duration(-ago))
    };
    format!("{} UTC ({when})", units::clock(t))
}

/// Whether a figure is a number that JSON writes as `null`: shown `n/a`.
fn not_finite(figure: &Figure) -> bool {
    match *figure {
        Figure::BytesPerSec(f)
        | Figure::MibPerMin(f)
        | Figure::PerMin(f)
        | Figure::Secs(f)
        | Figure::Time(f)
        | Figure::Share(f)
        | Figure::Pct(f) => !f.is_finite(),
        _ => false,
    }
}

/// One figure in its unit; `now` for how long ago an instant was.
pub(crate) fn value(figure: &Figure, now: f64) -> String {
    if not_finite(figure) {
        return "n/a".into();
    }
    match *figure {
        Figure::Unknown => "n/a".into(),
        Figure::Bytes(b) => bytes(b),
        Figure::SignedBytes(b) => match u64::try_from(b) {
            Ok(b) => bytes(b),
            Err(_) => plain(b as f64),
        },
        Figure::BytesPerSec(f) => {
            format!("{}/s ({} B/s)", units::bytes(f.max(0.0) as u64), plain(f))
        }
        Figure::BytesPerStep(n) => {
            let f = n as f64;
            let sign = if f < 0.0 { "-" } else { "" };
            format!(
                "{sign}{}/step ({} B)",
                units::bytes(f.abs() as u64),
                plain(f)
            )
        }
        Figure::MibPerMin(f) => format!("{f:+.1} MiB/min"),
        Figure::PerMin(f) => format!("{} a minute", plain(f)),
        Figure::Secs(f) => format!("{} ({} s)", units::duration(f.abs()), plain(f)),
        Figure::Time(t) => instant(t, now),
        // As the evidence has always shown it: read as an instant once past 1e8.
        Figure::Ticks(t) => instant(t as f64, now),
        Figure::Share(f) => format!("{:.1}%", f * 100.0),
        Figure::Pct(f) => format!("{}%", plain(f)),
        Figure::Steps(n) => format!("{} steps", plain(n as f64)),
        Figure::Count(n) | Figure::Id(n) => plain(n as f64),
        Figure::Text(s) => crate::text::clean(s).into_owned(),
        Figure::Flag(b) => if b { "yes" } else { "no" }.into(),
        Figure::List(ref items) if items.is_empty() => "none".into(),
        Figure::List(ref items) => items
            .iter()
            .map(|f| value(f, now))
            .collect::<Vec<_>>()
            .join(", "),
        Figure::Records(ref items) if items.is_empty() => "none".into(),
        Figure::Records(ref items) => items.len().to_string(),
        Figure::Holders([]) => "none".into(),
        Figure::Holders(items) => items.len().to_string(),
        Figure::Json(v) => json(v),
    }
}

/// A value read back untyped, as it was read.
fn json(value: &Value) -> String {
    match value {
        Value::Null => "n/a".into(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Value::String(s) => crate::text::clean(s).into_owned(),
        Value::Array(items) if items.is_empty() => "none".into(),
        Value::Array(items) => items.iter().map(json).collect::<Vec<_>>().join(", "),
        Value::Object(_) => "{…}".into(),
        Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), plain),
    }
}

/// The evidence as (depth, name, value) rows: a list of records counted, then one line each;
/// evidence read back untyped, nested objects indented under their name.
pub(crate) fn rows(evidence: &Evidence, now: f64) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    walk(&evidence.fields(), 0, now, &mut out);
    out
}

fn walk(fields: &Fields, depth: usize, now: f64, out: &mut Vec<(usize, String, String)>) {
    for (name, figure) in fields {
        let name_shown = crate::text::clean(name).into_owned();
        match figure {
            Figure::Records(items) if !items.is_empty() => {
                out.push((depth, name_shown, items.len().to_string()));
                for item in items {
                    out.push(record(item, depth + 1, now));
                }
            }
            Figure::Holders(holders) if !holders.is_empty() => {
                out.push((depth, name_shown, holders.len().to_string()));
                for holder in *holders {
                    out.push((
                        depth + 1,
                        format!("PID {}", holder.pid.0),
                        holder_line(holder),
                    ));
                }
            }
            Figure::Json(Value::Object(map)) if !map.is_empty() => {
                out.push((depth, name_shown, String::new()));
                walk(&untyped(map), depth + 1, now, out);
            }
            Figure::Json(Value::Array(items))
                if !items.is_empty() && items.iter().all(Value::is_object) =>
            {
                out.push((depth, name_shown, items.len().to_string()));
                for item in items.iter().filter_map(Value::as_object) {
                    out.push(record(&untyped(item), depth + 1, now));
                }
            }
            figure => out.push((depth, name_shown, value(figure, now))),
        }
    }
}

/// The fields of an object read back untyped.
pub(crate) fn untyped(map: &serde_json::Map<String, Value>) -> Fields<'_> {
    map.iter()
        .map(|(key, value)| (key.as_str(), Figure::Json(value)))
        .collect()
}

/// A record's pid, where it names one.
pub(crate) fn record_pid(fields: &Fields) -> Option<u64> {
    fields
        .iter()
        .find_map(|(name, figure)| match (*name, figure) {
            ("pid", Figure::Id(pid)) => Some(*pid),
            ("pid", Figure::Json(v)) => v.as_u64(),
            _ => None,
        })
}

/// Whether a figure is unknown (`null`): left out of a record's line.
pub(crate) fn is_unknown(figure: &Figure) -> bool {
    matches!(figure, Figure::Unknown | Figure::Json(Value::Null))
}

/// One record of a list on one line, named by its pid where it has one: its other known
/// fields as `field value` pairs.
fn record(fields: &Fields, depth: usize, now: f64) -> (usize, String, String) {
    let name = record_pid(fields).map_or_else(String::new, |pid| format!("PID {pid}"));
    let text: Vec<String> = fields
        .iter()
        .filter(|(key, figure)| *key != "pid" && !is_unknown(figure))
        .map(|(key, figure)| format!("{} {}", crate::text::clean(key), value(figure, now)))
        .collect();
    (depth, name, text.join(" · "))
}

/// A device file's holder on one line: `dave · python pretrain.py · no context of its own ·
/// child of 1 /sbin/init`.
fn holder_line(holder: &Holder) -> String {
    let text = |s: &Option<String>| s.as_deref().map(|s| crate::text::clean(s).into_owned());
    let mut parts = Vec::new();
    parts.extend(text(&holder.user));
    parts.push(text(&holder.command).unwrap_or_else(|| "command n/a".into()));
    if holder.state.as_deref() == Some("Z") {
        parts.push("defunct".into());
    }
    parts.push(match holder.listed {
        true => "has a context of its own".into(),
        false => "no context of its own".into(),
    });
    // Last: a parent's command line can be long.
    if let Some(ppid) = holder.ppid {
        let parent = text(&holder.parent_command).map_or_else(String::new, |c| format!(" {c}"));
        parts.push(format!("child of {}{parent}", ppid.0));
    }
    parts.join(" · ")
}

#[cfg(test)]
mod tests;

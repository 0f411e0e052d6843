//! A finding's evidence, field by field, whatever its kind: each field under its own name (the
//! JSON's), its value with its unit: bytes humanised with the exact count beside them, rates
//! per minute, seconds as durations, instants as UTC times with how long ago, shares and
//! `_pct` figures as percentages. A field this file does not know is shown as it is.

use super::grouped;
use crate::layers::Layer;
use crate::units;
use serde_json::Value;

/// Fields that hold bytes without saying so in their name (besides the layers' own names).
const BYTE_FIELDS: [&str; 14] = [
    "bytes",
    "used",
    "total",
    "reserved",
    "allocated",
    "inactive_split",
    "largest_free_block",
    "requested",
    "device_free",
    "device_total",
    "peak_live",
    "holdable",
    "held",
    "driver_reserved",
];

/// Fields that hold an instant (unix seconds).
const TIME_FIELDS: [&str; 5] = ["start", "time", "since", "until", "end"];

fn is_bytes(key: &str) -> bool {
    key.ends_with("_bytes")
        || BYTE_FIELDS.contains(&key)
        || Layer::ALL.iter().any(|l| l.name() == key)
}

fn is_seconds(key: &str) -> bool {
    key.ends_with("_secs") || key == "age"
}

pub(crate) fn is_time(key: &str) -> bool {
    TIME_FIELDS.contains(&key) || key.ends_with("_time") || key.ends_with("_at")
}

fn is_share(key: &str) -> bool {
    key == "share" || key.starts_with("share_") || key.ends_with("_share")
}

/// A number as JSON would print it, without a trailing `.0`.
fn plain(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{n:.0}")
    } else {
        format!("{n}")
    }
}

/// One value of field `key`, formatted for its unit; `now` for how long ago an instant was.
pub fn value(key: &str, value: &Value, now: f64) -> String {
    match value {
        Value::Null => "n/a".into(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Value::String(s) => crate::text::clean(s).into_owned(),
        Value::Array(items) if items.is_empty() => "none".into(),
        Value::Array(items) => items
            .iter()
            .map(|v| self::value(key, v, now))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Object(_) => "{…}".into(),
        Value::Number(n) => number(key, n, now),
    }
}

fn number(key: &str, n: &serde_json::Number, now: f64) -> String {
    let Some(f) = n.as_f64() else {
        return n.to_string();
    };
    if key.ends_with("bytes_per_sec") {
        return format!("{}/s ({} B/s)", units::bytes(f.max(0.0) as u64), plain(f));
    }
    if key.ends_with("bytes_per_step") {
        let sign = if f < 0.0 { "-" } else { "" };
        return format!(
            "{sign}{}/step ({} B)",
            units::bytes(f.abs() as u64),
            plain(f)
        );
    }
    if key.ends_with("_step") || key == "steps" || key.ends_with("_steps") {
        return format!("{} steps", plain(f));
    }
    if is_bytes(key) {
        return match n.as_u64() {
            Some(b) => format!("{} ({} B)", units::bytes(b), grouped(b)),
            None if f >= 0.0 => units::bytes(f as u64),
            None => plain(f),
        };
    }
    if key.ends_with("_mib_per_min") {
        return format!("{f:+.1} MiB/min");
    }
    if key.ends_with("_per_min") {
        return format!("{} a minute", plain(f));
    }
    if is_seconds(key) {
        return format!("{} ({} s)", units::duration(f.abs()), plain(f));
    }
    if is_time(key) && f > 1e8 {
        let ago = now - f;
        let when = if ago >= 0.0 {
            format!("{} ago", units::duration(ago))
        } else {
            format!("in {}", units::duration(-ago))
        };
        return format!("{} UTC ({when})", units::clock(f));
    }
    if is_share(key) {
        return format!("{:.1}%", f * 100.0);
    }
    if key.ends_with("_pct") {
        return format!("{}%", plain(f));
    }
    plain(f)
}

/// The evidence as (depth, name, value) rows, nested objects indented under their name.
pub fn rows(evidence: &Value, now: f64) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    walk(evidence, 0, now, &mut out);
    out
}

fn walk(value: &Value, depth: usize, now: f64, out: &mut Vec<(usize, String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let key_shown = crate::text::clean(key).into_owned();
                if let Value::Object(inner) = v {
                    if !inner.is_empty() {
                        out.push((depth, key_shown, String::new()));
                        walk(v, depth + 1, now, out);
                        continue;
                    }
                }
                // A list of records (the holders of a device file): one line each.
                if let Value::Array(items) = v {
                    if !items.is_empty() && items.iter().all(Value::is_object) {
                        out.push((depth, key_shown, items.len().to_string()));
                        for item in items {
                            out.push(record(item, depth + 1, now));
                        }
                        continue;
                    }
                }
                out.push((depth, key_shown, self::value(key, v, now)));
            }
        }
        Value::Null => {}
        // A bare value (a unit enum variant): one unnamed row.
        other => out.push((depth, String::new(), self::value("", other, now))),
    }
}

/// One record of a list on one line, named by its pid where it has one. A device file's holder
/// reads `PID 31342 · dave · python pretrain.py · no context of its own · child of 1
/// /sbin/init`; any other record, `field value` pairs.
fn record(item: &Value, depth: usize, now: f64) -> (usize, String, String) {
    let name = item
        .get("pid")
        .and_then(Value::as_u64)
        .map_or_else(String::new, |pid| format!("PID {pid}"));
    let text = |key: &str| {
        item.get(key)
            .and_then(Value::as_str)
            .map(|s| crate::text::clean(s).into_owned())
    };
    if item.get("listed").is_some() && item.get("command").is_some() {
        let mut parts = Vec::new();
        parts.extend(text("user"));
        parts.push(text("command").unwrap_or_else(|| "command n/a".into()));
        if text("state").as_deref() == Some("Z") {
            parts.push("defunct".into());
        }
        parts.push(match item.get("listed").and_then(Value::as_bool) {
            Some(true) => "has a context of its own".into(),
            _ => "no context of its own".into(),
        });
        // Last: a parent's command line can be long.
        if let Some(ppid) = item.get("ppid").and_then(Value::as_u64) {
            let parent = text("parent_command").map_or_else(String::new, |c| format!(" {c}"));
            parts.push(format!("child of {ppid}{parent}"));
        }
        return (depth, name, parts.join(" · "));
    }
    let fields: Vec<String> = item
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, v)| key.as_str() != "pid" && !v.is_null())
        .map(|(key, v)| format!("{} {}", crate::text::clean(key), value(key, v, now)))
        .collect();
    (depth, name, fields.join(" · "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: f64 = 1_767_258_905.0;

    #[test]
    fn every_unit_is_named_beside_its_value() {
        let evidence = json!({
            "cause": "live",
            "rate_mib_per_min": 635.8,
            "start": 1_767_258_105.0,
            "duration_secs": 800.0,
            "from_bytes": 7_091_363_840u64,
            "share": 0.254,
            "rate_per_min": 394.2,
            "requested": 2_684_354_560u64,
            "ooms_total": 3,
            "pids": [38811, 4021],
            "time": null,
            "rate_bytes_per_sec": 1_048_576.0,
            "bytes_per_step": 12_582_912,
            "eta_step": 340,
            "sm_mean_pct": 0.5,
            "gap": { "used_exceeds_total": { "total": 1024, "used": 2048 } },
        });
        let rows = rows(&evidence, NOW);
        let find = |name: &str| {
            rows.iter()
                .find(|r| r.1 == name)
                .map(|r| r.2.clone())
                .unwrap_or_else(|| panic!("{name} missing: {rows:?}"))
        };
        assert_eq!(find("cause"), "live");
        assert_eq!(find("rate_mib_per_min"), "+635.8 MiB/min");
        assert_eq!(find("start"), "09:01:45 UTC (13m20s ago)");
        assert_eq!(find("duration_secs"), "13m20s (800 s)");
        assert_eq!(find("from_bytes"), "6.60 GiB (7,091,363,840 B)");
        assert_eq!(find("share"), "25.4%");
        assert_eq!(find("rate_per_min"), "394.2 a minute");
        assert_eq!(find("requested"), "2.50 GiB (2,684,354,560 B)");
        assert_eq!(find("ooms_total"), "3");
        assert_eq!(find("pids"), "38811, 4021");
        assert_eq!(find("time"), "n/a");
        assert_eq!(find("rate_bytes_per_sec"), "1.00 MiB/s (1048576 B/s)");
        assert_eq!(find("bytes_per_step"), "12.0 MiB/step (12582912 B)");
        assert_eq!(find("eta_step"), "340 steps");
        assert_eq!(find("sm_mean_pct"), "0.5%");
        assert_eq!(find("used_exceeds_total"), "");
        let used = rows.iter().find(|r| r.1 == "used").expect("nested");
        assert_eq!((used.0, used.2.as_str()), (2, "2.00 KiB (2,048 B)"));
    }

    #[test]
    fn a_device_files_holders_read_one_a_line() {
        let evidence = json!({
            "device_file": "/dev/nvidia2",
            "holders": [
                { "pid": 31342, "ppid": 1, "user": "dave", "command": "python pretrain.py",
                  "parent_command": "/sbin/init", "state": "S", "start_time": 25380000,
                  "listed": false },
                { "pid": 52010, "ppid": 1, "user": "bob", "command": "python eval.py",
                  "parent_command": null, "state": "Z", "start_time": 25923000,
                  "listed": true },
            ],
            "other": [ { "pid": 7, "bytes": 2048 } ],
        });
        let rows = rows(&evidence, NOW);
        let at = |name: &str| rows.iter().position(|r| r.1 == name).unwrap_or(usize::MAX);
        assert_eq!(rows[at("holders")].2, "2");
        assert_eq!(
            rows[at("holders") + 1],
            (
                1,
                "PID 31342".to_string(),
                "dave · python pretrain.py · no context of its own · child of 1 /sbin/init"
                    .to_string()
            )
        );
        assert_eq!(
            rows[at("holders") + 2].2,
            "bob · python eval.py · defunct · has a context of its own · child of 1"
        );
        assert_eq!(rows[at("other") + 1].2, "bytes 2.00 KiB (2,048 B)");
    }

    #[test]
    fn strings_from_outside_are_defused() {
        let rows = rows(&json!({ "socket": "/tmp/\u{1b}[2Jx.sock" }), NOW);
        assert_eq!(rows[0].2, "/tmp/\u{fffd}[2Jx.sock");
    }
}

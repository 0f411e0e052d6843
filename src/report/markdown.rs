//! The pieces the report is written with: escaped text, figures with exact bytes, instants.

use crate::present::grouped;
use crate::text::clean;
use crate::units;

/// Characters that mean something to Markdown (GitHub's flavour) inside a line: emphasis,
/// code, links and images, raw HTML and entities, table cells, strikethrough, maths, and
/// GitHub's mentions and issue references. Each is written backslash-escaped. (Those that
/// mean something only at the start of a line, `-`, `+`, `=`, `1.`, are left alone: an
/// escaped string never starts a line of the report.)
const MARKUP: &[char] = &[
    '\\', '`', '*', '_', '[', ']', '<', '>', '&', '|', '~', '!', '$', '#', '@',
];

/// A string from outside (NVML, `/proc`, a feed), made safe to put anywhere in a line of the
/// report: control, bidi and zero-width characters replaced (a newline would end a table row),
/// then every Markdown metacharacter backslash-escaped, so it reads as the text it is.
pub(crate) fn escape(text: &str) -> String {
    let cleaned = clean(text);
    let mut out = String::with_capacity(cleaned.len() + 8);
    for c in cleaned.chars() {
        if MARKUP.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Like [`escape`], `n/a` when unknown.
pub(crate) fn opt_escape(text: Option<&str>) -> String {
    text.map_or_else(|| "n/a".into(), escape)
}

/// Bytes as the report writes every figure: the human form with the exact count beside it,
/// `12.3 GiB (13,207,024,640 B)`; `n/a` when unknown.
pub(crate) fn figure(value: Option<u64>) -> String {
    match value {
        Some(v) => format!("{} ({} B)", units::bytes(v), grouped(v)),
        None => "n/a".into(),
    }
}

/// A metric's name as code, or as words where the framework has none (`(not reported)`).
pub(crate) fn code(name: &str) -> String {
    if name.starts_with('(') {
        name.to_string()
    } else {
        format!("`{name}`")
    }
}

/// A count (retries, OOMs), `n/a` when unknown.
pub(crate) fn count(value: Option<u64>) -> String {
    value.map_or_else(|| "n/a".into(), |v| v.to_string())
}

/// How instants are told: UTC date and time, the demo's too; `demo` says the demo's story
/// time once, beside the report's own instant (its clock runs faster than the wall's and
/// starts at a fixed origin).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    pub(crate) demo: bool,
}

impl Clock {
    /// An instant (unix seconds) in wall-clock UTC, the report's one clock (the demo's
    /// story time is said once, beside the report's time): `2026-11-29 15:02:45.3 UTC`.
    pub(crate) fn at(self, unix_secs: f64) -> String {
        if !unix_secs.is_finite() {
            return "n/a".into();
        }
        let nanos = (unix_secs * 1e9).round() as i128;
        match time::OffsetDateTime::from_unix_timestamp_nanos(nanos) {
            Ok(t) => format!(
                "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{} UTC",
                t.year(),
                u8::from(t.month()),
                t.day(),
                t.hour(),
                t.minute(),
                t.second(),
                t.millisecond() / 100
            ),
            Err(_) => "n/a".into(),
        }
    }

    /// The instant as a file name wants it: `20261129-150245` (UTC; the demo's fixed clock).
    pub(crate) fn stamp(unix_secs: f64) -> String {
        let secs = if unix_secs.is_finite() {
            unix_secs.floor() as i64
        } else {
            0
        };
        match time::OffsetDateTime::from_unix_timestamp(secs) {
            Ok(t) => format!(
                "{:04}{:02}{:02}-{:02}{:02}{:02}",
                t.year(),
                u8::from(t.month()),
                t.day(),
                t.hour(),
                t.minute(),
                t.second()
            ),
            Err(_) => "unknown-time".into(),
        }
    }
}

/// Seconds between two readings, signed, to a tenth: `0.4 s before`, `1.2 s after`, `at the
/// same instant`.
pub(crate) fn offset(secs: f64, reference: &str) -> String {
    if !secs.is_finite() {
        return "n/a".into();
    }
    let tenths = (secs * 10.0).round() / 10.0;
    if tenths == 0.0 {
        format!("at the same instant as {reference}")
    } else if tenths < 0.0 {
        format!("{:.1} s before {reference}", -tenths)
    } else {
        format!("{tenths:.1} s after {reference}")
    }
}

/// A duration in seconds: `15m05s (905 s)`.
pub(crate) fn span(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "n/a".into();
    }
    format!("{} ({:.0} s)", units::duration(secs), secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_carry_exact_bytes_and_unknown_is_na() {
        assert_eq!(figure(Some(13_207_024_640)), "12.3 GiB (13,207,024,640 B)");
        assert_eq!(figure(Some(0)), "0 B (0 B)");
        assert_eq!(figure(None), "n/a");
        assert_eq!(count(None), "n/a");
        assert_eq!(count(Some(0)), "0");
    }

    #[test]
    fn instants_are_utc_the_demos_too() {
        let real = Clock { demo: false };
        assert_eq!(real.at(1_767_258_000.25), "2026-01-01 09:00:00.2 UTC");
        let demo = Clock { demo: true };
        let at = crate::source::demo::DEMO_EPOCH + 905.0;
        assert_eq!(demo.at(at), real.at(at));
        assert!(demo.at(at).ends_with(" UTC"), "{}", demo.at(at));
        assert_eq!(Clock::stamp(1_767_258_905.9), "20260101-091505");
        assert_eq!(offset(-0.44, "NVML"), "0.4 s before NVML");
        assert_eq!(offset(0.01, "NVML"), "at the same instant as NVML");
    }

    #[test]
    fn markup_is_escaped_and_controls_replaced() {
        assert_eq!(escape("a|b"), "a\\|b");
        assert_eq!(escape("<script>"), "\\<script\\>");
        assert_eq!(escape("x\ny"), "x\u{fffd}y");
        assert_eq!(escape("`id`"), "\\`id\\`");
        assert_eq!(escape("plain text 42"), "plain text 42");
    }
}

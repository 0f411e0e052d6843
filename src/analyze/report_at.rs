//! `strata analyze FILE --report-at TIME`: the incident report of one instant of a
//! recording, as `R` would have written it live: every sample up to TIME through the
//! monitor's own pipeline (every detector at every sample, so the history, the findings and
//! their `since` are the monitor's), then the report of the last sample at or before TIME
//! and its chart, written into the current directory.

use crate::pipeline::{Observed, Pipeline};
use crate::recording::{Line, Lines};
use std::path::Path;

/// TIME as unix seconds: a number, or an RFC 3339 time (`2026-01-01T09:15:00Z`).
pub(crate) fn parse_time(text: &str) -> Result<f64, String> {
    if let Ok(secs) = text.trim().parse::<f64>() {
        if secs.is_finite() {
            return Ok(secs);
        }
    }
    use time::format_description::well_known::Rfc3339;
    time::OffsetDateTime::parse(text.trim(), &Rfc3339)
        .map(|t| t.unix_timestamp_nanos() as f64 / 1e9)
        .map_err(|_| {
            format!(
                "`{text}` is not a time (hint: unix seconds, or RFC 3339: 2026-01-01T09:15:00Z)"
            )
        })
}

/// Writes the report of the instant `at` of the recording `path` into `dir`; returns the
/// exit status (0, or 1 with one line on stderr).
pub fn run(path: &Path, at: f64, context_bytes: Option<u64>, dir: &Path) -> u8 {
    let shown = crate::text::clean(&path.display().to_string()).into_owned();
    let mut lines = match Lines::open(path) {
        Ok(lines) => lines,
        Err(e) => {
            eprintln!(
                "strata: cannot read the recording {shown}: {e} (hint: {})",
                e.hint()
            );
            return 1;
        }
    };
    let progress = crate::recording::progress::on_stderr(lines.progress().clone(), &shown);
    let mut pipeline = Pipeline::new(context_bytes);
    let mut shown_at: Option<Observed> = None;
    let mut first = None;
    let mut last_time = f64::NEG_INFINITY;
    loop {
        match lines.next_line() {
            Ok(Some((_, Line::Sample(sample)))) => {
                if !sample.time.is_finite() || sample.time <= last_time {
                    continue;
                }
                first.get_or_insert(sample.time);
                if sample.time > at {
                    break;
                }
                last_time = sample.time;
                shown_at = Some(pipeline.ingest(*sample));
            }
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                eprintln!("strata: reading the recording {shown} stopped: {e}; the report is of the samples before (hint: {})", e.hint());
                break;
            }
        }
    }
    drop(progress);
    let Some(observed) = shown_at else {
        let clock = crate::report::markdown::Clock { demo: false };
        let why = match first {
            Some(t) => format!("it begins at {}, after {}", clock.at(t), clock.at(at)),
            None => "it holds no sample".to_string(),
        };
        eprintln!("strata: no report of {} from {shown}: {why} (hint: give a TIME within the recording; `strata analyze FILE` shows its span)", clock.at(at));
        return 1;
    };
    // The demo's story time is its own clock: the demo's samples say so.
    let demo = observed.sample.demo;
    match crate::report::chart::write_report(dir, &observed, &pipeline.history, demo) {
        Ok(name) => {
            let clock = crate::report::markdown::Clock { demo };
            let svg = dir.join(crate::report::chart::file_name(&name));
            let chart = if svg.exists() {
                format!(", its chart {}", crate::report::chart::file_name(&name))
            } else {
                String::new()
            };
            println!(
                "report of {} (the last sample at or before {}) written to {name}{chart}",
                clock.at(observed.sample.time),
                clock.at(at)
            );
            0
        }
        Err(e) => {
            eprintln!("strata: the report could not be written: {e} (hint: run it in a directory you can write to)");
            1
        }
    }
}

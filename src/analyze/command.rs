//! `strata analyze FILE` from the command line: reads the recording (with its progress on a
//! terminal's stderr when that takes more than a second), prints the analysis, and says in
//! its exit status what reading lost:
//! - 0: every line was read (a cut last line, the sample in flight when the recorder
//!   stopped, and samples out of order, which were read and skipped, are not losses);
//! - [`LOST`] (3): the analysis is printed, but part of the recording was lost: lines that
//!   are not samples or are over the line limit, corrupt compressed data skipped;
//! - 1: the recording could not be read, holds no sample (an empty file, a file that is not
//!   a recording: nothing is printed), or reading stopped before its end (the analysis of
//!   what came before is printed): one line on stderr says why, with a hint.

use super::{timeline, Analysis};
use crate::recording::Lines;
use std::io::Write;
use std::path::Path;

/// The exit status of an analysis printed with part of the recording lost.
pub const LOST: u8 = 3;

/// Runs `strata analyze` on `path` (`-`: standard input); returns the exit status.
pub fn run(path: &Path, json: bool, context_bytes: Option<u64>, clock: super::Clock) -> u8 {
    let shown = if path.as_os_str() == "-" {
        "standard input".to_string()
    } else {
        path.display().to_string()
    };
    let shown = crate::text::clean(&shown).into_owned();
    let lines = match Lines::open(path) {
        Ok(lines) => lines,
        Err(e) => {
            let hint = match e {
                crate::recording::ReadError::Io(_) => {
                    "record one with `strata record FILE`, or `strata snapshot --json --count N > FILE`"
                }
                ref other => other.hint(),
            };
            eprintln!("strata: cannot read the recording {shown}: {e} (hint: {hint})");
            return 1;
        }
    };
    let progress = crate::recording::progress::on_stderr(lines.progress().clone(), &shown);
    let analysis = super::analyze_on(lines, context_bytes, clock);
    drop(progress);
    if let (Some(error), 0) = (&analysis.read_error, analysis.samples) {
        // Nothing to analyse: the one line says why.
        let hint = analysis.read_hint.unwrap_or("check the file");
        let error = crate::text::clean(error);
        eprintln!("strata: cannot read the recording {shown}: {error} (hint: {hint})");
        return 1;
    }
    if let Some(why) = nothing_read(&analysis, &shown) {
        eprintln!("strata: {why}");
        return 1;
    }
    if let Err(e) = print(&analysis, json) {
        // The reader has gone (`strata analyze FILE | head`): it has what it wanted.
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("strata: cannot write the analysis: {e}");
            return 1;
        }
    }
    if let Some(error) = &analysis.read_error {
        let hint = analysis.read_hint.unwrap_or("check the file");
        eprintln!(
            "strata: reading the recording {shown} stopped: {}; the analysis covers the {} sample(s) before (hint: {hint})",
            crate::text::clean(error),
            analysis.samples
        );
        return 1;
    }
    if analysis.lost_some() {
        eprintln!(
            "strata: part of the recording {shown} was lost: {}",
            lost(&analysis)
        );
        return LOST;
    }
    0
}

fn print(analysis: &Analysis, json: bool) -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if json {
        serde_json::to_writer(&mut out, analysis)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", timeline(analysis))?;
    }
    out.flush()
}

/// Where no sample was read: the one line (with its hint) that says why, for `analyze` and
/// `export` alike, whose exit status is then 1: nothing analysed is an error a script must
/// see.
pub(crate) fn nothing_read(analysis: &Analysis, shown: &str) -> Option<String> {
    if analysis.samples > 0 {
        return None;
    }
    const HINT: &str = "a recording is what `strata record FILE` (format 2) or `strata snapshot --json --count N > FILE` (JSON lines) writes";
    let bad = analysis.bad_lines.len() as u64 + analysis.more_bad_lines;
    let why = if let Some(first) = analysis.bad_lines.first() {
        let error = crate::text::clean(&first.error);
        if bad == 1 {
            format!("{shown} is not a recording: its one line is not a sample ({error})")
        } else {
            format!(
                "{shown} is not a recording: none of its {bad} lines is a sample (line {}: {error})",
                first.line
            )
        }
    } else if let Some(c) = analysis.corrupt.first() {
        format!(
            "{shown} holds no sample: its compressed data is corrupt from byte {}",
            c.at
        )
    } else if analysis.unanchored > 0 {
        format!(
            "{shown} holds no sample that can be read: the keyframe of its {} sample(s) was lost",
            analysis.unanchored
        )
    } else if analysis.truncated {
        format!("{shown} holds no whole sample: its only one was cut short")
    } else {
        format!("{shown} holds no sample: it is empty")
    };
    Some(format!("{why} (hint: {HINT})"))
}

/// What was lost, in a few words: `2 bad lines, corrupt data at byte 1234 (12.0 KiB skipped)`.
pub(crate) fn lost(analysis: &Analysis) -> String {
    let mut parts = Vec::new();
    let bad = analysis.bad_lines.len() as u64 + analysis.more_bad_lines;
    if bad > 0 {
        let plural = if bad == 1 { "" } else { "s" };
        parts.push(format!("{bad} line{plural} not read as samples"));
    }
    for c in analysis.corrupt.iter().take(3) {
        parts.push(match c.resumed_at {
            Some(r) => format!(
                "corrupt at byte {} ({} skipped)",
                c.at,
                crate::units::bytes(r.saturating_sub(c.at))
            ),
            None => format!("corrupt at byte {} (the rest skipped)", c.at),
        });
    }
    if analysis.unanchored > 0 {
        parts.push(format!(
            "{} sample(s) whose keyframe was lost",
            analysis.unanchored
        ));
    }
    if analysis.corrupt.len() > 3 {
        parts.push(format!("{} more corruptions", analysis.corrupt.len() - 3));
    }
    parts.join(", ")
}

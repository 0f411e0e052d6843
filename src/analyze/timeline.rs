//! The human timeline of an analysis: one line per episode, what to do about it under it,
//! then what was skipped.

use super::Analysis;

/// The human timeline: one line per episode with its advice under it (a sentence a line,
/// marked `→`), then what was skipped.
pub fn timeline(analysis: &Analysis) -> String {
    use crate::text::clean;
    use crate::units::{clock, duration};
    use std::fmt::Write;
    let mut out = String::new();
    match (analysis.first_time, analysis.last_time) {
        (Some(a), Some(b)) => {
            let _ = writeln!(
                out,
                "{} samples from {} to {} UTC ({}): {} finding(s)",
                analysis.samples,
                clock(a),
                clock(b),
                duration(b - a),
                analysis.findings.len()
            );
        }
        _ => {
            let _ = writeln!(out, "no sample in the recording");
        }
    }
    for e in &analysis.findings {
        let end = if e.open {
            "  (still at the end)".to_string()
        } else {
            format!(" → {}", clock(e.until))
        };
        let _ = writeln!(
            out,
            "{}{end:<21} {:<4} {:<18} {}",
            clock(e.since),
            e.severity.label(),
            e.kind.name(),
            clean(&e.message)
        );
        for sentence in &e.advice() {
            let _ = writeln!(out, "{:>10}→ {}", "", clean(sentence));
        }
    }
    for bad in &analysis.bad_lines {
        let _ = writeln!(out, "line {} skipped: {}", bad.line, clean(&bad.error));
    }
    if analysis.more_bad_lines > 0 {
        let _ = writeln!(out, "{} more bad lines skipped", analysis.more_bad_lines);
    }
    if analysis.out_of_order > 0 {
        let _ = writeln!(
            out,
            "{} sample(s) not later than the one before (out of order or repeated) skipped",
            analysis.out_of_order
        );
    }
    for c in &analysis.corrupt {
        let error = clean(&c.error);
        let _ = match c.resumed_at {
            Some(resumed) => writeln!(
                out,
                "corrupt at byte {} ({error}): {} skipped, read on from the next frame at byte {resumed}",
                c.at,
                crate::units::bytes(resumed.saturating_sub(c.at))
            ),
            None => writeln!(
                out,
                "corrupt at byte {} ({error}): no frame after it, the rest of the file skipped",
                c.at
            ),
        };
    }
    if analysis.unanchored > 0 {
        let _ = writeln!(
            out,
            "{} sample(s) whose keyframe was lost skipped (to the next keyframe)",
            analysis.unanchored
        );
    }
    if let Some(error) = &analysis.read_error {
        let _ = writeln!(out, "reading stopped: {}", clean(error));
    }
    if analysis.older_shape > 0 {
        let _ = writeln!(
            out,
            "{} sample(s) in the older shape (allocator figures in processes[].feed, no raw feeds): their feeds were rebuilt from those figures",
            analysis.older_shape
        );
    }
    if analysis.truncated {
        let _ = writeln!(
            out,
            "the last line was cut short (the recording was interrupted): ignored"
        );
    }
    out
}

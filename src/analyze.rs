//! `strata analyze FILE`: the monitor's judgement over a recording. Each line is one raw node
//! sample (the `strata.snapshot/1` raw fields; derived fields are ignored and recomputed);
//! the findings come out as episodes, from when each was first raised to when it was last
//! seen.

use crate::detect::{Finding, FindingKind, Severity};
use crate::pipeline::Pipeline;
use crate::sample::NodeSample;
use serde::Serialize;
use std::io::BufRead;

/// One finding over the time it held.
#[derive(Debug, Clone, Serialize)]
pub struct Episode {
    pub kind: FindingKind,
    pub severity: Severity,
    pub device_uuid: Option<String>,
    pub pid: Option<u32>,
    /// When it was first raised.
    pub since: f64,
    /// When it was last seen.
    pub until: f64,
    /// Whether it still held at the recording's last sample.
    pub open: bool,
    /// Its message and evidence when it was last seen (the climb's latest rate, the OOM's
    /// class...).
    pub message: String,
    pub evidence: serde_json::Value,
    /// Its worst severity and its message when first raised.
    pub first_message: String,
    /// Its evidence when first raised (a forecast's first ETA, a climb's first rate).
    pub first_evidence: serde_json::Value,
}

/// A line that was not a sample.
#[derive(Debug, Clone, Serialize)]
pub struct BadLine {
    pub line: u64,
    pub error: String,
}

/// What a recording shows.
#[derive(Debug, Default, Serialize)]
pub struct Analysis {
    pub findings: Vec<Episode>,
    /// Samples read.
    pub samples: u64,
    pub bad_lines: Vec<BadLine>,
    /// Bad lines beyond those listed.
    pub more_bad_lines: u64,
    /// Samples not later than the one before (out of order, or repeated): skipped.
    pub out_of_order: u64,
    /// The last line ended without a newline and did not parse: a recording cut short.
    pub truncated: bool,
    /// Samples of the snapshot's derived form (allocator figures in `processes[].feed`, no
    /// raw `feeds`), whose feeds were rebuilt from those figures.
    pub older_shape: u64,
    pub first_time: Option<f64>,
    pub last_time: Option<f64>,
}

/// Bad lines listed at most; the rest are counted.
const BAD_LINES_LISTED: usize = 20;

type Key = (FindingKind, Option<String>, Option<u32>);

fn key(f: &Finding) -> Key {
    (f.kind, f.device_uuid.clone(), f.pid)
}

/// What the reading thread makes of one line.
enum Line {
    Sample(Box<NodeSample>),
    Bad(BadLine),
    /// The last line, cut short.
    Truncated,
}

/// Reads and parses the recording's lines, in order, into `out`; stops at the end, or when
/// the judging side has gone.
fn read_lines(input: impl BufRead, out: std::sync::mpsc::SyncSender<std::io::Result<Line>>) {
    let mut lines = input.split(b'\n').peekable();
    let mut number = 0u64;
    while let Some(line) = lines.next() {
        number += 1;
        let item = line.map(|line| {
            let text = line.trim_ascii();
            if text.is_empty() {
                return None;
            }
            Some(match serde_json::from_slice::<NodeSample>(text) {
                Ok(sample) => Line::Sample(Box::new(sample)),
                // The last line of a recording cut short (a kill mid-write) has no newline.
                Err(e) if e.is_eof() && lines.peek().is_none() => Line::Truncated,
                Err(e) => Line::Bad(BadLine {
                    line: number,
                    error: e.to_string(),
                }),
            })
        });
        let stop = item.is_err();
        if let Some(item) = item.transpose() {
            if out.send(item).is_err() || stop {
                return;
            }
        }
    }
}

/// Reads a recording and judges it as the monitor would have, sample by sample. Lines are
/// read and parsed on a thread of their own, ahead of the judging.
pub fn analyze(
    input: impl BufRead + Send,
    context_bytes: Option<u64>,
) -> std::io::Result<Analysis> {
    let (send, receive) = std::sync::mpsc::sync_channel(16);
    std::thread::scope(|scope| {
        scope.spawn(move || read_lines(input, send));
        judge(receive.iter(), context_bytes)
    })
}

fn judge(
    lines: impl Iterator<Item = std::io::Result<Line>>,
    context_bytes: Option<u64>,
) -> std::io::Result<Analysis> {
    let mut pipeline = Pipeline::new(context_bytes);
    let mut analysis = Analysis::default();
    let mut open: Vec<Episode> = Vec::new();
    let mut done: Vec<Episode> = Vec::new();
    let mut last_time = f64::NEG_INFINITY;
    for line in lines {
        let sample = match line? {
            Line::Sample(sample) => *sample,
            Line::Truncated => {
                analysis.truncated = true;
                continue;
            }
            Line::Bad(bad) => {
                if analysis.bad_lines.len() < BAD_LINES_LISTED {
                    analysis.bad_lines.push(bad);
                } else {
                    analysis.more_bad_lines += 1;
                }
                continue;
            }
        };
        if !sample.time.is_finite() || sample.time <= last_time {
            analysis.out_of_order += 1;
            continue;
        }
        last_time = sample.time;
        let time = sample.time;
        analysis.samples += 1;
        analysis.first_time.get_or_insert(time);
        analysis.last_time = Some(time);
        let observed = pipeline.ingest(sample);
        if let crate::sample::derived::FeedShape::Derived(_) = observed.feed_shape {
            analysis.older_shape += 1;
        }
        let now: Vec<Key> = observed.findings.iter().map(key).collect();
        // Episodes not seen for longer than the hold have ended; one missed reading within it
        // does not end an episode (the monitor keeps its `since` too).
        let (still, ended): (Vec<Episode>, Vec<Episode>) = open.drain(..).partition(|e| {
            now.contains(&(e.kind, e.device_uuid.clone(), e.pid))
                || time - e.until <= crate::detect::trend::HOLD_SECS
        });
        done.extend(ended);
        open = still;
        for f in &observed.findings {
            match open
                .iter_mut()
                .find(|e| (e.kind, e.device_uuid.clone(), e.pid) == key(f))
            {
                Some(e) => {
                    e.until = time;
                    e.severity = e.severity.max(f.severity);
                    e.message = f.message.clone();
                    e.evidence = f.evidence.clone();
                }
                None => open.push(Episode {
                    kind: f.kind,
                    severity: f.severity,
                    device_uuid: f.device_uuid.clone(),
                    pid: f.pid,
                    since: f.since,
                    until: time,
                    open: false,
                    message: f.message.clone(),
                    evidence: f.evidence.clone(),
                    first_message: f.message.clone(),
                    first_evidence: f.evidence.clone(),
                }),
            }
        }
    }
    for e in &mut open {
        e.open = true;
    }
    done.extend(open);
    done.sort_by(|a, b| {
        a.since
            .total_cmp(&b.since)
            .then(b.severity.cmp(&a.severity))
            .then(a.pid.cmp(&b.pid))
    });
    analysis.findings = done;
    Ok(analysis)
}

/// The human timeline: one line per episode, then what was skipped.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::demo::node_at;

    fn recording(lines: &[String]) -> Analysis {
        let text = lines.join("\n");
        analyze(std::io::Cursor::new(text.into_bytes()), None).expect("reads")
    }

    fn demo_lines(from: f64, to: f64) -> Vec<String> {
        let mut lines = Vec::new();
        let mut t = from;
        while t < to {
            lines.push(serde_json::to_string(&node_at(0, t, 10.0)).expect("json"));
            t += 10.0;
        }
        lines
    }

    #[test]
    fn a_recording_of_the_demo_shows_its_story_as_episodes() {
        let a = recording(&demo_lines(0.0, 1190.0));
        assert_eq!(a.samples, 119);
        let leak = a
            .findings
            .iter()
            .find(|e| e.kind == FindingKind::Climb && e.pid == Some(52010))
            .expect("the leak");
        assert!(leak.since < leak.until);
        assert!(a
            .findings
            .iter()
            .any(|e| e.kind == FindingKind::Oom && e.evidence["class"] == "fragmentation"));
        let text = timeline(&a);
        assert!(text.contains("climb") && text.contains("oom"), "{text}");
    }

    #[test]
    fn bad_lines_are_counted_and_a_cut_last_line_is_fine() {
        let mut lines = demo_lines(0.0, 100.0);
        lines.insert(3, "{not json".into());
        lines.insert(5, "[1,2]".into());
        let good = lines.last().cloned().unwrap_or_default();
        lines.push(good[..good.len() / 2].to_string());
        let a = recording(&lines);
        assert_eq!(a.samples, 10);
        assert_eq!(
            a.bad_lines.iter().map(|b| b.line).collect::<Vec<_>>(),
            vec![4, 6]
        );
        assert!(a.truncated);
    }

    #[test]
    fn repeated_and_out_of_order_samples_are_skipped_without_a_false_finding() {
        let mut lines = demo_lines(0.0, 300.0);
        let copy = lines[10].clone();
        lines.insert(12, copy.clone());
        lines.insert(20, copy);
        let a = recording(&lines);
        assert_eq!(a.out_of_order, 2);
        let clean = recording(&demo_lines(0.0, 300.0));
        let kinds = |a: &Analysis| {
            a.findings
                .iter()
                .map(|e| (e.kind, e.pid))
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds(&a), kinds(&clean));
    }
}

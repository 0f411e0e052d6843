//! `strata analyze FILE`: the monitor's judgement over a recording. Each line is one raw node
//! sample (the `strata.snapshot/1` raw fields; derived fields are ignored and recomputed);
//! the findings come out as episodes, from when each was first raised to when it was last
//! seen, each ending when its condition ends, as on the monitor.

mod budget;
pub mod command;
pub mod report_at;
mod timeline;

pub use timeline::timeline;

use crate::detect::{Evidence, Finding, FindingKind, FindingTracker, Severity};
use crate::pipeline::{Observed, Pipeline};
use crate::recording::{Corruption, Line, Lines, ReadError};
use serde::Serialize;
use std::ops::ControlFlow;

/// One finding over the time it held. Written to JSON with its [`advice`](Episode::advice)
/// after its message.
#[derive(Debug, Clone)]
pub struct Episode {
    pub kind: FindingKind,
    pub(crate) severity: Severity,
    pub(crate) device_uuid: Option<String>,
    pub pid: Option<u32>,
    /// When it was first raised.
    pub since: f64,
    /// When it was last seen.
    pub until: f64,
    /// Whether it still held at the recording's last sample.
    pub open: bool,
    /// Its message and evidence when it was last seen (the climb's latest rate, the OOM's
    /// class...).
    pub(crate) message: String,
    pub(crate) evidence: Evidence,
    /// Its worst severity and its message when first raised.
    pub(crate) first_message: String,
    /// Its evidence when first raised (a forecast's first ETA, a climb's first rate).
    pub(crate) first_evidence: Evidence,
}

impl Episode {
    /// What to do, from its evidence when it was last seen (as [`Finding::advice`]).
    pub(crate) fn advice(&self) -> Vec<String> {
        crate::detect::advice::advice(self.kind, &self.evidence)
    }
}

impl Serialize for Episode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("Episode", 12)?;
        s.serialize_field("kind", &self.kind)?;
        s.serialize_field("severity", &self.severity)?;
        s.serialize_field("device_uuid", &self.device_uuid)?;
        s.serialize_field("pid", &self.pid)?;
        s.serialize_field("since", &self.since)?;
        s.serialize_field("until", &self.until)?;
        s.serialize_field("open", &self.open)?;
        s.serialize_field("message", &self.message)?;
        s.serialize_field("advice", &self.advice())?;
        s.serialize_field("evidence", &self.evidence)?;
        s.serialize_field("first_message", &self.first_message)?;
        s.serialize_field("first_evidence", &self.first_evidence)?;
        s.end()
    }
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
    /// Corrupt compressed data, each skipped to the next frame (or gzip member).
    pub corrupt: Vec<Corruption>,
    /// Format 2: samples written as deltas against a state that was lost (their keyframe
    /// damaged or cut away), skipped up to the next keyframe; nothing is derived from them.
    pub unanchored: u64,
    /// Why reading stopped before the end of the file, if it did.
    pub read_error: Option<String>,
    pub first_time: Option<f64>,
    pub last_time: Option<f64>,
    /// What to do about `read_error`.
    #[serde(skip)]
    pub read_hint: Option<&'static str>,
}

impl Analysis {
    /// Whether part of the recording was lost: a line that is not a sample (or is over the
    /// line limit), corrupt compressed data. A cut last line and samples out of order are not
    /// losses (the one was in flight when the recorder stopped, the others were read).
    pub fn lost_some(&self) -> bool {
        !self.bad_lines.is_empty()
            || self.more_bad_lines > 0
            || !self.corrupt.is_empty()
            || self.unanchored > 0
    }
}

/// Bad lines listed at most; the rest are counted.
const BAD_LINES_LISTED: usize = 20;

/// Recording seconds between the samples at which the detectors that read the history run
/// on the [`Clock::Coarse`] clock (every sample's instant findings are judged at it): a
/// history finding's `since` is at most this much later than the monitor's, its `until` at
/// most this much earlier. Those detectors read windows of 5 to 30 minutes and hold a climb
/// for 120 s, so none raised at one sample is gone by the next of these; a process that
/// leaves sooner (an OOM, then its exit) is judged whole at its last sample.
pub(crate) const HISTORY_EVERY_SECS: f64 = 10.0;

/// When the detectors that read the history run, offline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Clock {
    /// Every [`HISTORY_EVERY_SECS`] of recording time, at the last sample, and at a sample
    /// after which one of its processes, or a process's feed, is gone.
    #[default]
    Coarse,
    /// At every sample, as the monitor runs them (`strata analyze --every-sample`).
    EverySample,
}

type Key = (FindingKind, Option<String>, Option<u32>);

fn key(f: &Finding) -> Key {
    (f.kind, f.device_uuid.clone(), f.pid)
}

/// Reads a recording and judges it as the monitor would have, sample by sample. Lines are
/// read and parsed on a thread of their own, ahead of the judging, within a budget of bytes
/// (a line limit's worth) so that large samples are not piled up. A read that stops early
/// (no line end, a zstd window that cannot be had, an I/O error) is said in `read_error`;
/// what came before it is judged.
pub fn analyze(lines: Lines, context_bytes: Option<u64>) -> Analysis {
    analyze_on(lines, context_bytes, Clock::Coarse)
}

/// [`analyze`], the detectors that read the history run on `clock`.
pub(crate) fn analyze_on(lines: Lines, context_bytes: Option<u64>, clock: Clock) -> Analysis {
    analyze_observing(lines, context_bytes, clock, |_| ControlFlow::Continue(()))
}

/// [`analyze_on`], each sample handed to `observe` as it is judged, in the order read, with
/// what the pipeline derived from it (its layers, the findings of that instant): how
/// `strata export` tables a recording in the same pass. Judging stops where `observe`
/// breaks (the last sample is then not judged whole).
pub(crate) fn analyze_observing(
    mut lines: Lines,
    context_bytes: Option<u64>,
    clock: Clock,
    mut observe: impl FnMut(&Observed) -> ControlFlow<()>,
) -> Analysis {
    let budget = budget::Budget::new(crate::recording::LINE_LIMIT as u64);
    let (send, receive) = std::sync::mpsc::sync_channel(64);
    // Samples judged go back to the reading thread to be freed there, where they were
    // allocated: freed on the judging thread, each block would go back to the other
    // thread's arena under its lock, and the two threads would contend for it.
    let (spent, returned) = std::sync::mpsc::sync_channel::<Spent>(64);
    std::thread::scope(|scope| {
        let reader = {
            let budget = &budget;
            std::thread::Builder::new()
                .name("strata-analyze-read".into())
                .spawn_scoped(scope, move || {
                    // The feeds attached to the samples given back, attached again to those
                    // read next, their buffers reused.
                    let mut feeds = Vec::new();
                    // The layers of each sample the judging takes in, worked out here: the
                    // context estimates learn from the samples alone, in the judging's order
                    // (those it skips, out of order, are skipped here too).
                    let mut accountant = crate::pipeline::Accountant::new(context_bytes);
                    let mut last_time = f64::NEG_INFINITY;
                    loop {
                        // Decoded into next, their buffers reused (those the decoder does
                        // not keep are freed).
                        for (mut sample, attachment, account) in returned.try_iter() {
                            drop((attachment, account));
                            crate::accounting::attach::take_feeds(&mut sample, &mut feeds);
                            lines.recycle(Box::new(sample));
                        }
                        let mut item = lines.next_line();
                        let weight = lines.last_line_bytes();
                        let last = !matches!(item, Ok(Some(_)));
                        // Matching feeds to processes needs the sample alone: done here, beside
                        // the judging.
                        let attached = match &mut item {
                            Ok(Some((_, Line::Sample(sample)))) => {
                                let mut prepared =
                                    crate::pipeline::prepare_reusing(sample, &mut feeds);
                                if in_order(sample.time, &mut last_time) {
                                    accountant.account(sample, &mut prepared);
                                }
                                Some(prepared)
                            }
                            _ => None,
                        };
                        if !budget.take(weight)
                            || send.send((item, weight, attached)).is_err()
                            || last
                        {
                            return;
                        }
                    }
                })
        };
        let mut analysis = Analysis::default();
        match reader {
            Ok(_) => {
                let closed = budget.closer();
                judge(
                    receive.iter().map(|(item, weight, attached)| {
                        budget.give(weight);
                        (item, attached)
                    }),
                    context_bytes,
                    clock,
                    &mut analysis,
                    &mut observe,
                    // Not waited for: when the reader is behind (or gone), freed here.
                    &mut |s| drop(spent.try_send(s)),
                );
                drop(closed);
            }
            Err(e) => analysis.read_error = Some(format!("cannot start reading: {e}")),
        }
        analysis
    })
}

type Attached = Option<crate::pipeline::Prepared>;

/// What a sample judged leaves that the reading thread allocated.
type Spent = (
    crate::sample::NodeSample,
    crate::accounting::attach::Attachment,
    crate::accounting::NodeAccount,
);

/// Whether a sample at `time` comes after the last taken in (`last`, then moved to it): one
/// not later (out of order, or repeated) or not finite is skipped.
fn in_order(time: f64, last: &mut f64) -> bool {
    if !time.is_finite() || time <= *last {
        return false;
    }
    *last = time;
    true
}

fn judge(
    lines: impl Iterator<Item = (Result<Option<(u64, Line)>, ReadError>, Attached)>,
    context_bytes: Option<u64>,
    clock: Clock,
    analysis: &mut Analysis,
    observe: &mut dyn FnMut(&Observed) -> ControlFlow<()>,
    spent: &mut dyn FnMut(Spent),
) {
    let mut pipeline = Pipeline::new(context_bytes);
    // Nothing this pass shows reads a headroom: a warm-up verdict works out its own.
    pipeline.headrooms = false;
    let mut episodes: Vec<Episode> = Vec::new();
    // Per finding, its latest episode: where a finding raised again goes on, while the
    // monitor's tracker still holds its `since`.
    let mut latest: std::collections::HashMap<Key, usize> = Default::default();
    let mut last_time = f64::NEG_INFINITY;
    // The history's detectors last ran at this time's step of the clock.
    let mut judged_step = f64::NEG_INFINITY;
    // One sample held back: the last is judged whole, and only the next tells which it is.
    let mut held: Option<(crate::sample::NodeSample, Attached)> = None;
    let mut take = |(sample, attached): (crate::sample::NodeSample, Attached),
                    whole: bool,
                    pipeline: &mut Pipeline,
                    episodes: &mut Vec<Episode>,
                    latest: &mut std::collections::HashMap<Key, usize>| {
        let time = sample.time;
        let step = (time / HISTORY_EVERY_SECS).floor();
        let history = whole || clock == Clock::EverySample || step != judged_step;
        if history {
            judged_step = step;
        }
        let observed = match attached {
            Some(prepared) => pipeline.ingest_prepared(sample, prepared, history),
            None => pipeline.ingest_judging(sample, history),
        };
        episode(&observed.findings, time, episodes, latest);
        // Whether its feeds were rebuilt from an older recording's derived form.
        let older = matches!(
            observed.feed_shape,
            crate::sample::derived::FeedShape::Derived(_)
        );
        let flow = observe(&observed);
        let Observed {
            sample,
            attachment,
            account,
            ..
        } = observed;
        spent((sample, attachment, account));
        (older, flow)
    };
    let mut stopped = false;
    for (item, attached) in lines {
        let (number, line) = match item {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                analysis.read_error = Some(e.to_string());
                analysis.read_hint = Some(e.hint());
                break;
            }
        };
        let sample = match line {
            Line::Sample(sample) => *sample,
            Line::Truncated => {
                analysis.truncated = true;
                continue;
            }
            Line::Corrupt(c) => {
                analysis.corrupt.push(c);
                continue;
            }
            Line::Unanchored => {
                analysis.unanchored += 1;
                continue;
            }
            Line::Bad(error) => {
                bad_line(analysis, number, error);
                continue;
            }
            Line::Oversized(bytes) => {
                let error = format!(
                    "{} long, over the {} line limit: skipped unread",
                    crate::units::bytes(bytes),
                    crate::units::bytes(crate::recording::LINE_LIMIT as u64)
                );
                bad_line(analysis, number, error);
                continue;
            }
        };
        if !in_order(sample.time, &mut last_time) {
            analysis.out_of_order += 1;
            continue;
        }
        let time = sample.time;
        analysis.samples += 1;
        analysis.first_time.get_or_insert(time);
        analysis.last_time = Some(time);
        let leaving = held
            .as_ref()
            .is_some_and(|(before, _)| someone_leaves(before, &sample));
        if let Some(before) = held.replace((sample, attached)) {
            let (older, flow) = take(before, leaving, &mut pipeline, &mut episodes, &mut latest);
            analysis.older_shape += u64::from(older);
            if flow.is_break() {
                stopped = true;
                break;
            }
        }
    }
    if let Some(last) = held.take().filter(|_| !stopped) {
        let (older, _) = take(last, true, &mut pipeline, &mut episodes, &mut latest);
        analysis.older_shape += u64::from(older);
    }
    // Open: raised at the last sample, as the monitor would show it there. An episode that
    // ended before (its condition gone) is closed, however recently.
    for e in &mut episodes {
        e.open = analysis.last_time == Some(e.until);
    }
    episodes.sort_by(|a, b| {
        a.since
            .total_cmp(&b.since)
            .then(b.severity.cmp(&a.severity))
            .then(a.pid.cmp(&b.pid))
    });
    analysis.findings = episodes;
}

/// Whether a process of `before`, or its feed, is gone at `after`: `before` is its last
/// chance to be judged whole.
fn someone_leaves(before: &crate::sample::NodeSample, after: &crate::sample::NodeSample) -> bool {
    fn who(p: &crate::sample::ProcessSample) -> (u32, Option<u64>, &str, bool) {
        (p.pid, p.start_time, &*p.device_uuid, p.feed.is_some())
    }
    // Mostly the same processes in the same order: no one left, and no set made.
    if before.processes.len() <= after.processes.len()
        && before
            .processes
            .iter()
            .zip(&after.processes)
            .all(|(b, a)| who(b) == who(a))
    {
        return false;
    }
    let here: std::collections::HashSet<_> = after.processes.iter().map(who).collect();
    before.processes.iter().any(|p| !here.contains(&who(p)))
}

/// The findings of the instant `time` into the episodes.
fn episode(
    findings: &[Finding],
    time: f64,
    episodes: &mut Vec<Episode>,
    latest: &mut std::collections::HashMap<Key, usize>,
) {
    {
        for f in findings {
            // The same episode while the tracker holds the finding (seen within its hold):
            // a reading that missed it does not start another. Otherwise a new one.
            let going_on = latest
                .get(&key(f))
                .copied()
                .filter(|&i| FindingTracker::holds(episodes[i].until, time));
            match going_on {
                Some(i) => {
                    let e = &mut episodes[i];
                    e.until = time;
                    e.severity = e.severity.max(f.severity);
                    e.message = f.message.clone();
                    e.evidence = f.evidence.clone();
                }
                None => {
                    latest.insert(key(f), episodes.len());
                    episodes.push(Episode {
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
                    });
                }
            }
        }
    }
}

fn bad_line(analysis: &mut Analysis, line: u64, error: String) {
    if analysis.bad_lines.len() < BAD_LINES_LISTED {
        analysis.bad_lines.push(BadLine { line, error });
    } else {
        analysis.more_bad_lines += 1;
    }
}

#[cfg(test)]
mod tests;

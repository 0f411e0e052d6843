//! `strata replay FILE`: the monitor driven by a recording. The replay source
//! ([`source`], on a thread of its own) plays the recording and answers seeks; this module
//! holds what it and the monitor's state (on the UI thread) share: what is played next
//! ([`Played`]), the replay clock (position, speed, pause), the seek asked for, what reading
//! the recording found (bad lines, samples out of order, a cut last line), and checkpoints
//! of the model that make a seek back cheap.
//!
//! The model at a position is what ingesting every sample up to it gives: a seek rebuilds it
//! from the latest checkpoint before the target (or from the start), never from a shortcut,
//! so the screen after a seek equals the screen of a straight playback to the same point.

use crate::pipeline::{Observed, Pipeline};
use crate::present::shown::{remember_last_known, LastKnown};
use crate::present::sort::SortMemory;
use crate::recording::{Line, Progress};
use crate::sample::NodeSample;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub mod source;

/// The replay speeds, in recording seconds per wall-clock second: ×¼ to ×64, doubling.
pub(crate) const SPEEDS: [f64; 9] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
/// The speed a replay starts at (×1).
pub(crate) const START_SPEED: usize = 2;
/// How far `←`/`→` move, in recording seconds.
pub(crate) const SEEK_STEP_SECS: f64 = 60.0;
/// Recording time between checkpoints of the model, at first (doubled when the budget is
/// reached).
pub(crate) const CHECKPOINT_SPACING_SECS: f64 = 600.0;
/// Bytes the checkpoints' histories may hold in all (their footprint at full capacity).
pub(crate) const CHECKPOINT_BUDGET_BYTES: usize = 512 << 20;
/// Recording time between [`Mark`]s, at first (doubled past [`MARKS_KEPT`]).
pub(crate) const MARK_SPACING_SECS: f64 = 30.0;
/// Marks kept at most (thinned out past it, as checkpoints are): a day at 30 s.
pub(crate) const MARKS_KEPT: usize = 2880;

/// Everything the monitor shows that a run of samples builds up: the pipeline (history,
/// findings' `since`, context estimates), the lost GPUs' last readings, the rows' settled
/// sort values, and the sample shown.
#[derive(Debug, Clone)]
pub struct Model {
    pub(crate) pipeline: Pipeline,
    pub(crate) last_known: HashMap<String, LastKnown>,
    pub(crate) sort_memory: SortMemory,
    pub(crate) current: Option<Observed>,
}

impl Model {
    pub(crate) fn new(context_bytes: Option<u64>) -> Self {
        Model {
            pipeline: Pipeline::new(context_bytes),
            last_known: HashMap::new(),
            sort_memory: SortMemory::default(),
            current: None,
        }
    }

    /// Takes in one sample as the monitor does when it shows it.
    pub(crate) fn ingest(&mut self, sample: NodeSample) {
        let observed = self.pipeline.ingest(sample);
        remember_last_known(&mut self.last_known, &observed.sample, &observed.account);
        self.sort_memory
            .observe(&observed.sample, &observed.account);
        self.current = Some(observed);
    }

    /// The time of the sample shown.
    pub fn time(&self) -> Option<f64> {
        self.current.as_ref().map(|o| o.sample.time)
    }

    /// Takes in one sample as far as the history and what the samples alone decide (the
    /// context estimates, the OOMs remembered): no detector runs, and nothing judged or
    /// shown changes. A seek rolls a checkpoint's history on so up to a [`Mark`], then
    /// sets what the mark holds.
    pub(crate) fn roll(&mut self, sample: NodeSample) {
        self.pipeline.take_in(sample);
    }

    /// What this model's judgement carries from sample to sample.
    pub(crate) fn judged(&self) -> Judged {
        Judged {
            tracker: self.pipeline.tracker.clone(),
            hold: self.pipeline.hold.clone(),
            warm_up: self.pipeline.warm_up.clone(),
            last_known: self.last_known.clone(),
            sort_memory: self.sort_memory.clone(),
        }
    }

    /// Sets what [`Model::judged`] took.
    pub(crate) fn set_judged(&mut self, judged: Judged) {
        let Judged {
            tracker,
            hold,
            warm_up,
            last_known,
            sort_memory,
        } = judged;
        self.pipeline.tracker = tracker;
        self.pipeline.hold = hold;
        self.pipeline.warm_up = warm_up;
        self.last_known = last_known;
        self.sort_memory = sort_memory;
    }
}

/// The part of a [`Model`] that judging each sample builds up, apart from the history and
/// from what the samples alone decide: the findings' `since` and the climbs held, the
/// warm-up verdicts said, the lost GPUs' last readings, the rows' settled sort values. A
/// few kilobytes, where a model with its history is megabytes.
#[derive(Debug, Clone)]
pub(crate) struct Judged {
    tracker: crate::detect::FindingTracker,
    hold: crate::detect::ClimbHold,
    warm_up: crate::detect::WarmUp,
    last_known: HashMap<String, LastKnown>,
    sort_memory: SortMemory,
}

/// A mark: what a straight playback had judged just before the sample on line `line`
/// (at `time`). A seek takes the checkpoint before its target, rolls its history on to
/// the latest mark after it without judging ([`Model::roll`]), sets the mark's judgement,
/// and judges every sample from there: the model it reaches is the straight playback's,
/// for the cost of judging a few samples rather than every one since the checkpoint.
#[derive(Debug)]
pub struct Mark {
    pub(crate) time: f64,
    pub(crate) line: u64,
    pub(crate) judged: Judged,
}

/// What a replay hands the monitor next: a sample when its time comes on the replay clock,
/// or, for a seek, the model rebuilt up to its target, shown instead of everything before.
#[derive(Debug)]
pub(crate) enum Played {
    Sample(Box<NodeSample>),
    Rebuilt(Box<Model>),
}

/// Where a seek goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SeekTarget {
    /// The last sample at or before this recording time (the first, when it is earlier).
    At(f64),
    /// The recording's last sample.
    End,
}

/// The replay clock: recording time runs at `speed` from `anchor` (a recording time, at a
/// wall-clock instant) unless paused.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    pub(crate) speed: usize,
    pub(crate) paused: bool,
    anchor: Option<(f64, Instant)>,
}

impl Clock {
    fn new() -> Self {
        Clock {
            speed: START_SPEED,
            paused: false,
            anchor: None,
        }
    }

    /// Recording seconds per wall-clock second.
    pub(crate) fn rate(&self) -> f64 {
        SPEEDS[self.speed.min(SPEEDS.len() - 1)]
    }

    /// The recording time at `now` (`None` before the first sample).
    pub(crate) fn at(&self, now: Instant) -> Option<f64> {
        let (time, since) = self.anchor?;
        if self.paused {
            return Some(time);
        }
        Some(time + now.saturating_duration_since(since).as_secs_f64() * self.rate())
    }

    /// Sets the recording time to `time` at `now`.
    pub(crate) fn set(&mut self, time: f64, now: Instant) {
        self.anchor = Some((time, now));
    }

    /// How long, in wall-clock time, until the recording time reaches `time` (`None`:
    /// never, while paused).
    pub(crate) fn until(&self, time: f64, now: Instant) -> Option<Duration> {
        if self.paused {
            return None;
        }
        let at = self.at(now)?;
        Some(Duration::from_secs_f64(
            ((time - at) / self.rate()).clamp(0.0, 3600.0),
        ))
    }

    /// Re-anchors at `now`, then applies `change`: the recording time so far is kept.
    fn change(&mut self, now: Instant, change: impl FnOnce(&mut Clock)) {
        if let Some(at) = self.at(now) {
            self.anchor = Some((at, now));
        }
        change(self);
    }
}

/// What reading the recording found so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// Lines that were not a sample (or over the line limit), and the number of the last.
    pub(crate) bad_lines: u64,
    pub(crate) last_bad_line: Option<u64>,
    /// Of those, lines over the line limit, skipped unread.
    pub(crate) oversized: u64,
    /// Samples not later than the one before: skipped.
    pub(crate) out_of_order: u64,
    /// The last line was cut short (or a compressed frame ended early).
    pub truncated: bool,
    /// Corrupt compressed data: how many times, where the last was found, and the
    /// compressed bytes skipped in all.
    pub(crate) corrupt: u64,
    pub(crate) last_corrupt_at: Option<u64>,
    pub(crate) corrupt_bytes: u64,
    /// Format 2: samples skipped because their keyframe was lost.
    pub(crate) unanchored: u64,
}

impl Reading {
    /// Counts a line that is not a sample to play (a sample out of order included), line
    /// `number`.
    pub(crate) fn count(&mut self, number: u64, line: &Line) {
        match line {
            Line::Sample(_) => self.out_of_order += 1,
            Line::Bad(_) => {
                self.bad_lines += 1;
                self.last_bad_line = Some(number);
            }
            Line::Oversized(_) => {
                self.bad_lines += 1;
                self.oversized += 1;
                self.last_bad_line = Some(number);
            }
            Line::Truncated => self.truncated = true,
            Line::Unanchored => self.unanchored += 1,
            Line::Corrupt(c) => {
                self.corrupt += 1;
                self.last_corrupt_at = Some(c.at);
                // Skipped to the end of the file: its size is not known here, what was
                // skipped to the next frame is.
                self.corrupt_bytes += c.resumed_at.map_or(0, |r| r.saturating_sub(c.at));
            }
        }
    }
}

/// What the monitor shows of the replay: a copy taken before each frame.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayStatus {
    pub(crate) speed: f64,
    pub(crate) paused: bool,
    /// The recording's first sample's time.
    pub first_time: f64,
    /// Its last sample's time, once the whole file has been read through.
    pub last_time: Option<f64>,
    /// A seek under way: where to, and how far it has come (0 to 1).
    pub(crate) seeking: Option<(SeekTarget, f64)>,
    /// The playback has reached the recording's last sample.
    pub(crate) ended: bool,
    pub reading: Reading,
    /// The first reading of the whole file (for its length), while it has run past a
    /// second: bytes read, of the file's size.
    pub(crate) indexing: Option<(u64, Option<u64>)>,
}

impl Checkpoint {
    /// Bytes of history it holds beyond the checkpoint before it (what it shares with that
    /// one is counted there).
    pub fn footprint(&self) -> usize {
        self.footprint
    }
}

/// What a seek did to rebuild the model: where it started, and how many samples it read
/// through unkept, took in unjudged and judged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rebuilt {
    /// The time of the checkpoint it started from (`None`: the start).
    pub checkpoint: Option<f64>,
    /// The keyframe's line it started to read at (`None`: the file's start).
    pub keyframe: Option<u64>,
    /// Lines read and let go up to the checkpoint's (within the keyframe's frame).
    pub skipped: u64,
    /// Samples taken in without judging, up to a mark.
    pub rolled: u64,
    /// Samples judged (ingested whole).
    pub judged: u64,
}

/// One checkpoint: the model after the sample at `time`.
#[derive(Debug)]
pub struct Checkpoint {
    pub(crate) time: f64,
    /// The line of that sample, where known (else the replay's index of lines tells).
    pub(crate) line: Option<u64>,
    pub(crate) model: Model,
    footprint: usize,
}

/// Where in `list` (by time, oldest first) an item at `time` goes, unless one lies within
/// `spacing` of it.
fn room_at<T>(list: &[Arc<T>], time: f64, spacing: f64, time_of: fn(&T) -> f64) -> Option<usize> {
    let at = list.partition_point(|x| time_of(x) < time);
    let near = |i: usize| {
        list.get(i)
            .is_some_and(|x| (time_of(x) - time).abs() < spacing)
    };
    (!near(at) && !at.checked_sub(1).is_some_and(near)).then_some(at)
}

/// Keeps the first, third, fifth... of `list`.
fn every_other<T>(list: &mut Vec<T>) {
    let mut index = 0;
    list.retain(|_| {
        index += 1;
        index % 2 == 1
    });
}

/// Counts again what the checkpoints `which` hold beyond the one before each.
fn recount(checkpoints: &mut [Arc<Checkpoint>], which: std::ops::Range<usize>) {
    for i in which.start..which.end.min(checkpoints.len()) {
        let history = &checkpoints[i].model.pipeline.history;
        let footprint = match i.checked_sub(1) {
            Some(before) => history.footprint_beside(&checkpoints[before].model.pipeline.history),
            None => history.footprint(),
        };
        if let Some(c) = Arc::get_mut(&mut checkpoints[i]) {
            c.footprint = footprint;
        } else {
            // Held by a seek under way: a copy with the new count (its model's history is
            // shared, block by block, not copied again).
            let c = &checkpoints[i];
            checkpoints[i] = Arc::new(Checkpoint {
                time: c.time,
                line: c.line,
                model: c.model.clone(),
                footprint,
            });
        }
    }
}

#[derive(Debug)]
pub struct Shared {
    pub(crate) clock: Clock,
    /// The seek asked for and not yet begun.
    pub(crate) seek: Option<SeekTarget>,
    /// The seek being done, and its progress.
    pub(crate) seeking: Option<(SeekTarget, f64)>,
    pub(crate) first_time: f64,
    pub(crate) last_time: Option<f64>,
    pub(crate) ended: bool,
    pub(crate) reading: Reading,
    /// The first reading of the whole file, under way: how far it has come, since when.
    pub(crate) indexing: Option<(Progress, Instant)>,
    /// Oldest first, at least `spacing` apart in recording time.
    pub checkpoints: Vec<Arc<Checkpoint>>,
    spacing: f64,
    /// Oldest first, at least `mark_spacing` apart in recording time.
    pub marks: Vec<Arc<Mark>>,
    mark_spacing: f64,
    /// Format 2: the lines that are keyframes beginning a zstd frame, and the frame's file
    /// offset, in order: where a seek starts to read.
    pub keyframes: Vec<(u64, u64)>,
    /// What the last seek did.
    pub rebuilt: Option<Rebuilt>,
    /// The monitor has gone: the source stops.
    pub(crate) closed: bool,
}

/// The replay's shared state, and the condition the source waits on (a sample's time to
/// come, or a key that changes the clock or asks for a seek).
#[derive(Debug)]
pub struct Control {
    shared: Mutex<Shared>,
    changed: Condvar,
}

impl Control {
    /// The control of a recording whose first sample is at `first_time`.
    pub(crate) fn new(first_time: f64) -> Arc<Self> {
        Arc::new(Control {
            shared: Mutex::new(Shared {
                clock: Clock::new(),
                seek: None,
                seeking: None,
                first_time,
                last_time: None,
                ended: false,
                reading: Reading::default(),
                indexing: None,
                checkpoints: Vec::new(),
                spacing: CHECKPOINT_SPACING_SECS,
                marks: Vec::new(),
                mark_spacing: MARK_SPACING_SECS,
                keyframes: Vec::new(),
                rebuilt: None,
                closed: false,
            }),
            changed: Condvar::new(),
        })
    }

    pub fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic on the other side leaves the data as it was: keep using it.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the shared state and wakes the source.
    pub(crate) fn update<T>(&self, change: impl FnOnce(&mut Shared) -> T) -> T {
        let out = change(&mut self.lock());
        self.changed.notify_all();
        out
    }

    /// Waits for a change, at most `timeout` (forever: `None`).
    pub(crate) fn wait<'a>(
        &self,
        guard: MutexGuard<'a, Shared>,
        timeout: Option<Duration>,
    ) -> MutexGuard<'a, Shared> {
        match timeout {
            Some(t) => {
                self.changed
                    .wait_timeout(guard, t)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => self.changed.wait(guard).unwrap_or_else(|e| e.into_inner()),
        }
    }

    /// What the monitor shows.
    pub fn status(&self) -> ReplayStatus {
        let s = self.lock();
        ReplayStatus {
            speed: s.clock.rate(),
            paused: s.clock.paused,
            first_time: s.first_time,
            last_time: s.last_time,
            seeking: s.seek.map(|t| (t, 0.0)).or(s.seeking),
            ended: s.ended,
            reading: s.reading.clone(),
            indexing: s
                .indexing
                .as_ref()
                .filter(|(_, since)| since.elapsed() >= crate::recording::progress::QUIET_FOR)
                .map(|(p, _)| (p.read(), p.total())),
        }
    }

    /// Pauses or resumes the replay clock.
    pub(crate) fn toggle_pause(&self) {
        self.update(|s| s.clock.change(Instant::now(), |c| c.paused = !c.paused));
    }

    /// One speed step faster (`+1`) or slower (`-1`), within [`SPEEDS`].
    pub(crate) fn step_speed(&self, step: isize) {
        self.update(|s| {
            s.clock.change(Instant::now(), |c| {
                c.speed = c.speed.saturating_add_signed(step).min(SPEEDS.len() - 1)
            })
        });
    }

    /// Asks for a seek; a later one replaces one not yet done.
    pub(crate) fn seek(&self, target: SeekTarget) {
        self.update(|s| s.seek = Some(target));
    }

    /// The monitor has gone.
    pub fn close(&self) {
        self.update(|s| s.closed = true);
    }

    /// Whether a checkpoint at `time` would be kept: none lies within the spacing of it.
    pub(crate) fn wants_checkpoint(&self, time: f64) -> bool {
        let s = self.lock();
        !s.checkpoints
            .iter()
            .any(|c| (c.time - time).abs() < s.spacing)
    }

    /// Keeps a copy of `model`, the model after the sample on line `line`, as a checkpoint,
    /// unless one lies within the spacing of its time; thins the checkpoints out (every other
    /// one, twice the spacing) past the budget.
    pub(crate) fn offer_checkpoint_at(&self, model: &Model, line: u64) {
        match model.time() {
            Some(time) if self.wants_checkpoint(time) => {
                self.keep_checkpoint(model.clone(), Some(line))
            }
            _ => {}
        }
    }

    /// Keeps `model` as a checkpoint (see [`Control::offer_checkpoint_at`]); `line`, where
    /// known, is its sample's line.
    ///
    /// A checkpoint's history shares the blocks it has in common with the others' (those
    /// written before both), so each is counted for what it holds beyond the one before it.
    pub(crate) fn keep_checkpoint(&self, model: Model, line: Option<u64>) {
        let Some(time) = model.time() else { return };
        let mut s = self.lock();
        let Some(at) = room_at(&s.checkpoints, time, s.spacing, |c| c.time) else {
            return;
        };
        s.checkpoints.insert(
            at,
            Arc::new(Checkpoint {
                time,
                line,
                model,
                footprint: 0,
            }),
        );
        recount(&mut s.checkpoints, at..(at + 2));
        while s.checkpoints.iter().map(|c| c.footprint).sum::<usize>() > CHECKPOINT_BUDGET_BYTES
            && s.checkpoints.len() > 1
        {
            s.spacing *= 2.0;
            every_other(&mut s.checkpoints);
            let all = 0..s.checkpoints.len();
            recount(&mut s.checkpoints, all);
        }
    }

    /// The latest checkpoint at or before `time`.
    pub(crate) fn checkpoint_before(&self, time: f64) -> Option<Arc<Checkpoint>> {
        let s = self.lock();
        s.checkpoints.iter().rev().find(|c| c.time <= time).cloned()
    }

    /// Whether a mark at `time` would be kept: none lies within the spacing of it.
    pub(crate) fn wants_mark(&self, time: f64) -> bool {
        let s = self.lock();
        match s.marks.last() {
            Some(last) if time >= last.time => time - last.time >= s.mark_spacing,
            _ => !s
                .marks
                .iter()
                .any(|m| (m.time - time).abs() < s.mark_spacing),
        }
    }

    /// Keeps `judged`, what `model` had judged before the sample on line `line` at `time`,
    /// as a mark, unless one lies within the spacing of it; thins the marks out (every other
    /// one, twice the spacing) past [`MARKS_KEPT`].
    pub(crate) fn keep_mark(&self, time: f64, line: u64, judged: Judged) {
        let mut s = self.lock();
        let Some(at) = room_at(&s.marks, time, s.mark_spacing, |m| m.time) else {
            return;
        };
        s.marks.insert(at, Arc::new(Mark { time, line, judged }));
        if s.marks.len() > MARKS_KEPT {
            s.mark_spacing *= 2.0;
            every_other(&mut s.marks);
        }
    }

    /// The latest mark at or before `time` that lies after line `after`.
    pub(crate) fn mark_before(&self, time: f64, after: u64) -> Option<Arc<Mark>> {
        let s = self.lock();
        s.marks
            .iter()
            .rev()
            .take_while(|m| m.line > after)
            .find(|m| m.time <= time)
            .cloned()
    }

    /// Notes that line `line` is a keyframe beginning the zstd frame at `offset`.
    pub(crate) fn keyframe(&self, line: u64, offset: u64) {
        let mut s = self.lock();
        if s.keyframes.last().is_none_or(|&(l, _)| l < line) {
            s.keyframes.push((line, offset));
        }
    }

    /// The latest keyframe at or before line `line`.
    pub(crate) fn keyframe_before(&self, line: u64) -> Option<(u64, u64)> {
        let s = self.lock();
        let at = s.keyframes.partition_point(|&(l, _)| l <= line);
        at.checked_sub(1).map(|i| s.keyframes[i])
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_reading;

//! The replay source: a recording's samples, each when its time comes on the replay clock
//! (the recorded time to the next one, divided by the speed), and the model rebuilt on a
//! seek ([`ReplaySource::play`]). It runs on a thread of its own, so a long seek never holds
//! up the keys. As a [`Source`] it hands out the recording's samples at once, in order.

use super::{Control, Model, Played, Reading, Rebuilt, SeekTarget};
use crate::recording::{Line, Lines, ReadError};
use crate::sample::NodeSample;
use crate::source::{Source, SourceError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Why a recording cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot read the recording {path}: {error}")]
    Unreadable { path: String, error: ReadError },
    #[error("the recording {path} is {kind}, not a regular file: replay reads it again to seek")]
    NotAFile { path: String, kind: &'static str },
    #[error("the recording {path} holds no sample ({detail})")]
    NoSample { path: String, detail: String },
    #[error("replay reads a file, not standard input: it reads it again to seek, and the keys come from the terminal")]
    Stdin,
}

impl OpenError {
    pub fn hint(&self) -> &'static str {
        match self {
            OpenError::Unreadable {
                error: ReadError::Io(_),
                ..
            } => {
                "check the path; record one with `strata record FILE`, or `strata snapshot --json --count N > FILE`"
            }
            OpenError::Unreadable { error, .. } => error.hint(),
            OpenError::NotAFile { .. } => {
                "save it to a file first (cat PIPE > FILE) and replay that; `strata analyze -` reads a pipe"
            }
            OpenError::NoSample { .. } => {
                "a recording is what `strata record FILE` (format 2) or `strata snapshot --json --count N > FILE` (JSON lines) writes"
            }
            OpenError::Stdin => "save the recording to a file and name it: strata replay FILE",
        }
    }
}

/// A recording played back.
pub struct ReplaySource {
    path: PathBuf,
    label: String,
    context_bytes: Option<u64>,
    control: Arc<Control>,
    lines: Lines,
    /// The first sample, to send at once.
    first: Option<NodeSample>,
    /// The next sample in order, read ahead and not yet sent.
    pending: Option<NodeSample>,
    /// The recording has been read to its end (since the last seek).
    at_end: bool,
    /// The time of the last sample taken (sent or ingested): a sample not later is skipped.
    last_time: f64,
    /// Each sample taken, by time, with its line number: where to read on from a checkpoint.
    index: Vec<(f64, u64)>,
    /// Lines up to this one are counted in the shared [`Reading`]: read again after a seek,
    /// they are not counted twice.
    counted_to: u64,
    /// The offset of the last corruption counted, likewise.
    counted_corrupt: Option<u64>,
}

impl ReplaySource {
    /// Opens the recording at `path` and reads up to its first sample: an unreadable file,
    /// or one without a sample, is refused here, before the terminal is taken. The end of the
    /// recording is found by a thread of its own, for the header's length.
    pub fn open(path: &Path, context_bytes: Option<u64>) -> Result<ReplaySource, OpenError> {
        if path.as_os_str() == "-" {
            return Err(OpenError::Stdin);
        }
        let shown = path.display().to_string();
        let unreadable = |error| OpenError::Unreadable {
            path: shown.clone(),
            error,
        };
        // Opening a FIFO would block until a writer came, and a device may never end: only
        // a regular file is read (the check follows a symbolic link, as opening does).
        let meta = std::fs::metadata(path).map_err(|e| unreadable(e.into()))?;
        if !meta.is_file() {
            return Err(OpenError::NotAFile {
                path: crate::text::clean(&shown).into_owned(),
                kind: crate::recording::file_kind(&meta.file_type()),
            });
        }
        let mut lines = Lines::open(path).map_err(unreadable)?;
        let _progress = crate::recording::progress::on_stderr(lines.progress().clone(), &shown);
        let mut reading = Reading::default();
        let first = loop {
            match lines.next_line().map_err(unreadable)? {
                Some((_, Line::Sample(s))) if s.time.is_finite() => break *s,
                Some((n, line)) => reading.count(n, &line),
                None => {
                    let mut detail = match (lines.number(), reading.bad_lines) {
                        (0, _) => "it is empty".to_string(),
                        (n, 0) => format!("{n} blank line(s)"),
                        (n, bad) => format!(
                            "{n} line(s), {bad} not a sample, the last at line {}",
                            reading.last_bad_line.unwrap_or(n)
                        ),
                    };
                    if let Some(at) = reading.last_corrupt_at {
                        detail += &format!(
                            "; corrupt compressed data at byte {at}, {} skipped",
                            crate::units::bytes(reading.corrupt_bytes)
                        );
                    }
                    return Err(OpenError::NoSample {
                        path: shown,
                        detail,
                    });
                }
            }
        };
        drop(_progress);
        let control = Control::new(first.time);
        control.update(|s| s.reading = reading.clone());
        spawn_indexer(path.to_path_buf(), context_bytes, control.clone());
        let name = path
            .file_name()
            .map_or_else(|| shown.clone(), |n| n.to_string_lossy().into_owned());
        Ok(ReplaySource {
            path: path.to_path_buf(),
            label: format!("replay {}", crate::text::clean(&name)),
            context_bytes,
            control,
            counted_to: lines.number(),
            counted_corrupt: reading.last_corrupt_at,
            index: vec![(first.time, lines.number())],
            last_time: first.time,
            lines,
            first: Some(first),
            pending: None,
            at_end: false,
        })
    }

    /// What the monitor's state shares with this source.
    pub fn control(&self) -> Arc<Control> {
        self.control.clone()
    }

    /// The next sample in order, counting what is skipped on the way (once per line, and
    /// once per corruption, however often a seek reads it again).
    fn read_sample(&mut self) -> Result<Option<NodeSample>, ReadError> {
        loop {
            let Some((number, line)) = self.lines.next_line()? else {
                if self.lines.cut() {
                    self.control.update(|s| s.reading.truncated = true);
                }
                return Ok(None);
            };
            let fresh = match &line {
                Line::Corrupt(c) => self.counted_corrupt.is_none_or(|at| c.at > at),
                _ => number > self.counted_to,
            };
            if let Line::Corrupt(c) = &line {
                self.counted_corrupt = Some(self.counted_corrupt.map_or(c.at, |at| at.max(c.at)));
            } else {
                self.counted_to = self.counted_to.max(number);
            }
            match line {
                Line::Sample(s) if s.time.is_finite() && s.time > self.last_time => {
                    self.last_time = s.time;
                    if fresh {
                        self.index.push((s.time, number));
                    }
                    return Ok(Some(*s));
                }
                _ if !fresh => {}
                line => self.control.update(|s| s.reading.count(number, &line)),
            }
        }
    }

    fn io_error(&self, e: impl std::fmt::Display) -> SourceError {
        SourceError::Sample {
            detail: format!("reading {}: {e}", self.path.display()),
        }
    }

    /// Reads ahead one sample, or finds the end.
    fn fill(&mut self) -> Result<(), SourceError> {
        if self.pending.is_some() || self.at_end {
            return Ok(());
        }
        let read = self.read_sample().map_err(|e| self.io_error(e));
        // A recording that cannot be read on is at its end: said once, not at every call.
        if read.is_err() {
            self.at_end = true;
        }
        match read? {
            Some(s) => self.pending = Some(s),
            None => {
                self.at_end = true;
                let last = self.last_time;
                self.control.update(|s| {
                    s.ended = true;
                    s.last_time = Some(s.last_time.map_or(last, |l| l.max(last)));
                });
            }
        }
        Ok(())
    }

    /// Rebuilds the model at `target`: from the latest checkpoint before it (or the start),
    /// every sample up to it taken in order, as a straight playback would have: those before
    /// the latest mark after the checkpoint taken in unjudged, the mark's judgement set, and
    /// the rest judged. A newer seek asked for meanwhile takes over: further on, it goes on
    /// from here; earlier (or before the mark is reached), it starts again.
    pub fn rebuild(&mut self, mut target: SeekTarget) -> Result<Model, SourceError> {
        // Cleared when a mark's sample was not met (the file changed since it was read):
        // then every sample from the checkpoint is judged.
        let mut use_marks = true;
        'restart: loop {
            let (last_known, first_time) = {
                let s = self.control.lock();
                (s.last_time, s.first_time)
            };
            let until = match target {
                SeekTarget::At(t) => t,
                SeekTarget::End => f64::INFINITY,
            };
            let checkpoint = self.control.checkpoint_before(until).and_then(|c| {
                let line = c.line.or_else(|| {
                    let at = self.index.partition_point(|(t, _)| *t < c.time);
                    let &(time, line) = self.index.get(at)?;
                    (time == c.time).then_some(line)
                })?;
                Some((c, line))
            });
            let (mut model, line) = match checkpoint {
                Some((c, line)) => (c.model.clone(), line),
                None => (Model::new(self.context_bytes), 0),
            };
            // Up to this mark the samples are only taken in, unjudged; from it on, judged.
            let mut mark = self.control.mark_before(until, line).filter(|_| use_marks);
            let mut rebuilt = Rebuilt {
                checkpoint: model.time(),
                ..Rebuilt::default()
            };
            (self.lines, rebuilt.keyframe) = self.lines_from(line + 1)?;
            let start = self.lines.number();
            self.lines.skip_to(line).map_err(|e| self.io_error(e))?;
            rebuilt.skipped = self.lines.number() - start;
            self.last_time = model.time().unwrap_or(f64::NEG_INFINITY);
            self.pending = None;
            self.first = None;
            self.at_end = false;
            let from = model.time().unwrap_or(first_time);
            let goal = until.min(last_known.unwrap_or(f64::INFINITY));
            let mut reported = Instant::now();
            loop {
                let newer = self.control.lock().seek.take();
                if let Some(newer) = newer {
                    // On the way to a mark, the model is not yet one to go on from.
                    let further = mark.is_none()
                        && match newer {
                            SeekTarget::At(t) => model.time().is_some_and(|m| t >= m),
                            SeekTarget::End => true,
                        };
                    target = newer;
                    self.control.update(|s| s.seeking = Some((newer, 0.0)));
                    if !further {
                        continue 'restart;
                    }
                }
                let until = match target {
                    SeekTarget::At(t) => t,
                    SeekTarget::End => f64::INFINITY,
                };
                self.fill()?;
                let Some(sample) = self.pending.take() else {
                    break;
                };
                if sample.time > until && model.current.is_some() {
                    self.pending = Some(sample);
                    break;
                }
                if let Some(m) = &mark {
                    if self.lines.number() < m.line {
                        model.roll(sample);
                        rebuilt.rolled += 1;
                        continue;
                    }
                    model.set_judged(m.judged.clone());
                    mark = None;
                }
                model.ingest(sample);
                rebuilt.judged += 1;
                self.control
                    .offer_checkpoint_at(&model, self.lines.number());
                if reported.elapsed().as_millis() >= 50 {
                    reported = Instant::now();
                    let done = model.time().unwrap_or(from);
                    let progress = if goal.is_finite() && goal > from {
                        ((done - from) / (goal - from)).clamp(0.0, 1.0)
                    } else {
                        0.0
                    };
                    self.control
                        .update(|s| s.seeking = Some((target, progress)));
                }
            }
            if mark.is_some() {
                use_marks = false;
                continue 'restart;
            }
            let shown = model.time().unwrap_or(first_time);
            let at_end = self.at_end;
            self.control.update(|s| {
                s.seeking = None;
                s.rebuilt = Some(rebuilt);
                s.ended = at_end;
                s.clock.set(shown, Instant::now());
            });
            return Ok(model);
        }
    }
}

impl ReplaySource {
    /// The recording read from line `line` or before it: from the latest keyframe at or
    /// before it where one is known (format 2; its line is said), else from the start.
    fn lines_from(&self, line: u64) -> Result<(Lines, Option<u64>), SourceError> {
        if let Some((at, offset)) = self.control.keyframe_before(line) {
            if let Ok(lines) = Lines::open_at(&self.path, offset, at - 1) {
                return Ok((lines, Some(at)));
            }
        }
        Ok((Lines::open(&self.path).map_err(|e| self.io_error(e))?, None))
    }
}

/// Reads the whole recording once on a thread of its own, ahead of the playback, as a
/// playback would: it finds the last sample's time (the header's "of" length) and leaves
/// checkpoints of the model along the way, so that a seek anywhere, even the first one,
/// starts near its target. What it skips is not counted: the playback counts what it meets.
fn spawn_indexer(path: PathBuf, context_bytes: Option<u64>, control: Arc<Control>) {
    let control_done = control.clone();
    let index = move || -> Result<(), ReadError> {
        let mut lines = Lines::open(&path)?;
        control.update(|s| s.indexing = Some((lines.progress().clone(), Instant::now())));
        let mut model = Model::new(context_bytes);
        let mut last = f64::NEG_INFINITY;
        while let Some((number, line)) = lines.next_line()? {
            if let Some(offset) = lines.keyframe_at() {
                control.keyframe(number, offset);
            }
            let Line::Sample(sample) = line else { continue };
            if !sample.time.is_finite() || sample.time <= last {
                continue;
            }
            last = sample.time;
            if control.wants_mark(sample.time) {
                control.keep_mark(sample.time, number, model.judged());
            }
            model.ingest(*sample);
            control.offer_checkpoint_at(&model, number);
            if control.lock().closed {
                return Ok(());
            }
        }
        if last.is_finite() {
            control.update(|s| s.last_time = Some(s.last_time.map_or(last, |l| l.max(last))));
        }
        Ok(())
    };
    let index = move || {
        let result = index();
        control_done.update(|s| s.indexing = None);
        result
    };
    let _ = std::thread::Builder::new()
        .name("strata-replay-index".into())
        .spawn(move || {
            // Without it seeks start further back and the header says less; no more.
            let _ = index();
        });
}

impl ReplaySource {
    /// What the monitor shows next: the next sample when its time comes on the replay clock,
    /// or, when a seek was asked for, the model rebuilt at its target. At the end of the
    /// recording it waits for a seek. A seek that fails is said once, and the replay then
    /// waits at the end.
    pub(crate) fn play(&mut self) -> Result<Played, SourceError> {
        if let Some(first) = self.first.take() {
            let time = first.time;
            self.control.update(|s| s.clock.set(time, Instant::now()));
            return Ok(Played::Sample(Box::new(first)));
        }
        loop {
            self.fill()?;
            let mut shared = self.control.lock();
            if let Some(target) = shared.seek.take() {
                shared.seeking = Some((target, 0.0));
                drop(shared);
                return match self.rebuild(target) {
                    Ok(model) => Ok(Played::Rebuilt(Box::new(model))),
                    Err(e) => {
                        // Said once; the replay waits at the end for another seek.
                        self.at_end = true;
                        self.control.update(|s| s.seeking = None);
                        Err(e)
                    }
                };
            }
            let Some(time) = self.pending.as_ref().map(|s| s.time) else {
                // At the end: wait for a seek.
                drop(self.control.wait(shared, None));
                continue;
            };
            let now = Instant::now();
            match shared.clock.until(time, now) {
                Some(wait) if wait.is_zero() => {
                    // Far behind (a slow machine at a high speed): catch the clock up with the
                    // samples rather than run ahead of them.
                    let behind = shared.clock.at(now).map_or(0.0, |at| at - time);
                    if behind > shared.clock.rate() {
                        shared.clock.set(time, now);
                    }
                    drop(shared);
                    if let Some(sample) = self.pending.take() {
                        return Ok(Played::Sample(Box::new(sample)));
                    }
                }
                wait => drop(self.control.wait(shared, wait)),
            }
        }
    }
}

impl Source for ReplaySource {
    /// The recording's next sample, at once (the monitor asks [`ReplaySource::play`], which
    /// keeps the replay's time); an error at its end.
    fn sample(&mut self) -> Result<NodeSample, SourceError> {
        if let Some(first) = self.first.take() {
            return Ok(first);
        }
        self.fill()?;
        self.pending.take().ok_or_else(|| SourceError::Sample {
            detail: format!("the recording {} has ended", self.path.display()),
        })
    }

    fn label(&self) -> String {
        self.label.clone()
    }
}

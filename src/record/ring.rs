//! The flight recorder (`strata record --ring DURATION DIR`, `strata serve --record DIR
//! --ring DURATION`): the last DURATION of samples on disk, as finished format-2 segments of
//! [`SEGMENT_SECS`] each (every one readable alone; the one being written, up to its last
//! sample, after a kill), the oldest deleted past DURATION or past the ring's size.
//!
//! The evidence is kept: when a sample raises an `oom`, a `zombie_context` or a critical
//! `oom_forecast`, the segments from [`BEFORE_SECS`] before it to [`AFTER_SECS`] after it
//! are renamed `ring-START-KIND-PID-TIME.zst` and kept past the ring, within a bound of
//! their own. Only a directory that is strata's (it holds [`MARKER`], or is empty or new) is
//! used, and only this module's own names in it are ever deleted.

use crate::detect::{Finding, Severity};
use crate::recording::{RecordError, RecordWriter};
use crate::report::markdown::Clock;
use crate::sample::NodeSample;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file that says a directory is a strata flight record.
pub(crate) const MARKER: &str = ".strata-ring";
/// Recording seconds a segment covers (one keyframe each).
pub(crate) const SEGMENT_SECS: f64 = 300.0;
/// The evidence kept before and after the sample that raised it.
pub(crate) const BEFORE_SECS: f64 = 1800.0;
pub(crate) const AFTER_SECS: f64 = 300.0;

/// The bounds of a flight record.
#[derive(Debug, Clone, Copy)]
pub struct RingBounds {
    pub keep: Duration,
    pub ring_bytes: u64,
    pub evidence_bytes: u64,
}

/// A segment on disk.
#[derive(Debug, Clone)]
struct Segment {
    path: PathBuf,
    /// Its first and last samples' times.
    from: f64,
    to: f64,
    kept: bool,
}

/// A window of evidence: its name part and its times.
#[derive(Debug, Clone, PartialEq)]
struct Evidence {
    label: String,
    from: f64,
    to: f64,
}

pub struct Ring {
    dir: PathBuf,
    /// The directory, open: locked for as long as the record is written (one flight
    /// recorder a directory), and watched for its removal.
    dir_file: std::fs::File,
    /// Samples written since the record was opened.
    samples: u64,
    bounds: RingBounds,
    writer: Option<RecordWriter>,
    segments: Vec<Segment>,
    evidence: Vec<Evidence>,
}

fn open_error(dir: &Path, cause: impl std::fmt::Display) -> RecordError {
    RecordError::Open {
        path: dir.display().to_string(),
        cause: cause.to_string(),
    }
}

/// Whether a name is one of the flight recorder's own segments.
fn ours(name: &str) -> bool {
    name.starts_with("ring-") && name.ends_with(".zst")
}

/// Whether a finding is evidence to keep: an OOM, a zombie context, a critical forecast.
pub(crate) fn is_evidence(kind: &str, severity: Severity) -> bool {
    matches!(kind, "oom" | "zombie_context")
        || (kind == "oom_forecast" && severity == Severity::Critical)
}

impl Ring {
    /// Opens (or makes) the flight record in `dir`: a directory that holds anything but a
    /// strata flight record is refused, and nothing in it touched.
    pub fn open(dir: &Path, bounds: RingBounds) -> Result<Ring, RecordError> {
        if dir.exists() && !dir.is_dir() {
            return Err(open_error(dir, "it is not a directory"));
        }
        std::fs::create_dir_all(dir).map_err(|e| open_error(dir, e))?;
        let dir_file = std::fs::File::open(dir).map_err(|e| open_error(dir, e))?;
        crate::recording::lock::take(&dir_file).map_err(|holder| RecordError::Busy {
            path: dir.display().to_string(),
            holder,
        })?;
        let marker = dir.join(MARKER);
        let entries: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| open_error(dir, e))?
            .flatten()
            .collect();
        if !marker.exists() && !entries.is_empty() {
            return Err(open_error(
                dir,
                format!(
                    "it holds files and no {MARKER}: it is not a strata flight record, and nothing in it is touched"
                ),
            ));
        }
        std::fs::write(
            &marker,
            "strata flight record: ring-*.zst are strata's to delete\n",
        )
        .map_err(|e| open_error(dir, e))?;
        let mut segments: Vec<Segment> = entries
            .iter()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                if !ours(&name) {
                    return None;
                }
                let meta = e.metadata().ok()?;
                let to = meta
                    .modified()
                    .ok()?
                    .duration_since(std::time::UNIX_EPOCH)
                    .ok()?
                    .as_secs_f64();
                Some(Segment {
                    path: e.path(),
                    from: to,
                    to,
                    kept: name.matches('-').count() > 3,
                })
            })
            .collect();
        segments.sort_by(|a, b| a.to.total_cmp(&b.to));
        Ok(Ring {
            dir: dir.to_path_buf(),
            dir_file,
            samples: 0,
            bounds,
            writer: None,
            segments,
            evidence: Vec::new(),
        })
    }

    /// The one line that states the record's bounds.
    pub fn stated(&self) -> String {
        format!(
            "flight record in {}: the last {} in segments of {}, at most {} on disk, evidence kept past it within {}",
            crate::text::clean(&self.dir.display().to_string()),
            crate::units::duration(self.bounds.keep.as_secs_f64()),
            crate::units::duration(SEGMENT_SECS),
            crate::units::bytes(self.bounds.ring_bytes),
            crate::units::bytes(self.bounds.evidence_bytes),
        )
    }

    /// Writes one sample, with the findings raised at it; a write error (a full disk) stops
    /// the record, its segments as they are.
    pub(crate) fn offer(
        &mut self,
        sample: &NodeSample,
        findings: &[Finding],
    ) -> Result<(), RecordError> {
        if crate::recording::lock::removed(&self.dir_file) {
            self.writer = None;
            return Err(RecordError::Removed {
                what: "the flight record's directory",
                path: self.dir.display().to_string(),
                samples: self.samples,
            });
        }
        let time = sample.time;
        let new_segment = match self.segments.last() {
            Some(last) if self.writer.is_some() => {
                time - last.from >= SEGMENT_SECS || time < last.from
            }
            _ => true,
        };
        if new_segment {
            self.finish_segment()?;
            let name = format!("ring-{}.zst", Clock::stamp(time));
            let path = self.dir.join(name);
            let _ = std::fs::remove_file(&path);
            self.writer = Some(RecordWriter::create(&path, None)?);
            self.segments.push(Segment {
                path,
                from: time,
                to: time,
                kept: false,
            });
        }
        if let Some(writer) = self.writer.as_mut() {
            if let Err(e) = writer.write(sample) {
                self.writer = None;
                return Err(e);
            }
            self.samples += 1;
        }
        if let Some(last) = self.segments.last_mut() {
            last.to = time;
        }
        for f in findings {
            if !is_evidence(&f.kind.name(), f.severity) {
                continue;
            }
            let pid = f.pid.map_or_else(|| "node".to_string(), |p| p.to_string());
            let label = format!("{}-{pid}-{}", f.kind.name(), Clock::stamp(f.since));
            if self.evidence.iter().any(|e| e.label == label) {
                continue;
            }
            self.evidence.push(Evidence {
                label,
                from: f.since - BEFORE_SECS,
                to: f.since + AFTER_SECS,
            });
        }
        self.keep_evidence(false);
        Ok(())
    }

    /// Ends the segment being written, and applies the bounds.
    fn finish_segment(&mut self) -> Result<(), RecordError> {
        if let Some(writer) = self.writer.take() {
            writer.finish()?;
        }
        self.keep_evidence(true);
        self.prune();
        Ok(())
    }

    /// Renames the finished segments that fall in a window of evidence (the one being
    /// written waits until it is finished).
    fn keep_evidence(&mut self, all: bool) {
        let writing = usize::from(self.writer.is_some() && !all);
        let finished = self.segments.len().saturating_sub(writing);
        for segment in &mut self.segments[..finished] {
            if segment.kept {
                continue;
            }
            let Some(e) = self
                .evidence
                .iter()
                .find(|e| segment.to >= e.from && segment.from <= e.to)
            else {
                continue;
            };
            let stem = segment
                .path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let kept = self.dir.join(format!("{stem}-{}.zst", e.label));
            if std::fs::rename(&segment.path, &kept).is_ok() {
                segment.path = kept;
                segment.kept = true;
            }
        }
    }

    /// Deletes the ring's segments past its duration or size, and the oldest evidence past
    /// its own bound; never the segment being written.
    fn prune(&mut self) {
        let newest = self.segments.last().map_or(0.0, |s| s.to);
        let keep = self.bounds.keep.as_secs_f64();
        let writing = usize::from(self.writer.is_some());
        let size = |s: &Segment| std::fs::metadata(&s.path).map_or(0, |m| m.len());
        for kept in [false, true] {
            let bound = if kept {
                self.bounds.evidence_bytes
            } else {
                self.bounds.ring_bytes
            };
            let mut total: u64 = self
                .segments
                .iter()
                .filter(|s| s.kept == kept)
                .map(size)
                .sum();
            let last = self.segments.len().saturating_sub(writing);
            let mut gone = Vec::new();
            for (i, s) in self.segments[..last].iter().enumerate() {
                if s.kept != kept {
                    continue;
                }
                let old = !kept && newest - s.to > keep;
                if old || total > bound {
                    total = total.saturating_sub(size(s));
                    gone.push(i);
                }
            }
            for i in gone.into_iter().rev() {
                let s = self.segments.remove(i);
                let _ = std::fs::remove_file(&s.path);
            }
        }
    }

    /// Finishes the segment being written.
    pub(crate) fn finish(mut self) -> Result<(), RecordError> {
        self.finish_segment()
    }
}

/// A flight record written on a thread of its own (for `strata serve --record`): samples are
/// handed over, never waited for; a write error (a full disk) stops the record with one
/// line on stderr, and whoever hands samples over goes on.
pub struct RingThread {
    tx: Option<std::sync::mpsc::SyncSender<(Box<NodeSample>, Vec<Finding>)>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for RingThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RingThread")
    }
}

impl RingThread {
    pub fn start(ring: Ring, what: &'static str) -> std::io::Result<RingThread> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<(Box<NodeSample>, Vec<Finding>)>(64);
        let thread = std::thread::Builder::new()
            .name("strata-ring".into())
            .spawn(move || {
                let mut ring = ring;
                for (sample, findings) in rx {
                    if let Err(e) = ring.offer(&sample, &findings) {
                        eprintln!(
                            "strata {what}: the flight record stopped: {e} (hint: {}); serving goes on",
                            e.hint()
                        );
                        return;
                    }
                }
                if let Err(e) = ring.finish() {
                    eprintln!("strata {what}: the flight record's last segment: {e}");
                }
            })?;
        Ok(RingThread {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Hands over a sample and the findings raised at it (only the evidence is sent).
    pub(crate) fn send(&self, sample: &NodeSample, findings: &[Finding]) {
        if let Some(tx) = &self.tx {
            let evidence = findings
                .iter()
                .filter(|f| is_evidence(&f.kind.name(), f.severity))
                .cloned()
                .collect();
            let _ = tx.try_send((Box::new(sample.clone()), evidence));
        }
    }
}

impl Drop for RingThread {
    /// Finishes the segment being written.
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

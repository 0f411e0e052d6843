//! `strata record OUT --from IN`: every sample of a readable recording (either format, plain
//! or compressed, or `snapshot --json --count` output) written again into OUT, in the
//! format its name asks for (format 2 unless it says JSON lines): how old recordings are
//! made small, and how the formats are held to the same samples.

use crate::recording::{Line, Lines, ReadError};
use crate::recording::{RecordError, RecordWriter, Summary};
use std::path::Path;

/// What reading the input met.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Read {
    pub(crate) samples: u64,
    /// Lines (or records) that were not samples, and lines over the line limit.
    pub(crate) bad: u64,
    /// Corrupt compressed data skipped.
    pub(crate) corrupt: u64,
    /// Format 2 samples whose keyframe was lost.
    pub(crate) unanchored: u64,
    /// The last line (or record) was cut short.
    pub truncated: bool,
    /// Why reading stopped before the end, if it did.
    pub(crate) stopped: Option<String>,
}

impl Read {
    /// Whether part of the input was lost (not a cut last line: that sample was in flight).
    pub fn lost_some(&self) -> bool {
        self.bad > 0 || self.corrupt > 0 || self.unanchored > 0 || self.stopped.is_some()
    }

    /// Why a read found no sample, in a few words, `lines` the lines (or records) read.
    fn why_none(&self, lines: u64) -> String {
        if lines == 0 && !self.lost_some() && !self.truncated {
            return "it is empty".to_string();
        }
        if self.lost_some() {
            return format!("it is not a recording ({})", self.losses());
        }
        if self.truncated {
            return "its one sample was cut short".to_string();
        }
        format!("{lines} blank line(s)")
    }

    /// What was lost, in a few words.
    pub fn losses(&self) -> String {
        let mut parts = Vec::new();
        if self.bad > 0 {
            parts.push(format!("{} line(s) not read as samples", self.bad));
        }
        if self.corrupt > 0 {
            parts.push(format!("{} run(s) of corrupt data", self.corrupt));
        }
        if self.unanchored > 0 {
            parts.push(format!(
                "{} sample(s) whose keyframe was lost",
                self.unanchored
            ));
        }
        if let Some(why) = &self.stopped {
            parts.push(format!("reading stopped: {}", crate::text::clean(why)));
        }
        parts.join(", ")
    }
}

/// Why re-encoding could not be done.
#[derive(Debug, thiserror::Error)]
pub enum ReencodeError {
    #[error("cannot read the recording {path}: {error}")]
    Unreadable { path: String, error: ReadError },
    #[error("{0}")]
    Write(#[from] RecordError),
    #[error("{out} is the recording being read: writing into it would read it again without end")]
    Same { out: String },
    /// Nothing to write: the input is empty or not a recording. OUT is left as it was.
    #[error("{path} holds no sample: {why}; nothing was written")]
    NoSample { path: String, why: String },
}

impl ReencodeError {
    pub fn hint(&self) -> &'static str {
        match self {
            ReencodeError::Unreadable { error, .. } => match error {
                ReadError::Io(_) => "check the path of the recording given to --from",
                other => other.hint(),
            },
            ReencodeError::Write(e) => e.hint(),
            ReencodeError::Same { .. } => {
                "name another file to write: strata record NEW.zst --from OLD"
            }
            ReencodeError::NoSample { .. } => {
                "a recording is what `strata record FILE` (format 2) or `strata snapshot --json --count N > FILE` (JSON lines) writes"
            }
        }
    }
}

/// Whether two paths name one file.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Writes every sample of `from` into `out` (created, or appended to), in the order read;
/// the progress of a long read shows on a terminal's stderr. An input with no sample is an
/// error, as it is for `analyze`, `export` and `replay`: `out` is then not touched (it is
/// opened at the first sample).
pub fn reencode(from: &Path, out: &Path) -> Result<(Read, Summary), ReencodeError> {
    let shown = |p: &Path| crate::text::clean(&p.display().to_string()).into_owned();
    if same_file(from, out) {
        return Err(ReencodeError::Same { out: shown(out) });
    }
    let mut lines = Lines::open(from).map_err(|error| ReencodeError::Unreadable {
        path: shown(from),
        error,
    })?;
    let mut writer: Option<RecordWriter> = None;
    let _progress = crate::recording::progress::on_stderr(lines.progress().clone(), &shown(from));
    let mut read = Read::default();
    loop {
        match lines.next_line() {
            Ok(Some((_, line))) => match line {
                Line::Sample(sample) => {
                    let writing = match &mut writer {
                        Some(w) => w,
                        None => writer.insert(RecordWriter::create(out, None)?),
                    };
                    writing.write(&sample)?;
                    read.samples += 1;
                }
                Line::Bad(_) | Line::Oversized(_) => read.bad += 1,
                Line::Corrupt(_) => read.corrupt += 1,
                Line::Unanchored => read.unanchored += 1,
                Line::Truncated => read.truncated = true,
            },
            Ok(None) => break,
            Err(e) => {
                read.stopped = Some(e.to_string());
                break;
            }
        }
    }
    read.truncated |= lines.cut();
    let Some(writer) = writer else {
        return Err(ReencodeError::NoSample {
            path: shown(from),
            why: read.why_none(lines.number()),
        });
    };
    let summary = writer.finish()?;
    Ok((read, summary))
}

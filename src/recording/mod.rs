//! Recordings, read and written: the formats, and nothing above them. Writing a file is
//! [`writer`] (either format, flushed per sample, rotated; one writer a file: [`lock`]); the
//! format-2 records are [`v2`], both ways; the rest of this module reads. What drives a
//! writer (`strata record`, the monitor's `r`, the flight recorder, re-encoding) is
//! `crate::record`.
//!
//! Reading: JSON lines, one raw node sample each, plain or compressed (zstd or gzip, told by
//! the stream's first bytes, not by the file's name); format 2 is told by its
//! [`v2::MAGIC`] once decompressed.
//!
//! Every way a recording can be spoiled is read past and said, with memory held bounded
//! whatever the input:
//! - a recording cut short (a killed `strata record`, a full disk) reads up to where it was
//!   cut: an unfinished compressed frame ends the text as a clean end would, and is said;
//! - corrupt compressed data is said with its file offset, and reading goes on from the next
//!   zstd frame (or gzip member), what was skipped counted ([`decode`]);
//! - a line longer than [`LINE_LIMIT`] is skipped to its newline and counted, never held
//!   whole ([`lines`]);
//! - text with no line end for [`NO_LINE_END_LIMIT`] bytes (`/dev/zero`, a gzip bomb of
//!   zeros) is not a recording: reading stops there with the offset ([`ReadError`]).

pub(crate) mod decode;
mod input;
pub(crate) mod lines;
pub(crate) mod lock;
pub(crate) mod progress;
pub(crate) mod v2;
pub(crate) mod writer;

pub(crate) use decode::Corruption;
pub use input::Progress;
pub use lines::{Line, Lines};
pub use writer::{Encoding, RecordError, RecordWriter, Rotation, Summary};

use std::io::{self, BufRead, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The first bytes of a zstd frame (`0xFD2FB528`, little-endian).
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// The first bytes of a gzip member.
pub const GZIP_MAGIC: [u8; 2] = [0x1F, 0x8B];

/// The longest line read, newline included: 256 MiB. The largest sample strata can write is
/// 70.6 MiB: the first sample after meeting 64 feeds that each hand over a whole backlog, up
/// to the 131,072 earlier readings the monitor keeps over all feeds (about 540 bytes each),
/// with their hellos and 64 pending OOM reports each (built by this module's tests, which
/// hold the limit to three times it); a busy node of 8 GPUs and 64 fed processes writes
/// 140 KB a sample. A longer line is skipped, never held: memory stays at this limit.
pub(crate) const LINE_LIMIT: usize = 256 << 20;

/// Text with no line end for this long (1 GiB, four lines at the limit) is not JSON lines:
/// reading stops there rather than skip on through a stream without end.
pub(crate) const NO_LINE_END_LIMIT: u64 = 1 << 30;

/// The earliest time a sample can have: 2000-01-01 UTC (a clock before it was never set).
pub(crate) const EARLIEST_TIME: f64 = 946_684_800.0;
/// The latest: 2200-01-01 UTC, past any date a node's clock gives.
pub(crate) const LATEST_TIME: f64 = 7_258_118_400.0;
/// The shortest and the longest sampling interval a sample can state: 1 ms and a day.
pub(crate) const INTERVALS: std::ops::RangeInclusive<f64> = 0.001..=86_400.0;

/// Why a sample's time or interval cannot be, if so: a time that is not finite, before
/// [`EARLIEST_TIME`] or after [`LATEST_TIME`]; an interval outside [`INTERVALS`]. Such a
/// sample is skipped and counted: no arithmetic on times may run away with it.
pub(crate) fn impossible_time(time: f64, interval: f64) -> Option<String> {
    if !(EARLIEST_TIME..=LATEST_TIME).contains(&time) {
        // The date, where there is one (within what `time` can tell).
        let date = (time.is_finite() && time.abs() < 1e11)
            .then(|| time::OffsetDateTime::from_unix_timestamp(time.floor() as i64).ok())
            .flatten()
            .map(|t| t.date().to_string());
        let shown = match date {
            Some(date) => format!("{time} ({date})"),
            None => format!("{time}"),
        };
        return Some(format!(
            "its time {shown} is no time a clock gives (before 2000, after 2200, or not a number)"
        ));
    }
    if !INTERVALS.contains(&interval) {
        return Some(format!(
            "its interval {interval} s is no sampling interval (1 ms to a day)"
        ));
    }
    None
}

/// How a recording's bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compression {
    Plain,
    Zstd,
    Gzip,
}

impl Compression {
    /// What the stream's first bytes say it is.
    pub(crate) fn sniff(head: &[u8]) -> Compression {
        if head.starts_with(&ZSTD_MAGIC) {
            Compression::Zstd
        } else if head.starts_with(&GZIP_MAGIC) {
            Compression::Gzip
        } else {
            Compression::Plain
        }
    }
}

/// Why reading a recording stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error(
        "no line ends in the {} of text from byte {from}{}: not JSON lines",
        crate::units::bytes(NO_LINE_END_LIMIT),
        match file_offset {
            Some(at) => format!(" (read to byte {at} of the file)"),
            None => String::new(),
        }
    )]
    NoLineEnd {
        /// The text's offset where the line began.
        from: u64,
        /// For compressed text, how far into the file reading had come.
        file_offset: Option<u64>,
    },
    #[error(
        "the zstd frame at byte {at} needs {}{}",
        match window {
            Some(w) => format!("a {} window", crate::units::bytes(*w)),
            None => "a larger window".to_string(),
        },
        if *too_large {
            ", over the 2 GiB zstd decodes"
        } else {
            ", and that much memory could not be had"
        }
    )]
    Window {
        at: u64,
        window: Option<u64>,
        too_large: bool,
    },
}

impl ReadError {
    pub(crate) fn hint(&self) -> &'static str {
        match self {
            ReadError::Io(_) => "check the file and the disk it is on",
            ReadError::NoLineEnd { .. } => {
                "a recording is what `strata record FILE` (format 2) or `strata snapshot --json --count N > FILE` (JSON lines) writes"
            }
            ReadError::Window { .. } => {
                "recompress it with a smaller window: zstd -dc --long=31 FILE | zstd -o NEW.zst"
            }
        }
    }
}

/// What a file that is not a regular one is, in words.
pub(crate) fn file_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO (a named pipe)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Refuses what is no recording to read to its end: a device (`/dev/urandom` never ends, a
/// terminal waits for typing), a directory, a socket. A regular file and a pipe
/// (`<(zstdcat FILE)`, standard input from another command) are read.
fn readable_kind(meta: &std::fs::Metadata, what: &str) -> io::Result<()> {
    let kind = meta.file_type();
    if kind.is_file() || {
        use std::os::unix::fs::FileTypeExt;
        kind.is_fifo()
    } {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "{what} is {}, not a recording",
        file_kind(&kind)
    )))
}

/// The bytes at `path` (`-`: standard input), with their size where known. A device, a
/// directory or a socket is refused ([`readable_kind`]).
pub(crate) fn open_bytes(path: &Path) -> io::Result<(Box<dyn Read + Send>, Progress)> {
    if path.as_os_str() == "-" {
        let stdin = io::stdin();
        // Standard input's own kind: fstat of descriptor 0, through a borrowed handle.
        let meta = {
            use std::os::fd::AsFd;
            let fd = stdin.as_fd().try_clone_to_owned()?;
            std::fs::File::from(fd).metadata()?
        };
        readable_kind(&meta, "standard input")?;
        return Ok((Box::new(stdin), Progress::new(None)));
    }
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    readable_kind(&meta, "it")?;
    let total = meta.is_file().then_some(meta.len());
    Ok((Box::new(file), Progress::new(total)))
}

/// What a [`reader`] met on the way: a compressed stream that ended inside a frame, and
/// corrupt data skipped.
#[derive(Debug, Clone, Default)]
pub struct Cut {
    cut: Arc<AtomicBool>,
    corrupt: Arc<AtomicBool>,
}

impl Cut {
    /// The stream ended inside a frame (the writer was killed, or its disk filled).
    pub fn happened(&self) -> bool {
        self.cut.load(Ordering::Relaxed)
    }

    /// Corrupt compressed data was skipped.
    #[cfg(test)]
    pub(crate) fn corrupt(&self) -> bool {
        self.corrupt.load(Ordering::Relaxed)
    }
}

/// A recording's text as one stream, decompressed as its first bytes say: corrupt data is
/// skipped to the next frame and noted in the [`Cut`], as is a cut at the end. Lines are not
/// bounded here: [`Lines`] reads samples.
struct Text {
    decoder: decode::Decoder,
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    cut: Cut,
}

impl Read for Text {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Text {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.pos == self.len {
            match self.decoder.next(&mut self.buf).map_err(io::Error::other)? {
                decode::Event::Data(n) => (self.pos, self.len) = (0, n),
                decode::Event::Corrupt(_) => self.cut.corrupt.store(true, Ordering::Relaxed),
                decode::Event::End { cut } => {
                    if cut {
                        self.cut.cut.store(true, Ordering::Relaxed);
                    }
                    break;
                }
            }
        }
        Ok(&self.buf[self.pos..self.len])
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.len);
    }
}

/// A recording's text from any byte stream, decompressed as its first bytes say.
pub fn reader<R: Read + Send + 'static>(input: R) -> io::Result<(Box<dyn BufRead + Send>, Cut)> {
    let input = input::Input::new(Box::new(input), Progress::default());
    let decoder = decode::Decoder::new(input).map_err(io::Error::other)?;
    let cut = Cut::default();
    let text = Text {
        decoder,
        buf: vec![0; 1 << 17].into_boxed_slice(),
        pos: 0,
        len: 0,
        cut: cut.clone(),
    };
    Ok((Box::new(text), cut))
}

/// Opens the recording at `path` (`-`: standard input) as one text stream.
pub fn open(path: &Path) -> io::Result<(Box<dyn BufRead + Send>, Cut)> {
    let (bytes, _) = open_bytes(path)?;
    reader(bytes)
}

#[cfg(test)]
mod tests;

//! Writing a recording: format 2 (`strata.recording/2`, compact binary records in zstd
//! frames, a keyframe beginning each), or format 1 (one raw node sample per JSON line,
//! plain, zstd or gzip) where the name asks for JSON lines. Every sample is flushed to the
//! kernel before the next (a zstd block flush or a gzip sync flush, then the write), so a
//! killed writer loses at most the sample in flight. With a size cap, the file is rotated
//! (`FILE` → `FILE.1` → ... `FILE.N`), each rotated file a finished recording.

use crate::recording::Compression;
use crate::sample::NodeSample;
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// zstd's level when the name does not say plain or gzip: chosen by `benches/record.sh`
/// (bytes and CPU per sample of a busy node; `docs/contributing/benchmarks.md`, "Recording:
/// bytes and CPU a sample").
pub(crate) const ZSTD_LEVEL: i32 = 1;
/// gzip's level for a `.gz` name.
pub(crate) const GZIP_LEVEL: u32 = 6;

/// zstd's level for format 2: chosen by `benches/record.sh` (`docs/contributing/benchmarks.md`,
/// "Recording: bytes and CPU a sample").
pub(crate) const RECORDS_LEVEL: i32 = 6;

/// How the samples are stored, as the file's name asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Format 1: JSON lines, plain.
    Plain,
    /// Format 1: JSON lines in zstd frames.
    Zstd(i32),
    /// Format 1: JSON lines in gzip members.
    Gzip(u32),
    /// Format 2: binary records in zstd frames, one frame per keyframe.
    Records(i32),
}

impl Encoding {
    /// A name that says JSON lines gets them: `.jsonl` (or `.json`, `.ndjson`) plain,
    /// `.gz` gzip, `.jsonl.zst` zstd; any other name format 2.
    pub fn for_path(path: &Path) -> Encoding {
        let name = path
            .file_name()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let json = [".jsonl", ".json", ".ndjson"];
        if json.iter().any(|e| name.ends_with(e)) {
            Encoding::Plain
        } else if name.ends_with(".gz") {
            Encoding::Gzip(GZIP_LEVEL)
        } else if json.iter().any(|e| name.ends_with(&format!("{e}.zst"))) {
            Encoding::Zstd(ZSTD_LEVEL)
        } else {
            Encoding::Records(RECORDS_LEVEL)
        }
    }

    pub(crate) fn compression(self) -> Compression {
        match self {
            Encoding::Plain => Compression::Plain,
            Encoding::Zstd(_) | Encoding::Records(_) => Compression::Zstd,
            Encoding::Gzip(_) => Compression::Gzip,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Encoding::Plain => "plain JSON lines",
            Encoding::Zstd(_) => "JSON lines, zstd",
            Encoding::Gzip(_) => "JSON lines, gzip",
            Encoding::Records(_) => "strata.recording/2, zstd",
        }
    }

    /// Format 2's records rather than JSON lines.
    pub(crate) fn is_records(self) -> bool {
        matches!(self, Encoding::Records(_))
    }
}

/// A size cap: past `max_bytes` the file is rotated, and `keep` rotated files are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    pub max_bytes: u64,
    pub keep: u32,
}

/// Why a recording could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot record to {path}: {cause}")]
    Open { path: String, cause: String },
    /// `error` is said in the message, and is not the error's source: a chain of causes
    /// (anyhow's `{:#}`) would say it twice.
    #[error("cannot write the recording {path}: {error}")]
    Write { path: String, error: io::Error },
    /// Another writer holds the file (or the flight record's directory).
    #[error("cannot record to {path}: another recorder writes it ({holder})")]
    Busy { path: String, holder: String },
    /// The file (or the flight record's directory) was removed while it was written.
    #[error("{what} {path} was removed while it was written: the {samples} sample(s) written since it was opened are lost with it")]
    Removed {
        what: &'static str,
        path: String,
        samples: u64,
    },
}

impl RecordError {
    /// What the user can try.
    pub fn hint(&self) -> &'static str {
        match self {
            RecordError::Open { .. } => {
                "name a file in a directory that exists and that you can write to"
            }
            RecordError::Write { error, .. } if error.raw_os_error() == Some(libc::ENOSPC) => {
                "free space on that disk, or cap the recording with --max-size SIZE (rotated); the samples written so far read back"
            }
            RecordError::Write { .. } => {
                "check the disk and the file; the samples written so far read back"
            }
            RecordError::Busy { .. } => {
                "stop that recorder first, or record to another file; two writers would make both recordings unreadable"
            }
            RecordError::Removed { .. } => {
                "record where nothing removes files while they are written (a cleaner of /tmp?)"
            }
        }
    }
}

/// One line of a recording: the schema's name, then the raw sample's fields (what
/// [`NodeSample`] reads back; `analyze` and `replay` ignore `schema`).
#[derive(Serialize)]
struct Line<'a> {
    schema: &'static str,
    #[serde(flatten)]
    sample: &'a NodeSample,
}

/// The file, counting what reaches it.
struct Counted {
    file: File,
    /// Bytes in the file.
    len: u64,
    /// The file was ended by hand after a failed write: what the encoder still writes as it
    /// is dropped (gzip's own end, after the one written by hand) is let go.
    ended: bool,
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.ended {
            return Ok(buf.len());
        }
        let n = self.file.write(buf)?;
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

enum Stream {
    Plain(Counted),
    Zstd(zstd::stream::write::Encoder<'static, Counted>),
    Gzip(flate2::write::GzEncoder<Counted>),
}

impl Stream {
    fn counted(&self) -> &Counted {
        match self {
            Stream::Plain(c) => c,
            Stream::Zstd(e) => e.get_ref(),
            Stream::Gzip(e) => e.get_ref(),
        }
    }

    fn counted_mut(&mut self) -> &mut Counted {
        match self {
            Stream::Plain(c) => c,
            Stream::Zstd(e) => e.get_mut(),
            Stream::Gzip(e) => e.get_mut(),
        }
    }

    /// Writes the text and pushes it through the compressor to the kernel.
    fn write_flushed(&mut self, text: &[u8]) -> io::Result<()> {
        match self {
            Stream::Plain(c) => c.write_all(text),
            Stream::Zstd(e) => e.write_all(text).and_then(|()| e.flush()),
            Stream::Gzip(e) => e.write_all(text).and_then(|()| e.flush()),
        }
    }

    /// Ends the frame (or gzip member), so the file is a finished recording.
    fn finish(self) -> io::Result<Counted> {
        match self {
            Stream::Plain(c) => Ok(c),
            Stream::Zstd(e) => e.finish(),
            Stream::Gzip(e) => e.finish(),
        }
    }
}

/// What was written, for the summary line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub samples: u64,
    /// Bytes written (compressed), over every file.
    pub(crate) bytes: u64,
    /// Files rotated away.
    pub(crate) rotations: u64,
}

/// Writes samples to a recording.
pub struct RecordWriter {
    path: PathBuf,
    encoding: Encoding,
    rotation: Option<Rotation>,
    stream: Option<Stream>,
    /// The file's length after the last complete sample: a failed write is cut back to it.
    good_len: u64,
    line: Vec<u8>,
    samples: u64,
    /// Samples written to the file now open (since it was opened or rotated in).
    file_samples: u64,
    bytes: u64,
    rotations: u64,
    /// The bytes the last sample took: a rotation comes before a sample that would pass the
    /// cap.
    last_sample_bytes: u64,
    /// Samples in the current frame, and the checksum of their text (gzip's trailer).
    frame_samples: u64,
    frame_crc: flate2::Crc,
    /// Format 2: what the records so far leave for the next.
    records: crate::recording::v2::Encoder,
}

/// The bytes that end a frame (or gzip member) whose every sample was flushed, for when the
/// encoder cannot be trusted to (a write failed inside it): zstd's empty last raw block
/// (the frame has no checksum and no content size), or gzip's empty final fixed-Huffman
/// block (byte-aligned after a sync flush) and its trailer, CRC-32 and length.
fn frame_end(encoding: Encoding, crc: &flate2::Crc) -> Vec<u8> {
    match encoding {
        Encoding::Plain => Vec::new(),
        Encoding::Zstd(_) | Encoding::Records(_) => vec![0x01, 0x00, 0x00],
        Encoding::Gzip(_) => {
            let mut end = vec![0x03, 0x00];
            end.extend(crc.sum().to_le_bytes());
            end.extend(crc.amount().to_le_bytes());
            end
        }
    }
}

fn open_error(path: &Path, cause: impl std::fmt::Display) -> RecordError {
    RecordError::Open {
        path: path.display().to_string(),
        cause: cause.to_string(),
    }
}

/// Opens `path` for appending (created if missing), refusing what cannot hold a recording.
fn open_file(path: &Path, encoding: Encoding) -> Result<Counted, RecordError> {
    if path.is_dir() {
        return Err(open_error(path, "it is a directory"));
    }
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => open_error(path, "its directory does not exist"),
            _ => open_error(path, e),
        })?;
    let meta = file.metadata().map_err(|e| open_error(path, e))?;
    if !meta.is_file() {
        return Err(open_error(path, "it is not a regular file"));
    }
    // Before anything is read of it: another writer's file is neither checked nor touched.
    super::lock::take(&file).map_err(|holder| RecordError::Busy {
        path: path.display().to_string(),
        holder,
    })?;
    let len = meta.len();
    if len > 0 {
        check_appendable(&mut file, len, encoding).map_err(|cause| open_error(path, cause))?;
    }
    let len = file.metadata().map_err(|e| open_error(path, e))?.len();
    Ok(Counted {
        file,
        len,
        ended: false,
    })
}

/// An existing recording can take a new frame of the same kind. A plain one cut inside a line
/// gets its newline; a compressed one must end in a finished frame, or what is appended
/// after the cut could not be read back.
fn check_appendable(file: &mut File, len: u64, encoding: Encoding) -> Result<(), String> {
    let mut head = [0u8; 4];
    file.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
    let n = file.read(&mut head).map_err(|e| e.to_string())?;
    let found = Compression::sniff(&head[..n]);
    let mixed = |found: Encoding| {
        format!(
            "it holds a {} recording and its name asks for {}: appending would mix them",
            found.name(),
            encoding.name()
        )
    };
    if found != encoding.compression() {
        return Err(mixed(match found {
            Compression::Plain => Encoding::Plain,
            Compression::Zstd => Encoding::Zstd(0),
            Compression::Gzip => Encoding::Gzip(0),
        }));
    }
    if found == Compression::Zstd {
        file.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
        let copy = file.try_clone().map_err(|e| e.to_string())?;
        let (mut text, _) = crate::recording::reader(copy).map_err(|e| e.to_string())?;
        let magic = crate::recording::v2::MAGIC;
        let mut first = Vec::new();
        (&mut text)
            .take(magic.len() as u64)
            .read_to_end(&mut first)
            .map_err(|e| e.to_string())?;
        let records = first == magic;
        if records != encoding.is_records() {
            return Err(mixed(if records {
                Encoding::Records(0)
            } else {
                Encoding::Zstd(0)
            }));
        }
    }
    match found {
        Compression::Plain => {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1))
                .and_then(|_| file.read_exact(&mut last))
                .map_err(|e| e.to_string())?;
            if last[0] != b'\n' {
                // The line cut short stays one bad line; the next sample starts a line of its own.
                file.write_all(b"\n").map_err(|e| e.to_string())?;
            }
        }
        Compression::Zstd | Compression::Gzip => {
            // Read through: a frame cut short (which the reader says) takes no appending.
            file.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
            let copy = file.try_clone().map_err(|e| e.to_string())?;
            let (mut read, cut) = crate::recording::reader(copy).map_err(|e| e.to_string())?;
            io::copy(&mut read, &mut io::sink()).map_err(|e| e.to_string())?;
            if cut.happened() {
                return Err(
                    "it ends in a frame cut short (a recorder killed, or a disk \
                            full), and samples appended after the cut could not be read back"
                        .into(),
                );
            }
        }
    }
    Ok(())
}

fn start(counted: Counted, encoding: Encoding) -> io::Result<Stream> {
    Ok(match encoding {
        Encoding::Plain => Stream::Plain(counted),
        Encoding::Zstd(level) | Encoding::Records(level) => {
            let mut encoder = zstd::stream::write::Encoder::new(counted, level)?;
            // No checksum: a frame cut by a write error is then ended by an empty last
            // block alone ([`frame_end`]).
            encoder.include_checksum(false)?;
            Stream::Zstd(encoder)
        }
        Encoding::Gzip(level) => Stream::Gzip(flate2::write::GzEncoder::new(
            counted,
            flate2::Compression::new(level),
        )),
    })
}

/// `FILE.n`.
pub(crate) fn rotated_path(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

impl RecordWriter {
    /// Opens (or appends to) the recording at `path`, compressed as its name says.
    pub fn create(path: &Path, rotation: Option<Rotation>) -> Result<Self, RecordError> {
        Self::with_encoding(path, Encoding::for_path(path), rotation)
    }

    pub fn with_encoding(
        path: &Path,
        encoding: Encoding,
        rotation: Option<Rotation>,
    ) -> Result<Self, RecordError> {
        let counted = open_file(path, encoding)?;
        let good_len = counted.len;
        let stream = start(counted, encoding).map_err(|e| open_error(path, e))?;
        Ok(RecordWriter {
            path: path.to_path_buf(),
            encoding,
            rotation,
            stream: Some(stream),
            good_len,
            line: Vec::with_capacity(1 << 16),
            samples: 0,
            file_samples: 0,
            bytes: 0,
            rotations: 0,
            last_sample_bytes: 0,
            frame_samples: 0,
            frame_crc: flate2::Crc::new(),
            records: crate::recording::v2::Encoder::new(),
        })
    }

    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    pub(crate) fn summary(&self) -> Summary {
        Summary {
            samples: self.samples,
            bytes: self.bytes,
            rotations: self.rotations,
        }
    }

    fn write_error(&self, error: io::Error) -> RecordError {
        RecordError::Write {
            path: self.path.display().to_string(),
            error,
        }
    }

    /// Appends one sample and flushes it to the kernel. On an error (a full disk) the file is
    /// cut back to its last complete sample and the writer takes no more.
    pub fn write(&mut self, sample: &NodeSample) -> Result<(), RecordError> {
        let Some(stream) = self.stream.as_ref() else {
            return Err(self.write_error(io::Error::other("the recording has stopped")));
        };
        if super::lock::removed(&stream.counted().file) {
            self.stream = None;
            return Err(RecordError::Removed {
                what: "the recording",
                path: self.path.display().to_string(),
                samples: self.file_samples,
            });
        }
        if let Some(rotation) = self.rotation {
            let len = stream.counted().len;
            if len > 0 && len.saturating_add(self.last_sample_bytes) > rotation.max_bytes {
                self.rotate(rotation)?;
            }
        }
        self.line.clear();
        if self.encoding.is_records() {
            let keyframe = self.records.wants_keyframe(sample);
            if keyframe && self.frame_samples > 0 {
                self.new_frame()?;
            }
            self.records.encode(sample, keyframe, &mut self.line);
        } else {
            serde_json::to_writer(
                &mut self.line,
                &Line {
                    schema: crate::sample::SNAPSHOT_SCHEMA,
                    sample,
                },
            )
            .map_err(|e| self.write_error(io::Error::from(e)))?;
            self.line.push(b'\n');
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err(self.write_error(io::Error::other("the recording has stopped")));
        };
        let before = stream.counted().len;
        match stream.write_flushed(&self.line) {
            Ok(()) => {
                let after = stream.counted().len;
                self.good_len = after;
                self.last_sample_bytes = after - before;
                self.bytes += after - before;
                self.samples += 1;
                self.file_samples += 1;
                self.frame_samples += 1;
                self.frame_crc.update(&self.line);
                Ok(())
            }
            Err(e) => {
                // Whatever of this sample reached the disk goes: the file ends at a sample,
                // and its frame is ended there where the few bytes fit (the cut freed some).
                if let Some(mut stream) = self.stream.take() {
                    stream.counted_mut().ended = true;
                    let file = &mut stream.counted_mut().file;
                    if file.set_len(self.good_len).is_ok() && self.frame_samples > 0 {
                        let end = frame_end(self.encoding, &self.frame_crc);
                        if file.write_all(&end).is_ok() {
                            self.bytes += end.len() as u64;
                        } else {
                            let _ = file.set_len(self.good_len);
                        }
                    }
                }
                Err(self.write_error(e))
            }
        }
    }

    /// Format 2: ends the frame and begins another on the same file, for a keyframe.
    fn new_frame(&mut self) -> Result<(), RecordError> {
        let Some(stream) = self.stream.take() else {
            return Ok(());
        };
        let finished = stream.finish().map_err(|e| self.write_error(e))?;
        self.bytes += finished.len.saturating_sub(self.good_len);
        self.good_len = finished.len;
        self.stream = Some(start(finished, self.encoding).map_err(|e| self.write_error(e))?);
        self.frame_samples = 0;
        Ok(())
    }

    /// Ends the current file's frame, shifts `FILE.i` to `FILE.i+1` (the oldest beyond
    /// `keep` goes), `FILE` to `FILE.1`, and starts `FILE` afresh.
    fn rotate(&mut self, rotation: Rotation) -> Result<(), RecordError> {
        let Some(stream) = self.stream.take() else {
            return Ok(());
        };
        let finished = stream.finish().map_err(|e| self.write_error(e))?;
        self.bytes += finished.len.saturating_sub(self.good_len);
        drop(finished);
        for n in (1..rotation.keep).rev() {
            let from = rotated_path(&self.path, n);
            if from.exists() {
                std::fs::rename(&from, rotated_path(&self.path, n + 1))
                    .map_err(|e| self.write_error(e))?;
            }
        }
        std::fs::rename(&self.path, rotated_path(&self.path, 1))
            .map_err(|e| self.write_error(e))?;
        let counted = open_file(&self.path, self.encoding).map_err(|e| match e {
            RecordError::Open { cause, .. } => self.write_error(io::Error::other(cause)),
            other => other,
        })?;
        self.good_len = counted.len;
        self.stream = Some(start(counted, self.encoding).map_err(|e| self.write_error(e))?);
        self.rotations += 1;
        self.file_samples = 0;
        self.frame_samples = 0;
        self.frame_crc = flate2::Crc::new();
        self.records.reset();
        Ok(())
    }

    /// Ends the frame: the file is a finished recording.
    pub fn finish(mut self) -> Result<Summary, RecordError> {
        if let Some(stream) = self.stream.take() {
            let finished = stream.finish().map_err(|e| self.write_error(e))?;
            self.bytes += finished.len.saturating_sub(self.good_len);
            finished.file.sync_data().map_err(|e| self.write_error(e))?;
        }
        Ok(self.summary())
    }
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;

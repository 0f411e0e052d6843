//! A recording's lines, bounded and numbered, as samples.
//!
//! A line is held up to [`LINE_LIMIT`](super::LINE_LIMIT): a longer one is skipped to its
//! newline and said with its length, never held whole; a long line that does not begin as a
//! sample does (`{`) is skipped from its first 64 KiB on, unheld. A line that is not a sample is said
//! with its number; a last line cut short (no newline, and its JSON unfinished) is the
//! sample that was in flight when the recorder stopped, not an error. After corrupt
//! compressed data, the line it broke is dropped with it, and numbering goes on with the
//! lines read (those in the skipped bytes are not known).

use super::decode::{Corruption, Decoder, Event};
use super::input::{Input, Progress};
use super::{ReadError, LINE_LIMIT, NO_LINE_END_LIMIT};
use crate::sample::NodeSample;
use std::io::Read;
use std::path::Path;

/// Text decoded at a time.
const CHUNK: usize = 1 << 17;
/// A line still without its newline past this many bytes is held on only if it begins as a
/// sample does (`{`): junk (`/dev/zero`, a log line gone wrong) is skipped without being held.
const JUNK_CHECK: usize = 1 << 16;

/// One line's bytes, or what stood in its place.
#[derive(Debug, PartialEq)]
pub(crate) enum Raw<'a> {
    /// A line, with its newline unless it is the last and has none.
    Line(&'a [u8]),
    /// A line over the limit (this many bytes, newline included), skipped.
    Oversized(u64),
    /// A long line that does not begin as a JSON object does (this many bytes), skipped.
    Junk(u64),
    Corrupt(Corruption),
}

/// Why a line is being skipped.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Skipped {
    Oversized,
    Junk,
}

/// Whether a line that begins with `held` then `more` may be a sample: its first byte that is
/// not blank is `{` (or there is none yet).
fn may_be_json(held: &[u8], more: &[u8]) -> bool {
    match held.iter().chain(more).find(|b| !b.is_ascii_whitespace()) {
        Some(&b) => b == b'{',
        None => false,
    }
}

fn skipped(bytes: u64, why: Skipped) -> Raw<'static> {
    match why {
        Skipped::Oversized => Raw::Oversized(bytes),
        Skipped::Junk => Raw::Junk(bytes),
    }
}

/// The text cut into lines, none held past the limit.
pub(crate) struct RawLines {
    decoder: Decoder,
    chunk: Box<[u8]>,
    pos: usize,
    len: usize,
    /// The line being put together from several chunks.
    line: Vec<u8>,
    /// `line` was handed out: cleared at the next call.
    handed_out: bool,
    /// Inside a line over the limit, or long junk: its bytes so far, and which.
    skipping: Option<(u64, Skipped)>,
    /// The text offset of `chunk[pos]`, and of the line being read.
    text_offset: u64,
    line_start: u64,
    limit: usize,
    give_up: u64,
    ended: bool,
    cut: bool,
}

impl RawLines {
    pub(crate) fn new(decoder: Decoder, limit: usize, give_up: u64) -> Self {
        RawLines {
            decoder,
            chunk: vec![0; CHUNK].into_boxed_slice(),
            pos: 0,
            len: 0,
            line: Vec::new(),
            handed_out: false,
            skipping: None,
            text_offset: 0,
            line_start: 0,
            limit,
            give_up,
            ended: false,
            cut: false,
        }
    }

    fn take(&mut self, n: usize) {
        self.pos += n;
        self.text_offset += n as u64;
    }

    /// The next line; `None` at the end.
    pub(crate) fn next(&mut self) -> Result<Option<Raw<'_>>, ReadError> {
        if self.handed_out {
            self.handed_out = false;
            self.line.clear();
            if self.line.capacity() > 1 << 20 {
                // A long line's room is not kept for the short ones after it.
                self.line = Vec::new();
            }
        }
        loop {
            if self.pos == self.len {
                if self.ended {
                    return Ok(None);
                }
                match self.decoder.next(&mut self.chunk)? {
                    Event::Data(n) => (self.pos, self.len) = (0, n),
                    Event::Corrupt(c) => {
                        // The line it broke is lost with it.
                        self.line.clear();
                        self.skipping = None;
                        self.line_start = self.text_offset;
                        return Ok(Some(Raw::Corrupt(c)));
                    }
                    Event::End { cut } => {
                        self.ended = true;
                        self.cut = cut;
                        if let Some((bytes, why)) = self.skipping.take() {
                            return Ok(Some(skipped(bytes, why)));
                        }
                        if self.line.is_empty() {
                            return Ok(None);
                        }
                        self.handed_out = true;
                        return Ok(Some(Raw::Line(&self.line)));
                    }
                }
                continue;
            }
            let data = &self.chunk[self.pos..self.len];
            let Some(newline) = memchr::memchr(b'\n', data) else {
                let n = data.len();
                let so_far = (self.line.len() + n) as u64;
                match &mut self.skipping {
                    Some((skipped, _)) => *skipped += n as u64,
                    None if so_far > self.limit as u64 => {
                        self.skipping = Some((so_far, Skipped::Oversized));
                        self.line = Vec::new();
                    }
                    None if so_far > JUNK_CHECK as u64 && !may_be_json(&self.line, data) => {
                        self.skipping = Some((so_far, Skipped::Junk));
                        self.line = Vec::new();
                    }
                    None => {
                        reserve_within(&mut self.line, n, self.limit);
                        self.line.extend_from_slice(data);
                    }
                }
                self.take(n);
                if self.skipping.is_some_and(|(s, _)| s >= self.give_up) {
                    return Err(ReadError::NoLineEnd {
                        from: self.line_start,
                        file_offset: Some(self.decoder.offset())
                            .filter(|&at| at != self.text_offset),
                    });
                }
                continue;
            };
            let end = newline + 1;
            self.line_start = self.text_offset + end as u64;
            if let Some((bytes, why)) = self.skipping.take() {
                self.take(end);
                return Ok(Some(skipped(bytes + end as u64, why)));
            }
            if self.line.len() + end > self.limit {
                let bytes = (self.line.len() + end) as u64;
                self.line = Vec::new();
                self.take(end);
                return Ok(Some(Raw::Oversized(bytes)));
            }
            if self.line.is_empty() {
                let at = self.pos;
                self.take(end);
                return Ok(Some(Raw::Line(&self.chunk[at..at + end])));
            }
            reserve_within(&mut self.line, end, self.limit);
            self.line.extend_from_slice(&data[..end]);
            self.take(end);
            self.handed_out = true;
            return Ok(Some(Raw::Line(&self.line)));
        }
    }
}

/// Room for `more` bytes in `line`, its capacity never past `limit`: growth doubles, up to
/// the limit and no further.
pub(crate) fn reserve_within(line: &mut Vec<u8>, more: usize, limit: usize) {
    let need = line.len() + more;
    if need > line.capacity() {
        let room = need.max(line.capacity() * 2).min(limit).max(need);
        line.reserve_exact(room - line.len());
    }
}

/// One line of a recording.
#[derive(Debug)]
pub enum Line {
    Sample(Box<NodeSample>),
    /// Not a sample: why.
    Bad(String),
    /// The last line, cut short.
    Truncated,
    /// A line over the limit, this many bytes long: skipped unread.
    Oversized(u64),
    /// Corrupt compressed data, skipped (it holds no line number: its lines are not known).
    Corrupt(Corruption),
    /// Format 2: a delta that refers to a state this reader never saw (its keyframe was
    /// lost): skipped, up to the next keyframe.
    Unanchored,
}

/// The text as lines (format 1, JSON lines) or as records (format 2).
enum Body {
    Json(RawLines),
    Records {
        records: super::v2::Records,
        /// Boxed: a decoder's state is large beside the JSON reader's.
        decoder: Box<super::v2::Decoder>,
        /// The cut at the end was said.
        said_cut: bool,
    },
}

/// Text looked through for a format-2 magic when its first bytes are neither the magic nor
/// JSON: more than a first frame of five minutes holds.
const MAGIC_SEARCH: usize = 4 << 20;

/// Whether the text is format 2: it begins with the magic, or with the magic but for a few
/// bits; or it does not begin as JSON lines do (`{`) and a magic follows within
/// [`MAGIC_SEARCH`] (the first frame's magic damaged: reading goes on at the next
/// frame, and says what it skipped, where JSON lines would have lost every frame).
fn is_format_2(decoder: &mut Decoder) -> Result<bool, ReadError> {
    let magic = super::v2::MAGIC;
    let head = decoder.peek(magic.len())?;
    if head.starts_with(magic) {
        return Ok(true);
    }
    let bits_apart: u32 = head
        .iter()
        .zip(magic)
        .map(|(a, b)| (a ^ b).count_ones())
        .sum();
    if head.len() >= magic.len() && bits_apart <= 8 {
        return Ok(true);
    }
    if head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') || head.is_empty() {
        return Ok(false);
    }
    let more = decoder.peek(MAGIC_SEARCH)?;
    Ok(memchr::memmem::find(&more, magic).is_some())
}

/// A line read and not yet returned, with what [`Lines`] says of it once returned.
struct Read1 {
    number: u64,
    line: Line,
    bytes: u64,
    keyframe: Option<u64>,
}

/// A sample this far or farther ahead of the samples before it (and of [`JUMP_INTERVALS`]
/// of its interval) is held until the next is read: when that one goes back, the far one is
/// a clock's jump, not the time going on, and it alone is skipped.
pub(crate) const JUMP_SECS: f64 = 300.0;
const JUMP_INTERVALS: f64 = 30.0;

/// The lines of a recording, in order, each with its number (from 1).
///
/// A sample whose time or interval cannot be ([`super::impossible_time`]) is said as a bad
/// line. A sample far ahead of those before it and after it (one dated a year ahead in a
/// recording of an hour) is said as a bad line too: one clock that jumped costs that sample,
/// not the rest of the recording, which would all be earlier than it.
pub struct Lines {
    body: Body,
    progress: Progress,
    /// The number of the last line read (lines read ahead included).
    read_number: u64,
    /// The length of the last line returned.
    last_bytes: u64,
    /// Format 2: the last line returned is a keyframe that begins the zstd frame at this
    /// file offset ([`Lines::keyframe_at`]).
    keyframe: Option<u64>,
    /// Read ahead, to be returned in order: a sample far ahead is held here while the line
    /// after it is read.
    ahead: std::collections::VecDeque<Read1>,
    /// The time of the last sample returned.
    last_time: Option<f64>,
    /// The number of the last line returned or skipped (lines read ahead are not counted).
    returned: u64,
}

impl Lines {
    /// Opens the recording at `path` (`-`: standard input).
    pub fn open(path: &Path) -> Result<Lines, ReadError> {
        let (bytes, progress) = super::open_bytes(path)?;
        Lines::new(bytes, progress)
    }

    /// The lines of any byte stream, decompressed as its first bytes say; `progress` counts
    /// the bytes read.
    pub fn new(bytes: Box<dyn Read + Send>, progress: Progress) -> Result<Lines, ReadError> {
        Lines::with_limits(bytes, progress, LINE_LIMIT, NO_LINE_END_LIMIT)
    }

    /// As [`Lines::new`], with a line limit of `limit` bytes and reading given up after
    /// `give_up` bytes without a line end.
    pub fn with_limits(
        bytes: Box<dyn Read + Send>,
        progress: Progress,
        limit: usize,
        give_up: u64,
    ) -> Result<Lines, ReadError> {
        let mut decoder = Decoder::new(Input::new(bytes, progress.clone()))?;
        let body = if is_format_2(&mut decoder)? {
            Body::Records {
                records: super::v2::Records::new(decoder, &[], limit),
                decoder: Box::new(super::v2::Decoder::new()),
                said_cut: false,
            }
        } else {
            Body::Json(RawLines::new(decoder, limit, give_up))
        };
        Ok(Lines {
            body,
            progress,
            read_number: 0,
            last_bytes: 0,
            keyframe: None,
            ahead: Default::default(),
            last_time: None,
            returned: 0,
        })
    }

    /// The lines of the format-2 recording at `path` from the keyframe that begins the zstd
    /// frame at file offset `offset` (as [`Lines::keyframe_at`] said of line `number + 1`
    /// of an earlier reading), numbered on from `number`: a seek that reads a few minutes
    /// rather than everything before them. An error when no such keyframe begins there (the
    /// file is not the one read before).
    pub(crate) fn open_at(path: &Path, offset: u64, number: u64) -> Result<Lines, ReadError> {
        use std::io::{Seek, SeekFrom};
        let mut file = std::fs::File::open(path)?;
        let total = file.metadata()?.len();
        file.seek(SeekFrom::Start(offset))?;
        let progress = Progress::new(Some(total.saturating_sub(offset)));
        let input = Input::new(Box::new(file), progress.clone()).starting_at(offset);
        let mut decoder = Decoder::new(input)?;
        let magic = super::v2::MAGIC;
        if !decoder.peek(magic.len())?.starts_with(magic) || decoder.data_frame() != Some(offset) {
            return Err(ReadError::Io(std::io::Error::other(format!(
                "no format-2 frame begins at byte {offset}"
            ))));
        }
        Ok(Lines {
            body: Body::Records {
                records: super::v2::Records::new(decoder, &[], LINE_LIMIT),
                decoder: Box::new(super::v2::Decoder::new()),
                said_cut: false,
            },
            progress,
            read_number: number,
            last_bytes: 0,
            keyframe: None,
            ahead: Default::default(),
            last_time: None,
            returned: number,
        })
    }

    /// Format 2: where a reader can start to read from the last line returned on, when that
    /// line is a keyframe that begins a zstd frame: the frame's file offset, for
    /// [`Lines::open_at`].
    pub(crate) fn keyframe_at(&self) -> Option<u64> {
        self.keyframe
    }

    /// The number of the last line returned or skipped.
    pub(crate) fn number(&self) -> u64 {
        self.returned
    }

    /// The length in bytes of the last line returned (what its sample weighs, about).
    pub fn last_line_bytes(&self) -> u64 {
        self.last_bytes
    }

    /// Whether the text ended inside a compressed frame, or inside a record (known once
    /// the end is reached).
    pub fn cut(&self) -> bool {
        match &self.body {
            Body::Json(raw) => raw.cut,
            Body::Records { records, .. } => records.cut,
        }
    }

    /// How far reading the file has come.
    pub(crate) fn progress(&self) -> &Progress {
        &self.progress
    }

    /// Skips lines, unread, until `number` lines have gone by.
    pub(crate) fn skip_to(&mut self, number: u64) -> Result<(), ReadError> {
        while self.returned < number {
            let Some(read) = self.ahead.pop_front() else {
                break;
            };
            self.returned = read.number;
            if let Line::Sample(s) = read.line {
                self.last_time = Some(s.time);
                self.recycle(s);
            }
        }
        while self.read_number < number {
            match &mut self.body {
                Body::Json(raw) => match raw.next()? {
                    None => break,
                    Some(Raw::Corrupt(_)) => {}
                    Some(_) => self.read_number += 1,
                },
                // Records are read through, unkept: each delta needs the state before it.
                Body::Records { .. } => {
                    if self.read_line()?.is_none() {
                        break;
                    }
                }
            }
        }
        self.returned = self.returned.max(self.read_number);
        // What the skipped lines said of the time is not known.
        self.last_time = None;
        Ok(())
    }

    /// Gives back a sample these lines yielded, once used: a format-2 recording decodes the
    /// next into it, reusing its strings and vectors (JSON lines drop it).
    pub(crate) fn recycle(&mut self, sample: Box<NodeSample>) {
        if let Body::Records { decoder, .. } = &mut self.body {
            decoder.recycle(sample);
        }
    }

    /// The next line that is not blank, with its number (a corruption: the number of the
    /// line before it); `None` at the end.
    pub fn next_line(&mut self) -> Result<Option<(u64, Line)>, ReadError> {
        let first = match self.ahead.pop_front() {
            Some(read) => read,
            None => match self.read_checked()? {
                Some(read) => read,
                None => return Ok(None),
            },
        };
        let first = match self.far_ahead(&first) {
            // Held: the next line tells whether the time went on or the clock jumped.
            Some(far) => match self.read_checked()? {
                Some(next) => {
                    let back = matches!(&next.line, Line::Sample(s) if s.time < far);
                    self.ahead.push_back(next);
                    if back {
                        self.lost_to_a_jump(first)
                    } else {
                        first
                    }
                }
                None => first,
            },
            None => first,
        };
        if let Line::Sample(s) = &first.line {
            self.last_time = Some(s.time);
        }
        self.last_bytes = first.bytes;
        self.keyframe = first.keyframe;
        self.returned = first.number;
        Ok(Some((first.number, first.line)))
    }

    /// The time of a sample that stands far ahead of the last returned, if `read` is one.
    fn far_ahead(&self, read: &Read1) -> Option<f64> {
        let (Line::Sample(s), Some(last)) = (&read.line, self.last_time) else {
            return None;
        };
        let jump = JUMP_SECS.max(JUMP_INTERVALS * s.interval);
        (s.time - last > jump).then_some(s.time)
    }

    /// A sample far ahead of those around it, said as a bad line.
    fn lost_to_a_jump(&mut self, read: Read1) -> Read1 {
        let Line::Sample(sample) = read.line else {
            return read;
        };
        let ahead = sample.time - self.last_time.unwrap_or(sample.time);
        let error = format!(
            "its time is {} ahead of the samples before and after it: a clock that jumped",
            crate::units::age(ahead)
        );
        self.recycle(sample);
        Read1 {
            line: Line::Bad(error),
            bytes: 0,
            ..read
        }
    }

    /// The next line read, a sample whose time or interval cannot be said as a bad line.
    fn read_checked(&mut self) -> Result<Option<Read1>, ReadError> {
        let Some((number, line)) = self.read_line()? else {
            return Ok(None);
        };
        let line = match line {
            Line::Sample(sample) => match super::impossible_time(sample.time, sample.interval) {
                Some(why) => {
                    self.recycle(sample);
                    Line::Bad(why)
                }
                None => Line::Sample(sample),
            },
            other => other,
        };
        Ok(Some(Read1 {
            number,
            line,
            bytes: self.last_bytes,
            keyframe: self.keyframe,
        }))
    }

    /// The next line as the text holds it.
    fn read_line(&mut self) -> Result<Option<(u64, Line)>, ReadError> {
        let raw = match &mut self.body {
            Body::Json(raw) => raw,
            Body::Records {
                records,
                decoder,
                said_cut,
            } => {
                return next_record(
                    records,
                    decoder,
                    said_cut,
                    &mut self.read_number,
                    &mut self.last_bytes,
                    &mut self.keyframe,
                )
            }
        };
        loop {
            let Some(raw) = raw.next()? else {
                return Ok(None);
            };
            let line = match raw {
                Raw::Corrupt(c) => {
                    self.last_bytes = 0;
                    return Ok(Some((self.read_number, Line::Corrupt(c))));
                }
                Raw::Oversized(bytes) => {
                    self.read_number += 1;
                    self.last_bytes = 0;
                    return Ok(Some((self.read_number, Line::Oversized(bytes))));
                }
                Raw::Junk(bytes) => {
                    self.read_number += 1;
                    self.last_bytes = 0;
                    let error = format!(
                        "{} long, and not a JSON object: skipped unread",
                        crate::units::bytes(bytes)
                    );
                    return Ok(Some((self.read_number, Line::Bad(error))));
                }
                Raw::Line(line) => line,
            };
            self.read_number += 1;
            self.last_bytes = line.len() as u64;
            let text = line.trim_ascii();
            if text.is_empty() {
                continue;
            }
            let parsed = match serde_json::from_slice::<NodeSample>(text) {
                Ok(sample) => Line::Sample(Box::new(sample)),
                Err(e) if e.is_eof() && !line.ends_with(b"\n") => {
                    // No newline: the last line. Unfinished JSON there is a cut, not an error.
                    Line::Truncated
                }
                Err(e) => Line::Bad(e.to_string()),
            };
            return Ok(Some((self.read_number, parsed)));
        }
    }
}

/// The next record of a format-2 recording, as a line: its number counts records.
fn next_record(
    records: &mut super::v2::Records,
    decoder: &mut super::v2::Decoder,
    said_cut: &mut bool,
    number: &mut u64,
    last_bytes: &mut u64,
    keyframe: &mut Option<u64>,
) -> Result<Option<(u64, Line)>, ReadError> {
    use super::v2::{Decoded, Raw as Record};
    *keyframe = None;
    let Some(raw) = records.next_record()? else {
        if records.cut && !*said_cut {
            *last_bytes = 0;
            *said_cut = true;
            return Ok(Some((*number, Line::Truncated)));
        }
        return Ok(None);
    };
    *last_bytes = 0;
    let line = match raw {
        Record::Corrupt(c) => {
            decoder.lose_state();
            return Ok(Some((*number, Line::Corrupt(c))));
        }
        Record::Bad(why) => {
            decoder.lose_state();
            Line::Bad(why)
        }
        Record::Record {
            tag,
            payload,
            frame_at,
            ..
        } => {
            *last_bytes = payload.len() as u64;
            match decoder.decode(tag, payload) {
                Decoded::Sample(s) => {
                    if tag == super::v2::KEYFRAME {
                        *keyframe = frame_at;
                    }
                    Line::Sample(s)
                }
                Decoded::Unanchored => Line::Unanchored,
                Decoded::Bad(why) => Line::Bad(why),
            }
        }
    };
    *number += 1;
    Ok(Some((*number, line)))
}

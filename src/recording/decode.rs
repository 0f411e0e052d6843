//! A recording's text out of its bytes: as they are (plain), or decompressed (zstd frames or
//! gzip members, one after another, as appending writes them).
//!
//! What goes wrong is told apart and said where it happened:
//! - the file ends inside a frame (a killed writer, a full disk): the text ends there, a cut;
//! - the compressed data is corrupt: [`Corruption`] names the file offset where decoding
//!   failed, and decoding goes on from the next frame (or gzip member) after it, the bytes in
//!   between skipped and counted;
//! - a zstd frame needs more window memory than can be had: a [`ReadError`], with how to
//!   recompress it.
//!
//! zstd frames with windows up to 2 GiB (`zstd --long=31`, the most zstd itself writes) are
//! read.

use super::input::Input;
use super::{Compression, ReadError, GZIP_MAGIC, ZSTD_MAGIC};
use serde::Serialize;
use std::io::{self, Read};

/// The largest zstd window read: 2^31 bytes, the most zstd writes (`--long=31`).
pub(crate) const ZSTD_WINDOW_LOG_MAX: u32 = 31;

/// What a zstd frame's first step is given: its magic and descriptor; the decoder then says
/// how much it wants next (the rest of the header, then a block at a time).
const ZSTD_FIRST_STEP: usize = 5;
/// The size of a zstd block header.
const BLOCK_HEADER: usize = 3;

/// Corrupt compressed data, and how much of the file was skipped for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Corruption {
    /// The file offset where decoding failed (the damage is at or before it, in the same
    /// frame).
    pub at: u64,
    /// Where decoding went on: the next frame (or gzip member) found after it; `None` when
    /// none was found before the end of the file.
    pub resumed_at: Option<u64>,
    /// What the decoder said.
    pub(crate) error: String,
}

/// What the decoder has for its reader next.
#[derive(Debug)]
pub(crate) enum Event {
    /// This many bytes of text, written to the buffer given.
    Data(usize),
    Corrupt(Corruption),
    /// The end; `cut` when the file ended inside a frame.
    End {
        cut: bool,
    },
}

/// The text of a recording, in pieces, with what went wrong on the way.
pub(crate) struct Decoder {
    kind: Kind,
    /// Data decoded and not yet handed out, kept when a corruption must be said first.
    held: Vec<u8>,
    /// A corruption found and not yet said: said when decoding goes on (or the file ends),
    /// so that a run of false starts after it reads as one.
    pending: Option<Corruption>,
    /// To say before anything else.
    ready: Option<Corruption>,
    done: Option<bool>,
    /// Events taken by [`Decoder::peek`], given again before anything else, in order.
    replay: std::collections::VecDeque<Peeked>,
    /// The file offset of the zstd frame the last data given came from, and of the frame
    /// `held` came from.
    data_frame: Option<u64>,
    held_frame: Option<u64>,
}

/// An event taken ahead of its reader.
#[derive(Debug)]
enum Peeked {
    /// Data, and the zstd frame it came from.
    Data(Vec<u8>, Option<u64>),
    Corrupt(Corruption),
    End {
        cut: bool,
    },
}

enum Kind {
    Plain(Input),
    Zstd(Box<Zstd>),
    Gzip(Box<Gzip>),
}

struct Zstd {
    input: Input,
    context: zstd::zstd_safe::DCtx<'static>,
    /// Inside a frame: its start's file offset, and the window its header asks for.
    frame: Option<(u64, Option<u64>)>,
    /// What the decoder asked for next: the rest of a header, or the next block whole, so
    /// that each step decodes at most one block and a failure is said at its block.
    want: usize,
    /// The last step filled the buffer it was given: the decoder may hold more.
    full: bool,
    /// After a corruption: the next step looks for the next frame.
    searching: bool,
    /// The file offset of the frame the last step decoded from.
    stepped: Option<u64>,
}

struct Gzip {
    /// The member being read, or the input between members (one of the two).
    member: Option<flate2::bufread::GzDecoder<Input>>,
    input: Option<Input>,
    /// The file offset where the member being read began, and whether it gave any text.
    member_start: u64,
    member_gave: bool,
    searching: bool,
}

impl Decoder {
    pub(crate) fn new(mut input: Input) -> Result<Decoder, ReadError> {
        if input.available().len() < ZSTD_MAGIC.len() {
            while input.available().len() < ZSTD_MAGIC.len() && input.refill()? {}
        }
        let kind = match Compression::sniff(input.available()) {
            Compression::Plain => Kind::Plain(input),
            Compression::Zstd => {
                let mut context = zstd::zstd_safe::DCtx::create();
                context
                    .set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(
                        ZSTD_WINDOW_LOG_MAX,
                    ))
                    .map_err(|code| {
                        ReadError::Io(io::Error::other(zstd::zstd_safe::get_error_name(code)))
                    })?;
                Kind::Zstd(Box::new(Zstd {
                    input,
                    context,
                    frame: None,
                    want: ZSTD_FIRST_STEP,
                    full: false,
                    searching: false,
                    stepped: None,
                }))
            }
            Compression::Gzip => Kind::Gzip(Box::new(Gzip {
                member: None,
                input: Some(input),
                member_start: 0,
                member_gave: false,
                searching: false,
            })),
        };
        Ok(Decoder {
            kind,
            held: Vec::new(),
            pending: None,
            ready: None,
            done: None,
            replay: Default::default(),
            data_frame: None,
            held_frame: None,
        })
    }

    /// The first bytes of the text, at least `n` of them unless it ends (or is corrupt)
    /// first; they are given again by [`Decoder::next`], with whatever was met on the way.
    pub(crate) fn peek(&mut self, n: usize) -> Result<Vec<u8>, ReadError> {
        // What an earlier peek holds first, then more.
        let mut head = Vec::new();
        for peeked in &self.replay {
            match peeked {
                Peeked::Data(data, _) => head.extend_from_slice(data),
                Peeked::Corrupt(_) | Peeked::End { .. } => return Ok(head),
            }
        }
        // As large as the readers' own chunks, so that the text comes in the same pieces.
        let mut out = vec![0u8; 1 << 17];
        while head.len() < n {
            match self.fresh(&mut out)? {
                Event::Data(k) => {
                    head.extend_from_slice(&out[..k]);
                    self.replay
                        .push_back(Peeked::Data(out[..k].to_vec(), self.data_frame));
                }
                Event::Corrupt(c) => {
                    self.replay.push_back(Peeked::Corrupt(c));
                    break;
                }
                Event::End { cut } => {
                    self.replay.push_back(Peeked::End { cut });
                    break;
                }
            }
        }
        Ok(head)
    }

    /// Whether the text comes in compressed frames (zstd, gzip), whose end tells a clean end
    /// from a cut; plain text ends alike either way.
    pub(crate) fn framed(&self) -> bool {
        !matches!(self.kind, Kind::Plain(_))
    }

    /// The file offset of the zstd frame that the last data given came from (`None`: not
    /// zstd): where a reader can start again to read that frame alone.
    pub(crate) fn data_frame(&self) -> Option<u64> {
        self.data_frame
    }

    /// The file offset reached.
    pub(crate) fn offset(&self) -> u64 {
        match &self.kind {
            Kind::Plain(input) => input.offset(),
            Kind::Zstd(z) => z.input.offset(),
            Kind::Gzip(g) => match (&g.member, &g.input) {
                (Some(member), _) => member.get_ref().offset(),
                (None, Some(input)) => input.offset(),
                (None, None) => 0,
            },
        }
    }

    /// The next piece of text (into `out`), corruption, or the end.
    pub(crate) fn next(&mut self, out: &mut [u8]) -> Result<Event, ReadError> {
        if let Some(peeked) = self.replay.pop_front() {
            return Ok(match peeked {
                Peeked::Data(mut data, frame) => {
                    let n = data.len().min(out.len());
                    out[..n].copy_from_slice(&data[..n]);
                    self.data_frame = frame;
                    if n < data.len() {
                        data.drain(..n);
                        self.replay.push_front(Peeked::Data(data, frame));
                    }
                    Event::Data(n)
                }
                Peeked::Corrupt(c) => Event::Corrupt(c),
                Peeked::End { cut } => Event::End { cut },
            });
        }
        self.fresh(out)
    }

    /// The next piece of text past what was peeked.
    fn fresh(&mut self, out: &mut [u8]) -> Result<Event, ReadError> {
        loop {
            if let Some(c) = self.ready.take() {
                return Ok(Event::Corrupt(c));
            }
            if !self.held.is_empty() {
                let n = self.held.len().min(out.len());
                out[..n].copy_from_slice(&self.held[..n]);
                self.held.drain(..n);
                self.data_frame = self.held_frame;
                return Ok(Event::Data(n));
            }
            if let Some(cut) = self.done {
                return Ok(Event::End { cut });
            }
            let step = match &mut self.kind {
                Kind::Plain(input) => match input.read(out)? {
                    0 => Step::End { cut: false },
                    n => Step::Data(n),
                },
                Kind::Zstd(z) => z.step(out)?,
                Kind::Gzip(g) => g.step(out)?,
            };
            let frame = match &self.kind {
                Kind::Zstd(z) => z.stepped,
                _ => None,
            };
            match step {
                Step::Data(n) => {
                    if let Some(c) = self.pending.take() {
                        // Said first; the data waits.
                        self.held.extend_from_slice(&out[..n]);
                        self.held_frame = frame;
                        return Ok(Event::Corrupt(c));
                    }
                    self.data_frame = frame;
                    return Ok(Event::Data(n));
                }
                Step::DataThenCorrupt(n, corruption) => {
                    self.corrupt(corruption);
                    if n > 0 {
                        self.data_frame = frame;
                        return Ok(Event::Data(n));
                    }
                }
                Step::Resumed(at) => {
                    if let Some(c) = &mut self.pending {
                        c.resumed_at = at;
                    }
                    if at.is_none() {
                        self.ready = self.pending.take();
                        self.done = Some(false);
                    }
                }
                Step::End { cut } => {
                    self.ready = self.pending.take();
                    self.done = Some(cut && self.ready.is_none());
                }
                Step::Again => {}
            }
        }
    }

    /// A corruption: merged with one not yet said (nothing was decoded in between).
    fn corrupt(&mut self, found: Corruption) {
        if self.pending.is_none() {
            self.pending = Some(found);
        }
    }
}

/// What one decoding step gave.
enum Step {
    Data(usize),
    /// Data decoded before a corruption was found (possibly none).
    DataThenCorrupt(usize, Corruption),
    /// After a corruption, the offset decoding goes on from (`None`: the file ended first).
    Resumed(Option<u64>),
    End {
        cut: bool,
    },
    /// Nothing yet: step again.
    Again,
}

/// The window a zstd frame header asks for, in bytes (`None`: not told, a single-segment
/// frame, whose window is its content).
pub(crate) fn zstd_window(header: &[u8]) -> Option<u64> {
    let descriptor = *header.get(4)?;
    if descriptor & 0x20 != 0 {
        return None;
    }
    let window = *header.get(5)?;
    let log = 10 + u32::from(window >> 3);
    let base = 1u64 << log;
    Some(base + base / 8 * u64::from(window & 7))
}

impl Zstd {
    fn step(&mut self, out: &mut [u8]) -> Result<Step, ReadError> {
        use zstd::zstd_safe::{InBuffer, OutBuffer};
        if self.searching {
            self.searching = false;
            return Ok(Step::Resumed(self.input.seek_to(&ZSTD_MAGIC, 0, |_| true)?));
        }
        if self.input.available().is_empty() && !self.input.refill()? && !self.full {
            return Ok(Step::End {
                cut: self.frame.is_some(),
            });
        }
        if self.frame.is_none() {
            // The header whole, to say its window if need be.
            while self.input.available().len() < 14 && self.input.refill()? {}
            self.frame = Some((self.input.offset(), zstd_window(self.input.available())));
            self.want = ZSTD_FIRST_STEP;
        }
        // The decoder's wish includes the next block's header, read ahead: it is given
        // apart, so that a damaged header never takes the block before it down with it.
        let want = match self.want {
            w if w > BLOCK_HEADER => w - BLOCK_HEADER,
            w => w.max(1),
        };
        while self.input.available().len() < want && self.input.refill()? {}
        let start = self.input.offset();
        self.stepped = self.frame.map(|(at, _)| at);
        let available = self.input.available();
        let chunk = &available[..available.len().min(want)];
        let offered = chunk.len();
        let mut source = InBuffer::around(chunk);
        let mut sink = OutBuffer::around(out);
        let result = self.context.decompress_stream(&mut sink, &mut source);
        let (read, written) = (source.pos(), sink.pos());
        self.full = written == out.len();
        match result {
            Ok(hint) => {
                self.input.consume(read);
                self.want = hint;
                if hint == 0 {
                    self.frame = None;
                }
                if written > 0 {
                    Ok(Step::Data(written))
                } else if read == 0 && offered > 0 && !self.full {
                    // Input offered and none taken, nothing given: no way on in this frame.
                    Ok(self.failed(start, read, "no progress".into()))
                } else {
                    Ok(Step::Again)
                }
            }
            Err(code) => {
                use zstd::zstd_safe::zstd_sys::{ZSTD_ErrorCode, ZSTD_getErrorCode};
                // SAFETY: ZSTD_getErrorCode only reads the code it is given.
                let kind = unsafe { ZSTD_getErrorCode(code) };
                let too_large = kind == ZSTD_ErrorCode::ZSTD_error_frameParameter_windowTooLarge;
                if too_large || kind == ZSTD_ErrorCode::ZSTD_error_memory_allocation {
                    let (at, window) = self.frame.unwrap_or((start, None));
                    return Err(ReadError::Window {
                        at,
                        window,
                        too_large,
                    });
                }
                let error = zstd::zstd_safe::get_error_name(code).to_string();
                Ok(match self.failed(start, read, error) {
                    Step::DataThenCorrupt(_, c) => Step::DataThenCorrupt(written, c),
                    other => other,
                })
            }
        }
    }

    /// Decoding failed in the step that began at `start` (`read` bytes taken): said at that
    /// step, the header or block that failed; the decoder is reset, and the next step looks
    /// for the next frame.
    fn failed(&mut self, start: u64, read: usize, error: String) -> Step {
        self.frame = None;
        let _ = self
            .context
            .reset(zstd::zstd_safe::ResetDirective::SessionOnly);
        self.full = false;
        // The next frame is looked for from here on (past this step's first byte, where the
        // failed frame may have begun).
        self.input.consume(read.max(1));
        self.searching = true;
        Step::DataThenCorrupt(
            0,
            Corruption {
                at: start,
                resumed_at: None,
                error,
            },
        )
    }
}

/// The start of a gzip member: its magic, deflate, and no reserved flag set.
fn gzip_member_starts(bytes: &[u8]) -> bool {
    bytes.len() >= 4 && bytes[..2] == GZIP_MAGIC && bytes[2] == 8 && bytes[3] & 0xE0 == 0
}

impl Gzip {
    fn step(&mut self, out: &mut [u8]) -> Result<Step, ReadError> {
        if self.searching {
            self.searching = false;
            let Some(input) = self.input.as_mut() else {
                return Ok(Step::Resumed(None));
            };
            return Ok(Step::Resumed(input.seek_to(
                &GZIP_MAGIC,
                2,
                gzip_member_starts,
            )?));
        }
        let member = match &mut self.member {
            Some(member) => member,
            None => {
                let Some(mut input) = self.input.take() else {
                    return Ok(Step::End { cut: false });
                };
                if input.available().is_empty() && !input.refill()? {
                    self.input = Some(input);
                    return Ok(Step::End { cut: false });
                }
                self.member_start = input.offset();
                self.member_gave = false;
                self.member.insert(flate2::bufread::GzDecoder::new(input))
            }
        };
        match member.read(out) {
            Ok(0) => {
                // The member ended, its trailer checked; the next one follows, if any.
                self.input = self.member.take().map(|m| m.into_inner());
                Ok(Step::Again)
            }
            Ok(n) => {
                self.member_gave = true;
                Ok(Step::Data(n))
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(Step::Again),
            Err(e) => {
                let Some(member) = self.member.take() else {
                    return Ok(Step::Again);
                };
                let mut input = member.into_inner();
                // A member that gave nothing is said where it begins (its header, or its
                // first block, is bad); else where the decoder had come to.
                let at = if self.member_gave {
                    input.offset()
                } else {
                    self.member_start
                };
                let at_end = input.available().is_empty() && !input.refill()?;
                if at_end && e.kind() == io::ErrorKind::UnexpectedEof {
                    self.input = Some(input);
                    return Ok(Step::End { cut: true });
                }
                if input.offset() == self.member_start {
                    input.consume(1);
                }
                self.input = Some(input);
                self.searching = true;
                Ok(Step::DataThenCorrupt(
                    0,
                    Corruption {
                        at,
                        resumed_at: None,
                        error: e.to_string(),
                    },
                ))
            }
        }
    }
}

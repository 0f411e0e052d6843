//! A format-2 recording's records out of its text (the decompressed stream), each checked by
//! its length and CRC-32, memory held to one record whatever the input.
//!
//! A record cut by the end of the text is the cut; a record that fails its check, or bytes
//! that are not a record, are said once and skipped to the next frame's magic (the next
//! keyframe); corrupt compressed data is passed on as it came, and reading goes on at the
//! next magic too.

use super::{crc32, DELTA, KEYFRAME, MAGIC};
use crate::recording::decode::{Corruption, Decoder, Event};
use crate::recording::ReadError;

const CHUNK: usize = 1 << 17;

/// What the text gave next.
#[derive(Debug, PartialEq)]
pub(crate) enum Raw<'a> {
    /// A record checked whole: its tag and payload. `framed`: it began a frame (after the
    /// magic); `frame_at`: the file offset of the zstd frame that magic began, where a
    /// reader can start to read from this record on.
    Record {
        tag: u8,
        payload: &'a [u8],
        framed: bool,
        frame_at: Option<u64>,
    },
    /// Bytes that are not a whole record (a failed check, a length past the limit, bytes
    /// between frames): why; skipped to the next magic.
    Bad(String),
    Corrupt(Corruption),
}

/// The records of a format-2 text.
pub(crate) struct Records {
    decoder: Decoder,
    chunk: Box<[u8]>,
    buf: Vec<u8>,
    start: usize,
    ended: bool,
    /// The text ended inside a record, or inside a compressed frame.
    pub(crate) cut: bool,
    /// At a record boundary, rather than looking for the next magic.
    synced: bool,
    /// The next record begins a frame; the file offset of the zstd frame whose text began
    /// with that magic.
    framed: bool,
    frame_at: Option<u64>,
    /// The text offset of `buf[0]`.
    base: u64,
    /// Where in the text each zstd frame not yet passed began (text offset, file offset).
    frame_starts: std::collections::VecDeque<(u64, u64)>,
    /// The zstd frame the last data came from.
    last_frame: Option<u64>,
    /// Bytes passed over while looking for a magic, not yet said.
    skipped: u64,
    limit: usize,
    /// For the record being put together (the text offset where it begins): how far past
    /// its start a magic has been looked for ([`Records::magic_within`]).
    scanned: (u64, usize),
}

fn varint_at(bytes: &[u8]) -> Option<Result<(u64, usize), ()>> {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            return Some(Ok((v, i + 1)));
        }
    }
    if bytes.len() >= 10 {
        Some(Err(()))
    } else {
        None
    }
}

impl Records {
    /// Records from `decoder`, whose text begins with `head` (already taken from it); a
    /// record longer than `limit` is not read.
    pub(crate) fn new(decoder: Decoder, head: &[u8], limit: usize) -> Self {
        Records {
            decoder,
            chunk: vec![0; CHUNK].into_boxed_slice(),
            buf: head.to_vec(),
            start: 0,
            ended: false,
            cut: false,
            synced: false,
            framed: false,
            frame_at: None,
            base: 0,
            frame_starts: Default::default(),
            last_frame: None,
            skipped: 0,
            limit,
            scanned: (u64::MAX, 0),
        }
    }

    /// Whether a frame's magic begins within the first `claimed` bytes of the record at
    /// `start`, past its `header`: a record never holds one, so there the next frame begins
    /// and the record's length, which claims more than its frame holds, is damaged. Bytes
    /// already looked at for this record are not looked at again.
    fn magic_within(&mut self, header: usize, claimed: usize) -> Option<usize> {
        let here = self.base + self.start as u64;
        if self.scanned.0 != here {
            self.scanned = (here, header);
        }
        let from = self.scanned.1.max(header);
        let upto = self.available().len().min(claimed);
        let found = if from < upto {
            memchr::memmem::find(&self.available()[from..upto], MAGIC).map(|at| from + at)
        } else {
            None
        };
        // A magic that ends past what is here begins no earlier than this.
        self.scanned.1 = upto.saturating_sub(MAGIC.len() - 1).max(from);
        found
    }

    /// A magic is taken at `at` of `buf`: the next record begins a frame, and, when the
    /// magic is the first text of a zstd frame, a reader can start there.
    fn magic_at(&mut self, at: usize) {
        let text = self.base + at as u64;
        while self.frame_starts.front().is_some_and(|&(t, _)| t < text) {
            self.frame_starts.pop_front();
        }
        self.frame_at = match self.frame_starts.front() {
            Some(&(t, file)) if t == text => Some(file),
            _ => None,
        };
        self.framed = true;
    }

    fn available(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// More text; `Ok(false)` at its end; a corruption passed on.
    fn fill(&mut self) -> Result<Result<bool, Corruption>, ReadError> {
        if self.ended {
            return Ok(Ok(false));
        }
        match self.decoder.next(&mut self.chunk)? {
            Event::Data(n) => {
                if self.start > 0 {
                    self.buf.drain(..self.start);
                    self.base += self.start as u64;
                    self.start = 0;
                }
                let frame = self.decoder.data_frame();
                if frame.is_some() && frame != self.last_frame {
                    self.frame_starts
                        .extend(frame.map(|file| (self.base + self.buf.len() as u64, file)));
                }
                self.last_frame = frame;
                self.buf.extend_from_slice(&self.chunk[..n]);
                Ok(Ok(true))
            }
            Event::Corrupt(c) => {
                self.base += self.buf.len() as u64;
                self.buf.clear();
                self.frame_starts.clear();
                self.last_frame = None;
                self.start = 0;
                self.synced = false;
                Ok(Err(c))
            }
            Event::End { cut } => {
                self.ended = true;
                self.cut |= cut;
                Ok(Ok(false))
            }
        }
    }

    fn lost(&mut self, why: String) -> Raw<'static> {
        self.synced = false;
        self.start += 1;
        Raw::Bad(why)
    }

    /// The next record, or what stood in its place; `None` at the end.
    pub(crate) fn next_record(&mut self) -> Result<Option<Raw<'_>>, ReadError> {
        loop {
            if !self.synced {
                match memchr::memmem::find(self.available(), MAGIC) {
                    Some(at) => {
                        self.skipped += at as u64;
                        self.magic_at(self.start + at);
                        self.start += at + MAGIC.len();
                        self.synced = true;
                        if self.skipped > 0 {
                            let skipped = std::mem::take(&mut self.skipped);
                            return Ok(Some(Raw::Bad(format!(
                                "{skipped} byte(s) that are not records, skipped to the next keyframe"
                            ))));
                        }
                        continue;
                    }
                    None => {
                        let keep = self.available().len().min(MAGIC.len() - 1);
                        let drop = self.available().len() - keep;
                        self.skipped += drop as u64;
                        self.start += drop;
                        match self.fill()? {
                            Ok(true) => continue,
                            Ok(false) => {
                                self.skipped += keep as u64;
                                self.start = self.buf.len();
                                let skipped = std::mem::take(&mut self.skipped);
                                return Ok((skipped > 0).then(|| {
                                    Raw::Bad(format!(
                                        "{skipped} byte(s) that are not records, to the end"
                                    ))
                                }));
                            }
                            Err(c) => return Ok(Some(Raw::Corrupt(c))),
                        }
                    }
                }
            }
            let Some(&tag) = self.available().first() else {
                match self.fill()? {
                    Ok(true) => continue,
                    Ok(false) => return Ok(None),
                    Err(c) => return Ok(Some(Raw::Corrupt(c))),
                }
            };
            if tag == MAGIC[0] {
                let n = self.available().len().min(MAGIC.len());
                if self.available()[..n] != MAGIC[..n] {
                    return Ok(Some(
                        self.lost(format!("a record of unknown kind {tag:#04x}")),
                    ));
                }
                if n < MAGIC.len() {
                    match self.fill()? {
                        Ok(true) => continue,
                        Ok(false) => {
                            self.cut = true;
                            return Ok(None);
                        }
                        Err(c) => return Ok(Some(Raw::Corrupt(c))),
                    }
                }
                self.magic_at(self.start);
                self.start += MAGIC.len();
                continue;
            }
            if tag != KEYFRAME && tag != DELTA {
                return Ok(Some(
                    self.lost(format!("a record of unknown kind {tag:#04x}")),
                ));
            }
            let (len, header) = match varint_at(&self.available()[1..]) {
                Some(Ok((len, used))) => (len, 1 + used),
                Some(Err(())) => {
                    return Ok(Some(self.lost("a record length that does not read".into())))
                }
                None => match self.fill()? {
                    Ok(true) => continue,
                    Ok(false) => {
                        self.cut = true;
                        return Ok(None);
                    }
                    Err(c) => return Ok(Some(Raw::Corrupt(c))),
                },
            };
            if len > self.limit as u64 {
                return Ok(Some(self.lost(format!(
                    "a record of {len} bytes, over the {} limit",
                    self.limit
                ))));
            }
            let total = header + len as usize + 4;
            if self.available().len() < total {
                if let Some(next) = self.magic_within(header, total) {
                    // Skipped to the next frame's magic, where reading goes on.
                    self.start += next;
                    self.synced = false;
                    return Ok(Some(Raw::Bad(format!(
                        "a record of {len} bytes that runs past the next keyframe (its length is damaged): {next} bytes skipped to it"
                    ))));
                }
                match self.fill()? {
                    Ok(true) => continue,
                    // The compressed text was cut (a writer killed, a disk full): the record
                    // in flight is the cut. Plain text tells no cut from a clean end.
                    Ok(false) if self.cut || !self.decoder.framed() => {
                        self.cut = true;
                        return Ok(None);
                    }
                    // Its frames ended whole, inside a record: the record's length is
                    // damaged.
                    Ok(false) => {
                        let left = self.available().len();
                        self.start = self.buf.len();
                        self.synced = false;
                        return Ok(Some(Raw::Bad(format!(
                            "a record of {len} bytes that runs past the end of the recording ({left} bytes left): its length is damaged"
                        ))));
                    }
                    Err(c) => return Ok(Some(Raw::Corrupt(c))),
                }
            }
            let bytes = &self.buf[self.start..self.start + total];
            let body = &bytes[..total - 4];
            let crc = u32::from_le_bytes([
                bytes[total - 4],
                bytes[total - 3],
                bytes[total - 2],
                bytes[total - 1],
            ]);
            if crc32(body) != crc {
                // A damaged record whose length runs over the next frame's magic would take
                // that frame with it: reading goes on at the magic instead.
                if let Some(next) = self.magic_within(header, total) {
                    self.start += next;
                    self.synced = false;
                    return Ok(Some(Raw::Bad(format!(
                        "a record of {len} bytes whose CRC-32 does not match, running past the next keyframe (its length is damaged): {next} bytes skipped to it"
                    ))));
                }
                // Its length is taken at its word: the records after it are read (and the
                // deltas among them, whose state is lost with it, counted) up to the next
                // keyframe. A false length lands on a byte that is no record: then the next
                // magic is looked for.
                self.start += total;
                self.framed = false;
                return Ok(Some(Raw::Bad(format!(
                    "a record of {len} bytes whose CRC-32 does not match"
                ))));
            }
            let at = self.start;
            self.start += total;
            let framed = std::mem::take(&mut self.framed);
            let frame_at = self.frame_at.take().filter(|_| framed);
            return Ok(Some(Raw::Record {
                tag,
                payload: &self.buf[at + header..at + total - 4],
                framed,
                frame_at,
            }));
        }
    }
}

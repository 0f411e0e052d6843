//! What one connection may cost: lines of bounded length, and token buckets on lines and
//! bytes (PROTOCOL.md, "What the monitor checks").

use super::protocol::MAX_LINE_BYTES;
use crate::sample::feed::FeedCounters;
use std::time::{Duration, Instant};

/// One complete line; or a line that grew past the limit (said once, as soon as it does, with
/// its bytes so far), then the further bytes of it that are skipped, to its newline.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LineEvent<'a> {
    Line(&'a [u8]),
    Oversized { bytes: usize },
    Skipped { bytes: usize },
}

/// Splits a byte stream into lines of at most [`MAX_LINE_BYTES`] (with the `\n`), never
/// buffering more than that. A line past the limit is told at once, not at its newline: a
/// peer that streams bytes without one is seen, and its bytes are counted as they come.
#[derive(Default)]
pub(crate) struct LineReader {
    buf: Vec<u8>,
    /// Inside a line that is too long: its bytes are skipped up to its newline.
    discarding: bool,
}

impl LineReader {
    pub(crate) fn push(&mut self, mut chunk: &[u8], mut on_line: impl FnMut(LineEvent<'_>)) {
        while !chunk.is_empty() {
            let newline = chunk.iter().position(|&b| b == b'\n');
            if self.discarding {
                let Some(newline) = newline else {
                    on_line(LineEvent::Skipped { bytes: chunk.len() });
                    return;
                };
                on_line(LineEvent::Skipped { bytes: newline + 1 });
                self.discarding = false;
                chunk = &chunk[newline + 1..];
                continue;
            }
            let Some(newline) = newline else {
                if self.buf.len() + chunk.len() >= MAX_LINE_BYTES {
                    on_line(LineEvent::Oversized {
                        bytes: self.buf.len() + chunk.len(),
                    });
                    self.discarding = true;
                    self.buf = Vec::new();
                } else {
                    self.append(chunk);
                }
                return;
            };
            let (head, rest) = (&chunk[..newline], &chunk[newline + 1..]);
            if self.buf.len() + newline + 1 > MAX_LINE_BYTES {
                on_line(LineEvent::Oversized {
                    bytes: self.buf.len() + newline + 1,
                });
                self.buf = Vec::new();
            } else if self.buf.is_empty() {
                on_line(LineEvent::Line(head));
            } else {
                self.append(head);
                on_line(LineEvent::Line(&self.buf));
                self.buf.clear();
                if self.buf.capacity() > 16 * 1024 {
                    self.buf = Vec::new(); // an idle feed does not keep a big buffer
                }
            }
            chunk = rest;
        }
    }

    /// Appends to the line so far (which stays within [`MAX_LINE_BYTES`]), growing the buffer
    /// by doubling but never past the limit: `Vec`'s own doubling would hold up to twice it.
    fn append(&mut self, bytes: &[u8]) {
        let need = self.buf.len() + bytes.len();
        if need > self.buf.capacity() {
            let room = need
                .next_power_of_two()
                .clamp(need, MAX_LINE_BYTES.max(need));
            self.buf.reserve_exact(room - self.buf.len());
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held for a line not yet ended (at most [`MAX_LINE_BYTES`]).
    pub(crate) fn held(&self) -> usize {
        self.buf.capacity()
    }
}

struct Bucket {
    level: f64,
    burst: f64,
    per_second: f64,
}

impl Bucket {
    fn full(burst: f64, per_second: f64) -> Self {
        Bucket {
            level: burst,
            burst,
            per_second,
        }
    }

    fn refill(&mut self, elapsed: Duration) {
        self.level = (self.level + elapsed.as_secs_f64() * self.per_second).min(self.burst);
    }
}

/// A whole backlog (4 MiB of lines, a few thousand of them) passes at once; then about
/// 20 lines/s and 256 KiB/s (64 devices sampled twice a second) are sustained.
const BURST_LINES: f64 = 8192.0;
pub(crate) const LINES_PER_SECOND: f64 = 20.0;
const BURST_BYTES: f64 = (4 * 1024 * 1024 + 2 * MAX_LINE_BYTES) as f64;
pub(crate) const BYTES_PER_SECOND: f64 = 256.0 * 1024.0;
/// Flood episodes after which the connection is dropped.
pub(crate) const FLOODS_TO_DROP: u64 = 3;

pub(crate) enum Admit {
    Yes,
    /// Over the limit: dropped and counted.
    Limited,
    /// Too many floods: close the connection.
    Drop,
    /// The bytes of one oversized line ran past the byte bucket: close the connection.
    Flood,
}

/// Token buckets on lines and bytes. A flood episode starts with the first line dropped
/// after a line was admitted.
pub(crate) struct FloodGuard {
    lines: Bucket,
    bytes: Bucket,
    last: Instant,
    flooding: bool,
}

impl FloodGuard {
    pub(crate) fn new(now: Instant) -> Self {
        FloodGuard {
            lines: Bucket::full(BURST_LINES, LINES_PER_SECOND),
            bytes: Bucket::full(BURST_BYTES, BYTES_PER_SECOND),
            last: now,
            flooding: false,
        }
    }

    pub(crate) fn admit(
        &mut self,
        bytes: usize,
        now: Instant,
        counters: &mut FeedCounters,
    ) -> Admit {
        let elapsed = now.saturating_duration_since(self.last);
        self.last = now;
        self.lines.refill(elapsed);
        self.bytes.refill(elapsed);
        let bytes = bytes as f64;
        if self.lines.level >= 1.0 && self.bytes.level >= bytes {
            self.lines.level -= 1.0;
            self.bytes.level -= bytes;
            self.flooding = false;
            return Admit::Yes;
        }
        counters.rate_limited += 1;
        if !self.flooding {
            self.flooding = true;
            counters.floods += 1;
        }
        if counters.floods >= FLOODS_TO_DROP {
            Admit::Drop
        } else {
            Admit::Limited
        }
    }

    /// Further bytes of a line already counted as oversized: they cost the byte bucket, and
    /// past it the line is a flood (an agent never sends a line over the limit, let alone
    /// megabytes of one).
    pub(crate) fn admit_skipped(
        &mut self,
        bytes: usize,
        now: Instant,
        counters: &mut FeedCounters,
    ) -> Admit {
        let elapsed = now.saturating_duration_since(self.last);
        self.last = now;
        self.lines.refill(elapsed);
        self.bytes.refill(elapsed);
        let bytes = bytes as f64;
        if self.bytes.level >= bytes {
            self.bytes.level -= bytes;
            return Admit::Yes;
        }
        counters.floods += 1;
        Admit::Flood
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(reader: &mut LineReader, chunks: &[&[u8]]) -> Vec<String> {
        let mut out = Vec::new();
        for chunk in chunks {
            reader.push(chunk, |ev| match ev {
                LineEvent::Line(l) => out.push(String::from_utf8_lossy(l).into_owned()),
                LineEvent::Oversized { bytes } => out.push(format!("<oversized {bytes}>")),
                LineEvent::Skipped { bytes } => out.push(format!("<skipped {bytes}>")),
            });
        }
        out
    }

    #[test]
    fn lines_are_split_across_chunks() {
        let mut reader = LineReader::default();
        let got = lines_of(&mut reader, &[b"ab", b"c\nde", b"f\n\ng", b"h\n"]);
        assert_eq!(got, vec!["abc", "def", "", "gh"]);
    }

    #[test]
    fn a_line_of_exactly_the_limit_passes_and_one_byte_more_is_skipped() {
        let mut reader = LineReader::default();
        let exact = vec![b'x'; MAX_LINE_BYTES - 1];
        let got = lines_of(&mut reader, &[&exact[..1000], &exact[1000..], b"\n"]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].len(), MAX_LINE_BYTES - 1);

        let over = vec![b'y'; MAX_LINE_BYTES];
        let got = lines_of(&mut reader, &[&over[..10], &over[10..], b"\nnext\n"]);
        assert_eq!(
            got,
            vec![
                format!("<oversized {MAX_LINE_BYTES}>"),
                "<skipped 1>".to_string(),
                "next".to_string()
            ]
        );
        let whole = [&over[..], b"\nnext\n"].concat();
        let got = lines_of(&mut reader, &[&whole]);
        assert_eq!(
            got,
            vec![
                format!("<oversized {}>", MAX_LINE_BYTES + 1),
                "next".to_string()
            ]
        );
    }

    /// Found by fuzzing (`feed_line`): a line just under the limit, arriving in pieces, had
    /// the buffer grown to 128 KiB by `Vec`'s doubling.
    #[test]
    fn a_line_under_the_limit_in_pieces_holds_no_more_than_the_limit() {
        let mut reader = LineReader::default();
        let piece = vec![b'p'; 1000];
        let mut sent = 0;
        while sent + piece.len() < MAX_LINE_BYTES {
            assert!(lines_of(&mut reader, &[&piece]).is_empty());
            sent += piece.len();
            assert!(reader.held() <= MAX_LINE_BYTES, "{} held", reader.held());
        }
        let got = lines_of(&mut reader, &[b"\n"]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].len(), sent);
    }

    #[test]
    fn a_huge_line_is_never_buffered_and_is_told_as_it_comes() {
        let mut reader = LineReader::default();
        let chunk = vec![b'z'; 1 << 20];
        let first = lines_of(&mut reader, &[&chunk]);
        assert_eq!(
            first,
            vec![format!("<oversized {}>", 1 << 20)],
            "told at once"
        );
        for _ in 1..8 {
            let got = lines_of(&mut reader, &[&chunk]);
            assert_eq!(got, vec![format!("<skipped {}>", 1 << 20)]);
            assert!(reader.held() <= MAX_LINE_BYTES);
        }
        let got = lines_of(&mut reader, &[b"tail\nok\n"]);
        assert_eq!(got, vec!["<skipped 5>".to_string(), "ok".to_string()]);
    }

    #[test]
    fn the_bytes_of_an_endless_line_run_out_the_byte_bucket_and_flood() {
        let start = Instant::now();
        let mut guard = FloodGuard::new(start);
        let mut counters = FeedCounters::default();
        assert!(matches!(
            guard.admit(MAX_LINE_BYTES, start, &mut counters),
            Admit::Yes
        ));
        let mut skipped = 0usize;
        while matches!(guard.admit_skipped(READ, start, &mut counters), Admit::Yes) {
            skipped += READ;
        }
        assert!(
            skipped >= 4 << 20,
            "a whole backlog's worth first: {skipped}"
        );
        assert_eq!(counters.floods, 1);
        // At the sustained rate a slow stream is never a flood: it costs what it is allowed.
        let mut guard = FloodGuard::new(start);
        let mut now = start;
        for _ in 0..1000 {
            now += Duration::from_secs(1);
            assert!(matches!(
                guard.admit_skipped(200 * 1024, now, &mut counters),
                Admit::Yes
            ));
        }
    }

    const READ: usize = 64 * 1024;

    #[test]
    fn a_backlog_burst_passes_then_the_sustained_rate_holds() {
        let start = Instant::now();
        let mut guard = FloodGuard::new(start);
        let mut counters = FeedCounters::default();
        // A full backlog: 4 MiB in 6000 lines at once.
        for _ in 0..6000 {
            assert!(matches!(guard.admit(699, start, &mut counters), Admit::Yes));
        }
        assert_eq!(counters.rate_limited, 0);
        // Then twice a second for ten minutes, a 64-device line each time.
        let mut now = start;
        for _ in 0..1200 {
            now += Duration::from_millis(500);
            assert!(matches!(
                guard.admit(45_000, now, &mut counters),
                Admit::Yes
            ));
        }
        assert_eq!(counters, FeedCounters::default());
    }

    #[test]
    fn floods_are_counted_then_dropped() {
        let start = Instant::now();
        let mut guard = FloodGuard::new(start);
        let mut counters = FeedCounters::default();
        for _ in 0..BURST_LINES as usize {
            assert!(matches!(guard.admit(10, start, &mut counters), Admit::Yes));
        }
        assert!(matches!(
            guard.admit(10, start, &mut counters),
            Admit::Limited
        ));
        assert!(matches!(
            guard.admit(10, start, &mut counters),
            Admit::Limited
        ));
        assert_eq!(
            (counters.rate_limited, counters.floods),
            (2, 1),
            "one episode"
        );
        let later = start + Duration::from_millis(100); // two tokens
        assert!(matches!(guard.admit(10, later, &mut counters), Admit::Yes));
        assert!(matches!(guard.admit(10, later, &mut counters), Admit::Yes));
        assert!(matches!(
            guard.admit(10, later, &mut counters),
            Admit::Limited
        ));
        assert_eq!(counters.floods, 2);
        let later = later + Duration::from_millis(50);
        assert!(matches!(guard.admit(10, later, &mut counters), Admit::Yes));
        assert!(matches!(guard.admit(10, later, &mut counters), Admit::Drop));
        assert_eq!((counters.rate_limited, counters.floods), (4, 3));
    }

    #[test]
    fn bytes_are_limited_too() {
        let start = Instant::now();
        let mut guard = FloodGuard::new(start);
        let mut counters = FeedCounters::default();
        let mut admitted = 0usize;
        while matches!(
            guard.admit(MAX_LINE_BYTES, start, &mut counters),
            Admit::Yes
        ) {
            admitted += 1;
        }
        assert_eq!(admitted, BURST_BYTES as usize / MAX_LINE_BYTES);
        assert_eq!(counters.floods, 1);
    }
}

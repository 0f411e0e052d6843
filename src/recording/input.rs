//! A recording's bytes as they come from the file (or standard input): a buffer that can be
//! refilled and searched, that knows the file offset of every byte it holds, and that counts
//! the bytes read for anyone showing progress.

use std::io::{self, BufRead, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes read from the file at a time (more than a zstd block, 128 KiB, with its header).
const INPUT_BUFFER: usize = 1 << 18;

/// How far the reading of a recording has come: bytes read of the file, and its size where
/// known (a regular file; not a pipe). Shared: the reader counts, another thread shows it.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    read: Arc<AtomicU64>,
    total: Option<u64>,
}

impl Progress {
    pub(crate) fn new(total: Option<u64>) -> Self {
        Progress {
            read: Arc::default(),
            total,
        }
    }

    /// Bytes of the file read so far.
    pub(crate) fn read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// The file's size, where known.
    pub(crate) fn total(&self) -> Option<u64> {
        self.total
    }

    fn add(&self, n: usize) {
        self.read.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// The raw bytes, buffered.
pub(crate) struct Input {
    source: Box<dyn Read + Send>,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// The file offset of `buf[start]`.
    offset: u64,
    eof: bool,
    progress: Progress,
}

impl Input {
    pub(crate) fn new(source: Box<dyn Read + Send>, progress: Progress) -> Self {
        Input {
            source,
            buf: vec![0; INPUT_BUFFER].into_boxed_slice(),
            start: 0,
            end: 0,
            offset: 0,
            eof: false,
            progress,
        }
    }

    /// The input of a source that begins at `offset` of its file (a reader seeked there):
    /// offsets said are the file's.
    pub(crate) fn starting_at(mut self, offset: u64) -> Self {
        self.offset = offset;
        self
    }

    /// The bytes read and not yet consumed.
    pub(crate) fn available(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// The file offset of the first available byte.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.end - self.start);
        self.start += n;
        self.offset += n as u64;
    }

    /// Reads more after what is available (which moves to the front of the buffer); `false`
    /// at the end of the file. With the buffer full of unconsumed bytes, reads nothing.
    pub(crate) fn refill(&mut self) -> io::Result<bool> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            return Ok(true);
        }
        if self.eof {
            return Ok(false);
        }
        loop {
            match self.source.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.end += n;
                    self.progress.add(n);
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Consumes bytes up to the first occurrence of `pattern` at or after the first
    /// available byte for which `accept` holds too (given the bytes from there on, at least
    /// `pattern.len() + extra` of them where the file has them); returns its offset, or
    /// `None` (everything consumed) when the file ends first.
    pub(crate) fn seek_to(
        &mut self,
        pattern: &[u8],
        extra: usize,
        accept: impl Fn(&[u8]) -> bool,
    ) -> io::Result<Option<u64>> {
        let need = pattern.len() + extra;
        loop {
            let available = self.available();
            let n = available.len();
            let mut from = 0;
            // Where the bytes kept for the next round begin: a match not yet judged, or
            // what could still begin one.
            let mut keep = n.saturating_sub(pattern.len() - 1);
            while let Some(i) = memchr::memmem::find(&available[from..], pattern) {
                let at = from + i;
                if n - at < need && !self.eof {
                    keep = at;
                    break;
                }
                if accept(&available[at..]) {
                    self.consume(at);
                    return Ok(Some(self.offset));
                }
                from = at + 1;
                keep = keep.max(from);
            }
            if self.eof {
                self.consume(n);
                return Ok(None);
            }
            self.consume(keep.min(n));
            // At the end of the file, `eof` is set and the next round judges what is left.
            self.refill()?;
        }
    }
}

impl Read for Input {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Input {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.start == self.end {
            self.refill()?;
        }
        Ok(self.available())
    }

    fn consume(&mut self, n: usize) {
        Input::consume(self, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out its bytes a few at a time, as a pipe may.
    struct Trickle(Vec<u8>, usize);

    impl Read for Trickle {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = out.len().min(3).min(self.0.len() - self.1);
            out[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
            self.1 += n;
            Ok(n)
        }
    }

    #[test]
    fn a_pattern_is_found_across_reads_and_judged_with_what_follows() {
        let mut bytes = b"xxMAGIC0yyyyyMAGIC1zz".to_vec();
        bytes.extend(vec![b'-'; 200_000]);
        bytes.extend(b"MAGIC2");
        let mut input = Input::new(Box::new(Trickle(bytes.clone(), 0)), Progress::default());
        let at = input.seek_to(b"MAGIC", 1, |b| b[5] == b'1').expect("read");
        assert_eq!(at, Some(13));
        assert_eq!(&input.available()[..6], b"MAGIC1");
        input.consume(1);
        // Near the end of the file, with fewer bytes than asked for after it.
        let at = input.seek_to(b"MAGIC", 4, |_| true).expect("read");
        assert_eq!(at, Some(bytes.len() as u64 - 6));
        input.consume(1);
        assert_eq!(input.seek_to(b"MAGIC", 0, |_| true).expect("read"), None);
        assert!(input.available().is_empty());
        assert_eq!(input.offset(), bytes.len() as u64);
    }

    #[test]
    fn progress_counts_the_bytes_read() {
        let progress = Progress::new(Some(10));
        let mut input = Input::new(Box::new(&b"0123456789"[..]), progress.clone());
        let mut all = Vec::new();
        input.read_to_end(&mut all).expect("read");
        assert_eq!(all, b"0123456789");
        assert_eq!((progress.read(), progress.total()), (10, Some(10)));
    }
}

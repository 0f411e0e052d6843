//! The bytes of a pickle, read through a buffer, with where each is and the bound on how many.

use super::PickleError;
use std::io::Read;

/// Bytes read with their position, from a buffer refilled from the reader.
pub(super) struct Input<R> {
    inner: R,
    buf: Vec<u8>,
    at: usize,
    len: usize,
    /// Bytes consumed before `buf`.
    base: u64,
    limit: u64,
}

impl<R: Read> Input<R> {
    pub(super) fn new(inner: R, limit: u64) -> Self {
        Input {
            inner,
            buf: vec![0; 256 * 1024],
            at: 0,
            len: 0,
            base: 0,
            limit,
        }
    }

    /// Where the next byte is.
    pub(super) fn pos(&self) -> u64 {
        self.base + self.at as u64
    }

    fn fill(&mut self) -> Result<bool, PickleError> {
        self.base += self.len as u64;
        self.at = 0;
        self.len = 0;
        if self.base > self.limit {
            return Err(PickleError::TooLarge(self.limit));
        }
        loop {
            match self.inner.read(&mut self.buf) {
                Ok(n) => {
                    self.len = n;
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // A compressed stream cut short.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    return Err(PickleError::Truncated(self.pos()))
                }
                Err(e) => return Err(PickleError::Io(e.to_string())),
            }
        }
    }

    pub(super) fn byte(&mut self) -> Result<u8, PickleError> {
        if self.at == self.len && !self.fill()? {
            return Err(PickleError::Truncated(self.pos()));
        }
        let b = self.buf[self.at];
        self.at += 1;
        if self.pos() > self.limit {
            return Err(PickleError::TooLarge(self.limit));
        }
        Ok(b)
    }

    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        let mut out = [0; N];
        for b in &mut out {
            *b = self.byte()?;
        }
        Ok(out)
    }

    /// `n` bytes into `out` (cleared first); what is read grows `out` as it arrives, so a
    /// length that lies costs no more than the bytes that are there.
    pub(super) fn bytes(&mut self, n: u64, out: &mut Vec<u8>) -> Result<(), PickleError> {
        out.clear();
        let mut left = n;
        while left > 0 {
            if self.at == self.len && !self.fill()? {
                return Err(PickleError::Truncated(self.pos()));
            }
            let take = (left.min((self.len - self.at) as u64)) as usize;
            out.extend_from_slice(&self.buf[self.at..self.at + take]);
            self.at += take;
            left -= take as u64;
            if self.pos() > self.limit {
                return Err(PickleError::TooLarge(self.limit));
            }
        }
        Ok(())
    }

    /// `n` bytes read and dropped.
    pub(super) fn skip(&mut self, n: u64) -> Result<(), PickleError> {
        let mut left = n;
        while left > 0 {
            if self.at == self.len && !self.fill()? {
                return Err(PickleError::Truncated(self.pos()));
            }
            let take = (left.min((self.len - self.at) as u64)) as usize;
            self.at += take;
            left -= take as u64;
            if self.pos() > self.limit {
                return Err(PickleError::TooLarge(self.limit));
            }
        }
        Ok(())
    }

    /// A line (protocol 0's text operands), at most 256 bytes.
    pub(super) fn line(&mut self) -> Result<Vec<u8>, PickleError> {
        let mut out = Vec::new();
        loop {
            let b = self.byte()?;
            if b == b'\n' {
                return Ok(out);
            }
            if out.len() < 256 {
                out.push(b);
            }
        }
    }
}

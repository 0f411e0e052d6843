//! A recording's lines, numbered, as samples: a line that is not a sample is reported with
//! its number; a last line cut short (no newline, and its JSON unfinished) is the sample
//! that was in flight when the recorder stopped, not an error.

use crate::recording::Cut;
use crate::sample::NodeSample;
use std::io::BufRead;
use std::path::Path;

/// One line of a recording.
#[derive(Debug)]
pub enum Line {
    Sample(Box<NodeSample>),
    /// Not a sample: why.
    Bad(String),
    /// The last line, cut short.
    Truncated,
}

/// The lines of a recording, in order, each with its number (from 1).
pub struct Lines {
    input: Box<dyn BufRead + Send>,
    cut: Cut,
    number: u64,
    done: bool,
}

impl Lines {
    /// Opens the recording at `path` (plain, zstd or gzip).
    pub fn open(path: &Path) -> std::io::Result<Lines> {
        let (input, cut) = crate::recording::open(path)?;
        Ok(Lines::new(input, cut))
    }

    pub fn new(input: Box<dyn BufRead + Send>, cut: Cut) -> Lines {
        Lines {
            input,
            cut,
            number: 0,
            done: false,
        }
    }

    /// The number of the last line returned or skipped.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Whether a compressed stream ended inside a frame.
    pub fn cut(&self) -> bool {
        self.cut.happened()
    }

    fn raw(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        if self.done {
            return Ok(None);
        }
        let mut line = Vec::new();
        if self.input.read_until(b'\n', &mut line)? == 0 {
            self.done = true;
            return Ok(None);
        }
        Ok(Some(line))
    }

    /// Skips lines, unread, until `number` lines have gone by.
    pub fn skip_to(&mut self, number: u64) -> std::io::Result<()> {
        while self.number < number {
            if self.raw()?.is_none() {
                break;
            }
            self.number += 1;
        }
        Ok(())
    }

    /// The next line that is not blank, with its number; `None` at the end.
    pub fn next_line(&mut self) -> std::io::Result<Option<(u64, Line)>> {
        loop {
            let Some(line) = self.raw()? else {
                return Ok(None);
            };
            self.number += 1;
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
            return Ok(Some((self.number, parsed)));
        }
    }
}

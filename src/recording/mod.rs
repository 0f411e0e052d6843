//! Reading recordings: JSON lines, one raw node sample each, plain or compressed (zstd or
//! gzip, told by the stream's first bytes, not by the file's name). A recording cut short
//! (a killed `strata record`, a full disk) reads up to where it was cut: an unfinished
//! compressed frame ends the stream as a clean end would, and [`Cut::happened`] says so.

use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The first bytes of a zstd frame (`0xFD2FB528`, little-endian).
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// The first bytes of a gzip member.
pub const GZIP_MAGIC: [u8; 2] = [0x1F, 0x8B];

/// How a recording's bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Plain,
    Zstd,
    Gzip,
}

impl Compression {
    /// What the stream's first bytes say it is.
    pub fn sniff(head: &[u8]) -> Compression {
        if head.starts_with(&ZSTD_MAGIC) {
            Compression::Zstd
        } else if head.starts_with(&GZIP_MAGIC) {
            Compression::Gzip
        } else {
            Compression::Plain
        }
    }
}

/// Whether a compressed stream ended inside a frame (the writer was killed, or its disk
/// filled): what was decoded before the cut is read, then the stream ends.
#[derive(Debug, Clone, Default)]
pub struct Cut(Arc<AtomicBool>);

impl Cut {
    pub fn happened(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A decoder whose error ends the stream, noted in its [`Cut`]: an unfinished frame at the
/// end of a recording is its last sample in flight, not a reason to lose the rest.
struct Tolerant<R> {
    inner: R,
    cut: Cut,
    done: bool,
}

impl<R: Read> Read for Tolerant<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        match self.inner.read(buf) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(_) => {
                self.done = true;
                self.cut.0.store(true, Ordering::Relaxed);
                Ok(0)
            }
        }
    }
}

/// A recording's lines from any byte stream, decompressed as its first bytes say.
pub fn reader<R: Read + Send + 'static>(input: R) -> io::Result<(Box<dyn BufRead + Send>, Cut)> {
    let mut input = BufReader::with_capacity(1 << 16, input);
    let kind = Compression::sniff(input.fill_buf()?);
    let cut = Cut::default();
    let read: Box<dyn BufRead + Send> = match kind {
        Compression::Plain => Box::new(input),
        Compression::Zstd => {
            let decoder = zstd::stream::read::Decoder::with_buffer(input)?;
            Box::new(BufReader::with_capacity(
                1 << 16,
                Tolerant {
                    inner: decoder,
                    cut: cut.clone(),
                    done: false,
                },
            ))
        }
        Compression::Gzip => Box::new(BufReader::with_capacity(
            1 << 16,
            Tolerant {
                // Several members (a recording appended to) read as one stream.
                inner: flate2::bufread::MultiGzDecoder::new(input),
                cut: cut.clone(),
                done: false,
            },
        )),
    };
    Ok((read, cut))
}

/// Opens the recording at `path` (`-`: standard input).
pub fn open(path: &Path) -> io::Result<(Box<dyn BufRead + Send>, Cut)> {
    if path.as_os_str() == "-" {
        reader(io::stdin())
    } else {
        reader(std::fs::File::open(path)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines(input: Vec<u8>) -> (Vec<String>, bool) {
        let (read, cut) = reader(io::Cursor::new(input)).expect("reader");
        let lines = read.lines().map(|l| l.expect("line")).collect();
        (lines, cut.happened())
    }

    const TEXT: &str = "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n";

    #[test]
    fn plain_zstd_and_gzip_read_alike() {
        let zst = zstd::encode_all(TEXT.as_bytes(), 3).expect("zstd");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(TEXT.as_bytes()).expect("gzip");
        let gz = gz.finish().expect("gzip");
        for input in [TEXT.as_bytes().to_vec(), zst, gz] {
            let kind = Compression::sniff(&input);
            assert_eq!(
                lines(input),
                (
                    vec!["{\"a\":1}".into(), "{\"a\":2}".into(), "{\"a\":3}".into()],
                    false
                ),
                "{kind:?}"
            );
        }
    }

    /// A writer killed mid-frame: every sample flushed before the cut reads back, then at
    /// most a piece of the one in flight (without its newline: analyze and replay take it
    /// for the cut last line it is).
    #[test]
    fn a_frame_cut_short_reads_up_to_the_cut() {
        let flushed_text = "{\"a\":1}\n{\"a\":2}\n";
        let check = |bytes: Vec<u8>, kind: &str| {
            let (mut read, cut) = reader(io::Cursor::new(bytes)).expect("reader");
            let mut text = String::new();
            read.read_to_string(&mut text).expect("read");
            assert!(cut.happened(), "{kind}");
            let rest = text
                .strip_prefix(flushed_text)
                .unwrap_or_else(|| panic!("{kind}: {text:?}"));
            assert!("{\"a\":3}".starts_with(rest), "{kind}: {rest:?}");
        };
        let mut zst = zstd::stream::write::Encoder::new(Vec::new(), 3).expect("zstd");
        zst.write_all(flushed_text.as_bytes()).expect("write");
        zst.flush().expect("flush");
        let flushed = zst.get_ref().len();
        zst.write_all(b"{\"a\":3}\n").expect("write");
        let mut bytes = zst.finish().expect("finish");
        bytes.truncate(flushed + 3);
        check(bytes, "zstd");

        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(flushed_text.as_bytes()).expect("write");
        gz.flush().expect("flush");
        let flushed = gz.get_ref().len();
        gz.write_all(b"{\"a\":3}\n").expect("write");
        let mut bytes = gz.finish().expect("finish");
        bytes.truncate(flushed + 3);
        check(bytes, "gzip");
    }

    /// A recording appended to holds several frames or members: all of them are read.
    #[test]
    fn appended_frames_read_as_one_recording() {
        let mut zst = zstd::encode_all(&b"{\"a\":1}\n"[..], 3).expect("zstd");
        zst.extend(zstd::encode_all(&b"{\"a\":2}\n"[..], 3).expect("zstd"));
        assert_eq!(lines(zst).0.len(), 2);
        let member = |text: &[u8]| {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(text).expect("write");
            gz.finish().expect("gzip")
        };
        let mut gz = member(b"{\"a\":1}\n");
        gz.extend(member(b"{\"a\":2}\n"));
        assert_eq!(lines(gz).0.len(), 2);
    }
}

//! Fuzz target: the recording reader on arbitrary bytes. The first byte chooses how the rest
//! is read:
//! - as the recording's bytes themselves (plain, or compressed where they begin as zstd or
//!   gzip do);
//! - as text put into frames, zstd or gzip members or plain, then cut or damaged at a place
//!   the input names, and read back against what was put in: undamaged, the text comes back
//!   whole; cut, a prefix of it; damaged, every frame before the damaged one comes back.
//!
//! Every line comes through the bounded reader too, with small limits (lines of 4 KiB, 64 KiB
//! without a line end): no panic, no line over the limit, line numbers never going back.
//! Shared by the AFL binary (`fuzz/src/bin/recording_reader.rs`) and the corpus test
//! (`tests/fuzz_corpus.rs`).

use std::io::{Cursor, Read, Write};
use strata::recording::{reader, Line, Lines, Progress};

/// The line limit and the run without a line end given up on, here.
const LIMIT: usize = 4096;
const GIVE_UP: u64 = 1 << 16;
/// Text read back at most (a bomb in the input is not read to its end).
const TEXT_CAP: u64 = 8 << 20;

pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 => {
            bounded(rest.to_vec());
            let _ = text(rest.to_vec());
        }
        kind => framed(kind, rest),
    }
}

/// Every line through the bounded reader, checking what holds for any input.
fn bounded(bytes: Vec<u8>) {
    let Ok(mut lines) = Lines::with_limits(
        Box::new(Cursor::new(bytes)),
        Progress::default(),
        LIMIT,
        GIVE_UP,
    ) else {
        return;
    };
    let (mut number, mut total, mut count) = (0, 0u64, 0u32);
    while let Ok(Some((n, line))) = lines.next_line() {
        assert!(n >= number, "line numbers go back: {n} after {number}");
        number = n;
        match line {
            Line::Oversized(bytes) => assert!(bytes > LIMIT as u64, "{bytes} is not over"),
            // A checksum found wrong at a member's end: the next may begin right there.
            Line::Corrupt(c) => assert!(c.resumed_at.is_none_or(|r| r >= c.at), "{c:?}"),
            _ => assert!(lines.last_line_bytes() <= LIMIT as u64),
        }
        total += lines.last_line_bytes();
        count += 1;
        if total > TEXT_CAP || count > 200_000 {
            return;
        }
    }
}

/// The text as one stream, capped.
fn text(bytes: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::new();
    if let Ok((read, _)) = reader(Cursor::new(bytes)) {
        let _ = read.take(TEXT_CAP).read_to_end(&mut out);
    }
    out
}

fn u32_at(bytes: &[u8], at: usize) -> usize {
    let mut b = [0u8; 4];
    for (i, slot) in b.iter_mut().enumerate() {
        *slot = bytes.get(at + i).copied().unwrap_or(0);
    }
    u32::from_le_bytes(b) as usize
}

/// Text put into frames (`kind` 1: zstd, 2: gzip, 3: plain pieces), then spoiled as the
/// header says, then read back and compared with what was put in.
fn framed(kind: u8, rest: &[u8]) {
    if rest.len() < 6 {
        return;
    }
    let frames = usize::from(rest[0] % 8) + 1;
    let spoil = rest[1] % 3;
    let at = u32_at(rest, 2);
    let payload = &rest[6..];
    // Whole lines to each frame, as appending writes them.
    let lines: Vec<&[u8]> = payload.split_inclusive(|&b| b == b'\n').collect();
    let per = lines.len().div_ceil(frames).max(1);
    let texts: Vec<Vec<u8>> = lines.chunks(per).map(|c| c.concat()).collect();
    let encoded: Vec<Vec<u8>> = texts
        .iter()
        .map(|t| match kind {
            1 => zstd::encode_all(&t[..], 1).unwrap_or_default(),
            2 => {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                let _ = gz.write_all(t);
                gz.finish().unwrap_or_default()
            }
            _ => t.clone(),
        })
        .collect();
    let mut bytes = encoded.concat();
    if bytes.is_empty() {
        return;
    }
    let mut damaged = None;
    match spoil {
        1 => bytes.truncate(at % (bytes.len() + 1)),
        2 => {
            let at = at % bytes.len();
            bytes[at] ^= rest[5] | 1;
            damaged = Some(at);
        }
        _ => {}
    }
    let got = text(bytes.clone());
    bounded(bytes.clone());
    let sniffed_compressed = |b: &[u8]| {
        b.starts_with(&strata::recording::ZSTD_MAGIC)
            || b.starts_with(&strata::recording::GZIP_MAGIC)
    };
    if payload.len() as u64 > TEXT_CAP
        || kind == 3 && (sniffed_compressed(payload) || sniffed_compressed(&bytes))
    {
        // Too long to read back whole, or plain text that reads as compressed.
        return;
    }
    match (spoil, damaged) {
        (0, _) => assert!(got == payload, "undamaged text did not come back whole"),
        (1, _) if kind == 3 => assert!(got == payload[..bytes.len()], "a cut plain file"),
        // Cut within its first frame's magic, the stub reads as the plain bytes it is.
        (1, _) if !sniffed_compressed(&bytes) => {}
        (1, _) => assert!(payload.starts_with(&got), "a cut is not a prefix"),
        (_, Some(at)) if kind != 3 => {
            // The frames wholly before the damaged byte come back, in order.
            let mut end = 0;
            let mut before = Vec::new();
            for (e, t) in encoded.iter().zip(&texts) {
                end += e.len();
                if end > at {
                    break;
                }
                before.extend_from_slice(t);
            }
            // Damage in a zstd frame's magic can join it to the frame before as junk after
            // it; damage in plain text changes a byte: both leave the frames before whole.
            assert!(
                got.starts_with(&before),
                "a frame before the damage was lost"
            );
        }
        _ => assert_eq!(got.len(), payload.len(), "plain text changes no length"),
    }
}

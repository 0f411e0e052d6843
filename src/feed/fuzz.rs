//! Fuzz harnesses for what a peer controls: the bytes of a feed (split into lines, parsed,
//! applied to its record, rate-limited) and the way to trust (the kernel's pid in
//! `/proc/<pid>/status`, the socket's name, a process's `STRATA_FEED_DIR`, a feed dir's mode,
//! and the `hello` checked against them). Each panics when an invariant breaks; `fuzz/` runs
//! them under AFL++ and `tests/fuzz_corpus.rs` replays the kept corpus.

use super::conn::{on_line, Phase};
use super::limits::{FloodGuard, LineReader};
use super::names::{dir_verdict, environ_value, parse_status, socket_pid};
use super::protocol::MAX_LINE_BYTES;
use super::state::{Feed, Feeds};
use crate::sample::feed::FoundVia;
use std::path::{Component, Path};
use std::time::{Duration, Instant};

const KEY: (u64, u64) = (1, 1);

/// Plays `bytes` to a connection in `phase`, `chunk` bytes a read, one millisecond a read.
/// Returns the feeds and the phase it ended in (`None`: the connection was ended).
fn play(bytes: &[u8], chunk: usize, mut phase: Phase) -> (Feeds, Option<Phase>) {
    let start = Instant::now();
    let mut feeds = Feeds::default();
    let mut feed = Feed::new("/fuzz/7.sock".into(), FoundVia::FeedDir, 0);
    feed.judged = matches!(phase, Phase::Trusted { .. });
    feeds.insert(KEY, feed);
    let mut reader = LineReader::default();
    let mut guard = FloodGuard::new(start);
    let mut settled = false;
    let mut ended = false;
    for (n, piece) in bytes.chunks(chunk.max(1)).enumerate() {
        let now = start + Duration::from_millis(n as u64);
        reader.push(piece, |line| {
            if !ended {
                let end = on_line(
                    line,
                    KEY,
                    &mut feeds,
                    &mut guard,
                    &mut phase,
                    &mut settled,
                    now,
                    0.0,
                );
                ended = end.is_some();
            }
        });
        assert!(
            reader.held() <= MAX_LINE_BYTES,
            "a line reader holds {} bytes",
            reader.held()
        );
        if ended {
            return (feeds, None);
        }
    }
    (feeds, Some(phase))
}

/// The first byte chooses the read size (1 to 256 bytes, or a whole 64 KiB read), the rest
/// is what a trusted agent's socket delivers.
pub fn feed_line(data: &[u8]) {
    let Some((&first, bytes)) = data.split_first() else {
        return;
    };
    let chunk = if first == 0 {
        64 * 1024
    } else {
        usize::from(first)
    };
    let (mut feeds, _) = play(bytes, chunk, Phase::Trusted { pid: 7 });
    let newlines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    let records = feeds.collect();
    assert!(records.len() <= 1);
    for record in &records {
        let c = &record.counters;
        // Each complete line is counted at most once, under one heading; an oversized line
        // may be counted before its newline comes.
        let counted = c.lines + c.malformed + c.unknown_version + c.unknown_type + c.invalid;
        assert!(
            counted <= newlines,
            "{counted} lines counted of {newlines}: {c:?}"
        );
        assert!(c.oversized <= newlines + 1, "{c:?}");
        assert!(c.samples <= c.lines, "{c:?}");
        assert!(
            record.devices.len() <= 64,
            "{} devices",
            record.devices.len()
        );
        if let Some(hello) = &record.hello {
            assert_eq!(
                hello.pid, 7,
                "a later hello keeps the first pid or ends the feed"
            );
        }
        serde_json::to_string(record).unwrap_or_else(|e| panic!("a record serialises: {e}"));
    }
}

/// Splits off the bytes up to the first `0xff` (or all of them).
fn field(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0xff) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[]),
    }
}

/// `status ff socket-name ff environ ff mode(2) owner(1) expected(1) lines` (`ff`: the byte
/// 0xff, never in the text of a status, a name or an environment): each
/// checked on its own, then the lines played to a connection awaiting its hello, with the
/// status's pid and the name's.
pub fn hello_trust(data: &[u8]) {
    hello_trust_outcome(data);
}

/// [`hello_trust`], saying whether the connection ended trusted (`None`: no pid to check).
pub fn hello_trust_outcome(data: &[u8]) -> Option<bool> {
    let (status, rest) = field(data);
    let (name, rest) = field(rest);
    let (environ, rest) = field(rest);
    let (dir, lines) = rest.split_at(rest.len().min(4));
    let status = parse_status(&String::from_utf8_lossy(status));
    let name = String::from_utf8_lossy(name).into_owned();
    let name_pid = socket_pid(&name);
    if let Some(pid) = name_pid {
        assert_eq!(format!("{pid}.sock"), name, "only the agent's own spelling");
    }
    if let Some(rel) = environ_value(environ) {
        assert!(!rel.as_os_str().is_empty(), "{rel:?}");
        assert!(
            rel.components().all(|c| matches!(c, Component::Normal(_))),
            "STRATA_FEED_DIR stays inside the root: {rel:?}"
        );
    }
    if let [m0, m1, owner, expected, ..] = dir {
        // SAFETY: `stat` is plain data; zero is valid.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        st.st_mode = libc::mode_t::from(u16::from_le_bytes([*m0, *m1]));
        st.st_uid = u32::from(*owner);
        if dir_verdict(Path::new("/fuzz"), &st, u32::from(*expected)).is_ok() {
            assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFDIR);
            assert_eq!(st.st_mode & 0o077, 0, "{:o}", st.st_mode);
            assert_eq!(u32::from(*owner), u32::from(*expected));
        }
    }
    let (Some(nspid), Some(name_pid)) = (status.nspid, name_pid) else {
        return None;
    };
    let phase = Phase::AwaitingHello {
        nspid,
        name: name.clone(),
        name_pid,
        deadline: Instant::now() + Duration::from_secs(5),
    };
    let (mut feeds, phase) = play(lines, 1 + lines.len() % 97, phase);
    let trusted = matches!(phase, Some(Phase::Trusted { .. }));
    if let Some(Phase::Trusted { pid }) = phase {
        assert!(
            pid == nspid && pid == name_pid,
            "trusted pid {pid}: the kernel says {nspid}, the name {name}"
        );
    }
    for record in feeds.collect() {
        if let Some(hello) = &record.hello {
            assert!(trusted, "a hello is kept only once trusted");
            assert_eq!(hello.pid, nspid);
        }
    }
    Some(trusted)
}

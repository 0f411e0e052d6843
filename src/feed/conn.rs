//! One connection to an agent: what each line does to its feed, from the trust check of the
//! first `hello` to `bye`.

use super::candidate::FeedKey;
use super::limits::{
    Admit, FloodGuard, LineEvent, LineReader, BYTES_PER_SECOND, FLOODS_TO_DROP, LINES_PER_SECOND,
};
use super::protocol::{parse_line, Bad, Message, MAX_LINE_BYTES};
use super::state::{End, Feeds};
use super::trust::check_hello;
use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long a connected peer has to send a valid `hello`.
pub(crate) const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Reads per connection per wake-up (of [`READ_CHUNK`] bytes), so one busy feed cannot
/// starve the others or hold the lock long.
const READS_PER_WAKE: usize = 4;
pub(crate) const READ_CHUNK: usize = 64 * 1024;
/// Lines per read that an agent sampling on its own schedule sends (a sample, maybe a hello
/// or an oom); more is a backlog or a flood.
const TRICKLE: usize = 4;

pub(crate) enum Phase {
    AwaitingHello {
        nspid: u32,
        name: String,
        name_pid: u32,
        deadline: Instant,
    },
    /// Trusted; every later `hello` must keep this pid.
    Trusted { pid: u32 },
}

pub(crate) struct Conn {
    pub(crate) key: FeedKey,
    /// The directory a scan found it in (`None`: looked up directly for a watched process),
    /// which answers for it while it has not said `hello`.
    pub(crate) scanned_in: Option<PathBuf>,
    /// Its token in the hub's epoll set.
    pub(crate) token: u64,
    pub(crate) stream: UnixStream,
    reader: LineReader,
    guard: FloodGuard,
    pub(crate) phase: Phase,
    /// When data last arrived.
    pub(crate) last_data: Instant,
    /// Hello and backlog read: a live message arrived, or the peer went quiet after hello.
    pub(crate) settled: bool,
    /// The last [`Conn::pump`] met more than a trickle (a backlog, a flood) or left data
    /// unread: the hub reads again at once rather than waiting for more lines to gather.
    pub(crate) busy: bool,
}

impl Conn {
    pub(crate) fn new(
        key: FeedKey,
        stream: UnixStream,
        nspid: u32,
        name: String,
        name_pid: u32,
        now: Instant,
    ) -> Self {
        Conn {
            key,
            scanned_in: None,
            token: 0,
            stream,
            reader: LineReader::default(),
            guard: FloodGuard::new(now),
            phase: Phase::AwaitingHello {
                nspid,
                name,
                name_pid,
                deadline: now + HELLO_TIMEOUT,
            },
            last_data: now,
            settled: false,
            busy: false,
        }
    }

    pub(crate) fn is_trusted(&self) -> bool {
        matches!(self.phase, Phase::Trusted { .. })
    }

    /// Reads what is there (a bounded amount) and applies it to the feed.
    pub(crate) fn pump(
        &mut self,
        feeds: &mut Feeds,
        buf: &mut [u8],
        now: Instant,
        wall: f64,
    ) -> Option<End> {
        self.busy = true;
        let mut lines = 0usize;
        for _ in 0..READS_PER_WAKE {
            let n = match (&self.stream).read(buf) {
                Ok(0) => return Some(self.eof()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.busy = lines > TRICKLE;
                    return None;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Some(End::Closed {
                        reason: format!("connection lost: {e}"),
                        bye: false,
                    })
                }
            };
            self.last_data = now;
            let mut end = None;
            let Conn {
                key,
                reader,
                guard,
                phase,
                settled,
                ..
            } = self;
            reader.push(&buf[..n], |line| {
                lines += 1;
                if end.is_none() {
                    end = on_line(line, *key, feeds, guard, phase, settled, now, wall);
                }
            });
            if end.is_some() {
                return end;
            }
            if n < buf.len() {
                // A short read emptied the socket: skip the read that would say so (epoll
                // reports the socket again if more arrives).
                self.busy = lines > TRICKLE;
                return None;
            }
        }
        None
    }

    fn eof(&self) -> End {
        if self.is_trusted() {
            End::Closed {
                reason: "connection closed".into(),
                bye: false,
            }
        } else {
            End::Refused(
                "closed the connection before sending hello: is this a strata agent?".into(),
            )
        }
    }
}

/// What one line (or an oversized line's bytes) does to the feed; `Some` ends the connection.
#[allow(clippy::too_many_arguments)]
pub(crate) fn on_line(
    line: LineEvent<'_>,
    key: FeedKey,
    feeds: &mut Feeds,
    guard: &mut FloodGuard,
    phase: &mut Phase,
    settled: &mut bool,
    now: Instant,
    wall: f64,
) -> Option<End> {
    let feed = feeds.map.get_mut(&key)?;
    feed.last_heard = Some(wall);
    let admitted = match line {
        LineEvent::Line(l) => guard.admit(l.len() + 1, now, &mut feed.counters),
        LineEvent::Oversized { bytes } => guard.admit(bytes, now, &mut feed.counters),
        LineEvent::Skipped { bytes } => guard.admit_skipped(bytes, now, &mut feed.counters),
    };
    match admitted {
        Admit::Yes => {}
        Admit::Limited => return None,
        Admit::Drop => {
            return Some(End::Dropped(format!(
                "flooded past {LINES_PER_SECOND} lines/s or {} KiB/s {FLOODS_TO_DROP} times: dropped, retried in 60 s",
                BYTES_PER_SECOND / 1024.0
            )))
        }
        Admit::Flood => {
            return Some(End::Dropped(format!(
                "sent a line past {} KiB without its end faster than {} KiB/s: dropped as a flood, retried in 60 s",
                MAX_LINE_BYTES / 1024,
                BYTES_PER_SECOND / 1024.0
            )))
        }
    }
    if let LineEvent::Skipped { .. } = line {
        return None; // counted when the line passed the limit
    }
    let LineEvent::Line(line) = line else {
        feed.counters.oversized += 1;
        if let (LineEvent::Oversized { bytes }, Phase::AwaitingHello { .. }) = (&line, &*phase) {
            // Nothing after an unread hello can be trusted: said now, and why, rather than
            // wait out the hello's deadline and leave the process looking unfed.
            return Some(End::Refused(format!(
                "its hello is {} KiB or more, over the {} KiB a line may hold, and cannot be read (an agent of another version?)",
                bytes / 1024,
                MAX_LINE_BYTES / 1024
            )));
        }
        return None;
    };
    let message = match parse_line(line) {
        Ok(message) => message,
        Err(bad) => {
            let c = &mut feed.counters;
            match bad {
                Bad::Malformed => c.malformed += 1,
                Bad::UnknownVersion => c.unknown_version += 1,
                Bad::UnknownType => c.unknown_type += 1,
                Bad::Invalid => c.invalid += 1,
            }
            return None;
        }
    };
    if let Message::Refuse(reason) = message {
        return Some(End::Refused(reason));
    }
    let pid = match phase {
        Phase::AwaitingHello {
            nspid,
            name,
            name_pid,
            ..
        } => {
            let Message::Hello(hello) = message else {
                feed.counters.invalid += 1; // the protocol starts with hello
                return None;
            };
            if let Err(reason) = check_hello(hello.pid, *nspid, name, *name_pid) {
                return Some(End::Refused(reason));
            }
            feed.counters.lines += 1;
            feed.judged = true;
            feed.connected_at = Some(wall);
            *phase = Phase::Trusted { pid: hello.pid };
            feed.hello = Some(std::sync::Arc::new(hello));
            return None;
        }
        Phase::Trusted { pid } => *pid,
    };
    feed.counters.lines += 1;
    match message {
        Message::Hello(hello) if hello.pid != pid => {
            return Some(End::Refused(format!(
                "a later hello claims pid {} but the first said {pid}: not trusted",
                hello.pid
            )))
        }
        Message::Hello(hello) => feed.hello = Some(std::sync::Arc::new(hello)),
        Message::Sample { backlog, devices } => {
            *settled |= !backlog;
            feeds.apply_sample(&key, devices);
        }
        Message::Oom { backlog, report } => {
            *settled |= !backlog;
            feeds.apply_oom(&key, report);
        }
        Message::Segments(report) => feeds.apply_segments(&key, report),
        Message::Sites(report) => feeds.apply_sites(&key, report),
        Message::Bye { reason } => {
            return Some(End::Closed {
                reason: format!("bye: {reason}"),
                bye: true,
            })
        }
        Message::Refuse(_) => {}
    }
    None
}

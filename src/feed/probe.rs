//! One candidate of a scan: keep its record alive, and connect if it is new or due, within
//! its directory's budget of attempts. A socket nobody listens on is remembered by its inode
//! (and ctime), so it is connected to twice (to confirm it) and never again: in a directory
//! of the monitor's own it is removed then; elsewhere it is left, and costs nothing more.

use super::super::candidate::Candidate;
use super::super::conn::Conn;
use super::super::discover::MAX_FEEDS;
use super::super::fd::unlink_in;
use super::super::state::{Feed, RETRY_REFUSED};
use super::super::trust::{attempt, Attempt};
use super::{Hub, Shared};
use crate::sample::feed::{FeedState, FoundVia};
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A socket nobody listens on is called dead only when seen so twice this far apart (an
/// agent between `bind()` and `listen()` refuses connections for an instant).
pub(super) const STALE_CONFIRM: Duration = Duration::from_millis(250);
/// Connection attempts per scanned directory per scan: thousands of unknown sockets in one
/// directory are tried a few hundred a scan, and a directory's attempts never delay another
/// directory's, nor a watched process's own socket (looked up directly, outside any budget).
pub(crate) const DIR_ATTEMPTS: usize = 256;

/// A socket found refusing connections.
pub(super) struct Dead {
    /// Which file: an inode number may be used again by a new socket.
    born: (i64, i64),
    first: Instant,
    confirmed: bool,
}

impl Dead {
    /// Confirmed dead, and still the same file.
    pub(super) fn confirmed_as(&self, born: (i64, i64)) -> bool {
        self.confirmed && self.born == born
    }
}

/// Connections found by scanning that may await their `hello` at once, per directory and
/// in all: peers that connect and say nothing hold a descriptor each until they are refused
/// (5 s), and one user's thousands of them must not take the monitor's descriptors.
pub(crate) const PENDING_PER_DIR: usize = 32;
const PENDING_TOTAL: usize = 256;

/// What scanned directories may still cost this scan: attempts, and connections awaiting
/// their hello.
#[derive(Default)]
pub(super) struct Budgets {
    attempts: Vec<usize>,
    pending: HashMap<PathBuf, usize>,
    pending_total: usize,
}

impl Budgets {
    /// The connections found by scanning that await their hello now.
    pub(crate) fn new<'a>(conns: impl Iterator<Item = &'a Conn>) -> Budgets {
        let mut budgets = Budgets::default();
        for conn in conns.filter(|c| !c.is_trusted()) {
            if let Some(dir) = &conn.scanned_in {
                *budgets.pending.entry(dir.clone()).or_default() += 1;
                budgets.pending_total += 1;
            }
        }
        budgets
    }

    /// Takes one attempt from the directory's budget; false when it is spent, or when the
    /// directory (or all of them) has as many connections awaiting their hello as it may.
    fn take(&mut self, dir: Option<usize>, path: &Path) -> bool {
        let Some(dir) = dir else { return true };
        if self.attempts.len() <= dir {
            self.attempts.resize(dir + 1, 0);
        }
        let pending = self.pending.get(path).copied().unwrap_or(0);
        if self.attempts[dir] >= DIR_ATTEMPTS
            || pending >= PENDING_PER_DIR
            || self.pending_total >= PENDING_TOTAL
        {
            return false;
        }
        self.attempts[dir] += 1;
        true
    }

    fn connected(&mut self, path: &Path) {
        *self.pending.entry(path.to_path_buf()).or_default() += 1;
        self.pending_total += 1;
    }
}

impl Hub {
    pub(super) fn consider(
        &mut self,
        shared: &mut Shared,
        c: &Candidate,
        budgets: &mut Budgets,
        now: Instant,
    ) {
        let feeds = &mut shared.feeds;
        if let Some(feed) = feeds.map.get_mut(&c.key) {
            feed.seen = self.scan_no;
            if c.via == FoundVia::FeedDir && feed.found_via == FoundVia::ProcessRoot {
                feed.found_via = FoundVia::FeedDir;
                feed.socket = c.path.display().to_string();
            }
            let due =
                feed.judged && !feed.is_connected() && feed.retry_at.is_some_and(|t| now >= t);
            if !due {
                return;
            }
        } else if c.budget.is_some() && feeds.map.len() >= MAX_FEEDS {
            // Full of what scanning found (refused sockets of one user, say): a watched
            // process's own socket is still taken, looked up directly (at most a few for each
            // of the pids NVML lists).
            return;
        }
        match self.dead.get(&c.key) {
            Some(dead) if dead.born == c.born => {
                let waiting = now.saturating_duration_since(dead.first) < STALE_CONFIRM;
                if dead.confirmed || waiting {
                    return;
                }
            }
            Some(_) => {
                self.dead.remove(&c.key); // a new file with the old inode number
            }
            None => {}
        }
        let dir = c.path.parent().unwrap_or(&c.path).to_path_buf();
        if !budgets.take(c.budget, &dir) {
            return; // the next scan tries it
        }
        shared.connects += 1;
        let feeds = &mut shared.feeds;
        let socket = c.path.display().to_string();
        match attempt(c, &self.config.proc_root) {
            Attempt::Connected {
                stream,
                peer,
                nspid,
            } => {
                let token = self.next_token;
                if self.poller.add(stream.as_raw_fd(), token).is_err() {
                    return; // out of resources: the next scan tries again
                }
                self.next_token += 1;
                self.tokens.insert(token, c.key);
                self.dead.remove(&c.key);
                let mut feed = Feed::new(socket, c.via, self.scan_no);
                feed.peer = Some(peer);
                feed.nspid = Some(nspid);
                feeds.insert(c.key, feed);
                let mut conn = Conn::new(c.key, stream, nspid, c.name.clone(), c.name_pid, now);
                conn.token = token;
                if c.budget.is_some() {
                    budgets.connected(&dir);
                    conn.scanned_in = Some(dir);
                }
                self.conns.insert(c.key, conn);
            }
            Attempt::Refused {
                reason,
                peer,
                nspid,
            } => {
                self.dead.remove(&c.key);
                let mut feed = Feed::new(socket, c.via, self.scan_no);
                feed.judged = true;
                feed.peer = peer;
                feed.nspid = nspid;
                feed.state = FeedState::Refused { reason };
                feed.retry_at = Some(now + RETRY_REFUSED);
                feeds.insert(c.key, feed);
            }
            Attempt::Stale => {
                if feeds
                    .map
                    .get(&c.key)
                    .is_some_and(|f| matches!(f.state, FeedState::Refused { .. }))
                {
                    feeds.remove(&c.key);
                }
                self.dead_socket(c, now);
            }
            Attempt::Busy => {}
        }
    }

    /// Remembers a socket nobody listens on; once confirmed, removes it when it is ours and
    /// found in a feed dir that passes its check (never through a process root: that is
    /// another mount namespace's file; never another user's).
    fn dead_socket(&mut self, c: &Candidate, now: Instant) {
        let dead = self.dead.entry(c.key).or_insert(Dead {
            born: c.born,
            first: now,
            confirmed: false,
        });
        if now.saturating_duration_since(dead.first) < STALE_CONFIRM {
            return;
        }
        dead.confirmed = true;
        let euid = self.scanner.euid();
        let ours = c.via == FoundVia::FeedDir
            && c.expected_uid == euid
            && c.socket_uid == euid
            && c.dir_verdict.is_ok();
        if ours {
            let _ = unlink_in(&c.dir, &c.name);
            self.dead.remove(&c.key);
        }
    }
}

//! The collecting half of feeds: a background thread that finds agents' sockets, judges who
//! is on the other end, and reads their lines; [`FeedHub::collect`] hands out what it holds.
//!
//! One thread, one epoll set over every connection and a wake-up socket; it sleeps until a
//! line arrives, a rescan is due, or a caller asks for a scan.
//!
//! The monitor's hub starts its thread only once a scan finds a socket
//! ([`FeedHub::start_when_found`]): until then the collector's own [`FeedHub::watch_pids`]
//! scans, at most once a rescan interval, so a node without agents costs no wake-up of a
//! thread of its own each second (on a node of one GPU, 85 to 120 µs of CPU a second: a
//! third of what the collector's own sampling took).

use super::candidate::FeedKey;
use super::conn::{Conn, Phase, READ_CHUNK};
use super::discover::{Scanner, Watched};
use super::poller::{wait_readable, Poller};
use super::protocol::PROTOCOL;
use super::state::End;
use super::state::Feeds;
use crate::sample::feed::{FeedRecord, FeedScan, FeedState};
use crate::sample::pool::{SitesReport, SitesState};
use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// After `hello`, a feed whose socket stays quiet this long has sent its whole backlog (an
/// agent's sender thread may wait for the GIL between lines: 5 ms switch interval).
const QUIET: Duration = Duration::from_millis(100);
/// After reading, wait this long for more lines before the next read, so that many feeds
/// cost a few wake-ups per second rather than one per line (unless data is still pending).
const COALESCE: Duration = Duration::from_millis(50);
/// Watched pids kept.
const MAX_WATCHED: usize = 4096;
/// The most new pids a caller's scan looks up (before the hub's thread starts): each costs
/// reads of its `/proc` status and environment, about 27 µs, and the caller is the collector
/// with its sample in hand (4,096 new pids at once held the first frame 110 ms).
const CALLER_SCAN_FRESH: usize = 64;
/// The longest sites window a request asks for, seconds (PROTOCOL.md).
pub(crate) const MAX_SITES_SECONDS: u32 = 600;
/// How long past a window's end its summary is waited for before another may be asked.
const SITES_GRACE: f64 = 30.0;

/// Where and how often to look for feeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedConfig {
    /// --feed-dir / STRATA_FEED_DIR: look only in this directory (plus process roots).
    /// None: the default (`<tmp_root>/strata-<euid>`, or every user's as root).
    pub(crate) feed_dir: Option<PathBuf>,
    /// Root of procfs, "/proc" (tests may point elsewhere).
    pub(crate) proc_root: PathBuf,
    /// Where the default `strata-<uid>` directories live, "/tmp" (tests may point elsewhere).
    pub(crate) tmp_root: PathBuf,
    /// How often to look for new sockets (the monitor's interval).
    pub(crate) rescan: Duration,
}

impl FeedConfig {
    /// The real paths: `/proc` and `/tmp`.
    pub fn new(feed_dir: Option<PathBuf>, rescan: Duration) -> Self {
        FeedConfig {
            feed_dir,
            proc_root: PathBuf::from("/proc"),
            tmp_root: PathBuf::from("/tmp"),
            rescan,
        }
    }
}

struct Shared {
    feeds: Feeds,
    /// What the latest scan met that is not a feed.
    scan: FeedScan,
    /// Connections attempted since the start (each a `connect(2)`), and scans run.
    connects: u64,
    scans_run: u64,
    watched: Vec<Watched>,
    scans_requested: u64,
    scans_done: u64,
    /// Connections not yet judged, or whose backlog may still be arriving.
    unsettled: usize,
    /// Lines to write to agents (requests), for the hub's thread.
    requests: Vec<(FeedKey, Vec<u8>)>,
    stop: bool,
}

struct Inner {
    shared: Mutex<Shared>,
    changed: Condvar,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        lock(&self.shared)
    }
}

/// Owns the feed thread; dropping it stops the thread.
pub struct FeedHub {
    inner: Arc<Inner>,
    wake: UnixStream,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Until the thread starts: what it is to take, and the caller's own scans.
    waiting: Mutex<Option<Box<Waiting>>>,
}

/// A hub whose thread has not started: nothing found yet (see the module comment). The
/// thread takes its parts, the scanner with what it has read included.
struct Waiting {
    wake_rx: UnixStream,
    poller: Poller,
    config: FeedConfig,
    scanner: Scanner,
    /// When the caller's latest scan ran.
    scanned: Option<Instant>,
}

impl FeedHub {
    /// Starts the thread, which scans at once.
    pub fn start(config: FeedConfig) -> io::Result<FeedHub> {
        let hub = FeedHub::start_when_found(config)?;
        hub.launch()?;
        Ok(hub)
    }

    /// A hub whose thread starts when a scan first finds a socket, or when `settle`
    /// is called: until then `watch_pids` scans on the caller's thread, at once for a
    /// pid new to the list and else at most once a rescan interval (less a quarter, for the
    /// caller's jitter). Nothing found, nothing is connected, refused or held as dead, so
    /// such a scan has nothing more to do than its notes. The thread, once started, runs
    /// until the hub is dropped.
    pub fn start_when_found(config: FeedConfig) -> io::Result<FeedHub> {
        let (wake, wake_rx) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        wake_rx.set_nonblocking(true)?;
        let poller = Poller::new()?;
        poller.add(wake_rx.as_raw_fd(), WAKE)?;
        let inner = Arc::new(Inner {
            shared: Mutex::new(Shared {
                feeds: Feeds::default(),
                scan: FeedScan::default(),
                connects: 0,
                scans_run: 0,
                watched: Vec::new(),
                scans_requested: 0,
                scans_done: 0,
                unsettled: 0,
                requests: Vec::new(),
                stop: false,
            }),
            changed: Condvar::new(),
        });
        let scanner = Scanner::new(
            config.feed_dir.clone(),
            config.proc_root.clone(),
            config.tmp_root.clone(),
        );
        Ok(FeedHub {
            inner,
            wake,
            thread: Mutex::new(None),
            waiting: Mutex::new(Some(Box::new(Waiting {
                wake_rx,
                poller,
                config,
                scanner,
                scanned: None,
            }))),
        })
    }

    /// Starts the thread, if it has not started; it scans at once. Where the system cannot
    /// start a thread now (out of threads or memory: `start` fails then) the hub stays
    /// waiting, and the next scan that finds a socket tries again.
    fn launch(&self) -> io::Result<()> {
        let mut waiting = lock(&self.waiting);
        let Some(parts) = waiting.take() else {
            return Ok(());
        };
        // Handed over through a slot, so that a thread that does not start gives them back.
        let slot = Arc::new(Mutex::new(Some(parts)));
        let handed = Arc::clone(&slot);
        let inner = Arc::clone(&self.inner);
        let spawned = std::thread::Builder::new()
            .name("strata-feeds".into())
            .spawn(move || {
                let parts = lock(&handed).take();
                if let Some(parts) = parts {
                    Hub::new(inner, *parts).run();
                }
            });
        match spawned {
            Ok(thread) => {
                *lock(&self.thread) = Some(thread);
                Ok(())
            }
            Err(e) => {
                *waiting = lock(&slot).take();
                Err(e)
            }
        }
    }

    /// While the thread has not started: scans on this thread if one is due (`fresh`: pids
    /// new to the list), and starts the thread if it found a socket. False once the thread
    /// has started (its own scans take over), and where more than [`CALLER_SCAN_FRESH`] pids
    /// are new: their first look-up (each one's status and environment) is left to the
    /// thread, which it starts, so that the sample is not held up.
    fn scan_here(&self, fresh: usize) -> bool {
        // Started, or already: the thread's scans take over. Not started: scanned here.
        if fresh > CALLER_SCAN_FRESH && self.launch().is_ok() {
            return false;
        }
        let new = fresh > 0;
        let mut guard = lock(&self.waiting);
        let Some(waiting) = guard.as_mut() else {
            return false;
        };
        let now = Instant::now();
        let rescan = waiting.config.rescan;
        let due = new
            || waiting
                .scanned
                .is_none_or(|at| now + rescan / 4 >= at + rescan);
        if !due {
            return true;
        }
        waiting.scanned = Some(now);
        let watched = self.inner.lock().watched.clone();
        // Nothing is connected and no socket is held as dead before the thread starts.
        let scan = waiting
            .scanner
            .scan(&watched, &hashbrown::HashSet::new(), &|_, _| false);
        let found = !scan.candidates.is_empty();
        {
            let mut shared = self.inner.lock();
            shared.scan = scan.notes;
            shared.scans_run += 1;
        }
        drop(guard);
        if found {
            // Not started now: the next scan that finds it tries again.
            let _ = self.launch();
        }
        true
    }

    /// The host pids NVML lists, each with its start time where known: for each, also look
    /// for its socket through its root. A pid new to the list, or now another process, is
    /// looked up at once (on this thread while the hub's has not started: see
    /// [`Self::start_when_found`]).
    pub(crate) fn watch_pids(&self, pids: &[Watched]) {
        let mut pids: Vec<Watched> = pids.to_vec();
        pids.sort_unstable();
        pids.dedup_by_key(|&mut (pid, _)| pid);
        pids.truncate(MAX_WATCHED);
        let mut shared = self.inner.lock();
        let fresh = pids
            .iter()
            .filter(|p| shared.watched.binary_search(p).is_err())
            .count();
        let new = fresh > 0;
        shared.watched = pids;
        drop(shared);
        if self.scan_here(fresh) {
            return;
        }
        if new {
            self.inner.lock().scans_requested += 1;
            self.wake();
        }
    }

    /// The feeds as they stand now, one record per socket (connected, refused, dropped, or
    /// recently closed). `earlier` and `ooms` carry what arrived since the previous call.
    pub(crate) fn collect(&self) -> Vec<FeedRecord> {
        self.inner.lock().feeds.collect()
    }

    /// Asks the agent of `pid` (as this monitor sees it) for a sites window (PROTOCOL.md,
    /// "Inside the pool"); its answer arrives as the feed's `sites`. The request's id, or why
    /// it cannot be asked, in one line.
    pub(crate) fn ask_sites(&self, pid: u32, seconds: u32, top: u32) -> Result<u64, String> {
        ask_sites(&self.inner, &self.wake, pid, seconds, top)
    }

    /// A handle that asks this hub's agents for sites from another thread (the monitor's).
    pub fn asker(&self) -> io::Result<HubAsker> {
        Ok(HubAsker {
            inner: Arc::clone(&self.inner),
            wake: self.wake.try_clone()?,
        })
    }

    /// Waits for the end of sites window `id` on `pid`'s feed (done, refused or failed), at
    /// most `timeout`; `on_running` is told once when the agent says it has begun. The
    /// final report, or why there is none (the feed closed, the time ran out).
    pub(crate) fn wait_sites(
        &self,
        pid: u32,
        id: u64,
        timeout: Duration,
        mut on_running: impl FnMut(&SitesReport),
    ) -> Result<Arc<SitesReport>, String> {
        let deadline = Instant::now() + timeout;
        let mut told = false;
        let mut shared = self.inner.lock();
        loop {
            let feed = shared
                .feeds
                .map
                .values()
                .find(|f| f.judged && f.peer.is_some_and(|p| p.pid == pid));
            let Some(feed) = feed else {
                return Err(format!(
                    "PID {pid}'s feed went away before the window ended"
                ));
            };
            if let Some(report) = feed.sites.as_ref().filter(|s| s.id == id) {
                if report.state != SitesState::Running {
                    return Ok(Arc::clone(report));
                }
                if !told {
                    told = true;
                    on_running(report);
                }
            }
            if !feed.is_connected() {
                return Err(format!(
                    "PID {pid}'s feed closed before the window ended (the job exited?)"
                ));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || shared.stop {
                return Err(format!(
                    "no answer from PID {pid}'s agent in {} s",
                    timeout.as_secs()
                ));
            }
            shared = match self.inner.changed.wait_timeout(shared, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// What the latest scan met that is not a feed: dirs cut short, suspicious entries.
    pub(crate) fn scan_notes(&self) -> FeedScan {
        self.inner.lock().scan.clone()
    }

    /// Connections attempted, and scans run, since the start.
    #[cfg(test)]
    fn connects(&self) -> (u64, u64) {
        let shared = self.inner.lock();
        (shared.connects, shared.scans_run)
    }

    /// Scans now and waits until every connection has been judged (trusted with its hello and
    /// backlog read, or refused), or until `timeout`.
    pub(crate) fn settle(&self, timeout: Duration) {
        if self.launch().is_err() {
            return; // no thread to wait for
        }
        let deadline = Instant::now() + timeout;
        let mut shared = self.inner.lock();
        shared.scans_requested += 1;
        let want = shared.scans_requested;
        self.wake();
        self.wait_until(shared, deadline, |s| {
            s.scans_done >= want && s.unsettled == 0
        });
    }

    /// Waits until every trusted, connected feed with devices has a sample with time ≥ `time`,
    /// or until `timeout`.
    pub(crate) fn wait_newer(&self, time: f64, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let shared = self.inner.lock();
        self.wait_until(shared, deadline, |s| {
            s.feeds.map.values().all(|f| {
                !(f.judged && f.is_connected() && f.hello.is_some() && f.has_devices())
                    || f.newest_time().is_some_and(|t| t >= time)
            })
        });
    }

    fn wait_until(
        &self,
        mut shared: MutexGuard<'_, Shared>,
        deadline: Instant,
        done: impl Fn(&Shared) -> bool,
    ) {
        while !done(&shared) && !shared.stop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            shared = match self.inner.changed.wait_timeout(shared, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    fn wake(&self) {
        let _ = (&self.wake).write(&[1]); // full: a wake-up is pending anyway
    }
}

impl Drop for FeedHub {
    fn drop(&mut self) {
        self.inner.lock().stop = true;
        self.wake();
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The epoll token of the wake-up socket; connections get 1, 2, ...
const WAKE: u64 = 0;

/// The thread's side.
struct Hub {
    inner: Arc<Inner>,
    wake: UnixStream,
    poller: Poller,
    config: FeedConfig,
    scanner: Scanner,
    conns: HashMap<FeedKey, Conn>,
    tokens: HashMap<u64, FeedKey>,
    next_token: u64,
    /// Sockets found refusing connections: nobody listens on them.
    dead: HashMap<FeedKey, probe::Dead>,
    scan_no: u64,
    next_scan: Instant,
    buf: Vec<u8>,
}

impl Hub {
    /// The thread's side of a hub that was waiting: its scanner goes on with what the
    /// caller's scans read (each watched process's status and environment, the listings).
    fn new(inner: Arc<Inner>, parts: Waiting) -> Self {
        let Waiting {
            wake_rx: wake,
            poller,
            config,
            scanner,
            scanned: _,
        } = parts;
        Hub {
            inner,
            wake,
            poller,
            config,
            scanner,
            conns: HashMap::new(),
            tokens: HashMap::new(),
            next_token: WAKE + 1,
            dead: HashMap::new(),
            scan_no: 0,
            next_scan: Instant::now(),
            buf: vec![0; READ_CHUNK],
        }
    }

    fn run(mut self) {
        let mut ready: Vec<u64> = Vec::new();
        let mut keys: Vec<FeedKey> = Vec::new();
        loop {
            let now = Instant::now();
            let due = {
                let shared = self.inner.lock();
                if shared.stop {
                    return;
                }
                let requested =
                    (shared.scans_requested > shared.scans_done).then_some(shared.scans_requested);
                (requested.is_some() || now >= self.next_scan)
                    .then(|| (requested, shared.watched.clone()))
            };
            if let Some((requested, watched)) = due {
                self.scan(&watched, requested, now);
            }
            self.send_requests();
            let timeout = self.timeout(Instant::now());
            self.poller.wait(timeout, &mut ready);
            keys.clear();
            for token in &ready {
                if *token == WAKE {
                    let mut sink = [0u8; 64];
                    while matches!((&self.wake).read(&mut sink), Ok(n) if n > 0) {}
                } else if let Some(key) = self.tokens.get(token) {
                    keys.push(*key);
                }
            }
            let pending = self.service(&keys);
            if !keys.is_empty() && !pending {
                wait_readable(&self.wake, COALESCE); // a caller's wake-up ends it at once
            }
        }
    }

    /// Writes the requests callers queued, each to its agent's connection. A request that
    /// cannot be written is said on the feed as a failed window, never dropped silently.
    fn send_requests(&mut self) {
        let requests = std::mem::take(&mut self.inner.lock().requests);
        for (key, line) in requests {
            let sent = match self.conns.get(&key) {
                // One short line: a socket whose buffer cannot take it has an agent that does
                // not read, and the request is not queued behind it.
                Some(conn) => match (&conn.stream).write(&line) {
                    Ok(n) if n == line.len() => Ok(()),
                    Ok(_) => Err("the agent's socket took part of the request".to_string()),
                    Err(e) => Err(format!("could not write to the agent: {e}")),
                },
                None => Err("the agent's connection closed before the request".to_string()),
            };
            if let Err(reason) = sent {
                let id = serde_json::from_slice::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|v| v["id"].as_u64())
                    .unwrap_or(0);
                let failed = crate::sample::pool::SitesReport {
                    time: wall_clock(),
                    id,
                    state: SitesState::Failed,
                    reason: Some(reason),
                    started: None,
                    seconds: None,
                    window: None,
                    history: None,
                    entries: None,
                    dropped: None,
                    cost: Default::default(),
                    stopped: None,
                    devices: Vec::new(),
                };
                self.inner.lock().feeds.apply_sites(&key, failed);
            }
        }
    }

    /// How long until the next thing to do on a timer.
    fn timeout(&self, now: Instant) -> Duration {
        let mut next = self.next_scan;
        for conn in self.conns.values() {
            match &conn.phase {
                Phase::AwaitingHello { deadline, .. } => next = next.min(*deadline),
                Phase::Trusted { .. } if !conn.settled => next = next.min(conn.last_data + QUIET),
                Phase::Trusted { .. } => {}
            }
        }
        next.saturating_duration_since(now)
    }

    /// Reads ready connections, applies timers, and tells waiters. True when a connection
    /// has more to read at once.
    fn service(&mut self, ready: &[FeedKey]) -> bool {
        let now = Instant::now();
        let wall = wall_clock();
        let mut shared = self.inner.lock();
        let mut ended: Vec<(FeedKey, End)> = Vec::new();
        let mut pending = false;
        for key in ready {
            if let Some(conn) = self.conns.get_mut(key) {
                match conn.pump(&mut shared.feeds, &mut self.buf, now, wall) {
                    Some(end) => ended.push((*key, end)),
                    None => pending |= conn.busy,
                }
            }
        }
        for (key, conn) in &mut self.conns {
            match &conn.phase {
                Phase::AwaitingHello { deadline, .. } if now >= *deadline => ended.push((
                    *key,
                    End::Refused("no valid hello within 5 s: is this a strata agent?".into()),
                )),
                Phase::Trusted { .. } if !conn.settled && now >= conn.last_data + QUIET => {
                    conn.settled = true
                }
                _ => {}
            }
        }
        for (key, end) in ended {
            if let Some(conn) = self.conns.remove(&key) {
                self.poller.remove(conn.stream.as_raw_fd());
                self.tokens.remove(&conn.token);
                shared.feeds.finish(key, end, now);
            }
        }
        shared.unsettled = self.conns.values().filter(|c| !c.settled).count();
        drop(shared);
        self.inner.changed.notify_all();
        pending
    }

    fn scan(&mut self, watched: &[Watched], requested: Option<u64>, now: Instant) {
        let connected: hashbrown::HashSet<u32> = {
            let shared = self.inner.lock();
            shared
                .feeds
                .map
                .values()
                .filter(|f| f.is_connected())
                .filter_map(|f| f.peer.map(|p| p.pid))
                .collect()
        };
        let dead = &self.dead;
        let is_dead = |key, born| dead.get(&key).is_some_and(|d| d.confirmed_as(born));
        let scan = self.scanner.scan(watched, &connected, &is_dead);
        self.scan_no += 1;
        self.next_scan = now + self.config.rescan;
        let inner = Arc::clone(&self.inner);
        let mut shared = inner.lock();
        let mut budgets = probe::Budgets::new(self.conns.values());
        for c in &scan.candidates {
            self.consider(&mut shared, c, &mut budgets, now);
        }
        let scan_no = self.scan_no;
        shared.feeds.retain(|f| match f.state {
            FeedState::Refused { .. } | FeedState::Dropped { .. } => f.seen == scan_no,
            FeedState::Closed { .. } => f.forget_at.is_none_or(|t| now < t),
            FeedState::Connected => true,
        });
        let listed: HashSet<FeedKey> = scan
            .candidates
            .iter()
            .map(|c| c.key)
            .chain(scan.dead.iter().copied())
            .collect();
        self.dead.retain(|key, _| listed.contains(key));
        shared.scan = scan.notes;
        shared.scans_run += 1;
        if let Some(requested) = requested {
            shared.scans_done = shared.scans_done.max(requested);
        }
        shared.unsettled = self.conns.values().filter(|c| !c.settled).count();
        drop(shared);
        inner.changed.notify_all();
    }
}

fn ask_sites(
    inner: &Inner,
    wake: &UnixStream,
    pid: u32,
    seconds: u32,
    top: u32,
) -> Result<u64, String> {
    let mut shared = inner.lock();
    let now = wall_clock();
    let (key, feed) = shared
        .feeds
        .map
        .iter()
        .find(|(_, f)| f.judged && f.peer.is_some_and(|p| p.pid == pid))
        .ok_or_else(|| format!("PID {pid} has no allocator feed: start it under `strata run`"))?;
    let hello = match (&feed.state, &feed.hello) {
        (FeedState::Connected, Some(hello)) => hello,
        (FeedState::Connected, None) => {
            return Err(format!("PID {pid}'s agent has not said hello yet"))
        }
        (
            FeedState::Refused { reason }
            | FeedState::Dropped { reason }
            | FeedState::Closed { reason },
            _,
        ) => return Err(format!("PID {pid}'s feed is not connected ({reason})")),
    };
    if !hello.answers("sites") {
        let version = hello
            .agent_version
            .as_deref()
            .unwrap_or("of an unknown version");
        return Err(format!(
                "PID {pid}'s agent ({version}) takes no requests: start the job under this strata's `strata run` for sites"
            ));
    }
    if let Some(running) = feed
        .sites
        .as_deref()
        .filter(|s| s.state == SitesState::Running)
    {
        let ends = running.started.unwrap_or(running.time) + running.seconds.unwrap_or(0.0);
        // A window whose end has long passed without a word is not waited on.
        if now < ends + SITES_GRACE {
            return Err(format!(
                "a sites window is already running on PID {pid} (ends in {:.0} s)",
                (ends - now).max(0.0)
            ));
        }
    }
    let id = request_id(now);
    let line = serde_json::json!({
        "v": PROTOCOL,
        "type": "sites_request",
        "id": id,
        "seconds": seconds.clamp(1, MAX_SITES_SECONDS),
        "top": top.clamp(1, crate::sample::pool::MAX_SITES as u32),
    });
    let mut bytes = line.to_string().into_bytes();
    bytes.push(b'\n');
    let key = *key;
    shared.requests.push((key, bytes));
    drop(shared);
    let _ = (&*wake).write(&[1]); // full: a wake-up is pending anyway
    Ok(id)
}

/// Asks a hub's agents for sites windows from another thread: the monitor's `w`.
pub struct HubAsker {
    inner: Arc<Inner>,
    wake: UnixStream,
}

impl std::fmt::Debug for HubAsker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HubAsker")
    }
}

impl HubAsker {
    /// As [`FeedHub::ask_sites`].
    pub fn ask(&self, pid: u32, seconds: u32, top: u32) -> Result<u64, String> {
        ask_sites(&self.inner, &self.wake, pid, seconds, top)
    }
}

/// A request's id: from the clock and this process, so that two monitors asking one agent
/// tell their answers apart; within 2^53 (a JSON number any reader keeps exact).
fn request_id(now: f64) -> u64 {
    let micros = (now * 1e6) as u64;
    let mixed = micros ^ (u64::from(std::process::id()) << 20);
    (mixed & ((1 << 53) - 1)).max(1)
}

fn wall_clock() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[path = "probe.rs"]
mod probe;

#[cfg(test)]
#[path = "hub_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "scan_tests.rs"]
mod scan_tests;

#[cfg(test)]
#[path = "stream_tests.rs"]
mod stream_tests;

#[cfg(test)]
#[path = "request_tests.rs"]
mod request_tests;

#[cfg(test)]
#[path = "when_found_tests.rs"]
mod when_found_tests;

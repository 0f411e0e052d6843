//! `strata serve`'s connections: its own accept loop, so that idle or half-sent connections
//! can never starve it of file descriptors (axum's `serve` sets no timeout and no cap).
//!
//! - A request's head must arrive whole within [`HEADER_TIMEOUT`] of the connection opening
//!   or of the previous response (hyper's header-read timeout, which also ends a kept-alive
//!   connection idle that long).
//! - A connection on which no byte moves either way for [`IDLE_TIMEOUT`] (a client that
//!   stops reading its response) is closed.
//! - At most [`Limits::max`] connections are open at once, well below the descriptor limit.
//!   At the cap, a new connection closes the one idle the longest among those with no request
//!   in flight, so that a scrape always finds room: filling the server with idle connections
//!   only makes them close sooner. Each time that happens is said on stderr, at most once per
//!   [`REPORT_EVERY`].
//! - Load is shed with an answer, never a silent close: the connection closed for the cap is
//!   answered `503 Service Unavailable` with `Retry-After` first (a client that sends its
//!   request after reads that); where every open connection has a request in flight, the new
//!   one is answered so instead; and where the process is out of descriptors, one kept spare
//!   is let go to take the waiting connection and answer it so.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};

/// From the connection opening, or the previous response, to a request's whole head.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// No byte in either direction for this long closes a connection.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The most connections open at once, however many descriptors the process may have.
const MAX_CONNECTIONS: usize = 1024;
/// Descriptors kept for everything else (NVML, feeds, the sampler's files).
const RESERVED_FDS: u64 = 256;
/// The cap line on stderr is said at most this often.
pub(crate) const REPORT_EVERY: Duration = Duration::from_secs(10);
/// After a stop signal, connections have this long to finish their response.
const DRAIN: Duration = Duration::from_secs(2);

/// How many connections may be open at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) max: usize,
}

impl Limits {
    /// Half the descriptors left after [`RESERVED_FDS`], at most [`MAX_CONNECTIONS`], at least 8.
    pub(crate) fn for_this_process() -> Limits {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a valid pointer to an rlimit for getrlimit to fill.
        let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
            limit.rlim_cur
        } else {
            1024
        };
        let room = soft.saturating_sub(RESERVED_FDS) / 2;
        Limits {
            max: usize::try_from(room)
                .unwrap_or(MAX_CONNECTIONS)
                .clamp(8, MAX_CONNECTIONS),
        }
    }
}

/// What a shed connection reads before it is closed.
const SHED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\nContent-Length: 62\r\nConnection: close\r\n\r\nstrata serve: too many connections open; try again in a second\n";

/// How long a shed answer may take to be written before the connection is closed anyway.
const SHED_WRITE: Duration = Duration::from_secs(1);

/// A connection as the accept loop knows it.
struct Entry {
    /// When a byte last moved (milliseconds since the server started).
    last: Arc<AtomicU64>,
    /// When a byte last came in, and last went out ([`NEVER`] before any).
    read: Arc<AtomicU64>,
    written: Arc<AtomicU64>,
    close: Arc<Notify>,
}

/// Stands for "no byte yet" in [`Entry::read`] and [`Entry::written`].
const NEVER: u64 = u64::MAX;

impl Entry {
    /// Whether no request is in flight on it: it has sent nothing, or nothing since it was
    /// last answered.
    fn quiet(&self) -> bool {
        let read = self.read.load(Ordering::Relaxed);
        let written = self.written.load(Ordering::Relaxed);
        read == NEVER || (written != NEVER && written >= read)
    }
}

/// Writes the shed answer to `stream` (within [`SHED_WRITE`]) and closes it.
async fn shed<S: AsyncWrite + Unpin>(mut stream: S) {
    use tokio::io::AsyncWriteExt;
    let _ = tokio::time::timeout(SHED_WRITE, async {
        stream.write_all(SHED).await?;
        stream.shutdown().await
    })
    .await;
}

/// The open connections, and the cap's count for the stderr line.
#[derive(Default)]
struct Registry {
    open: HashMap<u64, Entry>,
    next_id: u64,
    closed_for_cap: u64,
    reported: Option<Instant>,
}

/// Counts a connection shed for the cap, and says so when it is time.
fn report_cap(registry: &mut Registry, limits: Limits, now: Instant) {
    registry.closed_for_cap += 1;
    if registry
        .reported
        .is_some_and(|at| now.duration_since(at) < REPORT_EVERY)
    {
        return;
    }
    eprintln!(
        "strata serve: {} connections open, the cap: {} connection(s) answered 503 (Retry-After) and closed to make room, the longest idle first (hint: a client opens connections and sends nothing; each closes after {} s without a request, or at the cap)",
        limits.max,
        registry.closed_for_cap,
        HEADER_TIMEOUT.as_secs()
    );
    registry.closed_for_cap = 0;
    registry.reported = Some(now);
}

fn lock(registry: &Mutex<Registry>) -> MutexGuard<'_, Registry> {
    registry
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Serves `app` on `listener` until `stop` resolves, then lets open requests finish.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    stop: impl std::future::Future<Output = ()>,
) {
    let started = Instant::now();
    let registry = Arc::new(Mutex::new(Registry::default()));
    let (stopping, stopped) = watch::channel(false);
    let builder = Arc::new(builder());
    // A descriptor kept for when the process has none left: let go, it takes the connection
    // waiting so that it is answered (503) rather than left unanswered.
    let mut spare = std::fs::File::open("/dev/null").ok();
    tokio::pin!(stop);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors (another part of the process took them) or a
                    // connection reset before it was taken.
                    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) && spare.take().is_some() {
                        if let Ok(Ok((stream, _))) =
                            tokio::time::timeout(Duration::from_millis(100), listener.accept()).await
                        {
                            shed(stream).await;
                            report_cap(&mut lock(&registry), limits, Instant::now());
                        }
                        spare = std::fs::File::open("/dev/null").ok();
                    } else if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let _ = stream.set_nodelay(true);
        let last = Arc::new(AtomicU64::new(millis(started)));
        let read = Arc::new(AtomicU64::new(NEVER));
        let written = Arc::new(AtomicU64::new(NEVER));
        let close = Arc::new(Notify::new());
        let admitted = {
            let mut registry = lock(&registry);
            let room = registry.open.len() < limits.max || {
                // The idlest with no request in flight makes room; it is answered 503.
                let idlest = registry
                    .open
                    .iter()
                    .filter(|(_, e)| e.quiet())
                    .min_by_key(|(_, e)| e.last.load(Ordering::Relaxed))
                    .map(|(id, e)| (*id, Arc::clone(&e.close)));
                if let Some((idlest, close)) = &idlest {
                    registry.open.remove(idlest);
                    close.notify_one();
                }
                report_cap(&mut registry, limits, Instant::now());
                idlest.is_some()
            };
            room.then(|| {
                let id = registry.next_id;
                registry.next_id += 1;
                registry.open.insert(
                    id,
                    Entry {
                        last: Arc::clone(&last),
                        read: Arc::clone(&read),
                        written: Arc::clone(&written),
                        close: Arc::clone(&close),
                    },
                );
                id
            })
        };
        let Some(id) = admitted else {
            // Every open connection has a request in flight: this one is answered 503.
            tokio::spawn(shed(stream));
            continue;
        };
        let activity = Activity {
            last,
            read,
            written,
            started,
        };
        let (app, builder, registry) = (app.clone(), Arc::clone(&builder), Arc::clone(&registry));
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            connection(stream, app, &builder, activity, &close, &mut stopped).await;
            lock(&registry).open.remove(&id);
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    let deadline = Instant::now() + DRAIN + Duration::from_millis(200);
    while !lock(&registry).open.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// When a byte last moved on a connection, either way and each way (milliseconds since
/// `started`).
pub(super) struct Activity {
    pub(crate) last: Arc<AtomicU64>,
    pub(crate) read: Arc<AtomicU64>,
    pub(crate) written: Arc<AtomicU64>,
    pub(crate) started: Instant,
}

/// The HTTP/1 settings of every connection: the header-read timeout, with its timer; a
/// client that closes its side after its requests (`nc -N`) still gets every answer.
pub(super) fn builder() -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .half_close(true);
    builder
}

/// Serves one connection until it ends, it stalls for [`IDLE_TIMEOUT`], `close` is
/// notified (closed for the cap: it is answered 503 first), or `stopped` turns true (then it
/// has [`DRAIN`] to finish).
pub(super) async fn connection<S>(
    stream: S,
    app: Router,
    builder: &hyper::server::conn::http1::Builder,
    activity: Activity,
    close: &Notify,
    stopped: &mut watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Activity {
        last,
        read,
        written,
        started,
    } = activity;
    let io = TokioIo::new(Counted {
        stream,
        last: Arc::clone(&last),
        read,
        written,
        started,
    });
    let mut conn = builder.serve_connection(io, TowerToHyperService::new(app));
    let mut draining: Option<tokio::time::Instant> = None;
    loop {
        let since =
            Duration::from_millis(millis(started).saturating_sub(last.load(Ordering::Relaxed)));
        let idle_left = IDLE_TIMEOUT.saturating_sub(since);
        let deadline = draining.unwrap_or_else(|| tokio::time::Instant::now() + idle_left);
        tokio::select! {
            _ = &mut conn => break,
            () = close.notified() => {
                // Closed for the cap, with no request in flight: answered, then closed.
                shed(conn.into_parts().io.into_inner()).await;
                return;
            }
            changed = stopped.changed(), if draining.is_none() => {
                if changed.is_err() || *stopped.borrow() {
                    std::pin::Pin::new(&mut conn).graceful_shutdown();
                    draining = Some(tokio::time::Instant::now() + DRAIN);
                }
            }
            () = tokio::time::sleep_until(deadline) => {
                let since = millis(started).saturating_sub(last.load(Ordering::Relaxed));
                if draining.is_some() || Duration::from_millis(since) >= IDLE_TIMEOUT {
                    break;
                }
            }
        }
    }
}

fn millis(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// A stream that notes when a byte last moved through it, and which way.
struct Counted<S> {
    stream: S,
    last: Arc<AtomicU64>,
    read: Arc<AtomicU64>,
    written: Arc<AtomicU64>,
    started: Instant,
}

impl<S> Counted<S> {
    fn moved(&self, n: usize, way: &AtomicU64) {
        if n > 0 {
            let now = millis(self.started);
            self.last.store(now, Ordering::Relaxed);
            way.store(now, Ordering::Relaxed);
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.moved(n, &self.read);
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &polled {
            self.moved(*n, &self.written);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_descriptors_for_the_rest() {
        let limits = Limits::for_this_process();
        assert!((8..=MAX_CONNECTIONS).contains(&limits.max), "{limits:?}");
    }

    #[test]
    fn the_cap_line_is_said_at_most_once_per_period_with_its_count() {
        let mut registry = Registry::default();
        let limits = Limits { max: 4 };
        let start = Instant::now();
        report_cap(&mut registry, limits, start);
        assert_eq!(registry.closed_for_cap, 0, "the first is said at once");
        for _ in 0..5 {
            report_cap(&mut registry, limits, start + Duration::from_secs(1));
        }
        assert_eq!(registry.closed_for_cap, 5, "then counted, not said");
        report_cap(&mut registry, limits, start + REPORT_EVERY);
        assert_eq!(registry.closed_for_cap, 0, "said again, with the count");
    }
}

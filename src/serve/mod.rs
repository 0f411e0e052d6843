//! `strata serve --listen ADDR`: the layers and findings as Prometheus metrics over HTTP.
//!
//! A sampler thread owns the source (NVML with feeds, or the demo) and the pipeline: every
//! interval it takes a sample, derives layers and findings, and encodes the metrics once,
//! swapping them in behind a lock. A scrape only copies that text: it never waits on NVML.
//! The address is bound before anything else starts, so a port in use is an error at once.
//! Connections are capped and timed out ([`conns`]), so idle clients cannot starve it.

mod conns;
pub mod exposition;
mod findings;
#[doc(hidden)]
pub mod fuzz;
pub mod labels;
pub(crate) mod processes;
mod vitals;

use crate::pipeline::Pipeline;
use crate::source::{Schedule, Source};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use exposition::{Exposition, SamplerCounts};
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Where `strata serve` listens unless told: this machine only.
pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:9842";

/// The Prometheus text format's content type (0.0.4).
const PROMETHEUS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// OpenMetrics text, served to a client that asks for it (Prometheus does).
const OPENMETRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Why `strata serve` could not start listening.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("cannot listen on `{addr}`: it is not an address ({detail}) (hint: write HOST:PORT, e.g. 127.0.0.1:9842 for this machine only, or 0.0.0.0:9842 for every interface)")]
    Invalid { addr: String, detail: String },
    #[error("cannot listen on {addr}: the port is in use (hint: another process listens there (`ss -ltnp` names it); choose another port with --listen HOST:PORT)")]
    InUse { addr: String },
    #[error("cannot listen on {addr}: the address is not one of this machine's (hint: use 127.0.0.1 for this machine only, 0.0.0.0 for every interface, or an address `ip addr` lists)")]
    NotLocal { addr: String },
    #[error("cannot listen on {addr}: permission denied (hint: ports below 1024 need root or CAP_NET_BIND_SERVICE; choose a port above 1024)")]
    Denied { addr: String },
    #[error(
        "cannot listen on {addr}: {detail} (hint: choose another address with --listen HOST:PORT)"
    )]
    Other { addr: String, detail: String },
}

/// Resolves `addr` (HOST:PORT; a host name is resolved) and binds the first of its
/// addresses that binds.
pub fn bind(addr: &str) -> Result<TcpListener, ListenError> {
    let candidates: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| ListenError::Invalid {
            addr: crate::text::clean(addr).into_owned(),
            detail: e.to_string(),
        })?
        .collect();
    let mut last = ListenError::Invalid {
        addr: crate::text::clean(addr).into_owned(),
        detail: "it names no address".into(),
    };
    for candidate in candidates {
        let shown = candidate.to_string();
        match TcpListener::bind(candidate) {
            Ok(listener) => return Ok(listener),
            Err(e) => {
                last = match e.kind() {
                    ErrorKind::AddrInUse => ListenError::InUse { addr: shown },
                    ErrorKind::AddrNotAvailable => ListenError::NotLocal { addr: shown },
                    ErrorKind::PermissionDenied => ListenError::Denied { addr: shown },
                    _ => ListenError::Other {
                        addr: shown,
                        detail: e.to_string(),
                    },
                }
            }
        }
    }
    Err(last)
}

/// How `strata serve` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub interval: Duration,
    /// Processes exported one by one; the rest are summed per device as `pid="other"`.
    pub max_processes: usize,
    /// The flight record every sample served goes to (`--record DIR --ring DURATION`).
    pub recorder: Option<Arc<crate::record::ring::RingThread>>,
}

/// The last complete sample's metrics, and when it was taken.
#[derive(Default)]
struct Latest {
    exposition: Arc<Exposition>,
    taken: Option<Instant>,
}

type Shared = Arc<RwLock<Latest>>;

/// Serves `/metrics` on `listener` until SIGTERM, SIGINT or SIGHUP. The first sample is
/// taken before the first request is answered; a failing later sample leaves the last
/// complete one served (and counted in `strata_sample_errors_total`).
pub fn run(
    listener: TcpListener,
    mut source: Box<dyn Source>,
    mut pipeline: Pipeline,
    options: ServeOptions,
) -> anyhow::Result<()> {
    for earlier in source.backlog() {
        pipeline.ingest(earlier);
    }
    let shared: Shared = Arc::default();
    let mut counts = SamplerCounts::default();
    // As the monitor does (`tui.rs`): what only starting read is let go of before the first
    // sample, and what only the first sample read once it is served.
    crate::footprint::release_startup_pages();
    // The first sample: a source that cannot sample at all is an error before serving.
    let observed = pipeline.ingest(source.sample()?);
    if let Some(recorder) = &options.recorder {
        recorder.send(&observed.sample, &observed.findings);
    }
    counts.samples += 1;
    store(
        &shared,
        exposition::encode(&observed, counts, options.max_processes),
    );
    crate::footprint::release_startup_pages();
    let (stop, stopped) = mpsc::channel::<()>();
    let sampler = {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("strata-sampler".into())
            .spawn(move || sample_loop(source, pipeline, counts, &options, &shared, &stopped))?
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    let served = runtime.block_on(serve(listener, shared));
    let _ = stop.send(());
    let _ = sampler.join();
    served
}

fn store(shared: &Shared, exposition: Exposition) {
    let latest = Latest {
        exposition: Arc::new(exposition),
        taken: Some(Instant::now()),
    };
    match shared.write() {
        Ok(mut guard) => *guard = latest,
        Err(poisoned) => *poisoned.into_inner() = latest,
    }
}

fn sample_loop(
    mut source: Box<dyn Source>,
    mut pipeline: Pipeline,
    mut counts: SamplerCounts,
    options: &ServeOptions,
    shared: &Shared,
    stopped: &mpsc::Receiver<()>,
) {
    // The first sample was taken before the server answered: the next is an interval on.
    let mut schedule = Schedule::new(Instant::now() + options.interval, options.interval);
    let mut last_error: Option<String> = None;
    loop {
        let wait = schedule.due().saturating_duration_since(Instant::now());
        match stopped.recv_timeout(wait) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        // A slow poll does not make the next ones come in a burst.
        schedule.advance();
        match source.sample() {
            Ok(sample) => {
                let observed = pipeline.ingest(sample);
                if let Some(recorder) = &options.recorder {
                    recorder.send(&observed.sample, &observed.findings);
                }
                counts.samples += 1;
                store(
                    shared,
                    exposition::encode(&observed, counts, options.max_processes),
                );
                if last_error.take().is_some() {
                    eprintln!("strata serve: sampling works again");
                }
            }
            Err(e) => {
                counts.errors += 1;
                let message = format!("{e} (hint: {})", e.hint());
                // The counter goes on in the metrics; the log says each new cause once.
                if last_error.as_deref() != Some(message.as_str()) {
                    eprintln!("strata serve: {message}");
                }
                last_error = Some(message);
            }
        }
    }
}

/// The endpoints: `/metrics`, `/` and not found.
fn app(shared: Shared) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/", get(index))
        .fallback(not_found)
        .with_state(shared)
}

async fn serve(listener: TcpListener, shared: Shared) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let app = app(shared);
    conns::serve(
        listener,
        app,
        conns::Limits::for_this_process(),
        stop_signal(),
    )
    .await;
    Ok(())
}

/// Resolves on SIGTERM, SIGINT or SIGHUP.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut streams = Vec::new();
    for kind in [
        SignalKind::terminate(),
        SignalKind::interrupt(),
        SignalKind::hangup(),
    ] {
        if let Ok(stream) = signal(kind) {
            streams.push(stream);
        }
    }
    if streams.is_empty() {
        return std::future::pending().await;
    }
    let waits = streams.iter_mut().map(|s| Box::pin(s.recv()));
    futures::future::select_all(waits).await;
}

async fn metrics(State(shared): State<Shared>, headers: HeaderMap) -> impl IntoResponse {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let (body, taken) = {
        let latest = match shared.read() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        (Arc::clone(&latest.exposition), latest.taken)
    };
    let age = taken.map(|t| t.elapsed().as_secs_f64());
    let (stored, content_type) = if openmetrics {
        (&body.openmetrics, OPENMETRICS_TYPE)
    } else {
        (&body.prometheus, PROMETHEUS_TYPE)
    };
    (
        [(header::CONTENT_TYPE, content_type)],
        exposition::finish(stored, age, openmetrics),
    )
}

async fn index() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "strata: GPU memory by layer, per GPU, MIG instance and process, as Prometheus metrics at /metrics\n",
    )
}

async fn not_found() -> impl IntoResponse {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "not found: the metrics are at /metrics\n",
    )
}

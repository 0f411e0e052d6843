//! A fuzz harness for the HTTP request path of `strata serve`: a client's bytes through the
//! same connection code (hyper's HTTP/1 with serve's header-read timeout, the idle watch),
//! the router and the handlers, over an in-memory stream. It panics when the connection does
//! not end once the client has sent everything, or answers with anything but HTTP/1
//! responses of a status other than 500. `fuzz/` runs it under AFL++ and `tests/fuzz_corpus.rs` replays the kept corpus.

use super::conns::{builder, connection, Activity};
use super::{app, Shared};
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify};

/// Longer than any answer takes; a connection still open then is a hang.
const PATIENCE: Duration = Duration::from_secs(20);

/// What the server writes back to a client that sends `request` and then closes its side.
pub fn one_connection(request: &[u8]) -> Vec<u8> {
    let (client, server) = match UnixStream::pair() {
        Ok(pair) => pair,
        Err(e) => panic!("a socket pair: {e}"),
    };
    let served = std::thread::spawn(move || serve_one(server));
    let mut writer = match client.try_clone() {
        Ok(writer) => writer,
        Err(e) => panic!("a second handle: {e}"),
    };
    let request = request.to_vec();
    let sent = std::thread::spawn(move || {
        let _ = writer.write_all(&request);
        let _ = writer.shutdown(Shutdown::Write);
    });
    let mut reader = client;
    let _ = reader.set_read_timeout(Some(PATIENCE));
    let mut answer = Vec::new();
    if let Err(e) = reader.read_to_end(&mut answer) {
        panic!("the connection did not end within {PATIENCE:?} of the client's last byte: {e}");
    }
    let _ = sent.join();
    if served.join().is_err() {
        panic!("the connection's thread panicked");
    }
    answer
}

fn serve_one(server: UnixStream) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => panic!("a runtime: {e}"),
    };
    runtime.block_on(async {
        let _ = server.set_nonblocking(true);
        let server = match tokio::net::UnixStream::from_std(server) {
            Ok(server) => server,
            Err(e) => panic!("a tokio stream: {e}"),
        };
        let activity = Activity {
            last: Arc::new(AtomicU64::new(0)),
            read: Arc::new(AtomicU64::new(u64::MAX)),
            written: Arc::new(AtomicU64::new(u64::MAX)),
            started: Instant::now(),
        };
        let close = Notify::new();
        let (_stop, mut stopped) = watch::channel(false);
        connection(
            server,
            app(Shared::default()),
            &builder(),
            activity,
            &close,
            &mut stopped,
        )
        .await;
    });
}

/// The checks on one client's bytes.
pub fn http(request: &[u8]) {
    let answer = one_connection(request);
    if answer.is_empty() {
        return; // nothing whole to answer
    }
    assert!(
        answer.starts_with(b"HTTP/1.1 ") || answer.starts_with(b"HTTP/1.0 "),
        "not an HTTP/1 response: {:?}",
        String::from_utf8_lossy(&answer[..answer.len().min(200)])
    );
    let text = String::from_utf8_lossy(&answer);
    // The bodies served (metrics of an empty sample, the index, not found) never say
    // "HTTP/1.", so each occurrence starts a response.
    for status in text.split("HTTP/1.").skip(1).filter_map(|r| r.get(2..5)) {
        let code: u16 = status
            .parse()
            .unwrap_or_else(|_| panic!("status {status:?} in {text:?}"));
        assert!(
            (200..600).contains(&code) && code != 500,
            "status {code}: {text:?}"
        );
    }
}

//! A page served over HTTP by the test itself: a made-up `strata serve` node, or a made-up
//! Prometheus that answers every request with one JSON body.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Serves one page at every path until dropped: `/metrics` of a made-up node. Each
/// connection is answered whole and closed.
pub struct Page {
    pub addr: String,
    stop: Arc<AtomicBool>,
}

impl Page {
    pub fn serve(body: String) -> Page {
        Page::serve_as(body, "text/plain; version=0.0.4")
    }

    /// Serves `body` with `content_type`.
    pub fn serve_as(body: String, content_type: &'static str) -> Page {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut stream) = stream else { continue };
                let mut buf = [0u8; 4096];
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = stream.read(&mut buf);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Page { addr, stop }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the stop and the port closes.
        let _ = std::net::TcpStream::connect(&self.addr);
    }
}

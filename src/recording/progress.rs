//! How far a long read has come, said on a terminal's stderr: nothing for the first second
//! (most recordings are read by then), then the bytes read of the file's size a few times a
//! second, on one line rewritten in place and cleared at the end.

use super::Progress;
use crate::units::bytes;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Reads shorter than this say nothing.
pub(crate) const QUIET_FOR: Duration = Duration::from_secs(1);
/// How often the line is rewritten.
const EVERY: Duration = Duration::from_millis(250);

/// `123 MiB of 505 MiB (24%)`, or `123 MiB` where the size is not known.
pub(crate) fn words(progress: &Progress) -> String {
    let read = progress.read();
    match progress.total() {
        Some(total) if total > 0 => format!(
            "{} of {} ({:.0}%)",
            bytes(read),
            bytes(total),
            (read as f64 / total as f64 * 100.0).min(100.0).floor()
        ),
        _ => bytes(read),
    }
}

/// The progress line, shown while this lives.
pub(crate) struct OnStderr {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

/// Shows `progress` on stderr as `strata: reading WHAT: ...` once the read has taken
/// [`QUIET_FOR`], if stderr is a terminal; `None` when it is not (a log file gets no
/// carriage returns).
pub(crate) fn on_stderr(progress: Progress, what: &str) -> Option<OnStderr> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let what = crate::text::clean(what).into_owned();
    let stop = Arc::new((Mutex::new(false), Condvar::new()));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("strata-progress".into())
        .spawn(move || {
            let (lock, changed) = &*flag;
            let began = Instant::now();
            let mut shown = false;
            let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let wait = if shown {
                    EVERY
                } else {
                    QUIET_FOR.saturating_sub(began.elapsed())
                };
                stopped = changed
                    .wait_timeout(stopped, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                if *stopped {
                    break;
                }
                if began.elapsed() >= QUIET_FOR {
                    shown = true;
                    let line = format!("\r\x1b[Kstrata: reading {what}: {}", words(&progress));
                    let _ = std::io::stderr().write_all(line.as_bytes());
                }
            }
            if shown {
                let _ = std::io::stderr().write_all(b"\r\x1b[K");
            }
        })
        .ok()?;
    Some(OnStderr {
        stop,
        thread: Some(thread),
    })
}

impl Drop for OnStderr {
    fn drop(&mut self) {
        let (lock, changed) = &*self.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        changed.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_reads_as_bytes_of_the_size() {
        let progress = Progress::new(Some(505 << 20));
        assert_eq!(words(&progress), "0 B of 505 MiB (0%)");
        assert_eq!(words(&Progress::new(None)), "0 B");
    }
}

//! The event loop's one timer, on a `timerfd`: the loop wakes at its time and never before.
//!
//! tokio's timer wheel wakes its thread at the start of the wheel's slot where a sleep's
//! deadline lies, to move it to a finer level, and slots are 64 ms at the level that holds a
//! sleep 2 s away and 4.096 s at the next one. A sleep to the moment the next poll would be
//! overdue (about two intervals ahead, armed again at every sample) crosses a 4.096 s
//! boundary about half the time, so the loop woke about 1.5 times a second at a 1 s interval
//! where once was enough. The kernel's timer wakes the loop once, when it expires.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;

/// A one-shot alarm, set to a moment or disarmed. Setting it again to the moment it holds
/// costs nothing; a moment already past fires at once.
pub(crate) struct Alarm {
    fd: AsyncFd<OwnedFd>,
    /// The moment it is set to, until it fires or is disarmed.
    set: Option<Instant>,
}

impl Alarm {
    /// A disarmed alarm on the monotonic clock (the clock of [`Instant`]). Called within a
    /// tokio runtime with I/O enabled (else tokio panics).
    pub(crate) fn new() -> io::Result<Alarm> {
        // SAFETY: timerfd_create has no preconditions; a descriptor it returns is ours alone.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor just opened and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an `OwnedFd` names one open descriptor, the same one every time, until the
        // `AsyncFd` that owns it drops it.
        let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }?;
        Ok(Alarm { fd, set: None })
    }

    /// Sets the alarm to `at`, or disarms it (`None`). A timer that expired unread is
    /// forgotten: only the moment set last can fire.
    pub(crate) fn set(&mut self, at: Option<Instant>) -> io::Result<()> {
        if at == self.set {
            return Ok(());
        }
        let value = match at {
            // A zero value would disarm it: a moment already past is 1 ns away.
            Some(at) => to_timespec(
                at.saturating_duration_since(Instant::now())
                    .max(Duration::from_nanos(1)),
            ),
            None => libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
        };
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        // SAFETY: the descriptor is an open timerfd; `spec` is a valid itimerspec and the old
        // value is not asked for.
        let rc = unsafe {
            libc::timerfd_settime(
                self.fd.get_ref().as_raw_fd(),
                0,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        self.set = at;
        Ok(())
    }

    /// Waits until the alarm fires (forever while it is disarmed); it is then disarmed.
    pub(crate) async fn fired(&mut self) -> io::Result<()> {
        loop {
            let mut guard = self.fd.readable().await?;
            let mut expirations = [0u8; 8];
            // SAFETY: reads 8 bytes into an 8-byte buffer from the open timerfd.
            let read = unsafe {
                libc::read(
                    guard.get_inner().as_raw_fd(),
                    expirations.as_mut_ptr().cast(),
                    expirations.len(),
                )
            };
            if read == 8 {
                self.set = None;
                return Ok(());
            }
            let error = io::Error::last_os_error();
            if read < 0 && error.kind() != io::ErrorKind::WouldBlock {
                return Err(error);
            }
            // Set again since it was seen readable: not yet.
            guard.clear_ready();
        }
    }
}

fn to_timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(d.subsec_nanos()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    /// It fires once its moment has come, not before, and is then disarmed.
    #[test]
    fn an_alarm_fires_at_its_moment_and_not_before() {
        runtime().block_on(async {
            let mut alarm = Alarm::new().expect("timerfd");
            let at = Instant::now() + Duration::from_millis(30);
            alarm.set(Some(at)).expect("set");
            alarm.fired().await.expect("fired");
            assert!(Instant::now() >= at, "fired early");
            assert_eq!(alarm.set, None, "disarmed once fired");
        });
    }

    /// A moment set later replaces the earlier one, which never fires; a moment already
    /// past fires at once.
    #[test]
    fn the_moment_set_last_is_the_one_that_fires() {
        runtime().block_on(async {
            let mut alarm = Alarm::new().expect("timerfd");
            let start = Instant::now();
            alarm
                .set(Some(start + Duration::from_millis(1)))
                .expect("set");
            // Expired unread: the next setting forgets it.
            std::thread::sleep(Duration::from_millis(5));
            alarm
                .set(Some(start + Duration::from_secs(3600)))
                .expect("set");
            let woke = tokio::select! {
                _ = alarm.fired() => "alarm",
                // Whatever the machine's load, an hour is not up after this.
                _ = tokio::time::sleep(Duration::from_millis(50)) => "sleep",
            };
            assert_eq!(
                woke, "sleep",
                "the earlier moment fired after it was replaced"
            );
            alarm.set(None).expect("disarm");
            let woke = tokio::select! {
                _ = alarm.fired() => "alarm",
                _ = tokio::time::sleep(Duration::from_millis(50)) => "sleep",
            };
            assert_eq!(woke, "sleep", "a disarmed alarm fired");
            alarm.set(Some(start)).expect("set in the past");
            alarm.fired().await.expect("a moment past fires at once");
        });
    }
}

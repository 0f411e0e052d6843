//! A thin epoll(7) wrapper: with many feeds, each wake-up costs what is ready, not what is
//! watched (poll(2) over 64 sockets spent most of the hub's time in the kernel).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

pub(crate) struct Poller {
    epoll: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Poller {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: plain epoll_create1(2) call; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Poller {
            epoll,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 64],
        })
    }

    /// Watches `fd` for input, reported as `token`.
    pub(crate) fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
            u64: token,
        };
        // SAFETY: valid epoll and target descriptors, valid event pointer.
        if unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) }
            != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub(crate) fn remove(&self, fd: RawFd) {
        let mut event = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: as in `add`; a failure (already gone) changes nothing.
        unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut event) };
    }

    /// Waits up to `timeout` and returns the tokens that are ready (at most 64 per call;
    /// level-triggered, so the rest come on the next call).
    pub(crate) fn wait(&mut self, timeout: Duration, ready: &mut Vec<u64>) {
        ready.clear();
        // Round up, so a timer is not woken a millisecond early again and again.
        let ms = timeout.as_micros().div_ceil(1000).min(60_000) as libc::c_int;
        // SAFETY: `events` is a valid buffer of the given length.
        let n = unsafe {
            libc::epoll_wait(
                self.epoll.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                ms,
            )
        };
        if n < 0 {
            if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                std::thread::sleep(Duration::from_millis(100)); // never spin on a failing wait
            }
            return;
        }
        ready.extend(self.events[..n as usize].iter().map(|e| e.u64));
    }
}

/// Waits until `fd` is readable or `timeout` passes (without reading it).
pub(crate) fn wait_readable(fd: &impl AsRawFd, timeout: Duration) {
    let mut pollfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(60_000) as libc::c_int;
    // SAFETY: one valid `pollfd`.
    unsafe { libc::poll(&mut pollfd, 1, ms) };
}

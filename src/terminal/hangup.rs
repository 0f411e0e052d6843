//! A terminal that hangs up (its window closed, its SSH connection gone) ends the monitor as
//! SIGHUP does, whether or not the signal comes.
//!
//! The kernel sends SIGHUP on a hangup to the session's leader only; a shell passes it on to
//! its jobs, but one that does not (`trap '' HUP`, zsh's `nohup` option, a program that runs
//! strata in a session of its own) leaves strata untold. The terminal then reads as ended at
//! every read, and crossterm's reader, which retries a read that returns nothing without
//! asking whether the terminal is still there, spins on it without returning: a whole core,
//! until the next frame's write fails (at the next sample) or, where nothing is drawn (a
//! paused replay), for ever. So the event loop's own `epoll` waits on the terminal too, on
//! a duplicate of the descriptor crossterm reads: a key wakes it once (crossterm reads the
//! key) and it waits again; a hangup is said as SIGHUP would say it. Nothing wakes it while
//! nothing is typed.
//!
//! A frame's write can meet the hangup before the watch does: [`is_hangup`] tells that
//! error from another, and the loop ends as it would on the watch's word.

use super::ReceivedSignal;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::mpsc::UnboundedSender;

/// Watches the terminal read on `fd` (the descriptor crossterm reads, still its own) on a
/// task of the current runtime; on a hangup, sends what SIGHUP asks
/// ([`ReceivedSignal::Quit`]) to `tx`, once. Called within a tokio runtime with I/O enabled.
pub(crate) fn watch(fd: RawFd, tx: UnboundedSender<ReceivedSignal>) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller keeps open; the one it returns is ours alone.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dup` was just opened and is owned by nobody else. Its flags are the open
    // file's, shared with crossterm's descriptor: none is changed, and nothing is read
    // through it.
    let owned = unsafe { OwnedFd::from_raw_fd(dup) };
    // SAFETY: an `OwnedFd` names one open descriptor, the same one every time, until the
    // `AsyncFd` that owns it drops it.
    let watched = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }?;
    tokio::spawn(async move {
        loop {
            match watched.readable().await {
                Ok(mut ready) if !ready.ready().is_read_closed() => ready.clear_ready(),
                // Hung up (the kernel's `EPOLLHUP`), or no longer waitable on.
                Ok(_) | Err(_) => {
                    let _ = tx.send(ReceivedSignal::Quit);
                    return;
                }
            }
        }
    });
    Ok(())
}

/// Whether a write to the terminal failed because it hung up (`EIO`: the kernel's answer to
/// a write on a terminal hung up, or from a process group it has orphaned), which ends the
/// monitor as a hangup does, not as an error to report on a terminal no one reads.
pub(crate) fn is_hangup(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::EIO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A pseudo-terminal pair: (the side a terminal emulator holds, the side a program reads).
    fn pty() -> (OwnedFd, OwnedFd) {
        let (mut main, mut side) = (-1, -1);
        // SAFETY: openpty writes two descriptors it opened into the given places; the name,
        // modes and size are not asked for.
        let rc = unsafe {
            libc::openpty(
                &mut main,
                &mut side,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "openpty: {}", io::Error::last_os_error());
        // SAFETY: both were just opened and are owned by nobody else.
        unsafe { (OwnedFd::from_raw_fd(main), OwnedFd::from_raw_fd(side)) }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }

    /// Typing wakes the watch and says nothing; closing the terminal's other side says
    /// what SIGHUP says, once.
    #[test]
    fn a_hangup_is_said_as_sighup_and_a_key_is_not() {
        use std::os::fd::AsRawFd;
        let (main, side) = pty();
        runtime().block_on(async move {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            watch(side.as_raw_fd(), tx).expect("watched");
            // SAFETY: a write of one byte from a live buffer to an open descriptor.
            let n = unsafe { libc::write(main.as_raw_fd(), b"x".as_ptr().cast(), 1) };
            assert_eq!(n, 1);
            // Unread, the key stays readable: the watch, woken by it, must wait again.
            let quiet = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await;
            assert!(quiet.is_err(), "a key was said as a hangup: {quiet:?}");
            drop(main);
            // Bounded by the event, not a guess at how long it takes.
            let patience = Duration::from_secs(30);
            let said = tokio::time::timeout(patience, rx.recv()).await;
            assert_eq!(said.ok(), Some(Some(ReceivedSignal::Quit)));
            let after = tokio::time::timeout(patience, rx.recv()).await;
            assert_eq!(after.ok(), Some(None), "said once, then the task is gone");
            drop(side);
        });
    }

    #[test]
    fn eio_is_a_hangup_and_other_errors_are_not() {
        assert!(is_hangup(&io::Error::from_raw_os_error(libc::EIO)));
        assert!(!is_hangup(&io::Error::from_raw_os_error(libc::ENOSPC)));
        assert!(!is_hangup(&io::Error::other("a write of ours failed")));
    }
}

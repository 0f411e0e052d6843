//! Who is on the other end of a socket (ARCHITECTURE.md, "The feed"): the directory, the
//! kernel's word on the peer (`SO_PEERCRED`), and the peer's innermost pid. The agent's own
//! `hello` is checked against these in [`check_hello`] once it arrives.

use super::candidate::Candidate;
use super::names::read_status;
use crate::sample::feed::PeerCred;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// The outcome of connecting to a candidate.
pub(crate) enum Attempt {
    /// Connected, and the peer is who the directory says; the `hello` is still to be checked.
    Connected {
        stream: UnixStream,
        peer: PeerCred,
        nspid: u32,
    },
    Refused {
        reason: String,
        peer: Option<PeerCred>,
        nspid: Option<u32>,
    },
    /// Nobody listens: a socket left behind by an agent that died. Not a feed.
    Stale,
    /// A transient failure (the listener's backlog is full, no descriptors left): try again.
    Busy,
}

pub(crate) fn attempt(c: &Candidate, proc_root: &Path) -> Attempt {
    let refused = |reason: String| Attempt::Refused {
        reason,
        peer: None,
        nspid: None,
    };
    // A directory that fails its check is not trusted, but the socket in it is still
    // connected to (nothing is read): a dead one is stale, and a live one's kernel
    // credentials say which process the refusal is about.
    let dir_refusal = c.dir_verdict.as_ref().err();
    let stream = match connect(&c.dir, &c.name) {
        Ok(stream) => stream,
        Err(e) => {
            return match e.raw_os_error() {
                Some(libc::ECONNREFUSED | libc::ENOENT) => Attempt::Stale,
                _ if dir_refusal.is_some() => refused(dir_refusal.cloned().unwrap_or_default()),
                Some(
                    libc::EAGAIN
                    | libc::EMFILE
                    | libc::ENFILE
                    | libc::ENOBUFS
                    | libc::ENOMEM
                    | libc::EINTR,
                ) => Attempt::Busy,
                _ => refused(format!(
                    "cannot connect to {}: {e}: run strata as uid {} or as root",
                    c.path.display(),
                    c.expected_uid
                )),
            }
        }
    };
    let peer = match peer_cred(&stream) {
        Ok(peer) => peer,
        Err(e) => {
            return refused(format!(
                "cannot read the peer's credentials (SO_PEERCRED): {e}"
            ))
        }
    };
    let refused = |reason: String| Attempt::Refused {
        reason,
        peer: Some(peer),
        nspid: None,
    };
    if let Some(reason) = dir_refusal {
        return refused(reason.clone());
    }
    if let Err(reason) = check_peer(&peer, c.expected_uid) {
        return refused(reason);
    }
    match read_status(proc_root, peer.pid) {
        Ok(status) => match status.nspid {
            Some(nspid) => Attempt::Connected {
                stream,
                peer,
                nspid,
            },
            None => refused(format!(
                "{}/{}/status has no NSpid: cannot tell the peer's own pid",
                proc_root.display(),
                peer.pid
            )),
        },
        Err(e) => refused(format!(
            "cannot read {}/{}/status of the peer: {e}",
            proc_root.display(),
            peer.pid
        )),
    }
}

/// The kernel's word on the peer against the directory's owner.
pub(crate) fn check_peer(peer: &PeerCred, expected_uid: u32) -> Result<(), String> {
    if peer.pid == 0 {
        return Err(
            "peer not visible in this PID namespace: run strata on the host or in the job's container"
                .to_string(),
        );
    }
    if peer.uid != expected_uid {
        return Err(format!(
            "peer uid {} is not the feed dir owner {expected_uid}: another user's process serves this socket",
            peer.uid
        ));
    }
    Ok(())
}

/// The agent's `hello` against the kernel's innermost pid and the socket's name.
pub(crate) fn check_hello(
    hello_pid: u32,
    nspid: u32,
    name: &str,
    name_pid: u32,
) -> Result<(), String> {
    if hello_pid != nspid {
        return Err(format!(
            "hello claims pid {hello_pid} but the kernel says {nspid}: not trusted"
        ));
    }
    if hello_pid != name_pid {
        return Err(format!(
            "hello says pid {hello_pid} but the socket is named {name}: not this agent's socket"
        ));
    }
    Ok(())
}

/// A non-blocking connect to `dir/name` through the directory descriptor.
fn connect(dir: &OwnedFd, name: &str) -> io::Result<UnixStream> {
    let path = format!("/proc/self/fd/{}/{name}", dir.as_raw_fd());
    // SAFETY: `sockaddr_un` is plain data; zero is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    if path.len() >= addr.sun_path.len() {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    for (slot, byte) in addr.sun_path.iter_mut().zip(path.bytes()) {
        *slot = byte as libc::c_char;
    }
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = std::mem::size_of::<libc::sa_family_t>() + path.len() + 1;
    // SAFETY: `addr` is a valid `sockaddr_un` and `len` is within it.
    let rc = unsafe {
        libc::connect(
            socket.as_raw_fd(),
            &addr as *const libc::sockaddr_un as *const libc::sockaddr,
            len as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(UnixStream::from(socket))
}

fn peer_cred(stream: &UnixStream) -> io::Result<PeerCred> {
    // SAFETY: `ucred` is plain data; zero is valid.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: valid socket, pointer and length for SO_PEERCRED.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(PeerCred {
        pid: cred.pid.max(0) as u32,
        uid: cred.uid,
        gid: cred.gid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_checks_name_the_failed_rule() {
        let ok = PeerCred {
            pid: 10,
            uid: 1000,
            gid: 1000,
        };
        assert_eq!(check_peer(&ok, 1000), Ok(()));
        let hidden = PeerCred { pid: 0, ..ok };
        assert!(check_peer(&hidden, 1000)
            .is_err_and(|r| r.starts_with("peer not visible in this PID namespace")));
        let other = PeerCred { uid: 65534, ..ok };
        assert!(check_peer(&other, 1000)
            .is_err_and(|r| r.starts_with("peer uid 65534 is not the feed dir owner 1000")));
    }

    #[test]
    fn hello_must_match_kernel_and_name() {
        assert_eq!(check_hello(7, 7, "7.sock", 7), Ok(()));
        assert!(check_hello(8, 7, "7.sock", 7)
            .is_err_and(|r| r.starts_with("hello claims pid 8 but the kernel says 7")));
        assert!(check_hello(7, 7, "8.sock", 8).is_err_and(|r| r.contains("socket is named 8.sock")));
    }
}

//! Signalling a process from the monitor (`K`): SIGINT, SIGTERM or SIGKILL, only to a process
//! this user may signal, never to PID 0 or 1 or to strata itself, and only to the very
//! process the screen showed: its pid and start time are checked again at the moment of
//! sending (a pid is reused once its process has exited).
//!
//! The check and the sending are made through a pidfd (`pidfd_open`, Linux 5.3+): once the
//! descriptor is open and the start time still matches, the signal cannot reach another
//! process that took the pid meanwhile. Without pidfds the same check is made just before
//! `kill`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

/// The signals offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Int,
    Term,
    Kill,
}

impl Signal {
    /// In the order the dialog lists them.
    pub(crate) const ALL: [Signal; 3] = [Signal::Int, Signal::Term, Signal::Kill];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
            Signal::Kill => "SIGKILL",
        }
    }

    /// What it does, for the dialog.
    pub(crate) fn meaning(self) -> &'static str {
        match self {
            Signal::Int => "interrupt, as Ctrl-C: Python raises KeyboardInterrupt",
            Signal::Term => "ask it to exit, cleaning up",
            Signal::Kill => "end it at once: no clean-up, cannot be caught",
        }
    }

    pub(crate) fn number(self) -> libc::c_int {
        match self {
            Signal::Int => libc::SIGINT,
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        }
    }
}

/// A process as the screen showed it, to be signalled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub(crate) pid: u32,
    /// Start time in clock ticks since boot, as shown: the process must still have it.
    pub(crate) start_time: Option<u64>,
    pub(crate) user: Option<String>,
    pub(crate) command: Option<String>,
    /// Why it is offered, for the dialog (`no context of its own`, `own context`).
    pub(crate) note: Option<String>,
}

impl Target {
    /// `PID 4242 (python train.py)`.
    pub(crate) fn describe(&self) -> String {
        match &self.command {
            Some(command) => format!("PID {} ({})", self.pid, crate::text::clean(command)),
            None => format!("PID {}", self.pid),
        }
    }
}

/// Why a process may not, or could not, be signalled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("PID {0} is never signalled from strata (0 is no process, 1 is init)")]
    Reserved(u32),
    #[error("PID {0} is strata itself: quit with q instead")]
    Itself(u32),
    #[error("{0}")]
    NotHere(String),
    #[error("the start time of PID {0} is not known, so strata cannot make sure it is still the same process")]
    UnknownStart(u32),
    #[error("PID {0} no longer exists")]
    Gone(u32),
    #[error("PID {0} is now another process (it started at another time): nothing sent")]
    Reused(u32),
    #[error("PID {pid} is defunct: it has exited and signals do nothing; its parent (PID {parent}) must reap it")]
    Defunct { pid: u32, parent: String },
    #[error(
        "not permitted (EPERM): PID {pid} belongs to {owner}; run strata as that user or as root"
    )]
    NotPermitted { pid: u32, owner: String },
    #[error("PID {pid}: {error}")]
    Failed { pid: u32, error: String },
}

/// What can signal processes: the kernel for a live node, nothing for a simulated one.
pub trait Signaller: Send + std::fmt::Debug {
    /// Whether `target` may be signalled: asked before it is offered.
    fn check(&self, target: &Target) -> Result<(), Refusal>;
    /// Sends `signal` to `target`, checking again that the pid still names the process shown.
    fn send(&self, target: &Target, signal: Signal) -> Result<(), Refusal>;
}

/// A source whose processes are not this machine's (the demo, a recording): nothing is sent.
#[derive(Debug, Clone)]
pub(crate) struct Refuse(pub(crate) String);

impl Refuse {
    pub(crate) fn simulated() -> Self {
        Refuse("these processes are simulated (the demo node): nothing to signal".into())
    }
}

impl Signaller for Refuse {
    fn check(&self, _: &Target) -> Result<(), Refusal> {
        Err(Refusal::NotHere(self.0.clone()))
    }

    fn send(&self, target: &Target, _: Signal) -> Result<(), Refusal> {
        self.check(target)
    }
}

/// This machine's kernel, reading `/proc` for who a pid is.
#[derive(Debug, Clone)]
pub struct Kernel {
    proc_root: PathBuf,
}

impl Default for Kernel {
    fn default() -> Self {
        Kernel {
            proc_root: PathBuf::from("/proc"),
        }
    }
}

/// A stat line's state letter, start time (ticks) and parent, or why there is none.
struct Stat {
    state: Option<String>,
    start_time: Option<u64>,
    ppid: Option<u32>,
}

impl Kernel {
    fn stat(&self, pid: u32) -> Result<Stat, Refusal> {
        let path = self.proc_root.join(pid.to_string()).join("stat");
        match crate::source::procfs::read_line_file(&path) {
            Ok(text) => {
                let read = crate::source::procfs::Stat::parse(&text);
                Ok(Stat {
                    state: read.state.as_deref().map(str::to_string),
                    start_time: read.start_time,
                    ppid: read.ppid,
                })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Refusal::Gone(pid)),
            Err(e) => Err(Refusal::Failed {
                pid,
                error: format!("cannot read {}: {e}", path.display()),
            }),
        }
    }

    /// The pid as `kill` takes it: never 0, 1, negative (a group, or every process) or
    /// strata's own.
    fn pid_of(target: &Target) -> Result<libc::pid_t, Refusal> {
        let pid = target.pid;
        let raw = libc::pid_t::try_from(pid).map_err(|_| Refusal::Reserved(pid))?;
        if raw <= 1 {
            return Err(Refusal::Reserved(pid));
        }
        if pid == std::process::id() {
            return Err(Refusal::Itself(pid));
        }
        Ok(raw)
    }

    /// The process at `target.pid` is the one shown: same start time, not defunct.
    fn same_process(&self, target: &Target) -> Result<(), Refusal> {
        let pid = target.pid;
        let shown = target.start_time.ok_or(Refusal::UnknownStart(pid))?;
        let now = self.stat(pid)?;
        if now.start_time != Some(shown) {
            return Err(Refusal::Reused(pid));
        }
        if now.state.as_deref() == Some("Z") {
            let parent = now.ppid.map_or_else(|| "?".into(), |p| p.to_string());
            return Err(Refusal::Defunct { pid, parent });
        }
        Ok(())
    }

    fn owner(&self, target: &Target) -> String {
        let uid = crate::source::procfs::read_lossy(
            &self.proc_root.join(format!("{}/status", target.pid)),
        )
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().next().map(str::to_string))
        });
        match (&target.user, uid) {
            (Some(user), _) => format!("user {user}"),
            (None, Some(uid)) => format!("uid {uid}"),
            (None, None) => "another user".into(),
        }
    }

    fn refusal(&self, target: &Target, error: io::Error) -> Refusal {
        match error.raw_os_error() {
            Some(libc::EPERM) => Refusal::NotPermitted {
                pid: target.pid,
                owner: self.owner(target),
            },
            Some(libc::ESRCH) => Refusal::Gone(target.pid),
            _ => Refusal::Failed {
                pid: target.pid,
                error: error.to_string(),
            },
        }
    }
}

/// `kill(pid, signal)`; signal 0 only asks whether it would be allowed.
fn kill(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: plain syscall; `pid_of` has made sure `pid` names one process (> 1).
    match unsafe { libc::kill(pid, signal) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// A pidfd of `pid`, or `None` where the kernel has no pidfds (ENOSYS).
fn pidfd_open(pid: libc::pid_t) -> io::Result<Option<OwnedFd>> {
    // SAFETY: pidfd_open(pid, flags) takes two integers and returns a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let error = io::Error::last_os_error();
        return match error.raw_os_error() {
            Some(libc::ENOSYS) => Ok(None),
            _ => Err(error),
        };
    }
    let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::other("pidfd out of range"))?;
    // SAFETY: the kernel just returned this descriptor, and nothing else owns it.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

fn pidfd_send_signal(fd: &OwnedFd, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
    let answer = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    match answer {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

impl Signaller for Kernel {
    fn check(&self, target: &Target) -> Result<(), Refusal> {
        let pid = Self::pid_of(target)?;
        self.same_process(target)?;
        kill(pid, 0).map_err(|e| self.refusal(target, e))
    }

    fn send(&self, target: &Target, signal: Signal) -> Result<(), Refusal> {
        let pid = Self::pid_of(target)?;
        // Hold the process by a descriptor first: if the pid is reused after this, the
        // descriptor still names the process checked below, and the signal goes nowhere else.
        let pidfd = pidfd_open(pid).map_err(|e| self.refusal(target, e))?;
        self.same_process(target)?;
        match pidfd {
            Some(fd) => pidfd_send_signal(&fd, signal.number()),
            None => kill(pid, signal.number()),
        }
        .map_err(|e| self.refusal(target, e))
    }
}

#[cfg(test)]
#[path = "process_signal_tests.rs"]
mod tests;

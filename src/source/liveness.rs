//! Which of the processes NVML lists have exited since the last look, for all of them in one
//! system call: a process descriptor (`pidfd_open`, Linux 5.3) each, polled together at most
//! once a sample, and only where a process off the screen asks (one on it is read anyway). A
//! descriptor becomes readable when its process exits (defunct or reaped), and it names that
//! process, never a later one given the same number. So a process off the screen
//! need not have its `/proc/PID/stat` read at every sample to know it still runs: only the
//! exited ones (a zombie context's holder among them) are read again. The descriptors sit in
//! one epoll set, so a sample's question costs one call that returns the exited only, however
//! many run.

use hashbrown::{HashMap, HashSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The descriptors kept, and what the last poll said.
#[derive(Debug)]
pub(crate) struct Liveness {
    fds: HashMap<u32, OwnedFd>,
    /// The pids whose descriptor said, at the last [`Liveness::poll`], that they have exited,
    /// or all of them when the poll itself failed.
    exited: HashSet<u32>,
    /// Whether the last poll failed: nothing is known to live then.
    failed: bool,
    /// How many descriptors may be kept.
    budget: usize,
    /// The epoll set the descriptors are in (`None` until the first is watched, or if the
    /// kernel refused one).
    set: Option<OwnedFd>,
    /// Reused by every poll.
    ready: Vec<libc::epoll_event>,
    /// Cleared when the kernel refuses `pidfd_open` itself (older than 5.3, or a seccomp
    /// filter): then every process is read at every sample, as before.
    supported: bool,
    /// Whether this sample's poll was made: it is made at the sample's first question that
    /// needs it, so a sample whose processes are all read anyway (all on the screen, as on
    /// a small node) makes no call.
    polled: bool,
    /// Polls made, for the tests.
    #[cfg(test)]
    pub(crate) polls: u64,
}

impl Liveness {
    pub(crate) fn new(budget: usize) -> Liveness {
        Liveness {
            fds: HashMap::new(),
            exited: HashSet::new(),
            failed: false,
            budget,
            set: None,
            ready: Vec::new(),
            supported: true,
            polled: false,
            #[cfg(test)]
            polls: 0,
        }
    }

    /// Starts a sample: what the last poll said no longer holds, and the next question that
    /// needs an answer polls again.
    pub(crate) fn next_sample(&mut self) {
        self.polled = false;
    }

    /// Asks the kernel, for every process watched, whether it has exited: once a sample, at
    /// the first [`Liveness::lives`] that needs it.
    pub(crate) fn poll(&mut self) {
        self.polled = true;
        self.exited.clear();
        self.failed = false;
        #[cfg(test)]
        {
            self.polls += 1;
        }
        let Some(set) = &self.set else {
            return;
        };
        // Level-triggered: an exited process is named at every poll until it is let go, so
        // a full buffer only means asking again.
        self.ready.resize(
            self.fds.len().clamp(1, 256),
            libc::epoll_event { events: 0, u64: 0 },
        );
        loop {
            // SAFETY: `ready` holds `len` initialised entries for the kernel to fill; a zero
            // timeout returns at once.
            let answer = unsafe {
                libc::epoll_wait(
                    set.as_raw_fd(),
                    self.ready.as_mut_ptr(),
                    self.ready.len() as libc::c_int,
                    0,
                )
            };
            let Ok(count) = usize::try_from(answer) else {
                // EINTR and the like: nothing is known this time, so everything is read.
                self.failed = true;
                return;
            };
            let before = self.exited.len();
            // EPOLLIN: exited. EPOLLHUP, EPOLLERR: the descriptor says nothing sure.
            self.exited
                .extend(self.ready[..count].iter().map(|e| e.u64 as u32));
            if count < self.ready.len() || self.exited.len() == before {
                return;
            }
        }
    }

    /// Whether `pid` is watched and, at this sample's poll, had not exited: the process last
    /// read under that number still runs.
    pub(crate) fn lives(&mut self, pid: u32) -> bool {
        if !self.fds.contains_key(&pid) {
            return false;
        }
        if !self.polled {
            self.poll();
        }
        !self.failed && !self.exited.contains(&pid)
    }

    /// [`Liveness::watch`] for a process read at this sample whatever the descriptors say
    /// (on the screen): a descriptor kept for `pid` is kept without asking whether it still
    /// runs. Where the number has passed to another process since, the descriptor names the
    /// first and says it exited at the next poll that asks, so that it never vouches for the
    /// second: the process is read then, and watched anew.
    pub(crate) fn keep(&mut self, pid: u32) {
        if !self.fds.contains_key(&pid) {
            self.watch(pid);
        }
    }

    /// Watches `pid` from now on, unless it is watched already and has not exited, or the
    /// budget is spent. Called just before its `stat` is read, so that the process read is
    /// the one watched: had the number passed to another in between, the descriptor names
    /// the first, says it exited, and the number is read again.
    pub(crate) fn watch(&mut self, pid: u32) {
        if !self.supported || self.lives(pid) {
            return;
        }
        self.fds.remove(&pid);
        if self.fds.len() >= self.budget {
            return;
        }
        let fd = match pidfd_open(pid) {
            Ok(fd) => fd,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                self.supported = false;
                return;
            }
            // ESRCH (gone already), EMFILE (no descriptors left): read at every sample.
            Err(_) => return,
        };
        if self.set.is_none() {
            match epoll_create() {
                Ok(set) => self.set = Some(set),
                Err(_) => {
                    self.supported = false;
                    return;
                }
            }
        }
        let Some(set) = &self.set else { return };
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: u64::from(pid),
        };
        // SAFETY: both descriptors are open; `event` is a valid epoll_event.
        let added = unsafe {
            libc::epoll_ctl(
                set.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut event,
            )
        };
        if added == 0 {
            self.fds.insert(pid, fd);
        }
    }

    /// Stops watching the pids not in `keep`.
    pub(crate) fn retain(&mut self, keep: &HashSet<u32>) {
        self.fds.retain(|pid, _| keep.contains(pid));
    }

    #[cfg(test)]
    pub(crate) fn watched(&self) -> usize {
        self.fds.len()
    }
}

/// A new epoll set, closed on `exec`.
fn epoll_create() -> std::io::Result<OwnedFd> {
    // SAFETY: epoll_create1 takes flags and returns a new descriptor or -1.
    owned(i64::from(unsafe {
        libc::epoll_create1(libc::EPOLL_CLOEXEC)
    }))
}

/// A descriptor for the process `pid` names now (pidfds are closed on `exec`).
fn pidfd_open(pid: u32) -> std::io::Result<OwnedFd> {
    let pid = libc::pid_t::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    owned(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) })
}

/// The descriptor a system call just returned, or its error (`-1`: errno).
fn owned(fd: i64) -> std::io::Result<OwnedFd> {
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| std::io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: `fd` was just returned by the kernel, is open and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_running_process_lives_and_an_exited_one_does_not() {
        let mut alive = Command::new("sleep").arg("300").spawn().expect("sleep");
        let mut reaped = Command::new("sleep").arg("300").spawn().expect("sleep");
        let mut defunct = Command::new("sleep").arg("300").spawn().expect("sleep");
        let mut watch = Liveness::new(16);
        for child in [&alive, &reaped, &defunct] {
            watch.watch(child.id());
        }
        watch.poll();
        if !watch.supported {
            // pidfd_open refused here: nothing is known to live, so every process is read
            // at every sample.
            assert!(!watch.lives(alive.id()));
            for mut child in [alive, reaped, defunct] {
                child.kill().expect("kill");
                child.wait().expect("reaped");
            }
            return;
        }
        assert_eq!(watch.watched(), 3);
        assert!(watch.lives(alive.id()));
        assert!(watch.lives(reaped.id()));
        reaped.kill().expect("kill");
        reaped.wait().expect("reaped");
        defunct.kill().expect("kill");
        // Not waited for: a zombie until the end of the test. Its exit is an event the
        // descriptor gets; wait for the exit itself, not a time.
        wait_defunct(defunct.id());
        watch.poll();
        assert!(watch.lives(alive.id()), "still running");
        assert!(!watch.lives(reaped.id()), "exited and reaped");
        assert!(!watch.lives(defunct.id()), "defunct");
        assert!(!watch.lives(1), "never watched: not known to live");
        // Watching again replaces the exited descriptor (the number may name a new process).
        watch.retain(&[alive.id(), defunct.id()].into_iter().collect());
        assert_eq!(watch.watched(), 2);
        alive.kill().expect("kill");
        alive.wait().expect("reaped");
        defunct.wait().expect("reaped");
    }

    #[test]
    fn the_budget_bounds_the_descriptors() {
        let mut children: Vec<_> = (0..3)
            .map(|_| Command::new("sleep").arg("300").spawn().expect("sleep"))
            .collect();
        let mut watch = Liveness::new(2);
        for child in &children {
            watch.watch(child.id());
        }
        watch.poll();
        if watch.supported {
            assert_eq!(watch.watched(), 2);
            assert!(
                !watch.lives(children[2].id()),
                "past the budget: read each sample"
            );
        }
        for child in &mut children {
            child.kill().expect("kill");
            child.wait().expect("reaped");
        }
    }

    /// More exits at once than one call of the set returns: all are seen.
    #[test]
    fn a_crowd_of_exits_is_seen_whole() {
        let mut children: Vec<_> = (0..300)
            .map(|_| Command::new("sleep").arg("300").spawn().expect("sleep"))
            .collect();
        let mut watch = Liveness::new(1000);
        for child in &children {
            watch.watch(child.id());
        }
        let survivor = children.pop().expect("one");
        for child in &mut children {
            child.kill().expect("kill");
            child.wait().expect("reaped");
        }
        watch.poll();
        if watch.supported {
            assert!(watch.lives(survivor.id()));
            let seen = children.iter().filter(|c| !watch.lives(c.id())).count();
            assert_eq!(seen, children.len());
        } else {
            assert!(
                !watch.lives(survivor.id()),
                "unwatched: read at every sample"
            );
        }
        let mut survivor = survivor;
        survivor.kill().expect("kill");
        survivor.wait().expect("reaped");
    }

    /// A sample polls at its first question only, once; keeping a descriptor asks nothing.
    #[test]
    fn a_sample_polls_once_and_only_when_asked() {
        let mut child = Command::new("sleep").arg("300").spawn().expect("sleep");
        let mut watch = Liveness::new(16);
        watch.watch(child.id());
        if watch.supported {
            assert_eq!(watch.polls, 0, "watching a new process asks nothing");
            watch.next_sample();
            watch.keep(child.id());
            assert_eq!(watch.polls, 0, "kept, not asked");
            assert!(watch.lives(child.id()));
            assert!(watch.lives(child.id()));
            assert_eq!(watch.polls, 1, "one poll a sample");
            assert!(!watch.lives(1), "never watched: no poll needed to say so");
            watch.next_sample();
            assert!(!watch.lives(1));
            assert_eq!(watch.polls, 1);
            assert!(watch.lives(child.id()));
            assert_eq!(watch.polls, 2);
        }
        child.kill().expect("kill");
        child.wait().expect("reaped");
    }

    /// A descriptor kept while its process was on the screen says, at the next sample that
    /// asks, that the process exited: it never vouches for what the number names since.
    #[test]
    fn a_kept_descriptor_of_an_exited_process_does_not_vouch() {
        let mut child = Command::new("sleep").arg("300").spawn().expect("sleep");
        let pid = child.id();
        let mut watch = Liveness::new(16);
        watch.watch(pid);
        child.kill().expect("kill");
        wait_defunct(pid);
        watch.next_sample();
        watch.keep(pid);
        if watch.supported {
            assert_eq!((watch.watched(), watch.polls), (1, 0));
        }
        assert!(!watch.lives(pid), "exited");
        child.wait().expect("reaped");
        watch.next_sample();
        assert!(!watch.lives(pid), "exited and reaped");
    }

    /// Waits (bounded by the event, with a generous cap) until `/proc` shows `pid` defunct.
    pub(crate) fn wait_defunct(pid: u32) {
        for _ in 0..10_000 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if crate::source::procfs::Stat::parse(&stat).state.as_deref() == Some("Z") {
                return;
            }
            std::thread::yield_now();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("pid {pid} never became defunct");
    }
}

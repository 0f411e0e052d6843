//! Process identity from `/proc`: user, command line, state and start time, and whether a PID
//! is visible at all in this PID namespace (inside a container NVML reports host PIDs).
//!
//! NVML names processes by their pid in the host's (initial) PID namespace. Those numbers are
//! looked up here only when this `/proc` shows that namespace; in a container with its own,
//! pid 1 is the container's init, not NVML's pid 1, so nothing is looked up at all. A pid
//! `/proc` hides (`hidepid`, EACCES/EPERM) but `kill(pid, 0)` finds is `hidden`, not gone.

use hashbrown::{HashMap, HashSet};
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::liveness::Liveness;
pub(crate) use crate::feed::procfile::{read_lossy, read_proc};

/// What `/proc` says of one PID, as observed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Identity {
    pub(crate) visible: bool,
    /// The PID exists but this `/proc` hides it (`hidepid`, permissions): not gone.
    pub(crate) hidden: bool,
    pub(crate) state: Option<Arc<str>>,
    pub(crate) start_time: Option<u64>,
    /// The parent's pid (`/proc/PID/stat` field 4): read at every look, as an orphan is
    /// handed to another parent.
    pub(crate) ppid: Option<u32>,
    /// The real user id (`Uid:` of `/proc/PID/status`).
    pub(crate) uid: Option<u32>,
    pub(crate) user: Option<String>,
    pub(crate) command: Option<String>,
    /// Where `/proc/PID/exe` points, when readable (shared with what is kept of the process:
    /// a sample lists it without a copy of its own).
    pub(crate) executable: Option<Arc<str>>,
    /// CPU time used so far, user and system, in clock ticks (`stat` fields 14 and 15).
    pub(crate) cpu_ticks: Option<u64>,
    /// Resident memory, bytes (`stat` field 24, in pages).
    pub(crate) resident: Option<u64>,
}

/// What is read once per process: it cannot change while the process lives (an `exec` keeps
/// the pid but is rare enough that the next start time read catches most).
#[derive(Debug, Clone)]
struct Fixed {
    /// The name in `stat` when this was read: an `exec` changes it (a wrapper script that
    /// runs `exec python train.py` keeps its PID and start time), and then all is read anew.
    comm: Option<String>,
    uid: Option<u32>,
    user: Option<String>,
    command: Option<String>,
    executable: Option<Arc<str>>,
    /// Whether `status` and `cmdline` were read (uid, user, command): a first look at a
    /// process off the screen reads `stat` and where `exe` points alone, and the rest when
    /// the process is wanted or due ([`ProcFs::identity_lean`]).
    whole: bool,
}

impl Fixed {
    /// A visible process's identity: who it is, from this, with what a read of its `stat`
    /// told at this sample (`None` where it was not read).
    fn identity(
        &self,
        state: Option<Arc<str>>,
        start_time: Option<u64>,
        ppid: Option<u32>,
        cpu_ticks: Option<u64>,
        resident: Option<u64>,
    ) -> Identity {
        Identity {
            visible: true,
            hidden: false,
            state,
            start_time,
            ppid,
            uid: self.uid,
            user: self.user.clone(),
            command: self.command.clone(),
            executable: self.executable.clone(),
            cpu_ticks,
            resident,
        }
    }
}

/// The inode of the initial PID namespace (`PROC_PID_INIT_INO` in the kernel).
const INITIAL_PID_NAMESPACE: &str = "pid:[4026531836]";

/// Reads `/proc` (or another root, for tests) and resolves user names once per UID.
#[derive(Debug)]
pub(crate) struct ProcFs {
    root: PathBuf,
    /// Whether NVML's pids name this `/proc`'s processes (`None`: cannot tell, as on a kernel
    /// without PID namespaces; they are then looked up).
    host_pids: Option<bool>,
    /// Whether `kill(pid, 0)` names the same processes as NVML's pids: this monitor runs in the
    /// initial PID namespace itself.
    may_probe: bool,
    users: HashMap<u32, Option<String>>,
    passwd: Option<String>,
    /// User and command line per (pid, start time): they are read once per process, and only
    /// `stat` (state, start time, CPU time, resident memory) is read at every poll. Boxed:
    /// the table keeps up to half its slots empty, and a node lists thousands.
    known: HashMap<(u32, u64), Box<Fixed>>,
    /// Bytes in a page, for `stat`'s resident set.
    page_size: u64,
    /// The `stat` files of the processes looked up, kept open and read again in place at each
    /// sample: one `pread` where opening, reading and closing take three calls and a walk of
    /// the path. A descriptor names its process, not its number: once that process has
    /// exited, reading it fails (ESRCH), and the pid is looked up anew.
    open_stats: HashMap<u32, fs::File>,
    /// How many `stat` files may be kept open: half of what this process may open beyond a
    /// reserve, so a node of thousands of processes never starves the monitor of descriptors
    /// (those past it are opened and closed at each sample).
    open_budget: usize,
    /// Which of the processes looked up have exited, for [`ProcFs::identity_lean`]; `None`
    /// where this `/proc` is not the one the monitor's own pids are numbered in (another
    /// root, another PID namespace): every process is then read at every sample.
    liveness: Option<Liveness>,
    /// The start time `stat` last gave for each pid.
    last_read: HashMap<u32, u64>,
    /// Samples so far ([`ProcFs::next_sample`]).
    round: u64,
    /// How many more processes never read whole, and not wanted, this sample may read whole
    /// ([`WHOLE_SPARE`] a sample, none in the first).
    whole_spare: usize,
}

/// Processes off the screen and never read whole that a sample after the first reads whole
/// (user, command line): at 8 GPUs × 512 processes the 4,096 are whole by the third sample,
/// before the warm-up's changes in the order bring rows from far off the screen, which
/// would otherwise show `n/a` for who they are for a sample. About 30 µs each, once.
pub(crate) const WHOLE_SPARE: usize = 2048;

/// A process off the screen still has its `stat` read once every this many samples: what
/// it alone tells (an `exec` that kept the pid, the parent) is never older than that.
pub(crate) const READ_EVERY: u64 = 30;

impl Default for ProcFs {
    fn default() -> Self {
        ProcFs::new("/proc")
    }
}

impl ProcFs {
    pub(crate) fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let link =
            |path: &str| fs::read_link(root.join(path)).map(|l| l.to_string_lossy().into_owned());
        let self_namespace = link("self/ns/pid").ok();
        // `/proc/self` is this process's pid as this `/proc`'s namespace numbers it.
        let self_pid_matches = link("self").ok() == Some(std::process::id().to_string());
        let kthreadd = fs::read_to_string(root.join("2/stat")).is_ok_and(|stat| is_kthreadd(&stat));
        let host_pids = pids_are_host(
            link("1/ns/pid").ok(),
            kthreadd,
            self_namespace.as_deref(),
            self_pid_matches,
        );
        let may_probe =
            self_namespace.as_deref() == Some(INITIAL_PID_NAMESPACE) && host_pids != Some(false);
        let budget = open_budget();
        ProcFs {
            host_pids,
            may_probe,
            users: HashMap::new(),
            passwd: None,
            known: HashMap::new(),
            page_size: page_size(),
            open_stats: HashMap::new(),
            open_budget: budget,
            liveness: (may_probe && root == Path::new("/proc")).then(|| Liveness::new(budget)),
            last_read: HashMap::new(),
            round: 0,
            whole_spare: 0,
            root,
        }
    }

    /// Starts a sample: asks which of the processes watched have exited since the last.
    pub(crate) fn next_sample(&mut self) {
        self.round += 1;
        // The first sample reads whole only what its first frame shows: that frame comes
        // first.
        self.whole_spare = if self.round > 1 { WHOLE_SPARE } else { 0 };
        if let Some(liveness) = &mut self.liveness {
            liveness.next_sample();
        }
    }

    /// [`ProcFs::identity`], or, when `figures` are not wanted (the process is off the
    /// screen), what was read of it before, while its descriptor says it still runs: who it
    /// is (user, command, start time), without what only a read at this sample could tell
    /// (state, parent, CPU time, resident memory: `None`). It is read anyway at its first
    /// look, once every [`READ_EVERY`] samples, once it has exited (for the zombie rule), and
    /// wherever descriptors cannot say whether it runs.
    ///
    /// Off the screen, a process is read whole (`status` and `cmdline`) once: at the first
    /// sample after the first that has [`WHOLE_SPARE`] left, or when it is wanted (a row
    /// drawn, the finding selected naming it, a filter, a recording), whichever comes first;
    /// until then through `stat` and where `exe` points, its user and command `None`. The
    /// first sample reads whole only what its first frame shows. Once read whole it stays
    /// so. Where its descriptor cannot vouch that the process read before still runs (it
    /// exited, or no descriptors here), it is read whole.
    pub(crate) fn identity_lean(&mut self, pid: u32, figures: bool) -> Identity {
        let due = (self.round + u64::from(pid)).is_multiple_of(READ_EVERY);
        let spare_left = !figures && self.whole_spare > 0;
        if !figures && !due {
            // Known, and read whole (or no spare to read it whole with): not read now.
            if let Some((identity, whole)) = self.unread(pid) {
                if whole || !spare_left {
                    return identity;
                }
            }
        }
        let spare = spare_left && !self.read_whole_before(pid);
        // Read before and not vouched for by the descriptor kept since (exited, or no
        // descriptors here): whole, for the rules that judge a process gone or defunct. (On
        // the screen it is read whole anyway, and its descriptor not asked.)
        let whole = figures
            || spare
            || (self.last_read.contains_key(&pid)
                && !self.liveness.as_mut().is_some_and(|l| l.lives(pid)));
        if let Some(liveness) = &mut self.liveness {
            if figures {
                liveness.keep(pid);
            } else {
                liveness.watch(pid);
            }
        }
        let identity = self.read_identity(pid, whole);
        match identity.start_time {
            Some(start) if identity.visible => {
                self.last_read.insert(pid, start);
                if spare {
                    self.whole_spare -= 1;
                }
            }
            _ => {
                self.last_read.remove(&pid);
            }
        }
        identity
    }

    /// Whether the process `pid` last read was read whole (its user and command known).
    fn read_whole_before(&self, pid: u32) -> bool {
        self.last_read
            .get(&pid)
            .and_then(|&start| self.known.get(&(pid, start)))
            .is_some_and(|fixed| fixed.whole)
    }

    /// What is known of `pid` without reading it, and whether it was read whole, if its
    /// descriptor says the process read last still runs.
    fn unread(&mut self, pid: u32) -> Option<(Identity, bool)> {
        if !self.liveness.as_mut()?.lives(pid) {
            return None;
        }
        let &start_time = self.last_read.get(&pid)?;
        let fixed = self.known.get(&(pid, start_time))?;
        Some((
            fixed.identity(None, Some(start_time), None, None, None),
            fixed.whole,
        ))
    }

    /// Forgets processes not among `alive` (pid, start time), so the cache stays bounded.
    pub(crate) fn retain(&mut self, alive: &HashSet<(u32, u64)>) {
        self.known.retain(|key, _| alive.contains(key));
        let pids: HashSet<u32> = alive.iter().map(|&(pid, _)| pid).collect();
        self.open_stats.retain(|pid, _| pids.contains(pid));
        self.last_read.retain(|pid, _| pids.contains(pid));
        if let Some(liveness) = &mut self.liveness {
            liveness.retain(&pids);
        }
    }

    /// `/proc/PID/stat`, through the descriptor kept for `pid` when there is one (and it still
    /// names a live process), else opened anew and kept while the budget allows.
    fn read_stat(&mut self, pid: u32) -> std::io::Result<String> {
        if let Some(file) = self.open_stats.get(&pid) {
            match read_line_at_start(file) {
                Ok(stat) => return Ok(stat),
                // Exited (ESRCH), or its pid taken by another: look the number up again.
                Err(_) => {
                    self.open_stats.remove(&pid);
                }
            }
        }
        let file = fs::File::open(self.root.join(format!("{pid}/stat")))?;
        let stat = read_line_at_start(&file)?;
        if self.open_stats.len() < self.open_budget {
            self.open_stats.insert(pid, file);
        }
        Ok(stat)
    }

    /// Whether this `/proc` shows the initial (host) PID namespace, the one NVML's pids are
    /// in: only then are they looked up here. `None` if it cannot tell.
    pub(crate) fn host_pid_namespace(&self) -> Option<bool> {
        self.host_pids
    }

    /// Everything `/proc` tells of a PID NVML listed. A PID that is not there is
    /// `visible: false`, and `hidden` when it exists all the same; in another PID namespace
    /// nothing is looked up (the number would name another process).
    pub(crate) fn identity(&mut self, pid: u32) -> Identity {
        self.read_identity(pid, true)
    }

    /// [`ProcFs::identity`]; without `whole`, a process not read before gets `stat` and its
    /// executable read, not its user and command (`None`, see [`ProcFs::identity_lean`]).
    fn read_identity(&mut self, pid: u32, whole: bool) -> Identity {
        if self.host_pids == Some(false) {
            return Identity::default();
        }
        let stat = match self.read_stat(pid) {
            Ok(stat) => stat,
            Err(e) => {
                let may_probe = self.may_probe;
                return absent(e.kind(), || may_probe && exists(pid));
            }
        };
        let Stat {
            comm,
            state,
            ppid,
            cpu_ticks,
            start_time,
            rss_pages,
        } = Stat::parse(&stat);
        let resident = rss_pages.map(|pages| pages.saturating_mul(self.page_size));
        if let Some(fixed) = start_time
            .and_then(|t| self.known.get(&(pid, t)))
            .filter(|fixed| fixed.comm.as_deref() == comm && (fixed.whole || !whole))
        {
            return fixed.identity(state, start_time, ppid, cpu_ticks, resident);
        }
        // Not known: who it is, read once. (The path is made here only: a process known
        // costs its `stat`'s read and no more.)
        let dir = self.root.join(pid.to_string());
        let comm = comm.map(str::to_string);
        let executable = fs::read_link(dir.join("exe"))
            .ok()
            .map(|p| Arc::from(p.to_string_lossy()));
        let fixed = if whole {
            let uid = read_lossy(&dir.join("status"))
                .ok()
                .and_then(|s| parse_uid(&s));
            let command = read_proc(&dir.join("cmdline"))
                .ok()
                .map(|raw| {
                    let text = String::from_utf8_lossy(&raw);
                    text.trim_end_matches('\0').replace('\0', " ")
                })
                .filter(|c| !c.is_empty())
                .or_else(|| comm.as_ref().map(|c| format!("[{c}]")));
            Fixed {
                uid,
                user: uid.and_then(|uid| self.user_name(uid)),
                command,
                executable,
                comm,
                whole: true,
            }
        } else {
            Fixed {
                uid: None,
                user: None,
                command: None,
                executable,
                comm,
                whole: false,
            }
        };
        let identity = fixed.identity(state, start_time, ppid, cpu_ticks, resident);
        if let Some(t) = start_time {
            self.known.insert((pid, t), Box::new(fixed));
        }
        identity
    }

    /// The root of the `/proc` read (for the search of open device files).
    pub(crate) fn root(&self) -> &std::path::Path {
        &self.root
    }

    fn user_name(&mut self, uid: u32) -> Option<String> {
        if let Some(name) = self.users.get(&uid) {
            return name.clone();
        }
        if self.passwd.is_none() {
            self.passwd = Some(fs::read_to_string("/etc/passwd").unwrap_or_default());
        }
        let name = self
            .passwd
            .as_deref()
            .and_then(|p| user_from_passwd(p, uid))
            .or_else(|| Some(uid.to_string()));
        self.users.insert(uid, name.clone());
        name
    }
}

/// Whether NVML's pids can be looked up in a `/proc`: its pid 1's namespace says so
/// (`init_namespace`). Where that link is unreadable (another process's namespace needs
/// ptrace access; `hidepid` hides pid 1), a `kthreadd` at pid 2 says so: kernel threads appear
/// only in the initial namespace's `/proc` (the host's `/proc` mounted in a container). Else
/// this process's own namespace, if this `/proc` numbers it as it numbers itself.
fn pids_are_host(
    init_namespace: Option<String>,
    kthreadd: bool,
    self_namespace: Option<&str>,
    self_pid_matches: bool,
) -> Option<bool> {
    if let Some(init) = init_namespace {
        return Some(init == INITIAL_PID_NAMESPACE);
    }
    if kthreadd {
        return Some(true);
    }
    let own = self_namespace?;
    Some(own == INITIAL_PID_NAMESPACE && self_pid_matches)
}

/// `/proc/2/stat` of the initial namespace: the kernel's thread creator, child of pid 0.
fn is_kthreadd(stat: &str) -> bool {
    let (comm, _, _) = parse_stat(stat);
    let parent = stat
        .rfind(')')
        .and_then(|close| stat[close + 1..].split_whitespace().nth(1));
    comm.as_deref() == Some("kthreadd") && parent == Some("0")
}

/// The identity of a pid whose `stat` could not be read (`kind`): hidden when `/proc` refused
/// it (EACCES, EPERM: `hidepid=1`) or when it is missing but `exists()` (`hidepid=2`).
fn absent(kind: ErrorKind, exists: impl FnOnce() -> bool) -> Identity {
    let hidden = match kind {
        ErrorKind::PermissionDenied => true,
        ErrorKind::NotFound => exists(),
        _ => false,
    };
    Identity {
        hidden,
        ..Identity::default()
    }
}

/// Whether a process with this pid exists (in this monitor's PID namespace), by
/// `kill(pid, 0)`: success or EPERM. Pid 0 and pids above `i32::MAX` are never probed: to
/// `kill` they mean a process group or every process.
fn exists(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 delivers nothing; it only checks that the pid exists.
    let answer = unsafe { libc::kill(pid, 0) };
    answer == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// What strata reads of `/proc/PID/stat`, all from the one read a sample makes of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Stat<'a> {
    /// The command name (field 2, without its parentheses), as the text read holds it.
    pub(crate) comm: Option<&'a str>,
    /// The state letter (field 3): shared, see [`state_text`].
    pub(crate) state: Option<Arc<str>>,
    /// The parent's pid (field 4).
    pub(crate) ppid: Option<u32>,
    /// User plus system CPU time, clock ticks (fields 14 and 15).
    pub(crate) cpu_ticks: Option<u64>,
    /// When it started, clock ticks after boot (field 22).
    pub(crate) start_time: Option<u64>,
    /// Resident set, pages (field 24).
    pub(crate) rss_pages: Option<u64>,
}

impl Stat<'_> {
    /// Parses `/proc/PID/stat`. The command name is in parentheses and may itself hold spaces
    /// and parentheses, so fields are counted from the last `)`; a field that is missing or
    /// not a number is `None`.
    pub(crate) fn parse(stat: &str) -> Stat<'_> {
        let open = stat.find('(');
        let close = stat.rfind(')');
        let (Some(open), Some(close)) = (open, close) else {
            return Stat::default();
        };
        if close < open {
            return Stat::default();
        }
        // Field N (1-based, as proc(5) numbers them) is at index N - 3 after the `)`: the
        // first 22 words split at ASCII whitespace (what `split_ascii_whitespace` yields, a
        // fifth of its cost, at every sample for every process on the screen).
        let mut fields = [None::<&str>; 22];
        let rest = &stat[close + 1..];
        let bytes = rest.as_bytes();
        let mut at = 0;
        for slot in &mut fields {
            while at < bytes.len() && bytes[at].is_ascii_whitespace() {
                at += 1;
            }
            if at == bytes.len() {
                break;
            }
            let start = at;
            while at < bytes.len() && !bytes[at].is_ascii_whitespace() {
                at += 1;
            }
            // ASCII whitespace, or the end, on either side: both are character boundaries.
            *slot = Some(&rest[start..at]);
        }
        let number = |field: usize| fields[field - 3].and_then(|v| v.parse::<u64>().ok());
        let cpu_ticks = match (number(14), number(15)) {
            (Some(user), Some(system)) => Some(user.saturating_add(system)),
            _ => None,
        };
        Stat {
            comm: Some(&stat[open + 1..close]),
            state: fields[0].map(state_text),
            ppid: fields[1].and_then(|v| v.parse().ok()),
            cpu_ticks,
            start_time: number(22),
            rss_pages: number(24),
        }
    }
}

/// The state letters proc(5) names, each made once and shared by every process in that
/// state: a node of thousands of processes lists each one's state at every sample.
static STATES: std::sync::LazyLock<Vec<Arc<str>>> = std::sync::LazyLock::new(|| {
    ["R", "S", "D", "Z", "T", "t", "X", "x", "K", "W", "P", "I"]
        .into_iter()
        .map(Arc::from)
        .collect()
});

/// A state as `stat` gives it: one of [`STATES`], shared, or a text of its own.
fn state_text(state: &str) -> Arc<str> {
    STATES
        .iter()
        .find(|known| ***known == *state)
        .map_or_else(|| Arc::from(state), Arc::clone)
}

/// Parses `/proc/PID/stat`: (comm, state letter, start time in clock ticks).
pub(crate) fn parse_stat(stat: &str) -> (Option<String>, Option<Arc<str>>, Option<u64>) {
    let Stat {
        comm,
        state,
        start_time,
        ..
    } = Stat::parse(stat);
    (comm.map(str::to_string), state, start_time)
}

/// A one-line `/proc` file (`stat`) in as few calls as the kernel allows: open, one read that
/// ends at the line's end, close (reading to the end costs `fs::read_to_string` a size query
/// and a second read).
pub(crate) fn read_line_file(path: &Path) -> std::io::Result<String> {
    read_line_at_start(&fs::File::open(path)?)
}

/// A one-line `/proc` file read from its start (`pread` at offset 0: the kernel writes it
/// anew for each read from the start, so a descriptor kept open reads the current line).
fn read_line_at_start(file: &fs::File) -> std::io::Result<String> {
    // A `stat` line is a few hundred bytes: read onto the stack, and only the line is
    // allocated. (A kilobyte's buffer from the heap each read is a large request to glibc's
    // malloc, which first folds every small chunk freed since: at 64 processes a sample, a
    // twentieth of the sampling thread.)
    let mut first = [0u8; 1024];
    let mut len = 0;
    if read_on(file, &mut first, &mut len)? {
        return Ok(lossy(first[..len].to_vec()));
    }
    let mut buf = first.to_vec();
    loop {
        buf.resize(len * 2, 0);
        if read_on(file, &mut buf, &mut len)? {
            break;
        }
    }
    buf.truncate(len);
    Ok(lossy(buf))
}

/// Reads `file` on from `len` into `buf` until the line ends (a newline, or the file's end:
/// `true`) or `buf` is full (`false`), `len` counting what `buf` holds.
fn read_on(file: &fs::File, buf: &mut [u8], len: &mut usize) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    while *len < buf.len() {
        let n = file.read_at(&mut buf[*len..], *len as u64)?;
        *len += n;
        if n == 0 || buf[..*len].ends_with(b"\n") {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The bytes as text: a name may hold any bytes but `/` and NUL, and one that is not UTF-8
/// is still a process.
fn lossy(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// How many `stat` files [`ProcFs`] keeps open: half of the descriptors this process may
/// open (its soft `RLIMIT_NOFILE`) past a reserve of 256, at most 16,384. The limit is not
/// raised: a job `strata run` starts would inherit it.
fn open_budget() -> usize {
    soft_descriptor_limit().map_or(0, budget_within)
}

/// [`open_budget`] under the soft limit `soft`.
fn budget_within(soft: usize) -> usize {
    (soft.saturating_sub(256) / 2).min(16_384)
}

/// The most descriptors the sampler holds under the soft limit `soft`: a pidfd and a kept
/// `stat` per process within the budget each, and the reserve.
fn descriptors_held(soft: usize) -> usize {
    (budget_within(soft) * 2 + 256).min(soft)
}

/// This process's soft `RLIMIT_NOFILE`; `None` where it cannot be read.
fn soft_descriptor_limit() -> Option<usize> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit for the call to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    Some(usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX))
}

/// Grows this process's descriptor table now, to hold every descriptor the sampler may keep
/// (a pidfd and a kept `stat` per process, within [`open_budget`] each, and a reserve). The
/// kernel doubles the table as descriptors are opened, and in a process of several threads
/// each doubling waits for an RCU grace period (`expand_fdtable`): 5 to 26 ms each here,
/// 56 ms of the first sample of 512 processes. Called before any thread starts, it waits for
/// none. The table is the kernel's memory, 8 bytes a slot: 512 KiB at most (the budget of
/// 16,384 each, rounded up to a power of two).
pub(crate) fn reserve_descriptors() {
    let Some(soft) = soft_descriptor_limit() else {
        return;
    };
    let highest = descriptors_held(soft).saturating_sub(1);
    let (Ok(highest), Ok(null)) = (i32::try_from(highest), fs::File::open("/dev/null")) else {
        return;
    };
    if highest < 64 {
        return;
    }
    use std::os::fd::AsRawFd;
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor this function owns; the copy, if made, is
    // closed at once, and nothing else holds it.
    let copy = unsafe { libc::fcntl(null.as_raw_fd(), libc::F_DUPFD_CLOEXEC, highest) };
    if copy >= 0 {
        // SAFETY: `copy` was just made here and is closed once.
        unsafe { libc::close(copy) };
    }
}

/// Bytes in a page of memory.
pub(crate) fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

fn parse_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn user_from_passwd(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let found: u32 = fields.nth(1)?.parse().ok()?;
        (found == uid).then(|| name.to_string())
    })
}

#[cfg(test)]
#[path = "procfs_tests.rs"]
mod tests;

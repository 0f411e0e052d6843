//! Where agents' sockets are. A process NVML lists is looked up directly, by its own path:
//! `<feed dir>/<pid>.sock` in this mount namespace and `/proc/<pid>/root/.../<nspid>.sock`
//! (a job in a container). Scanning the feed dirs (as root, every `/tmp/strata-<uid>`) only
//! finds the rest, within a budget of entries per directory, so one user's directory never
//! hides another user's feed; a directory cut short is said.
//!
//! A directory is opened without following a final symlink, and a socket later reached
//! through that descriptor (`/proc/self/fd/N/<name>`), so what was checked is what is
//! connected to. A link is never the way to a socket: a link, a FIFO or a regular file where
//! a feed dir or a socket belongs is reported as a suspicious entry, never followed or opened.

use super::candidate::{Candidate, FeedKey};
use super::fd::open_path;
use super::found::{judge_place, Dir, Found, IsDead, NoDir, Place};
use super::kept::KeptDirs;
use super::listing::{self, DirId, Listings, Opened, RELIST_SCANS};
use super::names::{dir_verdict, environ_feed_dir, read_status};
use crate::sample::feed::{CutShort, FeedScan, FoundVia};
use hashbrown::hash_map::EntryRef;
use hashbrown::{HashMap, HashSet};
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The most feeds the hub keeps.
pub(crate) const MAX_FEEDS: usize = 4096;
/// Entries read from one directory per listing.
pub(crate) const DIR_ENTRIES: usize = 4096;
/// Entries read over all directories of one scan.
const SCAN_ENTRIES: usize = 32_768;
/// `strata-<uid>` dirs looked into under `/tmp`.
const MAX_FEED_DIRS: usize = 1024;
/// `/tmp` may be large: read at most this many of its entries when looking for feed dirs.
const MAX_TMP_ENTRIES: usize = 65_536;

/// What one scan found: candidates (direct look-ups first), and what it met that is not a
/// feed.
pub(crate) struct Scan {
    pub(crate) candidates: Vec<Candidate>,
    pub(crate) notes: FeedScan,
    /// Sockets `is_dead` said are dead, met again: no candidates.
    pub(crate) dead: Vec<FeedKey>,
}

/// Finds candidates: see the module comment.
pub(crate) struct Scanner {
    feed_dir: Option<PathBuf>,
    proc_root: PathBuf,
    tmp_root: PathBuf,
    euid: u32,
    /// `strata-<N>` entries under `tmp_root`, as of `tmp_root`'s mtime (root only), and how
    /// many there were in all.
    tmp_dirs: Option<TmpDirs>,
    scans: u64,
    /// What `/proc/<pid>/status` and `environ` said of each watched pid, at which scan, and of
    /// which process (its start time): read once per process where its start time is known,
    /// else again every [`ROOT_REFRESH_SCANS`] scans (a pid reused meanwhile is caught then).
    /// Boxed: the table keeps up to half its slots empty, and a node lists thousands.
    roots: HashMap<u32, Box<Root>>,
    /// The paths the watched processes' [`RootInfo`]s hold, each once: a node's processes
    /// are a few users' (see [`Shared`]).
    shared: Shared,
    listings: Listings,
    /// The feed dirs of this mount namespace, kept open while their parents are unchanged.
    kept: KeptDirs,
    /// This monitor's own mount namespace and root: a watched process that shares both sees
    /// the same paths, and its root is not looked into for what was looked up here.
    own_root: Option<RootKey>,
}

/// A watched pid's [`RootInfo`] (none where it could not be read), the scan that read it,
/// and the start time of the process it was read of.
type Root = (u64, Option<u64>, Option<RootInfo>);

/// Which tree a process sees: its mount namespace's inode and its root directory's device
/// and inode. Two processes with the same key resolve every path alike.
type RootKey = (u64, u64, u64);

/// The tree `proc_dir` (`/proc/PID` or `/proc/self`) sees, when its links can be followed.
fn root_key(proc_dir: &Path) -> Option<RootKey> {
    use std::os::unix::fs::MetadataExt;
    let ns = fs::metadata(proc_dir.join("ns/mnt")).ok()?;
    let root = fs::metadata(proc_dir.join("root")).ok()?;
    Some((ns.ino(), root.dev(), root.ino()))
}

/// The `strata-<uid>` dirs under `/tmp` as of its last change: those kept, and how many in all.
type TmpDirs = (DirId, Vec<(PathBuf, u32)>, usize);

/// A watched process's identity, for looking up its socket.
#[derive(Clone)]
struct RootInfo {
    euid: u32,
    nspid: u32,
    /// The tree it sees.
    root: Option<RootKey>,
    /// Its feed dir in this mount namespace, and the owner that dir must have (shared: each
    /// scan looks it up for every watched process).
    here: Arc<Path>,
    owner: u32,
    /// The dirs to look into within its root (`tmp/strata-<euid>`, its `STRATA_FEED_DIR`),
    /// less those that are `here` (its tree is this monitor's own).
    in_root: Arc<[PathBuf]>,
}

/// Paths many watched processes have alike (a user's feed dir; the dirs within a root), held
/// once and shared: each process's own copy cost 128 bytes, half a megabyte at 4,096.
#[derive(Default)]
struct Shared {
    here: Vec<Arc<Path>>,
    in_root: Vec<Arc<[PathBuf]>>,
}

/// The most distinct values of each kind [`Shared`] keeps; past them a value is its own.
const SHARED_MOST: usize = 64;

/// The value in `pool` equal to `value`, or `value` made one (kept in `pool` while it has room).
fn share<T: ?Sized + PartialEq>(
    pool: &mut Vec<Arc<T>>,
    value: &T,
    make: impl FnOnce() -> Arc<T>,
) -> Arc<T> {
    if let Some(held) = pool.iter().find(|held| ***held == *value) {
        return Arc::clone(held);
    }
    let made = make();
    if pool.len() < SHARED_MOST {
        pool.push(Arc::clone(&made));
    }
    made
}

impl Shared {
    /// Lets go of the values no watched process holds any longer.
    fn prune(&mut self) {
        self.here.retain(|held| Arc::strong_count(held) > 1);
        self.in_root.retain(|held| Arc::strong_count(held) > 1);
    }
}

/// A watched process: its pid, and its start time where known (with the pid, which process).
pub(crate) type Watched = (u32, Option<u64>);

/// Scans between two reads of a watched process's status and environment.
const ROOT_REFRESH_SCANS: u64 = 30;

/// Every user's feed dir under `tmp_root` (`strata-<uid>`), with the uid its name gives, in
/// order: where a monitor running as root looks (at most [`MAX_FEED_DIRS`] of them a scan).
pub(crate) fn tmp_feed_dirs(tmp_root: &Path) -> Vec<(PathBuf, u32)> {
    let mut dirs = Vec::new();
    if let Ok(entries) = fs::read_dir(tmp_root) {
        for entry in entries.take(MAX_TMP_ENTRIES).flatten() {
            let name = entry.file_name();
            let Some(uid) = name.to_str().and_then(|n| n.strip_prefix("strata-")) else {
                continue;
            };
            if let (Ok(n), true) = (uid.parse::<u32>(), uid.bytes().all(|b| b.is_ascii_digit())) {
                dirs.push((entry.path(), n));
            }
        }
    }
    dirs.sort();
    dirs
}

/// A feed dir as a scan finds it, not following a final link: the descriptor, its status and
/// the verdict on it (owner, mode; a link is no directory and fails).
pub(crate) fn open_feed_dir(
    path: &Path,
    expected_uid: u32,
) -> std::io::Result<(OwnedFd, libc::stat, Result<(), String>)> {
    let fd = open_path(path, libc::O_NOFOLLOW)?;
    let st = super::fd::fstat(&fd).ok_or_else(std::io::Error::last_os_error)?;
    let verdict = dir_verdict(path, &st, expected_uid);
    Ok((fd, st, verdict))
}

/// This process's own directory under `proc_root`.
fn proc_root_self(proc_root: &Path) -> PathBuf {
    proc_root.join("self")
}

/// The directories looked into within one tree this scan, by the tree, the path in it and the
/// owner it must have: processes that share a tree (all of a node's host processes, or one
/// container's) cost one look, not one each.
type InRootDirs = HashMap<(RootKey, PathBuf, u32), Option<Dir>>;

impl Scanner {
    pub(crate) fn new(feed_dir: Option<PathBuf>, proc_root: PathBuf, tmp_root: PathBuf) -> Self {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        let own_root = root_key(&proc_root_self(&proc_root));
        Scanner {
            feed_dir,
            proc_root,
            tmp_root,
            euid,
            tmp_dirs: None,
            scans: 0,
            roots: HashMap::new(),
            shared: Shared::default(),
            listings: Listings::default(),
            kept: KeptDirs::default(),
            own_root,
        }
    }

    pub(crate) fn euid(&self) -> u32 {
        self.euid
    }

    /// Every candidate, deduplicated by socket identity: the watched pids' own paths first
    /// (those in `connected`, whose feed is already read, are not looked up again), then the
    /// feed dirs, each within its budget. A socket `is_dead` names is no candidate.
    pub(crate) fn scan(
        &mut self,
        watched: &[Watched],
        connected: &HashSet<u32>,
        is_dead: IsDead,
    ) -> Scan {
        self.scans += 1;
        self.kept.begin_scan(self.scans);
        let mut found = Found::new(is_dead);
        // Sorted, not hashed: 4 bytes a pid, not a table's 16 and its empty slots.
        let mut pids: Vec<u32> = watched.iter().map(|&(pid, _)| pid).collect();
        pids.sort_unstable();
        self.roots.retain(|pid, _| pids.binary_search(pid).is_ok());
        drop(pids);
        self.shared.prune();
        // Many watched processes share one feed dir, and one tree: each opened once a scan.
        let mut here_dirs = HashMap::new();
        let mut in_root = InRootDirs::new();
        for &(pid, start) in watched {
            if !connected.contains(&pid) {
                self.look_up(pid, start, &mut here_dirs, &mut in_root, &mut found);
            }
        }
        self.scan_feed_dirs(&here_dirs, &mut found);
        self.listings.end_scan();
        self.kept.end_scan();
        Scan {
            candidates: found.list,
            notes: found.notes,
            dead: found.dead,
        }
    }

    /// A watched process's identity: read once for a process whose start time is known (and
    /// while it cannot be read, again every [`ROOT_REFRESH_SCANS`] scans), else again when the
    /// cached one is that old.
    fn root_info(&mut self, pid: u32, start: Option<u64>) -> Option<&RootInfo> {
        let scans = self.scans;
        let fresh = self.roots.get(&pid).is_some_and(|root| {
            let (read_at, was, info) = &**root;
            let same = start.is_some() && *was == start && info.is_some();
            same || (*was == start && scans - read_at < ROOT_REFRESH_SCANS)
        });
        if !fresh {
            let info = self.read_root_info(pid);
            self.roots.insert(pid, Box::new((scans, start, info)));
        }
        self.roots.get(&pid).and_then(|root| root.2.as_ref())
    }

    /// Reads what a watched process's socket is looked up by.
    fn read_root_info(&mut self, pid: u32) -> Option<RootInfo> {
        let proc_dir = self.proc_root.join(pid.to_string());
        let status = read_status(&self.proc_root, pid).ok()?;
        let (euid, nspid) = (status.euid?, status.nspid?);
        let root = root_key(&proc_dir);
        let (here, owner) = match &self.feed_dir {
            Some(dir) => (dir.clone(), self.euid),
            None if self.euid == 0 => (self.tmp_root.join(format!("strata-{euid}")), euid),
            None => (
                self.tmp_root.join(format!("strata-{}", self.euid)),
                self.euid,
            ),
        };
        let mut in_root = vec![PathBuf::from(format!("tmp/strata-{euid}"))];
        in_root.extend(environ_feed_dir(&proc_dir.join("environ")));
        // A process that sees this monitor's own tree, under its own pid, has its socket where
        // it is looked up here: its root's copy of that path is the same directory.
        let same_tree = root.is_some() && root == self.own_root && nspid == pid;
        in_root.retain(|rel| !(same_tree && Path::new("/").join(rel) == here));
        let here = share(&mut self.shared.here, here.as_path(), || {
            Arc::from(here.as_path())
        });
        let in_root = share(&mut self.shared.in_root, in_root.as_slice(), || {
            Arc::from(in_root.as_slice())
        });
        Some(RootInfo {
            euid,
            nspid,
            root,
            here,
            owner,
            in_root,
        })
    }

    /// The paths where a watched process's agent listens: its feed dir in this mount
    /// namespace, then through its root.
    fn look_up(
        &mut self,
        pid: u32,
        start: Option<u64>,
        here_dirs: &mut HashMap<PathBuf, Option<Dir>>,
        in_root: &mut InRootDirs,
        found: &mut Found,
    ) {
        let Some(info) = self.root_info(pid, start) else {
            return;
        };
        let (euid, nspid, root, owner) = (info.euid, info.nspid, info.root, info.owner);
        let here = Arc::clone(&info.here);
        let rels = Arc::clone(&info.in_root);
        // A dir that is not one is looked at again for each pid, so that each is told why; one
        // that is not there is looked for once a scan.
        let dir = match here_dirs.entry_ref(&*here) {
            EntryRef::Occupied(kept) => kept.into_mut().as_ref(),
            EntryRef::Vacant(place) => {
                let opened = self.kept.open(&here);
                match judge_place(
                    &Place::Here(&here),
                    opened,
                    owner,
                    FoundVia::FeedDir,
                    pid,
                    found,
                ) {
                    Err(NoDir::NotADir) => None,
                    looked => place.insert(looked.ok()).as_ref(),
                }
            }
        };
        if let Some(dir) = dir {
            // What the directory's listing, unchanged since, says is not there is not looked
            // up again: a node of hundreds of processes and no agent costs no call per process.
            let scans = self.scans;
            for name_pid in [pid, nspid] {
                if (name_pid == pid || nspid != pid)
                    && !self.listings.lacks(&here, &dir.st, name_pid, scans)
                {
                    found.socket(dir, &format!("{name_pid}.sock"), name_pid, Some(pid));
                }
            }
        }
        if rels.is_empty() {
            return;
        }
        let root_path = self.proc_root.join(pid.to_string()).join("root");
        let mut opened: Option<OwnedFd> = None;
        for rel in rels.iter() {
            let dir = match root.map(|key| (key, rel.clone(), euid)) {
                Some(key) => match in_root.get(&key) {
                    Some(dir) => dir.clone(),
                    None => {
                        let Some(dir) =
                            Self::open_in(&root_path, &mut opened, rel, euid, pid, found)
                        else {
                            return; // not ours to see, or gone
                        };
                        in_root.insert(key, dir.clone());
                        dir
                    }
                },
                // A tree that cannot be named is looked into for this process alone.
                None => Self::open_in(&root_path, &mut opened, rel, euid, pid, found).flatten(),
            };
            if let Some(dir) = dir {
                found.socket(&dir, &format!("{nspid}.sock"), nspid, Some(pid));
            }
        }
    }

    /// Opens `rel` within the root at `root_path` (opened once, into `root`, for all the
    /// paths of one process): `None` when the root cannot be opened (not ours to see, or the
    /// process is gone), else the directory if there is one.
    fn open_in(
        root_path: &Path,
        root: &mut Option<OwnedFd>,
        rel: &Path,
        euid: u32,
        pid: u32,
        found: &mut Found,
    ) -> Option<Option<Dir>> {
        if root.is_none() {
            *root = Some(open_path(root_path, libc::O_DIRECTORY).ok()?);
        }
        let place = Place::InRoot {
            root: root.as_ref()?,
            rel,
            shown: root_path.join(rel),
        };
        let opened = listing::open_within(root.as_ref()?, rel);
        Some(judge_place(&place, opened, euid, FoundVia::ProcessRoot, pid, found).ok())
    }

    /// The feed dirs to scan, each with the uid that must own it.
    fn feed_dirs(&mut self, found: &mut Found) -> Vec<(PathBuf, u32)> {
        if let Some(dir) = &self.feed_dir {
            return vec![(dir.clone(), self.euid)];
        }
        if self.euid != 0 {
            return vec![(
                self.tmp_root.join(format!("strata-{}", self.euid)),
                self.euid,
            )];
        }
        // As root: every user's dir. /tmp is listed again only when it changed (and now and
        // then, in case two changes fell within one mtime tick).
        let now = self.kept.stat(&self.tmp_root);
        let cached = match (now, &self.tmp_dirs) {
            (Some(now), Some((at, dirs, all)))
                if *at == now && !self.scans.is_multiple_of(RELIST_SCANS) =>
            {
                Some((dirs.clone(), *all))
            }
            _ => None,
        };
        let (dirs, all) = cached.unwrap_or_else(|| {
            let mut dirs = tmp_feed_dirs(&self.tmp_root);
            let all = dirs.len();
            dirs.truncate(MAX_FEED_DIRS);
            if let Some(now) = now {
                self.tmp_dirs = Some((now, dirs.clone(), all));
            }
            (dirs, all)
        });
        if all > dirs.len() {
            found.notes.cut_short.push(CutShort {
                dir: self.tmp_root.display().to_string(),
                read: dirs.len() as u64,
                entries: all as u64,
                entries_capped: false,
            });
        }
        dirs
    }

    /// Lists the feed dirs: those that pass their check first (one per user at most), each
    /// within [`DIR_ENTRIES`], all within [`SCAN_ENTRIES`]. A dir the watched processes' look-up
    /// opened (or found absent) this scan is not opened again.
    fn scan_feed_dirs(&mut self, here_dirs: &HashMap<PathBuf, Option<Dir>>, found: &mut Found) {
        let mut dirs: Vec<(PathBuf, u32, Opened, Result<(), String>)> = Vec::new();
        for (path, owner) in self.feed_dirs(found) {
            let opened = match here_dirs.get(&path) {
                Some(Some(dir)) => Some(Opened {
                    fd: Arc::clone(&dir.fd),
                    st: dir.st,
                }),
                Some(None) => None,
                None => self.kept.open(&path),
            };
            let Some(dir) = opened else {
                continue;
            };
            if !dir.is_dir() {
                found.suspicious(&Place::Here(&path), &dir, None);
                continue;
            }
            let verdict = dir_verdict(&path, &dir.st, owner);
            dirs.push((path, owner, dir, verdict));
        }
        dirs.sort_by_key(|(_, _, _, verdict)| verdict.is_err());
        let mut left = SCAN_ENTRIES;
        for (index, (path, owner, dir, verdict)) in dirs.into_iter().enumerate() {
            let budget = left.min(DIR_ENTRIES);
            let listing = self.listings.get(&path, &dir, budget, self.scans);
            left -= listing.read.min(left);
            if listing.cut_short() {
                found.notes.cut_short.push(CutShort {
                    dir: path.display().to_string(),
                    read: listing.read as u64,
                    entries: listing.counted as u64,
                    entries_capped: listing.capped(),
                });
            }
            let dir = Dir {
                st: dir.st,
                fd: Arc::clone(&dir.fd),
                shown: path,
                expected_uid: owner,
                verdict,
                via: FoundVia::FeedDir,
                budget: Some(index),
            };
            for entry in &listing.sockets {
                found.add(&dir, entry);
            }
        }
    }
}

#[cfg(test)]
#[path = "discover_tests.rs"]
mod tests;

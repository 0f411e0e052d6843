//! What one scan has found so far: candidates deduplicated by socket identity (the way to a
//! socket that passes its directory's check wins), and the suspicious entries it met, each
//! noted once.

use super::candidate::{Candidate, FeedKey, MAX_SUSPICIOUS};
use super::fd::{fstatat, open_in_root_following, readlink_in};
use super::listing::{kind_of, Opened, SocketEntry};
use super::names::dir_verdict;
use crate::sample::feed::{FeedScan, FoundVia, SuspiciousEntry};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a directory is looked for: a path of this mount namespace, or a path inside a
/// watched process's root.
pub(super) enum Place<'a> {
    Here(&'a Path),
    InRoot {
        root: &'a OwnedFd,
        rel: &'a Path,
        shown: PathBuf,
    },
}

/// Why no feed dir was opened where one would be.
pub(super) enum NoDir {
    /// Nothing to open there (or nothing this process may see).
    Absent,
    /// A link or another kind of file, noted as a suspicious entry.
    NotADir,
}

/// Judges what was opened (`None`: nothing) where a watched process's agent would listen
/// for a feed dir: a link or another kind of file there is a suspicious entry, and not the
/// way to any socket.
pub(super) fn judge_place(
    place: &Place<'_>,
    opened: Option<Opened>,
    owner: u32,
    via: FoundVia,
    for_pid: u32,
    found: &mut Found,
) -> Result<Dir, NoDir> {
    let shown: &Path = match place {
        Place::Here(path) => path,
        Place::InRoot { shown, .. } => shown,
    };
    let Some(opened) = opened else {
        return Err(NoDir::Absent);
    };
    if !opened.is_dir() {
        found.suspicious(place, &opened, Some(for_pid));
        return Err(NoDir::NotADir);
    }
    let shown = shown.to_path_buf();
    let verdict = dir_verdict(&shown, &opened.st, owner);
    Ok(Dir {
        st: opened.st,
        fd: opened.fd,
        shown,
        expected_uid: owner,
        verdict,
        via,
        budget: None,
    })
}

/// Says whether a socket (its key and ctime) is one found dead and confirmed so.
pub(super) type IsDead<'a> = &'a dyn Fn(FeedKey, (i64, i64)) -> bool;

/// Candidates so far, the sockets already taken, and the notes of this scan.
pub(super) struct Found<'a> {
    pub(crate) list: Vec<Candidate>,
    seen: HashMap<FeedKey, usize>,
    pub(crate) notes: FeedScan,
    /// Suspicious entries already noted, by identity.
    noted: HashSet<FeedKey>,
    is_dead: IsDead<'a>,
    /// Dead sockets met, which are no candidates: nothing is done with them but remember.
    pub(crate) dead: Vec<FeedKey>,
}

#[derive(Clone)]
pub(super) struct Dir {
    pub(crate) fd: Arc<OwnedFd>,
    /// What `fstat` said of it when it was opened.
    pub(crate) st: libc::stat,
    pub(crate) shown: PathBuf,
    pub(crate) expected_uid: u32,
    pub(crate) verdict: Result<(), String>,
    pub(crate) via: FoundVia,
    pub(crate) budget: Option<usize>,
}

impl<'a> Found<'a> {
    pub(crate) fn new(is_dead: IsDead<'a>) -> Self {
        Found {
            list: Vec::new(),
            seen: HashMap::new(),
            notes: FeedScan::default(),
            noted: HashSet::new(),
            is_dead,
            dead: Vec::new(),
        }
    }

    /// Looks `name` up in `dir` for the watched process `for_pid`: a socket is a candidate,
    /// anything else a suspicious entry.
    pub(crate) fn socket(&mut self, dir: &Dir, name: &str, name_pid: u32, for_pid: Option<u32>) {
        let Some(st) = fstatat(&dir.fd, name) else {
            return; // nothing there
        };
        match SocketEntry::of(name, name_pid, &st) {
            Some(entry) => self.add(dir, &entry),
            None => {
                let shown = dir.shown.join(name);
                let target = (st.st_mode & libc::S_IFMT == libc::S_IFLNK)
                    .then(|| readlink_in(&dir.fd, name))
                    .flatten();
                self.note(shown, "socket", &st, for_pid, target);
            }
        }
    }

    /// Adds a socket not seen yet; a socket seen already is kept as first found, unless this
    /// way to it passes the directory's check and that one did not, or this is its feed dir
    /// in this mount namespace and that was a process's root.
    pub(crate) fn add(&mut self, dir: &Dir, entry: &SocketEntry) {
        if (self.is_dead)(entry.key, entry.born) {
            self.dead.push(entry.key); // costs no candidate, scan after scan
            return;
        }
        let candidate = Candidate {
            key: entry.key,
            born: entry.born,
            path: dir.shown.join(&entry.name),
            name: entry.name.clone(),
            name_pid: entry.pid,
            expected_uid: dir.expected_uid,
            via: dir.via,
            dir: Arc::clone(&dir.fd),
            dir_verdict: dir.verdict.clone(),
            socket_uid: entry.uid,
            budget: dir.budget,
        };
        match self.seen.get(&entry.key) {
            None => {
                self.seen.insert(entry.key, self.list.len());
                self.list.push(candidate);
            }
            Some(&at) => {
                let old = &self.list[at];
                let better = (old.dir_verdict.is_err() && candidate.dir_verdict.is_ok())
                    || (old.dir_verdict.is_ok() == candidate.dir_verdict.is_ok()
                        && old.via == FoundVia::ProcessRoot
                        && candidate.via == FoundVia::FeedDir);
                if better {
                    let budget = old.budget.min(candidate.budget);
                    self.list[at] = Candidate {
                        budget,
                        ..candidate
                    };
                }
            }
        }
    }

    /// Notes a feed dir that is not a directory (a link, most likely).
    pub(crate) fn suspicious(&mut self, place: &Place<'_>, opened: &Opened, for_pid: Option<u32>) {
        let (shown, target) = match place {
            Place::Here(path) => (path.to_path_buf(), fs::read_link(path).ok()),
            Place::InRoot { root, rel, shown } => (shown.clone(), readlink_at_root(root, rel)),
        };
        let target = target.map(|t| t.display().to_string());
        self.note(shown, "feed_dir", &opened.st, for_pid, target);
    }

    fn note(
        &mut self,
        path: PathBuf,
        in_place_of: &str,
        st: &libc::stat,
        pid: Option<u32>,
        target: Option<String>,
    ) {
        let list = &mut self.notes.suspicious;
        if list.len() >= MAX_SUSPICIOUS || !self.noted.insert((st.st_dev, st.st_ino)) {
            let shown = path.display().to_string();
            if let (Some(known), Some(pid)) = (list.iter_mut().find(|n| n.path == shown), pid) {
                if !known.pids.contains(&pid) {
                    known.pids.push(pid);
                }
            }
            return;
        }
        list.push(SuspiciousEntry {
            path: path.display().to_string(),
            kind: kind_of(st.st_mode).to_string(),
            in_place_of: in_place_of.to_string(),
            owner: st.st_uid,
            pids: pid.into_iter().collect(),
            target,
        });
    }
}

/// Where a link inside a process's root points (read through its parent directory).
fn readlink_at_root(root: &OwnedFd, rel: &Path) -> Option<PathBuf> {
    let parent = rel.parent().filter(|p| !p.as_os_str().is_empty());
    let name = rel.file_name()?.to_str()?;
    match parent {
        Some(parent) => {
            let dir = open_in_root_following(root, parent).ok()?;
            readlink_in(&dir, name).map(PathBuf::from)
        }
        None => readlink_in(root, name).map(PathBuf::from),
    }
}

//! One feed dir as a scan sees it: opened without following a link, and listed within a
//! budget of entries. A listing is kept until the directory changes (its mtime or ctime), so a
//! directory that holds thousands of dead sockets costs one `open` and one `fstat` a scan,
//! not thousands of `fstatat` calls.

use super::candidate::FeedKey;
use super::fd::{fstat, fstatat, open_in_root, open_path};
use super::names::socket_pid;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Entries counted, beyond those read, to say how large a cut-short directory is.
pub(crate) const COUNT_CAP: usize = 65_536;
/// A kept listing is read again after this many scans even when the directory looks
/// unchanged (two changes within one timestamp tick).
const RELIST_SCANS: u64 = 16;

/// A path opened `O_PATH` without following a final link, and what `fstat` says of it.
pub(crate) struct Opened {
    pub(crate) fd: Rc<OwnedFd>,
    pub(crate) st: libc::stat,
}

impl Opened {
    pub(crate) fn is_dir(&self) -> bool {
        self.st.st_mode & libc::S_IFMT == libc::S_IFDIR
    }

    fn id(&self) -> DirId {
        let st = &self.st;
        (
            st.st_dev,
            st.st_ino,
            st.st_mtime,
            st.st_mtime_nsec,
            st.st_ctime,
            st.st_ctime_nsec,
        )
    }
}

/// A directory's identity and last change: a listing is good while this stays the same.
type DirId = (u64, u64, i64, i64, i64, i64);

pub(crate) fn open(path: &Path) -> Option<Opened> {
    let fd = open_path(path, libc::O_NOFOLLOW).ok()?;
    let st = fstat(&fd)?;
    Some(Opened {
        fd: Rc::new(fd),
        st,
    })
}

pub(crate) fn open_within(root: &OwnedFd, rel: &Path) -> Option<Opened> {
    let fd = open_in_root(root, rel).ok()?;
    let st = fstat(&fd)?;
    Some(Opened {
        fd: Rc::new(fd),
        st,
    })
}

/// What the file type bits of a mode name, as a user would say it.
pub(crate) fn kind_of(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFSOCK => "socket",
        libc::S_IFLNK => "symbolic link",
        libc::S_IFIFO => "FIFO",
        libc::S_IFREG => "regular file",
        libc::S_IFDIR => "directory",
        libc::S_IFCHR => "character device",
        libc::S_IFBLK => "block device",
        _ => "file of unknown type",
    }
}

/// A `<pid>.sock` socket file found in a directory.
#[derive(Clone)]
pub(crate) struct SocketEntry {
    pub(crate) name: String,
    pub(crate) pid: u32,
    pub(crate) key: FeedKey,
    /// Its ctime: with `key`, which file this is (an inode number can be used again).
    pub(crate) born: (i64, i64),
    pub(crate) uid: u32,
}

impl SocketEntry {
    /// `st` of `dir/name` if it is a socket.
    pub(crate) fn of(name: &str, pid: u32, st: &libc::stat) -> Option<SocketEntry> {
        (st.st_mode & libc::S_IFMT == libc::S_IFSOCK).then(|| SocketEntry {
            name: name.to_string(),
            pid,
            key: (st.st_dev, st.st_ino),
            born: (st.st_ctime, st.st_ctime_nsec),
            uid: st.st_uid,
        })
    }
}

/// What one listing of a directory found.
pub(crate) struct Listing {
    id: DirId,
    at_scan: u64,
    budget: usize,
    pub(crate) sockets: Vec<SocketEntry>,
    /// Entries read (of any name).
    pub(crate) read: usize,
    /// Entries counted in all, at most [`COUNT_CAP`] past those read.
    pub(crate) counted: usize,
}

impl Listing {
    pub(crate) fn cut_short(&self) -> bool {
        self.counted > self.read
    }

    /// There are more entries than were counted.
    pub(crate) fn capped(&self) -> bool {
        self.counted >= self.read + COUNT_CAP
    }

    fn read(dir: &Opened, budget: usize, scan: u64) -> Listing {
        let mut listing = Listing {
            id: dir.id(),
            at_scan: scan,
            budget,
            sockets: Vec::new(),
            read: 0,
            counted: 0,
        };
        let Ok(entries) = fs::read_dir(format!("/proc/self/fd/{}", dir.fd.as_raw_fd())) else {
            return listing;
        };
        let mut names: Vec<(String, u32)> = Vec::new();
        for entry in entries.take(budget + COUNT_CAP) {
            listing.counted += 1;
            if listing.read >= budget {
                continue; // counted, not read
            }
            listing.read += 1;
            let Ok(entry) = entry else { continue };
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if let Some(pid) = socket_pid(&name) {
                names.push((name, pid));
            }
        }
        names.sort();
        listing.sockets = names
            .into_iter()
            .filter_map(|(name, pid)| {
                let st = fstatat(&dir.fd, &name)?;
                SocketEntry::of(&name, pid, &st)
            })
            .collect();
        listing
    }
}

/// The listings kept, by the path they were listed at.
#[derive(Default)]
pub(crate) struct Listings {
    map: HashMap<PathBuf, Listing>,
    /// Paths asked for in the current scan.
    used: HashSet<PathBuf>,
}

impl Listings {
    /// The listing of `dir` (open at `path`), read again if the directory changed, if it is
    /// due, or if the budget it was read with is not this one.
    pub(crate) fn get(&mut self, path: &Path, dir: &Opened, budget: usize, scan: u64) -> &Listing {
        self.used.insert(path.to_path_buf());
        let stale = self.map.get(path).is_none_or(|l| {
            l.id != dir.id() || l.budget != budget || scan.saturating_sub(l.at_scan) >= RELIST_SCANS
        });
        if stale {
            self.map
                .insert(path.to_path_buf(), Listing::read(dir, budget, scan));
        }
        &self.map[path]
    }

    /// Forgets the listings of directories the scan that just ended did not ask for.
    pub(crate) fn end_scan(&mut self) {
        let used = std::mem::take(&mut self.used);
        self.map.retain(|path, _| used.contains(path));
    }
}

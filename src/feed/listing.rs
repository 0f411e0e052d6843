//! One feed dir as a scan sees it: opened without following a link, and listed within a
//! budget of entries. A listing is kept until the directory changes (its mtime or ctime), so a
//! directory that holds thousands of dead sockets costs one `open` and one `fstat` a scan,
//! not thousands of `fstatat` calls.

use super::candidate::FeedKey;
use super::fd::{fstat, fstatat, open_in_root, open_path};
use super::names::socket_pid;
use hashbrown::{HashMap, HashSet};
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Entries counted, beyond those read, to say how large a cut-short directory is.
pub(crate) const COUNT_CAP: usize = 65_536;
/// A kept listing is read again after this many scans even when the directory looks
/// unchanged (two changes within one timestamp tick).
pub(crate) const RELIST_SCANS: u64 = 16;

/// A path opened `O_PATH` without following a final link, and what `fstat` says of it.
pub(crate) struct Opened {
    pub(crate) fd: Arc<OwnedFd>,
    pub(crate) st: libc::stat,
}

impl Opened {
    pub(crate) fn is_dir(&self) -> bool {
        self.st.st_mode & libc::S_IFMT == libc::S_IFDIR
    }

    fn id(&self) -> DirId {
        Opened::id_of(&self.st)
    }

    fn id_of(st: &libc::stat) -> DirId {
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

/// A directory's identity and last change: a listing of it is good, and a dir opened under it
/// is still the one at its path (`kept.rs`), while this stays the same.
pub(crate) type DirId = (u64, u64, i64, i64, i64, i64);

pub(crate) fn open(path: &Path) -> Option<Opened> {
    let fd = open_path(path, libc::O_NOFOLLOW).ok()?;
    let st = fstat(&fd)?;
    Some(Opened {
        fd: Arc::new(fd),
        st,
    })
}

pub(crate) fn open_within(root: &OwnedFd, rel: &Path) -> Option<Opened> {
    let fd = open_in_root(root, rel).ok()?;
    let st = fstat(&fd)?;
    Some(Opened {
        fd: Arc::new(fd),
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
    /// The pids of every entry named `<pid>.sock`, a socket or not.
    named: HashSet<u32>,
    /// Whether it was read well after the directory's last change: a change within the same
    /// timestamp tick as that one, after the read, would leave its times as they were.
    settled: bool,
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
            named: HashSet::new(),
            settled: settled(&dir.st, std::time::SystemTime::now()),
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
        listing.named = names.iter().map(|&(_, pid)| pid).collect();
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

/// How long after a directory's last change a listing must be read to be trusted to show
/// every later change in the directory's times: well past any filesystem's timestamp tick.
const SETTLED_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

/// Whether a listing read at `now` of a directory whose times are `st`'s comes
/// [`SETTLED_AFTER`] its last change.
fn settled(st: &libc::stat, now: std::time::SystemTime) -> bool {
    let changed = |secs: i64, nanos: i64| {
        let (Ok(secs), Ok(nanos)) = (u64::try_from(secs), u32::try_from(nanos)) else {
            return None;
        };
        std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))
    };
    match (
        changed(st.st_mtime, st.st_mtime_nsec),
        changed(st.st_ctime, st.st_ctime_nsec),
    ) {
        (Some(m), Some(c)) => now
            .duration_since(m.max(c))
            .is_ok_and(|since| since >= SETTLED_AFTER),
        _ => false,
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

    /// Whether the listing kept for `path` shows that it holds no entry `<pid>.sock`: the
    /// directory (`st`, just opened) is the one listed and has not changed since, the listing
    /// is whole, and not due to be read again. `false` whenever that is not known.
    pub(crate) fn lacks(&self, path: &Path, st: &libc::stat, pid: u32, scan: u64) -> bool {
        let id = Opened::id_of(st);
        self.map.get(path).is_some_and(|l| {
            l.id == id
                && l.settled
                && !l.cut_short()
                && scan.saturating_sub(l.at_scan) < RELIST_SCANS
                && !l.named.contains(&pid)
        })
    }

    /// Forgets the listings of directories the scan that just ended did not ask for.
    pub(crate) fn end_scan(&mut self) {
        let used = std::mem::take(&mut self.used);
        self.map.retain(|path, _| used.contains(path));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::net::UnixListener;

    /// Sets a directory's modification time `secs_ago` seconds back (its change time follows
    /// the clock, so only a listing's view of the mtime is moved).
    fn age(dir: &Path, secs_ago: i64) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs() as i64;
        let times = [
            libc::timespec {
                tv_sec: now - secs_ago,
                tv_nsec: 0,
            },
            libc::timespec {
                tv_sec: now - secs_ago,
                tv_nsec: 0,
            },
        ];
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).expect("path");
        // SAFETY: a valid path and two timespecs.
        let done = unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) };
        assert_eq!(done, 0, "utimensat");
    }

    /// A whole listing, read well after the directory last changed, answers for the names it
    /// lacks; a name it holds (socket or not), a directory changed since, one listed too soon
    /// after a change, one cut short and one due again are looked up as before.
    #[test]
    fn a_settled_whole_listing_answers_for_what_it_lacks() {
        let dir = std::env::temp_dir().join(format!("strata-test-lacks-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).expect("mkdir");
        drop(UnixListener::bind(dir.join("41.sock")).expect("bind"));
        fs::write(dir.join("42.sock"), b"not a socket").expect("file");
        let mut listings = Listings::default();
        // Just changed: the listing is kept but answers for nothing.
        let fresh = open(&dir).expect("open");
        listings.get(&dir, &fresh, 10, 1);
        let soon = listings.lacks(&dir, &fresh.st, 7, 1);
        std::thread::sleep(SETTLED_AFTER);
        // ctime moves with any change, mtime is set back: wait past the ctime's tick too.
        age(&dir, 60);
        std::thread::sleep(SETTLED_AFTER);
        let opened = open(&dir).expect("open");
        listings.get(&dir, &opened, 10, 2);
        let st = opened.st;
        let answers = (
            listings.lacks(&dir, &st, 7, 2),
            listings.lacks(&dir, &st, 41, 2),
            listings.lacks(&dir, &st, 42, 2),
            listings.lacks(&dir, &st, 7, 2 + RELIST_SCANS),
        );
        // A new socket changes the directory: the kept listing no longer answers.
        drop(UnixListener::bind(dir.join("7.sock")).expect("bind"));
        let changed = open(&dir).expect("open").st;
        let after_change = listings.lacks(&dir, &changed, 7, 2);
        // A listing cut short by its budget answers for nothing.
        let mut short = Listings::default();
        age(&dir, 60);
        std::thread::sleep(SETTLED_AFTER);
        let opened = open(&dir).expect("open");
        short.get(&dir, &opened, 1, 3);
        let cut = short.lacks(&dir, &opened.st, 9, 3);
        fs::remove_dir_all(&dir).expect("cleanup");
        assert!(!soon, "listed within a tick of its last change");
        assert_eq!(answers, (true, false, false, false));
        assert!(!after_change, "the directory changed since");
        assert!(!cut, "a listing cut short");
    }
}

//! Where agents' sockets are: feed directories of this mount namespace, and the feed
//! directories of watched processes seen through `/proc/<pid>/root` (jobs in containers).
//!
//! Directories are opened once per scan without following a final symlink; a socket is
//! later reached through that descriptor (`/proc/self/fd/N/<name>`), so what was checked is
//! what is connected to.

use super::fd::{fstat, fstatat, is_link, open_in_root, open_in_root_following, open_path};
use crate::sample::feed::FoundVia;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;
use std::time::SystemTime;

/// A socket file's identity: (st_dev, st_ino). The same socket seen twice is one feed.
pub(crate) type FeedKey = (u64, u64);

/// The most feeds one scan yields; the most entries read from one directory per scan.
pub(crate) const MAX_FEEDS: usize = 4096;
const MAX_DIR_ENTRIES: usize = 4096;
/// `/tmp` may be large: read at most this many of its entries when looking for feed dirs.
const MAX_TMP_ENTRIES: usize = 65_536;
/// `/proc/<pid>/environ` is read up to this many bytes.
const MAX_ENVIRON_BYTES: u64 = 256 * 1024;

/// A socket that may be an agent's, with what its directory looked like.
pub(crate) struct Candidate {
    pub key: FeedKey,
    /// As shown to the user (through `/proc/<pid>/root` for a job in a container).
    pub path: PathBuf,
    /// The file name, `<pid>.sock`.
    pub name: String,
    /// The number in the name: the agent's pid as it sees itself.
    pub name_pid: u32,
    /// The uid that must own the directory and be the peer.
    pub expected_uid: u32,
    pub via: FoundVia,
    /// The directory, opened `O_PATH`.
    pub dir: Rc<OwnedFd>,
    /// The check of the directory (owner, mode, not a link), done when it was opened.
    pub dir_verdict: Result<(), String>,
    /// Owner of the socket file.
    pub socket_uid: u32,
}

/// What `/proc/<pid>/status` says that discovery and trust need.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ProcStatus {
    pub euid: Option<u32>,
    /// The innermost pid (last field of `NSpid:`), else `Pid:` on kernels without `NSpid:`.
    pub nspid: Option<u32>,
}

pub(crate) fn parse_status(text: &str) -> ProcStatus {
    let mut status = ProcStatus::default();
    let mut pid = None;
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        match key {
            "Uid" => status.euid = rest.split_whitespace().nth(1).and_then(|f| f.parse().ok()),
            "NSpid" => status.nspid = rest.split_whitespace().last().and_then(|f| f.parse().ok()),
            "Pid" => pid = rest.trim().parse().ok(),
            _ => {}
        }
    }
    status.nspid = status.nspid.or(pid);
    status
}

pub(crate) fn read_status(proc_root: &Path, pid: u32) -> io::Result<ProcStatus> {
    let text = fs::read_to_string(proc_root.join(pid.to_string()).join("status"))?;
    Ok(parse_status(&text))
}

/// `<digits>.sock` → the number, written as the agent writes it (no sign, no leading zero).
pub(crate) fn socket_pid(name: &str) -> Option<u32> {
    let digits = name.strip_suffix(".sock")?;
    let pid: u32 = digits.parse().ok()?;
    (pid.to_string() == digits).then_some(pid)
}

/// Checks a feed dir as the agent does: a directory, not a link, owned by `expected`, 0700.
pub(crate) fn dir_verdict(dir: &Path, st: &libc::stat, expected: u32) -> Result<(), String> {
    let d = dir.display();
    match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => {}
        libc::S_IFLNK => {
            return Err(format!(
                "feed dir {d} is a symbolic link: the agent refuses it too; remove the link"
            ))
        }
        _ => return Err(format!("feed dir {d} is not a directory: remove it")),
    }
    if st.st_uid != expected {
        return Err(format!(
            "feed dir {d} is owned by uid {}, not {expected}: remove it, or chown it to uid {expected}",
            st.st_uid
        ));
    }
    let mode = st.st_mode & 0o7777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "feed dir {d} has mode {mode:04o}, not 0700: the agent's owner should chmod 700 it"
        ));
    }
    Ok(())
}

/// Every user's feed dir under `tmp_root` (`strata-<uid>`), with the uid its name gives, in
/// order: where a monitor running as root looks.
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

/// Finds candidates: see the module comment.
pub(crate) struct Scanner {
    feed_dir: Option<PathBuf>,
    proc_root: PathBuf,
    tmp_root: PathBuf,
    euid: u32,
    /// `strata-<N>` dirs under `tmp_root`, as of `tmp_root`'s mtime (root only).
    tmp_dirs: Option<(SystemTime, Vec<(PathBuf, u32)>)>,
    scans: u64,
    /// What `/proc/<pid>/status` and `environ` said of each watched pid, and at which scan:
    /// read again only every [`ROOT_REFRESH_SCANS`] scans (a pid reused meanwhile is caught
    /// then), not at every scan.
    roots: HashMap<u32, (u64, Option<RootInfo>)>,
}

/// A watched process's identity, for looking through its root.
#[derive(Clone)]
struct RootInfo {
    euid: u32,
    nspid: u32,
    environ_dir: Option<PathBuf>,
}

/// Scans between two reads of a watched process's status and environment.
const ROOT_REFRESH_SCANS: u64 = 30;

impl Scanner {
    pub fn new(feed_dir: Option<PathBuf>, proc_root: PathBuf, tmp_root: PathBuf) -> Self {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        Scanner {
            feed_dir,
            proc_root,
            tmp_root,
            euid,
            tmp_dirs: None,
            scans: 0,
            roots: HashMap::new(),
        }
    }

    pub fn euid(&self) -> u32 {
        self.euid
    }

    /// Every candidate, deduplicated by socket identity, feed dirs first. The roots of
    /// watched pids in `connected` (whose feed is already read) are not looked through again.
    pub fn scan(&mut self, watched: &[u32], connected: &HashSet<u32>) -> Vec<Candidate> {
        self.scans += 1;
        let mut found = Found {
            list: Vec::new(),
            seen: HashSet::new(),
        };
        for (dir, uid) in self.feed_dirs() {
            list_feed_dir(&dir, uid, &mut found);
        }
        self.roots.retain(|pid, _| watched.contains(pid));
        for &pid in watched {
            if found.list.len() >= MAX_FEEDS {
                break;
            }
            if !connected.contains(&pid) {
                self.process_root(pid, &mut found);
            }
        }
        found.list
    }

    /// A watched process's identity, read again when the cached one is old.
    fn root_info(&mut self, pid: u32) -> Option<RootInfo> {
        let scans = self.scans;
        if let Some((read_at, info)) = self.roots.get(&pid) {
            if scans - read_at < ROOT_REFRESH_SCANS {
                return info.clone();
            }
        }
        let proc_dir = self.proc_root.join(pid.to_string());
        let info = read_status(&self.proc_root, pid).ok().and_then(|status| {
            Some(RootInfo {
                euid: status.euid?,
                nspid: status.nspid?,
                environ_dir: environ_feed_dir(&proc_dir.join("environ")),
            })
        });
        self.roots.insert(pid, (scans, info.clone()));
        info
    }

    fn feed_dirs(&mut self) -> Vec<(PathBuf, u32)> {
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
        let mtime = fs::metadata(&self.tmp_root).and_then(|m| m.modified()).ok();
        if let (Some(mtime), Some((cached, dirs))) = (mtime, &self.tmp_dirs) {
            if *cached == mtime && !self.scans.is_multiple_of(16) {
                return dirs.clone();
            }
        }
        let dirs = tmp_feed_dirs(&self.tmp_root);
        if let Some(mtime) = mtime {
            self.tmp_dirs = Some((mtime, dirs.clone()));
        }
        dirs
    }

    fn process_root(&mut self, pid: u32, found: &mut Found) {
        let proc_dir = self.proc_root.join(pid.to_string());
        let Some(RootInfo {
            euid,
            nspid,
            environ_dir,
        }) = self.root_info(pid)
        else {
            return;
        };
        let root_path = proc_dir.join("root");
        let Ok(root) = open_path(&root_path, libc::O_DIRECTORY) else {
            return; // not ours to see, or gone
        };
        let mut dirs = vec![PathBuf::from(format!("tmp/strata-{euid}"))];
        dirs.extend(environ_dir);
        let name = format!("{nspid}.sock");
        for rel in dirs {
            let shown = root_path.join(&rel);
            let Ok(fd) = open_in_root(&root, &rel) else {
                continue;
            };
            let Some(st) = fstat(&fd) else {
                continue;
            };
            let verdict = dir_verdict(&shown, &st, euid);
            let fd = if verdict.is_err() && is_link(&st) {
                match open_in_root_following(&root, &rel) {
                    Ok(fd) => fd,
                    Err(_) => continue,
                }
            } else {
                fd
            };
            let dir = Dir {
                fd: Rc::new(fd),
                shown,
                expected_uid: euid,
                verdict,
                via: FoundVia::ProcessRoot,
            };
            found.add(&dir, &name, nspid);
        }
    }
}

/// Candidates so far, and the sockets already taken.
struct Found {
    list: Vec<Candidate>,
    seen: HashSet<FeedKey>,
}

struct Dir {
    fd: Rc<OwnedFd>,
    shown: PathBuf,
    expected_uid: u32,
    verdict: Result<(), String>,
    via: FoundVia,
}

impl Found {
    /// Adds `dir/name` if it is a socket not seen yet.
    fn add(&mut self, dir: &Dir, name: &str, name_pid: u32) {
        if self.list.len() >= MAX_FEEDS {
            return;
        }
        let Some(st) = fstatat(&dir.fd, name) else {
            return;
        };
        if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
            return; // not a feed
        }
        let key = (st.st_dev, st.st_ino);
        if !self.seen.insert(key) {
            return;
        }
        self.list.push(Candidate {
            key,
            path: dir.shown.join(name),
            name: name.to_string(),
            name_pid,
            expected_uid: dir.expected_uid,
            via: dir.via,
            dir: Rc::clone(&dir.fd),
            dir_verdict: dir.verdict.clone(),
            socket_uid: st.st_uid,
        });
    }
}

/// A feed dir as a scan finds it, not following a final link: the descriptor, its status and
/// the verdict on it (owner, mode, not a link).
pub(crate) fn open_feed_dir(
    path: &Path,
    expected_uid: u32,
) -> io::Result<(OwnedFd, libc::stat, Result<(), String>)> {
    let fd = open_path(path, libc::O_NOFOLLOW)?;
    let st = fstat(&fd).ok_or_else(io::Error::last_os_error)?;
    let verdict = dir_verdict(path, &st, expected_uid);
    Ok((fd, st, verdict))
}

fn list_feed_dir(path: &Path, expected_uid: u32, found: &mut Found) {
    let Ok((fd, st, verdict)) = open_feed_dir(path, expected_uid) else {
        return;
    };
    // A linked dir is refused, but its sockets are still listed so the user sees why.
    let fd = if is_link(&st) {
        match open_path(path, libc::O_DIRECTORY) {
            Ok(fd) => fd,
            Err(_) => return,
        }
    } else {
        fd
    };
    let Ok(entries) = fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())) else {
        return;
    };
    let dir = Dir {
        fd: Rc::new(fd),
        shown: path.to_path_buf(),
        expected_uid,
        verdict,
        via: FoundVia::FeedDir,
    };
    let mut names: Vec<(String, u32)> = entries
        .take(MAX_DIR_ENTRIES)
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let pid = socket_pid(&name)?;
            Some((name, pid))
        })
        .collect();
    names.sort();
    for (name, pid) in names {
        found.add(&dir, &name, pid);
    }
}

/// `STRATA_FEED_DIR` of a process, relative to its root; `None` if unset, unreadable, not
/// absolute, or climbing with `..`.
fn environ_feed_dir(path: &Path) -> Option<PathBuf> {
    let mut bytes = Vec::new();
    fs::File::open(path)
        .ok()?
        .take(MAX_ENVIRON_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    let value = bytes
        .split(|&b| b == 0)
        .find_map(|var| var.strip_prefix(b"STRATA_FEED_DIR="))?;
    let dir = Path::new(std::ffi::OsStr::from_bytes(value));
    if !dir.is_absolute() || dir.components().any(|c| c == Component::ParentDir) {
        return None;
    }
    let rel: PathBuf = dir
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect();
    (!rel.as_os_str().is_empty()).then_some(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_gives_effective_uid_and_innermost_pid() {
        let text = "Name:\tpython\nPid:\t4242\nUid:\t1000\t1001\t1000\t1000\nNSpid:\t4242\t17\t7\n";
        assert_eq!(
            parse_status(text),
            ProcStatus {
                euid: Some(1001),
                nspid: Some(7)
            }
        );
        let old_kernel = "Pid:\t99\nUid:\t0\t0\t0\t0\n";
        assert_eq!(
            parse_status(old_kernel),
            ProcStatus {
                euid: Some(0),
                nspid: Some(99)
            }
        );
        assert_eq!(parse_status("garbage"), ProcStatus::default());
    }

    #[test]
    fn only_canonical_pid_sock_names_are_feeds() {
        assert_eq!(socket_pid("4242.sock"), Some(4242));
        for name in [
            "x.sock",
            "42.socket",
            "+42.sock",
            "042.sock",
            ".sock",
            "99999999999.sock",
            "4242",
        ] {
            assert_eq!(socket_pid(name), None, "{name}");
        }
    }

    #[test]
    fn environ_feed_dir_must_be_absolute_without_dotdot() {
        let dir = std::env::temp_dir().join(format!("strata-test-environ-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("mkdir");
        let file = dir.join("environ");
        let cases: &[(&[u8], Option<&str>)] = &[
            (
                b"A=1\0STRATA_FEED_DIR=/scratch/feeds\0B=2\0",
                Some("scratch/feeds"),
            ),
            (b"STRATA_FEED_DIR=relative/dir\0", None),
            (b"STRATA_FEED_DIR=/a/../../etc\0", None),
            (b"STRATA_FEED_DIR=/\0", None),
            (b"OTHER=1\0", None),
        ];
        let got: Vec<Option<PathBuf>> = cases
            .iter()
            .map(|(bytes, _)| {
                fs::write(&file, bytes)
                    .ok()
                    .and_then(|_| environ_feed_dir(&file))
            })
            .collect();
        fs::remove_dir_all(&dir).expect("cleanup");
        for ((bytes, want), got) in cases.iter().zip(got) {
            let bytes = String::from_utf8_lossy(bytes);
            assert_eq!(got, want.map(PathBuf::from), "{bytes:?}");
        }
        assert_eq!(environ_feed_dir(&file), None, "unreadable: none");
    }
}

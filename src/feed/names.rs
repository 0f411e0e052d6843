//! What names and `/proc` say of a feed: a socket's name (`<pid>.sock`), a process's
//! `/proc/<pid>/status` and its `STRATA_FEED_DIR`, and the check of a feed dir. Pure or
//! read-only; the scan that uses them is in [`super::discover`].

use super::procfile::{read_proc, read_proc_up_to};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// `/proc/<pid>/environ` is read up to this many bytes.
const MAX_ENVIRON_BYTES: usize = 256 * 1024;

/// What `/proc/<pid>/status` says that discovery and trust need.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ProcStatus {
    pub(crate) euid: Option<u32>,
    /// The innermost pid (last field of `NSpid:`), else `Pid:` on kernels without `NSpid:`.
    pub(crate) nspid: Option<u32>,
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
    // A name that is not UTF-8 is still a process: its bytes become U+FFFD, the rest is read.
    let raw = read_proc(&proc_root.join(pid.to_string()).join("status"))?;
    let text = String::from_utf8_lossy(&raw);
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

/// `STRATA_FEED_DIR` of a process, relative to its root; `None` if unset, unreadable, not
/// absolute, or climbing with `..`.
pub(crate) fn environ_feed_dir(path: &Path) -> Option<PathBuf> {
    let bytes = read_proc_up_to(path, MAX_ENVIRON_BYTES).ok()?;
    environ_value(&bytes)
}

/// `STRATA_FEED_DIR` in the bytes of an environment (`NAME=value` separated by NULs), as
/// [`environ_feed_dir`] takes it.
pub(crate) fn environ_value(bytes: &[u8]) -> Option<PathBuf> {
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
    use std::fs;

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

    /// A process whose name is not UTF-8 still has its uid and pid read, so its agent's
    /// socket is looked up like any other.
    #[test]
    fn a_status_whose_name_is_not_utf8_is_read() {
        let root = std::env::temp_dir().join(format!("strata-test-status-{}", std::process::id()));
        fs::create_dir_all(root.join("77")).expect("mkdir");
        let mut status = b"Name:\ttrain\xff\n".to_vec();
        status.extend_from_slice(b"Uid:\t1000\t1000\t1000\t1000\nNSpid:\t77\t5\n");
        fs::write(root.join("77/status"), status).expect("write");
        let read = read_status(&root, 77);
        fs::remove_dir_all(&root).expect("cleanup");
        assert_eq!(
            read.expect("read"),
            ProcStatus {
                euid: Some(1000),
                nspid: Some(5)
            }
        );
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

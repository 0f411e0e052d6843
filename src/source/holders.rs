//! Who holds the GPUs' device files open, found as `fuser` finds them: each process's open
//! files are links in `/proc/PID/fd`, read with `readlink`.
//!
//! A CUDA context lives as long as some process holds the GPU's `/dev/nvidia<N>` open: when
//! the process NVML names has exited, an orphaned dataloader worker or a forked child that
//! inherited the descriptors keeps it alive. The search is made only while such a context
//! exists, at most every [`RESCAN_SECS`].

use super::procfs::ProcFs;
use crate::sample::{DeviceFileScan, DeviceHolder};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The directory the device files are looked for in: `/dev`, or `STRATA_DEV_DIR` (for tests,
/// which put an ordinary file named `nvidia0` there and hold it open).
pub(crate) const DEV_DIR_ENV: &str = "STRATA_DEV_DIR";
/// While the zombie contexts stay the same, the search is repeated this often at most: it
/// reads every open file of every process.
pub(crate) const RESCAN_SECS: f64 = 5.0;

/// What a link in `/proc/PID/fd` names, if it is a GPU's device file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DeviceFile {
    /// `/dev/nvidia<N>`.
    Gpu(u32),
    /// `/dev/nvidia-uvm`.
    Uvm,
}

/// Which GPU device file `target` (a link's target) is, under `dev_dir`.
fn device_file(dev_dir: &[u8], target: &[u8]) -> Option<DeviceFile> {
    let rest = target.strip_prefix(dev_dir)?;
    let rest = rest.strip_prefix(b"/").unwrap_or(rest);
    let rest = rest.strip_prefix(b"nvidia")?;
    if rest == b"-uvm" {
        return Some(DeviceFile::Uvm);
    }
    if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(rest)
        .ok()?
        .parse()
        .ok()
        .map(DeviceFile::Gpu)
}

/// The processes under `procfs`'s root that hold a GPU device file of `dev_dir` open, this
/// process excluded (NVML itself holds them). Each is named with its parent.
pub(crate) fn scan(procfs: &mut ProcFs, dev_dir: &Path) -> DeviceFileScan {
    let root = procfs.root().to_path_buf();
    let me = std::process::id();
    let dev = dev_dir.as_os_str().as_bytes();
    let dev = dev.strip_suffix(b"/").unwrap_or(dev).to_vec();
    let mut found: Vec<(u32, Vec<u32>, bool)> = Vec::new();
    let mut unreadable = 0u32;
    let Ok(entries) = std::fs::read_dir(&root) else {
        return DeviceFileScan::default();
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let fds = match std::fs::read_dir(entry.path().join("fd")) {
            Ok(fds) => fds,
            Err(e) if e.kind() == ErrorKind::PermissionDenied => {
                unreadable += 1;
                continue;
            }
            // Exited since the listing.
            Err(_) => continue,
        };
        let mut minors = Vec::new();
        let mut uvm = false;
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            match device_file(&dev, OsStr::as_bytes(target.as_os_str())) {
                Some(DeviceFile::Gpu(minor)) if !minors.contains(&minor) => minors.push(minor),
                Some(DeviceFile::Uvm) => uvm = true,
                _ => {}
            }
        }
        if !minors.is_empty() || uvm {
            minors.sort_unstable();
            found.push((pid, minors, uvm));
        }
    }
    found.sort_unstable_by_key(|(pid, _, _)| *pid);
    let mut parents: HashMap<u32, Option<String>> = HashMap::new();
    let holders = found
        .into_iter()
        .map(|(pid, minors, uvm)| {
            let who = procfs.identity(pid);
            let parent_command = who.ppid.filter(|&p| p > 0).and_then(|ppid| {
                parents
                    .entry(ppid)
                    .or_insert_with(|| procfs.identity(ppid).command)
                    .clone()
            });
            DeviceHolder {
                pid,
                start_time: who.start_time,
                state: who.state.as_deref().map(str::to_string),
                ppid: who.ppid,
                uid: who.uid,
                user: who.user,
                command: who.command,
                parent_command,
                minors,
                uvm,
            }
        })
        .collect();
    DeviceFileScan {
        holders,
        unreadable,
    }
}

/// The device directory in force: `STRATA_DEV_DIR` when set and not empty, else `/dev`.
pub(crate) fn dev_dir() -> PathBuf {
    std::env::var_os(DEV_DIR_ENV)
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from("/dev"), PathBuf::from)
}

/// Repeats the search only when it is due: the first time a zombie context appears, when the
/// set of them changes, and every [`RESCAN_SECS`] while they last.
#[derive(Debug)]
pub(crate) struct HolderSearch {
    dev_dir: PathBuf,
    last: Option<(Instant, Vec<u32>, DeviceFileScan)>,
}

impl Default for HolderSearch {
    fn default() -> Self {
        HolderSearch::new(dev_dir())
    }
}

impl HolderSearch {
    pub(crate) fn new(dev_dir: PathBuf) -> Self {
        HolderSearch {
            dev_dir,
            last: None,
        }
    }

    /// The holders of the device files while `zombies` (the pids whose context outlived
    /// them) is not empty; `None` when there is none.
    pub(crate) fn search(
        &mut self,
        procfs: &mut ProcFs,
        zombies: &[u32],
    ) -> Option<DeviceFileScan> {
        if zombies.is_empty() {
            self.last = None;
            return None;
        }
        let mut zombies = zombies.to_vec();
        zombies.sort_unstable();
        zombies.dedup();
        let due = match &self.last {
            Some((at, before, _)) => {
                *before != zombies || at.elapsed() >= Duration::from_secs_f64(RESCAN_SECS)
            }
            None => true,
        };
        if due {
            let scan = scan(procfs, &self.dev_dir);
            self.last = Some((Instant::now(), zombies, scan));
        }
        self.last.as_ref().map(|(_, _, scan)| scan.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn device_files_are_told_apart_from_their_neighbours() {
        let dev = b"/dev";
        assert_eq!(device_file(dev, b"/dev/nvidia0"), Some(DeviceFile::Gpu(0)));
        assert_eq!(
            device_file(dev, b"/dev/nvidia17"),
            Some(DeviceFile::Gpu(17))
        );
        assert_eq!(device_file(dev, b"/dev/nvidia-uvm"), Some(DeviceFile::Uvm));
        for other in [
            &b"/dev/nvidiactl"[..],
            b"/dev/nvidia-uvm-tools",
            b"/dev/nvidia-caps/nvidia-cap1",
            b"/dev/nvidia",
            b"/dev/nvidia0 (deleted)",
            b"/devx/nvidia0",
            b"/tmp/dev/nvidia0",
            b"socket:[12345]",
        ] {
            assert_eq!(
                device_file(dev, other),
                None,
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }

    /// A real process holding files named like the device files open is found, named with
    /// its parent, and the one that holds nothing is not.
    ///
    /// The holder is `sleep` with the files as its standard streams, set before it runs:
    /// `spawn` returns once the child has exec'd, so its descriptors are final when the scan
    /// reads them. (A shell's `exec 3<file ...` was used before. Where the shell inherits a
    /// descriptor 3, it opens the files elsewhere and moves them into place one by one, and a
    /// scan in between read `nvidia-uvm` without `nvidia3`.)
    #[test]
    fn a_process_holding_the_file_is_found_and_named() {
        let dir = crate::fixtures::TempDir::new("holders");
        for name in ["nvidia3", "nvidia-uvm", "nvidiactl"] {
            std::fs::write(dir.join(name), b"").expect("file");
        }
        let open = |name: &str| std::fs::File::open(dir.join(name)).expect("open");
        let mut holder = Command::new("sleep")
            .arg("30")
            .stdin(open("nvidia3"))
            .stdout(open("nvidia-uvm"))
            .stderr(open("nvidiactl"))
            .spawn()
            .expect("sleep runs");
        let mut bystander = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep");
        // This process holds it too, as NVML in strata does: never named.
        let _own = open("nvidia3");
        let pid = holder.id();
        let bystander_pid = bystander.id();
        let scan = super::scan(&mut ProcFs::default(), &dir);
        let _ = holder.kill();
        let _ = bystander.kill();
        let _ = holder.wait();
        let _ = bystander.wait();
        let found = scan
            .holders
            .iter()
            .find(|h| h.pid == pid)
            .unwrap_or_else(|| panic!("pid {pid} not found: {scan:?}"));
        assert_eq!(found.minors, [3]);
        assert!(found.uvm);
        assert_eq!(found.command.as_deref(), Some("sleep 30"));
        assert_eq!(found.ppid, Some(std::process::id()));
        assert!(found.start_time.is_some());
        let me = ProcFs::default().identity(std::process::id()).command;
        assert_eq!(found.parent_command, me, "the parent is this test");
        assert!(
            !scan.holders.iter().any(|h| h.pid == bystander_pid),
            "{scan:?}"
        );
        assert!(
            !scan.holders.iter().any(|h| h.pid == std::process::id()),
            "never itself"
        );
    }

    #[test]
    fn the_search_runs_only_while_there_are_zombies_and_when_due() {
        let dir = std::env::temp_dir().join(format!("strata-search-{}", std::process::id()));
        let mut search = HolderSearch::new(dir);
        let mut procfs = ProcFs::default();
        assert_eq!(search.search(&mut procfs, &[]), None);
        let first = search.search(&mut procfs, &[7]).expect("searched");
        let at = search.last.as_ref().map(|(t, _, _)| *t);
        assert!(search.search(&mut procfs, &[7]).is_some());
        assert_eq!(
            search.last.as_ref().map(|(t, _, _)| *t),
            at,
            "not due again yet"
        );
        search.search(&mut procfs, &[7, 8]);
        assert_ne!(
            search.last.as_ref().map(|(t, _, _)| *t),
            at,
            "another zombie: searched again"
        );
        assert_eq!(search.search(&mut procfs, &[]), None);
        assert!(search.last.is_none());
        let _ = first;
    }
}

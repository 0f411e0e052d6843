//! Processes, as `/proc` shows them here: whether it is the host's PID namespace (NVML's pids
//! are host pids), whether `hidepid` hides other users' processes, and whether another
//! user's `/proc/PID/{stat,status,fd}` can be read (the search for who keeps a zombie
//! context alive reads every process's `fd`).

use super::runner::{Lane, Runner};
use super::{euid, root_fix, Check, Group};
use crate::source::procfs::ProcFs;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What to do when a read of `/proc` hangs.
pub(super) const PROC_HUNG: &str = "a process may be stuck in the kernel (state D): `ps -eo pid,stat,cmd | awk '$2 ~ /D/'` names it";

pub(super) fn start(runner: &mut Runner) {
    runner.spawn((2, 0), |lane| processes_lane(&lane));
}

fn processes_lane(lane: &Lane) {
    let step = |check, what: &str| lane.step(Group::Processes, check, None, what, PROC_HUNG);
    step(
        "pid_namespace",
        "reading /proc/1/ns/pid and /proc/self/ns/pid",
    );
    lane.report(pid_namespace(ProcFs::default().host_pid_namespace()));
    step("hidepid", "reading /proc/self/mountinfo");
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    lane.report(hidepid(proc_hidepid(&mountinfo).as_deref(), euid()));
    step("other_users_proc", "reading another user's /proc/PID");
    lane.report(other_users(
        &probe_other_user(Path::new("/proc"), euid()),
        euid(),
    ));
}

pub(super) fn pid_namespace(host: Option<bool>) -> Check {
    const FIX: &str = "run the container with `--pid=host` (Kubernetes: `hostPID: true`), or run strata on the host";
    match host {
        Some(true) => Check::ok(
            Group::Processes,
            "pid_namespace",
            "this /proc shows the host's PID namespace: NVML's pids are looked up here",
        ),
        Some(false) => Check::limited(
            Group::Processes,
            "pid_namespace",
            "strata runs in a PID namespace of its own (a container without the host's /proc): NVML's pids name no process here, so none is named by number (shown `foreign`) and no zombie context is called",
            FIX,
        ),
        None => Check::limited(
            Group::Processes,
            "pid_namespace",
            "cannot tell whether this /proc shows the host's PID namespace (/proc/1/ns/pid unreadable, no kthreadd at pid 2): NVML's pids are looked up, and may name other processes",
            FIX,
        ),
    }
}

/// The `hidepid` option of the `/proc` this process sees (the last proc mount on `/proc` in
/// its mountinfo), normalised to its number: `None` when not set (or `0`).
pub(super) fn proc_hidepid(mountinfo: &str) -> Option<String> {
    let proc_mount = mountinfo.lines().rev().find(|line| {
        let mut fields = line.split(' ');
        let point = fields.nth(4);
        let fstype = line
            .split(" - ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next());
        point == Some("/proc") && fstype == Some("proc")
    })?;
    let value = proc_mount
        .split([' ', ','])
        .find_map(|option| option.strip_prefix("hidepid="))?;
    let number = match value {
        "0" | "off" => return None,
        "1" | "noaccess" => "1",
        "2" | "invisible" => "2",
        "4" | "ptraceable" => "4",
        other => other,
    };
    Some(number.to_string())
}

pub(super) fn hidepid(value: Option<&str>, euid: u32) -> Check {
    let Some(value) = value else {
        return Check::ok(
            Group::Processes,
            "hidepid",
            "/proc is mounted without hidepid: every process is visible",
        );
    };
    if euid == 0 {
        return Check::ok(
            Group::Processes,
            "hidepid",
            &format!("/proc has hidepid={value}, which hides nothing from root"),
        );
    }
    let effect = match value {
        "1" => "other users' /proc/PID can be listed but not read",
        "2" => "other users' processes are not in /proc at all",
        "4" => "only the processes this user may ptrace are in /proc",
        _ => "some processes are hidden",
    };
    Check::limited(
        Group::Processes,
        "hidepid",
        &format!("/proc has hidepid={value}: {effect}; NVML's processes of other users are shown `hidden` (never called gone), without user or command"),
        "run strata as root, or add its user to the group named by the gid= option of /proc's mount",
    )
}

/// How one file of another user's `/proc/PID` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    Readable,
    Denied,
    /// Not there, though the process exists: `hidepid=2`.
    Hidden,
}

/// Another user's process, and how its `stat`, `status` and `fd` answered; `None` when no
/// process of another user exists or shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OtherUser {
    pub(crate) pid: u32,
    pub(crate) uid: Option<u32>,
    pub(crate) stat: Access,
    pub(crate) status: Access,
    pub(crate) fd: Access,
}

fn access(result: std::io::Result<()>) -> Access {
    match result {
        Ok(()) => Access::Readable,
        Err(e) if e.kind() == ErrorKind::PermissionDenied => Access::Denied,
        Err(_) => Access::Hidden,
    }
}

/// Reads a process of another user than `euid`, else pid 1 (which hidepid may hide).
fn probe_other_user(proc_root: &Path, euid: u32) -> Option<OtherUser> {
    let owner = |pid: u32| {
        std::fs::metadata(proc_root.join(pid.to_string()))
            .ok()
            .map(|m| m.uid())
    };
    let mut candidates: Vec<u32> = std::fs::read_dir(proc_root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|pid| owner(*pid).is_some_and(|uid| uid != euid))
        .take(8)
        .collect();
    // None listed: pid 1 still exists, shown or not.
    candidates.push(1);
    for pid in candidates {
        let dir = proc_root.join(pid.to_string());
        let probe = OtherUser {
            pid,
            uid: owner(pid),
            stat: access(std::fs::read(dir.join("stat")).map(drop)),
            status: access(std::fs::read(dir.join("status")).map(drop)),
            fd: access(std::fs::read_dir(dir.join("fd")).map(drop)),
        };
        // A listed process that has exited since is skipped; pid 1 always exists.
        if probe.uid.is_some() || pid == 1 {
            return Some(probe);
        }
    }
    None
}

pub(super) fn other_users(probe: &Option<OtherUser>, euid: u32) -> Check {
    let fix = root_fix(euid);
    let Some(p) = probe else {
        return Check::ok(
            Group::Processes,
            "other_users_proc",
            "no other user's process runs here",
        );
    };
    let who = match p.uid {
        Some(uid) => format!("PID {} (uid {uid})", p.pid),
        None => format!("PID {}", p.pid),
    };
    let word = |a: Access| match a {
        Access::Readable => "readable",
        Access::Denied => "denied",
        Access::Hidden => "hidden",
    };
    let seen = format!(
        "{who}: stat {}, status {}, fd {}",
        word(p.stat),
        word(p.status),
        word(p.fd)
    );
    if p.stat != Access::Readable || p.status != Access::Readable {
        return Check::limited(
            Group::Processes,
            "other_users_proc",
            &format!("other users' processes cannot be read ({seen}): their user, command and state are unknown, and a zombie context's holders among them are not found"),
            fix,
        );
    }
    if p.fd != Access::Readable {
        return Check::limited(
            Group::Processes,
            "other_users_proc",
            &format!("other users' open files cannot be read ({seen}): a zombie context's holders among their processes are not found (the finding says how many were not searched)"),
            fix,
        );
    }
    Check::ok(
        Group::Processes,
        "other_users_proc",
        &format!("other users' /proc/PID/stat, status and fd are readable ({seen}): a zombie context's holders are found whoever runs them"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    const HOST: &str =
        "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n";

    #[test]
    fn hidepid_is_read_from_the_last_proc_mount_on_proc() {
        assert_eq!(proc_hidepid(HOST), None);
        let stacked =
            format!("{HOST}63 45 0:39 / /proc rw,relatime - proc proc rw,hidepid=invisible\n");
        assert_eq!(proc_hidepid(&stacked).as_deref(), Some("2"));
        let old = "20 1 0:5 / /proc rw,relatime - proc proc rw,hidepid=1,gid=27\n";
        assert_eq!(proc_hidepid(old).as_deref(), Some("1"));
        let off = "20 1 0:5 / /proc rw - proc proc rw,hidepid=off\n";
        assert_eq!(proc_hidepid(off), None);
        // A proc mounted elsewhere is not the /proc strata reads.
        let elsewhere = format!("{HOST}70 22 0:40 / /mnt/proc rw - proc proc rw,hidepid=2\n");
        assert_eq!(proc_hidepid(&elsewhere), None);
    }

    #[test]
    fn hidepid_limits_only_a_user_other_than_root() {
        assert_eq!(hidepid(None, 1000).status, Status::Ok);
        assert_eq!(hidepid(Some("2"), 0).status, Status::Ok);
        let user = hidepid(Some("2"), 1000);
        assert_eq!(user.status, Status::Limited);
        assert!(user.detail.contains("not in /proc at all") && user.detail.contains("hidden"));
    }

    #[test]
    fn another_namespace_gives_the_pid_host_advice() {
        assert_eq!(pid_namespace(Some(true)).status, Status::Ok);
        for host in [Some(false), None] {
            let c = pid_namespace(host);
            assert_eq!(c.status, Status::Limited);
            assert!(c.fix.as_deref().is_some_and(|f| f.contains("--pid=host")));
        }
    }

    #[test]
    fn unreadable_fds_limit_the_zombie_holder_search() {
        let mut p = OtherUser {
            pid: 1,
            uid: Some(0),
            stat: Access::Readable,
            status: Access::Readable,
            fd: Access::Readable,
        };
        assert_eq!(other_users(&Some(p.clone()), 1000).status, Status::Ok);
        p.fd = Access::Denied;
        let c = other_users(&Some(p.clone()), 1000);
        assert_eq!(c.status, Status::Limited);
        assert!(
            c.detail.contains("open files") && c.detail.contains("fd denied"),
            "{}",
            c.detail
        );
        p.stat = Access::Hidden;
        assert!(other_users(&Some(p), 1000).detail.contains("stat hidden"));
        assert_eq!(other_users(&None, 1000).status, Status::Ok);
    }
}

//! Feeds: the feed dir (its owner and mode, judged by the rule the monitor applies); as root,
//! every user's `/tmp/strata-<uid>` and whether each is trusted; and whether the roots of
//! NVML's processes (`/proc/<pid>/root`) can be reached, through which the monitor finds a
//! job's feed inside a container.

use super::processes::{pid_namespace, PROC_HUNG};
use super::runner::{Lane, Runner};
use super::{euid, root_fix, Check, Group};
use crate::feed::{open_feed_dir, tmp_feed_dirs};
use crate::source::procfs::ProcFs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Most refused dirs named in one line.
const NAMED: usize = 4;

pub(super) fn start(runner: &mut Runner, feed_dir: Option<PathBuf>) {
    runner.spawn((3, 0), move |lane| dirs_lane(&lane, feed_dir));
}

/// The roots of NVML's processes: after NVML has listed them.
pub(super) fn start_roots(runner: &mut Runner, listed: Vec<u32>) {
    runner.spawn((3, 1), move |lane| roots_lane(&lane, &listed));
}

fn dirs_lane(lane: &Lane, given_dir: Option<PathBuf>) {
    let uid = euid();
    let given = given_dir.is_some();
    let dir = given_dir.unwrap_or_else(|| PathBuf::from(format!("/tmp/strata-{uid}")));
    lane.step(
        Group::Feeds,
        "feed_dir",
        None,
        &format!("opening {}", dir.display()),
        PROC_HUNG,
    );
    lane.report(feed_dir(
        &dir,
        uid,
        open_feed_dir(&dir, uid).map(|(_, st, v)| (st, v)),
    ));
    lane.step(
        Group::Feeds,
        "user_feed_dirs",
        None,
        "listing /tmp",
        PROC_HUNG,
    );
    let check = match (given, uid) {
        (true, _) => Check::ok(
            Group::Feeds,
            "user_feed_dirs",
            &format!(
                "--feed-dir (or STRATA_FEED_DIR) names {}: only it, and the jobs' own roots, are read",
                dir.display()
            ),
        ),
        (false, 0) => {
            let verdicts: Vec<(PathBuf, Result<(), String>)> = tmp_feed_dirs(Path::new("/tmp"))
                .into_iter()
                .map(|(path, owner)| {
                    let verdict = match open_feed_dir(&path, owner) {
                        Ok((_, _, verdict)) => verdict,
                        Err(e) => Err(format!("cannot open {}: {e}", path.display())),
                    };
                    (path, verdict)
                })
                .collect();
            user_feed_dirs(&verdicts)
        }
        (false, _) => Check::limited(
            Group::Feeds,
            "user_feed_dirs",
            &format!(
                "not root: only /tmp/strata-{uid} is read; other users' jobs' feeds are not"
            ),
            "run strata as root to read every user's feed dir",
        ),
    };
    lane.report(check);
}

/// The verdict's reason and its fix: the rule's message is `REASON: FIX`.
fn split_verdict(verdict: &str) -> (&str, Option<&str>) {
    match verdict.rsplit_once(": ") {
        Some((reason, fix)) => (reason, Some(fix)),
        None => (verdict, None),
    }
}

pub(super) fn feed_dir(
    dir: &Path,
    uid: u32,
    opened: std::io::Result<(libc::stat, Result<(), String>)>,
) -> Check {
    let shown = dir.display();
    match opened {
        Err(e) if e.kind() == ErrorKind::NotFound => Check::ok(
            Group::Feeds,
            "feed_dir",
            &format!(
                "{shown} does not exist yet: the first agent of uid {uid} makes it, mode 0700"
            ),
        ),
        Err(e) => Check::missing(
            Group::Feeds,
            "feed_dir",
            &format!("cannot open {shown}: {e}: no feed in it can be read"),
            "check the permissions of its parent directory",
        ),
        Ok((st, verdict)) => {
            let seen = format!(
                "{shown}: owner uid {}, mode {:04o}",
                st.st_uid,
                st.st_mode & 0o7777
            );
            match verdict {
                Ok(()) => Check::ok(Group::Feeds, "feed_dir", &format!("{seen}: trusted")),
                Err(why) => {
                    let (reason, fix) = split_verdict(&why);
                    Check::missing(
                        Group::Feeds,
                        "feed_dir",
                        &format!("{seen}: {reason}: every feed in it is refused"),
                        fix.unwrap_or("see the reason"),
                    )
                }
            }
        }
    }
}

pub(super) fn user_feed_dirs(verdicts: &[(PathBuf, Result<(), String>)]) -> Check {
    if verdicts.is_empty() {
        return Check::ok(
            Group::Feeds,
            "user_feed_dirs",
            "no /tmp/strata-<uid> yet: no agent has run here",
        );
    }
    let refused: Vec<&str> = verdicts
        .iter()
        .filter_map(|(_, v)| v.as_ref().err().map(String::as_str))
        .collect();
    let total = verdicts.len();
    if refused.is_empty() {
        return Check::ok(
            Group::Feeds,
            "user_feed_dirs",
            &format!(
                "{total} /tmp/strata-<uid> dir{}, each trusted (its user's, mode 0700)",
                if total == 1 { "" } else { "s" }
            ),
        );
    }
    let mut named: Vec<&str> = refused.iter().take(NAMED).copied().collect();
    let more = refused.len().saturating_sub(NAMED);
    let more = (more > 0).then(|| format!("and {more} more"));
    named.extend(more.as_deref());
    Check::limited(
        Group::Feeds,
        "user_feed_dirs",
        &format!(
            "{} of {total} /tmp/strata-<uid> dirs refused, their feeds shown as refused and never used: {}",
            refused.len(),
            named.join("; ")
        ),
        "do what each refusal says, as its owner or as root",
    )
}

fn roots_lane(lane: &Lane, listed: &[u32]) {
    lane.step(
        Group::Feeds,
        "process_roots",
        None,
        "reading /proc/PID/root of NVML's processes",
        PROC_HUNG,
    );
    let mut procfs = ProcFs::default();
    if procfs.host_pid_namespace() == Some(false) {
        let advice = pid_namespace(Some(false));
        lane.report(Check::limited(
            Group::Feeds,
            "process_roots",
            "in a PID namespace of its own, strata cannot reach the roots of NVML's processes: a job's feed inside a container is found only through a shared feed dir",
            advice.fix.as_deref().unwrap_or_default(),
        ));
        return;
    }
    let mut reach = |pid: u32| -> Option<Reach> {
        let identity = procfs.identity(pid);
        if identity.hidden {
            return Some(Reach::Hidden);
        }
        if !identity.visible {
            // Gone since NVML listed it: nothing to say of it.
            return None;
        }
        match std::fs::metadata(format!("/proc/{pid}/root")) {
            Ok(_) => Some(Reach::Reached),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(_) => Some(Reach::Denied),
        }
    };
    let seen: Vec<(u32, Reach)> = listed
        .iter()
        .filter_map(|pid| Some((*pid, reach(*pid)?)))
        .collect();
    let pid1 = match seen.is_empty() {
        true => reach(1),
        false => None,
    };
    lane.report(process_roots(&seen, pid1, euid()));
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reach {
    Reached,
    Denied,
    /// The process exists but `/proc` does not show it (`hidepid`).
    Hidden,
}

impl Reach {
    fn why(self) -> &'static str {
        match self {
            Reach::Reached => "reached",
            Reach::Denied => "permission denied",
            Reach::Hidden => "hidden by /proc",
        }
    }
}

/// `seen`: NVML's processes this `/proc` shows, each reached or not; `pid1`: with none of
/// them, how pid 1's root answered.
pub(super) fn process_roots(seen: &[(u32, Reach)], pid1: Option<Reach>, euid: u32) -> Check {
    let fix = root_fix(euid);
    if seen.is_empty() {
        return match pid1 {
            Some(unreached @ (Reach::Denied | Reach::Hidden)) => Check::limited(
                Group::Feeds,
                "process_roots",
                &format!("no process of NVML's to look through here, and /proc/1/root cannot be reached ({}): the roots of jobs in containers would not be reached either", unreached.why()),
                fix,
            ),
            _ => Check::ok(
                Group::Feeds,
                "process_roots",
                "no process of NVML's to look through here; /proc/1/root can be reached",
            ),
        };
    }
    let denied: Vec<String> = seen
        .iter()
        .filter(|(_, r)| *r != Reach::Reached)
        .map(|(pid, r)| format!("PID {pid}: {}", r.why()))
        .collect();
    let total = seen.len();
    if denied.is_empty() {
        return Check::ok(
            Group::Feeds,
            "process_roots",
            &format!(
                "/proc/PID/root of the {total} process{} NVML lists here can be reached: a job's feed inside a container is found through it",
                if total == 1 { "" } else { "es" }
            ),
        );
    }
    Check::limited(
        Group::Feeds,
        "process_roots",
        &format!(
            "/proc/PID/root of {} of the {total} processes NVML lists here cannot be reached ({}): their jobs' feeds inside containers are not found",
            denied.len(),
            denied.join("; ")
        ),
        fix,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    fn stat(uid: u32, mode: u32) -> libc::stat {
        // SAFETY: plain data; zero is valid.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        st.st_uid = uid;
        st.st_mode = libc::S_IFDIR | mode;
        st
    }

    #[test]
    fn a_feed_dir_shows_owner_and_mode_and_the_rules_verdict() {
        let dir = Path::new("/tmp/strata-1000");
        let ok = feed_dir(dir, 1000, Ok((stat(1000, 0o700), Ok(()))));
        assert_eq!(ok.status, Status::Ok);
        assert_eq!(
            ok.detail,
            "/tmp/strata-1000: owner uid 1000, mode 0700: trusted"
        );
        let why = "feed dir /tmp/strata-1000 has mode 0755, not 0700: the agent's owner should chmod 700 it";
        let bad = feed_dir(dir, 1000, Ok((stat(1000, 0o755), Err(why.into()))));
        assert_eq!(bad.status, Status::Missing);
        assert!(
            bad.detail.contains("mode 0755") && bad.detail.contains("every feed in it is refused")
        );
        assert_eq!(
            bad.fix.as_deref(),
            Some("the agent's owner should chmod 700 it")
        );
        let absent = feed_dir(dir, 1000, Err(std::io::Error::from(ErrorKind::NotFound)));
        assert_eq!(absent.status, Status::Ok);
    }

    #[test]
    fn each_users_dir_is_judged_and_the_refused_named() {
        assert_eq!(user_feed_dirs(&[]).status, Status::Ok);
        let good = (PathBuf::from("/tmp/strata-1"), Ok(()));
        assert_eq!(
            user_feed_dirs(std::slice::from_ref(&good)).status,
            Status::Ok
        );
        let bad = (
            PathBuf::from("/tmp/strata-2"),
            Err("feed dir /tmp/strata-2 is owned by uid 0, not 2: remove it".into()),
        );
        let c = user_feed_dirs(&[good, bad]);
        assert_eq!(c.status, Status::Limited);
        assert!(c.detail.starts_with("1 of 2"), "{}", c.detail);
        assert!(c.detail.contains("owned by uid 0, not 2"));
    }

    #[test]
    fn unreachable_roots_are_named() {
        let c = process_roots(&[(10, Reach::Reached), (11, Reach::Denied)], None, 1000);
        assert_eq!(c.status, Status::Limited);
        assert!(c.detail.contains("1 of the 2") && c.detail.contains("PID 11: permission denied"));
        let hidden = process_roots(&[(12, Reach::Hidden)], None, 1000);
        assert!(
            hidden.detail.contains("PID 12: hidden by /proc"),
            "{}",
            hidden.detail
        );
        assert_eq!(
            process_roots(&[], Some(Reach::Hidden), 1000).status,
            Status::Limited
        );
        assert_eq!(
            process_roots(&[(10, Reach::Reached)], None, 1000).status,
            Status::Ok
        );
        assert_eq!(
            process_roots(&[], Some(Reach::Denied), 1000).status,
            Status::Limited
        );
        assert_eq!(
            process_roots(&[], Some(Reach::Reached), 1000).status,
            Status::Ok
        );
    }
}

//! What `strata attach` would meet: `kernel.yama.ptrace_scope`, the Python version of each
//! process NVML lists (attach needs CPython 3.14's `sys.remote_exec`), and whether remote
//! debugging is disabled in the 3.14 ones, where their environment and command line can be
//! read (`PYTHON_DISABLE_REMOTE_DEBUG`, `-X disable-remote-debug`).

use super::processes::PROC_HUNG;
use super::runner::{Lane, Runner};
use super::{euid, root_fix, Check, Group};
use crate::launch::attach::ptrace_scope;
use crate::launch::python::{interpreter, remote_debug, Interpreter, RemoteDebug, REMOTE_EXEC};
use crate::source::procfs::ProcFs;
use std::io::ErrorKind;

/// How much of a process's environment is read.
const MOST_ENVIRON: usize = 256 * 1024;

/// `listed`: NVML's processes, `None` when it listed none at all (not loaded, no GPU).
pub(super) fn start(runner: &mut Runner, listed: Option<Vec<u32>>) {
    runner.spawn((4, 0), move |lane| attach_lane(&lane, listed.as_deref()));
}

fn attach_lane(lane: &Lane, listed: Option<&[u32]>) {
    let step = |check, what: &str| lane.step(Group::Attach, check, None, what, PROC_HUNG);
    step("ptrace_scope", "reading /proc/sys/kernel/yama/ptrace_scope");
    lane.report(ptrace(&ptrace_scope(), euid()));
    // Without NVML's list there is no process to look at.
    let Some(listed) = listed else {
        return;
    };
    step(
        "python_versions",
        "reading /proc/PID/exe and maps of NVML's processes",
    );
    let mut procfs = ProcFs::default();
    if procfs.host_pid_namespace() == Some(false) {
        lane.report(Check::limited(
            Group::Attach,
            "python_versions",
            "in a PID namespace of its own, strata cannot read NVML's processes: their Python versions are unknown",
            "run the container with `--pid=host`, or run strata on the host",
        ));
        return;
    }
    let mut seen = Vec::new();
    let mut hidden = 0;
    for &pid in listed {
        let identity = procfs.identity(pid);
        if identity.hidden {
            hidden += 1;
        }
        if !identity.visible {
            continue;
        }
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"));
        let interpreter = match &exe {
            Ok(exe) => {
                let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok();
                Some(interpreter(exe, maps.as_deref()))
            }
            Err(e) if e.kind() == ErrorKind::PermissionDenied => None,
            // Gone since it was listed.
            Err(_) => continue,
        };
        seen.push(Seen { pid, interpreter });
    }
    lane.report(python_versions(&seen, hidden, euid()));
    let modern: Vec<u32> = seen
        .iter()
        .filter(
            |s| matches!(s.interpreter, Some(Interpreter::CPython(Some(v))) if v >= REMOTE_EXEC),
        )
        .map(|s| s.pid)
        .collect();
    if modern.is_empty() {
        return;
    }
    step(
        "remote_debug",
        "reading /proc/PID/environ and cmdline of the Python 3.14+ processes",
    );
    let verdicts: Vec<(u32, RemoteDebug)> = modern
        .iter()
        .map(|&pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ"))
                .ok()
                .map(|mut e| {
                    e.truncate(MOST_ENVIRON);
                    e
                });
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            (pid, remote_debug(environ.as_deref(), &cmdline))
        })
        .collect();
    lane.report(remote_debug_check(&verdicts, euid()));
}

pub(super) fn ptrace(scope: &str, euid: u32) -> Check {
    const RUN: &str = "`strata run -- CMD` needs no ptrace";
    let root = euid == 0;
    match scope.trim().parse::<u32>() {
        Err(_) => Check::ok(
            Group::Attach,
            "ptrace_scope",
            "no Yama (kernel.yama.ptrace_scope is not there): ptrace needs the same uid or CAP_SYS_PTRACE",
        ),
        Ok(0) => Check::ok(
            Group::Attach,
            "ptrace_scope",
            "0: a process may be traced by any of its own uid's",
        ),
        Ok(1) if root => Check::ok(
            Group::Attach,
            "ptrace_scope",
            "1 (descendants only), which root passes with CAP_SYS_PTRACE",
        ),
        Ok(1) => Check::limited(
            Group::Attach,
            "ptrace_scope",
            "1: only a process's ancestors may trace it, so strata attach as this user reaches none of the jobs it did not start",
            &format!("run strata attach as root, or `sysctl kernel.yama.ptrace_scope=0`; {RUN}"),
        ),
        Ok(2) if root => Check::ok(
            Group::Attach,
            "ptrace_scope",
            "2 (CAP_SYS_PTRACE only), which root has",
        ),
        Ok(2) => Check::limited(
            Group::Attach,
            "ptrace_scope",
            "2: only CAP_SYS_PTRACE may trace: strata attach needs root",
            &format!("run strata attach as root; {RUN}"),
        ),
        Ok(3) => Check::missing(
            Group::Attach,
            "ptrace_scope",
            "3: no process may be traced, not even by root, until a reboot: strata attach cannot work",
            &format!("start jobs under strata run: {RUN}"),
        ),
        Ok(other) => Check::limited(
            Group::Attach,
            "ptrace_scope",
            &format!("{other}: a value this kernel's Yama documents no meaning for"),
            RUN,
        ),
    }
}

/// One of NVML's processes this `/proc` shows; `interpreter` is `None` when its executable
/// cannot be read (another user's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Seen {
    pub(crate) pid: u32,
    pub(crate) interpreter: Option<Interpreter>,
}

pub(super) fn python_versions(seen: &[Seen], hidden: usize, euid: u32) -> Check {
    let mut attachable = Vec::new();
    let mut old = Vec::new();
    let mut unknown = Vec::new();
    let mut unreadable = Vec::new();
    let mut others = 0;
    for s in seen {
        match s.interpreter {
            Some(Interpreter::CPython(Some(v))) if v >= REMOTE_EXEC => {
                attachable.push(format!("PID {} {}.{}", s.pid, v.0, v.1))
            }
            Some(Interpreter::CPython(Some(v))) => {
                old.push(format!("PID {} {}.{}", s.pid, v.0, v.1))
            }
            Some(Interpreter::CPython(None)) => unknown.push(format!("PID {}", s.pid)),
            Some(Interpreter::PyPy) => old.push(format!("PID {} PyPy", s.pid)),
            Some(Interpreter::NotPython) => others += 1,
            None => unreadable.push(format!("PID {}", s.pid)),
        }
    }
    let mut parts = Vec::new();
    if !attachable.is_empty() {
        parts.push(format!(
            "3.14 or later (attach works): {}",
            attachable.join(", ")
        ));
    }
    if !old.is_empty() {
        parts.push(format!(
            "older than 3.14 (no sys.remote_exec): {}",
            old.join(", ")
        ));
    }
    if !unknown.is_empty() {
        parts.push(format!(
            "Python of a version not told by its files: {}",
            unknown.join(", ")
        ));
    }
    if !unreadable.is_empty() {
        parts.push(format!(
            "executable unreadable (another user's): {}",
            unreadable.join(", ")
        ));
    }
    if others > 0 {
        parts.push(format!("{others} not Python"));
    }
    if hidden > 0 {
        parts.push(format!("{hidden} hidden by /proc"));
    }
    if parts.is_empty() {
        return Check::ok(
            Group::Attach,
            "python_versions",
            "NVML lists no process that this /proc shows",
        );
    }
    let detail = format!("of NVML's processes: {}", parts.join("; "));
    let mut fixes = Vec::new();
    if !old.is_empty() || !unknown.is_empty() {
        fixes.push("start those under `strata run -- CMD` (attach needs Python 3.14+)");
    }
    if !unreadable.is_empty() || hidden > 0 {
        fixes.push(root_fix(euid));
    }
    match fixes.is_empty() {
        true => Check::ok(Group::Attach, "python_versions", &detail),
        false => Check::limited(Group::Attach, "python_versions", &detail, &fixes.join("; ")),
    }
}

pub(super) fn remote_debug_check(verdicts: &[(u32, RemoteDebug)], euid: u32) -> Check {
    let mut disabled = Vec::new();
    let mut unsure = Vec::new();
    let mut unknown = Vec::new();
    let mut notes = Vec::new();
    for (pid, verdict) in verdicts {
        match verdict {
            RemoteDebug::Disabled(why) => disabled.push(format!("PID {pid}: {why}")),
            RemoteDebug::Unsure => unsure.push(format!(
                "PID {pid}: PYTHON_DISABLE_REMOTE_DEBUG is set, which -E or -I may make it ignore"
            )),
            RemoteDebug::Unknown => unknown.push(format!("PID {pid}")),
            RemoteDebug::Enabled { note: Some(note) } => {
                notes.push(format!("PID {pid} has {note}"))
            }
            RemoteDebug::Enabled { note: None } => {}
        }
    }
    let count = verdicts.len();
    if disabled.is_empty() && unsure.is_empty() && unknown.is_empty() {
        let mut detail = format!(
            "not disabled in the {count} Python 3.14+ process{} (by PYTHON_DISABLE_REMOTE_DEBUG or -X disable-remote-debug; a build without remote debugging cannot be told from outside)",
            if count == 1 { "" } else { "es" }
        );
        if !notes.is_empty() {
            detail.push_str(&format!("; {}", notes.join("; ")));
        }
        return Check::ok(Group::Attach, "remote_debug", &detail);
    }
    let mut parts = disabled;
    parts.extend(unsure);
    if !unknown.is_empty() {
        parts.push(format!(
            "environment unreadable (another user's): {}",
            unknown.join(", ")
        ));
    }
    parts.extend(notes);
    let mut fixes = Vec::new();
    if parts
        .iter()
        .any(|p| p.contains("PYTHON_DISABLE") || p.contains("disable-remote"))
    {
        fixes.push("restart those without it, or under `strata run -- CMD`, which needs no remote debugging");
    }
    if !unknown.is_empty() {
        fixes.push(root_fix(euid));
    }
    Check::limited(
        Group::Attach,
        "remote_debug",
        &format!("remote debugging: {}", parts.join("; ")),
        &fixes.join("; "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    #[test]
    fn ptrace_scope_limits_users_and_three_stops_everyone() {
        assert_eq!(ptrace("not set (no Yama)", 1000).status, Status::Ok);
        assert_eq!(ptrace("0\n", 1000).status, Status::Ok);
        assert_eq!(ptrace("1", 0).status, Status::Ok);
        assert_eq!(ptrace("1", 1000).status, Status::Limited);
        assert_eq!(ptrace("2", 1000).status, Status::Limited);
        assert_eq!(ptrace("2", 0).status, Status::Ok);
        let three = ptrace("3", 0);
        assert_eq!(three.status, Status::Missing);
        assert!(three
            .fix
            .as_deref()
            .is_some_and(|f| f.contains("strata run")));
    }

    #[test]
    fn older_pythons_and_unreadable_ones_are_limited() {
        let seen = |pid, interpreter| Seen { pid, interpreter };
        let new = seen(1, Some(Interpreter::CPython(Some((3, 14)))));
        assert_eq!(
            python_versions(std::slice::from_ref(&new), 0, 1000).status,
            Status::Ok
        );
        let old = seen(2, Some(Interpreter::CPython(Some((3, 11)))));
        let c = python_versions(&[new.clone(), old], 0, 1000);
        assert_eq!(c.status, Status::Limited);
        assert!(
            c.detail.contains("PID 1 3.14")
                && c.detail
                    .contains("older than 3.14 (no sys.remote_exec): PID 2 3.11"),
            "{}",
            c.detail
        );
        let other = seen(3, Some(Interpreter::NotPython));
        assert_eq!(
            python_versions(&[new.clone(), other], 0, 1000).status,
            Status::Ok
        );
        let c = python_versions(&[seen(4, None)], 0, 1000);
        assert!(c.fix.as_deref().is_some_and(|f| f.contains("root")));
        assert_eq!(python_versions(&[], 0, 1000).status, Status::Ok);
        assert_eq!(python_versions(&[], 2, 1000).status, Status::Limited);
    }

    #[test]
    fn the_remote_debug_line_names_each_process_that_cannot_be_attached() {
        let ok = remote_debug_check(&[(1, RemoteDebug::Enabled { note: None })], 1000);
        assert_eq!(ok.status, Status::Ok);
        let c = remote_debug_check(
            &[
                (1, RemoteDebug::Enabled { note: None }),
                (
                    2,
                    RemoteDebug::Disabled("PYTHON_DISABLE_REMOTE_DEBUG is set"),
                ),
                (3, RemoteDebug::Unknown),
            ],
            1000,
        );
        assert_eq!(c.status, Status::Limited);
        assert!(
            c.detail
                .contains("PID 2: PYTHON_DISABLE_REMOTE_DEBUG is set"),
            "{}",
            c.detail
        );
        assert!(c.detail.contains("unreadable (another user's): PID 3"));
        let fix = c.fix.unwrap_or_default();
        assert!(fix.contains("strata run") && fix.contains("root"), "{fix}");
    }
}

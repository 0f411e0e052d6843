//! `strata attach PID`: starts the agent inside a running Python 3.14+ process with
//! `sys.remote_exec`.
//!
//! The injector is the target's own interpreter (the same file), so versions always match.
//! For a process in another root (a chroot or a container), strata enters its root, mount
//! and PID namespaces first (`nsenter`, as root) and names the process by its own pid there.
//! The agent and a copy of the attach script go into the target's `/tmp/strata-<uid>`, reached
//! through `/proc/PID/root`; the script writes a status file when it has run.

use super::{agent_digest, install_agent, LaunchError, AGENT_FILES};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Why attaching failed: one line, with what to do.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("no process {0} (hint: check the PID with `ps`)")]
    NoProcess(u32),
    #[error("PID {pid} runs {program}, not Python (hint: strata attach works on Python 3.14+ processes; start other jobs under `strata run -- CMD`)")]
    NotPython { pid: u32, program: String },
    #[error("PID {pid} runs Python {version}, which has no sys.remote_exec (hint: attach needs Python 3.14+; start the job under `strata run -- CMD` instead)")]
    TooOld { pid: u32, version: String },
    #[error("Python versions differ between strata's injector and PID {pid}: {detail} (hint: run the injector from the job's own environment)")]
    VersionMismatch { pid: u32, detail: String },
    #[error("ptrace of PID {pid} not permitted: {detail} (hint: attach as the process's own user or as root; kernel.yama.ptrace_scope is {scope})")]
    PtraceDenied {
        pid: u32,
        detail: String,
        scope: String,
    },
    #[error("remote debugging is disabled in PID {pid}: {detail} (hint: it was started with PYTHON_DISABLE_REMOTE_DEBUG or -X disable-remote-debug, or Python was built without it; start the job under `strata run -- CMD`)")]
    RemoteDebugDisabled { pid: u32, detail: String },
    #[error("PID {pid} runs in another root or container (hint: run strata attach as root, which can enter its namespaces)")]
    OtherRoot { pid: u32 },
    #[error("the agent did not start in PID {pid}: {detail} (hint: see PROTOCOL.md; `strata run -- CMD` starts it at launch)")]
    AgentFailed { pid: u32, detail: String },
    #[error("cannot attach to PID {pid}: {detail}")]
    Other { pid: u32, detail: String },
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

/// What is known of the target from `/proc`.
pub(super) struct Target {
    /// Its pid in its own PID namespace.
    pub(super) nspid: u32,
    pub(super) uid: u32,
    pub(super) gid: u32,
    /// Its executable, as a path in its own root.
    pub(super) exe_in_root: PathBuf,
    /// Whether its root is this process's root.
    pub(super) same_root: bool,
}

fn proc_path(pid: u32, tail: &str) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/{tail}"))
}

fn status_field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
}

pub(super) fn inspect(pid: u32) -> Result<Target, AttachError> {
    let status = fs::read_to_string(proc_path(pid, "status")).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => AttachError::NoProcess(pid),
        _ => AttachError::Other {
            pid,
            detail: format!("cannot read /proc/{pid}/status: {e}"),
        },
    })?;
    let ids = |name: &str| -> Option<u32> {
        status_field(&status, name)?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let (Some(uid), Some(gid)) = (ids("Uid:"), ids("Gid:")) else {
        return Err(AttachError::Other {
            pid,
            detail: "its /proc status has no Uid/Gid".into(),
        });
    };
    let nspid = status_field(&status, "NSpid:")
        .and_then(|v| v.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(pid);
    // Reading the exe link takes the same right as ptrace: a refusal here is that refusal.
    let exe = fs::read_link(proc_path(pid, "exe")).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => AttachError::PtraceDenied {
            pid,
            detail: format!("cannot read /proc/{pid}/exe ({e})"),
            scope: ptrace_scope(),
        },
        _ => AttachError::Other {
            pid,
            detail: format!("cannot read /proc/{pid}/exe ({e})"),
        },
    })?;
    if !is_python(&exe) {
        return Err(AttachError::NotPython {
            pid,
            program: crate::text::clean(&exe.display().to_string()).into_owned(),
        });
    }
    let root_of = |p: &Path| fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    let same_root = root_of(&proc_path(pid, "root")) == root_of(Path::new("/"));
    // A chroot's exe reads with the chroot's path in front; a container's, as in its root.
    let exe_in_root = match fs::read_link(proc_path(pid, "root")) {
        Ok(root) if !same_root && root != Path::new("/") => exe
            .strip_prefix(&root)
            .map(|p| Path::new("/").join(p))
            .unwrap_or(exe.clone()),
        _ => exe.clone(),
    };
    Ok(Target {
        nspid,
        uid,
        gid,
        exe_in_root,
        same_root,
    })
}

/// Whether the executable `exe` (where `/proc/PID/exe` points) is a Python interpreter, by
/// its name: `python3.14`, `python3`, `pypy3.10`.
pub(crate) fn is_python(exe: &Path) -> bool {
    let name = exe
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.starts_with("python") || name.starts_with("pypy")
}

/// Python run by the injector: calls `sys.remote_exec` and says what happened as JSON.
fn injector_code(nspid: u32, script: &Path) -> String {
    let script = serde_json::to_string(&script.to_string_lossy()).unwrap_or_default();
    format!(
        r#"import json, sys
out = {{"version": "%d.%d.%d" % sys.version_info[:3]}}
try:
    if not hasattr(sys, "remote_exec"):
        out["error"] = "old"
    else:
        sys.remote_exec({nspid}, {script})
        out["ok"] = True
except PermissionError as e:
    out["error"] = "permission"; out["detail"] = str(e)
except RuntimeError as e:
    out["error"] = "runtime"; out["detail"] = str(e)
except OSError as e:
    out["error"] = "os"; out["errno"] = e.errno; out["detail"] = str(e)
except BaseException as e:
    out["error"] = "other"; out["detail"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
"#
    )
}

/// `kernel.yama.ptrace_scope` as the kernel says it, or that there is no Yama.
pub(crate) fn ptrace_scope() -> String {
    fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "not set (no Yama)".into())
}

/// Maps the injector's report to success or the matching error.
fn judge_injection(pid: u32, report: &serde_json::Value) -> Result<(), AttachError> {
    if report.get("ok").and_then(|v| v.as_bool()) == Some(true) {
        return Ok(());
    }
    let detail = report
        .get("detail")
        .and_then(|d| d.as_str())
        .map(|d| crate::text::clean(d).into_owned())
        .unwrap_or_default();
    let lower = detail.to_lowercase();
    let version = report
        .get("version")
        .and_then(|v| v.as_str())
        .unwrap_or("?")
        .to_string();
    let errno = report.get("errno").and_then(|e| e.as_i64());
    Err(match report.get("error").and_then(|e| e.as_str()) {
        Some("old") => AttachError::TooOld { pid, version },
        Some("permission") => AttachError::PtraceDenied {
            pid,
            detail,
            scope: ptrace_scope(),
        },
        Some("os") if matches!(errno, Some(1) | Some(13)) => AttachError::PtraceDenied {
            pid,
            detail,
            scope: ptrace_scope(),
        },
        Some("runtime") if lower.contains("remote debug") || lower.contains("disable") => {
            AttachError::RemoteDebugDisabled { pid, detail }
        }
        Some("runtime") if lower.contains("version") || lower.contains("mismatch") => {
            AttachError::VersionMismatch { pid, detail }
        }
        _ => AttachError::Other {
            pid,
            detail: if detail.is_empty() {
                format!("the injector said {report}")
            } else {
                detail
            },
        },
    })
}

/// JSON string literal of a path: valid Python too.
fn literal(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

/// Attaches the agent to `pid`. Returns what to tell the user: attached, with its socket, or
/// injected and waiting for the main thread to run Python code again.
pub fn attach(
    pid: u32,
    feed_dir: Option<PathBuf>,
    interval: f64,
    wait: Duration,
) -> Result<String, AttachError> {
    let target = inspect(pid)?;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if !target.same_root && euid != 0 {
        return Err(AttachError::OtherRoot { pid });
    }
    // The target's /tmp, from here: through its root unless it is ours.
    let in_target = format!("/tmp/strata-{}", target.uid);
    let base = if target.same_root {
        PathBuf::from(&in_target)
    } else {
        proc_path(pid, "root").join(in_target.trim_start_matches('/'))
    };
    let agent_here = install_agent(&base, target.uid, target.gid)?;
    let agent_there = Path::new(&in_target).join(format!("agent-{}", agent_digest()));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let nonce = format!("attach-{}-{pid}-{nanos}", std::process::id());
    let script_here = agent_here.join(format!("{nonce}.py"));
    let script_there = agent_there.join(format!("{nonce}.py"));
    let status_here = agent_here.join(format!("{nonce}.status"));
    let status_there = agent_there.join(format!("{nonce}.status"));
    let body = AGENT_FILES
        .iter()
        .find(|(p, _)| p.ends_with("strata_feed/_attach.py"))
        .map(|(_, c)| *c)
        .unwrap_or_default();
    let mut header = format!(
        "STRATA_PACKAGE_DIR = {}\nSTRATA_STATUS_PATH = {}\nSTRATA_FEED_INTERVAL = {interval}\n",
        literal(&agent_there.to_string_lossy()),
        literal(&status_there.to_string_lossy()),
    );
    if let Some(dir) = &feed_dir {
        header.push_str(&format!(
            "STRATA_FEED_DIR = {}\n",
            literal(&dir.to_string_lossy())
        ));
    }
    fs::write(&script_here, format!("{header}{body}")).map_err(|e| AttachError::Other {
        pid,
        detail: format!("cannot write {}: {e}", script_here.display()),
    })?;
    if euid != target.uid {
        std::os::unix::fs::chown(&script_here, Some(target.uid), Some(target.gid)).map_err(
            |e| AttachError::Other {
                pid,
                detail: format!("cannot chown {}: {e}", script_here.display()),
            },
        )?;
    }
    let code = injector_code(target.nspid, &script_there);
    let mut command = if target.same_root {
        let mut c = Command::new(&target.exe_in_root);
        c.arg("-I").arg("-c").arg(&code);
        c
    } else {
        let mut c = Command::new("nsenter");
        c.arg(format!("--target={pid}"))
            .args(["--root", "--mount", "--pid", "--"])
            .arg(&target.exe_in_root)
            .arg("-I")
            .arg("-c")
            .arg(&code);
        c
    };
    let output = command.output().map_err(|e| AttachError::Other {
        pid,
        detail: format!(
            "cannot run the injector {}: {e}",
            target.exe_in_root.display()
        ),
    });
    let output = match output {
        Ok(o) => o,
        Err(e) => {
            let _ = fs::remove_file(&script_here);
            return Err(e);
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Option<serde_json::Value> = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok());
    let Some(report) = report else {
        let _ = fs::remove_file(&script_here);
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(AttachError::Other {
            pid,
            detail: format!(
                "the injector failed ({}): {}",
                output.status,
                crate::text::clean(stderr.lines().last().unwrap_or("no output"))
            ),
        });
    };
    if let Err(e) = judge_injection(pid, &report) {
        let _ = fs::remove_file(&script_here);
        return Err(e);
    }
    let deadline = Instant::now() + wait;
    loop {
        if let Ok(text) = fs::read_to_string(&status_here) {
            let _ = fs::remove_file(&status_here);
            let _ = fs::remove_file(&script_here);
            let status: serde_json::Value =
                serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
            if status.get("ok").and_then(|v| v.as_bool()) == Some(true) {
                let socket = status
                    .get("socket")
                    .and_then(|s| s.as_str())
                    .unwrap_or("its feed dir");
                let already = status.get("already").and_then(|v| v.as_bool()) == Some(true);
                let how = if already {
                    "was already running"
                } else {
                    "started"
                };
                return Ok(crate::text::clean(&format!(
                    "attached to PID {pid}: the allocator feed {how}, at {socket}"
                ))
                .into_owned());
            }
            let detail = status
                .get("error")
                .and_then(|s| s.as_str())
                .unwrap_or("no reason given");
            return Err(AttachError::AgentFailed {
                pid,
                detail: crate::text::clean(detail).into_owned(),
            });
        }
        if Instant::now() >= deadline {
            // The script stays: the target reads it when its main thread runs Python again.
            return Ok(format!(
                "injected into PID {pid}: the agent will start when its main thread next runs Python code (it is blocked in C now: a CUDA call, a sleep or I/O); its feed then appears in strata"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_injector_failure_gets_its_own_line_and_hint() {
        let err = |v: serde_json::Value| judge_injection(7, &v).expect_err("fails").to_string();
        assert!(err(json!({"version": "3.11.7", "error": "old"})).contains("Python 3.11.7"));
        assert!(
            err(json!({"error": "permission", "detail": "Operation not permitted"}))
                .contains("ptrace of PID 7 not permitted")
        );
        assert!(err(json!({"error": "os", "errno": 1, "detail": "x"})).contains("ptrace"));
        assert!(err(json!({"error": "runtime", "detail": "Remote debugging is not enabled in the remote process"}))
            .contains("remote debugging is disabled"));
        assert!(err(
            json!({"error": "runtime", "detail": "Python version mismatch: 3.14 vs 3.15"})
        )
        .contains("versions differ"));
        assert!(judge_injection(7, &json!({"ok": true})).is_ok());
    }

    #[test]
    fn a_process_that_is_not_python_is_refused() {
        let mut child = Command::new("sleep").arg("5").spawn().expect("sleep");
        let err = attach(child.id(), None, 0.5, Duration::from_millis(10))
            .expect_err("not python")
            .to_string();
        let _ = child.kill();
        let _ = child.wait();
        assert!(err.contains("not Python"), "{err}");
        assert!(matches!(
            inspect(4_000_000_000),
            Err(AttachError::NoProcess(_))
        ));
    }
}

//! What `a` in the monitor offers: a process checked before anything is asked (CPython
//! 3.14 or later, remote debugging not disabled, ptrace allowed, its root reachable), then
//! `strata attach` run on a thread of its own, so that the monitor never waits on it. The
//! reasons are `strata attach`'s own, word for word.

use super::attach::{attach, inspect, AttachError};
use super::python::{interpreter, remote_debug, Interpreter, RemoteDebug, REMOTE_EXEC};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// Attaches the agent to processes for the monitor (tests and the demo use another).
pub trait Attacher: Send + std::fmt::Debug {
    /// Whether `pid` looks attachable, and how to name it (`python3.14 train.py`), or why
    /// not, in one line with a hint.
    fn check(&self, pid: u32) -> Result<String, String>;
    /// Starts attaching; the outcome, one line, arrives on the receiver.
    fn start(&self, pid: u32) -> Receiver<Result<String, String>>;
}

/// The real thing: `strata attach PID` with the monitor's feed dir.
#[derive(Debug, Clone)]
pub struct LiveAttacher {
    pub feed_dir: Option<PathBuf>,
    pub interval: f64,
    pub wait: Duration,
}

impl Attacher for LiveAttacher {
    fn check(&self, pid: u32) -> Result<String, String> {
        preflight(pid).map_err(|e| e.to_string())
    }

    fn start(&self, pid: u32) -> Receiver<Result<String, String>> {
        let (tx, rx) = mpsc::channel();
        let this = self.clone();
        let spawned = std::thread::Builder::new()
            .name("strata-attach".into())
            .spawn(move || {
                let outcome =
                    attach(pid, this.feed_dir, this.interval, this.wait).map_err(|e| e.to_string());
                let _ = tx.send(outcome);
            });
        if let Err(e) = spawned {
            let (tx, rx) = mpsc::channel();
            let _ = tx.send(Err(format!("cannot start attaching: {e}")));
            return rx;
        }
        rx
    }
}

/// Never attaches: the demo's processes are simulated, a replay's are in the past.
#[derive(Debug, Clone)]
pub struct NoAttacher(pub &'static str);

impl Attacher for NoAttacher {
    fn check(&self, _pid: u32) -> Result<String, String> {
        Err(self.0.to_string())
    }

    fn start(&self, _pid: u32) -> Receiver<Result<String, String>> {
        let (tx, rx) = mpsc::channel();
        let _ = tx.send(Err(self.0.to_string()));
        rx
    }
}

/// What `/proc` tells before anything is injected: the reasons `strata attach` would give,
/// where they can be known without running the target's interpreter.
pub(crate) fn preflight(pid: u32) -> Result<String, AttachError> {
    let target = inspect(pid)?;
    // SAFETY: geteuid has no preconditions.
    if !target.same_root && unsafe { libc::geteuid() } != 0 {
        return Err(AttachError::OtherRoot { pid });
    }
    let proc = |tail: &str| PathBuf::from(format!("/proc/{pid}/{tail}"));
    let maps = std::fs::read_to_string(proc("maps")).ok();
    let name = target
        .exe_in_root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match interpreter(&target.exe_in_root, maps.as_deref()) {
        Interpreter::NotPython | Interpreter::PyPy => {
            return Err(AttachError::NotPython {
                pid,
                program: crate::text::clean(&target.exe_in_root.display().to_string()).into_owned(),
            })
        }
        Interpreter::CPython(Some(version)) if version < REMOTE_EXEC => {
            return Err(AttachError::TooOld {
                pid,
                version: format!("{}.{}", version.0, version.1),
            })
        }
        Interpreter::CPython(_) => {}
    }
    let cmdline = std::fs::read(proc("cmdline")).unwrap_or_default();
    let environ = std::fs::read(proc("environ")).ok();
    if let RemoteDebug::Disabled(why) = remote_debug(environ.as_deref(), &cmdline) {
        return Err(AttachError::RemoteDebugDisabled {
            pid,
            detail: why.to_string(),
        });
    }
    // What it runs: its script, `-m MODULE` or `-c`.
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .skip(1)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let mut runs = None;
    for (i, arg) in args.iter().enumerate() {
        match arg.as_str() {
            "-c" => runs = Some("-c …".to_string()),
            "-m" => runs = Some(format!("-m {}", args.get(i + 1).map_or("", String::as_str))),
            a if a.starts_with('-') => continue,
            a => runs = Some(a.to_string()),
        }
        break;
    }
    let named = match runs {
        Some(runs) => format!("{name} {runs}"),
        None => name,
    };
    Ok(crate::text::clean(&named).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_process_is_not_python_and_a_missing_one_is_said() {
        let err = preflight(std::process::id()).expect_err("a Rust test binary");
        assert!(err.to_string().contains("not Python"), "{err}");
        let err = preflight(u32::MAX - 1).expect_err("no such process");
        assert!(err.to_string().starts_with("no process"), "{err}");
        assert!(NoAttacher("simulated").check(1).is_err());
    }
}

//! `strata attach PID`: one line with a hint for each way it can fail, and a real attach to a
//! Python 3.14 process whose feed the monitor then finds through the process's root.
//!
//! The 3.14 interpreter lives in a Debian root (`STRATA_PY314_ROOT`, default
//! `/opt/py314-root`, built by `.ci/run` with debootstrap). Without it the tests that need it
//! say so and pass, unless `STRATA_REQUIRE_PY314=1` (set by `.ci/run`) makes them fail.

use crate::common;

use common::feeds::*;
use common::{strata, wait_until, Running, Scratch};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn attach(pid: u32, extra: &[&str]) -> Output {
    Command::new(strata())
        .arg("attach")
        .arg(pid.to_string())
        .args(extra)
        .output()
        .expect("strata attach")
}

fn line_of(output: &Output) -> String {
    let text = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(text.trim_end().lines().count(), 1, "one line: {text}");
    text
}

#[test]
fn a_process_that_does_not_exist_or_is_not_python_is_refused_in_one_line() {
    let missing = attach(4_000_000, &[]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(line_of(&missing).contains("no process 4000000"));
    let mut sleeper = Command::new("sleep").arg("10").spawn().expect("sleep");
    let output = attach(sleeper.id(), &[]);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let text = line_of(&output);
    assert!(
        text.contains("not Python") && text.contains("hint"),
        "{text}"
    );
}

#[test]
fn a_python_older_than_3_14_is_refused_with_the_way_out() {
    let mut old = Command::new("python3")
        .args(["-c", "import time; time.sleep(10)"])
        .spawn()
        .expect("python3");
    // `python3` may be a wrapper that execs the interpreter (a pyenv shim): wait until the
    // PID runs Python, which a loaded machine can take seconds to reach.
    let exe = format!("/proc/{}/exe", old.id());
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !std::fs::read_link(&exe)
        .map(|p| p.to_string_lossy().contains("python"))
        .unwrap_or(false)
    {
        assert!(std::time::Instant::now() < deadline, "python3 never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let output = attach(old.id(), &[]);
    let _ = old.kill();
    let _ = old.wait();
    let text = line_of(&output);
    assert!(text.contains("which has no sys.remote_exec"), "{text}");
    assert!(text.contains("strata run"), "{text}");
}

/// The Debian root with python3.14, when there is one.
fn py314_root() -> Option<PathBuf> {
    let root = std::env::var_os("STRATA_PY314_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/py314-root"));
    let ok = root.join("usr/bin/python3.14").exists();
    if !ok {
        common::skip(
            "STRATA_REQUIRE_PY314",
            &format!(
                "no python3.14 under {} (tests/all makes it with debootstrap)",
                root.display()
            ),
        );
        return None;
    }
    // remote_exec reads /proc/<pid>/maps: the root needs a /proc.
    if !root.join("proc/self").exists() {
        let status = Command::new("mount")
            .args(["--bind", "/proc"])
            .arg(root.join("proc"))
            .status()
            .expect("mount");
        assert!(status.success(), "cannot bind /proc into the 3.14 root");
    }
    Some(root)
}

/// A Python 3.14 process in the root, running `code`; killed on drop.
struct Target {
    _child: Running,
    pid: u32,
}

impl Target {
    fn start(root: &Path, code: &str, env: &[(&str, &str)], user: Option<&str>) -> Target {
        let mut command = Command::new("chroot");
        if let Some(user) = user {
            command.arg(format!("--userspec={user}"));
        }
        let mut child = Running::spawn(
            command
                .arg(root)
                .args(["python3.14", "-c", code])
                .envs(env.iter().copied())
                .env_remove("PYTHONPATH")
                .stdout(Stdio::piped()),
        );
        let pid = announced_pid(&mut child, "up");
        Target { _child: child, pid }
    }
}

const BUSY: &str =
    "import os, time\nprint('up', os.getpid(), flush=True)\nwhile True:\n    time.sleep(0.02)\n";

#[test]
fn attach_starts_the_agent_and_the_monitor_finds_it_through_the_root() {
    let Some(root) = py314_root() else { return };
    let target = Target::start(&root, BUSY, &[], None);
    let output = attach(target.pid, &["--feed-interval", "0.1"]);
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!("attached to PID {}", target.pid)),
        "{stdout}"
    );
    // A second attach finds it running and says so.
    let again = attach(target.pid, &[]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("already running"));
    let scratch = Scratch::new("attach");
    let snap = &snapshot(
        &scratch,
        &one_gpu(vec![holder(target.pid, json!(GIB))], json!(GIB)),
        &[],
    )[0];
    let feed = feed_of(snap, target.pid);
    assert_eq!(feed["found_via"], "process_root", "{feed}");
    assert_eq!(feed["state"]["state"], "connected");
    assert!(feed["hello"]["python"]
        .as_str()
        .is_some_and(|v| v.starts_with("3.14")));
    assert_eq!(
        process_of(snap, target.pid)["feed_status"]["state"],
        "pending",
        "no framework imported: the feed says it waits"
    );
}

#[test]
fn remote_debugging_disabled_in_the_target_is_one_line() {
    let Some(root) = py314_root() else { return };
    let target = Target::start(&root, BUSY, &[("PYTHON_DISABLE_REMOTE_DEBUG", "1")], None);
    let output = attach(target.pid, &[]);
    assert_eq!(output.status.code(), Some(1));
    let text = line_of(&output);
    assert!(
        text.contains("remote debugging is disabled") && text.contains("strata run"),
        "{text}"
    );
}

#[test]
fn a_main_thread_blocked_in_c_gets_the_agent_when_it_resumes() {
    let Some(root) = py314_root() else { return };
    let code = "import os, time\nprint('up', os.getpid(), flush=True)\ntime.sleep(2.5)\nwhile True:\n    time.sleep(0.02)\n";
    let target = Target::start(&root, code, &[], None);
    let output = attach(target.pid, &["--wait", "0.5"]);
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("will start when its main thread next runs Python code"),
        "{stdout}"
    );
    let socket = root.join(format!("tmp/strata-0/{}.sock", target.pid));
    wait_until(Duration::from_secs(10), "the agent after the sleep", || {
        socket.exists()
    });
}

#[test]
fn ptrace_not_permitted_is_one_line_with_the_rule() {
    let Some(root) = py314_root() else { return };
    let target = Target::start(&root, BUSY, &[], Some("65534:65534"));
    let output = Command::new("setpriv")
        .args(["--reuid=1000", "--regid=1000", "--clear-groups"])
        .arg(strata())
        .arg("attach")
        .arg(target.pid.to_string())
        .output()
        .expect("setpriv");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let text = line_of(&output);
    assert!(
        text.contains("ptrace") && text.contains("own user or as root"),
        "{text}"
    );
}

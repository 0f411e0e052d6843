//! `a` in the monitor, in a real pseudo-terminal: on a real Python 3.14 process without a
//! feed (in the Debian sid root, `STRATA_PY314_ROOT`), a confirmation names it, `y` attaches,
//! and the process becomes fed; on an older Python, `a` says why in one line and offers
//! nothing. Without the 3.14 root the first test says so and passes, unless
//! `STRATA_REQUIRE_PY314=1`.

use crate::common;

use common::fake_nvml::{fake_nvml_lib, SCENARIO_ENV};
use common::feeds::*;
use common::tmux::Pane;
use common::{strata, wait_until, Running, Scratch};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn py314_root() -> Option<PathBuf> {
    let root = std::env::var_os("STRATA_PY314_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/py314-root"));
    if !root.join("usr/bin/python3.14").exists() {
        common::skip(
            "STRATA_REQUIRE_PY314",
            &format!(
                "no python3.14 under {} (tests/all makes it with debootstrap)",
                root.display()
            ),
        );
        return None;
    }
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

/// A Python process printing `up PID` then idling; killed on drop.
struct Job {
    _child: Running,
    pid: u32,
}

impl Job {
    fn start(mut command: Command) -> Job {
        let code =
            "import os, time\nprint('up', os.getpid(), flush=True)\nwhile True:\n    time.sleep(0.02)\n";
        let mut child = Running::spawn(
            command
                .args(["-c", code])
                .env_remove("PYTHONPATH")
                .stdout(Stdio::piped()),
        );
        let pid = announced_pid(&mut child, "up");
        Job { _child: child, pid }
    }
}

/// The monitor on the fake NVML listing `pid`, reading feeds as root does (every
/// `/tmp/strata-*` and each process's own root).
fn monitor(scratch: &Scratch, pid: u32) -> String {
    let scenario = one_gpu(vec![holder(pid, json!(GIB))], json!(GIB));
    let path = scenario_file(scratch, &scenario);
    format!(
        "{SCENARIO_ENV}='{}' {} --interval 0.5 --nvml-lib '{}'",
        path.display(),
        strata(),
        fake_nvml_lib().display()
    )
}

#[test]
fn a_confirmed_attach_feeds_a_python_3_14_process() {
    let Some(root) = py314_root() else { return };
    let mut command = Command::new("chroot");
    command.arg(&root).arg("python3.14");
    let job = Job::start(command);
    let scratch = Scratch::new("tui-attach");
    let pane = Pane::start("tui-attach", &monitor(&scratch, job.pid), 140, 40);
    let pid = job.pid.to_string();
    pane.wait_for(&[&pid, "nofeed"], Duration::from_secs(15))
        .unwrap_or_else(|s| panic!("the unfed row is missing:\n{s}"));
    pane.keys(&["a"]);
    let question = format!("Attach the allocator feed to PID {pid} (python3.14 -c");
    pane.wait_for(&[&question, "y/Enter attach"], Duration::from_secs(10))
        .unwrap_or_else(|s| panic!("no confirmation naming the process:\n{s}"));
    pane.keys(&["y"]);
    let attached = format!("attached to PID {pid}");
    pane.wait_for(&[&attached], Duration::from_secs(20))
        .unwrap_or_else(|s| panic!("the outcome is not in the footer:\n{s}"));
    // The agent runs; with no framework imported its feed says so (`no framework`, cut to
    // the STATE column).
    let screen = pane
        .wait_for(&["S no fram"], Duration::from_secs(15))
        .unwrap_or_else(|s| panic!("the row does not show the feed:\n{s}"));
    assert!(!screen.contains("nofeed"), "{screen}");
    pane.quit();
    let socket = root.join(format!("tmp/strata-0/{pid}.sock"));
    assert!(socket.exists() || !Path::new(&format!("/proc/{pid}")).exists());
}

#[test]
fn an_older_python_is_refused_in_one_line_and_nothing_is_offered() {
    let job = Job::start(Command::new("python3"));
    // `python3` may be a shim that execs the interpreter: wait until the pid runs Python.
    let exe = format!("/proc/{}/exe", job.pid);
    wait_until(Duration::from_secs(15), "python3 to run", || {
        std::fs::read_link(&exe).is_ok_and(|p| p.to_string_lossy().contains("python"))
    });
    let scratch = Scratch::new("tui-attach-old");
    let pane = Pane::start("tui-attach-old", &monitor(&scratch, job.pid), 140, 40);
    let pid = job.pid.to_string();
    pane.wait_for(&[&pid, "nofeed"], Duration::from_secs(15))
        .unwrap_or_else(|s| panic!("the unfed row is missing:\n{s}"));
    pane.keys(&["a"]);
    let screen = pane
        .wait_for(
            &["not attached: PID", "which has no sys.remote_exec"],
            Duration::from_secs(10),
        )
        .unwrap_or_else(|s| panic!("no refusal in the footer:\n{s}"));
    assert!(
        !screen.contains("y/Enter attach"),
        "nothing offered:\n{screen}"
    );
    pane.quit();
}

//! `strata run -- CMD`: the exit status and signals pass through, an existing
//! `sitecustomize` still runs, every Python process of a multi-process job gets its own feed,
//! and a job in a container (its own PID and mount namespaces, a private /tmp) is found from
//! the host through its root.

use crate::common;

use common::feeds::*;
use common::{strata, wait_until, Scratch};
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

fn run_cmd(scratch: &Scratch) -> Command {
    let mut c = Command::new(strata());
    c.args(["run", "--feed-interval", "0.1", "--"])
        .env("STRATA_FEED_DIR", scratch.feeds())
        .env("PYTHONDONTWRITEBYTECODE", "1");
    c
}

#[test]
fn the_exit_status_is_the_commands() {
    let scratch = Scratch::new("run-status");
    let status = run_cmd(&scratch)
        .args(["python3", "-c", "import sys; sys.exit(7)"])
        .status()
        .expect("strata run");
    assert_eq!(status.code(), Some(7));
    let status = run_cmd(&scratch)
        .args(["sh", "-c", "exit 3"])
        .status()
        .expect("strata run");
    assert_eq!(status.code(), Some(3), "any command, Python or not");
    let missing = run_cmd(&scratch)
        .arg("no-such-command-strata-test")
        .output()
        .expect("strata run");
    assert_eq!(missing.status.code(), Some(127));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("cannot run no-such-command-strata-test") && stderr.contains("hint"),
        "{stderr}"
    );
}

#[test]
fn signals_reach_the_command() {
    let scratch = Scratch::new("run-signal");
    let code = "import signal, sys, time\n\
                signal.signal(signal.SIGTERM, lambda *a: sys.exit(42))\n\
                print('armed', flush=True)\n\
                time.sleep(30)\n";
    let mut child = run_cmd(&scratch)
        .args(["python3", "-c", code])
        .stdout(Stdio::piped())
        .spawn()
        .expect("strata run");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("armed");
    assert_eq!(line.trim(), "armed");
    // SAFETY: a plain kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().expect("exit");
    assert_eq!(status.code(), Some(42), "the command's handler ran");
}

#[test]
fn an_existing_sitecustomize_still_runs_and_the_agent_starts() {
    let scratch = Scratch::new("run-chain");
    let site = scratch.path("site");
    std::fs::create_dir_all(&site).expect("site dir");
    let marker = scratch.path("theirs-ran");
    std::fs::write(
        site.join("sitecustomize.py"),
        format!(
            "open({:?}, 'w').write('yes')\n",
            marker.display().to_string()
        ),
    )
    .expect("their sitecustomize");
    let output = run_cmd(&scratch)
        .env("PYTHONPATH", &site)
        .args([
            "python3",
            "-c",
            "import os, strata_feed, time\n\
             time.sleep(0.3)\n\
             i = strata_feed.info()\n\
             print(i['running'], i['socket'])",
        ])
        .output()
        .expect("strata run");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.starts_with("True "), "the agent runs: {stdout}");
    assert!(
        stdout.contains(&scratch.feeds().display().to_string()),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&marker).ok().as_deref(),
        Some("yes"),
        "the job's own sitecustomize ran too"
    );
}

/// A launcher (like torchrun) spawns workers; each is a Python process of its own with a
/// feed of its own, matched to the pid NVML lists.
#[test]
fn every_worker_of_a_launched_job_is_fed_and_matched() {
    let scratch = Scratch::new("run-workers");
    let launcher = common::fake_nvml::workspace_root().join("tests/python/jobs/launcher.py");
    let mut child = run_cmd(&scratch)
        .env("PYTHONPATH", pythonpath())
        .arg("python3")
        .arg(launcher)
        .arg("3")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("strata run");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut workers = Vec::new();
    for _ in 0..3 {
        let mut line = String::new();
        stdout.read_line(&mut line).expect("worker line");
        let pid: u32 = line
            .trim()
            .strip_prefix("worker ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{line:?}"));
        workers.push(pid);
    }
    for pid in &workers {
        let socket = scratch.feeds().join(format!("{pid}.sock"));
        wait_until(Duration::from_secs(10), "a worker's socket", || {
            socket.exists()
        });
    }
    let processes = workers.iter().map(|&pid| holder(pid, json!(GIB))).collect();
    let snap = &snapshot(&scratch, &one_gpu(processes, json!(3 * GIB)), &[])[0];
    for &pid in &workers {
        let feed = feed_of(snap, pid);
        assert_eq!(feed["state"]["state"], "connected", "{feed}");
        assert_eq!(feed["hello"]["pid"], pid);
        // The workers never imported a framework: their feeds wait, and say why.
        let p = process_of(snap, pid);
        assert_eq!(p["feed_status"]["state"], "pending", "{p}");
    }
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "go").expect("go");
    drop(stdin);
    assert!(child.wait().expect("exit").success());
}

/// A job in its own PID and mount namespaces with a private /tmp: the monitor on the host
/// finds its socket through /proc/<pid>/root and matches it to the host pid NVML lists.
#[test]
fn a_job_in_a_container_is_found_through_its_root() {
    assert_eq!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() },
        0,
        "unshare needs root (CI runs as root)"
    );
    let scratch = Scratch::new("container");
    // The workspace may itself be under /tmp (a fresh clone): bind it to /mnt first, then
    // give the job a private /tmp of its own.
    let inner = "mount --bind \"$0\" /mnt && mount -t tmpfs tmpfs /tmp && cd /mnt && exec python3 tests/python/jobs/driven.py";
    let mut child = Command::new("unshare")
        .args([
            "--pid",
            "--mount",
            "--fork",
            "--kill-child",
            "--mount-proc",
            "sh",
            "-c",
            inner,
        ])
        .arg(common::fake_nvml::workspace_root())
        .env("PYTHONPATH", "/mnt/tests/python/stubs:/mnt/assets/python")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("STRATA_TEST_START", "yes")
        .env("STRATA_TEST_INTERVAL", "0.1")
        .env_remove("STRATA_FEED_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("unshare");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("ready");
    assert_eq!(line.trim(), "ready 1", "the job is pid 1 of its namespace");
    let mut ask = |statement: &str| {
        writeln!(stdin, "{statement}").expect("stdin");
        let mut answer = String::new();
        stdout.read_line(&mut answer).expect("answer");
        assert_eq!(answer.trim(), "ok", "{statement}");
    };
    ask("import torch");
    ask("torch.cuda.init(); torch._stub.touch(0)");
    ask("live = [torch._stub.allocate(0, 256 << 20) for _ in range(2)]");
    ask("import time; time.sleep(0.4)");
    // The host pid of the job: the unshare's grandchild whose innermost pid is 1.
    let host_pid = find_host_pid(child.id()).expect("the job's host pid");
    let used = CONTEXT_MIB * MIB + 512 * MIB;
    let snap = &snapshot(
        &scratch,
        &one_gpu(vec![holder(host_pid, json!(used))], json!(used)),
        &[],
    )[0];
    let _ = child.kill();
    let _ = child.wait();
    let feed = feed_of(snap, host_pid);
    assert_eq!(feed["found_via"], "process_root", "{feed}");
    assert_eq!(feed["nspid"], 1);
    assert_eq!(feed["hello"]["pid"], 1);
    assert!(feed["socket"]
        .as_str()
        .is_some_and(|s| s.contains(&format!("/proc/{host_pid}/root"))));
    let p = process_of(snap, host_pid);
    assert_eq!(p["feed_status"]["state"], "fresh", "{p}");
    assert_eq!(p["layers"]["live"], 512 * MIB);
}

const CONTEXT_MIB: u64 = 500;

/// The pid, in this namespace, of the descendant of `ancestor` whose innermost pid is 1.
fn find_host_pid(ancestor: u32) -> Option<u32> {
    let mut frontier = vec![ancestor];
    for _ in 0..6 {
        let mut next = Vec::new();
        for pid in frontier {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let innermost = status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .and_then(|v| v.split_whitespace().last().map(str::to_string));
            let levels = status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .map_or(0, |v| v.split_whitespace().count());
            if innermost.as_deref() == Some("1") && levels > 1 {
                return Some(pid);
            }
            let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .unwrap_or_default();
            next.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
        frontier = next;
    }
    None
}

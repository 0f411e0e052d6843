//! Who holds the memory, from `/proc`, under the two arrangements that make a PID NVML lists
//! look gone when it is not:
//! - `hidepid`: a real procfs mounted with `hidepid=2` (or `=1`) in a private mount namespace,
//!   read by strata's NVML source running as another uid. A hidden process is `hidden`, not
//!   gone; an exited one is gone.
//! - a monitor in its own PID namespace (`unshare --pid --mount-proc`): NVML's host pids are
//!   never looked up by number there (pid 1 would be the monitor itself), unless the `/proc` it
//!   reads is the host's.
//!
//! Needs root (CI runs as root) for `unshare`, `mount` and `setpriv`.

// Tests may panic: `unwrap` and `expect` say which of a test's assumptions failed, in its
// helpers too (clippy.toml allows them only in `#[test]` functions and `#[cfg(test)]` code).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::fake_nvml::{fake_nvml_lib, scenario, source_samples, SCENARIO_ENV};
use common::{strata, Running, Scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use strata::sample::NodeSample;

/// The uid and gid the probe runs as.
const NOBODY: &str = "65534";
/// Marks the probe's line among the test harness's output.
const PROBE_LINE: &str = "strata-probe-sample ";

fn assert_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "these tests need root for unshare, mount and setpriv (CI runs as root)"
    );
}

/// A scenario from `template` in `shared`, readable by everyone, each placeholder pid
/// replaced.
fn scenario_in(shared: &Scratch, template: &str, pids: &[(u32, u32)]) -> PathBuf {
    let mut text = std::fs::read_to_string(scenario(template)).expect("template");
    for (placeholder, pid) in pids {
        assert!(
            text.contains(&placeholder.to_string()),
            "{placeholder} in {template}"
        );
        text = text.replace(&placeholder.to_string(), &pid.to_string());
    }
    shared.write(&format!("{template}.json"), text, 0o644)
}

fn sleeper(as_nobody: bool) -> Running {
    let mut command = match as_nobody {
        true => {
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid",
                NOBODY,
                "--regid",
                NOBODY,
                "--clear-groups",
                "sleep",
                "300",
            ]);
            c
        }
        false => {
            let mut c = Command::new("sleep");
            c.arg("300");
            c
        }
    };
    Running::spawn(command.stdin(Stdio::null()))
}

/// A pid that existed and has exited (and been reaped).
fn gone_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("true runs");
    child.wait().expect("reaped");
    child.id()
}

/// Run by the outer test as `nobody` under a `hidepid` procfs (ignored otherwise): one sample
/// of strata's NVML source, printed as JSON on one marked line.
#[test]
#[ignore = "the probe: run by a_pid_proc_hides_is_hidden_not_gone as another uid"]
fn probe() {
    let (Some(lib), Some(file)) = (
        std::env::var_os("STRATA_PROBE_LIB"),
        std::env::var_os(SCENARIO_ENV),
    ) else {
        return;
    };
    let sample = source_samples(Path::new(&lib), Path::new(&file), 1).remove(0);
    println!(
        "{PROBE_LINE}{}",
        serde_json::to_string(&sample).expect("sample is JSON")
    );
}

/// The probe's sample, run as `nobody` with `/proc` remounted with `hidepid=<mode>`.
fn probe_under_hidepid(mode: u32, shared: &Scratch, file: &Path) -> NodeSample {
    let exe = std::env::current_exe().expect("test binary");
    let probe = shared.copy(&exe, "probe");
    let lib = shared.copy(&fake_nvml_lib(), "libnvidia_ml.so");
    let script = format!(
        "mount -t proc -o hidepid={mode} proc /proc && exec setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups \"$0\" probe --exact --ignored --nocapture --test-threads=1"
    );
    let output = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .arg(&probe)
        .env("STRATA_PROBE_LIB", &lib)
        .env(SCENARIO_ENV, file)
        .output()
        .expect("unshare runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "probe under hidepid={mode} failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.split_once(PROBE_LINE).map(|(_, sample)| sample))
        .unwrap_or_else(|| panic!("no sample from the probe:\n{stdout}"));
    serde_json::from_str(line).expect("a NodeSample")
}

#[test]
fn a_pid_proc_hides_is_hidden_not_gone() {
    assert_root();
    let shared = Scratch::shared("hidepid");
    let root_owned = sleeper(false);
    let own = sleeper(true);
    let gone = gone_pid();
    let (hidden_pid, own_pid) = (root_owned.pid(), own.pid());
    let file = scenario_in(
        &shared,
        "hidden_pids",
        &[
            (4_100_001, hidden_pid),
            (4_100_002, gone),
            (4_100_003, own_pid),
        ],
    );
    // hidepid=2: another user's /proc/PID is not there at all (ENOENT), yet kill(pid, 0) finds
    // it (EPERM). hidepid=1: it is there but unreadable (EPERM).
    for mode in [2, 1] {
        let s = probe_under_hidepid(mode, &shared, &file);
        let p = |pid: u32| {
            s.processes
                .iter()
                .find(|p| p.pid == pid)
                .unwrap_or_else(|| panic!("hidepid={mode}: pid {pid} listed: {:?}", s.processes))
        };
        let hidden = p(hidden_pid);
        assert!(
            !hidden.visible && hidden.hidden,
            "hidepid={mode}: {hidden:?}"
        );
        assert!(hidden.command.is_none() && hidden.user.is_none());
        let exited = p(gone);
        assert!(
            !exited.visible && !exited.hidden,
            "hidepid={mode}: {exited:?}"
        );
        let mine = p(own_pid);
        assert!(mine.visible && !mine.hidden, "hidepid={mode}: {mine:?}");
        assert_eq!(mine.command.as_deref(), Some("sleep 300"));
        assert_eq!(
            s.host_pid_namespace,
            Some(true),
            "hidepid={mode}: /proc/1 is hidden, but this is the host's /proc"
        );
    }
}

/// `strata snapshot --json` in new PID and mount namespaces; `mount_proc`: with a /proc of its
/// own, else the host's /proc as it was.
fn snapshot_in_own_pid_namespace(file: &Path, mount_proc: bool) -> Value {
    let mut command = Command::new("unshare");
    command.args(["--pid", "--fork", "--mount"]);
    if mount_proc {
        command.arg("--mount-proc");
    }
    let output = command
        .arg(strata())
        .args(["snapshot", "--json", "--nvml-lib"])
        .arg(fake_nvml_lib())
        .env(SCENARIO_ENV, file)
        .output()
        .expect("unshare runs");
    assert!(
        output.status.success(),
        "strata in its own PID namespace failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON snapshot")
}

fn listed(snapshot: &Value, pid: u32) -> &Value {
    snapshot["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} listed: {snapshot}"))
}

#[test]
fn in_its_own_pid_namespace_strata_names_no_host_pid_by_number() {
    assert_root();
    let shared = Scratch::shared("pidns");
    let host_pid = std::process::id();
    let file = scenario_in(&shared, "container_pids", &[(4_100_004, host_pid)]);
    let s = snapshot_in_own_pid_namespace(&file, true);
    assert_eq!(s["host_pid_namespace"], false);
    // Pid 1 there is strata itself, and the host pid may name anything or nothing: neither is
    // who NVML means.
    for pid in [1, host_pid] {
        let p = listed(&s, pid);
        assert_eq!(p["visible"], false, "{p}");
        for field in ["command", "user", "proc_state", "start_time", "executable"] {
            assert!(p[field].is_null(), "pid {pid} {field}: {p}");
        }
    }
    // With the host's /proc (as with a host /proc mounted in), host pids are looked up.
    let s = snapshot_in_own_pid_namespace(&file, false);
    assert_eq!(s["host_pid_namespace"], true);
    let me = listed(&s, host_pid);
    assert_eq!(me["visible"], true, "{me}");
    assert!(
        me["command"].as_str().is_some_and(|c| !c.is_empty()),
        "{me}"
    );
}

/// A process NVML lists on two GPUs is one process to the host: both its records carry the
/// same host figures (CPU, resident memory, age), read once from its one `stat`.
#[test]
fn a_process_on_two_gpus_has_one_set_of_host_figures() {
    let shared = Scratch::shared("two-gpus");
    let sleeping = sleeper(false);
    let pid = sleeping.pid();
    let file = scenario_in(&shared, "two_gpus", &[(41237, pid), (52001, pid)]);
    let samples = source_samples(&fake_nvml_lib(), &file, 2);
    let last = samples.last().expect("two polls");
    let records: Vec<_> = last.processes.iter().filter(|p| p.pid == pid).collect();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_ne!(records[0].device_uuid, records[1].device_uuid);
    for p in &records {
        assert!(p.visible, "{p:?}");
        assert!(p.host_memory.is_some_and(|m| m > 0), "{p:?}");
        assert!(p.elapsed.is_some(), "{p:?}");
        assert!(p.cpu_percent.is_some(), "seen twice: {p:?}");
        assert_eq!(
            (p.cpu_percent, p.host_memory, p.elapsed),
            (
                records[0].cpu_percent,
                records[0].host_memory,
                records[0].elapsed
            )
        );
    }
}

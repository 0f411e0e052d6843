//! The host side of real processes on the NVML path (the fake library), in `snapshot --json`:
//! CPU %, resident memory and age of a process NVML lists, the node's CPU and memory, the
//! GPU's minor number; and, for a context whose process is gone, the real process that holds
//! the GPU's device file open (an ordinary file in a directory given as `STRATA_DEV_DIR`).

use crate::common;

use common::fake_nvml::{fake_nvml_lib, SCENARIO_ENV};
use common::{strata, Running, Scratch};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One H100 whose compute list holds `pids` (1 GiB each), its minor number `minor`.
fn scenario(dir: &Path, pids: &[u32], minor: Option<u32>) -> PathBuf {
    let processes: Vec<Value> = pids
        .iter()
        .map(|pid| json!({ "pid": pid, "used": 1u64 << 30 }))
        .collect();
    let mut device = json!({
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-cccccccc-0000-4000-8000-000000000000",
        "memory": { "total": 85520809984u64, "reserved": 617611264u64,
                    "used": 8589934592u64, "free": 76313264128u64 },
        "utilization": { "gpu": 50, "memory": 20 },
        "mig_mode": { "current": 0, "pending": 0 },
        "compute_processes": processes,
    });
    if let Some(minor) = minor {
        device["minor_number"] = json!(minor);
    }
    let file = dir.join("scenario.json");
    std::fs::write(&file, json!({ "devices": [device] }).to_string()).expect("scenario");
    file
}

/// `strata snapshot --json --count N --interval 1` on the scenario, each line parsed.
fn snapshots(file: &Path, count: u32, dev_dir: Option<&Path>) -> Vec<Value> {
    let mut command = Command::new(strata());
    command
        .args(["snapshot", "--json", "--interval", "1", "--count"])
        .arg(count.to_string())
        .arg("--nvml-lib")
        .arg(fake_nvml_lib())
        .env(SCENARIO_ENV, file)
        .env_remove("STRATA_DEV_DIR");
    if let Some(dir) = dev_dir {
        command.env("STRATA_DEV_DIR", dir);
    }
    let output = command.output().expect("strata runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect()
}

fn listed(snapshot: &Value, pid: u32) -> &Value {
    snapshot["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} listed: {snapshot}"))
}

/// A busy process NVML lists: no CPU figure at the first sample (a difference needs two),
/// then a busy one; its resident memory and age; the node's CPU and memory; the GPU's minor
/// number as NVML gives it.
#[test]
fn a_listed_process_has_its_host_cpu_memory_and_age() {
    let scratch = Scratch::new("nvml-host");
    let busy = Running(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .stdin(Stdio::null())
            .spawn()
            .expect("sh"),
    );
    let pid = busy.pid();
    let file = scenario(&scratch.dir, &[pid], Some(7));
    let lines = snapshots(&file, 2, None);
    let (first, second) = (&lines[0], &lines[1]);
    assert!(
        listed(first, pid)["cpu_percent"].is_null(),
        "unknown, not 0"
    );
    assert!(first["host_cpu_percent"].is_null(), "unknown, not 0");
    let p = listed(second, pid);
    let cpu = p["cpu_percent"]
        .as_f64()
        .expect("a number at the second sample");
    // Busy, and no more than the one core a shell can use: how busy it reads depends on
    // what else the machine runs (the share itself is held to /proc's counts in
    // source::host's tests). CPU time comes in ticks of 10 ms (USER_HZ): over the time
    // between the two samples, a tick read at either end moves the share by 1 / 100 s of it.
    let between = second["time"].as_f64().expect("time") - first["time"].as_f64().expect("time");
    assert!(between > 0.0, "{between}");
    let resolution = 2.0 * 100.0 * 0.01 / between;
    assert!(
        cpu > 0.0 && cpu <= 100.0 + resolution,
        "a spinning shell is busy on one core (±{resolution:.2} points of tick resolution over {between:.3} s): {p}"
    );
    assert!(p["host_memory"].as_u64().is_some_and(|b| b > 0), "{p}");
    let elapsed = p["elapsed"].as_u64().expect("whole seconds");
    assert!(elapsed <= 30, "{p}");
    let node_cpu = second["host_cpu_percent"].as_f64().expect("node CPU");
    assert!((0.0..=100.0).contains(&node_cpu));
    let total = second["host_memory"]["total"].as_u64().expect("total");
    assert!(second["host_memory"]["used"]
        .as_u64()
        .is_some_and(|u| u <= total));
    assert_eq!(second["gpus"][0]["minor_number"], 7);
    assert!(
        second["device_files"].is_null(),
        "no zombie: nothing searched"
    );
}

/// NVML lists a pid that has exited; a real process holds the GPU's device file open (here an
/// ordinary file named `nvidia0`, `sleep`'s standard input). strata names it with its
/// parent in the sample and, once the zombie is confirmed, in the finding's evidence.
#[test]
fn the_process_holding_a_zombie_contexts_device_file_is_named() {
    let scratch = Scratch::new("nvml-holder");
    let dev = scratch.dir.join("dev");
    std::fs::create_dir_all(&dev).expect("dev dir");
    std::fs::write(dev.join("nvidia0"), b"").expect("device file");
    std::fs::write(dev.join("nvidia1"), b"").expect("another GPU's file");
    // `sleep` holds each file as its standard input, opened before it runs: `spawn` returns
    // once it has exec'd, so its descriptors are final before strata looks.
    let held = |name: &str| std::fs::File::open(dev.join(name)).expect("open");
    let holder = Running(
        Command::new("sleep")
            .arg("300")
            .stdin(held("nvidia0"))
            .spawn()
            .expect("sleep"),
    );
    let bystander = Running(
        Command::new("sleep")
            .arg("300")
            .stdin(held("nvidia1"))
            .spawn()
            .expect("sleep"),
    );
    let mut gone = Command::new("true").spawn().expect("true");
    gone.wait().expect("reaped");
    let gone = gone.id();
    let holder_pid = holder.pid();
    let file = scenario(&scratch.dir, &[gone], None);
    let lines = snapshots(&file, 7, Some(&dev));
    let first = &lines[0];
    let holders = first["device_files"]["holders"]
        .as_array()
        .unwrap_or_else(|| panic!("searched at once: {first}"));
    let found = holders
        .iter()
        .find(|h| h["pid"] == holder_pid)
        .unwrap_or_else(|| panic!("holder {holder_pid} found: {holders:?}"));
    assert_eq!(found["minors"], json!([0]));
    assert_eq!(found["command"], "sleep 300");
    assert_eq!(found["ppid"], std::process::id());
    let last = lines.last().expect("lines");
    let zombie = last["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["kind"] == "zombie_context")
        .unwrap_or_else(|| panic!("a zombie context after 6 s: {last}"));
    assert_eq!(zombie["pid"], gone);
    let named: Vec<&Value> = zombie["evidence"]["holders"]
        .as_array()
        .expect("holders in the evidence")
        .iter()
        .collect();
    assert_eq!(named.len(), 1, "only the holder of nvidia0: {named:?}");
    let named = named[0];
    assert_eq!(named["pid"], holder_pid);
    assert_eq!(named["listed"], false);
    assert_eq!(named["command"], "sleep 300");
    assert_eq!(named["ppid"], std::process::id());
    let me = String::from_utf8_lossy(
        &std::fs::read(format!("/proc/{}/cmdline", std::process::id())).expect("cmdline"),
    )
    .trim_end_matches('\0')
    .replace('\0', " ");
    assert_eq!(named["parent_command"], me.as_str());
    assert!(named["user"].is_string() && named["start_time"].is_u64());
    let message = zombie["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "/dev/nvidia0 is still held open by PID {holder_pid} (sleep 300)"
        )),
        "{message}"
    );
    drop(bystander);
}

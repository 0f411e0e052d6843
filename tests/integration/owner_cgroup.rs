//! The owner of each process, read from real cgroup v2 membership: hierarchies made under
//! the unified cgroup mount with the paths Kubernetes (both drivers, containerd and CRI-O),
//! docker and Slurm make, real `sleep` processes moved into them, listed by the fake NVML;
//! a kubelet-shaped pod log directory given as `STRATA_PODS_DIR`; a launcher through a real
//! process tree; another user's environ. Needs root. Every cgroup made is removed, even when
//! a test fails (its guard moves the processes out, then removes the directories).

use crate::common;

use common::fake_nvml::{fake_nvml_lib, SCENARIO_ENV};
use common::{strata, Scratch};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const GIB: u64 = 1 << 30;
const UID_A: &str = "8d1e2b3c-4a5b-4c6d-8e7f-0a1b2c3d4e5f";
const UID_B: &str = "1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e";
const ID_A: &str = "4f1b9a0c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a";
const ID_B: &str = "0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b";
const ID_C: &str = "c0ffee00a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8";
const ID_D: &str = "d00dfeed0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d";

/// The unified (v2) hierarchy: `/sys/fs/cgroup` on a v2 host, `/sys/fs/cgroup/unified` on a
/// hybrid one.
fn unified_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == "cgroup2")
        .map(|f| PathBuf::from(f[1]))
}

fn need_root() -> PathBuf {
    // SAFETY: geteuid cannot fail.
    assert_eq!(unsafe { libc::geteuid() }, 0, "these tests need root");
    unified_root().expect("a cgroup2 mount")
}

/// Cgroups made for one test, and the processes moved into them: on drop every process is
/// killed and moved back to the root, then every directory made is removed, deepest first.
struct Cgroups {
    root: PathBuf,
    made: Vec<PathBuf>,
    children: Vec<Child>,
}

impl Cgroups {
    fn new() -> Cgroups {
        Cgroups {
            root: need_root(),
            made: Vec::new(),
            children: Vec::new(),
        }
    }

    /// Makes `path` (each missing level) under the unified root.
    fn make(&mut self, path: &str) -> PathBuf {
        let mut dir = self.root.clone();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            dir.push(part);
            if !dir.exists() {
                std::fs::create_dir(&dir)
                    .unwrap_or_else(|e| panic!("cannot make cgroup {}: {e}", dir.display()));
                self.made.push(dir.clone());
            }
        }
        dir
    }

    /// A real `sleep` moved into the cgroup `path`; its pid.
    fn sleeper_in(&mut self, path: &str, env: &[(&str, &str)]) -> u32 {
        let dir = self.make(path);
        let child = Command::new("sleep")
            .arg("600")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep");
        let pid = child.id();
        self.children.push(child);
        std::fs::write(dir.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("cannot move {pid} into {}: {e}", dir.display()));
        pid
    }

    fn adopt(&mut self, child: Child) {
        self.children.push(child);
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = std::fs::write(self.root.join("cgroup.procs"), child.id().to_string());
            let _ = child.kill();
            let _ = child.wait();
        }
        for dir in self.made.iter().rev() {
            // A killed process leaves its cgroup a moment after it is reaped.
            for _ in 0..50 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// One GPU listing `pids`, each holding 1 GiB.
fn scenario(dir: &Path, pids: &[u32]) -> PathBuf {
    let processes: Vec<Value> = pids
        .iter()
        .map(|p| json!({"pid": p, "used": GIB}))
        .collect();
    let used = GIB * pids.len() as u64;
    let scenario = json!({"devices": [{
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-eeeeeeee-0000-4000-8000-000000000000",
        "memory": { "total": 80 * GIB, "reserved": 0, "used": used },
        "mig_mode": "NotSupported",
        "compute_processes": processes,
    }]});
    let path = dir.join("scenario.json");
    std::fs::write(&path, scenario.to_string()).expect("scenario");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    path
}

/// `strata snapshot --json` on the fake NVML, with `STRATA_PODS_DIR`; as `nobody` if asked
/// (the binary and the fake are then copied where `nobody` may run them).
fn snapshot(scratch: &Scratch, scenario: &Path, pods: &Path, as_nobody: bool) -> Value {
    let (binary, lib) = if as_nobody {
        let bin = scratch.copy(Path::new(strata()), "strata");
        let lib = scratch.copy(&fake_nvml_lib(), "libnvidia-ml.so.1");
        (bin, lib)
    } else {
        (PathBuf::from(strata()), fake_nvml_lib())
    };
    let mut command = if as_nobody {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&binary);
        c
    } else {
        Command::new(&binary)
    };
    let feeds = scratch.dir.join("no-feeds");
    let output = command
        .args(["snapshot", "--json", "--nvml-lib"])
        .arg(&lib)
        .arg("--feed-dir")
        .arg(&feeds)
        .env(SCENARIO_ENV, scenario)
        .env("STRATA_PODS_DIR", pods)
        .output()
        .expect("strata runs");
    assert!(
        output.status.success(),
        "strata snapshot failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON sample")
}

fn owner_of(snapshot: &Value, pid: u32) -> Value {
    snapshot["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .find(|p| p["pid"] == pid)
        .map(|p| p["owner"].clone())
        .unwrap_or_else(|| panic!("no process {pid} in {snapshot}"))
}

/// A pod log directory as the kubelet lays it out.
fn pod_logs(scratch: &Scratch) -> PathBuf {
    let pods = scratch.dir.join("log/pods");
    std::fs::create_dir_all(pods.join(format!("train_llama-7b-0_{UID_A}/trainer"))).expect("pod");
    std::fs::create_dir_all(pods.join(format!("serving_t5-3b-0_{UID_B}/t5"))).expect("pod");
    std::fs::create_dir_all(pods.join(format!("serving_t5-3b-0_{UID_B}/sidecar"))).expect("pod");
    let containers = scratch.dir.join("log/containers");
    std::fs::create_dir_all(&containers).expect("containers");
    std::fs::write(
        containers.join(format!("t5-3b-0_serving_t5-{ID_B}.log")),
        "",
    )
    .expect("log");
    pods
}

#[test]
fn pods_containers_and_slurm_steps_are_named_from_real_cgroups() {
    let mut cgroups = Cgroups::new();
    let scratch = Scratch::shared("owner-kinds");
    let pods = pod_logs(&scratch);
    let tag = std::process::id();
    let under_a = UID_A.replace('-', "_");
    // Each test's own top level, so that a run beside another never meets its cgroups.
    let systemd_pod = cgroups.sleeper_in(
        &format!("strata-test-{tag}/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{under_a}.slice/cri-containerd-{ID_A}.scope"),
        &[],
    );
    let cgroupfs_pod = cgroups.sleeper_in(
        &format!("strata-test-{tag}/kubepods/besteffort/pod{UID_B}/{ID_B}"),
        &[],
    );
    let crio = cgroups.sleeper_in(
        &format!("strata-test-{tag}/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/crio-{ID_D}.scope", UID_B.replace('-', "_")),
        &[],
    );
    let docker = cgroups.sleeper_in(
        &format!("strata-test-{tag}/system.slice/docker-{ID_C}.scope"),
        &[],
    );
    let slurm = cgroups.sleeper_in(
        &format!("strata-test-{tag}/system.slice/slurmstepd.scope/job_81234/step_0/user/task_2"),
        &[
            ("SLURM_JOB_ID", "81234"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_JOB_USER", "ana"),
        ],
    );
    let unit = cgroups.sleeper_in(
        &format!("strata-test-{tag}/system.slice/train.service"),
        &[],
    );
    let pids = [systemd_pod, cgroupfs_pod, crio, docker, slurm, unit];
    let file = scenario(&scratch.dir, &pids);
    let snap = snapshot(&scratch, &file, &pods, false);

    let o = owner_of(&snap, systemd_pod);
    assert_eq!(o["kind"], "pod", "{o}");
    assert_eq!(
        (o["namespace"].as_str(), o["pod"].as_str()),
        (Some("train"), Some("llama-7b-0"))
    );
    assert_eq!(o["pod_uid"], UID_A);
    assert_eq!(o["container_id"], ID_A);
    assert_eq!(o["runtime"], "containerd");
    assert_eq!(o["container"], "trainer", "the pod's one container: {o}");
    assert_eq!(o["source"]["pod_uid"], "cgroup");
    assert_eq!(o["source"]["pod"], "pod_logs");

    let o = owner_of(&snap, cgroupfs_pod);
    assert_eq!(
        (o["kind"].as_str(), o["pod"].as_str()),
        (Some("pod"), Some("t5-3b-0")),
        "{o}"
    );
    assert_eq!(o["container"], "t5", "named by the container log link: {o}");
    assert!(
        o["runtime"].is_null(),
        "cgroupfs does not say which runtime: {o}"
    );

    let o = owner_of(&snap, crio);
    assert_eq!(
        (o["kind"].as_str(), o["runtime"].as_str()),
        (Some("pod"), Some("cri-o")),
        "{o}"
    );
    assert_eq!(o["container_id"], ID_D);
    assert!(
        o["container"].is_null(),
        "two containers and no link names this one: {o}"
    );
    assert!(o["unreadable"]["container"].as_str().is_some(), "{o}");

    let o = owner_of(&snap, docker);
    assert_eq!(
        (o["kind"].as_str(), o["runtime"].as_str()),
        (Some("container"), Some("docker")),
        "{o}"
    );
    assert_eq!(o["container_id"], ID_C);
    assert!(
        o["unreadable"]["container"].as_str().is_some(),
        "no docker state here: {o}"
    );

    let o = owner_of(&snap, slurm);
    assert_eq!(o["kind"], "slurm", "{o}");
    assert_eq!(
        (o["slurm_job"].as_str(), o["slurm_step"].as_str()),
        (Some("81234"), Some("0"))
    );
    assert_eq!(o["slurm_task"], "2");
    assert_eq!(o["source"]["slurm_job"], "cgroup");
    assert_eq!(o["slurm_user"], "ana");
    assert_eq!(o["source"]["slurm_user"], "environ");

    let o = owner_of(&snap, unit);
    assert_eq!(
        (o["kind"].as_str(), o["unit"].as_str()),
        (Some("unit"), Some("train.service")),
        "{o}"
    );
}

#[test]
fn the_launcher_is_the_nearest_torchrun_above_the_workers() {
    let mut cgroups = Cgroups::new();
    let scratch = Scratch::shared("owner-launcher");
    // A shell script named torchrun that starts two workers and waits.
    let script = scratch.dir.join("torchrun");
    std::fs::write(
        &script,
        "#!/bin/sh\nsleep 600 &\nsleep 600 &\necho started\nwait\n",
    )
    .expect("script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let launcher = Command::new(&script)
        .stdout(Stdio::piped())
        .spawn()
        .expect("torchrun");
    let launcher_pid = launcher.id();
    cgroups.adopt(launcher);
    let workers = wait_for_children(launcher_pid, 2);
    let file = scenario(&scratch.dir, &workers);
    let snap = snapshot(&scratch, &file, &scratch.dir.join("no-pods"), false);
    for worker in &workers {
        let o = owner_of(&snap, *worker);
        assert_eq!(o["launcher_pid"], launcher_pid, "{o}");
        assert_eq!(o["launcher"], "torchrun");
        assert_eq!(o["source"]["launcher_pid"], "process_tree");
    }
    for worker in workers {
        // SAFETY: signalling a child of our own child, which we own.
        unsafe { libc::kill(worker as i32, libc::SIGKILL) };
    }
}

/// The pids of `parent`'s children once there are `count` of them.
fn wait_for_children(parent: u32, count: usize) -> Vec<u32> {
    let path = format!("/proc/{parent}/task/{parent}/children");
    for _ in 0..250 {
        let pids: Vec<u32> = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.len() >= count {
            return pids;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{parent} did not start {count} children");
}

#[test]
fn another_users_environ_is_unreadable_and_the_cgroup_still_names_the_owner() {
    let mut cgroups = Cgroups::new();
    let scratch = Scratch::shared("owner-nobody");
    let tag = std::process::id();
    let slurm = cgroups.sleeper_in(
        &format!("strata-test-{tag}-n/system.slice/slurmstepd.scope/job_555/step_batch"),
        &[("SLURM_JOB_USER", "ana")],
    );
    let file = scenario(&scratch.dir, &[slurm]);
    let snap = snapshot(&scratch, &file, &scratch.dir.join("no-pods"), true);
    let o = owner_of(&snap, slurm);
    assert_eq!(o["kind"], "slurm", "{o}");
    assert_eq!(
        (o["slurm_job"].as_str(), o["slurm_step"].as_str()),
        (Some("555"), Some("batch"))
    );
    let why = o["unreadable"]["environ"].as_str().unwrap_or_default();
    assert!(why.contains("permission denied"), "{o}");
    assert!(o["slurm_user"].is_null(), "not guessed: {o}");
}

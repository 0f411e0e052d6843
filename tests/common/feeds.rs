//! Real Python jobs running the agent against stub frameworks, a fake NVML scenario listing
//! their pids, and `strata snapshot` reading both: the feed path end to end.

use super::fake_nvml::{fake_nvml_lib, workspace_root, SCENARIO_ENV};
use super::{strata, wait_until, Running, Scratch};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;
/// The stub torch's default device, as `get_device_properties(0).uuid` gives it.
pub const STUB_UUID: &str = "5f3c2a1e-8b7d-4c6e-9a10-2d4f6b8e0c31";
pub const STUB_PCI: &str = "00000000:18:00.0";
pub const H100_TOTAL: u64 = 85_520_809_984;

/// `tests/python/stubs:assets/python`: the stub frameworks and the agent.
pub fn pythonpath() -> String {
    let root = workspace_root();
    format!(
        "{}:{}",
        root.join("tests/python/stubs").display(),
        root.join("assets/python").display()
    )
}

/// A fake `libcuda.so.1` (for the JAX and CuPy stubs' identity calls), built once.
pub fn fake_libcuda_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = workspace_root().join("target").join("fake-cuda");
        std::fs::create_dir_all(&dir).expect("fake-cuda dir");
        let lib = dir.join("libcuda.so.1");
        let temporary = dir.join(format!("libcuda.so.1.{}", std::process::id()));
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o"])
            .arg(&temporary)
            .arg(workspace_root().join("tests/python/fake_libcuda.c"))
            .status()
            .expect("cc must be installed to build the fake libcuda");
        assert!(status.success(), "building the fake libcuda failed");
        std::fs::rename(&temporary, &lib).expect("install fake libcuda");
        dir
    })
    .clone()
}

/// A Python job driven line by line (`tests/python/jobs/driven.py`).
pub struct Job {
    pub child: Running,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The pid the job reports (its own namespace's).
    pub pid: u32,
}

impl Job {
    /// Starts the driven job with the agent (`STRATA_TEST_START=yes`), or under `strata run`
    /// when `under_run` (the `sitecustomize` starts the agent).
    pub fn start(feed_dir: &Path, env: &[(&str, String)], under_run: bool) -> Job {
        let script = workspace_root().join("tests/python/jobs/driven.py");
        let mut command = if under_run {
            let mut c = Command::new(strata());
            c.args(["run", "--feed-interval", "0.1", "--"])
                .arg("python3")
                .arg(&script)
                .env("STRATA_TEST_START", "no");
            c
        } else {
            let mut c = Command::new("python3");
            c.arg(&script)
                .env("STRATA_TEST_START", "yes")
                .env("STRATA_TEST_INTERVAL", "0.1");
            c
        };
        command
            .env("PYTHONPATH", pythonpath())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("STRATA_FEED_DIR", feed_dir)
            .envs(env.iter().map(|(k, v)| (k.to_string(), v.clone())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = Running::spawn(&mut command);
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("job says ready");
        let pid = line
            .strip_prefix("ready ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("job did not start: {line:?}"));
        Job {
            child,
            stdin,
            stdout,
            pid,
        }
    }

    /// Runs one statement in the job; panics with the job's error.
    pub fn run(&mut self, statement: &str) {
        let answer = self.ask(statement);
        assert_eq!(answer, "ok", "{statement}: {answer}");
    }

    /// Evaluates an expression in the job, as JSON.
    pub fn eval(&mut self, expression: &str) -> Value {
        let answer = self.ask(&format!("={expression}"));
        let json = answer
            .strip_prefix("ok ")
            .unwrap_or_else(|| panic!("{expression}: {answer}"));
        serde_json::from_str(json).expect("json")
    }

    fn ask(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").expect("job stdin");
        self.stdin.flush().expect("flush");
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).expect("job answers");
        answer.trim_end().to_string()
    }

    /// Lets the agent (sampling every 0.1 s in these tests) take a few samples of the state
    /// the job is in now, as it would in a job that runs for longer than a test.
    pub fn steady(&mut self) {
        self.run("import time; time.sleep(0.4)");
    }

    /// The torch stub's statistic of device 0.
    pub fn torch_stat(&mut self, key: &str) -> u64 {
        self.eval(&format!("torch.cuda.memory_stats(0)[{key:?}]"))
            .as_u64()
            .unwrap_or_else(|| panic!("{key}"))
    }

    /// Waits until the agent's socket is there.
    pub fn wait_for_socket(&self, feed_dir: &Path) {
        let socket = feed_dir.join(format!("{}.sock", self.pid));
        wait_until(Duration::from_secs(10), "the agent's socket", || {
            socket.exists()
        });
    }
}

/// One process of a scenario: pid and NVML used (a number, or an array by poll).
pub fn holder(pid: u32, used: Value) -> Value {
    json!({ "pid": pid, "used": used })
}

/// A one-GPU scenario (the stub's H100) with these compute processes.
pub fn one_gpu(processes: Vec<Value>, used: Value) -> Value {
    json!({
        "devices": [{
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": format!("GPU-{STUB_UUID}"),
            "pci_bus_id": STUB_PCI,
            "memory": { "total": H100_TOTAL, "reserved": 536870912u64, "used": used },
            "utilization": { "gpu": 90, "memory": 40 },
            "mig_mode": "NotSupported",
            "compute_processes": processes,
        }]
    })
}

/// Writes `scenario` as this test's fake NVML scenario; returns its path.
pub fn scenario_file(scratch: &Scratch, scenario: &Value) -> PathBuf {
    let path = scratch.path("scenario.json");
    std::fs::write(&path, scenario.to_string()).expect("scenario");
    path
}

/// `strata snapshot --json` on the fake NVML with the scenario at `scenario_path`, reading
/// feeds from `feed_dir`; more arguments to add, output to collect.
pub fn snapshot_command(scenario_path: &Path, feed_dir: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(strata());
    command
        .args(["snapshot", "--json", "--nvml-lib"])
        .arg(fake_nvml_lib())
        .arg("--feed-dir")
        .arg(feed_dir)
        .args(extra)
        .env(SCENARIO_ENV, scenario_path);
    command
}

/// The monitor's full-screen command line on the same node, for a tmux pane.
pub fn monitor_command_line(scenario_path: &Path, feed_dir: &Path) -> String {
    format!(
        "{SCENARIO_ENV}='{}' {} --interval 0.5 --nvml-lib '{}' --feed-dir '{}'",
        scenario_path.display(),
        strata(),
        fake_nvml_lib().display(),
        feed_dir.display()
    )
}

/// `strata snapshot --json` with the fake NVML on `scenario` and feeds from the scratch's
/// feed dir: one JSON object per sample.
pub fn snapshot(scratch: &Scratch, scenario: &Value, extra: &[&str]) -> Vec<Value> {
    let path = scenario_file(scratch, scenario);
    let output = snapshot_command(&path, &scratch.feeds(), extra)
        .output()
        .expect("strata runs");
    assert!(
        output.status.success(),
        "strata snapshot failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

/// The first sample of `strata snapshot --json` once every process of `pids` is [`paired`].
/// A snapshot waits a moment for each feed to sample past NVML's reading; on a loaded machine
/// an agent's tick can miss it, and that feed is then rightly not paired this instant (its
/// context still `unsplit`). Snapshots are taken again until the pairing, the event the test
/// needs (60 s at most, for a test that would otherwise hang).
pub fn snapshot_fed(scratch: &Scratch, scenario: &Value, extra: &[&str], pids: &[u32]) -> Value {
    let mut last = Value::Null;
    super::wait_until(Duration::from_secs(60), "every feed paired", || {
        last = snapshot(scratch, scenario, extra).swap_remove(0);
        pids.iter().all(|pid| paired(&process_of(&last, *pid)))
    });
    last
}

/// Whether a process of a snapshot has its feed combined with NVML's reading (`fresh`) and,
/// where its allocator reports a pool, its context split from a reading the feed's samples
/// bracket (anything but `unsplit`). A feed can be fresh without the pairing: its latest
/// sample came before NVML's reading.
pub fn paired(process: &Value) -> bool {
    process["feed_status"]["state"] == "fresh" && process["context_source"] != "unsplit"
}

/// Reads a child's first line, `<word> <pid>` (`ready 4242`, `up 4242`): the pid.
pub fn announced_pid(child: &mut Child, word: &str) -> u32 {
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut line)
        .expect("the child's first line");
    line.trim()
        .strip_prefix(word)
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("expected `{word} PID`, got {line:?}"))
}

/// The process entry of `pid` in a snapshot.
pub fn process_of(snapshot: &Value, pid: u32) -> Value {
    snapshot["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .find(|p| p["pid"] == pid)
        .cloned()
        .unwrap_or_else(|| panic!("no process {pid} in {snapshot}"))
}

/// The feed record whose kernel pid is `pid`.
pub fn feed_of(snapshot: &Value, pid: u32) -> Value {
    snapshot["feeds"]
        .as_array()
        .expect("feeds")
        .iter()
        .find(|f| f["peer"]["pid"] == pid)
        .cloned()
        .unwrap_or_else(|| panic!("no feed of {pid} in {}", snapshot["feeds"]))
}

/// The kinds of the snapshot's findings.
pub fn finding_kinds(snapshot: &Value) -> Vec<String> {
    snapshot["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["kind"].as_str().map(str::to_string))
        .collect()
}

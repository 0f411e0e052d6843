//! Allocation sites end to end: a job (the recording torch stub) that leaks from one line of
//! its own file, under `strata run`; `strata sites` asks its agent for a window and names that line with what it
//! grew; the monitor's `w` asks the same agent and shows the window it runs.

use crate::common;

use common::feeds::*;
use common::tmux::Pane;
use common::{strata, Scratch};
use serde_json::{json, Value};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The job's own module: one line keeps what it allocates, another frees what it takes.
const LEAKY: &str = "\
import torch

kept = []


def leak(n):
    for _ in range(n):
        kept.append(torch._stub.allocate(0, 1 << 20))  # line 8: the leak


def churn(n):
    for _ in range(n):
        h = torch._stub.allocate(0, 4 << 20)
        torch._stub.free(h)
";

/// The leaking job, its agent started by `strata run` (`under_run`) or by the job itself.
fn leaky_job(scratch: &Scratch, under_run: bool) -> Job {
    let dir = scratch.path("job");
    std::fs::create_dir_all(&dir).expect("job dir");
    std::fs::write(dir.join("leaky.py"), LEAKY).expect("leaky.py");
    let mut job = Job::start(&scratch.feeds(), &[], under_run);
    job.run("import torch");
    job.run("torch.cuda.init(); torch._stub.touch(0)");
    job.run(&format!(
        "import sys; sys.path.insert(0, {:?}); import leaky",
        dir.display().to_string()
    ));
    job.run("leaky.leak(4)");
    job.steady();
    job.wait_for_socket(&scratch.feeds());
    job
}

#[test]
fn strata_sites_names_the_line_that_leaks_and_what_it_grew() {
    let scratch = Scratch::new("sites-cli");
    let mut job = leaky_job(&scratch, true);
    let mut sites = Command::new(strata())
        .args([
            "sites",
            &job.pid.to_string(),
            "--seconds",
            "3",
            "--json",
            "--feed-dir",
        ])
        .arg(scratch.feeds())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("strata sites");
    // The window runs once the agent says so on strata's stderr: allocate during it.
    let mut stderr = sites.stderr.take().expect("stderr");
    let mut said = Vec::new();
    let mut byte = [0u8; 1];
    while !said.ends_with(b"\n") {
        match stderr.read(&mut byte) {
            Ok(1) => said.push(byte[0]),
            _ => break,
        }
    }
    let said = String::from_utf8_lossy(&said).to_string();
    assert!(
        said.contains("recording the allocator's history for 3 s"),
        "{said}"
    );
    job.run("leaky.leak(12); leaky.churn(20)");
    let out = sites.wait_with_output().expect("strata sites ends");
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(report["state"], "done", "{report}");
    assert_eq!(report["history"], "agent");
    let device = &report["devices"][0];
    let top = &device["growth"][0];
    let site = top["site"].as_str().expect("a site");
    assert!(site.ends_with("leaky.py:8 in leak"), "{report}");
    assert_eq!(top["bytes"], json!(12u64 << 20), "{report}");
    assert_eq!(
        (top["allocs"].as_u64(), top["frees"].as_u64()),
        (Some(12), Some(0))
    );
    // The churn grew nothing: allocated and freed in the window.
    assert!(
        device["growth"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| !g["site"].as_str().unwrap().contains("in churn")),
        "{report}"
    );
    // Live: the 16 MiB the leak holds, the 4 allocated before the window without a site.
    assert_eq!(device["live_unattributed"], json!(4u64 << 20), "{report}");
    assert_eq!(
        job.eval("torch._C._cuda_isHistoryEnabled()"),
        json!(false),
        "history put back off"
    );

    // Text: the same site, and a second window while one runs is refused in one line.
    let mut first = Command::new(strata())
        .args([
            "sites",
            &job.pid.to_string(),
            "--seconds",
            "30",
            "--feed-dir",
        ])
        .arg(scratch.feeds())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("strata sites");
    let mut err = first.stderr.take().expect("stderr");
    let mut b = [0u8; 1];
    while matches!(err.read(&mut b), Ok(1)) && b[0] != b'\n' {}
    let second = Command::new(strata())
        .args(["sites", &job.pid.to_string(), "--feed-dir"])
        .arg(scratch.feeds())
        .output()
        .expect("strata sites");
    let refused = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{refused}");
    assert!(
        refused.contains("already running") && refused.lines().count() == 1,
        "{refused}"
    );
    let _ = first.kill();
    let _ = first.wait();
}

#[test]
fn w_in_the_monitor_asks_the_agent_and_shows_its_window() {
    let scratch = Scratch::new("sites-tui");
    let job = leaky_job(&scratch, false);
    let used = 4 * MIB + 2 * MIB + GIB;
    let scenario = one_gpu(vec![holder(job.pid, json!(used))], json!(used));
    let command = monitor_command_line(&scenario_file(&scratch, &scenario), &scratch.feeds());
    let pane = Pane::start("sites-tui", &command, 120, 40);
    let pid = job.pid.to_string();
    pane.wait_for(&[&pid, "S fed"], Duration::from_secs(15))
        .unwrap_or_else(|s| panic!("the fed row is missing:\n{s}"));
    pane.keys(&["w"]);
    pane.wait_for(
        &[
            &format!("Allocation sites · PID {pid}"),
            "Recording the allocator's history (Python stacks)",
        ],
        Duration::from_secs(15),
    )
    .unwrap_or_else(|s| panic!("the window is not shown running:\n{s}"));
    // Again while it runs: refused here, in the footer, never asked twice.
    pane.keys(&["w"]);
    pane.wait_for(
        &["sites: a sites window is already running"],
        Duration::from_secs(10),
    )
    .unwrap_or_else(|s| panic!("a second window was not refused:\n{s}"));
    pane.keys(&["Escape", "q"]);
    let (exit, cooked) = pane
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("did not quit:\n{s}"));
    assert_eq!(exit, "EXIT=0");
    assert!(cooked, "terminal left raw");
}

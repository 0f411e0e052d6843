//! The CUDA context the agent reports, end to end: a job under `strata run` warms up while
//! the fake NVML (on its `LD_LIBRARY_PATH`) lists it; the agent reads its own usage right
//! after CUDA init; a monitor opened later, when NVML's figure holds the pool and memory
//! outside it too, splits the context and the memory outside the pool exactly.

use crate::common;

use common::fake_nvml::{fake_nvml_lib, fake_nvml_lib_dir, SCENARIO_ENV};
use common::feeds::*;
use common::snapshot::assert_layers_add_up;
use common::{strata, Scratch};
use serde_json::{json, Value};

const CONTEXT: u64 = 530 * MIB;
/// NCCL-like memory outside the pool when the monitor opens, growing 100 MiB a poll.
const OUTSIDE: u64 = 700 * MIB;

/// `actual` within 5 % of `truth`.
fn within_5_percent(actual: &Value, truth: u64, what: &str) {
    let actual = actual
        .as_u64()
        .unwrap_or_else(|| panic!("{what} is {actual}"));
    let error = actual.abs_diff(truth) as f64 / truth as f64;
    assert!(
        error <= 0.05,
        "{what}: {actual} is {:.1} % off the truth {truth}",
        error * 100.0
    );
}

#[test]
fn a_monitor_opened_after_warm_up_shows_the_context_the_agent_reported() {
    let scratch = Scratch::new("reported");
    // The fake re-reads its scenario at every nvmlInit: the job's agent reads it at CUDA
    // init, the monitor much later, each seeing the node as it is then.
    let nvml = scratch.path("nvml.json");
    let env = [
        ("LD_LIBRARY_PATH", fake_nvml_lib_dir().display().to_string()),
        (SCENARIO_ENV, nvml.display().to_string()),
    ];
    let mut job = Job::start(&scratch.feeds(), &env, true);
    let at_init = one_gpu(vec![holder(job.pid, json!(CONTEXT))], json!(CONTEXT));
    std::fs::write(&nvml, at_init.to_string()).expect("scenario");
    job.run("import torch");
    job.run("torch.cuda.init(); torch._stub.touch(0)");
    job.steady();
    job.run("live = [torch._stub.allocate(0, 256 << 20) for _ in range(4)]");
    job.run("torch._stub.free(torch._stub.allocate(0, 512 << 20))");
    job.steady();
    job.wait_for_socket(&scratch.feeds());
    let reserved = job.torch_stat("reserved_bytes.all.current");

    // Later: NVML's figure is the context, the pool and memory outside it, growing per poll.
    let used: Vec<u64> = (0..4)
        .map(|poll| CONTEXT + reserved + OUTSIDE + poll * 100 * MIB)
        .collect();
    let later = one_gpu(vec![holder(job.pid, json!(used))], json!(used));
    std::fs::write(&nvml, later.to_string()).expect("scenario");
    let output = snapshot_command(
        &nvml,
        &scratch.feeds(),
        &["--count", "3", "--interval", "0.3"],
    )
    .output()
    .expect("strata runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let samples: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(samples.len(), 3);
    let hello = &feed_of(&samples[0], job.pid)["hello"];
    let reported = &hello["devices"][0]["context"];
    assert_eq!(reported["bytes"], CONTEXT, "{hello}");
    assert_eq!(reported["reserved"], 0);
    assert_eq!(reported["method"], "nvml_process_used");
    for snap in &samples {
        let p = process_of(snap, job.pid);
        assert_eq!(p["feed_status"]["state"], "fresh", "{p}");
        assert_eq!(p["context_source"], "reported", "{p}");
        assert_eq!(p["bounds"], json!({}), "exact, no bound marks: {p}");
        let truth_outside = p["used"].as_u64().expect("used") - CONTEXT - reserved;
        within_5_percent(&p["layers"]["context"], CONTEXT, "context");
        within_5_percent(&p["layers"]["outside_pool"], truth_outside, "outside_pool");
        let gpu = &snap["gpus"][0];
        assert_eq!(gpu["context_source"], "reported", "{gpu}");
        assert_eq!(gpu["bounds"], json!({}), "{gpu}");
        assert_layers_add_up(snap, false);
    }

    // The text view marks no bound either.
    let text = std::process::Command::new(strata())
        .args(["snapshot", "--nvml-lib"])
        .arg(fake_nvml_lib())
        .arg("--feed-dir")
        .arg(scratch.feeds())
        .env(SCENARIO_ENV, &nvml)
        .output()
        .expect("strata runs");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(!text.contains('≥') && !text.contains('≤'), "{text}");
}

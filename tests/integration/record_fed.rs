//! `strata record` on the real NVML code path (the fake libnvidia-ml, `--nvml-lib`) with a
//! real allocator feed (a Python job with the agent and the torch stub): the recording holds
//! NVML's readings and the feed's, and the layers recomputed from it split the job as the
//! monitor would.

use crate::common;

use common::fake_nvml::{fake_nvml_lib, SCENARIO_ENV};
use common::feeds::*;
use common::{strata, Scratch};
use serde_json::json;
use std::io::BufRead;
use std::process::Command;
use strata::pipeline::Pipeline;
use strata::sample::NodeSample;

const CONTEXT: u64 = 500 * MIB;
const OUTSIDE: u64 = 300 * MIB;

#[test]
fn recording_from_nvml_with_a_feed_keeps_both_and_their_layers() {
    let scratch = Scratch::new("record-fed");
    let mut job = Job::start(&scratch.feeds(), &[], false);
    job.run("import torch");
    job.run("torch.cuda.init(); torch._stub.touch(0)");
    job.run("live = [torch._stub.allocate(0, 256 << 20) for _ in range(4)]");
    let allocated = job.torch_stat("allocated_bytes.all.current");
    let reserved = job.torch_stat("reserved_bytes.all.current");
    job.steady();
    job.wait_for_socket(&scratch.feeds());
    let used = CONTEXT + OUTSIDE + reserved;
    let scenario = one_gpu(vec![holder(job.pid, json!(used))], json!(used));
    let path = scenario_file(&scratch, &scenario);
    let file = scratch.path("fed.jsonl.zst");
    let out = Command::new(strata())
        .args([
            "record",
            "--interval",
            "0.2",
            "--duration",
            "3s",
            "--nvml-lib",
        ])
        .arg(fake_nvml_lib())
        .arg("--feed-dir")
        .arg(scratch.feeds())
        .arg(&file)
        .env(SCENARIO_ENV, &path)
        .output()
        .expect("strata record");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("recorded "), "{stderr}");

    let (read, cut) = strata::recording::open(&file).expect("open");
    assert!(!cut.happened());
    let samples: Vec<NodeSample> = read
        .lines()
        .map(|l| serde_json::from_str(&l.expect("line")).expect("a sample"))
        .collect();
    assert!(
        samples.len() >= 8,
        "{} samples in 3 s at 0.2 s",
        samples.len()
    );
    let last = samples.last().expect("a sample");
    assert_eq!(last.gpus.len(), 1);
    assert_eq!(last.gpus[0].memory.map(|m| m.used), Some(used));
    assert!(
        last.feeds
            .iter()
            .any(|f| f.pid() == Some(job.pid) && f.is_trusted()),
        "the job's feed is in the recording: {:?}",
        last.feeds
    );
    // Recomputed from the raw fields, as analyze and replay do: the job's live tensors are
    // the stub's allocated bytes, its pool the stub's reserved.
    let mut pipeline = Pipeline::new(None);
    let mut observed = None;
    for sample in samples {
        observed = Some(pipeline.ingest(sample));
    }
    let observed = observed.expect("observed");
    let at = observed
        .sample
        .processes
        .iter()
        .position(|p| p.pid == job.pid)
        .expect("the job is listed");
    let layers = &observed.account.processes[at].layers;
    assert_eq!(layers.live, Some(allocated), "{layers:?}");
    let pool = [layers.live, layers.fragmented, layers.cached]
        .iter()
        .map(|l| l.unwrap_or(0))
        .sum::<u64>();
    assert_eq!(pool, reserved, "{layers:?}");
}

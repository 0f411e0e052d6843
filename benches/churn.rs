//! Process churn: a node whose GPU processes come and go, through the whole pipeline (attach,
//! account, record, detect), sample by sample, fed sample times rather than wall time, so an
//! hour at 1 s replays in seconds.
//!
//! The node: 8 GPUs, 16 processes that stay, and `--rate` new PIDs a second (default 10) that
//! each live `--life` seconds (default 2), spread over the GPUs, each with NVML's used and SM
//! utilisation. Every `--every` seconds of sample time (default 600) it prints the series held,
//! the history's estimate of its own bytes, and this process's resident memory; at the end,
//! the peak resident memory and the history's budget figures.
//!
//! Run: `cargo bench --bench churn` (an hour at 1 s; `-- --hours H --interval S --rate N
//! --life S` to change it). Target: 10 new PIDs a second for an hour at 1 s stays under
//! 64 MiB resident.

// A benchmark may panic: `expect` says which of its assumptions failed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;
use strata::fixtures::{gpu, memory, process, GIB, MIB};
use strata::pipeline::Pipeline;
use strata::sample::NodeSample;

const T0: f64 = 1_767_225_600.0;
const GPUS: u32 = 8;
const STAYING: u32 = 16;

/// A GPU UUID as NVML spells it (40 characters).
fn uuid(g: u32) -> String {
    format!("GPU-5f3c2a1e-8b7d-4c6e-9a10-{g:012x}")
}

struct Churn {
    interval: f64,
    rate: f64,
    life: f64,
}

impl Churn {
    /// The node at sample `k`: the staying processes, and every churned process alive then
    /// (the `n`-th starts at `n / rate` seconds and lives `life`).
    fn sample(&self, k: u64) -> NodeSample {
        let t = k as f64 * self.interval;
        let mut sample = strata::fixtures::node();
        sample.time = T0 + t;
        sample.interval = self.interval;
        sample.host = "churn-node".into();
        let mut used_on = vec![0u64; GPUS as usize];
        let mut add = |sample: &mut NodeSample, pid: u32, start: u64, used: u64| {
            let g = pid % GPUS;
            let mut p = process(pid, &uuid(g), Some(used));
            p.start_time = Some(start);
            p.sm_util = Some(pid % 100);
            p.command = Some(format!("python worker.py --task {pid}"));
            used_on[g as usize] += used;
            sample.processes.push(p);
        };
        for i in 0..STAYING {
            add(&mut sample, 1000 + i, 1, 2 * GIB);
        }
        let first = ((t - self.life) * self.rate).ceil().max(0.0) as u64;
        let last = (t * self.rate).floor() as u64;
        for n in first..=last {
            let born = n as f64 / self.rate;
            if born > t || t >= born + self.life {
                continue;
            }
            // PIDs as a busy node hands them out: rising, wrapping below the kernel's maximum.
            let pid = 100_000 + (n % 3_000_000) as u32;
            add(&mut sample, pid, 10 * n + 7, 300 * MIB + (n % 64) * MIB);
        }
        for g in 0..GPUS {
            let mut device = gpu(g, memory(80 * GIB, used_on[g as usize] + 600 * MIB));
            device.uuid = uuid(g);
            sample.gpus.push(device);
        }
        sample
    }
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str, default: f64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| v.parse().expect("a number"))
    };
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then a short run.
    let hours = if args.iter().any(|a| a == "--bench") {
        value("--hours", 1.0)
    } else {
        0.02
    };
    let churn = Churn {
        interval: value("--interval", 1.0),
        rate: value("--rate", 10.0),
        life: value("--life", 2.0),
    };
    let every = value("--every", 600.0);
    let samples = (hours * 3600.0 / churn.interval) as u64;
    let per_report = ((every / churn.interval) as u64).max(1);
    let mut pipeline = Pipeline::new(None);
    let rss_start = status_kib("VmRSS:").unwrap_or(0);
    println!(
        "churn: {} new PIDs a second, each living {} s, {GPUS} GPUs and {STAYING} staying processes, {hours} h at {} s ({samples} samples)",
        churn.rate, churn.life, churn.interval
    );
    println!("  start: resident {:.1} MiB", rss_start as f64 / 1024.0);
    let began = Instant::now();
    for k in 0..samples {
        let observed = pipeline.ingest(churn.sample(k));
        std::hint::black_box(&observed);
        if (k + 1) % per_report == 0 || k + 1 == samples {
            let budget = pipeline.history.budget();
            println!(
                "  after {:>6.0} s: {:>6} series, history {:>6.1} MiB, resident {:>6.1} MiB",
                (k + 1) as f64 * churn.interval,
                pipeline.history.len(),
                mib(budget.bytes as u64),
                status_kib("VmRSS:").unwrap_or(0) as f64 / 1024.0
            );
        }
    }
    let budget = pipeline.history.budget();
    println!(
        "  peak resident {:.1} MiB; history budget {:.0} MiB, {} series dropped for it, thinned to 1/{} ({:.1} s of wall time)",
        status_kib("VmHWM:").unwrap_or(0) as f64 / 1024.0,
        mib(budget.limit as u64),
        budget.dropped,
        budget.thinned,
        began.elapsed().as_secs_f64()
    );
}

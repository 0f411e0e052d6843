//! Diagnosis at the scale of a large node: 8 GPUs (or 8 GPUs x 7 MIG instances) and 64
//! processes, each with an allocator feed, sampled every second for a day.
//!
//! Measures, against their targets:
//! - every detector over the history, per sample (target: under 1 ms);
//! - taking in one whole sample (attach, account, record, detect);
//! - the history's memory after 24 h, in all and per series (target: 8 GPUs x 7 MIG and 64
//!   fed processes under 24 MiB), and this process's resident memory beside it;
//! - with `--write FILE`, the day as a recording (through `strata record`'s writer, in the
//!   format FILE's name asks for: format 2 for `.zst`, JSON lines for `.jsonl`,
//!   `.jsonl.zst`), for `benches/analyze.sh` to time `strata analyze` on.
//!
//! Run: `cargo bench --bench diagnosis` (a simulated day each of the full GPUs and of MIG;
//! `-- --hours H` for fewer; `-- --write FILE` writes the recording of the full-GPU node).
//!
//! The node: on each device, processes whose live tensors saw-tooth within each step (periods
//! 20 s to 5 min) over a plateau; one process in eight leaks 40 MiB a minute for an hour in
//! every four, so the climb detector has climbs to find and to hold.

// A benchmark may panic: `expect` says which of its assumptions failed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Instant;
use strata::detect::{detect_history, detect_instant};
use strata::fixtures::{gpu, memory, mig, noise, process, GIB, MIB};
use strata::pipeline::Pipeline;
use strata::recording::RecordWriter;
use strata::sample::feed::{
    DeviceFeed, FeedCounters, FeedDevice, FeedRecord, FeedState, FoundVia, Hello, PeerCred,
};
use strata::sample::{AllocatorStats, NodeSample};

const T0: f64 = 1_767_225_600.0;
const CONTEXT: u64 = 512 * MIB;
const OUTSIDE: u64 = 256 * MIB;
const GPU_TOTAL: u64 = 80 * GIB;
const MIG_TOTAL: u64 = 10 * GIB;

struct Node {
    gpus: u32,
    /// MIG instances per GPU; 0 for full GPUs.
    migs: u32,
    procs: u32,
}

struct Figures {
    live: u64,
    reserved: u64,
    inactive: u64,
}

impl Node {
    fn devices(&self) -> u32 {
        self.gpus * self.migs.max(1)
    }

    fn device_total(&self) -> u64 {
        if self.migs > 0 {
            MIG_TOTAL
        } else {
            GPU_TOTAL
        }
    }

    fn device_uuid(&self, d: u32) -> String {
        match d.checked_div(self.migs) {
            Some(g) => format!("MIG-bench-{g}-{}", d % self.migs),
            None => format!("GPU-test-{d}"),
        }
    }

    /// The allocator's figures of process `i` at `t` seconds into the day.
    fn figures(&self, i: u32, t: f64) -> Figures {
        let per_device = self.procs.div_ceil(self.devices()).max(1);
        let share = self.device_total() / u64::from(per_device);
        let base = share as f64 * 0.35;
        let depth = share as f64 * 0.2;
        let period = [20.0, 45.0, 90.0, 300.0][i as usize % 4];
        let phase = f64::from(i) * 7.0;
        let saw = depth * (((t + phase) % period) / period);
        // One process in eight leaks 40 MiB/min for the first hour of every four, then frees.
        let leak = if i % 8 == 3 {
            let into = t % (4.0 * 3600.0);
            40.0 * MIB as f64 * into.min(3600.0) / 60.0 * f64::from(u8::from(into < 3600.0))
        } else {
            0.0
        };
        let jitter = 20.0 * MIB as f64 * noise(u64::from(i), t as u64);
        let live = (base + saw + leak + jitter).max(0.0) as u64;
        let reserved = ((base + depth + leak) as u64 + 256 * MIB).next_multiple_of(2 * MIB);
        Figures {
            live: live.min(reserved - 64 * MIB),
            reserved,
            inactive: 48 * MIB,
        }
    }

    fn stats(&self, i: u32, t: f64, seq: u64) -> AllocatorStats {
        let f = self.figures(i, t - T0);
        AllocatorStats {
            index: 0,
            seq,
            time: t,
            allocated: f.live,
            reserved: Some(f.reserved),
            active: Some(f.live),
            inactive_split: Some(f.inactive),
            peak_allocated: Some(f.reserved - 64 * MIB),
            peak_reserved: Some(f.reserved),
            alloc_retries: Some(0),
            ooms: Some(0),
            device_allocs: Some(40),
            device_frees: Some(0),
            reserved_since: Some(T0),
            ..AllocatorStats::default()
        }
    }

    /// The node `k` seconds into the day, as the NVML source and the feed listener give it.
    fn sample(&self, k: u64) -> NodeSample {
        let time = T0 + k as f64;
        let mut sample = strata::fixtures::node();
        sample.time = time;
        sample.host = "bench-node".into();
        let mut used_on = vec![0u64; self.devices() as usize];
        for i in 0..self.procs {
            let d = i % self.devices();
            let uuid = self.device_uuid(d);
            let pid = 10_000 + i;
            // The agent samples every 0.5 s: the latest reading and the one before it.
            let latest = self.stats(i, time - 0.2, 2 * k + 1);
            let earlier = self.stats(i, time - 0.7, 2 * k);
            let used = CONTEXT + OUTSIDE + self.figures(i, time - 0.2 - T0).reserved;
            used_on[d as usize] += used;
            let mut p = process(pid, &uuid, Some(used));
            p.sm_util = Some(60 + (i % 30));
            sample.processes.push(p);
            sample.feeds.push(FeedRecord {
                socket: format!("/run/user/1000/strata/{pid}.sock"),
                found_via: FoundVia::FeedDir,
                peer: Some(PeerCred {
                    pid,
                    uid: 1000,
                    gid: 1000,
                }),
                nspid: Some(pid),
                state: FeedState::Connected,
                hello: Some(
                    Hello {
                        pid,
                        time: T0 - 60.0,
                        started: Some(T0 - 60.0),
                        interval: Some(0.5),
                        framework: Some("torch".into()),
                        framework_version: Some("2.5.1+cu124".into()),
                        backend: Some("native".into()),
                        devices: vec![FeedDevice {
                            index: 0,
                            uuid: Some(uuid.clone()),
                            ..FeedDevice::default()
                        }],
                        ..Hello::default()
                    }
                    .into(),
                ),
                devices: vec![DeviceFeed {
                    latest,
                    earlier: vec![earlier],
                }],
                ooms: Vec::new(),
                counters: FeedCounters {
                    lines: 2 * k + 2,
                    samples: 2 * k + 1,
                    ..FeedCounters::default()
                },
                connected_at: Some(T0 - 59.0),
                last_heard: Some(time - 0.2),
                segments: None,
                sites: None,
            });
        }
        for g in 0..self.gpus {
            if self.migs == 0 {
                let used = used_on[g as usize] + 600 * MIB;
                sample.gpus.push(gpu(g, memory(GPU_TOTAL, used)));
            } else {
                let mut whole = gpu(g, memory(GPU_TOTAL, 0));
                whole.mig_mode = Some(true);
                let mut held = 0;
                for m in 0..self.migs {
                    let d = (g * self.migs + m) as usize;
                    let used = used_on[d] + 40 * MIB;
                    held += used;
                    let mut instance = mig(
                        &self.device_uuid(d as u32),
                        "1g.10gb",
                        memory(MIG_TOTAL, used),
                    );
                    instance.gpu_instance_id = Some(m);
                    instance.compute_instance_id = Some(0);
                    whole.mig.push(instance);
                }
                whole.memory = Some(memory(GPU_TOTAL, held));
                sample.gpus.push(whole);
            }
        }
        sample
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A day (or `hours`) of the node through the pipeline; prints what it measured.
fn run(label: &str, node: &Node, hours: f64, mut write: Option<&mut RecordWriter>) {
    let seconds = (hours * 3600.0) as u64;
    let mut pipeline = Pipeline::new(None);
    let mut ingest = Vec::with_capacity(seconds as usize);
    let mut detect = Vec::new();
    let mut findings = 0usize;
    let began = Instant::now();
    for k in 0..seconds {
        let sample = node.sample(k);
        if let Some(out) = write.as_deref_mut() {
            out.write(&sample).expect("write");
        }
        let start = Instant::now();
        let observed = pipeline.ingest(sample);
        ingest.push(start.elapsed().as_secs_f64());
        findings = findings.max(observed.findings.len());
        // Every detector again, alone, on the history as it now stands: once a minute.
        if k % 60 == 59 {
            let start = Instant::now();
            let mut f = detect_instant(&observed.sample, &observed.attachment, &observed.account);
            f.extend(detect_history(
                &observed.sample,
                &observed.account,
                &pipeline.history,
            ));
            detect.push(start.elapsed().as_secs_f64());
            black_box(f);
        }
    }
    let wall = began.elapsed().as_secs_f64();
    ingest.sort_by(f64::total_cmp);
    detect.sort_by(f64::total_cmp);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let series = pipeline.history.len();
    let bytes = pipeline.history.footprint();
    println!(
        "{label}: {hours} h at 1 s, {} samples in {wall:.1} s",
        seconds
    );
    println!(
        "  every detector, per sample: mean {:.0} µs, p99 {:.0} µs, max {:.0} µs (read once a minute, {} reads)",
        mean(&detect) * 1e6,
        percentile(&detect, 0.99) * 1e6,
        detect.last().unwrap_or(&0.0) * 1e6,
        detect.len()
    );
    println!(
        "  one whole sample (attach, account, record, detect): mean {:.0} µs, p99 {:.0} µs",
        mean(&ingest) * 1e6,
        percentile(&ingest, 0.99) * 1e6
    );
    println!(
        "  history: {series} series, {:.2} MiB ({:.1} KB a series); most findings at once: {findings}",
        bytes as f64 / (1u64 << 20) as f64,
        bytes as f64 / series.max(1) as f64 / 1000.0
    );
    if let Some(rss) = rss_kib() {
        println!(
            "  this process's resident memory: {:.1} MiB",
            rss as f64 / 1024.0
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let hours: f64 = value("--hours").map_or(24.0, |h| h.parse().expect("--hours H"));
    let full = Node {
        gpus: 8,
        migs: 0,
        procs: 64,
    };
    if let Some(path) = value("--write") {
        let _ = std::fs::remove_file(&path);
        let mut out =
            RecordWriter::create(std::path::Path::new(&path), None).expect("create the recording");
        run(
            "8 GPUs, 64 fed processes (written)",
            &full,
            hours,
            Some(&mut out),
        );
        out.finish().expect("write");
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then a short run.
    let hours = if args.iter().any(|a| a == "--bench") {
        hours
    } else {
        0.05
    };
    run("8 GPUs, 64 fed processes", &full, hours, None);
    let mig_node = Node {
        gpus: 8,
        migs: 7,
        procs: 64,
    };
    run("8 GPUs x 7 MIG, 64 fed processes", &mig_node, hours, None);
}

//! A busy training node, synthetic: 8 GPUs with N fed processes each (8: 64 processes and
//! 64 feeds), every figure moving at each reading as a training job's do, sampled at 1 s.
//! Shared by `benches/record.rs` and the tests that hold recording formats to the same
//! samples (a module of `tests/common`, and `#[path]`-included by the benchmark: it is not a
//! module of the library).
//!
//! The node moves as a training job's does, so the data is not made compressible: each
//! process's live tensors saw-tooth within its step (periods 20 s to 5 min) with 512-byte
//! granular noise of ±20 MiB at every reading; the pool (`reserved`) grows in 2 MiB steps
//! when live tensors pass it, and one process in eight leaks 40 MiB a minute for an hour in
//! four; NVML's `used` follows the pool; SM and GPU utilisation, CPU % (from whole clock
//! ticks over a jittered interval, rounded to 0.1 % as strata's host reader does), resident
//! memory (4 KiB pages), poll time (to the µs, as the NVML source writes it) and the sample
//! times carry the jitter real readings do; the agents' counters and sequence numbers count
//! on; each feed carries its latest reading and the one before (the agent samples at 0.5 s).

#![allow(dead_code)]

use strata::fixtures::{feed_record, gpu, memory, noise, process, GIB, MIB};
use strata::sample::feed::{DeviceFeed, FeedCounters, FeedDevice, FeedRecord, Hello};
use strata::sample::{AllocatorStats, HostMemory, NodeSample};

/// As strata's host reader rounds CPU figures.
fn tenths(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

const T0: f64 = 1_767_225_600.0;
pub const GPUS: u32 = 8;
const GPU_TOTAL: u64 = 80 * GIB;
const CONTEXT: u64 = 512 * MIB;

/// The node, with the state that carries from one second to the next (pools, peaks, counters).
pub struct Node {
    /// Fed processes per GPU.
    per_gpu: u32,
    /// `--lean`: see [`Node::sample`].
    pub lean: bool,
    /// CPU % and poll times at full f64 precision, as this node's first version wrote
    /// them; strata's sources round them (CPU to 0.1 %, the poll to 1 µs).
    pub full_precision: bool,
    reserved: Vec<u64>,
    peak_allocated: Vec<u64>,
    device_allocs: Vec<u64>,
    rss: Vec<u64>,
}

impl Node {
    pub fn new(per_gpu: u32) -> Node {
        let n = (GPUS * per_gpu) as usize;
        Node {
            per_gpu,
            lean: false,
            full_precision: false,
            reserved: vec![0; n],
            peak_allocated: vec![0; n],
            device_allocs: vec![0; n],
            rss: (0..n).map(|i| 6 * GIB + i as u64 * 37 * MIB).collect(),
        }
    }

    /// Live tensors of process `i` at `t` seconds into the day, 512-byte granular.
    fn live(&self, i: u32, t: f64) -> u64 {
        let share = GPU_TOTAL / u64::from(self.per_gpu);
        let base = share as f64 * 0.35;
        let depth = share as f64 * 0.2;
        let period = [20.0, 45.0, 90.0, 300.0][i as usize % 4];
        let saw = depth * (((t + f64::from(i) * 7.0) % period) / period);
        let leak = if i % 8 == 3 {
            let into = t % (4.0 * 3600.0);
            40.0 * MIB as f64 * into.min(3600.0) / 60.0 * f64::from(u8::from(into < 3600.0))
        } else {
            0.0
        };
        let jitter = 20.0 * MIB as f64 * noise(u64::from(i), (t * 2.0) as u64);
        ((base + saw + leak + jitter).max(0.0) as u64) / 512 * 512
    }

    fn stats(&mut self, i: u32, t: f64, seq: u64) -> AllocatorStats {
        let k = i as usize;
        let live = self.live(i, t - T0);
        // The pool grows in 2 MiB segments when live tensors pass it, and after the leak's
        // hour the job empties its cache once.
        let wanted = (live + 96 * MIB).next_multiple_of(2 * MIB);
        if wanted > self.reserved[k] {
            self.device_allocs[k] += (wanted - self.reserved[k]) / (2 * MIB);
            self.reserved[k] = wanted;
        } else if i % 8 == 3 && ((t - T0) % (4.0 * 3600.0)) < 1.0 {
            self.reserved[k] = wanted;
        }
        self.peak_allocated[k] = self.peak_allocated[k].max(live);
        let reserved = self.reserved[k];
        let inactive = ((reserved - live) as f64 * (0.1 + 0.05 * noise(seq, 7).abs())) as u64;
        AllocatorStats {
            index: 0,
            seq,
            time: t,
            allocated: live,
            reserved: Some(reserved),
            active: Some(live + inactive / 4 / 512 * 512),
            inactive_split: Some(inactive / 512 * 512),
            requested: Some(live - (live / 97) / 8 * 8),
            peak_allocated: Some(self.peak_allocated[k]),
            peak_reserved: Some(reserved),
            alloc_retries: Some(0),
            ooms: Some(0),
            device_allocs: Some(self.device_allocs[k]),
            device_frees: Some(0),
            reserved_since: Some(T0 + 12.5),
            ..AllocatorStats::default()
        }
    }

    /// The node `k` seconds into the day.
    pub fn sample(&mut self, k: u64) -> NodeSample {
        let time = T0 + k as f64 + 0.004 * noise(k, 1).abs();
        let mut sample = strata::fixtures::node();
        sample.time = time;
        sample.host = "dgx-h100-07".into();
        let (poll, host_cpu) = (0.0031 + 0.002 * noise(k, 2).abs(), 62.0 + 8.0 * noise(k, 3));
        let full = self.full_precision;
        sample.poll_secs = Some(if full {
            poll
        } else {
            (poll * 1e6).round() / 1e6
        });
        sample.host_cpu_percent = Some(if full { host_cpu } else { tenths(host_cpu) });
        sample.host_memory = Some(HostMemory {
            total: 2048 * GIB,
            used: 900 * GIB + ((40.0 * GIB as f64 * (1.0 + noise(k, 4))) as u64) / 4096 * 4096,
        });
        let mut used_on = [0u64; GPUS as usize];
        for i in 0..GPUS * self.per_gpu {
            let g = i / self.per_gpu;
            let uuid = format!("GPU-4c8f2a61-7d1e-5b9c-a{g:03}-0e1f2a3b4c5d");
            let pid = 210_000 + i * 13;
            let latest = self.stats(i, time - 0.2, 2 * k + 1);
            let earlier = self.stats(i, time - 0.7, 2 * k);
            let used = CONTEXT + 384 * MIB + latest.reserved.unwrap_or_default();
            used_on[g as usize] += used;
            let mut p = process(pid, &uuid, Some(used));
            p.user = Some("alice".into());
            p.command = Some(format!(
                "python -u train.py --config configs/llama-8b.yaml --rank {i}"
            ));
            p.sm_util = Some((70.0 + 25.0 * noise(u64::from(i), k)).clamp(0.0, 100.0) as u32);
            let wall = 1.0 + 0.003 * noise(u64::from(i) + 99, k);
            let ticks = (100.0 + 10.0 * noise(u64::from(i) + 7, k)).round();
            p.cpu_percent = Some(if full {
                ticks / wall
            } else {
                tenths(ticks / wall)
            });
            let rss = &mut self.rss[i as usize];
            *rss =
                (*rss as f64 + 2.0 * MIB as f64 * noise(u64::from(i) + 3, k)) as u64 / 4096 * 4096;
            p.host_memory = Some(*rss);
            p.elapsed = Some(3600 + k);
            sample.processes.push(p);
            sample.feeds.push(FeedRecord {
                hello: Some(
                    Hello {
                        pid,
                        time: T0 - 60.0,
                        agent_version: Some("0.1.0".into()),
                        python: Some("3.11.9".into()),
                        executable: Some("/usr/bin/python3.11".into()),
                        started: Some(T0 - 61.3),
                        interval: Some(0.5),
                        framework: Some("torch".into()),
                        framework_version: Some("2.5.1+cu124".into()),
                        backend: Some("native".into()),
                        devices: vec![FeedDevice {
                            index: 0,
                            uuid: Some(uuid.clone()),
                            pci_bus_id: Some(format!("00000000:{:02X}:00.0", 0x18 + 0x10 * g)),
                            name: Some("NVIDIA H100 80GB HBM3".into()),
                            context: None,
                        }],
                        ..Hello::default()
                    }
                    .into(),
                ),
                devices: vec![DeviceFeed {
                    latest,
                    earlier: vec![earlier],
                }],
                counters: FeedCounters {
                    lines: 2 * k + 3,
                    samples: 2 * k + 2,
                    ..FeedCounters::default()
                },
                connected_at: Some(T0 - 59.0),
                last_heard: Some(time - 0.2 + 0.01 * noise(u64::from(i), k).abs()),
                segments: None,
                sites: None,
                ..feed_record(pid, 1000)
            });
        }
        if self.lean {
            // What the size would be with the feeds' readings between node samples left out
            // and times and CPU figures rounded (1 ms, 0.01 %): not what strata writes.
            let ms = |t: f64| (t * 1e3).round() / 1e3;
            sample.time = ms(sample.time);
            for f in &mut sample.feeds {
                f.last_heard = f.last_heard.map(ms);
                for d in &mut f.devices {
                    d.earlier.clear();
                    d.latest.time = ms(d.latest.time);
                }
            }
            for p in &mut sample.processes {
                p.cpu_percent = p.cpu_percent.map(|c| (c * 100.0).round() / 100.0);
            }
            sample.poll_secs = sample.poll_secs.map(ms);
            sample.host_cpu_percent = sample.host_cpu_percent.map(|c| (c * 100.0).round() / 100.0);
        }
        for g in 0..GPUS {
            let mut device = gpu(g, memory(GPU_TOTAL, used_on[g as usize] + 600 * MIB));
            device.uuid = format!("GPU-4c8f2a61-7d1e-5b9c-a{g:03}-0e1f2a3b4c5d");
            device.utilization_gpu = Some((85.0 + 14.0 * noise(u64::from(g) + 50, k)) as u32);
            sample.gpus.push(device);
        }
        sample
    }
}

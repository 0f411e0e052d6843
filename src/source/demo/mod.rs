//! The built-in demo node: a deterministic, seeded simulation of a 4-GPU training node in
//! compressed time, through the same [`Source`] trait as real NVML.
//!
//! It shows every situation strata exists for: a training job warming up to a plateau with
//! tensors saw-toothing inside each step; NCCL-style memory outside the pool; a slow leak; a
//! fragmenting job whose retries climb until it runs out of memory; a cudaMallocAsync process;
//! a process with no feed; a zombie CUDA context; usage no visible process accounts for; and a
//! GPU in MIG mode with 3g.40gb, 2g.20gb and 1g.10gb instances.

mod host;
mod owners;
mod story;
mod vitals;

pub(crate) use story::LOOP_SECS;

use super::{Source, SourceError};
use crate::sample::feed::{
    DeviceFeed, FeedCounters, FeedDevice, FeedRecord, FeedState, FoundVia, Hello, OomReport,
    PeerCred,
};
use crate::sample::{
    AllocatorStats, ContextKind, DeviceMemory, GpuInfo, GpuSample, MigInfo, MigSample, NodeSample,
    ProcessSample,
};
use story::{Actor, Place};

/// Unix time the demo's story starts at: 2026-01-01 09:00:00 UTC. The demo runs on its own
/// clock so that any instant of it can be reproduced.
pub(crate) const DEMO_EPOCH: f64 = 1_767_258_000.0;
/// The story instant `snapshot --demo` shows by default: every situation is on screen
/// (warm plateau, leak, stale-free feeds, fragmentation just past the first OOM).
pub const SNAPSHOT_AT: f64 = 905.0;

const MIB: u64 = 1 << 20;
const H100_TOTAL: u64 = 81_559 * MIB;
const A100_TOTAL: u64 = 81_920 * MIB;
const DRIVER_RESERVED: u64 = 521 * MIB;
/// Samples of the story before the first one loaded as history: 15 minutes at 1 s.
const BACKLOG_SAMPLES: i64 = 900;
/// Clock ticks per second of `/proc/PID/stat` start times.
const TICKS: f64 = 100.0;
/// The simulated machine had been up this long when the story began.
const BOOT_UPTIME_SECS: f64 = 86_400.0 * 3.0;

struct MigSlot {
    profile: &'static str,
    gpu_instance_id: u32,
    total: u64,
}

const MIG_SLOTS: [MigSlot; 3] = [
    MigSlot {
        profile: "3g.40gb",
        gpu_instance_id: 1,
        total: 40_192 * MIB,
    },
    MigSlot {
        profile: "2g.20gb",
        gpu_instance_id: 5,
        total: 19_968 * MIB,
    },
    MigSlot {
        profile: "1g.10gb",
        gpu_instance_id: 13,
        total: 9_728 * MIB,
    },
];

const GPU_UUIDS: [&str; 4] = [
    "GPU-3f9c2a6e-81d4-4c1b-9e0a-5b7d2f4c8a10",
    "GPU-7a1e5c93-2b6f-4d8e-a4c7-0f9b3e6d1a22",
    "GPU-c4d82f17-9a3e-4b5c-8d61-e2f07a9b4c34",
    "GPU-e86b1d40-5c7a-4f2e-b39d-14a6c8e0f246",
];

fn mig_uuid(slot: usize) -> String {
    format!("MIG-9b2d7e41-0c5a-5f83-a6e1-{slot:04}d4b7c258")
}

/// A demo instant (unix seconds) told as story time, `story 15m05s`: the demo's clock runs
/// faster than the wall's from a fixed origin ([`DEMO_EPOCH`]), so it is never called UTC.
pub(crate) fn story_time(unix_secs: f64) -> String {
    let story = unix_secs - DEMO_EPOCH;
    if story < 0.0 {
        format!("story −{}", crate::units::duration(-story))
    } else {
        format!("story {}", crate::units::duration(story))
    }
}

/// Deterministic noise in [0, 1) from the seed, a stream and a position (splitmix64).
pub(crate) fn noise(seed: u64, stream: u64, position: u64) -> f64 {
    let mut z = seed
        .wrapping_add(stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(position.wrapping_mul(0xD1B5_4A32_D192_ED03));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// The demo node at one instant of its (looping) story.
pub fn node_at(seed: u64, story_secs: f64, interval: f64) -> NodeSample {
    let story_secs = story_secs.max(0.0);
    let loop_start = (story_secs / LOOP_SECS).floor() * LOOP_SECS;
    let t = story_secs - loop_start;
    let actors = story::cast(seed, t);
    let on = |place: Place| -> u64 {
        actors
            .iter()
            .filter(|a| a.place == place)
            .map(|a| a.used)
            .sum::<u64>()
            + story::unlisted(place)
    };

    let mut gpus = Vec::with_capacity(4);
    for (index, uuid) in GPU_UUIDS.iter().enumerate() {
        let util = actors
            .iter()
            .filter(|a| matches!(a.place, Place::Gpu(g) | Place::Mig(g, _) if g == index))
            .filter_map(|a| a.sm_util)
            .max()
            .unwrap_or(0);
        let (name, total, used, mig) = if index == 3 {
            let mig: Vec<MigSample> = MIG_SLOTS
                .iter()
                .enumerate()
                .map(|(slot, s)| {
                    let used = on(Place::Mig(3, slot));
                    MigSample {
                        info: MigInfo {
                            profile: Some(s.profile.to_string()),
                            gpu_instance_id: Some(s.gpu_instance_id),
                            compute_instance_id: Some(0),
                            memory: Some(DeviceMemory {
                                total: s.total,
                                used,
                                free: s.total - used,
                                driver_reserved: None,
                            }),
                            ..MigInfo::new(mig_uuid(slot))
                        },
                        problems: Default::default(),
                    }
                })
                .collect();
            let used = mig.iter().filter_map(|m| m.memory).map(|m| m.used).sum();
            ("NVIDIA A100-SXM4-80GB", A100_TOTAL, used, mig)
        } else {
            (
                "NVIDIA H100 80GB HBM3",
                H100_TOTAL,
                on(Place::Gpu(index)),
                Vec::new(),
            )
        };
        let board = if index == 3 {
            &vitals::A100
        } else {
            &vitals::H100
        };
        let (temperature, power_mw, sm_clock_mhz) = vitals::at(seed, index, board, util, t);
        gpus.push(GpuSample {
            info: GpuInfo {
                name: Some(name.to_string()),
                pci_bus_id: Some(pci_bus_id(index)),
                memory: Some(DeviceMemory {
                    total,
                    used,
                    free: total - DRIVER_RESERVED - used,
                    driver_reserved: Some(DRIVER_RESERVED),
                }),
                utilization_gpu: Some(util),
                temperature: Some(temperature),
                power_mw: Some(power_mw),
                power_limit_mw: Some(board.power_limit_mw),
                sm_clock_mhz: Some(sm_clock_mhz),
                sm_clock_max_mhz: Some(board.sm_clock_max_mhz),
                mig_mode: Some(index == 3),
                minor_number: Some(index as u32),
                ..GpuInfo::new(index as u32, (*uuid).to_string())
            },
            mig,
            problems: Default::default(),
        });
    }

    let epoch = DEMO_EPOCH + loop_start;
    let processes = actors
        .iter()
        .map(|a| process_sample(seed, a, loop_start, t))
        .collect();
    let (host_cpu_percent, host_memory) = host::node(seed, &actors, t);
    let ticks = |started_at: f64| ((BOOT_UPTIME_SECS + loop_start + started_at) * TICKS) as u64;
    // Searched only while a context outlives its process, as on a real node.
    let device_files = actors
        .iter()
        .any(|a| !a.visible)
        .then(|| host::device_files(&actors, ticks));
    // One step earlier in the same loop: whether each pool held still since then.
    let before = (t >= interval).then(|| story::cast(seed, t - interval));
    let feeds = actors
        .iter()
        .filter_map(|a| {
            let earlier = before
                .as_ref()
                .and_then(|b| b.iter().find(|e| e.pid == a.pid));
            feed_record(a, earlier, epoch, interval)
        })
        .collect();
    NodeSample {
        time: DEMO_EPOCH + story_secs,
        interval,
        host: if seed == 0 {
            "demo-node".into()
        } else {
            format!("demo-node-{seed}")
        },
        demo: true,
        driver_version: Some("550.90.07".into()),
        cuda_driver_version: Some("12.4".into()),
        host_pid_namespace: Some(true),
        gpus,
        processes,
        feeds,
        feed_scan: Default::default(),
        host_cpu_percent,
        host_memory,
        device_files,
        poll_secs: Some(0.002),
        problems: Default::default(),
    }
}

/// The agent's feed of a fed actor, as the monitor would hold it: torch names its device by
/// bare UUID (the MIG instance's, under MIG), JAX only by PCI bus id.
fn feed_record(
    actor: &Actor,
    earlier: Option<&Actor>,
    epoch: f64,
    step: f64,
) -> Option<FeedRecord> {
    let pool = actor.pool.as_ref()?;
    let (uuid, pci) = match actor.place {
        Place::Gpu(g) => (GPU_UUIDS[g].to_string(), pci_bus_id(g)),
        Place::Mig(g, slot) => (mig_uuid(slot), pci_bus_id(g)),
    };
    let uuid = match pool.framework {
        "jax" => None,
        _ => Some(uuid.trim_start_matches("GPU-").to_string()),
    };
    // The agent publishes a moment before the monitor samples.
    let time = epoch + pool.published_at - 0.4;
    let held_still = earlier
        .and_then(|e| e.pool.as_ref())
        .is_some_and(|e| e.reserved == pool.reserved && e.published_at < pool.published_at);
    let reserved_since = if pool.reserved == 0 {
        epoch + actor.started_at
    } else if held_still {
        time - step
    } else {
        time
    };
    let uid = match actor.user {
        Some("mlteam") => 1001,
        Some("bob") => 1002,
        Some("carol") => 1003,
        _ => 1100,
    };
    let native = pool.backend == "native";
    let mut unreported = std::collections::BTreeMap::new();
    if pool.inactive_split.is_none() {
        let why = match pool.backend {
            "cudaMallocAsync" => "not reported by cudaMallocAsync",
            _ => "not reported by this framework",
        };
        unreported.insert("inactive_split".to_string(), why.to_string());
    }
    let stats = AllocatorStats {
        index: 0,
        seq: (pool.published_at * 2.0) as u64,
        time,
        allocated: pool.allocated,
        reserved: Some(pool.reserved),
        active: Some(pool.allocated),
        inactive_split: pool.inactive_split,
        requested: native.then_some(pool.allocated),
        peak_allocated: Some(pool.peak_allocated),
        peak_reserved: Some(pool.peak_reserved),
        alloc_retries: pool.alloc_retries,
        ooms: pool.ooms,
        largest_free_block: pool.largest_free_block,
        largest_free_block_time: pool.largest_free_block.map(|_| time),
        reserved_since: Some(reserved_since),
        unreported,
        ..AllocatorStats::default()
    };
    let dir = format!("/tmp/strata-{uid}");
    Some(FeedRecord {
        socket: format!("{dir}/{}.sock", actor.pid),
        found_via: FoundVia::FeedDir,
        peer: Some(PeerCred {
            pid: actor.pid,
            uid,
            gid: uid,
        }),
        nspid: Some(actor.pid),
        state: FeedState::Connected,
        hello: Some(
            Hello {
                pid: actor.pid,
                time: epoch + actor.started_at,
                agent_version: Some(env!("CARGO_PKG_VERSION").into()),
                python: Some("3.11.9".into()),
                executable: Some("/usr/bin/python3.11".into()),
                started: Some(epoch + actor.started_at),
                interval: Some(0.5),
                framework: Some(pool.framework.into()),
                framework_version: Some(pool.framework_version.into()),
                backend: Some(pool.backend.into()),
                settings: Default::default(),
                devices: vec![FeedDevice {
                    index: 0,
                    uuid,
                    pci_bus_id: Some(pci),
                    name: None,
                    context: None,
                }],
                note: None,
                protocol: Some(1),
                state: Some("reading".into()),
                ..Default::default()
            }
            .into(),
        ),
        devices: vec![DeviceFeed {
            latest: stats.clone(),
            earlier: Vec::new(),
        }],
        ooms: pool
            .last_oom
            .map(|o| OomReport {
                time: epoch + o.at,
                seq: (o.at * 2.0) as u64,
                index: 0,
                requested: Some(o.requested),
                device_free: Some(o.device_free),
                device_total: Some(o.device_total),
                stats: Some(stats.clone()),
            })
            .into_iter()
            .collect(),
        counters: FeedCounters {
            lines: (pool.published_at * 2.0) as u64 + 1,
            samples: (pool.published_at * 2.0) as u64,
            ..FeedCounters::default()
        },
        connected_at: Some(epoch + actor.started_at),
        last_heard: Some(time),
        segments: None,
        sites: None,
    })
}

/// The PCI bus id of demo GPU `g`.
fn pci_bus_id(g: usize) -> String {
    format!("00000000:{:02X}:00.0", 0x18 + 0x10 * g)
}

fn process_sample(seed: u64, actor: &Actor, loop_start: f64, t: f64) -> ProcessSample {
    let device_uuid = match actor.place {
        Place::Gpu(g) => GPU_UUIDS[g].to_string(),
        Place::Mig(_, slot) => mig_uuid(slot),
    };
    let running = actor.sm_util.unwrap_or(0) >= 50;
    ProcessSample {
        pid: actor.pid,
        device_uuid: device_uuid.into(),
        used: Some(actor.used),
        kind: ContextKind::Compute,
        mps: false,
        visible: actor.visible,
        hidden: false,
        proc_state: actor
            .visible
            .then(|| if running { "R" } else { "S" }.into()),
        start_time: actor
            .visible
            .then_some(((BOOT_UPTIME_SECS + loop_start + actor.started_at) * TICKS) as u64),
        user: actor.user.map(str::to_string),
        command: actor.command.map(str::to_string),
        sm_util: actor.sm_util,
        executable: actor
            .command
            .filter(|c| c.starts_with("python"))
            .map(|_| "/usr/bin/python3.11".into()),
        cpu_percent: host::cpu_percent(seed, actor, t),
        host_memory: host::host_memory(seed, actor, t),
        elapsed: host::elapsed(actor, t),
        owner: owners::of(actor),
        feed: None,
    }
}

/// The demo node as a [`Source`]: each sample advances the story by `interval * speed`.
pub struct DemoSource {
    seed: u64,
    /// Story seconds per sample.
    step: f64,
    speed: f64,
    start_at: f64,
    taken: u64,
}

impl DemoSource {
    /// `interval` is the wall-clock sampling interval, `speed` how many story seconds pass
    /// per wall second, `start_at` the story second of the first sample.
    pub fn new(seed: u64, interval: f64, speed: f64, start_at: f64) -> Self {
        DemoSource {
            seed,
            step: (interval * speed).max(1e-3),
            speed,
            start_at: start_at.max(0.0),
            taken: 0,
        }
    }

    fn at(&self, n: i64) -> NodeSample {
        node_at(self.seed, self.start_at + n as f64 * self.step, self.step)
    }
}

impl Source for DemoSource {
    fn sample(&mut self) -> Result<NodeSample, SourceError> {
        let sample = self.at(self.taken as i64);
        self.taken += 1;
        Ok(sample)
    }

    fn backlog(&mut self) -> Vec<NodeSample> {
        let available = (self.start_at / self.step).floor() as i64;
        let count = available.min(BACKLOG_SAMPLES);
        (1..=count).rev().map(|n| self.at(-n)).collect()
    }

    /// `demo ×10`: the story runs this many times faster than the clock, and the header shows
    /// story time, not the wall clock.
    fn label(&self) -> String {
        format!("demo ×{}", self.speed)
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

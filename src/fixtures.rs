//! Small builders of raw samples, shared by unit, property and screen tests.
#![doc(hidden)]

use crate::accounting::attach::{judge, Attachment, FeedStatus, STALE_INTERVALS};
use crate::sample::feed::{
    DeviceFeed, FeedCounters, FeedDevice, FeedRecord, FeedState, FoundVia, Hello, PeerCred,
};
use crate::sample::{
    AllocatorStats, ContextKind, DeviceMemory, FeedSample, GpuInfo, GpuSample, MigInfo, MigSample,
    NodeSample, ProcessSample,
};

pub const GIB: u64 = 1 << 30;
pub const MIB: u64 = 1 << 20;

/// A node with no GPUs at unix time 1000, sampled every second.
pub fn node() -> NodeSample {
    NodeSample {
        time: 1000.0,
        interval: 1.0,
        host: "test-node".into(),
        demo: false,
        driver_version: Some("550.90.07".into()),
        cuda_driver_version: Some("12.4".into()),
        host_pid_namespace: Some(true),
        gpus: Vec::new(),
        processes: Vec::new(),
        feeds: Vec::new(),
        feed_scan: Default::default(),
        host_cpu_percent: None,
        host_memory: None,
        device_files: None,
        poll_secs: None,
        problems: Default::default(),
    }
}

/// Memory with `total = used + free` and no driver reservation reported.
pub fn memory(total: u64, used: u64) -> DeviceMemory {
    DeviceMemory {
        total,
        used,
        free: total - used,
        driver_reserved: None,
    }
}

pub fn gpu(index: u32, memory: DeviceMemory) -> GpuSample {
    GpuSample {
        info: GpuInfo {
            name: Some("NVIDIA H100 80GB HBM3".into()),
            pci_bus_id: Some(format!("00000000:{:02X}:00.0", 0x18 + 0x10 * index)),
            memory: Some(memory),
            utilization_gpu: Some(50),
            mig_mode: Some(false),
            minor_number: Some(index),
            ..GpuInfo::new(index, format!("GPU-test-{index}"))
        },
        mig: Vec::new(),
        problems: Default::default(),
    }
}

pub fn mig(uuid: &str, profile: &str, memory: DeviceMemory) -> MigSample {
    MigSample {
        // Each its own GPU instance; tests of several compute instances in one set the ids.
        info: MigInfo {
            profile: Some(profile.into()),
            memory: Some(memory),
            ..MigInfo::new(uuid.into())
        },
        problems: Default::default(),
    }
}

/// A visible, running process without a feed.
pub fn process(pid: u32, device_uuid: &str, used: Option<u64>) -> ProcessSample {
    ProcessSample {
        pid,
        device_uuid: device_uuid.into(),
        used,
        kind: ContextKind::Compute,
        mps: false,
        visible: true,
        hidden: false,
        proc_state: Some("R".into()),
        start_time: Some(u64::from(pid) * 10),
        user: Some("alice".into()),
        command: Some(format!("python train.py --rank {pid}")),
        sm_util: Some(40),
        executable: Some("/usr/bin/python3.11".into()),
        cpu_percent: None,
        host_memory: None,
        elapsed: None,
        owner: None,
        feed: None,
    }
}

/// Allocator statistics of device 0 read at `time`, the pool unchanged since `since`.
pub fn stats(allocated: u64, reserved: u64, since: f64, time: f64) -> AllocatorStats {
    AllocatorStats {
        allocated,
        reserved: Some(reserved),
        inactive_split: Some(0),
        peak_allocated: Some(allocated),
        peak_reserved: Some(reserved),
        alloc_retries: Some(0),
        ooms: Some(0),
        reserved_since: Some(since),
        time,
        ..AllocatorStats::default()
    }
}

/// A torch feed with the native backend, read at `time`, attached as matching would.
pub fn feed(allocated: u64, reserved: u64, inactive_split: Option<u64>, time: f64) -> FeedSample {
    FeedSample {
        framework: "torch".into(),
        framework_version: Some("2.5.1".into()),
        backend: "native".into(),
        feed: 0,
        stats: AllocatorStats {
            inactive_split,
            ..stats(allocated, reserved, time, time)
        },
    }
}

/// A JAX feed of XLA's cuda_async allocator read at `time`: `allocated` known, the pool
/// (`reserved`, its peak, the largest free block) not reported.
pub fn unpooled_feed(allocated: u64, time: f64) -> FeedSample {
    let reason = "not reported by XLA's cuda_async allocator".to_string();
    FeedSample {
        framework: "jax".into(),
        framework_version: Some("0.10.2".into()),
        backend: "cuda_async".into(),
        feed: 0,
        stats: AllocatorStats {
            allocated,
            peak_allocated: Some(allocated),
            time,
            unreported: [
                "reserved",
                "peak_reserved",
                "largest_free_block",
                "inactive_split",
            ]
            .into_iter()
            .map(|f| (f.to_string(), reason.clone()))
            .collect(),
            ..AllocatorStats::default()
        },
    }
}

/// The feed of `pid`, run by `uid`, as the monitor holds it once the agent is trusted: found
/// in its user's feed dir (`/tmp/strata-<uid>/<pid>.sock`), the kernel's credentials naming
/// `pid` (in the monitor's namespace and its own), a `hello` that says only its pid, no
/// readings yet, nothing counted. Tests set what they are about with struct update syntax:
/// `FeedRecord { devices, ..feed_record(7, 0) }`.
pub fn feed_record(pid: u32, uid: u32) -> FeedRecord {
    FeedRecord {
        socket: format!("/tmp/strata-{uid}/{pid}.sock"),
        found_via: FoundVia::FeedDir,
        peer: Some(PeerCred { pid, uid, gid: uid }),
        nspid: Some(pid),
        state: FeedState::Connected,
        hello: Some(
            Hello {
                pid,
                ..Hello::default()
            }
            .into(),
        ),
        devices: Vec::new(),
        ooms: Vec::new(),
        counters: FeedCounters::default(),
        connected_at: None,
        last_heard: None,
        segments: None,
        sites: None,
    }
}

/// [`feed_record`] of `pid` (run by root) whose hello names device 0 as `GPU-test-0` (as
/// [`gpu`]`(0, ..)` makes it), with `latest` and the readings before it.
pub fn feed_on_gpu_0(pid: u32, latest: AllocatorStats, earlier: Vec<AllocatorStats>) -> FeedRecord {
    FeedRecord {
        hello: Some(
            Hello {
                pid,
                devices: vec![FeedDevice {
                    index: 0,
                    uuid: Some("GPU-test-0".into()),
                    ..FeedDevice::default()
                }],
                ..Hello::default()
            }
            .into(),
        ),
        devices: vec![DeviceFeed { latest, earlier }],
        ..feed_record(pid, 0)
    }
}

/// The judgement of feeds already attached to a sample's processes (as [`feed`] makes them),
/// for tests that start after matching.
pub fn judged(sample: &NodeSample) -> Attachment {
    let window = STALE_INTERVALS * sample.interval;
    Attachment {
        statuses: sample
            .processes
            .iter()
            .map(|p| match &p.feed {
                Some(f) => judge(sample.time, window, &f.stats, p.used),
                None => FeedStatus::Absent,
            })
            .collect(),
        unlisted: Vec::new(),
    }
}

/// Deterministic noise in [-1, 1] from two numbers, for the benchmarks' synthetic nodes (the
/// demo has its own, `source::demo::noise`, whose stream its story is tuned to).
pub fn noise(a: u64, b: u64) -> f64 {
    let mut x = a
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(b.wrapping_mul(0xBF58_476D_1CE4_E5B9));
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 29;
    (x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

/// A directory of its own for one test, under the system's temporary directory, removed when
/// the test ends (passed or failed).
#[cfg(test)]
pub(crate) struct TempDir(std::path::PathBuf);

#[cfg(test)]
impl TempDir {
    /// `strata-NAME-PID-N`: made empty, told apart from every other of this test process.
    /// A test that cannot make its directory fails there.
    #[allow(clippy::expect_used)]
    pub(crate) fn new(name: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("strata-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    pub(crate) fn path(&self) -> &std::path::Path {
        &self.0
    }
}

#[cfg(test)]
impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

#[cfg(test)]
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A segment map of device 0 taken at `time`: 12 segments of 2 GiB in the large pool, each
/// pinned by a few MiB of live blocks, one drawn as a strip; 600 MiB the largest free block.
pub fn segment_map(time: f64) -> crate::sample::pool::SegmentsReport {
    use crate::sample::pool::*;
    let mib = 1u64 << 20;
    let gib = 1u64 << 30;
    SegmentsReport {
        time,
        took: Some(0.004),
        devices: vec![DeviceSegments {
            index: 0,
            pools: vec![PoolMap {
                pool: "large".into(),
                expandable: false,
                segments: 12,
                reserved: 24 * gib,
                live: 63 * mib,
                pending_free: 0,
                free: 24 * gib - 63 * mib,
                largest_free: 600 * mib,
                free_blocks: vec![FreeBucket {
                    at_least: 512 * mib,
                    blocks: 1,
                    bytes: 24 * gib - 63 * mib,
                }],
                pinned: Pinned {
                    segments: 12,
                    reserved: 24 * gib,
                    live: 63 * mib,
                },
            }],
            strips: vec![SegmentStrip {
                pool: "large".into(),
                expandable: false,
                size: 2 * gib,
                live: 5 * mib,
                free: 2 * gib - 5 * mib,
                largest_free: 600 * mib,
                pinned: true,
                runs: vec![
                    (gib, RunState::Free),
                    (5 * mib, RunState::Live),
                    (gib - 5 * mib, RunState::Free),
                ],
            }],
            strips_left_out: 11,
        }],
    }
}

/// A finished 60 s sites window of device 0 that ended at `end`: `site` grew by `grew` bytes
/// (600 allocations, 539 freed) and holds them live.
pub fn sites_window(end: f64, site: &str, grew: u64) -> crate::sample::pool::SitesReport {
    use crate::sample::pool::*;
    SitesReport {
        time: end,
        id: 7,
        state: SitesState::Done,
        reason: None,
        started: Some(end - 60.0),
        seconds: Some(60.0),
        window: Some(60.0),
        history: Some("agent".into()),
        entries: Some(2400),
        dropped: Some(0),
        cost: SitesCost {
            cpu: Some(0.018),
            gil_max: Some(0.0031),
            snapshot: Some(0.006),
        },
        stopped: None,
        devices: vec![DeviceSites {
            index: 0,
            live: vec![SiteLive {
                site: site.into(),
                via: vec!["train.py:40 in main".into()],
                bytes: grew,
                count: 61,
            }],
            live_bytes: grew + (90 << 20),
            live_blocks: 70,
            live_unattributed: 90 << 20,
            growth: vec![SiteGrowth {
                site: site.into(),
                via: vec![],
                bytes: grew,
                allocs: 600,
                frees: 539,
            }],
            growth_bytes: grew,
        }],
    }
}

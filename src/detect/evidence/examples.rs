//! Evidence of every shape of every kind, its optional fields known: what the tests of
//! evidence and of its views read.

use super::units::*;
use super::*;
use crate::accounting::Gap;
use crate::layers::Layer;

pub(crate) const NOW: f64 = 1_767_258_905.0;
const GIB: u64 = 1 << 30;

fn holder(pid: u32, listed: bool) -> Holder {
    Holder {
        command: Some("python pretrain.py".into()),
        listed,
        parent_command: Some("/sbin/init".into()),
        pid: Pid(pid),
        ppid: Some(Pid(1)),
        start_time: Some(Ticks(25_380_000)),
        state: Some("S".into()),
        user: Some("dave".into()),
    }
}

fn suspicious() -> Suspicious {
    Suspicious {
        in_place_of: "socket".into(),
        kind: "symbolic link".into(),
        owner: Uid(1000),
        path: "/tmp/strata-1000/4021.sock".into(),
        pids: vec![Pid(4021)],
        target: Some("/etc/passwd".into()),
    }
}

fn cut_short() -> CutShort {
    CutShort {
        dir: "/tmp/strata-1000".into(),
        entries: Count(4096),
        entries_capped: true,
        read: Count(1024),
    }
}

/// Evidence of every shape of every kind, its optional fields known (and, where a field may
/// be absent, once without it).
pub(crate) fn examples() -> Vec<Evidence> {
    let holding = Holding {
        device_file: IfKnown(Some("/dev/nvidia2".into())),
        holders: IfKnown(Some(vec![holder(31342, false), holder(52010, true)])),
        used: Some(Bytes(2_254_438_400)),
    };
    let held_group = HeldGroup {
        bytes: Bytes(9 * GIB),
        devices: vec!["GPU-a".into(), "GPU-b".into()],
        holders: IfKnown(Some(vec![holder(31342, false)])),
        pids: vec![Pid(4021), Pid(4022)],
    };
    let climb = Climb {
        bytes_per_step: IfKnown(Some(BytesPerStep(12_582_912))),
        cause: Layer::Live.name().into(),
        duration_secs: Secs(800.0),
        from_bytes: Bytes(7_091_363_840),
        grew_most_at: IfKnown(Some("train.py:118 in evaluate".into())),
        grew_most_bytes: IfKnown(Some(Bytes(639_631_360))),
        grew_most_window_secs: IfKnown(Some(Secs(60.0))),
        rate_mib_per_min: MibPerMin(635.8),
        series: "allocated".into(),
        start: Time(NOW - 800.0),
        steps: IfKnown(Some(Steps(340))),
        to_bytes: Bytes(15_569_256_448),
        warm_up_end: IfKnown(Some("knee".into())),
        warm_up_end_step: IfKnown(Some(Steps(40))),
        warm_up_end_time: IfKnown(Some(Time(NOW - 900.0))),
        window_secs: Secs(600.0),
    };
    let forecast = Forecast {
        available_bytes: Bytes(3 * GIB),
        bytes_per_step: Some(BytesPerStep(-4096)),
        cause: Layer::Live.name().into(),
        device_free_bytes: Bytes(2 * GIB),
        eta_secs: Secs(1260.0),
        eta_step: Some(Steps(800)),
        level_bytes: Bytes(70 * GIB),
        level_source: "allocator".into(),
        limit_bytes: Bytes(73 * GIB),
        oom_at: Time(NOW + 1260.0),
        peak_window_secs: Secs(900.0),
        rate_bytes_per_sec: BytesPerSec(1_048_576.0),
        series: "allocated".into(),
        start: Time(NOW - 600.0),
    };
    vec![
        Evidence::ZombieContext(holding.clone()),
        Evidence::ZombieContext(Holding {
            device_file: IfKnown(None),
            holders: IfKnown(None),
            used: None,
        }),
        Evidence::ZombieContexts(held_group.clone()),
        Evidence::NotVisibleHolder(Holding {
            device_file: IfKnown(None),
            holders: IfKnown(None),
            used: Some(Bytes(GIB)),
        }),
        Evidence::NotVisibleHolders(HeldGroup {
            holders: IfKnown(None),
            ..held_group
        }),
        Evidence::UnattributedMemory(Unattributed {
            bytes: Bytes(3 * GIB),
            pids: vec![Pid(38811), Pid(4021)],
        }),
        Evidence::UnexplainedUsage(Unexplained {
            bytes: Bytes(GIB),
            device: "GPU 2".into(),
            other: Some(Bytes(2 * GIB)),
        }),
        Evidence::UnexplainedUsages(UnexplainedGroup {
            bytes: Bytes(2 * GIB),
            devices: vec![
                UnexplainedDevice {
                    bytes: Bytes(GIB),
                    device: "GPU 0".into(),
                    other: Some(Bytes(GIB + 4096)),
                    uuid: Some("GPU-a".into()),
                },
                UnexplainedDevice {
                    bytes: Bytes(GIB),
                    device: "GPU 1".into(),
                    other: None,
                    uuid: None,
                },
            ],
        }),
        Evidence::StaleFeed(Stale { age: Secs(12.5) }),
        Evidence::InconsistentFeed(Nothing {}),
        Evidence::GpuLost(Nothing {}),
        Evidence::InconsistentCounters(Contradiction::from(&Gap::MemoryDoesNotAddUp {
            total: 80 * GIB,
            reserved: GIB,
            used: 70 * GIB,
            free: 10 * GIB,
        })),
        Evidence::InconsistentCounters(Contradiction::from(&Gap::ProcessesExceedOccupied {
            attributed: 3 * GIB,
            occupied: 2 * GIB,
        })),
        Evidence::InconsistentCounters(Contradiction::from(&Gap::ImplausibleProcess {
            pid: 0,
            used: None,
        })),
        Evidence::RefusedFeed(Refused {
            socket: "/tmp/strata-1000/4021.sock".into(),
        }),
        Evidence::FeedBadInput(BadInput {
            floods: Count(1),
            invalid: Count(2),
            lines: Count(1000),
            malformed: Count(3),
            oversized: Count(4),
            rate_limited: Count(5),
            samples: Count(900),
            unknown_type: Count(6),
            unknown_version: Count(7),
        }),
        Evidence::FeedDeviceUnlisted(Unlisted {
            index: Index(1),
            reason: "NVML lists PID 4021 on GPU 0 only".into(),
        }),
        Evidence::FeedDevicesUnlisted(UnlistedGroup {
            devices: vec![
                UnlistedDevice {
                    index: Index(1),
                    reason: "not listed".into(),
                    uuid: Some("GPU-b".into()),
                },
                UnlistedDevice {
                    index: Index(2),
                    reason: "not listed".into(),
                    uuid: None,
                },
            ],
        }),
        Evidence::FeedDirCutShort(cut_short()),
        Evidence::FeedDirsCutShort(CutShortGroup {
            dirs: Count(5),
            first: vec![cut_short(), cut_short()],
        }),
        Evidence::SuspiciousFeedEntry(suspicious()),
        Evidence::SuspiciousFeedEntries(SuspiciousGroup {
            entries: Count(4),
            first: vec![
                suspicious(),
                Suspicious {
                    pids: Vec::new(),
                    target: None,
                    ..suspicious()
                },
            ],
            owners: vec![Uid(0), Uid(1000)],
        }),
        Evidence::NvmlProblem(NvmlError {
            error: "Insufficient Permissions".into(),
        }),
        Evidence::Climb(climb.clone()),
        Evidence::Climb(Climb {
            bytes_per_step: IfKnown(None),
            grew_most_at: IfKnown(None),
            grew_most_bytes: IfKnown(None),
            grew_most_window_secs: IfKnown(None),
            steps: IfKnown(None),
            warm_up_end: IfKnown(None),
            warm_up_end_step: IfKnown(None),
            warm_up_end_time: IfKnown(None),
            ..climb
        }),
        Evidence::Fragmentation(Fragmentation {
            expandable_segments: IfKnown(Some(false)),
            framework: IfKnown(Some("torch".into())),
            grown_bytes: Some(Bytes(GIB)),
            growth_window_secs: Secs(600.0),
            inactive_split_bytes: Bytes(5 * GIB),
            largest_free_block: Some(Bytes(64 << 20)),
            pinned_live: IfKnown(Some(Bytes(63 << 20))),
            pinned_reserved: IfKnown(Some(Bytes(4 * GIB))),
            pinned_segments: IfKnown(Some(Count(2))),
            reason: vec!["growing".into(), "retries".into()],
            reserved_bytes: Bytes(20 * GIB),
            retries_in_window: Some(Count(12)),
            segment_map_time: IfKnown(Some(Time(NOW - 40.0))),
            share: Share(0.254),
            share_before: Some(Share(0.1)),
            share_floor: None,
            window_secs: Secs(600.0),
        }),
        Evidence::AllocRetries(Retries {
            rate_per_min: PerMin(394.2),
            retries_in_window: Count(1971),
            retries_total: Count(2000),
            window_secs: Secs(300.0),
        }),
        Evidence::Oom(Oom {
            allocated: Bytes(60 * GIB),
            class: "fragmentation".into(),
            could_have_bytes: Some(Bytes(78 * GIB)),
            device_free: Some(Bytes(GIB)),
            device_total: Some(Bytes(80 * GIB)),
            expandable_segments: IfKnown(Some(true)),
            framework: IfKnown(Some("torch".into())),
            inactive_split: Some(Bytes(9 * GIB)),
            largest_free_block: None,
            needed_bytes: Some(Bytes(62 * GIB)),
            ooms_in_window: Some(Count(3)),
            ooms_total: Some(Count(3)),
            pinned_live: IfKnown(Some(Bytes(63 << 20))),
            pinned_reserved: IfKnown(Some(Bytes(24 * GIB))),
            pinned_segments: IfKnown(Some(Count(12))),
            requested: Some(Bytes(2_684_354_560)),
            reserved: Some(Bytes(77 * GIB)),
            segment_map_time: IfKnown(Some(Time(NOW - 50.0))),
            time: Some(Time(NOW - 30.0)),
        }),
        Evidence::Capacity(Capacity {
            holdable: Bytes(70 * GIB),
            peak_live: Bytes(69 * GIB),
            total: Bytes(80 * GIB),
            window_secs: Secs(900.0),
        }),
        Evidence::IdleHolder(Idle {
            idle_secs: Secs(1800.0),
            sm_mean_pct: Pct::Mean(0.5),
            sm_peak_limit_pct: Pct::Whole(10),
            sm_peak_pct: Pct::Whole(1),
            sm_threshold_pct: Pct::Whole(2),
            used: Bytes(4 * GIB),
            window_secs: Secs(300.0),
        }),
        Evidence::OomForecast(forecast.clone()),
        Evidence::WarmUp(WarmUpVerdict {
            headroom_bytes: SignedBytes(-(512 << 20)),
            held_secs: Secs(95.5),
            held_steps: Steps(50),
            peak_live_bytes: Bytes(70 * GIB),
            peak_window_secs: Secs(900.0),
            spread_bytes: Bytes(3 << 20),
            steps: Steps(120),
            usable_bytes: Bytes(69 * GIB + (512 << 20)),
            verdict: Verdict::WillNotFit,
        }),
        Evidence::WarmUp(WarmUpVerdict {
            headroom_bytes: SignedBytes(GIB as i64),
            held_secs: Secs(95.5),
            held_steps: Steps(50),
            peak_live_bytes: Bytes(70 * GIB),
            peak_window_secs: Secs(900.0),
            spread_bytes: Bytes(3 << 20),
            steps: Steps(120),
            usable_bytes: Bytes(71 * GIB),
            verdict: Verdict::Fits,
        }),
        Evidence::WarmUpForecast(WarmUpForecast {
            eta_secs: Some(forecast.eta_secs),
            eta_step: None,
            oom_at: Some(forecast.oom_at),
            steps: Steps(120),
            verdict: Verdict::WillNotFit,
        }),
        Evidence::WarmingUp(Warming {
            allocated: Bytes(30 * GIB),
            bytes_per_step: BytesPerStep(8 << 20),
            steps: Steps(12),
            verdict: Verdict::WarmingUp,
            warming_secs: Secs(42.0),
        }),
    ]
}

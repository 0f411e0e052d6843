//! The defects an independent labelled set found, each as the pipeline meets it: an OOM of
//! fragmentation called capacity, an OOM's evidence that forgot its report, slow or sitting
//! fragmentation never flagged, recordings of the older shape read without their feeds, and
//! figures derived from a bound shown as exact.

use super::*;
use crate::fixtures::*;
use crate::pipeline::Pipeline;
use crate::sample::feed::{DeviceFeed, FeedDevice, FeedRecord, Hello, OomReport};
use crate::sample::{AllocatorStats, DeviceMemory, NodeSample};

const PID: u32 = 4100;

/// One GPU of `total` bytes (512 MiB reserved by the driver) with one fed process whose
/// NVML used is `beyond_pool` + its pool; the feed read 0.2 s before NVML.
pub(super) fn fed_node(
    time: f64,
    total: u64,
    beyond_pool: u64,
    stats: AllocatorStats,
) -> NodeSample {
    let mut s = node();
    s.time = time;
    let used = beyond_pool + stats.reserved.unwrap_or(0);
    s.gpus.push(gpu(
        0,
        DeviceMemory {
            total,
            used,
            free: total - 512 * MIB - used,
            driver_reserved: Some(512 * MIB),
        },
    ));
    s.processes.push(process(PID, "GPU-test-0", Some(used)));
    s.feeds.push(FeedRecord {
        hello: Some(
            Hello {
                pid: PID,
                time: 0.0,
                interval: Some(0.5),
                framework: Some("torch".into()),
                backend: Some("native".into()),
                devices: vec![FeedDevice {
                    index: 0,
                    uuid: Some("GPU-test-0".into()),
                    ..FeedDevice::default()
                }],
                ..Hello::default()
            }
            .into(),
        ),
        devices: vec![DeviceFeed {
            latest: AllocatorStats {
                time: time - 0.2,
                ..stats
            },
            earlier: Vec::new(),
        }],
        connected_at: Some(0.0),
        last_heard: Some(time - 0.2),
        ..feed_record(PID, 0)
    });
    s
}

pub(super) fn pool(allocated: u64, reserved: u64, split: u64) -> AllocatorStats {
    AllocatorStats {
        inactive_split: Some(split),
        ..stats(allocated, reserved, 0.0, 0.0)
    }
}

fn of_kind(findings: &[Finding], kind: FindingKind) -> Option<&Finding> {
    findings.iter().find(|f| f.kind == kind)
}

/// 22 GiB live in a 36 GiB pool (6 GiB of it split pieces, 8 GiB cached) with 6 GiB free on
/// the device: a request of 12 GiB fits in all (22 + 12 is below the 42 GiB the pool could
/// have), so the failure is the pool's shape, not the device's size.
#[test]
fn an_oom_that_fits_the_device_is_fragmentation_whatever_the_block_size_known() {
    let at_oom = AllocatorStats {
        largest_free_block: None,
        ..pool(22 * GIB, 36 * GIB, 6 * GIB)
    };
    let report = OomReport {
        time: 1000.0,
        seq: 1,
        index: 0,
        requested: Some(12 * GIB),
        device_free: Some(6 * GIB),
        device_total: Some(45 * GIB),
        stats: Some(at_oom.clone()),
    };
    let (class, why) = diagnosis::classify(Some(&report), &at_oom);
    assert_eq!(class, "fragmentation", "{why}");
    assert!(!why.contains("more than the device holds"), "{why}");
    // 21 GiB more than the 22 live is past the 42 GiB the pool could ever have: capacity.
    let bigger = OomReport {
        requested: Some(21 * GIB),
        ..report.clone()
    };
    assert_eq!(diagnosis::classify(Some(&bigger), &at_oom).0, "capacity");
    // Without a request size the class cannot be told: said, not defaulted.
    let no_size = OomReport {
        requested: None,
        ..report
    };
    let (class, why) = diagnosis::classify(Some(&no_size), &at_oom);
    assert_eq!(class, "uncertain", "{why}");
    assert!(why.contains("request"), "{why}");
    assert_eq!(diagnosis::classify(None, &at_oom).0, "uncertain");
}

/// Without a pool figure (XLA's cuda_async) what the pool could give is unknown: the class
/// is said to be uncertain, and why, never guessed.
#[test]
fn an_oom_of_an_allocator_without_a_pool_figure_is_uncertain() {
    let at_oom = AllocatorStats {
        reserved: None,
        ..pool(22 * GIB, 36 * GIB, 0)
    };
    let report = OomReport {
        time: 1000.0,
        seq: 1,
        index: 0,
        requested: Some(40 * GIB),
        device_free: Some(6 * GIB),
        device_total: Some(45 * GIB),
        stats: Some(at_oom.clone()),
    };
    let (class, why) = diagnosis::classify(Some(&report), &at_oom);
    assert_eq!(class, "uncertain", "{why}");
    assert!(why.contains("does not report its pool"), "{why}");
}

/// Without a pool figure, the unsplit rest of NVML's figure may climb while the live tensors
/// stay flat (a growing pool cache, NCCL): still a climb of that process, said as such.
#[test]
fn a_climb_beyond_the_live_tensors_of_an_allocator_without_a_pool_figure_is_raised() {
    let mut pipeline = Pipeline::new(None);
    let mut last = Vec::new();
    for i in 0..=180u32 {
        let t = 10_000.0 + f64::from(i) * 5.0;
        let mut stats = unpooled_feed(8 * GIB, t).stats;
        stats.seq = u64::from(i);
        // 40 MiB a minute beyond the 8 GiB live.
        let beyond = 2 * GIB + u64::from(i) * 40 * MIB / 12;
        let sample = fed_node(t, 80 * GIB, beyond, stats);
        last = pipeline.ingest(sample).findings;
    }
    let climb =
        of_kind(&last, FindingKind::Climb).unwrap_or_else(|| panic!("no climb in {last:?}"));
    assert_eq!(climb.pid, Some(PID));
    assert_eq!(
        climb.evidence.to_json()["cause"],
        "unattributed",
        "{:?}",
        climb.evidence
    );
}

/// The OOM's report arrives once (the line after it happened); the counter says it later.
#[test]
fn an_ooms_evidence_keeps_its_report_while_it_is_shown() {
    let mut pipeline = Pipeline::new(None);
    let mut last = Vec::new();
    for i in 0..20u32 {
        let t = 1000.0 + 5.0 * f64::from(i);
        let mut stats = pool(30 * GIB, 40 * GIB, 2 * GIB);
        stats.ooms = Some(u64::from(i >= 2));
        let mut s = fed_node(t, 80 * GIB, GIB, stats.clone());
        s.interval = 5.0;
        if i == 2 {
            s.feeds[0].ooms.push(OomReport {
                time: t - 1.0,
                seq: 7,
                index: 0,
                requested: Some(3 * GIB),
                device_free: Some(7 * GIB),
                device_total: Some(80 * GIB),
                stats: Some(stats),
            });
        }
        last = pipeline.ingest(s).findings;
        if i >= 2 {
            let oom = of_kind(&last, FindingKind::Oom).expect("the OOM is shown");
            assert_eq!(
                oom.evidence.to_json()["requested"],
                3 * GIB,
                "sample {i}: {oom:?}"
            );
            assert_eq!(oom.evidence.to_json()["device_free"], 7 * GIB, "sample {i}");
            assert_eq!(
                oom.evidence.to_json()["device_total"],
                80 * GIB,
                "sample {i}"
            );
        }
    }
    let oom = of_kind(&last, FindingKind::Oom).expect("still shown");
    assert!(oom.message.contains("3.00 GiB"), "{}", oom.message);
}

/// Split pieces over `minutes` at 5 s, the pool flat at 60 GiB; `split(t)` bytes at `t`
/// seconds, retries counted by `retries(t)`. The first time fragmentation is raised, if ever.
pub(super) fn fragmentation_raised(
    minutes: u32,
    split: impl Fn(f64) -> u64,
    retries: impl Fn(f64) -> u64,
) -> Option<f64> {
    let mut pipeline = Pipeline::new(None);
    for k in 0..=(minutes * 12) {
        let t = 5.0 * f64::from(k);
        let mut stats = pool(30 * GIB, 60 * GIB, split(t));
        stats.alloc_retries = Some(retries(t));
        let mut s = fed_node(1000.0 + t, 80 * GIB, GIB, stats);
        s.interval = 5.0;
        let findings = pipeline.ingest(s).findings;
        if of_kind(&findings, FindingKind::Fragmentation).is_some() {
            return Some(t);
        }
    }
    None
}

#[test]
fn fragmentation_is_flagged_by_its_level_and_its_retries_at_any_pace() {
    let pool = 60.0 * GIB as f64;
    // From 3 % of the pool, 0.4 points a minute (never 5 points in 10 minutes), retries
    // from minute 10.
    let slow = |t: f64| (pool * (0.03 + 0.004 * t / 60.0)) as u64;
    let retrying = |t: f64| ((t - 600.0).max(0.0) / 20.0) as u64;
    let raised = fragmentation_raised(35, slow, retrying).expect("slow fragmentation flagged");
    assert!(raised <= 30.0 * 60.0, "raised at {raised} s");
    // A share that sits at 22 % of the pool without shrinking, no retries at all.
    let sitting = |_t: f64| (pool * 0.22) as u64;
    let raised = fragmentation_raised(25, sitting, |_| 0).expect("sitting fragmentation");
    assert!(raised <= 15.0 * 60.0, "raised at {raised} s");
}

#[test]
fn split_pieces_that_come_and_go_within_each_step_are_no_fragmentation() {
    let pool = 60.0 * GIB as f64;
    // Up to 30 % of the pool in split pieces within each 70 s step, gone at its end.
    let saw = |t: f64| (pool * 0.3 * ((t % 70.0) / 70.0)) as u64;
    assert_eq!(fragmentation_raised(40, saw, |_| 0), None);
    // The same with the odd retry during a step: still gone at every step's end.
    assert_eq!(fragmentation_raised(40, saw, |t| (t / 300.0) as u64), None);
}

/// A line of the snapshot's derived form: allocator figures in `processes[].feed`, no
/// `feeds`.
#[test]
fn a_recording_in_the_older_shape_is_read_with_its_allocator_figures() {
    let mut pipeline = Pipeline::new(None);
    let observed = pipeline.ingest(fed_node(
        1000.0,
        80 * GIB,
        GIB,
        pool(20 * GIB, 30 * GIB, GIB),
    ));
    let mut line = serde_json::to_value(crate::snapshot::Snapshot::of(&observed)).expect("json");
    line.as_object_mut().expect("object").remove("feeds");
    let old: NodeSample = serde_json::from_value(line).expect("a sample");
    let read = Pipeline::new(None).ingest(old);
    let p = &read.sample.processes[0];
    assert!(p.feed.is_some(), "the allocator figures are read");
    assert_eq!(read.account.processes[0].layers.live, Some(20 * GIB));
    assert_eq!(read.account.processes[0].layers.fragmented, Some(GIB));
}

/// A monitor that meets a job after its warm-up, with memory outside the pool at every
/// reading: its context estimate is an upper bound, memory outside the pool a lower one.
#[test]
fn figures_derived_from_a_bound_are_marked_as_bounds_in_the_json() {
    let mut pipeline = Pipeline::new(None);
    let mut observed = None;
    for i in 0..3u32 {
        let t = 1000.0 + f64::from(i);
        let mut stats = pool(20 * GIB, 30 * GIB, GIB);
        stats.reserved_since = Some(990.0);
        // 530 MiB of context and 700 MiB outside the pool, from before the monitor.
        observed = Some(pipeline.ingest(fed_node(t, 80 * GIB, 1230 * MIB, stats)));
    }
    let observed = observed.expect("observed");
    assert_eq!(
        observed.account.processes[0].context_source,
        Some(crate::context::ContextSource::Estimated)
    );
    let json = serde_json::to_value(crate::snapshot::Snapshot::of(&observed)).expect("json");
    let bounds = serde_json::json!({"context": "upper", "outside_pool": "lower"});
    assert_eq!(
        json["processes"][0]["bounds"], bounds,
        "{}",
        json["processes"][0]
    );
    assert_eq!(json["gpus"][0]["bounds"], bounds, "{}", json["gpus"][0]);
    let text = crate::snapshot::text(&observed, false);
    assert!(text.contains("≥0 B"), "{text}");
}

/// The agent's own reading of its context right after CUDA init, while its pool was empty,
/// in its hello: a monitor that meets the job later uses it, and says so.
#[test]
fn a_context_the_agent_reported_is_used_by_a_late_monitor() {
    let mut pipeline = Pipeline::new(None);
    let mut observed = None;
    for i in 0..3u32 {
        let t = 1000.0 + f64::from(i);
        let mut stats = pool(20 * GIB, 30 * GIB, GIB);
        stats.reserved_since = Some(990.0);
        let sample = fed_node(t, 80 * GIB, 1230 * MIB, stats);
        let mut value = serde_json::to_value(&sample).expect("json");
        value["feeds"][0]["hello"]["devices"][0]["context"] = serde_json::json!({
            "bytes": 530 * MIB,
            "time": 12.5,
            "reserved": 0,
            "method": "nvml_process_used",
        });
        let sample: NodeSample = serde_json::from_value(value).expect("sample");
        observed = Some(pipeline.ingest(sample));
    }
    let observed = observed.expect("observed");
    let account = &observed.account.processes[0];
    assert_eq!(account.layers.context, Some(530 * MIB));
    assert_eq!(account.layers.outside_pool, Some(700 * MIB));
    let json = serde_json::to_value(crate::snapshot::Snapshot::of(&observed)).expect("json");
    assert_eq!(json["processes"][0]["context_source"], "reported");
    assert_eq!(json["processes"][0]["bounds"], serde_json::json!({}));
}

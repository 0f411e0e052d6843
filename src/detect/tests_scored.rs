//! The defects a second outside scoring on labelled recordings found, each as the pipeline
//! meets it.

use super::tests_defects::{fed_node, fragmentation_raised, pool};
use super::*;
use crate::fixtures::*;
use crate::pipeline::Pipeline;
use crate::sample::feed::FeedState;

/// A fed process that exits: NVML stops listing it at once, while the monitor keeps its
/// closed feed (with the last statistics) for up to a minute.
#[test]
fn the_closed_feed_of_a_process_that_exited_is_not_a_device_unlisted() {
    let mut pipeline = Pipeline::new(None);
    let running = fed_node(1000.0, 80 * GIB, GIB, pool(20 * GIB, 30 * GIB, GIB));
    assert!(pipeline
        .ingest(running.clone())
        .findings
        .iter()
        .all(|f| f.kind != FindingKind::FeedDeviceUnlisted));
    for i in 1..=12u32 {
        let mut exited = running.clone();
        exited.time += 5.0 * f64::from(i);
        exited.processes.clear();
        exited.gpus[0].memory = Some(memory(80 * GIB, 0));
        exited.feeds[0].state = FeedState::Closed {
            reason: "the agent said bye".into(),
        };
        let observed = pipeline.ingest(exited);
        let unlisted: Vec<&Finding> = observed
            .findings
            .iter()
            .filter(|f| f.kind == FindingKind::FeedDeviceUnlisted)
            .collect();
        assert!(
            unlisted.is_empty(),
            "{}s after the exit: {unlisted:#?}",
            5 * i
        );
    }
}

const PID: u32 = 4300;

/// One GPU where a process holds 10 GiB, sampled every 5 s for `minutes`, its SM at
/// `sm(k)` at the k-th sample: the first idle-holder finding, if ever.
fn idle_raised(minutes: u32, sm: impl Fn(u32) -> u32) -> Option<Finding> {
    let mut pipeline = Pipeline::new(None);
    for k in 0..=(minutes * 12) {
        let mut s = node();
        s.time = 1000.0 + 5.0 * f64::from(k);
        s.interval = 5.0;
        s.gpus.push(gpu(0, memory(80 * GIB, 10 * GIB)));
        let mut p = process(PID, "GPU-test-0", Some(10 * GIB));
        p.sm_util = Some(sm(k));
        s.processes.push(p);
        let findings = pipeline.ingest(s).findings;
        if let Some(f) = findings
            .into_iter()
            .find(|f| f.kind == FindingKind::IdleHolder)
        {
            return Some(f);
        }
    }
    None
}

/// A notebook that holds its memory and runs the odd tiny kernel: NVML reads 1 % every other
/// sample, never 0 in a whole chunk.
#[test]
fn a_holder_whose_sms_read_0_or_1_percent_is_idle() {
    let idle = idle_raised(20, |k| k % 2).expect("an idle holder");
    let at = idle.since - 1000.0;
    assert!(at <= 330.0, "raised at {at} s, after 5 minutes at 0-1 %");
    let mean = idle.evidence.to_json()["sm_mean_pct"]
        .as_f64()
        .expect("the mean said");
    assert!((0.4..=0.6).contains(&mean), "{:?}", idle.evidence);
    assert_eq!(
        idle.evidence.to_json()["sm_peak_pct"],
        1,
        "{:?}",
        idle.evidence
    );
    assert_eq!(
        idle.evidence.to_json()["sm_threshold_pct"],
        2,
        "{:?}",
        idle.evidence
    );
    assert!(!idle.message.contains("(0%)"), "{}", idle.message);
    assert!(idle.message.contains("0.5%"), "{}", idle.message);
}

/// Low SM that is work all the same: a job starved by its data loader (about 5 %), and one
/// that runs a burst every few minutes (a mean under 1 %, its peaks at 30 %).
#[test]
fn a_holder_with_low_but_real_sm_use_is_not_idle() {
    let starved = |k: u32| [0, 3, 5, 8, 10, 6, 4, 2][k as usize % 8];
    assert!(idle_raised(30, starved).is_none());
    let bursts = |k: u32| if k % 48 == 7 { 30 } else { 0 };
    assert!(idle_raised(30, bursts).is_none());
    // At exactly 0 % it is idle, as before.
    assert!(idle_raised(10, |_| 0).is_some());
}

/// Split pieces rising steadily at 0.2 points of the pool a minute (never 5 points in 10
/// minutes), with no retries: flagged soon after they pass a tenth of the pool, not once
/// they have sat at 15 % for ten minutes. Slower still (0.04 points a minute, 25 MiB a
/// minute), within the longest window that shows 512 MiB of it.
#[test]
fn a_slow_steady_rise_of_split_pieces_is_fragmentation_without_retries() {
    let pool = 60.0 * GIB as f64;
    // The odd piece left over within a step: up to 150 MiB above the floor.
    let jitter = |t: f64| (150.0 * MIB as f64 * noise(t as u64, 7).abs()) as u64;
    let steady = |t: f64| (pool * (0.06 + 0.002 * t / 60.0)) as u64 + jitter(t);
    let raised = fragmentation_raised(40, steady, |_| 0).expect("a steady rise flagged");
    // Past 10 % at minute 20.
    assert!(raised <= 25.0 * 60.0, "raised at {raised} s");
    let slower = |t: f64| (pool * (0.095 + 0.0004 * t / 60.0)) as u64 + jitter(t);
    let raised = fragmentation_raised(50, slower, |_| 0).expect("a slower rise flagged");
    assert!(raised <= 45.0 * 60.0, "raised at {raised} s");
}

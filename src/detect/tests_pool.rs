//! What an agent's sites window and segment map add to findings: the site a climb of live
//! tensors grew most at, and the segments that pin a fragmented pool.

use super::tests_defects::{fed_node, pool};
use super::*;
use crate::fixtures::*;
use crate::pipeline::Pipeline;
use crate::sample::pool::{DeviceSites, SiteGrowth, SitesCost, SitesReport, SitesState};
use crate::sample::AllocatorStats;
use std::sync::Arc;

fn of_kind(findings: &[Finding], kind: FindingKind) -> Option<&Finding> {
    findings.iter().find(|f| f.kind == kind)
}

fn window_ending(end: f64, index: u32, site: &str, grew: u64) -> SitesReport {
    SitesReport {
        time: end,
        id: 1,
        state: SitesState::Done,
        reason: None,
        started: Some(end - 60.0),
        seconds: Some(60.0),
        window: Some(60.0),
        history: Some("agent".into()),
        entries: Some(100),
        dropped: Some(0),
        cost: SitesCost::default(),
        stopped: None,
        devices: vec![DeviceSites {
            index,
            live: Vec::new(),
            live_bytes: grew,
            live_blocks: 1,
            live_unattributed: 0,
            growth: vec![
                SiteGrowth {
                    site: "data.py:12 in load".into(),
                    via: vec![],
                    bytes: grew / 10,
                    allocs: 3,
                    frees: 0,
                },
                SiteGrowth {
                    site: site.into(),
                    via: vec![],
                    bytes: grew,
                    allocs: 60,
                    frees: 0,
                },
            ],
            growth_bytes: grew + grew / 10,
        }],
    }
}

/// A job flat for `onset` seconds, then leaking 600 MiB/min, sampled every 5 s for 12
/// minutes past the onset; `sites(t)` is its feed's sites report at second `t` (unix time,
/// from 1000). The last climb finding.
fn leaking(onset: f64, sites: impl Fn(f64) -> Option<SitesReport>) -> Finding {
    let mut pipeline = Pipeline::new(None);
    let rate = 600.0 * MIB as f64 / 60.0;
    let mut last = None;
    let samples = ((onset + 720.0) / 5.0) as u32;
    for k in 0..=samples {
        let t = 5.0 * f64::from(k);
        let live = (20.0 * GIB as f64 + rate * (t - onset).max(0.0)) as u64;
        let mut s = fed_node(1000.0 + t, 80 * GIB, GIB, pool(live, live + 2 * GIB, 0));
        s.interval = 5.0;
        s.feeds[0].sites = sites(1000.0 + t).map(Arc::new);
        if let Some(f) = of_kind(&pipeline.ingest(s).findings, FindingKind::Climb) {
            last = Some(f.clone());
        }
    }
    last.expect("the leak is a climb")
}

#[test]
fn a_climb_names_the_site_that_grew_most_in_a_window_during_it() {
    // A window that ended at minute 10, well into the climb.
    let climb = leaking(120.0, |t| {
        (t >= 1600.0).then(|| window_ending(1600.0, 0, "train.py:118 in evaluate", 600 * MIB))
    });
    let e = climb.evidence.to_json();
    assert_eq!(e["cause"], "live");
    assert_eq!(e["grew_most_at"], "train.py:118 in evaluate");
    assert_eq!(e["grew_most_bytes"], 600 * MIB);
    assert_eq!(e["grew_most_window_secs"], 60.0);
    assert!(
        climb
            .message
            .ends_with("; grew most at train.py:118 in evaluate (+600 MiB over 1m00s)"),
        "{}",
        climb.message
    );
}

#[test]
fn a_window_from_before_the_climb_or_of_another_device_says_nothing_of_it() {
    // Ended before the climb's start (which the climb's evidence says): not this climb's.
    let before = leaking(120.0, |_| {
        Some(window_ending(900.0, 0, "old.py:1 in f", 600 * MIB))
    });
    let start = before.evidence.to_json()["start"]
        .as_f64()
        .expect("a start");
    assert!(start > 900.0, "the climb starts after the window: {start}");
    assert!(
        before.evidence.to_json().get("grew_most_at").is_none(),
        "{:?}",
        before.evidence
    );
    assert!(!before.message.contains("grew most"), "{}", before.message);
    // Of the job's other device.
    let other = leaking(120.0, |t| {
        (t >= 1600.0).then(|| window_ending(1600.0, 1, "train.py:118 in evaluate", 600 * MIB))
    });
    assert!(other.evidence.to_json().get("grew_most_at").is_none());
    // Still running, or refused: no summary, nothing said.
    let running = leaking(120.0, |t| {
        (t >= 1600.0).then(|| SitesReport {
            state: SitesState::Running,
            ..window_ending(1600.0, 0, "train.py:118 in evaluate", 600 * MIB)
        })
    });
    assert!(running.evidence.to_json().get("grew_most_at").is_none());
}

#[test]
fn fragmentation_names_the_segments_its_live_blocks_pin() {
    let gib = GIB;
    let map = segment_map;
    let mut pipeline = Pipeline::new(None);
    let mut found = None;
    for k in 0..=(25 * 12) {
        let t = 5.0 * f64::from(k);
        let mut s = fed_node(
            1000.0 + t,
            80 * GIB,
            GIB,
            pool(30 * GIB, 60 * GIB, (60.0 * GIB as f64 * 0.22) as u64),
        );
        s.interval = 5.0;
        s.feeds[0].segments = Some(Arc::new(map(1000.0 + t - t % 60.0)));
        if let Some(f) = of_kind(&pipeline.ingest(s).findings, FindingKind::Fragmentation) {
            found = Some(f.clone());
        }
    }
    let f = found.expect("sitting fragmentation");
    let e = f.evidence.to_json();
    assert_eq!(
        (
            e["pinned_segments"].as_u64(),
            e["pinned_reserved"].as_u64(),
            e["pinned_live"].as_u64()
        ),
        (Some(12), Some(24 * gib), Some(63 * MIB))
    );
    assert!(e["segment_map_time"].is_number());
    assert!(
        f.message
            .ends_with("; 12 segments (24.0 GiB) pinned by 63.0 MiB of live tensors"),
        "{}",
        f.message
    );
}

/// At a torch OOM (its observer's statistics) the pool beyond live tensors is split pieces by
/// construction: said so where torch does not count them (expandable segments), and not
/// claimed of statistics read at another time.
#[test]
fn at_a_torch_oom_what_the_pool_holds_beyond_live_tensors_is_split_pieces() {
    let at_oom = AllocatorStats {
        inactive_split: None,
        ..pool(22 * GIB, 36 * GIB, 0)
    };
    let report = crate::sample::feed::OomReport {
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
    assert!(
        why.contains(
            "14.0 GiB free in the pool, all of it in pieces of segments that hold live tensors"
        ),
        "{why}"
    );
    // The same figures read later, not at the OOM: only what they are.
    let later = crate::sample::feed::OomReport {
        stats: None,
        ..report
    };
    let (_, why) = diagnosis::classify(Some(&later), &at_oom);
    assert!(
        why.contains("14.0 GiB free in the pool") && !why.contains("all of it in pieces"),
        "{why}"
    );
}

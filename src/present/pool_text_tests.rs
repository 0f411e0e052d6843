use super::*;
use crate::sample::pool::{
    DeviceSegments, DeviceSites, FreeBucket, Pinned, PoolMap, RunState, SegmentStrip,
    SegmentsReport, SiteGrowth, SiteLive, SitesCost, SitesReport, SitesState,
};
use unicode_width::UnicodeWidthStr;
use RunState::{Free, Live, Mixed, Pending};

#[test]
fn a_bar_is_proportional_with_every_run_seen() {
    assert_eq!(bar(&[(50, Live), (50, Free)], 10), "#####.....");
    assert_eq!(bar(&[(1, Live), (2, Pending), (1, Mixed)], 8), "##~~~~??");
    // A sliver among giants still gets its cell.
    let b = bar(&[(1000, Live), (1, Free), (1000, Live), (1, Pending)], 10);
    assert_eq!(b.chars().count(), 10);
    assert_eq!(b.matches('.').count(), 1, "{b}");
    assert_eq!(b.matches('~').count(), 1, "{b}");
    assert!(b.starts_with('#') && b.contains("#.#"), "{b}");
    assert_eq!(bar(&[], 10), "");
    assert_eq!(bar(&[(5, Live)], 0), "");
    assert_eq!(bar(&[(0, Live), (5, Free)], 3), "...");
}

#[test]
fn a_bar_narrower_than_its_runs_marks_the_mixed_cells() {
    let runs: Vec<(u64, RunState)> = (0..100)
        .map(|i| (10, if i % 2 == 0 { Live } else { Free }))
        .collect();
    let b = bar(&runs, 10);
    assert_eq!(b, "??????????");
    // Runs that line up with the cells keep their glyphs.
    let runs = [
        (100, Live),
        (100, Free),
        (1, Live),
        (1, Free),
        (98, Pending),
    ];
    let b = bar(&runs, 3);
    assert_eq!(b, "#.?");
}

#[test]
fn every_bar_fills_its_width_whatever_the_runs() {
    for width in 1..40 {
        for n in 1..80u64 {
            let runs: Vec<(u64, RunState)> = (0..n)
                .map(|i| {
                    (
                        (i * 7919) % 1000 + 1,
                        [Live, Free, Pending][(i % 3) as usize],
                    )
                })
                .collect();
            let b = bar(&runs, width);
            assert_eq!(b.chars().count(), width, "{n} runs in {width}: {b}");
            if (n as usize) <= width {
                // Every run at least a cell: the glyph changes at least n-1 times.
                let changes = b
                    .chars()
                    .zip(b.chars().skip(1))
                    .filter(|(a, c)| a != c)
                    .count();
                assert_eq!(changes, n as usize - 1, "{b}");
            }
        }
    }
}

fn map() -> SegmentsReport {
    SegmentsReport {
        time: 0.0,
        took: None,
        devices: vec![DeviceSegments {
            index: 3,
            pools: vec![PoolMap {
                pool: "large".into(),
                expandable: false,
                segments: 12,
                reserved: 24 << 30,
                live: 60 << 20,
                pending_free: 0,
                free: (24 << 30) - (60 << 20),
                largest_free: 1 << 30,
                free_blocks: vec![FreeBucket {
                    at_least: 1 << 30,
                    blocks: 12,
                    bytes: 13 << 30,
                }],
                pinned: Pinned {
                    segments: 12,
                    reserved: 24 << 30,
                    live: 60 << 20,
                },
            }],
            strips: vec![SegmentStrip {
                pool: "large".into(),
                expandable: false,
                size: 2 << 30,
                live: 5 << 20,
                free: (2 << 30) - (5 << 20),
                largest_free: 1 << 30,
                pinned: true,
                runs: vec![
                    (1 << 30, Free),
                    (5 << 20, Live),
                    ((1 << 30) - (5 << 20), Free),
                ],
            }],
            strips_left_out: 11,
        }],
    }
}

#[test]
fn a_segment_map_is_a_table_a_histogram_and_bars() {
    let lines = segments(&map(), 100);
    let text = lines.join("\n");
    assert!(
        lines[0]
            .starts_with("device 3: 24.0 GiB reserved in 12 segments, largest free block 1.00 GiB"),
        "{text}"
    );
    assert!(
        text.contains("pinned, large: 12 segments (24.0 GiB) pinned by 60.0 MiB live"),
        "{text}"
    );
    assert!(text.contains("≥1.00 GiB ×12 (13.0 GiB)"), "{text}");
    assert!(text.contains("segments drawn: 1 of 12"), "{text}");
    let strip = lines.iter().find(|l| l.contains('[')).expect("a strip");
    assert!(strip.contains("pinned [") && strip.contains('#'), "{strip}");
    for line in &lines {
        assert!(line.width() <= 100, "{line}");
    }
    assert_eq!(
        segments(
            &SegmentsReport {
                time: 0.0,
                took: None,
                devices: vec![]
            },
            80
        ),
        ["no segments: the allocator held no memory"]
    );
}

fn report(site: &str) -> SitesReport {
    SitesReport {
        time: 0.0,
        id: 0,
        state: SitesState::Done,
        reason: None,
        started: None,
        seconds: None,
        window: Some(60.0),
        history: None,
        entries: Some(1234),
        dropped: None,
        cost: SitesCost {
            cpu: Some(0.25),
            gil_max: None,
            snapshot: None,
        },
        stopped: Some("its CPU budget".into()),
        devices: vec![DeviceSites {
            index: 0,
            live: vec![SiteLive {
                site: site.into(),
                via: vec!["/job/train.py:9 in main".into()],
                bytes: 3 << 20,
                count: 2,
            }],
            live_bytes: 4 << 20,
            live_blocks: 3,
            live_unattributed: 1 << 20,
            growth: vec![SiteGrowth {
                site: site.into(),
                via: vec![],
                bytes: 1 << 20,
                allocs: 5,
                frees: 4,
            }],
            growth_bytes: 1 << 20,
        }],
    }
}

#[test]
fn sites_say_the_window_and_each_site_with_its_figures() {
    let text = sites(&report("/job/model.py:42 in forward"), 10, 100).join("\n");
    assert!(text.contains("window 60s, 1,234 entries, n/a dropped; cost: 0.25s CPU, GIL held n/a at most, snapshot n/a; stopped early: its CPU budget"), "{text}");
    assert!(
        text.contains("4.00 MiB live in 3 blocks, 1.00 MiB of them with no frames"),
        "{text}"
    );
    assert!(
        text.contains("3.00 MiB        2  /job/model.py:42 in forward"),
        "{text}"
    );
    assert!(text.contains("via /job/train.py:9 in main"), "{text}");
    assert!(
        text.contains("1.00 MiB        5        4  /job/model.py:42 in forward"),
        "{text}"
    );
}

#[test]
fn a_hostile_site_is_made_safe_and_cut_to_the_width() {
    let evil = format!(
        "/job/\u{1b}]0;owned\u{7}\u{202e}x.py:1 in {}",
        "f".repeat(1_000_000)
    );
    for width in [20, 60, 100] {
        let lines = sites(&report(&evil), 10, width);
        for line in &lines {
            assert!(!line.contains(['\u{1b}', '\u{7}', '\u{202e}']), "{line:?}");
            assert!(
                line.chars().count() < 400,
                "cut: {} chars",
                line.chars().count()
            );
        }
        let row = lines
            .iter()
            .find(|l| l.contains("/job/"))
            .expect("the site");
        assert!(row.width() <= width.max(23 + 16), "{width}: {row}");
    }
    let refused = SitesReport {
        state: SitesState::Refused,
        reason: Some("another window runs\u{1b}[2J".into()),
        entries: None,
        window: None,
        devices: vec![],
        ..report("x")
    };
    assert_eq!(
        sites(&refused, 10, 80),
        ["refused: another window runs\u{fffd}[2J"]
    );
}

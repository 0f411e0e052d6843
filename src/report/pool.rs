//! A fed process's inside of the pool in the report: the agent's latest segment map of its
//! device and its latest sites window, each with when it was taken.

use super::markdown::{escape, figure, Clock};
use crate::sample::pool::SitesState;
use crate::sample::{FeedSample, NodeSample};
use std::fmt::Write;

/// Sites listed per table.
const SITES: usize = 5;

pub(super) fn section(out: &mut String, s: &NodeSample, feed: &FeedSample, clock: Clock) {
    let Some(record) = s.feeds.get(feed.feed) else {
        return;
    };
    let index = feed.stats.index;
    let map = record
        .segments
        .as_deref()
        .and_then(|m| m.devices.iter().find(|d| d.index == index).map(|d| (m, d)));
    let sites = record
        .sites
        .as_deref()
        .filter(|r| r.state == SitesState::Done)
        .and_then(|r| r.devices.iter().find(|d| d.index == index).map(|d| (r, d)));
    if map.is_none() && sites.is_none() {
        return;
    }
    if let Some((m, d)) = map {
        let _ = writeln!(
            out,
            "Segment map (the agent's allocator snapshot of {}):\n",
            clock.at(m.time)
        );
        let _ = writeln!(
            out,
            "| pool | segments | reserved | live | free | largest free block | pinned segments |\n|---|---|---|---|---|---|---|"
        );
        for p in &d.pools {
            let pinned = if p.pinned.segments == 0 {
                "none".to_string()
            } else {
                format!(
                    "{} ({}) by {} live",
                    p.pinned.segments,
                    figure(Some(p.pinned.reserved)),
                    figure(Some(p.pinned.live))
                )
            };
            let _ = writeln!(
                out,
                "| {}{} | {} | {} | {} | {} | {} | {} |",
                escape(&p.pool),
                if p.expandable { " (expandable)" } else { "" },
                p.segments,
                figure(Some(p.reserved)),
                figure(Some(p.live)),
                figure(Some(p.free)),
                figure(Some(p.largest_free)),
                pinned
            );
        }
        out.push('\n');
    }
    if let Some((r, d)) = sites {
        let window = r.window.map_or("n/a".into(), crate::units::duration);
        let _ = writeln!(
            out,
            "Allocation sites (a window of {window} ending {}; {} trace entries):\n",
            clock.at(r.time),
            r.entries.map_or("n/a".into(), |e| e.to_string())
        );
        let _ = writeln!(
            out,
            "| site | grew over the window | allocations (freed) |\n|---|---|---|"
        );
        for g in d.growth.iter().take(SITES) {
            let _ = writeln!(
                out,
                "| {} | {} | {} ({}) |",
                escape(&g.site),
                figure(Some(g.bytes)),
                g.allocs,
                g.frees
            );
        }
        if d.growth.is_empty() {
            let _ = writeln!(out, "| nothing allocated in the window is still live | | |");
        }
        out.push('\n');
        let _ = writeln!(out, "| site | live | blocks |\n|---|---|---|");
        for l in d.live.iter().take(SITES) {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                escape(&l.site),
                figure(Some(l.bytes)),
                l.count
            );
        }
        if d.live_unattributed > 0 {
            let _ = writeln!(
                out,
                "| allocated before recording began | {} | |",
                figure(Some(d.live_unattributed))
            );
        }
        out.push('\n');
    }
}

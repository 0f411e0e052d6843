//! `strata sites PID`: asks the process's agent for a window of its allocator's history and
//! prints which lines of the job's code hold its memory and which grew over the window
//! (PROTOCOL.md, "Inside the pool"). The agent records and reduces in the job; this reads the
//! summary it sends, never a raw trace.

use crate::feed::{FeedConfig, FeedHub};
use crate::sample::pool::{SitesReport, SitesState};
use crate::text::clean;
use crate::units::bytes;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// How long past the window's end the summary is waited for: the snapshot and the reduction
/// (whose CPU budget is well under this) run in the job after it.
const SUMMARY_GRACE: Duration = Duration::from_secs(60);
/// How long the agent has to be found and say hello.
const FIND: Duration = Duration::from_secs(5);

/// What `strata sites` was asked.
pub struct SitesAsk {
    pub pid: u32,
    pub seconds: u32,
    pub top: u32,
    pub json: bool,
    pub feed_dir: Option<PathBuf>,
}

/// Runs the command: the summary on stdout, progress on stderr; an error in one line.
pub fn run(ask: &SitesAsk) -> anyhow::Result<()> {
    let hub = FeedHub::start(FeedConfig::new(
        ask.feed_dir.clone(),
        Duration::from_secs(1),
    ))
    .map_err(|e| anyhow::anyhow!("cannot read allocator feeds: {e}"))?;
    hub.watch_pids(&[(ask.pid, None)]);
    hub.settle(FIND);
    let id = hub
        .ask_sites(ask.pid, ask.seconds, ask.top)
        .map_err(anyhow::Error::msg)?;
    let wait = Duration::from_secs(u64::from(ask.seconds)) + SUMMARY_GRACE;
    let report = hub
        .wait_sites(ask.pid, id, wait, |running| {
            eprintln!("strata sites: {}", running_line(ask.pid, running));
        })
        .map_err(anyhow::Error::msg)?;
    match report.state {
        SitesState::Done if ask.json => println!("{}", serde_json::to_string(&*report)?),
        SitesState::Done => print!("{}", text(ask.pid, &report)),
        _ => anyhow::bail!(
            "sites on PID {}: {}",
            ask.pid,
            clean(
                report
                    .reason
                    .as_deref()
                    .unwrap_or("refused, no reason given")
            )
        ),
    }
    Ok(())
}

fn running_line(pid: u32, r: &SitesReport) -> String {
    let who = match r.history.as_deref() {
        Some("job") => "reading the job's own history",
        _ => "recording the allocator's history",
    };
    match r.seconds {
        Some(s) => format!("PID {pid}: {who} for {s:.0} s"),
        None => format!("PID {pid}: {who}"),
    }
}

/// A done window as text: its length and cost, then per device the sites that grew over it
/// and those that hold the most now.
pub fn text(pid: u32, r: &SitesReport) -> String {
    let mut out = String::new();
    let window = r.window.map_or("n/a".into(), |w| format!("{w:.0} s"));
    let entries = r.entries.map_or("n/a".into(), |e| e.to_string());
    let dropped = match r.dropped {
        Some(0) => "none dropped".to_string(),
        Some(d) => format!("{d} dropped (the ring was full: growth is partial)"),
        None => "dropped n/a".to_string(),
    };
    let history = match r.history.as_deref() {
        Some("job") => "the job's own history",
        Some("agent") => "recorded by the agent for this window",
        _ => "history n/a",
    };
    let _ = writeln!(
        out,
        "sites of PID {pid}: window {window} ({history}), {entries} trace entries, {dropped}"
    );
    let secs = |s: Option<f64>| s.map_or("n/a".into(), |s| format!("{:.1} ms", s * 1e3));
    let _ = writeln!(
        out,
        "cost to the job: reduction {} of CPU, longest GIL hold {}, snapshot {}",
        secs(r.cost.cpu),
        secs(r.cost.gil_max),
        secs(r.cost.snapshot)
    );
    if let Some(stopped) = &r.stopped {
        let _ = writeln!(out, "stopped early: {}", clean(stopped));
    }
    for d in &r.devices {
        let _ = writeln!(
            out,
            "\ncuda:{}: {} live in {} blocks{}",
            d.index,
            bytes(d.live_bytes),
            d.live_blocks,
            if d.live_unattributed > 0 {
                format!(
                    " ({} allocated before recording began: no site)",
                    bytes(d.live_unattributed)
                )
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            out,
            "  grew over the window: {} in all",
            bytes(d.growth_bytes)
        );
        for g in &d.growth {
            let _ = writeln!(
                out,
                "    +{:>10}  {:>6} allocs {:>6} freed  {}",
                bytes(g.bytes),
                g.allocs,
                g.frees,
                site_line(&g.site, &g.via)
            );
        }
        let _ = writeln!(out, "  live now, by site:");
        for s in &d.live {
            let _ = writeln!(
                out,
                "    {:>11}  {:>6} blocks         {}",
                bytes(s.bytes),
                s.count,
                site_line(&s.site, &s.via)
            );
        }
    }
    out
}

fn site_line(site: &str, via: &[String]) -> String {
    let mut line = clean(site).into_owned();
    for v in via {
        line.push_str(" < ");
        line.push_str(&clean(v));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::pool::{DeviceSites, SiteGrowth, SiteLive};

    fn done() -> SitesReport {
        SitesReport {
            time: 10.0,
            id: 3,
            state: SitesState::Done,
            reason: None,
            started: Some(0.0),
            seconds: Some(60.0),
            window: Some(60.0),
            history: Some("agent".into()),
            entries: Some(1200),
            dropped: Some(0),
            cost: crate::sample::pool::SitesCost {
                cpu: Some(0.012),
                gil_max: Some(0.0021),
                snapshot: Some(0.004),
            },
            stopped: None,
            devices: vec![DeviceSites {
                index: 0,
                live: vec![SiteLive {
                    site: "train.py:118 in evaluate\x1b[2J".into(),
                    via: vec!["train.py:30 in main".into()],
                    bytes: 639 << 20,
                    count: 61,
                }],
                live_bytes: 700 << 20,
                live_blocks: 70,
                live_unattributed: 61 << 20,
                growth: vec![SiteGrowth {
                    site: "train.py:118 in evaluate".into(),
                    via: vec![],
                    bytes: 610 << 20,
                    allocs: 600,
                    frees: 539,
                }],
                growth_bytes: 610 << 20,
            }],
        }
    }

    #[test]
    fn the_text_names_the_site_its_growth_and_the_cost_and_is_clean() {
        let t = text(42, &done());
        assert!(
            t.contains("window 60 s (recorded by the agent for this window)"),
            "{t}"
        );
        assert!(t.contains("+   610 MiB"), "{t}");
        assert!(
            t.contains("train.py:118 in evaluate\u{FFFD}[2J < train.py:30 in main"),
            "{t}"
        );
        assert!(
            t.contains("61.0 MiB allocated before recording began"),
            "{t}"
        );
        assert!(t.contains("longest GIL hold 2.1 ms"), "{t}");
        assert!(
            !t.contains('\x1b'),
            "a site from the job never reaches the terminal raw"
        );
    }

    #[test]
    fn unknowns_are_said_as_such() {
        let mut r = done();
        r.dropped = None;
        r.cost = Default::default();
        r.window = None;
        let t = text(42, &r);
        assert!(t.contains("window n/a") && t.contains("dropped n/a"), "{t}");
        assert!(t.contains("reduction n/a of CPU"), "{t}");
    }
}

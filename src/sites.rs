//! `strata sites PID`: asks the process's agent for a window of its allocator's history and
//! prints which lines of the job's code hold its memory and which grew over the window
//! (PROTOCOL.md, "Inside the pool"). The agent records and reduces in the job; this reads the
//! summary it sends, never a raw trace.

use crate::feed::{FeedConfig, FeedHub};
use crate::sample::pool::{SitesReport, SitesState};
use crate::text::clean;
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

/// A done window as text: who, how it was recorded, then per device the sites that hold the
/// most now and those that grew over the window (the lines `strata analyze FILE.pickle` and
/// the monitor's view draw).
pub fn text(pid: u32, r: &SitesReport) -> String {
    let history = match r.history.as_deref() {
        Some("job") => "the job's own history",
        Some("agent") => "history recorded by the agent for this window",
        _ => "history n/a",
    };
    let mut out = format!("sites of PID {pid} ({history})\n");
    for line in crate::present::pool_text::sites(r, usize::MAX, WIDTH) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The width the text is cut to: a site is one line, whatever its length.
const WIDTH: usize = 160;

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
            t.starts_with("sites of PID 42 (history recorded by the agent for this window)\n"),
            "{t}"
        );
        assert!(t.contains("window 60s, 1,200 entries, 0 dropped"), "{t}");
        assert!(
            t.contains("610 MiB      600      539  train.py:118 in evaluate"),
            "{t}"
        );
        assert!(t.contains("via train.py:30 in main"), "{t}");
        assert!(t.contains("61.0 MiB of them with no frames"), "{t}");
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
        assert!(t.contains("window n/a") && t.contains("n/a dropped"), "{t}");
        assert!(t.contains("cost: n/a CPU"), "{t}");
    }
}

//! The allocator feed behind a process: who it is by the kernel's word, the trust checks it
//! passed or failed, the agent, and its counters of bad input.

use super::{clock_tenths, Rows};
use crate::pipeline::Observed;
use crate::sample::feed::{FeedRecord, FeedState, FoundVia};
use crate::sample::{FeedSample, NodeSample, ProcessSample};
use crate::ui::theme::Theme;
use crate::units;
use ratatui::style::Style;

/// ` · expandable_segments on`: the allocator settings that change what the figures mean.
pub(super) fn settings_summary(sample: &NodeSample, feed: &FeedSample) -> String {
    let settings = sample
        .feeds
        .get(feed.feed)
        .and_then(|r| r.hello.as_ref())
        .map(|h| &h.settings);
    match settings.and_then(|s| s.get("expandable_segments")) {
        Some(serde_json::Value::Bool(true)) => " · expandable_segments on".into(),
        Some(serde_json::Value::Bool(false)) => " · expandable_segments off".into(),
        _ => String::new(),
    }
}

/// The feed record that speaks for this process, if any.
fn record_of<'a>(sample: &'a NodeSample, p: &ProcessSample) -> Option<&'a FeedRecord> {
    match &p.feed {
        Some(feed) => sample.feeds.get(feed.feed),
        None => sample.feeds.iter().find(|r| r.pid() == Some(p.pid)),
    }
}

fn row(rows: &mut Rows, label: &str, text: String, style: Style) {
    rows.text(format!("  {label:<10} {text}"), style);
}

fn ago(now: f64, then: Option<f64>) -> String {
    then.map_or_else(
        || "n/a".into(),
        |t| format!("{} ago", units::duration((now - t).max(0.0))),
    )
}

/// The feed section of the reconciliation view.
pub(super) fn section(rows: &mut Rows, observed: &Observed, p: &ProcessSample, theme: Theme) {
    let sample = &observed.sample;
    let Some(record) = record_of(sample, p) else {
        return;
    };
    rows.blank();
    rows.text("allocator feed".into(), theme.table_header());
    let peer = record.peer.map_or_else(
        || "not connected".to_string(),
        |c| format!("PID {} · uid {} (SO_PEERCRED)", c.pid, c.uid),
    );
    let inner = record
        .nspid
        .map_or_else(String::new, |n| format!(" · PID {n} in its own namespace"));
    row(rows, "who", format!("{peer}{inner}"), Style::new());
    let via = match record.found_via {
        FoundVia::FeedDir => "feed dir",
        FoundVia::ProcessRoot => "through the job's root: a container",
        FoundVia::Snapshot => "rebuilt from a recording's processes[].feed (older shape)",
    };
    row(
        rows,
        "socket",
        format!("{} ({via})", record.socket),
        Style::new(),
    );
    let (checks, style) = match &record.state {
        _ if record.found_via == FoundVia::Snapshot => (
            "not checked here: the recording kept the figures, not the feed's peer".to_string(),
            theme.dim(),
        ),
        FeedState::Refused { reason } => (format!("✗ refused: {reason}"), theme.alert()),
        FeedState::Dropped { reason } => (format!("✗ dropped: {reason}"), theme.alert()),
        FeedState::Connected | FeedState::Closed { .. } => {
            let uid = record
                .peer
                .map_or_else(|| "n/a".into(), |c| c.uid.to_string());
            let pid = record.nspid.map_or_else(|| "n/a".into(), |n| n.to_string());
            (
                format!(
                    "✓ dir 0700 owned by uid {uid} · ✓ peer uid {uid} is its owner · ✓ hello pid = NSpid {pid}"
                ),
                Style::new(),
            )
        }
    };
    row(rows, "checks", checks, style);
    if let Some(hello) = &record.hello {
        let interval = hello.interval.map_or_else(
            || "n/a".into(),
            |i| format!("every {}", crate::units::interval(i)),
        );
        row(
            rows,
            "agent",
            format!(
                "strata_feed {} · Python {} · {} · {interval}",
                hello.agent_version.as_deref().unwrap_or("n/a"),
                hello.python.as_deref().unwrap_or("n/a"),
                hello.executable.as_deref().unwrap_or("n/a"),
            ),
            Style::new(),
        );
        if let Some(note) = version_note(hello.agent_version.as_deref()) {
            row(rows, "version", note, theme.alert());
        }
        if let Some(note) = &hello.note {
            row(rows, "note", note.clone(), theme.dim());
        }
    }
    let now = sample.time;
    let state = match &record.state {
        FeedState::Connected => "connected".to_string(),
        FeedState::Closed { reason } => format!("closed ({reason})"),
        FeedState::Refused { .. } => "refused".to_string(),
        FeedState::Dropped { .. } => "dropped".to_string(),
    };
    let sample_age = p
        .feed
        .as_ref()
        .map_or_else(|| "n/a".into(), |f| ago(now, Some(f.stats.time)));
    row(
        rows,
        "state",
        format!(
            "{state} · connected {} · last heard {} · this sample read {sample_age}",
            ago(now, record.connected_at),
            ago(now, record.last_heard)
        ),
        Style::new(),
    );
    let c = &record.counters;
    let bad = if c.bad() == 0 {
        "bad: none".to_string()
    } else {
        format!(
            "bad: {} malformed, {} oversized, {} unknown version, {} invalid, {} rate-limited ({} floods)",
            c.malformed, c.oversized, c.unknown_version, c.invalid, c.rate_limited, c.floods
        )
    };
    let style = if c.bad() == 0 {
        Style::new()
    } else {
        theme.alert()
    };
    row(
        rows,
        "input",
        format!("{} lines · {} samples · {bad}", c.lines, c.samples),
        style,
    );
    if let Some(oom) = record.ooms.iter().max_by(|a, b| a.time.total_cmp(&b.time)) {
        row(
            rows,
            "last OOM",
            format!(
                "{} cuda:{} asked {} · free {} of {}",
                clock_tenths(oom.time),
                oom.index,
                units::opt_bytes(oom.requested),
                units::opt_bytes(oom.device_free),
                units::opt_bytes(oom.device_total)
            ),
            theme.alert(),
        );
    }
    let feed_index = sample.feeds.iter().position(|r| std::ptr::eq(r, record));
    for unlisted in observed
        .attachment
        .unlisted
        .iter()
        .filter(|u| Some(u.feed) == feed_index)
    {
        row(rows, "unmatched", unlisted.reason.clone(), theme.alert());
    }
}

/// What to say when the agent is not this strata's version: the lines parse (the protocol
/// is the same, or the feed would be refused), but the two were not built together.
fn version_note(agent: Option<&str>) -> Option<String> {
    let mine = crate::version::VERSION;
    let protocol = crate::version::FEED_PROTOCOL;
    match agent {
        Some(theirs) if theirs == mine => None,
        Some(theirs) => Some(format!(
            "strata_feed {theirs} with strata {mine}: both speak feed protocol {protocol}, so its figures are read as sent; run the same version of both"
        )),
        None => Some(format!(
            "the agent does not say its version; it speaks feed protocol {protocol}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::version_note;

    #[test]
    fn an_agent_of_another_version_is_said_and_the_same_one_is_not() {
        assert_eq!(version_note(Some(crate::version::VERSION)), None);
        let note = version_note(Some("0.0.9")).expect("said");
        assert!(note.starts_with("strata_feed 0.0.9 with strata "), "{note}");
        assert!(version_note(None).is_some());
    }
}

//! Findings about the feeds themselves: refused or dropped, bad input, devices NVML does not
//! list their process on; and about the search for them: dirs cut short, suspicious entries.

use super::{FindingKind, Findings, Severity};
use crate::accounting::attach::Attachment;
use crate::sample::feed::{CutShort, FeedState, SuspiciousEntry};
use crate::sample::NodeSample;
use serde_json::json;

pub(super) fn detect(sample: &NodeSample, attachment: &Attachment, out: &mut Findings) {
    for record in &sample.feeds {
        let pid = record.pid();
        let who = pid.map_or_else(|| "a feed".to_string(), |p| format!("feed of PID {p}"));
        match &record.state {
            FeedState::Refused { reason } => out.raise(
                FindingKind::RefusedFeed,
                Severity::Warning,
                None,
                pid,
                format!("{who} refused ({}): {reason}", record.socket),
                json!({ "socket": record.socket }),
            ),
            FeedState::Dropped { reason } => out.raise(
                FindingKind::RefusedFeed,
                Severity::Warning,
                None,
                pid,
                format!("{who} dropped: {reason}"),
                json!({ "socket": record.socket }),
            ),
            FeedState::Connected | FeedState::Closed { .. } => {}
        }
        let c = &record.counters;
        if c.bad() > 0 {
            out.raise(
                FindingKind::FeedBadInput,
                Severity::Info,
                None,
                pid,
                format!(
                    "{who} sent {} line(s) that were skipped: {} malformed, {} oversized, {} unknown version, {} invalid, {} over the rate limit",
                    c.bad(),
                    c.malformed,
                    c.oversized,
                    c.unknown_version,
                    c.invalid,
                    c.rate_limited
                ),
                json!(c),
            );
        }
    }
    for unlisted in &attachment.unlisted {
        out.raise(
            FindingKind::FeedDeviceUnlisted,
            Severity::Warning,
            unlisted.device_uuid.as_deref(),
            Some(unlisted.pid),
            format!("feed of PID {}: {}", unlisted.pid, unlisted.reason),
            json!({ "index": unlisted.index, "reason": unlisted.reason }),
        );
    }
    scan_findings(
        &sample.feed_scan.cut_short,
        &sample.feed_scan.suspicious,
        out,
    );
}

/// More entries of one kind than this are one finding.
const GROUP_OVER: usize = 3;
/// Entries named in a grouped finding's evidence.
const NAMED: usize = 16;

fn scan_findings(cut_short: &[CutShort], suspicious: &[SuspiciousEntry], out: &mut Findings) {
    let cut = |c: &CutShort| {
        let more = if c.entries_capped { " or more" } else { "" };
        format!(
            "{} holds {}{more} entries, more than a scan reads ({}): feeds past them are found only for the processes NVML lists, by their own path",
            c.dir, c.entries, c.read
        )
    };
    if cut_short.len() <= GROUP_OVER {
        for c in cut_short {
            out.raise(
                FindingKind::FeedDirCutShort,
                Severity::Warning,
                None,
                None,
                cut(c),
                json!(c),
            );
        }
    } else {
        out.raise(
            FindingKind::FeedDirCutShort,
            Severity::Warning,
            None,
            None,
            format!(
                "{} feed dirs hold more entries than a scan reads; the first: {}",
                cut_short.len(),
                cut(&cut_short[0])
            ),
            json!({ "dirs": cut_short.len(), "first": &cut_short[..NAMED.min(cut_short.len())] }),
        );
    }
    if suspicious.len() <= GROUP_OVER {
        for s in suspicious {
            out.raise(
                FindingKind::SuspiciousFeedEntry,
                Severity::Warning,
                None,
                s.pids.first().copied(),
                s.describe(),
                json!(s),
            );
        }
    } else {
        let mut owners: Vec<u32> = suspicious.iter().map(|s| s.owner).collect();
        owners.sort_unstable();
        owners.dedup();
        out.raise(
            FindingKind::SuspiciousFeedEntry,
            Severity::Warning,
            None,
            None,
            format!(
                "{} suspicious entries where feed dirs or agents' sockets belong (owners: uid {}), never followed or opened; the first: {}",
                suspicious.len(),
                owners.iter().map(u32::to_string).collect::<Vec<_>>().join(", uid "),
                suspicious[0].describe()
            ),
            json!({ "entries": suspicious.len(), "owners": owners, "first": &suspicious[..NAMED.min(suspicious.len())] }),
        );
    }
}

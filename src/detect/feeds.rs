//! Findings about the feeds themselves: refused or dropped, bad input, devices NVML does not
//! list their process on; and about the search for them: dirs cut short, suspicious entries.

use super::evidence::units::{Count, Index, Uid};
use super::evidence::{
    self, BadInput, CutShortGroup, Evidence, Refused, Suspicious, SuspiciousGroup, Unlisted,
};
use super::{FindingKind, Findings, Severity};
use crate::accounting::attach::Attachment;
use crate::sample::feed::{CutShort, FeedState, SuspiciousEntry};
use crate::sample::NodeSample;

pub(super) fn detect(sample: &NodeSample, attachment: &Attachment, out: &mut Findings) {
    for record in &sample.feeds {
        let pid = record.pid();
        // Named only where a finding says it: most feeds raise none.
        let who = || pid.map_or_else(|| "a feed".to_string(), |p| format!("feed of PID {p}"));
        match &record.state {
            FeedState::Refused { reason } => out.raise(
                FindingKind::RefusedFeed,
                Severity::Warning,
                None,
                pid,
                format!("{} refused ({}): {reason}", who(), record.socket),
                Evidence::RefusedFeed(Refused {
                    socket: record.socket.clone(),
                }),
            ),
            FeedState::Dropped { reason } => out.raise(
                FindingKind::RefusedFeed,
                Severity::Warning,
                None,
                pid,
                format!("{} dropped: {reason}", who()),
                Evidence::RefusedFeed(Refused {
                    socket: record.socket.clone(),
                }),
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
                    "{} sent {} line(s) that were skipped: {} malformed, {} oversized, {} unknown version, {} invalid, {} over the rate limit",
                    who(),
                    c.bad(),
                    c.malformed,
                    c.oversized,
                    c.unknown_version,
                    c.invalid,
                    c.rate_limited
                ),
                Evidence::FeedBadInput(BadInput::from(c)),
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
            Evidence::FeedDeviceUnlisted(Unlisted {
                index: Index(unlisted.index),
                reason: unlisted.reason.clone(),
            }),
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
                Evidence::FeedDirCutShort(evidence::CutShort::from(c)),
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
            Evidence::FeedDirsCutShort(CutShortGroup {
                dirs: Count(cut_short.len() as u64),
                first: cut_short[..NAMED.min(cut_short.len())]
                    .iter()
                    .map(evidence::CutShort::from)
                    .collect(),
            }),
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
                Evidence::SuspiciousFeedEntry(Suspicious::from(s)),
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
            Evidence::SuspiciousFeedEntries(SuspiciousGroup {
                entries: Count(suspicious.len() as u64),
                first: suspicious[..NAMED.min(suspicious.len())]
                    .iter()
                    .map(Suspicious::from)
                    .collect(),
                owners: owners.into_iter().map(Uid).collect(),
            }),
        );
    }
}

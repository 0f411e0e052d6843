//! Findings about the feeds themselves: refused or dropped, bad input, devices NVML does not
//! list their process on.

use super::{FindingKind, Findings, Severity};
use crate::feed::attach::Attachment;
use crate::sample::feed::FeedState;
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
            json!({ "index": unlisted.index }),
        );
    }
}

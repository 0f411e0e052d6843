//! One finding for many of one kind that differ only in their device: usage no listed
//! process holds on several devices, and a feed's devices NVML does not list its process on.
//! Grouped after [`super::FindingTracker::stamp`], so that each member keeps its own `since`
//! and the group's is the oldest of them: a device more or less does not start it afresh.

use super::evidence::units::{Bytes, Index};
use super::evidence::{
    Evidence, Unexplained, UnexplainedDevice, UnexplainedGroup, UnlistedDevice, UnlistedGroup,
};
use super::{Finding, FindingKind, Severity};
use crate::units::bytes;

/// Devices named in a grouped finding's message; its evidence lists them all.
const NAMED: usize = 8;

/// Groups unexplained usage on two or more devices into one finding for the node, and two
/// or more devices of one feed that NVML does not list its process on into one for the feed
/// (a device named twice, by a feed met twice, counts once).
pub(super) fn group_devices(findings: &mut Vec<Finding>) {
    let unexplained = take(findings, |f| f.kind == FindingKind::UnexplainedUsage);
    match unexplained.len() {
        0 => {}
        1 => findings.extend(unexplained),
        _ => findings.push(unexplained_group(&unexplained)),
    }
    let unlisted = take(findings, |f| f.kind == FindingKind::FeedDeviceUnlisted);
    let mut pids: Vec<Option<u32>> = unlisted.iter().map(|f| f.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    for pid in pids {
        // A feed met twice (its socket by two paths) names the same device twice: once.
        let mut members: Vec<Finding> = Vec::new();
        for f in unlisted.iter().filter(|f| f.pid == pid) {
            let same = |g: &Finding| g.device_uuid == f.device_uuid && index(g) == index(f);
            if !members.iter().any(same) {
                members.push(f.clone());
            }
        }
        if members.len() == 1 {
            findings.extend(members);
        } else {
            findings.push(unlisted_group(pid, &members));
        }
    }
}

fn take(findings: &mut Vec<Finding>, which: impl Fn(&Finding) -> bool) -> Vec<Finding> {
    let (taken, rest): (Vec<Finding>, Vec<Finding>) = findings.drain(..).partition(which);
    *findings = rest;
    taken
}

/// The group's severity (the worst), `since` (the oldest) and the rest from `message` and
/// `evidence`.
fn group(
    kind: FindingKind,
    pid: Option<u32>,
    members: &[Finding],
    message: String,
    evidence: Evidence,
) -> Finding {
    Finding {
        kind,
        severity: members
            .iter()
            .map(|f| f.severity)
            .max()
            .unwrap_or(Severity::Info),
        device_uuid: None,
        pid,
        since: members
            .iter()
            .map(|f| f.since)
            .fold(f64::INFINITY, f64::min),
        message,
        evidence,
    }
}

/// `a, b, c and 5 more`.
fn named(items: Vec<String>) -> String {
    let more = items.len().saturating_sub(NAMED);
    let mut text = items.into_iter().take(NAMED).collect::<Vec<_>>().join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

/// The framework's device index a feed's unlisted device has.
fn index(f: &Finding) -> Option<Index> {
    match &f.evidence {
        Evidence::FeedDeviceUnlisted(e) => Some(e.index),
        _ => None,
    }
}

/// The evidence of unexplained usage on one device.
fn one(f: &Finding) -> Option<&Unexplained> {
    match &f.evidence {
        Evidence::UnexplainedUsage(e) => Some(e),
        _ => None,
    }
}

fn unexplained_group(members: &[Finding]) -> Finding {
    let amount = |f: &Finding| one(f).map_or(0, |e| e.bytes.0);
    let place = |f: &Finding| {
        one(f)
            .map(|e| e.device.as_str())
            .or(f.device_uuid.as_deref())
            .unwrap_or("a device")
            .to_string()
    };
    let total: u64 = members.iter().map(amount).sum();
    let first = amount(&members[0]);
    let which = if members.iter().all(|f| amount(f) == first) {
        format!(
            "{} each on {}",
            bytes(first),
            named(members.iter().map(place).collect())
        )
    } else {
        named(
            members
                .iter()
                .map(|f| format!("{} {}", place(f), bytes(amount(f))))
                .collect(),
        )
    };
    let devices: Vec<UnexplainedDevice> = members
        .iter()
        .map(|f| UnexplainedDevice {
            bytes: Bytes(amount(f)),
            device: place(f),
            other: one(f).and_then(|e| e.other),
            uuid: f.device_uuid.clone(),
        })
        .collect();
    group(
        FindingKind::UnexplainedUsage,
        None,
        members,
        format!(
            "{} in use on {} devices is held by no listed process ({which}): another PID namespace or container?",
            bytes(total),
            members.len()
        ),
        Evidence::UnexplainedUsages(UnexplainedGroup {
            bytes: Bytes(total),
            devices,
        }),
    )
}

fn unlisted_group(pid: Option<u32>, members: &[Finding]) -> Finding {
    let reason = |f: &Finding| match &f.evidence {
        Evidence::FeedDeviceUnlisted(e) => e.reason.clone(),
        _ => f.message.clone(),
    };
    let devices: Vec<UnlistedDevice> = members
        .iter()
        .filter_map(|f| {
            Some(UnlistedDevice {
                index: index(f)?,
                reason: reason(f),
                uuid: f.device_uuid.clone(),
            })
        })
        .collect();
    let who = pid.map_or_else(|| "a feed".to_string(), |p| format!("feed of PID {p}"));
    group(
        FindingKind::FeedDeviceUnlisted,
        pid,
        members,
        format!(
            "{who}: {} devices it reports are not where NVML lists the process ({}); the first: {}",
            members.len(),
            named(
                members
                    .iter()
                    .map(|f| match index(f) {
                        Some(i) => format!("cuda:{}", i.0),
                        None => "cuda:?".into(),
                    })
                    .collect()
            ),
            reason(&members[0])
        ),
        Evidence::FeedDevicesUnlisted(UnlistedGroup { devices }),
    )
}

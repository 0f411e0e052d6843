//! Findings from history: climbs with their cause, fragmentation, allocation retries, OOMs
//! with their class, capacity, idle holders. Pure: history and the instant in, findings out.

use super::trend::{climbing, Climb};
use super::{device_name, FindingKind, Findings, Severity};
use crate::accounting::NodeAccount;
use crate::history::{History, Metric, ProcessId, Series, SeriesKey};
use crate::layers::Layer;
use crate::sample::feed::OomReport;
use crate::sample::{AllocatorStats, NodeSample, ProcessSample};
use crate::units::{bytes, duration};
use serde_json::json;

const MIB: f64 = (1u64 << 20) as f64;
/// Fragmentation worth a line: this much in free split pieces...
const FRAGMENTED_MIN: u64 = 1 << 30;
/// ...making at least this share of the pool, and a share that grew this much in the window.
const FRAGMENTED_SHARE: f64 = 0.10;
const FRAGMENTED_SHARE_GROWTH: f64 = 0.05;
const FRAGMENTATION_WINDOW: f64 = 600.0;
/// Allocation retries are counted over this window.
const RETRY_WINDOW: f64 = 300.0;
/// An OOM stays a finding this long after the last one.
const OOM_SHOWN_SECS: f64 = 600.0;
/// An OOM is one of fragmentation when the inactive share of the pool is at least this (and
/// no request size says otherwise).
const OOM_FRAGMENTED_SHARE: f64 = 0.3;
/// Live tensors within this share of a device's total are at its capacity.
const CAPACITY_SHARE: f64 = 0.95;
/// Idle: SM 0% for this long, holding at least this much.
const IDLE_SECS: f64 = 300.0;
const IDLE_MIN_BYTES: u64 = 1 << 30;

/// What a climbing series says is growing, in the JSON's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    Live,
    Cache,
    OutsidePool,
    Unattributed,
    NoProcess,
}

impl Cause {
    fn name(self) -> &'static str {
        match self {
            Cause::Live => "live",
            Cause::Cache => "cache",
            Cause::OutsidePool => "outside_pool",
            Cause::Unattributed => "unattributed",
            Cause::NoProcess => "no_process",
        }
    }

    fn says(self) -> &'static str {
        match self {
            Cause::Live => "live tensors climbing: references kept?",
            Cause::Cache => {
                "the allocator's cache climbing while live tensors are flat: a widening mix of shapes?"
            }
            Cause::OutsidePool => {
                "memory outside the pool climbing (NCCL, cuDNN, custom CUDA?)"
            }
            Cause::Unattributed => "its memory climbing (no feed to say which layer)",
            Cause::NoProcess => "memory no listed process holds climbing",
        }
    }
}

fn mib_per_min(rate: f64) -> f64 {
    rate * 60.0 / MIB
}

/// The series' name in a climb's evidence.
fn metric_name(metric: Metric) -> &'static str {
    match metric {
        Metric::Used => "used",
        Metric::Layer(layer) => layer.name(),
        Metric::Allocated => "allocated",
        Metric::Reserved => "reserved",
        Metric::InactiveSplit => "inactive_split",
        Metric::OutsidePool => "outside_pool",
        Metric::Retries => "alloc_retries",
        Metric::Ooms => "ooms",
        Metric::Sm => "sm_util",
    }
}

#[allow(clippy::too_many_arguments)]
fn raise_climb(
    out: &mut Findings,
    now: f64,
    device: &str,
    pid: Option<u32>,
    who: String,
    cause: Cause,
    climb: Climb,
    key: SeriesKey,
) {
    let rate = mib_per_min(climb.rate);
    out.raise(
        FindingKind::Climb,
        Severity::Warning,
        Some(device),
        pid,
        format!(
            "{who}: {} {:+.0} MiB/min for {} ({} → {})",
            cause.says(),
            rate,
            duration(now - climb.start),
            bytes(climb.from),
            bytes(climb.to)
        ),
        json!({
            "cause": cause.name(),
            "series": metric_name(key.metric()),
            "rate_mib_per_min": (rate * 10.0).round() / 10.0,
            "start": climb.start,
            "duration_secs": (now - climb.start).round(),
            "from_bytes": climb.from,
            "to_bytes": climb.to,
            "window_secs": climb.window,
        }),
    );
    out.climbed(key);
}

fn series<'a>(history: &'a History, id: &ProcessId, metric: Metric) -> Option<&'a Series> {
    history.get(&SeriesKey::Process(id.clone(), metric))
}

/// The change of a counter over a window ending now: its last value less its least, or
/// `None` where it is not known; a counter that reset (a restart) counts from its reset.
fn counter_rise(series: &Series, now: f64, window: f64) -> Option<u64> {
    let span = series.chunks(now, window, 1)[0]?;
    Some(span.last.saturating_sub(span.min))
}

pub(super) fn detect(
    sample: &NodeSample,
    account: &NodeAccount,
    history: &History,
    out: &mut Findings,
) {
    let now = sample.time;
    let mut climbing_devices: Vec<&str> = Vec::new();
    for p in &sample.processes {
        let id = ProcessId {
            pid: p.pid,
            start_time: p.start_time,
            device_uuid: p.device_uuid.clone(),
        };
        let place = device_name(sample, &p.device_uuid);
        let who = format!("PID {} on {place}", p.pid);
        let found = if p.feed.is_some() {
            fed_climb(history, &id, now)
        } else if p.visible {
            series(history, &id, Metric::Used)
                .and_then(|s| climbing(s, now))
                .map(|c| (Cause::Unattributed, c, Metric::Used))
        } else {
            None
        };
        if let Some((cause, climb, metric)) = found {
            climbing_devices.push(&p.device_uuid);
            raise_climb(
                out,
                now,
                &p.device_uuid,
                Some(p.pid),
                who.clone(),
                cause,
                climb,
                SeriesKey::Process(id.clone(), metric),
            );
        }
        if let Some(feed) = &p.feed {
            fragmentation(out, now, history, &id, &who, &feed.stats);
            retries(out, now, history, &id, &who);
        }
        idle(out, now, history, &id, p, &who);
    }
    ooms(sample, history, out);
    for (gpu, gpu_account) in sample.gpus.iter().zip(&account.gpus) {
        if gpu.lost {
            continue;
        }
        let mut devices = vec![(
            gpu.uuid.as_str(),
            gpu.memory.map(|m| m.total),
            gpu_account.layers.as_ref().ok(),
            vec![gpu.uuid.as_str()],
        )];
        for group in crate::accounting::gpu_instances(&gpu.mig) {
            let lead = &gpu.mig[group[0]];
            let layers = gpu_account
                .mig
                .get(group[0])
                .and_then(|m| m.layers.as_ref().ok());
            let members = group.iter().map(|&i| gpu.mig[i].uuid.as_str()).collect();
            devices.push((
                lead.uuid.as_str(),
                lead.memory.map(|m| m.total),
                layers,
                members,
            ));
        }
        let is_mig = !gpu.mig.is_empty();
        for (i, (uuid, total, layers, members)) in devices.into_iter().enumerate() {
            let place = device_name(sample, uuid);
            // A MIG GPU's own figures repeat its instances': judged there.
            if !(is_mig && i == 0) {
                let processes_climb = members.iter().any(|m| climbing_devices.contains(m));
                let key = SeriesKey::device(uuid, Metric::Layer(Layer::Other));
                if let (false, Some(climb)) = (
                    processes_climb,
                    history.get(&key).and_then(|s| climbing(s, now)),
                ) {
                    raise_climb(
                        out,
                        now,
                        uuid,
                        None,
                        place.clone(),
                        Cause::NoProcess,
                        climb,
                        key,
                    );
                }
            }
            if !(is_mig && i == 0) {
                capacity(out, history, uuid, layers, total, &place);
            }
        }
    }
}

/// Which layer of a fed process climbs: live tensors first; the cache only when live tensors
/// are flat beside it (a quarter of its rate or less); memory outside the pool only when the
/// pool is flat too. A layer that climbs along with another is not its cause.
fn fed_climb(history: &History, id: &ProcessId, now: f64) -> Option<(Cause, Climb, Metric)> {
    // A layer is flat beside a climb when its floor moves at a quarter of the climb's rate
    // or less, over the climb's own window and over the longest one (a slow leak under a
    // noisy saw-tooth hides in a short window, not in a long one).
    let longest = super::trend::WINDOWS[super::trend::WINDOWS.len() - 1].0;
    let flat = |metric, c: &Climb| {
        [c.window, longest].into_iter().all(|window| {
            series(history, id, metric)
                .and_then(|s| super::trend::floor_rate(s, now, window))
                .is_none_or(|r| r <= 0.25 * c.rate)
        })
    };
    let climbs = |metric| series(history, id, metric).and_then(|s| climbing(s, now));
    if let Some(c) = climbs(Metric::Allocated) {
        return Some((Cause::Live, c, Metric::Allocated));
    }
    // The pool climbs: the cache grows if live tensors are flat beside it; otherwise the
    // pool grows because the tensors do (their own series too noisy to show it alone, a
    // leak under a deep saw-tooth).
    if let Some(c) = climbs(Metric::Reserved) {
        let cause = if flat(Metric::Allocated, &c) {
            Cause::Cache
        } else {
            Cause::Live
        };
        return Some((cause, c, Metric::Reserved));
    }
    let c = climbs(Metric::OutsidePool)?;
    (flat(Metric::Allocated, &c) && flat(Metric::Reserved, &c)).then_some((
        Cause::OutsidePool,
        c,
        Metric::OutsidePool,
    ))
}

/// Free split pieces large and growing as a share of the pool.
fn fragmentation(
    out: &mut Findings,
    now: f64,
    history: &History,
    id: &ProcessId,
    who: &str,
    stats: &AllocatorStats,
) {
    let (Some(split), Some(reserved)) = (
        series(history, id, Metric::InactiveSplit),
        series(history, id, Metric::Reserved),
    ) else {
        return;
    };
    let (Some(now_split), reserved_now) = (stats.inactive_split, stats.reserved) else {
        return;
    };
    if now_split < FRAGMENTED_MIN || reserved_now == 0 {
        return;
    }
    let share_now = now_split as f64 / reserved_now as f64;
    let s = split.chunks(now, FRAGMENTATION_WINDOW, 5);
    let r = reserved.chunks(now, FRAGMENTATION_WINDOW, 5);
    let (Some(Some(s0)), Some(Some(r0))) = (s.first(), r.first()) else {
        return;
    };
    if r0.last == 0 {
        return;
    }
    let share_then = s0.last as f64 / r0.last as f64;
    let grown = now_split.saturating_sub(s0.last);
    if share_now < FRAGMENTED_SHARE
        || share_now - share_then < FRAGMENTED_SHARE_GROWTH
        || grown < 512 << 20
    {
        return;
    }
    out.raise(
        FindingKind::Fragmentation,
        Severity::Warning,
        Some(&id.device_uuid),
        Some(id.pid),
        format!(
            "{who}: fragmentation: {} of the {} pool is in free split pieces ({:.0}%, up from {:.0}% {} ago): allocations of other sizes cannot use them",
            bytes(now_split),
            bytes(reserved_now),
            share_now * 100.0,
            share_then * 100.0,
            duration(FRAGMENTATION_WINDOW)
        ),
        json!({
            "inactive_split_bytes": now_split,
            "reserved_bytes": reserved_now,
            "share": (share_now * 1000.0).round() / 1000.0,
            "share_before": (share_then * 1000.0).round() / 1000.0,
            "grown_bytes": grown,
            "window_secs": FRAGMENTATION_WINDOW,
            "largest_free_block": stats.largest_free_block,
        }),
    );
}

/// The allocator's last-resort retries rising: pressure before OOMs.
fn retries(out: &mut Findings, now: f64, history: &History, id: &ProcessId, who: &str) {
    let Some(series) = series(history, id, Metric::Retries) else {
        return;
    };
    let Some(rise) = counter_rise(series, now, RETRY_WINDOW).filter(|&r| r > 0) else {
        return;
    };
    let total = series.last().unwrap_or(rise);
    out.raise(
        FindingKind::AllocRetries,
        Severity::Warning,
        Some(&id.device_uuid),
        Some(id.pid),
        format!(
            "{who}: {rise} allocation retries in the last {} ({total} in all): the allocator had to free its cache to allocate, the step before out-of-memory",
            duration(RETRY_WINDOW)
        ),
        json!({
            "retries_in_window": rise,
            "retries_total": total,
            "rate_per_min": (rise as f64 * 60.0 / RETRY_WINDOW * 10.0).round() / 10.0,
            "window_secs": RETRY_WINDOW,
        }),
    );
}

/// Capacity or fragmentation, from what the allocator saw at the OOM.
pub(crate) fn classify(
    report: Option<&OomReport>,
    stats: &AllocatorStats,
) -> (&'static str, String) {
    let stats = report.and_then(|r| r.stats.as_ref()).unwrap_or(stats);
    let pool_free = stats.reserved.saturating_sub(stats.allocated);
    let share = if stats.reserved > 0 {
        stats.inactive_split.unwrap_or(0) as f64 / stats.reserved as f64
    } else {
        0.0
    };
    if let Some(r) = report {
        if let Some(requested) = r.requested {
            let aggregate = r.device_free.unwrap_or(0).saturating_add(pool_free);
            let largest = stats
                .largest_free_block
                .unwrap_or(0)
                .max(r.device_free.unwrap_or(0));
            let fits_in_all = requested <= aggregate;
            let fits_in_one = stats.largest_free_block.is_some() && requested <= largest;
            if fits_in_all
                && (!fits_in_one
                    && (stats.largest_free_block.is_some() || share >= OOM_FRAGMENTED_SHARE))
            {
                return (
                    "fragmentation",
                    format!(
                        "it asked for {} with {} free in all but no free block that large: fragmentation, not capacity",
                        bytes(requested),
                        bytes(aggregate)
                    ),
                );
            }
            return (
                "capacity",
                format!(
                    "it asked for {} with {} free in all: live tensors need more than the device holds",
                    bytes(requested),
                    bytes(aggregate)
                ),
            );
        }
    }
    if share >= OOM_FRAGMENTED_SHARE {
        (
            "fragmentation",
            format!(
                "{:.0}% of the pool was in free split pieces: fragmentation, not capacity",
                share * 100.0
            ),
        )
    } else {
        (
            "capacity",
            format!(
                "live tensors held {} of a {} pool: capacity",
                bytes(stats.allocated),
                bytes(stats.reserved)
            ),
        )
    }
}

/// OOMs a feed reported (its `oom` messages) or counted (`num_ooms` rising), with their class.
fn ooms(sample: &NodeSample, history: &History, out: &mut Findings) {
    let now = sample.time;
    for p in &sample.processes {
        let Some(feed) = &p.feed else { continue };
        let record = sample.feeds.get(feed.feed);
        let report = record
            .and_then(|r| {
                r.ooms
                    .iter()
                    .filter(|o| o.index == feed.stats.index)
                    .max_by(|a, b| a.time.total_cmp(&b.time))
            })
            .filter(|o| now - o.time <= OOM_SHOWN_SECS);
        let id = ProcessId {
            pid: p.pid,
            start_time: p.start_time,
            device_uuid: p.device_uuid.clone(),
        };
        let counted = series(history, &id, Metric::Ooms)
            .and_then(|s| counter_rise(s, now, OOM_SHOWN_SECS))
            .filter(|&n| n > 0);
        if report.is_none() && counted.is_none() {
            continue;
        }
        let (class, why) = classify(report, &feed.stats);
        let place = device_name(sample, &p.device_uuid);
        let when = report.map_or_else(String::new, |r| format!(" {} ago", duration(now - r.time)));
        out.raise(
            FindingKind::Oom,
            Severity::Critical,
            Some(&p.device_uuid),
            Some(p.pid),
            format!("PID {} on {place} ran out of memory{when}: {why}", p.pid),
            json!({
                "class": class,
                "requested": report.and_then(|r| r.requested),
                "device_free": report.and_then(|r| r.device_free),
                "device_total": report.and_then(|r| r.device_total),
                "time": report.map(|r| r.time),
                "ooms_in_window": counted,
                "ooms_total": feed.stats.ooms,
                "allocated": feed.stats.allocated,
                "reserved": feed.stats.reserved,
                "inactive_split": feed.stats.inactive_split,
                "largest_free_block": feed.stats.largest_free_block,
            }),
        );
    }
}

/// Live tensors peaking within a few percent of what the device can give them: its total
/// less what is held outside any pool's tensors and cache at this instant (contexts, memory
/// outside the pools, processes without a feed, everything else).
fn capacity(
    out: &mut Findings,
    history: &History,
    uuid: &str,
    layers: Option<&crate::layers::Layers>,
    total: Option<u64>,
    place: &str,
) {
    let (Some(total), Some(layers), Some(live)) = (
        total,
        layers,
        history.get(&SeriesKey::device(uuid, Metric::Layer(Layer::Live))),
    ) else {
        return;
    };
    let Some((peak, window)) = live.peak() else {
        return;
    };
    let elsewhere = [
        Layer::Context,
        Layer::OutsidePool,
        Layer::Unattributed,
        Layer::Other,
    ]
    .iter()
    .filter_map(|&l| layers.get(l))
    .fold(0u64, u64::saturating_add);
    let holdable = total.saturating_sub(elsewhere);
    if holdable == 0 || (peak as f64) < CAPACITY_SHARE * holdable as f64 {
        return;
    }
    out.raise(
        FindingKind::Capacity,
        Severity::Warning,
        Some(uuid),
        None,
        format!(
            "{place}: live tensors peaked at {} of the {} they can have ({:.0}%) in the last {}: at capacity",
            bytes(peak),
            bytes(holdable),
            peak as f64 * 100.0 / holdable as f64,
            duration(window)
        ),
        json!({ "peak_live": peak, "holdable": holdable, "total": total, "window_secs": window }),
    );
}

/// A live process holding memory with its SMs idle for minutes.
fn idle(
    out: &mut Findings,
    now: f64,
    history: &History,
    id: &ProcessId,
    p: &ProcessSample,
    who: &str,
) {
    let held = p.used.unwrap_or(0);
    if !p.visible || held < IDLE_MIN_BYTES {
        return;
    }
    let Some(sm) = series(history, id, Metric::Sm) else {
        return;
    };
    let idle_for = |window: f64| {
        let chunks = sm.chunks(now, window, 5);
        chunks.iter().all(|c| c.is_some_and(|c| c.max == 0))
    };
    if !idle_for(IDLE_SECS) {
        return;
    }
    let longest = [3600.0, 1800.0, 900.0]
        .into_iter()
        .find(|&w| idle_for(w))
        .unwrap_or(IDLE_SECS);
    out.raise(
        FindingKind::IdleHolder,
        Severity::Info,
        Some(&id.device_uuid),
        Some(id.pid),
        format!(
            "{who} holds {} with its SMs idle (0%) for {} or more",
            bytes(held),
            duration(longest)
        ),
        json!({ "used": held, "idle_secs": longest }),
    );
}

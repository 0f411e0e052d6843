//! Time to OOM (`oom_forecast`), and each fed process's headroom.
//!
//! **Forecast.** For a climb (of a process or of a device's `other`): the bytes that can still
//! be taken, divided by the climb's rate. For live tensors, that is what the device could
//! give the pool (its free memory, plus the pool less its split pieces, which other sizes
//! cannot use) less the peak the series reached lately: the peak, not the floor, is what
//! must fit, so the room the saw-tooth's teeth already take is not there to climb into. For
//! the pool itself, memory outside it, a process without a feed or a device's `other`: the
//! device's free memory. Only a climb is forecast, so a plateau, a saw-tooth, a single step
//! or a warm-up that levels off never is; warned under an hour, critical under ten minutes.
//!
//! **Headroom** (per fed process): how far its peak of live tensors can grow before an
//! allocation of the same shape would fail: `free + reserved − fragmented − peak`, the first
//! three at this instant (NVML's free, the feed's pool and split pieces, read within one
//! feed interval). The peak is one peak of live tensors, never a sum of peaks: the larger of
//! the allocator's own (`peak_allocated`, exact, since the process started or last reset its
//! peak counters: `peak_source` `allocator`) and the highest `allocated` strata sampled
//! over its last 15 minutes at most (`sampled`, over `peak_window_secs`, which sampling can
//! miss between readings).

use super::climbs::{Climber, Found};
use super::{metric_name, Cause};
use crate::detect::{FindingKind, Findings, Severity};
use crate::history::{History, KeyRef, Metric};
use crate::sample::{NodeSample, ProcessSample};
use crate::units::{bytes, duration};
use serde::Serialize;
use serde_json::json;

/// Forecasts nearer than this are warned of...
const WARN_SECS: f64 = 3600.0;
/// ...and nearer than this, critical.
const CRITICAL_SECS: f64 = 600.0;
/// The peak a live climb's forecast starts from: the highest reading over this window.
const PEAK_SECS: f64 = 300.0;

/// The device's free memory, as NVML reported it at this instant.
fn device_free(sample: &NodeSample, uuid: &str) -> Option<u64> {
    let (gpu, mig) = sample.locate(uuid)?;
    mig.map_or(gpu.memory, |m| m.memory).map(|m| m.free)
}

/// What a climb has left to climb into, in the units of the series it climbs.
struct Room {
    /// The series' level now (its recent peak for live tensors).
    level: u64,
    /// The line it will cross.
    limit: u64,
    free: u64,
    peak_window: Option<f64>,
}

fn room(sample: &NodeSample, history: &History, found: &Found, climber: &Climber) -> Option<Room> {
    let now = sample.time;
    let free = device_free(sample, climber.device)?;
    let series = history.get(&found.key)?;
    let stats = climber
        .process
        .and_then(|(p, usable)| p.feed.as_ref().filter(|_| usable).map(|f| &f.stats));
    match (found.cause, found.key.metric(), stats) {
        (Cause::Live, Metric::Allocated, Some(stats)) => {
            let window = PEAK_SECS.min(series.reach()[0]);
            let peak = series.chunks(now, window, 1)[0]?.max.max(stats.allocated);
            // A pool of unknown size (XLA's cuda_async): how much of it is reusable is unknown.
            let usable = free
                .saturating_add(stats.reserved?)
                .saturating_sub(stats.inactive_split.unwrap_or(0));
            Some(Room {
                level: peak,
                limit: usable.max(peak),
                free,
                peak_window: Some(window),
            })
        }
        _ => {
            let level = series.last()?;
            Some(Room {
                level,
                limit: level.saturating_add(free),
                free,
                peak_window: None,
            })
        }
    }
}

/// Raises `oom_forecast` for a climb that will run out of memory within the hour at its
/// present rate.
pub(super) fn forecast(
    out: &mut Findings,
    sample: &NodeSample,
    history: &History,
    found: &Found,
    climber: &Climber,
) {
    let who = climber.who;
    let now = sample.time;
    let rate = found.climb.rate;
    if !(rate.is_finite() && rate > 0.0) {
        return;
    }
    let Some(room) = room(sample, history, found, climber) else {
        return;
    };
    let available = room.limit.saturating_sub(room.level);
    let eta = available as f64 / rate;
    if eta >= WARN_SECS {
        return;
    }
    let severity = if eta < CRITICAL_SECS {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let per_step = found.per_step.filter(|(b, _)| *b > 0.0);
    let eta_step = per_step.map(|(b, _)| (available as f64 / b).floor() as u64);
    let steps = eta_step.map_or_else(String::new, |n| {
        format!(
            ", ~{n} steps at {}/step",
            bytes(per_step.map_or(0.0, |p| p.0) as u64)
        )
    });
    let what = match room.peak_window {
        Some(window) => format!(
            "{} can still be taken: what the device can give the pool ({} free, the pool less its split pieces) above its peak live of {} in the last {}",
            bytes(available),
            bytes(room.free),
            bytes(room.level),
            duration(window)
        ),
        None => format!(
            "{} can still be taken: the device's free memory",
            bytes(available)
        ),
    };
    out.raise(
        FindingKind::OomForecast,
        severity,
        Some(climber.device),
        climber.pid(),
        format!(
            "{who}: out of memory in ~{} at the present rate ({:+.0} MiB/min{steps}): {what}",
            duration(eta),
            rate * 60.0 / f64::from(1 << 20)
        ),
        json!({
            "cause": found.cause.name(),
            "series": metric_name(found.key.metric()),
            "eta_secs": eta.round(),
            "oom_at": (now + eta).round(),
            "eta_step": eta_step,
            "bytes_per_step": per_step.map(|(b, _)| b.round() as i64),
            "rate_bytes_per_sec": rate.round(),
            "available_bytes": available,
            "level_bytes": room.level,
            "limit_bytes": room.limit,
            "device_free_bytes": room.free,
            "peak_window_secs": room.peak_window,
            "start": found.climb.start,
        }),
    );
}

/// How far a fed process's peak of live tensors can grow before an allocation of the same
/// shape would fail (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Headroom {
    /// `usable_bytes − peak_live_bytes`; negative where the peak would no longer fit.
    pub bytes: i64,
    /// The peak of live tensor bytes.
    pub peak_live_bytes: u64,
    /// `allocator` (its `peak_allocated`: since the process started or last reset its peaks)
    /// or `sampled` (the highest `allocated` strata read over `peak_window_secs`).
    pub peak_source: &'static str,
    /// The window strata's own readings cover (at most 15 minutes).
    pub peak_window_secs: f64,
    /// What the device could give the pool now: NVML free + reserved − fragmented.
    pub usable_bytes: u64,
}

/// The headroom of a process whose feed is combined with NVML at this instant.
pub(crate) fn headroom(
    sample: &NodeSample,
    history: &History,
    process: &ProcessSample,
    usable: bool,
) -> Option<Headroom> {
    let stats = &process.feed.as_ref().filter(|_| usable)?.stats;
    let free = device_free(sample, &process.device_uuid)?;
    let series = history.get(&KeyRef::of(process, Metric::Allocated))?;
    // The raw window's peak, read from the first tier's folded maxima (exact, a tenth of the
    // points) with the open block beside them.
    let now = sample.time;
    let reach = series.reach()[0];
    let span = reach + series.step() * crate::history::FOLD_1 as f64;
    let sampled = series.chunks(now, span, 1)[0]?.max;
    let window = (now - series.first_time()?).clamp(0.0, span);
    let sampled = sampled.max(stats.allocated);
    let (peak, peak_source) = match stats.peak_allocated {
        Some(own) if own > sampled => (own, "allocator"),
        _ => (sampled, "sampled"),
    };
    let usable_bytes = free
        .saturating_add(stats.reserved?)
        .saturating_sub(stats.inactive_split.unwrap_or(0));
    let bytes = i64::try_from(usable_bytes).ok()? - i64::try_from(peak).ok()?;
    Some(Headroom {
        bytes,
        peak_live_bytes: peak,
        peak_source,
        peak_window_secs: window,
        usable_bytes,
    })
}

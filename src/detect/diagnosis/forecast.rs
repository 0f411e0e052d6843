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
use crate::detect::evidence::units::{Bytes, BytesPerSec, BytesPerStep, Secs, Steps, Time};
use crate::detect::evidence::{Evidence, Forecast};
use crate::detect::{FindingKind, Findings, Severity};
use crate::history::{History, KeyRef, Metric, Series};
use crate::sample::{NodeSample, ProcessSample};
use crate::units::{bytes, duration};
use serde::Serialize;

/// Forecasts nearer than this are warned of...
const WARN_SECS: f64 = 3600.0;
/// ...and nearer than this, critical.
const CRITICAL_SECS: f64 = 600.0;
/// The peak a live climb's forecast starts from: the highest reading over this window.
const PEAK_SECS: f64 = 300.0;
/// A climb's peak counter is paced once the climb has lasted this long...
const PACE_FROM_SECS: f64 = 240.0;
/// ...over this long at most.
const PACE_SECS: f64 = 600.0;

/// The device's free memory, as NVML reported it at this instant.
fn device_free(sample: &NodeSample, uuid: &str) -> Option<u64> {
    let (gpu, mig) = sample.locate(uuid)?;
    mig.map_or(gpu.memory, |m| m.memory).map(|m| m.free)
}

/// What a climb has left to climb into, in the units of the series it climbs.
struct Room {
    /// The series' peak: the highest reading over [`PEAK_SECS`], or the allocator's own peak
    /// counter where it rose within them.
    level: u64,
    /// `allocator` or `sampled`: where the level came from.
    level_source: &'static str,
    /// The pace of the allocator's peak counter, where the level is read from it and it
    /// rose steadily: bytes a second.
    pace: Option<f64>,
    /// The line it will cross.
    limit: u64,
    /// Read from live tensors' peak against what the device can give the pool.
    live: bool,
    free: u64,
    peak_window: f64,
}

fn room(sample: &NodeSample, history: &History, found: &Found, climber: &Climber) -> Option<Room> {
    let now = sample.time;
    let free = device_free(sample, climber.device)?;
    let stats = climber
        .process
        .and_then(|(p, usable)| p.feed.as_ref().filter(|_| usable).map(|f| (p, &f.stats)));
    match (found.cause, stats) {
        // Live tensors climbing (seen in their own series, or in the pool's that grows
        // because they do), in a pool of known size: their peak against what the device can
        // give the pool.
        (Cause::Live, Some((p, stats))) if stats.reserved.is_some() => {
            let series = history.get(&KeyRef::of(p, Metric::Allocated))?;
            let window = PEAK_SECS.min(series.reach()[0]);
            let sampled = series.chunk(now, window)?.max.max(stats.allocated);
            // The allocator's own peak where its counter rose within the window: exact, and
            // this climb's (a counter flat over it was set earlier: an old spike).
            let counter = climber
                .process
                .and_then(|(p, _)| history.get(&KeyRef::of(p, Metric::PeakAllocated)));
            let rose = counter
                .and_then(|c| c.chunk(now, window))
                .is_some_and(|c| c.max > c.min);
            let (level, level_source, pace) = match stats.peak_allocated {
                Some(own) if rose && own > sampled => (
                    own,
                    "allocator",
                    counter.and_then(|c| counter_pace(c, found, now)),
                ),
                _ => (sampled, "sampled", None),
            };
            // Split pieces other sizes cannot use, at their highest over the window: the
            // peak must fit beside them at theirs.
            let splits = climber
                .process
                .and_then(|(p, _)| history.get(&KeyRef::of(p, Metric::InactiveSplit)))
                .and_then(|s| s.chunk(now, window))
                .map_or(0, |c| c.max)
                .max(stats.inactive_split.unwrap_or(0));
            // A pool of unknown size (XLA's cuda_async): how much of it is reusable is unknown.
            let usable = free.saturating_add(stats.reserved?).saturating_sub(splits);
            Some(Room {
                level,
                level_source,
                pace,
                live: true,
                limit: usable.max(level),
                free,
                peak_window: window,
            })
        }
        _ => {
            // What the device holds for this series now is its last reading and the free
            // memory; its peak over the window must fit in that.
            let series = history.get(&found.key)?;
            let window = PEAK_SECS.min(series.reach()[0]);
            let sampled = series.chunk(now, window)?.max;
            let last = series.last()?;
            Some(Room {
                level: sampled.max(last),
                level_source: "sampled",
                pace: None,
                live: false,
                limit: last.saturating_add(free),
                free,
                peak_window: window,
            })
        }
    }
}

/// The pace of the allocator's own peak counter, bytes a second, over the climb's last
/// [`PACE_SECS`] at most (from [`PACE_FROM_SECS`] of it), a chunk a minute: the pace of
/// what must fit, read from the series the level is. Read over the chunks it rose through
/// up to now, four at least (before them it held, or was reset).
fn counter_pace(counter: &Series, found: &Found, now: f64) -> Option<f64> {
    let span = (now - found.climb.start).min(PACE_SECS);
    if span < PACE_FROM_SECS {
        return None;
    }
    let n = (span / 60.0).floor().max(4.0) as usize;
    let width = span / n as f64;
    let chunks = counter.chunks(now, span, n);
    let points: Vec<(f64, f64)> = chunks
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.map(|c| (now - span + (i as f64 + 0.5) * width, c.last as f64)))
        .collect();
    if points.len() + 1 < n {
        return None;
    }
    // The chunks it rose through, from chunk to chunk, up to now (before them it held, or
    // was reset): four of them at least.
    let from = points
        .windows(2)
        .rposition(|w| w[1].1 <= w[0].1)
        .map_or(0, |i| i + 1);
    let rising = &points[from..];
    (rising.len() >= 4)
        .then(|| crate::detect::trend::theil_sen(rising))
        .filter(|r| r.is_finite() && *r > 0.0)
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
    if !(found.climb.rate.is_finite() && found.climb.rate > 0.0) {
        return;
    }
    let Some(room) = room(sample, history, found, climber) else {
        return;
    };
    let rate = room.pace.unwrap_or(found.climb.rate);
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
    let peak = match room.level_source {
        "allocator" => "the allocator's own peak".to_string(),
        _ => format!(
            "the highest reading in the last {}",
            duration(room.peak_window)
        ),
    };
    let what = match (found.cause, room.live) {
        (Cause::Live, true) => format!(
            "{} can still be taken: what the device can give the pool ({} free, the pool less its split pieces) above its peak live of {} ({peak})",
            bytes(available),
            bytes(room.free),
            bytes(room.level),
        ),
        _ => format!(
            "{} can still be taken: the device's free memory ({}) above its peak of {} ({peak})",
            bytes(available),
            bytes(room.free),
            bytes(room.level),
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
        Evidence::OomForecast(Forecast {
            available_bytes: Bytes(available),
            bytes_per_step: per_step.map(|(b, _)| BytesPerStep(b.round() as i64)),
            cause: found.cause.name().to_string(),
            device_free_bytes: Bytes(room.free),
            eta_secs: Secs(eta.round()),
            eta_step: eta_step.map(Steps),
            level_bytes: Bytes(room.level),
            level_source: room.level_source.to_string(),
            limit_bytes: Bytes(room.limit),
            oom_at: Time((now + eta).round()),
            peak_window_secs: Secs(room.peak_window),
            rate_bytes_per_sec: BytesPerSec(rate.round()),
            series: metric_name(found.key.metric()).to_string(),
            start: Time(found.climb.start),
        }),
    );
}

/// How far a fed process's peak of live tensors can grow before an allocation of the same
/// shape would fail (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Headroom {
    /// `usable_bytes − peak_live_bytes`; negative where the peak would no longer fit.
    pub(crate) bytes: i64,
    /// The peak of live tensor bytes.
    pub(crate) peak_live_bytes: u64,
    /// `allocator` (its `peak_allocated`: since the process started or last reset its peaks)
    /// or `sampled` (the highest `allocated` strata read over `peak_window_secs`).
    pub(crate) peak_source: &'static str,
    /// The window strata's own readings cover (at most 15 minutes).
    pub(crate) peak_window_secs: f64,
    /// What the device could give the pool now: NVML free + reserved − fragmented.
    pub(crate) usable_bytes: u64,
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
    let sampled = series.chunk(now, span)?.max;
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

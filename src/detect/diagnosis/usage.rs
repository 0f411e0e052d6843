//! How a device's memory is used: live tensors at what the device can give them (capacity),
//! and processes holding memory with their SMs idle.

use crate::detect::evidence::units::{Bytes, Pct, Secs};
use crate::detect::evidence::{Capacity, Evidence, Idle};
use crate::detect::{FindingKind, Findings, Severity};
use crate::history::{History, Metric, ProcessId, Series, SeriesKey};
use crate::layers::Layer;
use crate::sample::ProcessSample;
use crate::units::{bytes, duration};

/// Live tensors within this share of a device's total are at its capacity.
const CAPACITY_SHARE: f64 = 0.95;
/// Idle: SMs at most this busy on average (whole percents, as NVML reads a process)...
const IDLE_MEAN_PCT: u64 = 2;
/// ...with no reading above this (a burst now and then is work: a job waiting on its data)...
const IDLE_PEAK_PCT: u64 = 10;
/// ...for this long, holding at least this much.
const IDLE_SECS: f64 = 300.0;
const IDLE_MIN_BYTES: u64 = 1 << 30;

/// Live tensors peaking within a few percent of what the device can give them: its total
/// less what is held outside any pool's tensors and cache at this instant (contexts, memory
/// outside the pools, processes without a feed, everything else).
pub(super) fn capacity(
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
        Evidence::Capacity(Capacity {
            holdable: Bytes(holdable),
            peak_live: Bytes(peak),
            total: Bytes(total),
            window_secs: Secs(window),
        }),
    );
}

/// The mean of a series' raw values over `[end - window, end]`, where its raw slots hold
/// all it knows of the window but its first slot at most (the raw ring holds 15 minutes less
/// a slot; a longer window, or a thinned series, is not held).
fn raw_mean(series: &Series, end: f64, window: f64) -> Option<f64> {
    let start = end - window;
    let held_from = start.max(series.first_time()?) + 1.5 * series.step();
    let mut raw = series.raw().filter(|(t, _)| *t <= end).peekable();
    if raw.peek().is_none_or(|(t, _)| *t > held_from) {
        return None;
    }
    let (sum, n) = raw
        .filter(|(t, _)| *t >= start)
        .filter_map(|(_, v)| v)
        .fold((0u64, 0u64), |(sum, n), v| (sum + v, n + 1));
    (n > 0).then(|| sum as f64 / n as f64)
}

/// A live process holding memory with its SMs idle for minutes: at most [`IDLE_MEAN_PCT`] on
/// average and never above [`IDLE_PEAK_PCT`] (NVML reads a process that runs the odd small
/// kernel at 1 %, so 0 % throughout would miss a notebook left open). Where the raw readings
/// do not reach over a window (the longer ones, a thinned history), its peaks stand for its
/// mean: none above [`IDLE_MEAN_PCT`].
pub(super) fn idle<'h>(
    out: &mut Findings,
    now: f64,
    sm: impl FnOnce() -> Option<&'h Series>,
    id: &ProcessId,
    p: &ProcessSample,
    who: &str,
) {
    let held = p.used.unwrap_or(0);
    if !p.visible || held < IDLE_MIN_BYTES {
        return;
    }
    let Some(sm) = sm() else {
        return;
    };
    // Busy at some moment of the shortest window (one read of it whole, where its chunks
    // would be read one by one): not idle over it, nor over any longer one.
    if sm
        .chunk(now, IDLE_SECS)
        .is_some_and(|c| c.max > IDLE_PEAK_PCT)
    {
        return;
    }
    // The peak and the mean over a window, where every chunk of it is known and idle.
    let idle_over = |window: f64| -> Option<(u64, f64)> {
        let mut peak = 0;
        for chunk in sm.chunks(now, window, 5) {
            peak = peak.max(chunk?.max);
            // Busy at some moment: not idle over this window, whatever its mean (which
            // walks the raw ring, and so is read only of a window that may be idle).
            if peak > IDLE_PEAK_PCT {
                return None;
            }
        }
        let mean = match raw_mean(sm, now, window) {
            Some(mean) => mean,
            None if peak <= IDLE_MEAN_PCT => peak as f64,
            None => return None,
        };
        (peak <= IDLE_PEAK_PCT && mean <= IDLE_MEAN_PCT as f64).then_some((peak, mean))
    };
    let Some((peak, mean)) = idle_over(IDLE_SECS) else {
        return;
    };
    let longest = [3600.0, 1800.0, 900.0]
        .into_iter()
        .find(|&w| idle_over(w).is_some())
        .unwrap_or(IDLE_SECS);
    let mean = (mean * 10.0).round() / 10.0;
    out.raise(
        FindingKind::IdleHolder,
        Severity::Info,
        Some(&id.device_uuid),
        Some(id.pid),
        format!(
            "{who} holds {} with its SMs idle for {} or more: {mean:.1}% on average over the last {}, at most {peak}% (idle: {IDLE_MEAN_PCT}% or less on average, never above {IDLE_PEAK_PCT}%)",
            bytes(held),
            duration(longest),
            duration(IDLE_SECS),
        ),
        Evidence::IdleHolder(Idle {
            idle_secs: Secs(longest),
            sm_mean_pct: Pct::Mean(mean),
            sm_peak_limit_pct: Pct::Whole(IDLE_PEAK_PCT),
            sm_peak_pct: Pct::Whole(peak),
            sm_threshold_pct: Pct::Whole(IDLE_MEAN_PCT),
            used: Bytes(held),
            window_secs: Secs(IDLE_SECS),
        }),
    );
}

//! How a device's memory is used: live tensors at what the device can give them (capacity),
//! and processes holding memory with their SMs idle.

use super::series;
use crate::detect::{FindingKind, Findings, Severity};
use crate::history::{History, Metric, ProcessId, SeriesKey};
use crate::layers::Layer;
use crate::sample::ProcessSample;
use crate::units::{bytes, duration};
use serde_json::json;

/// Live tensors within this share of a device's total are at its capacity.
const CAPACITY_SHARE: f64 = 0.95;
/// Idle: SM 0% for this long, holding at least this much.
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
        json!({ "peak_live": peak, "holdable": holdable, "total": total, "window_secs": window }),
    );
}

/// A live process holding memory with its SMs idle for minutes.
pub(super) fn idle(
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

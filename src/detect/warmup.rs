//! The warm-up verdict of a fed job that reports steps: what a user watching its first steps
//! wants to know. Once its step-end live memory and its peak have both held for
//! [`HELD_STEPS`] steps, it is said once, as an `info` finding: "fits: peak live X of Y usable
//! after N steps, headroom Z". If a forecast says it will run out first, "will not fit",
//! with the forecast. Said once per process and shown for [`SHOWN_SECS`]; the pipeline
//! remembers it, so a verdict never flips from sample to sample.

use super::diagnosis::steps;
use super::evidence::units::{Bytes, BytesPerStep, Secs, SignedBytes, Steps};
use super::evidence::{Evidence, Verdict, WarmUpForecast, WarmUpVerdict, Warming};
use super::{device_name, Finding, FindingKind, Headroom, Severity};
use crate::history::{History, KeyRef, Metric, ProcessId, StepPoint};
use crate::sample::NodeSample;
use crate::units::{bytes, duration};
use std::collections::HashMap;

/// Steps over which step-end live memory and its peak must hold.
pub(crate) const HELD_STEPS: u64 = 50;
/// Step-end readings those steps must have at least.
const HELD_POINTS: usize = 5;
/// "Held": within this many bytes, or this share of the level, whichever is more.
const HELD_BYTES: u64 = 64 << 20;
const HELD_SHARE: f64 = 0.01;
/// A verdict is shown this long after it is said.
pub(crate) const SHOWN_SECS: f64 = 600.0;

/// The verdicts said, by process.
#[derive(Debug, Default, Clone)]
pub(crate) struct WarmUp {
    said: HashMap<ProcessId, Finding>,
}

/// Whether step-end live bytes and the peak held over the last [`HELD_STEPS`]: the spread of
/// those readings, if so.
fn held(points: &[&StepPoint], history: &History, id: &ProcessId, now: f64) -> Option<u64> {
    let (first, last) = (points.first()?, points.last()?);
    if points.len() < HELD_POINTS || last.step - first.step < HELD_STEPS * 9 / 10 {
        return None;
    }
    let low = points.iter().map(|p| p.allocated).min()?;
    let high = points.iter().map(|p| p.allocated).max()?;
    let spread = high - low;
    if spread > HELD_BYTES.max((high as f64 * HELD_SHARE) as u64) {
        return None;
    }
    // The peak: the allocator's own where every reading has it, else the highest live bytes
    // strata holds, no higher in the second half of those steps than in the first.
    let peaks: Option<Vec<u64>> = points.iter().map(|p| p.peak_allocated).collect();
    let peak_held = match peaks {
        Some(peaks) => peaks.first() == peaks.last(),
        None => {
            let series = history.get(&KeyRef::of_process(id, Metric::Allocated))?;
            let halves = series.chunks(now, (now - first.time).max(1.0), 2);
            matches!((halves[0], halves[1]), (Some(a), Some(b)) if b.max <= a.max)
        }
    };
    peak_held.then_some(spread)
}

impl WarmUp {
    /// Adds to `findings` (those of this instant, forecasts included) the verdicts said now
    /// or still shown; `headroom` is the headroom of the sample's process at a place, asked
    /// only for a process a verdict may be said of.
    pub(crate) fn apply(
        &mut self,
        sample: &NodeSample,
        history: &History,
        headroom: impl Fn(usize) -> Option<Headroom>,
        findings: &mut Vec<Finding>,
    ) {
        // Nothing said, and no process's steps kept: no process has a verdict to find (nor
        // a name to be made for the search, at every sample).
        if self.said.is_empty() && !history.keeps_steps() {
            return;
        }
        let now = sample.time;
        for (i, p) in sample.processes.iter().enumerate() {
            if p.feed.is_none() {
                continue;
            }
            let id = ProcessId::of(p);
            if let Some(said) = self.said.get(&id) {
                if now - said.since <= SHOWN_SECS {
                    findings.push(said.clone());
                }
                continue;
            }
            let Some(steps) = history.steps(&id) else {
                continue;
            };
            let Some(last) = steps.last().copied() else {
                continue;
            };
            let mine = |f: &&Finding| {
                f.pid == Some(p.pid) && f.device_uuid.as_deref() == Some(&p.device_uuid)
            };
            // Said only in a verdict: made when one is (most samples make none).
            let who = || format!("PID {} on {}", p.pid, device_name(sample, &p.device_uuid));
            let forecast = findings
                .iter()
                .filter(mine)
                .find(|f| f.kind == FindingKind::OomForecast);
            // Still warming up, and no forecast to say it will not fit: said as such, and
            // not remembered (the verdict comes once the level holds).
            let warm = steps::warm_up(steps);
            if let (None, Some(steps::WarmUp::Warming { per_step, secs })) = (forecast, warm) {
                findings.push(warming(
                    &who(),
                    &p.device_uuid,
                    p.pid,
                    now,
                    &last,
                    per_step,
                    secs,
                ));
                continue;
            }
            let verdict = if let Some(forecast) = forecast {
                let told = forecast
                    .message
                    .split_once(": ")
                    .map_or(forecast.message.as_str(), |(_, rest)| rest);
                Finding {
                    kind: FindingKind::WarmUp,
                    severity: Severity::Info,
                    device_uuid: Some(p.device_uuid.to_string()),
                    pid: Some(p.pid),
                    since: now,
                    message: format!("{}: will not fit: after {} steps, {told}", who(), last.step),
                    evidence: {
                        let told = match &forecast.evidence {
                            Evidence::OomForecast(f) => Some(f),
                            _ => None,
                        };
                        Evidence::WarmUpForecast(WarmUpForecast {
                            eta_secs: told.map(|f| f.eta_secs),
                            eta_step: told.and_then(|f| f.eta_step),
                            oom_at: told.map(|f| f.oom_at),
                            steps: Steps(last.step),
                            verdict: Verdict::WillNotFit,
                        })
                    },
                }
            } else {
                if findings
                    .iter()
                    .filter(mine)
                    .any(|f| f.kind == FindingKind::Climb)
                {
                    continue;
                }
                // Nor where its step-end floor climbs, whether or not the detectors judged it
                // at this instant (analyze runs them every 10 s of recording time).
                if steps::climbing_after(steps, warm).is_some() {
                    continue;
                }
                let Some(room) = headroom(i) else { continue };
                let recent: Vec<&StepPoint> = steps
                    .since_step(last.step.saturating_sub(HELD_STEPS))
                    .collect();
                let Some(spread) = held(&recent, history, &id, now) else {
                    continue;
                };
                let held_for = last.time - recent[0].time;
                let held_steps = last.step - recent[0].step;
                // A peak that no longer fits what the device can give the pool will not fit.
                let (verdict, said) = if room.bytes < 0 {
                    (
                        Verdict::WillNotFit,
                        format!(
                            "will not fit: peak live {} above the {} usable after {} steps (headroom {}): an allocation of that peak's shape would fail",
                            bytes(room.peak_live_bytes),
                            bytes(room.usable_bytes),
                            last.step,
                            signed_bytes(room.bytes),
                        ),
                    )
                } else {
                    (
                        Verdict::Fits,
                        format!(
                            "fits: peak live {} of {} usable after {} steps, headroom {} (step-end live within {} and its peak unchanged over the last {held_steps} steps, {})",
                            bytes(room.peak_live_bytes),
                            bytes(room.usable_bytes),
                            last.step,
                            signed_bytes(room.bytes),
                            bytes(spread),
                            duration(held_for)
                        ),
                    )
                };
                Finding {
                    kind: FindingKind::WarmUp,
                    severity: Severity::Info,
                    device_uuid: Some(p.device_uuid.to_string()),
                    pid: Some(p.pid),
                    since: now,
                    message: format!("{}: {said}", who()),
                    evidence: Evidence::WarmUp(WarmUpVerdict {
                        headroom_bytes: SignedBytes(room.bytes),
                        held_secs: Secs(held_for),
                        held_steps: Steps(held_steps),
                        peak_live_bytes: Bytes(room.peak_live_bytes),
                        peak_window_secs: Secs(room.peak_window_secs),
                        spread_bytes: Bytes(spread),
                        steps: Steps(last.step),
                        usable_bytes: Bytes(room.usable_bytes),
                        verdict,
                    }),
                }
            };
            findings.push(verdict.clone());
            self.said.insert(id, verdict);
        }
        // A process no longer listed for an hour has no verdict to keep.
        if self.said.len() > sample.processes.len() {
            self.said.retain(|id, f| {
                now - f.since <= 3600.0 || sample.processes.iter().any(|p| ProcessId::of(p) == *id)
            });
        }
    }
}

/// The finding of a job still warming up: its step-end live memory rising since its first
/// step at `per_step` bytes a step, for `secs`.
fn warming(
    who: &str,
    device: &str,
    pid: u32,
    now: f64,
    last: &StepPoint,
    per_step: f64,
    secs: f64,
) -> Finding {
    let rising = if per_step > 0.0 {
        format!("rising {}/step", bytes(per_step as u64))
    } else {
        "first readings".to_string()
    };
    Finding {
        kind: FindingKind::WarmingUp,
        severity: Severity::Info,
        device_uuid: Some(device.to_string()),
        pid: Some(pid),
        since: now,
        message: format!(
            "{who}: warming up: step-end live {} after {} steps, {rising} for {}; judged once it levels off (or after {} of steady rise)",
            bytes(last.allocated),
            last.step,
            duration(secs),
            duration(steps::WARM_UP_AT_MOST_SECS)
        ),
        evidence: Evidence::WarmingUp(Warming {
            allocated: Bytes(last.allocated),
            bytes_per_step: BytesPerStep(per_step.round() as i64),
            steps: Steps(last.step),
            verdict: Verdict::WarmingUp,
            warming_secs: Secs(secs.round()),
        }),
    }
}

/// `1.20 GiB`, or `−512 MiB`.
fn signed_bytes(value: i64) -> String {
    if value < 0 {
        format!("−{}", bytes(value.unsigned_abs()))
    } else {
        bytes(value.unsigned_abs())
    }
}

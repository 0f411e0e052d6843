//! Climbs: which series of a process (or a device's `other`) rises with no plateau, and what
//! that says is growing.

use super::steps::WarmUp;
use super::{metric_name, mib_per_min, series, Cause};
use crate::detect::evidence::units::{self, Bytes, BytesPerStep, MibPerMin, Secs, Time};
use crate::detect::evidence::{self, Evidence};
use crate::detect::trend::{climbing, floor_rate, Climb, WINDOWS};
use crate::detect::{FindingKind, Findings, Severity};
use crate::history::{History, Metric, ProcessId, SeriesKey, Steps};
use crate::sample::pool::SitesState;
use crate::sample::{FeedSample, NodeSample, ProcessSample};
use crate::units::{bytes, duration};

/// A climb found, with what it reads and, where the process reports steps, its pace per step.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub(crate) cause: Cause,
    pub(crate) climb: Climb,
    pub(crate) key: SeriesKey,
    /// Bytes per training step and the steps the reading spans, judged on the step-end
    /// readings.
    pub(crate) per_step: Option<(f64, u64)>,
    /// Where the warm-up of a process that reports steps ended: only steps after it are
    /// judged per step.
    pub(crate) warm_up: Option<WarmUp>,
}

/// Whose climb it is: the device it is on, how its message names it and, for a process's
/// climb, the process with whether its feed is combined with NVML at this instant.
pub(crate) struct Climber<'a> {
    pub(crate) device: &'a str,
    pub(crate) who: &'a str,
    pub(crate) process: Option<(&'a ProcessSample, bool)>,
    /// The site that grew most in the process's latest sites window on its device.
    pub(crate) grew: Option<Grew<'a>>,
}

/// The site that grew most over a sites window (`strata sites`, `w`).
pub(crate) struct Grew<'a> {
    pub(crate) site: &'a str,
    pub(crate) bytes: u64,
    pub(crate) window: f64,
    /// When the window ended.
    pub(crate) end: f64,
}

/// The site that grew most over the latest finished sites window of this feed's device.
pub(crate) fn grew_most<'a>(sample: &'a NodeSample, feed: &FeedSample) -> Option<Grew<'a>> {
    let report = sample.feeds.get(feed.feed)?.sites.as_deref()?;
    if report.state != SitesState::Done {
        return None;
    }
    let device = report
        .devices
        .iter()
        .find(|d| d.index == feed.stats.index)?;
    let top = device.growth.iter().max_by_key(|g| g.bytes)?;
    let window = report.window?;
    (top.bytes > 0).then_some(Grew {
        site: &top.site,
        bytes: top.bytes,
        window,
        end: report.time,
    })
}

impl Climber<'_> {
    pub(crate) fn pid(&self) -> Option<u32> {
        self.process.map(|(p, _)| p.pid)
    }
}

pub(super) fn raise(out: &mut Findings, now: f64, climber: &Climber, found: &Found) {
    let who = climber.who;
    let climb = &found.climb;
    let rate = mib_per_min(climb.rate);
    let cause = found.cause;
    let per_step = found.per_step.map_or_else(String::new, |(b, steps)| {
        format!(", {}/step over {steps} steps", bytes(b.max(0.0) as u64))
    });
    let ended = match found.warm_up {
        Some(WarmUp::Ended { step, time, how }) => Some((step, time, how)),
        _ => None,
    };
    // A window that ended during the climb, of live tensors: where they grew. An older
    // window says nothing of this climb.
    let grew = climber
        .grew
        .as_ref()
        .filter(|g| cause == Cause::Live && g.end >= climb.start);
    let site = grew.map_or_else(String::new, |g| {
        format!(
            "; grew most at {} (+{} over {})",
            g.site,
            bytes(g.bytes),
            duration(g.window)
        )
    });
    let evidence = Evidence::Climb(evidence::Climb {
        bytes_per_step: found
            .per_step
            .map(|(per, _)| BytesPerStep(per.round() as i64))
            .into(),
        cause: cause.name().to_string(),
        duration_secs: Secs((now - climb.start).round()),
        from_bytes: Bytes(climb.from),
        grew_most_at: grew.map(|g| g.site.to_string()).into(),
        grew_most_bytes: grew.map(|g| Bytes(g.bytes)).into(),
        grew_most_window_secs: grew.map(|g| Secs(g.window.round())).into(),
        rate_mib_per_min: MibPerMin((rate * 10.0).round() / 10.0),
        series: metric_name(found.key.metric()).to_string(),
        start: Time(climb.start),
        steps: found.per_step.map(|(_, steps)| units::Steps(steps)).into(),
        to_bytes: Bytes(climb.to),
        warm_up_end: ended.map(|(_, _, how)| how.name().to_string()).into(),
        warm_up_end_step: ended.map(|(step, _, _)| units::Steps(step)).into(),
        warm_up_end_time: ended.map(|(_, time, _)| Time(time)).into(),
        window_secs: Secs(climb.window),
    });
    out.raise(
        FindingKind::Climb,
        Severity::Warning,
        Some(climber.device),
        climber.pid(),
        format!(
            "{who}: {} {:+.0} MiB/min{per_step} for {} ({} → {}){site}",
            cause.says(),
            rate,
            duration(now - climb.start),
            bytes(climb.from),
            bytes(climb.to)
        ),
        evidence,
    );
    out.climbed(found.key.clone());
}

/// A fed process that reports steps: its step-end readings climbing are live tensors kept
/// from step to step, flagged on their own (often sooner than in time, the saw-tooth gone);
/// a climb seen in time gets their pace per step as evidence.
pub(super) fn with_steps(steps: &Steps, found: Option<Found>, id: &ProcessId) -> Option<Found> {
    let warm = super::steps::warm_up(steps);
    let by_step = super::steps::climbing_after(steps, warm);
    let ended = warm.filter(|w| matches!(w, WarmUp::Ended { .. }));
    let found = match (found, by_step) {
        (Some(mut f), Some(c)) if f.cause == Cause::Live => {
            f.per_step = Some((c.bytes_per_step, c.steps));
            Some(f)
        }
        (Some(mut f), None) => {
            f.per_step = super::steps::climb_per_step(steps, f.climb.start);
            Some(f)
        }
        (_, Some(c)) => Some(Found {
            cause: Cause::Live,
            climb: Climb {
                rate: c.rate,
                start: c.start_time,
                from: c.from,
                to: c.to,
                window: c.window_secs,
            },
            key: SeriesKey::Process(id.clone(), Metric::Allocated),
            per_step: Some((c.bytes_per_step, c.steps)),
            warm_up: None,
        }),
        (None, None) => None,
    };
    found.map(|f| Found {
        warm_up: ended,
        ..f
    })
}

/// The cause of a climb of NVML's figure for a fed process whose allocator reports no pool
/// (XLA's cuda_async): live tensors where their floor rises beside it, over its window (and
/// the longest, where the series covers it), at more than [`BESIDE_SHARE`] of its rate (as a
/// pool climbs because its tensors do); unattributed where they are flat.
pub(super) fn unpooled_cause(history: &History, id: &ProcessId, now: f64, c: &Climb) -> Cause {
    let longest = WINDOWS[WINDOWS.len() - 1].0;
    let rate =
        |window| series(history, id, Metric::Allocated).and_then(|s| floor_rate(s, now, window));
    // Over the climb's window they must rise; over the longest, where it is covered.
    if rate(c.window).is_some_and(|r| r > BESIDE_SHARE * c.rate)
        && rate(longest).is_none_or(|r| r > BESIDE_SHARE * c.rate)
    {
        Cause::Live
    } else {
        Cause::Unattributed
    }
}

/// A layer whose floor moves at this share of a climb's rate or less is flat beside it: not
/// its cause.
const BESIDE_SHARE: f64 = 0.25;

/// Which layer of a fed process climbs: live tensors first; the cache only when live tensors
/// are flat beside it (a quarter of its rate or less); memory outside the pool only when
/// the pool is flat too. A layer that climbs along with another is not its cause.
pub(super) fn fed(history: &History, id: &ProcessId, now: f64) -> Option<(Cause, Climb, Metric)> {
    // A layer is flat beside a climb when its floor moves at BESIDE_SHARE of the climb's
    // rate or less, over the climb's own window and over the longest one (a slow leak under a
    // noisy saw-tooth hides in a short window, not in a long one).
    let longest = WINDOWS[WINDOWS.len() - 1].0;
    let flat = |metric, c: &Climb| {
        [c.window, longest].into_iter().all(|window| {
            series(history, id, metric)
                .and_then(|s| floor_rate(s, now, window))
                .is_none_or(|r| r <= BESIDE_SHARE * c.rate)
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

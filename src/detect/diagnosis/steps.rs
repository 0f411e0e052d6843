//! Climbs per training step, judged on the step-end readings ([`crate::history::Steps`]):
//! with each step's own tensors freed, the saw-tooth within a step is gone, and what stays is
//! what the job keeps from one step to the next. A leak is then "12 MiB per step", seen in a
//! few hundred steps whatever the steps' pace.
//!
//! A window of the last N steps is cut into chunks of steps and each chunk's least live
//! bytes taken; the floor must pass the same tests as a climb in time
//! ([`crate::detect::trend::shape`]), now and a tenth of the window earlier.
//!
//! Only steps after the job's warm-up are judged ([`warm_up`]): a job filling its memory to
//! its working level over its first minutes climbs per step as a leak does, and ends in a
//! plateau. The warm-up ends where the data says so: where the step-end floor, rising since
//! the first reading, slows to a quarter of its pace or less (the knee of the ramp); or,
//! where it never slows, once it has climbed steadily for [`WARM_UP_AT_MOST_SECS`] (a warm-up
//! takes minutes; a steady climb past that is judged as any other).

use crate::detect::trend::shape;
use crate::history::{StepPoint, Steps};

/// Windows read, in steps, with their chunks: the shortest flags a leak of 1 MiB a step
/// within 300 steps; the longer ones slower leaks through their noise.
pub(crate) const STEP_WINDOWS: [(u64, usize); 3] = [(200, 8), (600, 10), (2000, 10)];
/// A climb per step slower than this is not one, bytes a step.
const MIN_BYTES_PER_STEP: f64 = 256.0 * 1024.0;
/// Readings a window needs at least.
const MIN_POINTS: usize = 12;

/// A steady climb from a job's first readings that has not slowed in this long is no
/// warm-up.
pub(crate) const WARM_UP_AT_MOST_SECS: f64 = 300.0;
/// Step-end readings a chunk of a warm-up's reading takes its floor over.
const WARM_CHUNK: usize = 6;
/// The warm-up has ended when the recent pace is at most this share of its pace so far.
const KNEE_SHARE: f64 = 0.25;
/// Chunks a pace is read over at most.
const PACE_POINTS: usize = 16;

/// Where a job's warm-up stands, read from its step-end floor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum WarmUp {
    /// Still rising at its pace since the first reading (bytes a step), for this long.
    Warming { per_step: f64, secs: f64 },
    /// Over at this step and time (the first reading, where the floor did not rise from
    /// the start), and how it was told.
    Ended {
        step: u64,
        time: f64,
        how: WarmUpEnd,
    },
}

/// How a warm-up's end was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WarmUpEnd {
    /// The floor did not rise from the first reading: no warm-up seen.
    NotSeen,
    /// The floor's pace fell to a quarter of its warm-up pace or less.
    Knee,
    /// The floor climbed steadily for [`WARM_UP_AT_MOST_SECS`] without slowing.
    TooLong,
}

impl WarmUpEnd {
    pub(crate) fn name(self) -> &'static str {
        match self {
            WarmUpEnd::NotSeen => "not_seen",
            WarmUpEnd::Knee => "knee",
            WarmUpEnd::TooLong => "steady_past_300s",
        }
    }
}

/// The floors of consecutive chunks of [`WARM_CHUNK`] readings: (middle step, least live
/// bytes, time of the chunk's last reading).
fn warm_chunks(points: &[&StepPoint]) -> Vec<(f64, f64, f64)> {
    points
        .chunks_exact(WARM_CHUNK)
        .map(|c| {
            let floor = c.iter().map(|p| p.allocated).min().unwrap_or(0) as f64;
            let mid = (c[0].step + c[c.len() - 1].step) as f64 / 2.0;
            (mid, floor, c[c.len() - 1].time)
        })
        .collect()
}

/// A robust pace over chunks' floors (Theil-Sen), over at most [`PACE_POINTS`] of them
/// spread evenly: the knee is searched at every chunk, and the pairs grow as their square.
fn pace(floors: &[(f64, f64)]) -> f64 {
    if floors.len() <= PACE_POINTS {
        return crate::detect::trend::theil_sen(floors);
    }
    let last = floors.len() - 1;
    let thinned: Vec<(f64, f64)> = (0..PACE_POINTS)
        .map(|i| floors[i * last / (PACE_POINTS - 1)])
        .collect();
    crate::detect::trend::theil_sen(&thinned)
}

/// Where the warm-up of the job whose step-end readings are `steps` stands: it rises from
/// the first reading at a pace (bytes a step, Theil-Sen over the chunks' floors); it has
/// ended at the first chunk after which the pace over the following chunks falls to
/// [`KNEE_SHARE`] of the pace up to it, or once the job has climbed without slowing for
/// [`WARM_UP_AT_MOST_SECS`] since its first reading ([`Steps::began`], which the bounded
/// readings may have let go: a job stepping fast keeps only its last minutes).
pub(crate) fn warm_up(steps: &Steps) -> Option<WarmUp> {
    let points: Vec<&StepPoint> = steps.points().iter().collect();
    let first = *points.first()?;
    let began = steps.began().map_or(first.time, |b| b.time.min(first.time));
    let chunks = warm_chunks(&points);
    let floors: Vec<(f64, f64)> = chunks.iter().map(|&(s, f, _)| (s, f)).collect();
    let ended = |i: usize, how| {
        let at = points[(i * WARM_CHUNK).min(points.len() - 1)];
        WarmUp::Ended {
            step: at.step,
            time: at.time,
            how,
        }
    };
    let too_long = |time: f64| time - began >= WARM_UP_AT_MOST_SECS;
    if floors.len() < 2 {
        let last = points[points.len() - 1].time;
        if too_long(last) {
            return Some(ended(0, WarmUpEnd::TooLong));
        }
        return Some(WarmUp::Warming {
            per_step: 0.0,
            secs: last - began,
        });
    }
    // Not rising from the start: nothing to wait for.
    let opening = crate::detect::trend::theil_sen(&floors[..floors.len().min(3)]);
    if opening < MIN_BYTES_PER_STEP {
        return Some(ended(0, WarmUpEnd::NotSeen));
    }
    // The readings kept begin after the job's first (a fast job keeps only its last
    // minutes): a knee before them shows as the pace since the first reading being four
    // times the pace they open with or more.
    if let Some(b) = steps.began().filter(|b| b.step < first.step) {
        let since_began = (floors[0].1 - b.allocated as f64) / (floors[0].0 - b.step as f64);
        if opening <= KNEE_SHARE * since_began {
            return Some(ended(0, WarmUpEnd::Knee));
        }
    }
    // The knee: the first chunk k (with three after it) where the pace after it is at most
    // a quarter of the pace up to it.
    for k in 0..floors.len().saturating_sub(2) {
        if too_long(chunks[k].2) {
            return Some(ended(k, WarmUpEnd::TooLong));
        }
        if k < 2 {
            continue;
        }
        let before = pace(&floors[..=k]);
        let after = crate::detect::trend::theil_sen(&floors[k..(k + 4).min(floors.len())]);
        if before > 0.0 && after <= KNEE_SHARE * before {
            return Some(ended(k, WarmUpEnd::Knee));
        }
    }
    let last = chunks[chunks.len() - 1];
    if too_long(last.2) {
        return Some(ended(chunks.len() - 1, WarmUpEnd::TooLong));
    }
    Some(WarmUp::Warming {
        per_step: pace(&floors),
        secs: last.2 - began,
    })
}

/// The step-end readings after a warm-up that stands at `warm` (all of them where none was
/// seen); none while the job warms up.
fn after_warm_up(steps: &Steps, warm: Option<WarmUp>) -> Steps {
    match warm {
        Some(WarmUp::Ended { step, .. }) => steps.copy_from_step(step),
        _ => Steps::default(),
    }
}

/// A climb per step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StepClimb {
    pub(crate) bytes_per_step: f64,
    /// The steps the window spans.
    pub(crate) steps: u64,
    /// Where the climb began within the window (its first step and that step's time).
    pub(crate) start_step: u64,
    pub(crate) start_time: f64,
    /// The floor at the window's start and end.
    pub(crate) from: u64,
    pub(crate) to: u64,
    /// Seconds the window spans, and the pace in bytes a second.
    pub(crate) window_secs: f64,
    pub(crate) rate: f64,
}

/// The floor (least live bytes) and peaks of `n` chunks of the steps `(end - window, end]`,
/// each at its middle step; `None` unless nearly every chunk holds readings.
#[allow(clippy::type_complexity)]
fn chunks(
    points: &[&StepPoint],
    end: u64,
    window: u64,
    n: usize,
) -> Option<(Vec<(f64, f64)>, Vec<(f64, f64)>)> {
    let from = end.checked_sub(window)?;
    let mut spans: Vec<Option<(u64, u64)>> = vec![None; n];
    for p in points.iter().filter(|p| p.step > from && p.step <= end) {
        let i = (((p.step - from - 1) as u128 * n as u128 / window as u128) as usize).min(n - 1);
        spans[i] = Some(match spans[i] {
            Some((lo, hi)) => (lo.min(p.allocated), hi.max(p.allocated)),
            None => (p.allocated, p.allocated),
        });
    }
    let known = spans.iter().filter(|s| s.is_some()).count();
    if known + 1 < n || spans[0].is_none() || spans[n - 1].is_none() {
        return None;
    }
    let width = window as f64 / n as f64;
    let at = |i: usize| from as f64 + (i as f64 + 0.5) * width;
    let floor = spans
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.map(|(lo, _)| (at(i), lo as f64)))
        .collect();
    let peaks = spans
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.map(|(_, hi)| (at(i), hi as f64)))
        .collect();
    Some((floor, peaks))
}

/// Where a floor that passed the shape tests began to climb, and its pace from there: a
/// window that began flat (a leak that started inside it) would have its pace read low over
/// the whole of it. The floor is fitted flat up to a chunk and straight from it on; a later
/// start is taken only where it fits the floor markedly better (a third less scatter) than a
/// climb over the whole window.
fn from_onset(floor: &[(f64, f64)]) -> (usize, f64) {
    let fit = |k: usize| {
        let rising = &floor[k..];
        let slope = crate::detect::trend::theil_sen(rising);
        let (x0, y0) = rising[0];
        let intercept = {
            let mut v: Vec<f64> = rising.iter().map(|(x, y)| y - slope * (x - x0)).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let flat = y0.min(intercept);
        let residual: f64 = floor[..k]
            .iter()
            .map(|(_, y)| (y - flat).abs())
            .chain(
                rising
                    .iter()
                    .map(|(x, y)| (y - (intercept + slope * (x - x0))).abs()),
            )
            .sum();
        (residual, slope)
    };
    let (whole, whole_slope) = fit(0);
    (1..floor.len().saturating_sub(2))
        .map(|k| (k, fit(k)))
        .filter(|(_, (residual, slope))| *residual < 0.66 * whole && *slope > whole_slope)
        .min_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
        .map_or((0, whole_slope), |(k, (_, slope))| (k, slope))
}

/// Reads the window of `window` steps ending at step `end`: the pace per step from where it
/// began to climb, and the floor there and at the end.
fn read(points: &[&StepPoint], end: u64, window: u64, n: usize) -> Option<(f64, f64, f64, u64)> {
    let inside = points
        .iter()
        .filter(|p| p.step > end.saturating_sub(window) && p.step <= end)
        .count();
    if inside < MIN_POINTS {
        return None;
    }
    let (floor, peaks) = chunks(points, end, window, n)?;
    shape(&floor, &peaks, MIN_BYTES_PER_STEP).ok()?;
    let (from, rate) = from_onset(&floor);
    // The onset's chunk, as a step: where the window's chunk `from` begins.
    let width = window as f64 / n as f64;
    let onset = (floor[from].0 - width / 2.0).max(0.0) as u64;
    Some((rate, floor[from].1, floor[floor.len() - 1].1, onset))
}

/// The first window (short, then long) whose step-end floor climbs, at the last step and a
/// tenth of the window before it: windows after the job's warm-up ([`warm_up`]) only.
#[cfg(test)]
pub(crate) fn climbing(steps: &Steps) -> Option<StepClimb> {
    climbing_after(steps, warm_up(steps))
}

/// [`climbing`], the warm-up already read.
pub(crate) fn climbing_after(steps: &Steps, warm: Option<WarmUp>) -> Option<StepClimb> {
    let steps = &after_warm_up(steps, warm);
    let last = *steps.last()?;
    let points: Vec<&StepPoint> = steps.points().iter().collect();
    STEP_WINDOWS.iter().find_map(|&(window, n)| {
        let first = points.first()?;
        // The readings must reach back over the whole window.
        if first.step > last.step.saturating_sub(window) || last.step < window {
            return None;
        }
        let (per_step, from, to, onset) = read(&points, last.step, window, n)?;
        let earlier = last.step - window / 10;
        let before: Vec<&StepPoint> = points
            .iter()
            .copied()
            .filter(|p| p.step <= earlier)
            .collect();
        read(&before, earlier, window, n)?;
        let start_step = onset.max(last.step - window);
        let start = steps.since_step(start_step).next()?;
        let window_secs = last.time - start.time;
        let pace = (window_secs > 0.0).then(|| (last.step - start.step) as f64 / window_secs)?;
        Some(StepClimb {
            bytes_per_step: per_step,
            steps: window,
            start_step,
            start_time: start.time,
            from: from.max(0.0) as u64,
            to: to.max(0.0) as u64,
            window_secs,
            rate: per_step * pace,
        })
    })
}

/// The pace per step of the step-end floor since `since` (unix seconds), and the steps it
/// spans: the evidence of a climb first seen in time.
pub(crate) fn per_step(steps: &Steps, since: f64) -> Option<(f64, u64)> {
    per_step_read(steps, since, false)
}

/// [`per_step`] of a climb: from where its floor began to climb.
pub(crate) fn climb_per_step(steps: &Steps, since: f64) -> Option<(f64, u64)> {
    per_step_read(steps, since, true)
}

fn per_step_read(steps: &Steps, since: f64, onset: bool) -> Option<(f64, u64)> {
    let points: Vec<&StepPoint> = steps.points().iter().filter(|p| p.time >= since).collect();
    let (first, last) = (points.first()?, points.last()?);
    let window = last.step.checked_sub(first.step)?;
    if window < 16 || points.len() < MIN_POINTS {
        return None;
    }
    let n = 8;
    let (floor, _) = chunks(&points, last.step, window + 1, n)?;
    let slope = if onset {
        from_onset(&floor).1
    } else {
        crate::detect::trend::theil_sen(&floor)
    };
    Some((slope, window))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = (1u64 << 20) as f64;

    /// Step-end readings every `every` steps, `secs_per_step` apart, live bytes `f(step)`.
    fn steps(last: u64, every: u64, secs_per_step: f64, f: impl Fn(u64) -> f64) -> Steps {
        let mut s = Steps::default();
        let mut step = every;
        while step <= last {
            s.push(StepPoint {
                step,
                time: 1000.0 + step as f64 * secs_per_step,
                allocated: f(step).max(0.0) as u64,
                reserved: Some(0),
                peak_allocated: None,
            });
            step += every;
        }
        s
    }

    fn noise(step: u64) -> f64 {
        ((step as f64 * 12.9898).sin() * 43_758.545).fract() * 2.0 - 1.0
    }

    #[test]
    fn a_leak_of_a_mib_a_step_is_seen_within_300_steps_at_any_pace() {
        for (every, secs) in [(4u64, 0.05), (1, 5.0), (1, 0.5)] {
            let leak = |s: u64| {
                30_000.0 * MIB + 1.0 * MIB * s.saturating_sub(400) as f64 + 6.0 * MIB * noise(s)
            };
            let first = (400..2000)
                .step_by(every as usize)
                .find(|&last| climbing(&steps(last, every, secs, leak)).is_some())
                .expect("flagged");
            assert!(first <= 700, "every {every} at {secs} s: step {first}");
            let c = climbing(&steps(1000, every, secs, leak)).expect("climb");
            assert!((c.bytes_per_step / MIB - 1.0).abs() < 0.25, "{c:?}");
            let per_min = c.rate * 60.0 / MIB;
            assert!(
                (per_min - 60.0 / secs).abs() < 0.25 * 60.0 / secs,
                "{per_min}"
            );
        }
    }

    #[test]
    fn normal_step_end_shapes_never_climb() {
        let warm = |s: u64| if s < 3 { 10_000.0 * MIB } else { 30_000.0 * MIB } + 20.0 * MIB * noise(s);
        let settle =
            |s: u64| 30_000.0 * MIB * (1.0 - (-(s as f64) / 40.0).exp()) + 8.0 * MIB * noise(s);
        let stepped = |s: u64| 20_000.0 * MIB + if s > 700 { 3_000.0 * MIB } else { 0.0 };
        let jitter = |s: u64| 20_000.0 * MIB + 400.0 * MIB * noise(s);
        for (name, f) in [
            ("warm-up", &warm as &dyn Fn(u64) -> f64),
            ("settling", &settle),
            ("one step", &stepped),
            ("jitter", &jitter),
        ] {
            for last in (50..3000).step_by(25) {
                assert!(
                    climbing(&steps(last, 1, 1.0, f)).is_none(),
                    "{name} at {last}"
                );
            }
        }
    }

    /// A job's first readings at 10 steps a second (one reading every 2 steps), live bytes
    /// `f(step)`, pushed one by one as the pipeline does: the bounded readings let the first
    /// go after 1024.
    fn fast(last: u64, f: impl Fn(u64) -> f64) -> Steps {
        steps(last, 2, 0.1, f)
    }

    /// A ramp to 24 GiB over the first 900 steps (27 MiB a step), then a plateau.
    fn ramp(s: u64) -> f64 {
        24_000.0 * MIB * (s as f64 / 900.0).min(1.0) + 4.0 * MIB * noise(s)
    }

    #[test]
    fn a_warm_up_ramp_that_ends_in_a_plateau_never_climbs_and_ends_at_its_knee() {
        for last in (20..6000).step_by(10) {
            let s = fast(last, ramp);
            assert!(climbing(&s).is_none(), "a climb at step {last}");
            match warm_up(&s) {
                Some(WarmUp::Warming { .. }) => assert!(last < 1100, "warming at {last}"),
                Some(WarmUp::Ended { step, how, .. }) => {
                    assert!(last >= 900, "ended at {last}, within the ramp");
                    // Once the knee has left the readings kept, the warm-up is still over.
                    if s.points()[0].step < 850 {
                        assert_eq!(how, WarmUpEnd::Knee, "at {last}");
                        assert!((850..=1000).contains(&step), "knee at {step}, at {last}");
                    }
                }
                None => panic!("nothing read at {last}"),
            }
        }
    }

    #[test]
    fn a_leak_that_starts_during_the_warm_up_is_found_once_the_ramp_ends() {
        // 1 MiB a step kept from step 400, inside the ramp.
        let leak = |s: u64| ramp(s) + 1.0 * MIB * s.saturating_sub(400) as f64;
        let first = (900..4000)
            .step_by(10)
            .find(|&last| climbing(&fast(last, leak)).is_some())
            .expect("flagged");
        assert!(first <= 900 + 300, "flagged at step {first}");
        // And still, long after the knee has left the readings kept.
        for last in (first + 100..6000).step_by(100) {
            let s = fast(last, leak);
            assert!(
                matches!(warm_up(&s), Some(WarmUp::Ended { .. })),
                "warming again at {last}"
            );
            let c = climbing(&s).unwrap_or_else(|| panic!("lost at {last}"));
            assert!((c.bytes_per_step / MIB - 1.0).abs() < 0.25, "{c:?}");
        }
    }

    #[test]
    fn a_climb_from_the_first_step_that_never_slows_is_judged_after_five_minutes() {
        // 2 MiB a step from the start at 10 steps a second, for ever: no knee.
        let leak = |s: u64| 2_000.0 * MIB + 2.0 * MIB * s as f64 + 4.0 * MIB * noise(s);
        assert!(matches!(
            warm_up(&fast(2900, leak)),
            Some(WarmUp::Warming { .. })
        ));
        assert!(climbing(&fast(2900, leak)).is_none(), "judged within 300 s");
        let s = fast(3600, leak);
        assert!(
            matches!(
                warm_up(&s),
                Some(WarmUp::Ended {
                    how: WarmUpEnd::TooLong,
                    ..
                })
            ),
            "{:?}",
            warm_up(&s)
        );
        assert!(climbing(&s).is_some(), "not judged past 300 s");
    }
}

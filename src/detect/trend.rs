//! Reading a series' shape: is it climbing steadily, with no plateau? The trend
//! discriminates, not the level: a flat plateau at 95% is a healthy cache, a slow climb with no
//! plateau is a leak.
//!
//! The window is cut into chunks and each chunk's *minimum* is taken: a saw-tooth (tensors
//! allocated and freed within every step) has a flat floor however deep its teeth, while a leak
//! lifts the floor. A climb needs the floor to rise:
//! - steadily: a robust slope (Theil–Sen) of at least a minimum rate, and most chunks above
//!   the one before;
//! - by more than the noise: the rise is several times the floor's scatter around its line;
//! - spread out: no single step makes half of it (a one-off allocation is a step, not a leak);
//! - still: the last third of the window climbs at half the overall rate or more (a warm-up
//!   that reached its plateau does not);
//! - and not only the floor: the chunks' peaks rise too.

use crate::history::{Series, Span};

/// What a climb looks like, in bytes (or counts) per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Climb {
    /// Robust slope of the floor, units per second.
    pub(crate) rate: f64,
    /// When it began: where the floor's line meets the window's first level.
    pub(crate) start: f64,
    /// The floor at the window's start and end.
    pub(crate) from: u64,
    pub(crate) to: u64,
    /// The window read, seconds.
    pub(crate) window: f64,
}

/// The windows read, and the chunks each is cut into. The short ones catch fast leaks early;
/// the long ones slow leaks through their noise. Wide chunks keep a saw-tooth's troughs in
/// every chunk when its period is longer than a minute.
pub(crate) const WINDOWS: [(f64, usize); 4] = [(480.0, 8), (600.0, 5), (1200.0, 10), (1800.0, 6)];
/// Kendall's tau of the floor against time, at least: most pairs of chunks in order.
const MIN_TAU: f64 = 0.6;

/// A climb slower than this is not one, MiB a minute.
pub(crate) const MIN_RATE_MIB_PER_MIN: f64 = 10.0;
/// The least rise a climb must show, bytes: below it, nothing a user acts on.
pub(crate) const MIN_RISE: u64 = 128 << 20;

/// The median of some numbers (not empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Theil–Sen slope: the median of the slopes between every two points.
pub(crate) fn theil_sen(points: &[(f64, f64)]) -> f64 {
    let mut slopes = Vec::with_capacity(points.len() * points.len() / 2);
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            if b.0 > a.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    if slopes.is_empty() {
        return 0.0;
    }
    median(slopes)
}

/// Reads one series over a window ending at `now`: a climb, if its shape is one.
pub(crate) fn climb(series: &Series, now: f64, window: f64, n: usize) -> Option<Climb> {
    read(series, now, window, n).ok()
}

/// [`climb`], or the first test the shape failed.
pub(crate) fn read(
    series: &Series,
    now: f64,
    window: f64,
    n: usize,
) -> Result<Climb, &'static str> {
    let Shape {
        rate,
        first,
        last,
        n,
    } = shaped(series, now, window, n)?;
    let (start, from) = onset(
        series,
        now,
        window / n as f64,
        rate,
        first.max(0.0) as u64,
        window,
    );
    Ok(Climb {
        rate,
        start,
        from,
        to: last.max(0.0) as u64,
        window,
    })
}

/// What [`read`] finds before it looks for the onset: whether the window climbs, at what
/// rate, from and to which floor, in how many chunks.
struct Shape {
    rate: f64,
    first: f64,
    last: f64,
    n: usize,
}

/// [`read`] but for the onset: all a confirmation needs.
fn shaped(series: &Series, now: f64, window: f64, n: usize) -> Result<Shape, &'static str> {
    // No chunk narrower than the points it is made of.
    let n = n.min((window / series.resolution(window)).floor() as usize);
    if n < 4 {
        return Err("few chunks");
    }
    // A series that began after the first chunk (a warm-up, a process younger than the
    // window) leaves it empty, so uncovered: said before any read, as at every judgement of
    // a node's first minutes (a step past the chunk's edge, clear of its rounding).
    if series
        .first_time()
        .is_none_or(|t| t > now - window + window / n as f64 + series.step())
    {
        return Err("not covered");
    }
    // The rise from the first chunk's floor to the last's, read first and alone: most series
    // are flat, and this rules them out at a fraction of the cost of every chunk.
    match series.edges(now, window, n) {
        (Some(first), Some(last)) if last.min.saturating_sub(first.min) >= MIN_RISE => {}
        (Some(_), Some(_)) => return Err("too small"),
        _ => return Err("not covered"),
    }
    let chunks: Vec<Option<Span>> = series.chunks(now, window, n);
    // Every chunk known, or nearly: a series that began inside the window (a warm-up, a
    // restart) is not read until it covers it.
    let known = chunks.iter().filter(|c| c.is_some()).count();
    if known + 1 < n || chunks.first().is_none_or(|c| c.is_none()) || chunks[n - 1].is_none() {
        return Err("not covered");
    }
    let width = window / n as f64;
    let at = |i: usize| now - window + (i as f64 + 0.5) * width;
    let floor: Vec<(f64, f64)> = chunks
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.map(|c| (at(i), c.min as f64)))
        .collect();
    let peaks: Vec<(f64, f64)> = chunks
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.map(|c| (at(i), c.max as f64)))
        .collect();
    let (rate, rise) = shape(
        &floor,
        &peaks,
        MIN_RATE_MIB_PER_MIN * f64::from(1 << 20) / 60.0,
    )?;
    let first = floor[0].1;
    let last = floor[floor.len() - 1].1;
    // The same chunks half a width earlier: a quick step that straddles a boundary above is
    // split between two chunks there, and whole in one here.
    let shifted = series.chunks(now - width / 2.0, window, n);
    let floors: Vec<f64> = shifted.iter().flatten().map(|c| c.min as f64).collect();
    if floors.windows(2).any(|w| w[1] - w[0] > 0.5 * rise) {
        return Err("one step");
    }
    Ok(Shape {
        rate,
        first,
        last,
        n,
    })
}

/// The tests a climb's floor (and its peaks) must pass, on points `(x, value)` in order of
/// `x` (time, or training step): a robust slope of `min_rate` units per `x` or more, a rise
/// of [`MIN_RISE`] and four times the floor's scatter, in order, no one step making half of
/// it, still climbing in its last third, the peaks rising too. The slope and the rise, or
/// the first test failed.
pub(crate) fn shape(
    floor: &[(f64, f64)],
    peaks: &[(f64, f64)],
    min_rate: f64,
) -> Result<(f64, f64), &'static str> {
    if floor.len() < 2 {
        return Err("few chunks");
    }
    let rate = theil_sen(floor);
    if rate < min_rate {
        return Err("too slow");
    }
    let first = floor[0].1;
    let last = floor[floor.len() - 1].1;
    let rise = last - first;
    if rise < MIN_RISE as f64 {
        return Err("too small");
    }
    // Scatter of the floor around its line.
    let t0 = floor[0].0;
    let intercept = median(floor.iter().map(|(t, v)| v - rate * (t - t0)).collect());
    let scatter = median(
        floor
            .iter()
            .map(|(t, v)| (v - (intercept + rate * (t - t0))).abs())
            .collect(),
    );
    if rise < 4.0 * scatter {
        return Err("noise");
    }
    // Monotonic: most pairs of chunks in order (Kendall's tau), most steps up, and no step
    // carrying half the rise.
    let mut concordant = 0i64;
    let mut pairs = 0i64;
    for (i, a) in floor.iter().enumerate() {
        for b in &floor[i + 1..] {
            pairs += 1;
            concordant += match b.1.total_cmp(&a.1) {
                std::cmp::Ordering::Greater => 1,
                std::cmp::Ordering::Less => -1,
                std::cmp::Ordering::Equal => 0,
            };
        }
    }
    if pairs == 0 || (concordant as f64) < MIN_TAU * pairs as f64 {
        return Err("not monotonic");
    }
    let steps: Vec<f64> = floor.windows(2).map(|w| w[1].1 - w[0].1).collect();
    let up = steps.iter().filter(|&&s| s > 0.0).count();
    if (up as f64) < 0.6 * steps.len() as f64 {
        return Err("few steps up");
    }
    if steps.iter().any(|&s| s > 0.5 * rise) {
        return Err("one step");
    }
    // Still climbing at the end: no plateau.
    let tail = &floor[floor.len() - floor.len().div_ceil(3)..];
    if tail.len() >= 2 && theil_sen(tail) < 0.5 * rate {
        return Err("plateau");
    }
    // The peaks rise too.
    if theil_sen(peaks) < 0.3 * rate {
        return Err("peaks flat");
    }
    Ok((rate, rise))
}

/// When a climb seen over `window` (cut in chunks `chunk` wide) began, and the floor it began
/// from: walking back from now over up to two hours, in chunks as wide as the climb's own (a
/// saw-tooth within them is not a fall), the last point from which the floor kept rising at
/// about the climb's rate (each earlier floor no higher than the next, give or take half a
/// chunk of the climb, and no lower than four chunks of it). Never later than the window's
/// start, over which the climb was read; never before the series' first value.
fn onset(series: &Series, now: f64, chunk: f64, rate: f64, floor: u64, window: f64) -> (f64, u64) {
    let span = (series.reach()[1]).min(7200.0).max(window);
    let width = series.resolution(span).max(60.0).max(chunk);
    let n = (span / width).floor().max(1.0) as usize;
    let chunks = series.chunks(now, span, n);
    let width = span / n as f64;
    let slack = rate * width * 0.5;
    let mut i = n - 1;
    while i > 0 {
        match (chunks[i - 1], chunks[i]) {
            // Rising, give or take the slack, and no steeper than a few chunks of the climb
            // (a warm-up below it is not the climb).
            (Some(before), Some(after))
                if before.min as f64 <= after.min as f64 + slack
                    && (after.min as f64) - (before.min as f64) <= 8.0 * slack =>
            {
                i -= 1
            }
            _ => break,
        }
    }
    let first_known = series.first_time().unwrap_or(now - window);
    let start = (now - span + i as f64 * width).max(first_known);
    match chunks[i] {
        Some(c) if start < now - window => (start, c.min.min(floor)),
        _ => (now - window, floor),
    }
}

/// A climb is read again this long before now, and must hold there too: one lucky run of
/// noise is not a leak.
const CONFIRM_SECS: f64 = 60.0;

/// The first window (short, then long) in which a series climbs, now and a minute before.
pub(crate) fn climbing_at(series: &Series, now: f64) -> Option<Climb> {
    // No window can rise by more than the floor of its last moments stands above the lowest
    // of the longest window: every window's last chunk holds the last half of the shortest
    // chunk (chunks are at least that wide, and a point there is well inside the last), so
    // its floor is at most that floor; a first chunk's floor is at least that lowest. Most
    // series are ruled out here, in two reads: flat ones, and a saw-tooth whose trough
    // came round lately.
    let longest = WINDOWS[WINDOWS.len() - 1].0;
    let shortest_chunk = WINDOWS
        .iter()
        .map(|&(w, n)| w / n as f64)
        .fold(f64::INFINITY, f64::min);
    //
    // Then each window alone, the same way: its last chunk holds every raw slot of the last
    // three quarters of its width (as its own, or folded into a point that stands in it),
    // so its floor is at most theirs. A saw-tooth whose trough came round within a window's
    // last chunk is ruled out of that window without its chunks cut.
    let mut open = [true; WINDOWS.len()];
    if let Some(at) = series.last_time() {
        if at <= now && at >= now - shortest_chunk {
            let lowest = series.chunk(now, longest)?.min;
            let lately = series
                .chunk(now, shortest_chunk / 2.0)
                .map(|c| c.min)
                .or(series.last());
            if lately.is_some_and(|l| l.saturating_sub(lowest) < MIN_RISE) {
                return None;
            }
            let floors = series.trailing_floors(now, LAST_CHUNK_HELD);
            for (open, floor) in open.iter_mut().zip(floors) {
                *open = floor.is_none_or(|l| l.saturating_sub(lowest) >= MIN_RISE);
            }
        }
    }
    windows(series, now, open)
}

/// Seconds before now whose raw slots each window's last chunk surely holds: three
/// quarters of the chunk's width (the quarter left is far wider than any rounding of a
/// chunk's edge), ascending as [`Series::trailing_floors`] reads them.
const LAST_CHUNK_HELD: [f64; WINDOWS.len()] = {
    let mut out = [0.0; WINDOWS.len()];
    let mut i = 0;
    while i < WINDOWS.len() {
        out[i] = 0.75 * WINDOWS[i].0 / WINDOWS[i].1 as f64;
        i += 1;
    }
    out
};

/// [`climbing_at`], read in every window without ruling any series out first.
#[cfg(test)]
fn every_window(series: &Series, now: f64) -> Option<Climb> {
    windows(series, now, [true; WINDOWS.len()])
}

/// The first of the windows left `open` in which the series climbs, now and a minute before.
fn windows(series: &Series, now: f64, open: [bool; WINDOWS.len()]) -> Option<Climb> {
    WINDOWS
        .iter()
        .zip(open)
        .filter(|&(_, open)| open)
        .find_map(|(&(window, n), _)| {
            let c = climb(series, now, window, n)?;
            // Held a minute before too: its shape alone (its onset is not read).
            shaped(series, now - CONFIRM_SECS, window, n).ok()?;
            Some(c)
        })
}

/// How long a climb, once seen, is held through readings that miss it while its series has
/// not fallen (see [`super::ClimbHold`]): one noisy minute does not end a leak and start
/// another.
pub(crate) const HOLD_SECS: f64 = 120.0;

/// A climb now: [`climbing_at`] (the hold is the caller's, as it needs to remember).
pub(crate) fn climbing(series: &Series, now: f64) -> Option<Climb> {
    climbing_at(series, now)
}

/// The robust slope of a series' floor over a window (cut as a climb over it would be),
/// units per second: how fast it moves, climb or not. None where the series began inside
/// the window.
pub(crate) fn floor_rate(series: &Series, now: f64, window: f64) -> Option<f64> {
    let n = WINDOWS
        .iter()
        .find(|w| w.0 == window)
        .map_or(8, |w| w.1)
        .min((window / series.resolution(window)).floor() as usize);
    let width = window / n.max(1) as f64;
    let chunks = series.chunks(now, window, n);
    let floor: Vec<(f64, f64)> = chunks
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.map(|c| (now - window + (i as f64 + 0.5) * width, c.min as f64)))
        .collect();
    // Only over a window the series covers: a warm-up at its start is not its pace.
    let covered = chunks.first().is_some_and(|c| c.is_some());
    (covered && floor.len() >= 3).then(|| theil_sen(&floor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Scale, Series};

    const MIB: f64 = (1u64 << 20) as f64;

    fn series(minutes: f64, f: impl Fn(f64) -> f64) -> (Series, f64) {
        let mut s = Series::new(Scale::Kib, 1.0, 0.0);
        let end = minutes * 60.0;
        let mut t = 0.0;
        while t <= end {
            s.push(t, Some(f(t).max(0.0) as u64));
            t += 1.0;
        }
        (s, end)
    }

    /// Deterministic noise in [-1, 1].
    fn noise(t: f64) -> f64 {
        ((t * 12.9898).sin() * 43_758.545).fract() * 2.0 - 1.0
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Ruling a series out from its last value and the longest window's lowest never
        /// drops a climb that reading every window finds.
        #[test]
        fn the_quick_rule_out_never_drops_a_climb(
            rate in 0.0f64..400.0,
            begins in 0.0f64..2400.0,
            depth in 0.0f64..4000.0,
            period in 10.0f64..600.0,
            jitter in 0.0f64..300.0,
            minutes in 12.0f64..50.0,
            gap_every in 5u64..5000,
        ) {
            let mut s = Series::new(Scale::Kib, 1.0, 0.0);
            let end = minutes * 60.0;
            let mut t = 0.0;
            let mut k = 0u64;
            while t <= end {
                let v = 8_000.0 * MIB
                    + rate * MIB * (t - begins).max(0.0) / 60.0
                    + depth * MIB * ((t % period) / period)
                    + jitter * MIB * noise(t);
                s.push(t, (!k.is_multiple_of(gap_every)).then_some(v.max(0.0) as u64));
                t += 1.0;
                k += 1;
                if k.is_multiple_of(30) {
                    proptest::prop_assert_eq!(climbing_at(&s, t - 1.0), every_window(&s, t - 1.0));
                }
            }
        }
    }

    #[test]
    fn a_steady_leak_climbs_and_says_its_rate() {
        let (s, end) = series(30.0, |t| {
            20_000.0 * MIB + 100.0 * MIB * (t - 600.0).max(0.0) / 60.0 + 30.0 * MIB * noise(t)
        });
        let c = climbing(&s, end).expect("a climb");
        let per_min = c.rate * 60.0 / MIB;
        assert!((per_min - 100.0).abs() < 10.0, "{per_min}");
        // Seen at its start too: within ten minutes.
        assert!(climbing(
            &series(18.0, |t| 20_000.0 * MIB
                + 100.0 * MIB * (t - 600.0).max(0.0) / 60.0)
            .0,
            18.0 * 60.0
        )
        .is_some());
    }

    #[test]
    fn a_leak_on_a_saw_tooth_lifts_the_floor() {
        let (s, end) = series(40.0, |t| {
            10_000.0 * MIB + 8_000.0 * MIB * ((t % 60.0) / 60.0) + 60.0 * MIB * t / 60.0
        });
        assert!(climbing(&s, end).is_some());
    }

    #[test]
    fn normal_shapes_never_climb() {
        let plateau = |t: f64| 30_000.0 * MIB * (t / 180.0).min(1.0);
        let saw = |t: f64| 10_000.0 * MIB + 9_000.0 * MIB * ((t % 300.0) / 300.0);
        let fast_saw = |t: f64| 10_000.0 * MIB + 20_000.0 * MIB * ((t % 20.0) / 20.0);
        let noisy = |t: f64| 40_000.0 * MIB + 900.0 * MIB * noise(t);
        let step = |t: f64| 10_000.0 * MIB + if t > 1500.0 { 6_000.0 * MIB } else { 0.0 };
        let warm_up = |t: f64| {
            let x = (t / 300.0).clamp(0.0, 1.0);
            30_000.0 * MIB * x * x * (3.0 - 2.0 * x) + 200.0 * MIB * noise(t)
        };
        // A warm-up settling slowly, then one evaluation's buffers kept: a 3 GiB ramp of 20 s
        // straddling a chunk boundary.
        let settle_then_step = |t: f64| {
            31_000.0 * MIB * (1.0 - (-t / 90.0).exp())
                + 3_000.0 * MIB * ((t - 530.0) / 20.0).clamp(0.0, 1.0)
        };
        for (name, f) in [
            ("plateau", &plateau as &dyn Fn(f64) -> f64),
            ("settle, then a step", &settle_then_step),
            ("saw", &saw),
            ("fast saw", &fast_saw),
            ("noisy", &noisy),
            ("step", &step),
            ("warm-up", &warm_up),
        ] {
            // Read every minute as the series grows, as the monitor does.
            let mut s = Series::new(Scale::Kib, 1.0, 0.0);
            for second in 0..=45 * 60 {
                let t = f64::from(second);
                s.push(t, Some(f(t).max(0.0) as u64));
                if second % 60 == 0 {
                    assert!(climbing(&s, t).is_none(), "{name} climbs at {t} s");
                }
            }
        }
    }
}

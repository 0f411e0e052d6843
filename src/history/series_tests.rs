use super::*;
use crate::history::blocks::{BLOCK_OVERHEAD, FIRST_ROOM};

#[test]
fn raw_slots_are_bounded_and_keep_the_newest() {
    let mut s = Series::new(Scale::Unit, 1.0, 0.0);
    let cap = s.reach()[0] as u64;
    for i in 0..cap + 50 {
        s.push(i as f64, Some(i));
    }
    assert_eq!(s.len() as u64, cap);
    assert_eq!(s.recent(cap as usize)[0], Some(50));
    assert_eq!(s.last(), Some(cap + 49));
}

#[test]
fn bytes_round_up_to_kib_and_a_nonzero_value_never_reads_zero() {
    let mut s = Series::new(Scale::Kib, 1.0, 0.0);
    s.push(0.0, Some(1));
    assert_eq!(s.last(), Some(1024));
    s.push(1.0, Some(0));
    assert_eq!(s.last(), Some(0));
    s.push(2.0, Some(80 << 30));
    assert_eq!(s.last(), Some(80 << 30));
}

#[test]
fn folding_keeps_peaks_and_gaps_do_not_become_zero() {
    let mut s = Series::new(Scale::Unit, 1.0, 0.0);
    for i in 0..FOLD_1 * 2 {
        let value = match i {
            3 => Some(900),
            5 => None,
            _ => Some(10 + i as u64),
        };
        s.push(i as f64, value);
    }
    let folded = s.points(1, f64::NEG_INFINITY);
    assert_eq!(folded.len(), 1, "the second block is still open");
    let span = folded[0].1.expect("known values");
    assert_eq!((span.min, span.max, span.last), (10, 900, 19));
    assert_eq!(s.recent(15)[0], None, "a gap stays a gap");
}

#[test]
fn late_and_duplicate_times_never_rewrite_the_past_and_silence_is_a_gap() {
    let mut s = Series::new(Scale::Unit, 1.0, 100.0);
    s.push(100.0, Some(1));
    s.push(101.02, Some(2));
    s.push(100.9, Some(7)); // the same slot as 101.02: the newer value replaces it
    s.push(99.0, Some(5)); // older: dropped
    assert_eq!(s.dropped, 1);
    s.push(105.0, Some(3));
    assert_eq!(
        s.recent(6),
        vec![Some(1), Some(7), None, None, None, Some(3)]
    );
    assert_eq!(s.last_time(), Some(105.0));
}

#[test]
fn chunks_come_from_the_finest_tier_that_holds_the_window() {
    let mut s = Series::new(Scale::Unit, 1.0, 0.0);
    // Three hours at one value a second: a ramp of one per second.
    let end = 3 * 3600;
    for i in 0..=end {
        s.push(i as f64, Some(i as u64));
    }
    let e = end as f64;
    let raw = s.chunks(e, 600.0, 10);
    assert_eq!(raw[9].map(|c| c.max), Some(end as u64));
    assert_eq!(raw[0].map(|c| c.min), Some(end as u64 - 600));
    let hour = s.chunks(e, 3600.0, 6);
    assert!(hour.iter().all(|c| c.is_some()), "{hour:?}");
    assert!(hour
        .windows(2)
        .all(|w| w[0].map(|a| a.max) < w[1].map(|b| b.max)));
    let day = s.chunks(e, 86_400.0, 24);
    assert!(
        day[..20].iter().all(|c| c.is_none()),
        "before the start: unknown"
    );
    assert!(day[23].is_some());
    assert!(s.reach()[2] >= 86_400.0 && s.reach()[1] >= 7200.0 && s.reach()[0] >= 900.0);
}

proptest::proptest! {
    /// A slot is found by rounding as `f64::round` does (halves away from zero), for any
    /// float: whole numbers and halves, tiny and huge ones, and those that are not finite.
    #[test]
    fn slots_round_as_round_does(
        whole in -(1i64 << 54)..(1i64 << 54),
        part in proptest::sample::select(vec![0.0, 0.5, -0.5, 0.499_999_999_999_999_94, 0.25, -0.75]),
        any in proptest::num::f64::ANY,
    ) {
        let expected = |x: f64| x.round().is_finite().then(|| x.round() as i64);
        let near = whole as f64 + part;
        for x in [any, near, any / 1e300, any * 1e300, near.next_up(), near.next_down()] {
            proptest::prop_assert_eq!(nearest(x), expected(x), "{:e}", x);
        }
    }

    /// The edges read alone are the first and last chunks read whole, from every tier,
    /// with gaps and windows that begin before the series, cut in few chunks (folded on the
    /// stack) or many.
    #[test]
    fn edges_are_the_first_and_last_chunks(
        len in 1u64..12_000,
        gap_every in 2u64..500,
        end_back in 0u64..900,
        window in 30u64..30_000,
        n in 1usize..40,
    ) {
        let mut s = Series::new(Scale::Unit, 1.0, 0.0);
        for i in 0..len {
            let v = (i * 7919) % 1000;
            s.push(i as f64, (!i.is_multiple_of(gap_every)).then_some(v));
        }
        let end = len.saturating_sub(end_back) as f64 + 0.5;
        let all = s.chunks(end, window as f64, n);
        let (first, last) = s.edges(end, window as f64, n);
        proptest::prop_assert_eq!(first, all[0]);
        proptest::prop_assert_eq!(last, all[n - 1]);
    }

    /// A fold of raw slots that reads the first tier's blocks inside it is the fold of
    /// every slot: with gaps, runs of gaps, silences long enough to restart the rings,
    /// slots rewritten and slots written late, a ring that dropped its oldest, and a
    /// thinned series.
    #[test]
    fn raw_folds_read_through_the_first_tier_are_every_slot_folded(
        pushes in proptest::collection::vec((0u64..40, 0u32..1000, 0u8..10), 1..1_500),
        thinning in proptest::sample::select(vec![1u32, 2, 8]),
        ranges in proptest::collection::vec((0usize..1_100, 0usize..1_100), 1..20),
    ) {
        let mut s = Series::thinned(Scale::Unit, 1.0, 0.0, thinning);
        let mut t = 0.0;
        for (advance, value, kind) in pushes {
            // Mostly the next slot; sometimes the same one, a late one, a jump, a
            // silence that restarts the rings.
            t += match kind {
                0 => 0.0,
                1 => -3.0,
                2 => advance as f64,
                3 if advance == 0 => 200_000.0,
                _ => 1.0,
            };
            s.push(t, (kind != 4 && !value.is_multiple_of(13)).then_some(u64::from(value)));
        }
        let len = s.raw.items.len();
        for (a, b) in ranges {
            let (a, b) = (a.min(len), b.min(len));
            let range = a.min(b)..a.max(b);
            proptest::prop_assert_eq!(
                s.fold_slots(range.clone()),
                s.fold_slots_plainly(range.clone()),
                "range {:?} of {}", range, len
            );
        }
    }

    /// A fold of the first tier's points that reads the second tier's groups inside it
    /// is the fold of every point: over series long enough to fill both rings, with gaps,
    /// silences and restarts, at any step, from any point and between any times.
    #[test]
    fn tier_folds_read_through_the_second_tier_are_every_point_folded(
        pushes in proptest::collection::vec((0u64..400, 0u32..1000, 0u8..12), 1..3_000),
        step in proptest::sample::select(vec![0.5, 1.0, 1.7]),
        thinning in proptest::sample::select(vec![1u32, 4]),
        reads in proptest::collection::vec((0.0f64..1.0, 0.0f64..1.0, 0i64..40, proptest::bool::ANY), 1..20),
    ) {
        let mut s = Series::thinned(Scale::Unit, step, 0.0, thinning);
        let mut t = 0.0;
        for (advance, value, kind) in pushes {
            t += step * match kind {
                0 => advance as f64,
                1 if advance == 0 => 200_000.0,
                2 => 0.0,
                _ => 1.0 + f64::from(u8::from(advance < 30)) * 7.0,
            };
            s.push(t, (kind != 3 && !value.is_multiple_of(11)).then_some(u64::from(value)));
        }
        let (Some(held), Some(head)) = (s.tier_1.first(), s.tier_1.head()) else {
            return Ok(());
        };
        let (a, b) = (s.time_of(held * FOLD_1), s.time_of((head + 1) * FOLD_1));
        // Exactly at a point's end, or anywhere between.
        let snap = |t: f64| s.time_of((((t / step) as i64).div_euclid(FOLD_1) + 1) * FOLD_1 - 1);
        for (x, y, back, exact) in reads {
            let (from, to) = (a + (b - a) * x.min(y), a + (b - a) * x.max(y));
            let (from, to) = if exact { (snap(from), snap(to)) } else { (from, to) };
            let first = held + back - 20;
            proptest::prop_assert_eq!(
                s.fold_tier_1(first, from, to),
                s.fold_tier_1_plainly(first, from, to),
                "from {} to {} first {} held {}..={}", from, to, first, held, head
            );
        }
    }

    /// Raw chunks, cut at their edges and folded in one pass, are what reading every
    /// point one by one gives, at any step and origin.
    #[test]
    fn raw_chunks_are_every_point_folded(
        len in 1u64..1_200,
        gap_every in 2u64..50,
        step in proptest::sample::select(vec![0.5, 1.0, 1.7, 5.0]),
        origin in -1000.0f64..1000.0,
        end_back in 0.0f64..200.0,
        window in 1.0f64..400.0,
        n in 1usize..12,
    ) {
        let mut s = Series::new(Scale::Unit, step, origin);
        for i in 0..len {
            s.push(origin + i as f64 * step, (!i.is_multiple_of(gap_every)).then_some((i * 7919) % 1000));
        }
        let end = origin + len as f64 * step - end_back;
        let window = window.min(s.reach()[0]);
        let start = end - window;
        let width = window / n as f64;
        let mut want: Vec<Option<Span>> = vec![None; n];
        for (t, v) in s.raw() {
            if t < start || t > end {
                continue;
            }
            let i = (((t - start) / width) as usize).min(n - 1);
            if let Some(x) = v {
                let p = Span { min: x, max: x, last: x };
                want[i] = Some(want[i].map_or(p, |o| o.merge(p)));
            }
        }
        proptest::prop_assert_eq!(s.chunks(end, window, n), want);
    }
}

#[test]
fn the_first_time_is_the_oldest_slot_any_tier_holds() {
    let mut s = Series::new(Scale::Unit, 1.0, -50.0);
    assert_eq!(s.first_time(), None);
    s.push(100.0, Some(1));
    assert_eq!(s.first_time(), Some(100.0));
    // Past the raw ring's reach: the first tier still holds the start.
    for t in 101..3000 {
        s.push(f64::from(t), Some(1));
    }
    assert_eq!(s.first_time(), Some(100.0));
}

#[test]
fn a_series_costs_at_most_about_26_kb_at_one_second_when_full() {
    let s = Series::new(Scale::Kib, 1.0, 0.0);
    let items = 900 * 4 + 720 * 12 + 720 * 12;
    let most = s.full_footprint() - std::mem::size_of::<Series>();
    // The items, a block more per ring, and each block's own cost.
    assert!(most > items && most <= 26 * 1000, "{most}");
}

/// A series filled for `secs` seconds at a 1 s step.
fn lived(secs: u64) -> Series {
    let mut s = Series::new(Scale::Kib, 1.0, 0.0);
    for t in 0..secs {
        s.push(t as f64, Some(t << 20));
    }
    s
}

#[test]
fn a_series_costs_in_proportion_to_how_long_it_was_written() {
    let base = std::mem::size_of::<Series>();
    let empty = Series::new(Scale::Kib, 1.0, 0.0).footprint();
    assert_eq!(empty, base, "nothing held, nothing allocated");
    // A process that lived two seconds: a few slots, not 15 minutes of them.
    let brief = lived(2).footprint();
    assert!(brief <= base + 4 * FIRST_ROOM + BLOCK_OVERHEAD, "{brief}");
    // Memory follows what is held, within half again, until the rings are full.
    for secs in [10, 100, 600, 3600, 7200] {
        let s = lived(secs);
        let held = s.len() * 4 + (s.points(1, f64::MIN).len() + s.points(2, f64::MIN).len()) * 12;
        let bytes = s.footprint() - base;
        // Blocks of 64 items: each costs a little of its own, and a full raw ring's
        // first block is partly let go.
        let points = s.points(1, f64::MIN).len() + s.points(2, f64::MIN).len();
        let blocks = s.len().div_ceil(64) + points.div_ceil(64) + 3;
        assert!(
            bytes >= held
                && bytes <= held * 3 / 2 + 2 * 12 * FIRST_ROOM + 64 * 4 + blocks * BLOCK_OVERHEAD,
            "{secs} s: {bytes} for {held}"
        );
    }
    let day = lived(2 * 86_400);
    assert!(day.footprint() <= day.full_footprint(), "full, and no more");
}

#[test]
fn thinning_keeps_the_newest_and_lets_the_memory_go() {
    let mut s = lived(3 * 3600);
    let whole = s.footprint();
    s.thin(4);
    assert!(s.footprint() * 2 < whole, "{} of {whole}", s.footprint());
    assert_eq!(s.reach(), [225.0, 1800.0, 21_600.0]);
    assert_eq!(s.last(), Some((3 * 3600 - 1) << 20), "the newest kept");
    assert_eq!(s.len(), 225);
    // Chunks still read the newest whole: the raw ring for a window it reaches.
    let chunks = s.chunks(3.0 * 3600.0 - 1.0, 200.0, 4);
    assert!(chunks.iter().all(Option::is_some), "{chunks:?}");
    // Whole again: the rings grow back as values arrive.
    s.thin(1);
    for t in 3 * 3600..3 * 3600 + 900 {
        s.push(t as f64, Some(1));
    }
    assert_eq!(s.len(), 900);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// The least of the last seconds read in one pass is the least of the raw values in
    /// each span, read plainly: with gaps, rewritten and late slots, silences, a thinned
    /// ring, any step, and an end between slots or past the newest.
    #[test]
    fn trailing_floors_are_the_least_of_each_span(
        pushes in proptest::collection::vec((0u64..40, 0u32..1000, 0u8..10), 1..1_500),
        step in proptest::sample::select(vec![0.5, 1.0, 1.7]),
        thinning in proptest::sample::select(vec![1u32, 2, 8]),
        spans in proptest::collection::vec(0.0f64..1_200.0, 4),
        end_shift in -30.0f64..5.0,
    ) {
        let mut s = Series::thinned(Scale::Unit, step, 0.0, thinning);
        let mut t = 0.0;
        for (advance, value, kind) in pushes {
            t += step * match kind {
                0 => 0.0,
                1 => -3.0,
                2 => advance as f64,
                3 if advance == 0 => 200_000.0,
                _ => 1.0,
            };
            s.push(t, (kind != 4 && !value.is_multiple_of(13)).then_some(u64::from(value)));
        }
        let end = s.last_time().unwrap_or(0.0) + end_shift;
        let mut spans: Vec<f64> = spans;
        spans.sort_by(f64::total_cmp);
        let spans = [spans[0], spans[1], spans[2], spans[3]];
        let plainly = spans.map(|span| {
            s.raw()
                .filter(|&(time, _)| time >= end - span && time <= end)
                .filter_map(|(_, v)| v)
                .min()
        });
        proptest::prop_assert_eq!(s.trailing_floors(end, spans), plainly);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// A window's one chunk answered from the running summary of a steady value is the
    /// chunk read: over series that hold a value for long runs, with gaps, a head rewritten,
    /// late slots and silences, thinned or whole, at any step, ending between slots, past
    /// the newest or before it, and windows from seconds to hours.
    #[test]
    fn a_steady_span_is_the_chunk_read(
        runs in proptest::collection::vec((1u64..4_000, 0u32..4, 0u8..12), 1..12),
        step in proptest::sample::select(vec![0.5, 1.0, 1.7]),
        thinning in proptest::sample::select(vec![1u32, 4]),
        reads in proptest::collection::vec((-300.0f64..300.0, -300.0f64..30.0, 0.0f64..9_000.0), 1..20),
    ) {
        let mut s = Series::thinned(Scale::Kib, step, 0.0, thinning);
        let mut t = 0.0;
        for (length, value, kind) in runs {
            let began = t;
            for i in 0..length {
                let v = match kind {
                    // Now and then a gap, or (rarely) another value for a slot.
                    0 if i % 7 == 3 => None,
                    1 if i % 501 == 250 => Some(u64::from(value + 1) << 20),
                    _ => Some(u64::from(value) << 20),
                };
                s.push(t, v);
                t += step * match kind {
                    2 if i + 1 == length => 0.0,
                    3 if i + 1 == length => -2.0,
                    4 if i + 1 == length => 200_000.0,
                    5 if i % 97 == 0 => 5.0,
                    _ => 1.0,
                };
            }
            // Windows that begin about where this run began (where a fold may reach a
            // value before it), and anywhere.
            let newest = s.last_time().unwrap_or(0.0);
            for &(near, shift, anywhere) in &reads {
                let end = newest + shift;
                for window in [end - began + near, anywhere] {
                    if let Some(span) = s.steady_span(end, window) {
                        let read = s.chunks_between(end, window, 1, f64::NEG_INFINITY, f64::INFINITY);
                        proptest::prop_assert_eq!(Some(span), read[0], "{} s to {}", window, end);
                    }
                }
            }
        }
    }
}

/// A counter that held its value answers a window from its summary; one that moved in it,
/// or whose newest slot is a gap, is read.
#[test]
fn a_steady_span_needs_the_whole_window_unmoved() {
    let mut s = Series::new(Scale::Unit, 1.0, 0.0);
    for t in 0..3_600 {
        s.push(f64::from(t), Some(if t < 1_000 { 1 } else { 4 }));
    }
    let steady = Span {
        min: 4,
        max: 4,
        last: 4,
    };
    assert_eq!(s.steady_span(3_599.0, 600.0), Some(steady));
    assert_eq!(s.steady_span(3_599.0, 2_000.0), Some(steady));
    // The window reaches the run's start, or a point that folds a slot before it.
    assert_eq!(s.steady_span(3_599.0, 2_610.0), None);
    assert_eq!(s.steady_span(3_599.0, 2_550.0), None);
    assert_eq!(s.chunks(3_599.0, 2_610.0, 1)[0].map(|c| c.min), Some(1));
    // The newest slot after the window's end, or before its start.
    assert_eq!(s.steady_span(3_500.0, 600.0), None);
    assert_eq!(s.steady_span(4_300.0, 600.0), None);
    // A gap as the newest value: read.
    s.push(3_600.0, None);
    assert_eq!(s.steady_span(3_600.0, 600.0), None);
    s.push(3_601.0, Some(4));
    assert_eq!(s.steady_span(3_601.0, 600.0), Some(steady));
    // The newest slot rewritten with another value: a run of its own from there.
    s.push(3_601.2, Some(5));
    assert_eq!(s.steady_span(3_601.0, 600.0), None);
}

/// A run of one value at the last slot a time can name (a time past 2^63 steps saturates to
/// it) still answers a one-chunk read ending there: the run's reach saturates, it does not
/// overflow.
#[test]
fn a_steady_run_at_the_last_slot_is_read_without_overflow() {
    let mut s = Series::new(Scale::Kib, 1.0, 0.0);
    s.push(1e30, Some(5 << 20));
    // Slot i64::MAX stands at 2^63; a minute before it rounds to 2^63 too.
    let end = 2f64.powi(63);
    let chunk = s.chunks(end, 60.0, 1)[0];
    assert_eq!(chunk.map(|c| c.max), Some(5 << 20));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    /// The chunks of a window read from a tier (each chunk's points found at its edges and
    /// folded as a run) are its points put in their chunks one by one: over series with
    /// gaps, runs of gaps, silences, late and rewritten slots, thinned or whole, at any step
    /// and origin, in windows of either tier, ending between slots, past the newest or
    /// before it, cut in one chunk or many.
    #[test]
    fn a_tier_read_by_runs_is_its_points_read_one_by_one(
        len in 900u64..16_000,
        gap_every in 2u64..400,
        silence in proptest::sample::select(vec![0u64, 700, 5_000, 200_000]),
        step in proptest::sample::select(vec![0.5, 1.0, 1.7]),
        origin in proptest::sample::select(vec![0.0, 0.3, -17.0, 1.7e9]),
        thinning in proptest::sample::select(vec![1u32, 3]),
        reads in proptest::collection::vec((-2_000.0f64..600.0, 901.0f64..90_000.0, 1usize..130), 1..12),
    ) {
        let mut s = Series::thinned(Scale::Unit, step, origin, thinning);
        let mut slot = 0u64;
        for i in 0..len {
            let v = (i * 7919 + i / 97 * 31) % 5_000;
            s.push(origin + slot as f64 * step, (!i.is_multiple_of(gap_every)).then_some(v));
            // Now and then a slot rewritten or written late, and one silence.
            if i % 1_013 == 500 {
                s.push(origin + slot as f64 * step, Some(v + 1));
                s.push(origin + slot.saturating_sub(3) as f64 * step, Some(v));
            }
            slot += if i == len / 2 { silence.max(1) } else { 1 };
        }
        let newest = origin + slot as f64 * step;
        for (back, window, n) in reads {
            let end = newest + back;
            proptest::prop_assert_eq!(
                s.chunks(end, window, n),
                s.chunks_plainly(end, window, n),
                "end {} window {} n {}", end, window, n
            );
        }
    }
}

/// Values up to the last slot a time can name (2^63 steps; a time past it saturates there),
/// read over windows of every tier and cut in one chunk or many: the walks past the newest
/// slot and a point's last slot are worked out without overflow.
#[test]
fn windows_ending_at_the_last_slot_are_read_without_overflow() {
    let mut s = Series::new(Scale::Kib, 1.0, 0.0);
    let top = 2f64.powi(63);
    for k in (0..40).rev() {
        s.push(top - f64::from(k) * 4096.0, Some(5 << 20));
    }
    s.push(1e30, Some(6 << 20));
    for window in [60.0, 1_000.0, 7_200.0, 100_000.0, 1e7] {
        // (Times this far out are 2,048 s apart: a window's chunks may fall together.)
        for n in [1, 2, 5, 40] {
            assert_eq!(s.chunks(top, window, n).len(), n);
            let _ = s.edges(top, window, n);
        }
        let whole = s.chunks(top, window, 1)[0];
        assert_eq!(whole.map(|c| c.last), Some(6 << 20), "{window} s");
    }
}

#[test]
fn a_series_that_holds_still_costs_a_block_a_ring_however_long_it_holds() {
    let still = |secs: u64| {
        let mut s = Series::new(Scale::Kib, 1.0, 0.0);
        for t in 0..secs {
            s.push(t as f64, Some(12 << 30));
        }
        s
    };
    let base = std::mem::size_of::<Series>();
    // A ring's memory: one block of items and a pointer for each block after it (its tail
    // echoes the last block). Raw slots in blocks of 64 of 4 bytes, points of 64 of 12.
    let ring = |item: usize, blocks: usize| 64 * item + BLOCK_OVERHEAD + blocks * 16;
    let most = base + ring(4, 15) + 2 * ring(12, 12);
    let (hour, day) = (still(3600).footprint(), still(86_400).footprint());
    assert!(
        hour <= most && day <= most,
        "{hour} and {day}, at most {most}"
    );
    // A series that moves holds its slots: several times that.
    assert!(lived(86_400).footprint() > 4 * day);
    // And it reads the same as one stored slot by slot.
    let s = still(86_400);
    let span = Some(Span {
        min: 12 << 30,
        max: 12 << 30,
        last: 12 << 30,
    });
    assert_eq!(s.chunks(86_399.0, 86_000.0, 7), vec![span; 7]);
    assert_eq!(s.chunks_plainly(86_399.0, 600.0, 5), vec![span; 5]);
    assert_eq!(s.len(), 900);
}

/// A node of thousands of processes holds two series for each, and a process that lives a
/// few seconds costs little more than the series itself: its three rings (their blocks'
/// deques and tails, the counts kept as 16 and 32 bits, a newest slot with no `Option`
/// around it) are 88 bytes each.
#[test]
fn a_series_is_small() {
    assert!(
        std::mem::size_of::<Series>() <= 312,
        "{}",
        std::mem::size_of::<Series>()
    );
}

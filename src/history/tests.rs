//! The history's bounds: what is forgotten, what a process that came and went costs, and the
//! budget.

use super::*;

/// `n` processes, a new one each second for `secs` seconds, each living `life` samples, with
/// NVML's used and SM series, and one device series throughout.
fn churn(h: &mut History, secs: u64, life: u64) {
    for t in 0..secs {
        h.begin(t as f64, 1.0);
        h.record(
            SeriesKey::device("GPU-0", Metric::Used),
            t as f64,
            Some(1 << 30),
        );
        for pid in t.saturating_sub(life - 1)..=t {
            let pid = pid as u32 + 100;
            for metric in [Metric::Used, Metric::Sm] {
                let key = SeriesKey::process(pid, Some(u64::from(pid)), "GPU-0", metric);
                h.record(key, t as f64, Some(300 << 20));
            }
        }
    }
}

#[test]
fn history_forgets_series_that_stopped() {
    let mut h = History::default();
    h.begin(0.0, 1.0);
    let gone = SeriesKey::device("gone", Metric::Used);
    let kept = SeriesKey::device("kept", Metric::Used);
    h.record(gone.clone(), 0.0, Some(1));
    for i in 0..(FORGET_AFTER + 70) {
        h.begin(i as f64, 1.0);
        h.record(kept.clone(), i as f64, Some(1));
    }
    assert!(h.get(&gone).is_none());
    assert!(h.get(&kept).is_some());
    let new = SeriesKey::process(7, Some(1), "GPU-0", Metric::Allocated);
    h.record(new.clone(), 2000.0, Some(5 << 20));
    let series = h.get(&new).expect("new series");
    assert_eq!(
        series.recent(10),
        vec![Some(5 << 20)],
        "new, and empty before"
    );
}

#[test]
fn a_process_that_lived_seconds_costs_bytes_not_a_whole_series() {
    let mut h = History::default();
    // A new process a second, each for two seconds: until the first are forgotten, every
    // one of them is held.
    churn(&mut h, FORGET_AFTER - 10, 2);
    let processes = (FORGET_AFTER - 10) as usize;
    assert_eq!(h.len(), 2 * processes + 1);
    let per_process = h.footprint() / processes;
    assert!(
        per_process < 1200,
        "{per_process} bytes a process of two samples"
    );
    let budget = h.budget();
    assert_eq!((budget.dropped, budget.thinned, budget.full), (0, 1, false));
}

#[test]
fn over_its_budget_the_history_lets_go_of_gone_processes_first() {
    let limit = 1 << 20;
    let mut h = History::with_budget(limit);
    let stays = SeriesKey::process(1, Some(1), "GPU-0", Metric::Used);
    for t in 0..600u64 {
        h.begin(t as f64, 1.0);
        assert!(h.footprint() <= limit, "{} at {t}", h.footprint());
        h.record(stays.clone(), t as f64, Some(t << 20));
        for pid in 10 * t..10 * t + 10 {
            let key = SeriesKey::process(pid as u32 + 100, Some(pid), "GPU-0", Metric::Used);
            h.record(key, t as f64, Some(1 << 20));
        }
    }
    let budget = h.budget();
    assert!(budget.dropped > 2000, "{budget:?}");
    assert!(budget.dropped_at.is_some_and(|t| t > 500.0), "{budget:?}");
    assert_eq!((budget.thinned, budget.full), (1, false), "{budget:?}");
    // What stays is whole: ten minutes of the process that stayed.
    let series = h.get(&stays).expect("kept");
    assert_eq!(series.len(), 600);
    assert_eq!(series.first_time(), Some(0.0));
    // The newest of those that came and went are still there, the oldest let go.
    let newest = SeriesKey::process(6099, Some(5999), "GPU-0", Metric::Used);
    let oldest = SeriesKey::process(100, Some(0), "GPU-0", Metric::Used);
    assert!(h.get(&newest).is_some() && h.get(&oldest).is_none());
    assert!(budget
        .describe()
        .contains("series of exited processes let go early"));
}

#[test]
fn live_series_over_the_budget_are_thinned_then_new_processes_refused_then_let_back() {
    let limit = 512 << 10;
    let mut h = History::with_budget(limit);
    let live = |h: &mut History, t: u64, n: u32| {
        h.begin(t as f64, 1.0);
        let within = h.footprint() <= limit || h.budget().full;
        h.record(SeriesKey::device("GPU-0", Metric::Used), t as f64, Some(1));
        for pid in 0..n {
            let key = SeriesKey::process(pid, Some(1), "GPU-0", Metric::Used);
            // Each moves at every sample: a still one would cost one block a ring.
            h.record(key, t as f64, Some((u64::from(pid) << 20) + t));
        }
        within
    };
    // 64 processes for 2 hours: about 1.4 MiB whole.
    for t in 0..7200 {
        assert!(live(&mut h, t, 64), "{} at {t}", h.footprint());
    }
    let budget = h.budget();
    assert!(budget.thinned >= 2 && !budget.full, "{budget:?}");
    let series = h
        .get(&SeriesKey::process(3, Some(1), "GPU-0", Metric::Used))
        .expect("thinned, not dropped");
    assert_eq!(series.reach()[0], RAW_SECS / f64::from(budget.thinned));
    assert!(
        budget.describe().contains("thinned to the last"),
        "{}",
        budget.describe()
    );
    // Thousands of processes more: thinned all it can, then the newest get no history.
    for t in 7200..7300 {
        live(&mut h, t, 8000);
    }
    let budget = h.budget();
    assert!(
        budget.full && budget.thinned == budget::MOST_THINNING,
        "{budget:?}"
    );
    assert!(h.footprint() <= 2 * limit, "{}", h.footprint());
    assert!(h.get(&SeriesKey::device("GPU-0", Metric::Used)).is_some());
    assert!(h
        .get(&SeriesKey::process(7999, Some(1), "GPU-0", Metric::Used))
        .is_none());
    assert!(budget.describe().contains("no history"));
    // They go: their series are let go, the thinning undone step by step.
    for t in 7300..7300 + 4 * FORGET_AFTER {
        assert!(live(&mut h, t, 1));
    }
    let budget = h.budget();
    assert_eq!((budget.thinned, budget.full), (1, false), "{budget:?}");
    let key = SeriesKey::process(0, Some(1), "GPU-0", Metric::Used);
    assert_eq!(h.get(&key).map(|s| s.reach()[0]), Some(RAW_SECS));
}

#[test]
fn the_count_of_bytes_kept_as_it_goes_is_the_count_afresh() {
    let mut h = History::with_budget(300 << 10);
    churn(&mut h, 700, 5);
    let kept = h.held;
    h.recount();
    assert_eq!(kept, h.held);
}

#[test]
fn a_series_is_one_whether_named_by_an_owned_or_a_borrowed_key() {
    let mut h = History::default();
    let keys = [
        SeriesKey::device("GPU-0", Metric::Layer(Layer::Live)),
        SeriesKey::device("GPU-0", Metric::Used),
        SeriesKey::process(7, Some(1), "GPU-0", Metric::Used),
        SeriesKey::process(7, None, "GPU-0", Metric::Used),
        SeriesKey::process(7, Some(1), "GPU-1", Metric::Reserved),
    ];
    for t in 0..4 {
        h.begin(f64::from(t), 1.0);
        for (i, key) in keys.iter().enumerate() {
            // Owned and borrowed in turn: each writes the series the other does.
            let value = Some(u64::try_from(i).unwrap_or(0) << 20);
            if t % 2 == 0 {
                h.record(key.clone(), f64::from(t), value);
            } else {
                h.record(key.as_key(), f64::from(t), value);
            }
        }
    }
    assert_eq!(h.len(), keys.len());
    for (i, key) in keys.iter().enumerate() {
        let owned = h.get(key).expect("by its key");
        let borrowed = h.get(&key.as_key()).expect("by a borrowed key");
        assert!(std::ptr::eq(owned, borrowed));
        assert_eq!(
            owned.last(),
            Some(u64::try_from(i).unwrap_or(0) << 20),
            "{key:?}"
        );
    }
    let id = ProcessId {
        pid: 7,
        start_time: Some(1),
        device_uuid: "GPU-0".into(),
    };
    assert!(h.get(&KeyRef::of_process(&id, Metric::Used)).is_some());
    assert!(h.get(&KeyRef::of_process(&id, Metric::Sm)).is_none());
}

/// A process's key hashes without its device: one process on two GPUs (the same PID and
/// start time) keeps a series on each, written and read apart.
#[test]
fn one_process_on_two_devices_keeps_a_series_on_each() {
    let mut h = History::default();
    for t in 0..10u32 {
        h.begin(f64::from(t), 1.0);
        for (gpu, value) in [("GPU-a", 1u64 << 30), ("GPU-b", 3 << 30)] {
            h.record(
                KeyRef::Process(7, Some(70), gpu, Metric::Allocated),
                f64::from(t),
                Some(value + (u64::from(t) << 20)),
            );
        }
    }
    for (gpu, value) in [("GPU-a", 1u64 << 30), ("GPU-b", 3 << 30)] {
        let s = h
            .get(&KeyRef::Process(7, Some(70), gpu, Metric::Allocated))
            .expect("series");
        assert_eq!(
            s.recent(2),
            vec![Some(value + (8 << 20)), Some(value + (9 << 20))],
            "{gpu}"
        );
    }
    assert_eq!(h.len(), 2);
}

/// Several points of one series written at once leave what writing them one by one does:
/// the same points, the same footprint, within the same budget.
#[test]
fn points_written_at_once_are_the_points_written_one_by_one() {
    let budget = 64 << 10;
    let (mut one, mut all) = (History::with_budget(budget), History::with_budget(budget));
    for t in 0..2_000u32 {
        let time = f64::from(t);
        one.begin(time, 1.0);
        all.begin(time, 1.0);
        for pid in 0..(1 + t % 7) {
            let points: Vec<(f64, Option<u64>)> = (0..(t % 3))
                .map(|k| {
                    (
                        time - 0.5 + f64::from(k) * 0.25,
                        Some(u64::from(pid * t + k) << 20),
                    )
                })
                .chain([(time, (t % 5 != 0).then_some(u64::from(t) << 20))])
                .collect();
            let key = KeyRef::Process(pid, Some(1), "GPU-0", Metric::Allocated);
            for &(time, value) in &points {
                one.record(key, time, value);
            }
            all.record_all(key, points.into_iter());
        }
    }
    assert_eq!(one.len(), all.len());
    assert_eq!(one.footprint(), all.footprint());
    for (key, series) in one.iter() {
        let other = all.get(key).expect("the same series");
        assert_eq!(
            series.raw().collect::<Vec<_>>(),
            other.raw().collect::<Vec<_>>(),
            "{key:?}"
        );
    }
}

/// A history written through handles is the history written by names: the same series
/// and points, the same footprint, with processes that come, change places, and sleep long
/// enough for their series to be forgotten (their places then held by others), then come
/// back to handles that hold series let go.
#[test]
fn series_written_through_handles_are_those_written_by_name() {
    let (mut named, mut handled) = (History::default(), History::default());
    let mut handles = Handles::default();
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |below: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % below
    };
    let metrics = [Metric::Used, Metric::Allocated, Metric::Reserved];
    let sleeper = KeyRef::Process(0, Some(0), "GPU-0", Metric::Used);
    for t in 0..3_000u32 {
        let time = f64::from(t);
        named.begin(time, 1.0);
        handled.begin(time, 1.0);
        if t == 1_999 {
            assert!(handled.get(&sleeper).is_none(), "forgotten while asleep");
        }
        // A few processes, mostly at the same places, now and then another at a place;
        // every third asleep for a thousand samples.
        let listed = 1 + next(6) as usize;
        handles.listed(listed);
        for place in 0..listed {
            let pid = if next(20) == 0 {
                next(12) as u32
            } else {
                place as u32
            };
            if (t / 1_000) % 2 == 1 && pid % 3 == 0 {
                continue;
            }
            let process = crate::sample::ProcessSample {
                start_time: Some(u64::from(pid)),
                ..crate::fixtures::process(pid, &format!("GPU-{}", pid % 2), None)
            };
            let slots = handles.of(place, &process);
            for metric in metrics {
                let value = (next(9) != 0).then(|| next(1 << 34));
                let key = KeyRef::of(&process, metric);
                named.record(key, time, value);
                let slot = slots.slot(metric).expect("a process's series");
                handled.record_through(slot, key, std::iter::once((time, value)));
            }
        }
    }
    assert!(handled.get(&sleeper).is_some(), "back");
    assert_eq!(named.len(), handled.len());
    assert_eq!(named.footprint(), handled.footprint());
    for (key, series) in named.iter() {
        let other = handled.get(key).expect("the same series");
        assert_eq!(
            series.raw().collect::<Vec<_>>(),
            other.raw().collect::<Vec<_>>(),
            "{key:?}"
        );
    }
}

/// A handle to a series let go finds nothing, not the series made at its place since:
/// the write goes to the series named.
#[test]
fn a_handle_to_a_series_let_go_does_not_write_its_successor() {
    let mut h = History::default();
    let gone = KeyRef::Process(1, Some(1), "GPU-0", Metric::Used);
    let next = KeyRef::Process(2, Some(2), "GPU-0", Metric::Used);
    let mut handle = None;
    h.begin(0.0, 1.0);
    h.record_through(&mut handle, gone, std::iter::once((0.0, Some(1 << 20))));
    let first = handle.expect("a handle to the series made");
    // Forgotten, and its place taken by a new series.
    for t in 1..=FORGET_AFTER + SWEEP_EVERY {
        h.begin(t as f64, 1.0);
    }
    assert!(h.get(&gone).is_none(), "forgotten");
    let mut other = None;
    let t = (FORGET_AFTER + SWEEP_EVERY) as f64;
    h.record_through(&mut other, next, std::iter::once((t, Some(5 << 20))));
    assert_eq!(
        other.map(|o| o.place),
        Some(first.place),
        "the place used again"
    );
    h.record_through(&mut handle, gone, std::iter::once((t, Some(9 << 20))));
    assert_eq!(
        h.get(&next).and_then(Series::last),
        Some(5 << 20),
        "untouched"
    );
    assert_eq!(
        h.get(&gone).and_then(Series::last),
        Some(9 << 20),
        "made again"
    );
    assert_ne!(handle, Some(first));
}

/// A device's handles are kept at its place while the same device is there; another
/// device at that place starts with none, and writes its own series.
#[test]
fn a_device_at_a_place_writes_its_own_series() {
    let mut h = History::default();
    let mut handles = Handles::default();
    let key = |uuid| KeyRef::Device(uuid, Metric::Used);
    for (t, uuid, value) in [
        (0.0, "GPU-a", 1u64 << 30),
        (1.0, "GPU-a", 2 << 30),
        (2.0, "GPU-b", 7 << 30),
    ] {
        h.begin(t, 1.0);
        let slots = handles.device(0, uuid);
        assert_eq!(
            slots[0].is_some(),
            t == 1.0,
            "kept only for the same device, at {t}"
        );
        h.record_through(&mut slots[0], key(uuid), std::iter::once((t, Some(value))));
        handles.devices_listed(1);
    }
    assert_eq!(
        h.get(&key("GPU-a")).map(Series::raw).map(|r| r.count()),
        Some(2)
    );
    assert_eq!(h.get(&key("GPU-a")).and_then(Series::last), Some(2 << 30));
    assert_eq!(h.get(&key("GPU-b")).and_then(Series::last), Some(7 << 30));
}

/// A process keeps nine handles, most of them absent while its series have no point (no
/// feed, no allocator figures): an absent one costs no more room than a handle, 16 bytes, not
/// 24 (about 300 KB at 4,096 processes); and the seven only a fed process writes are held
/// apart, made at its first feed, so a process without one keeps two and a pointer.
#[test]
fn an_absent_handle_takes_no_more_room_than_a_handle() {
    assert_eq!(std::mem::size_of::<Option<Handle>>(), 16);
    assert!(
        std::mem::size_of::<handles::ProcessHandles>() <= 88,
        "{}",
        std::mem::size_of::<handles::ProcessHandles>()
    );
}

/// The keys of a device's processes hold its name once between them, and the name goes
/// once no key holds it (the processes forgotten): a node of thousands of processes on a
/// few devices keeps a few names, not a copy in every key.
#[test]
fn a_devices_processes_share_its_name_until_none_is_kept() {
    let mut h = History::default();
    h.begin(0.0, 1.0);
    for pid in 1..=3 {
        for metric in [Metric::Used, Metric::Sm] {
            h.record(
                SeriesKey::process(pid, Some(1), "GPU-0", metric),
                0.0,
                Some(1),
            );
        }
    }
    let names: Vec<&Arc<str>> = h
        .iter()
        .filter_map(|(key, _)| match key {
            SeriesKey::Process(id, _) => Some(&id.device_uuid),
            SeriesKey::Device(..) => None,
        })
        .collect();
    assert_eq!(names.len(), 6);
    assert!(names.iter().all(|name| Arc::ptr_eq(name, names[0])));
    assert_eq!(h.names.set.len(), 1);
    assert_eq!(h.names.held, name_bytes("GPU-0"));
    let before = h.footprint();
    // Forgotten after FORGET_AFTER samples without a write, at the next sweep.
    for t in 1..=(FORGET_AFTER + SWEEP_EVERY) {
        h.begin(t as f64, 1.0);
    }
    assert!(h.is_empty());
    assert!(h.names.set.is_empty());
    assert_eq!(h.names.held, 0);
    assert!(h.footprint() < before);
}

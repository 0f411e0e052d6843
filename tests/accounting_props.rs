//! Property tests of the layer model: whatever the sample, the layers of every GPU and every
//! MIG instance add up to its NVML total exactly, or are withheld with a true reason.

use proptest::prelude::*;
use strata::accounting::{account, FeedStatus, Gap};
use strata::context::ContextEstimator;
use strata::context::ContextSource;
use strata::fixtures::{feed, gpu, judged, mig, node, process, GIB, MIB};
use strata::sample::{DeviceMemory, NodeSample, ProcessSample};

/// A process spec: NVML used (maybe unknown), a feed (maybe), visible, age of feed.
#[derive(Debug, Clone)]
struct Spec {
    used: Option<u64>,
    feed: Option<(u64, u64, Option<u64>)>,
    visible: bool,
    feed_age: f64,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::option::weighted(0.85, 0u64..20 * GIB),
        prop::option::weighted(
            0.7,
            (
                0u64..16 * GIB,
                0u64..4 * GIB,
                prop::option::weighted(0.7, 0u64..2 * GIB),
            ),
        ),
        prop::bool::weighted(0.85),
        prop_oneof![4 => 0.0f64..2.5, 1 => 2.5f64..10.0],
    )
        .prop_map(|(used, feed, visible, feed_age)| Spec {
            used,
            // Shape a feed that is usually consistent: allocated + split <= reserved <= used.
            feed: feed.map(|(live, extra, split)| (live, live + split.unwrap_or(0) + extra, split)),
            visible,
            feed_age,
        })
}

/// A device's memory with its processes' usage, some unlisted usage, and a free part. Now
/// and then the counters are made absurd.
fn device_memory(
    listed: u64,
    unlisted: u64,
    free: u64,
    reserved: Option<u64>,
    absurd: u8,
) -> DeviceMemory {
    let used = listed + unlisted;
    let total = used + free + reserved.unwrap_or(0);
    match absurd {
        0 => DeviceMemory {
            total,
            used,
            free: total + 1,
            driver_reserved: reserved,
        },
        1 => DeviceMemory {
            total: 0,
            used,
            free: 0,
            driver_reserved: reserved,
        },
        _ => DeviceMemory {
            total,
            used,
            free,
            driver_reserved: reserved,
        },
    }
}

fn build(specs: &[Spec], device: &str, t: f64) -> Vec<ProcessSample> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut p = process(100 + i as u32, device, s.used);
            p.visible = s.visible;
            p.feed = s
                .feed
                .map(|(live, reserved, split)| feed(live, reserved, split, t - s.feed_age));
            // Most feeds sit inside NVML's figure; some do not (a different instant).
            if let (Some(used), Some(f)) = (p.used, &p.feed) {
                if i % 5 != 4 {
                    p.used = Some(used.max(f.stats.reserved) + (used % (512 * MIB)));
                }
            }
            p
        })
        .collect()
}

fn listed(processes: &[ProcessSample]) -> u64 {
    processes.iter().filter_map(|p| p.used).sum()
}

prop_compose! {
    fn sample()(
        plain in prop::collection::vec(prop::collection::vec(spec(), 0..5), 0..3),
        instances in prop::collection::vec(prop::collection::vec(spec(), 0..4), 0..4),
        unlisted in 0u64..4 * GIB,
        free in 0u64..40 * GIB,
        reserved in prop::option::of(0u64..GIB),
        absurd in 0u8..24,
    ) -> NodeSample {
        let mut s = node();
        for (i, specs) in plain.iter().enumerate() {
            let uuid = format!("GPU-test-{i}");
            let processes = build(specs, &uuid, s.time);
            s.gpus.push(gpu(i as u32, device_memory(listed(&processes), unlisted, free, reserved, absurd)));
            s.processes.extend(processes);
        }
        if !instances.is_empty() {
            let index = plain.len() as u32;
            let mut g = gpu(index, memory_placeholder());
            g.mig_mode = Some(true);
            let mut gpu_used = 0;
            for (slot, specs) in instances.iter().enumerate() {
                let uuid = format!("MIG-test-{slot}");
                let processes = build(specs, &uuid, s.time);
                let memory = device_memory(listed(&processes), unlisted / 2, free / 4, None, absurd.wrapping_add(slot as u8));
                gpu_used += memory.total.saturating_sub(memory.free);
                g.mig.push(mig(&uuid, "1g.10gb", memory));
                s.processes.extend(processes);
            }
            g.memory = Some(device_memory(gpu_used, unlisted, free, reserved, absurd));
            s.gpus.push(g);
        }
        s
    }
}

fn memory_placeholder() -> DeviceMemory {
    DeviceMemory {
        total: 0,
        used: 0,
        free: 0,
        driver_reserved: None,
    }
}

fn check_device(
    memory: Option<&DeviceMemory>,
    layers: &Result<strata::layers::Layers, Gap>,
) -> Result<(), TestCaseError> {
    match layers {
        Ok(l) => {
            let total = memory.map(|m| m.total).unwrap_or(0);
            prop_assert_eq!(l.sum(), u128::from(total), "layers {:?}", l);
            prop_assert_eq!(l.free, memory.map(|m| m.free));
        }
        Err(Gap::FreeExceedsTotal { total, free }) => prop_assert!(free > total),
        Err(Gap::ProcessesExceedOccupied {
            attributed,
            occupied,
        }) => prop_assert!(attributed > occupied),
        Err(Gap::MemoryUnknown) => prop_assert!(memory.is_none()),
        Err(Gap::Lost) => prop_assert!(false, "nothing is lost here"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn layers_add_up_exactly_or_are_withheld_for_a_true_reason(sample in sample()) {
        let mut contexts = ContextEstimator::learning();
        let attachment = judged(&sample);
        contexts.observe(&sample, &attachment.statuses);
        let node = account(&sample, &attachment, &contexts);
        for (g, acc) in sample.gpus.iter().zip(&node.gpus) {
            check_device(g.memory.as_ref(), &acc.layers)?;
            for (m, macc) in g.mig.iter().zip(&acc.mig) {
                check_device(m.memory.as_ref(), &macc.layers)?;
            }
        }
    }

    #[test]
    fn a_process_splits_exactly_into_its_layers(sample in sample()) {
        let mut contexts = ContextEstimator::learning();
        let attachment = judged(&sample);
        contexts.observe(&sample, &attachment.statuses);
        let node = account(&sample, &attachment, &contexts);
        for (p, acc) in sample.processes.iter().zip(&node.processes) {
            let l = acc.layers;
            match (&acc.feed_status, p.used, &p.feed) {
                (FeedStatus::Fresh { .. }, used, Some(f)) => {
                    let pool = l.live.unwrap_or(0) + l.fragmented.unwrap_or(0) + l.cached.unwrap_or(0);
                    prop_assert_eq!(pool, f.stats.reserved);
                    prop_assert_eq!(l.fragmented, f.stats.inactive_split, "null stays null");
                    match used {
                        Some(u) => prop_assert_eq!(l.context.unwrap_or(0) + l.outside_pool.unwrap_or(0) + pool, u),
                        None => prop_assert!(l.context.is_none() && l.outside_pool.is_none()),
                    }
                    prop_assert!(l.unattributed.is_none());
                }
                (_, used, _) => {
                    prop_assert!(l.live.is_none() && l.cached.is_none() && l.fragmented.is_none());
                    prop_assert_eq!(l.unattributed, if p.visible { used } else { None });
                }
            }
            if let FeedStatus::Stale { age } = acc.feed_status {
                prop_assert!(age.abs() > 3.0 * sample.interval);
            }
        }
    }

    /// Peaks are never summed, and context never exceeds what lies beyond the pool, over any
    /// sequence of samples of the same processes.
    #[test]
    fn context_estimate_never_exceeds_what_is_beyond_the_pool(
        beyond in prop::collection::vec(0u64..4 * GIB, 1..12)
    ) {
        let mut contexts = ContextEstimator::learning();
        let mut smallest = u64::MAX;
        for (i, extra) in beyond.iter().enumerate() {
            let mut s = node();
            s.time += i as f64;
            s.gpus.push(gpu(0, strata::fixtures::memory(80 * GIB, 10 * GIB + extra)));
            let mut p = process(7, "GPU-test-0", Some(10 * GIB + extra));
            p.feed = Some(feed(GIB, 10 * GIB, Some(0), s.time));
            s.processes.push(p);
            let attachment = judged(&s);
            contexts.observe(&s, &attachment.statuses);
            smallest = smallest.min(*extra);
            let layers = account(&s, &attachment, &contexts).processes[0].layers;
            prop_assert_eq!(layers.context, Some(smallest));
            prop_assert_eq!(layers.outside_pool, Some(extra - smallest));
        }
    }

    /// Whatever the skew between NVML's readings and the agent's samples, and however the
    /// pool moves between them, the context figure is never below the true context (it never
    /// ratchets down on a reading paired with the wrong pool) nor above context plus what lies
    /// outside the pool.
    #[test]
    fn context_never_ratchets_on_skewed_samples(
        context in 100u64..2000,
        steps in prop::collection::vec((0u64..8, 0u64..4, -90i32..90), 2..40)
    ) {
        let context = context * MIB;
        // The true state at agent tick k (every 0.5 s): pool and outside memory, in GiB steps.
        let pool_at = |k: usize| steps[k.min(steps.len() - 1)].0 * GIB;
        let outside_at = |k: usize| steps[k.min(steps.len() - 1)].1 * (GIB / 4);
        let tick_of = |t: f64| ((t - 1000.0) / 0.5).floor().max(0.0) as usize;
        // reserved_since as the agent knows it: the first of its ticks with the current pool.
        let since = |k: usize| {
            let mut first = k;
            while first > 0 && pool_at(first - 1) == pool_at(k) {
                first -= 1;
            }
            1000.0 + first as f64 * 0.5
        };
        let mut contexts = ContextEstimator::learning();
        let mut largest_outside = 0;
        for (i, &(_, _, skew)) in steps.iter().enumerate() {
            // NVML reads at 1000.25 + i (between agent ticks); the freshest feed sample the
            // monitor holds was read `skew` hundredths of a second away, at an agent tick.
            let now = 1000.25 + i as f64;
            let reading_tick = tick_of(now);
            let used = context + outside_at(reading_tick) + pool_at(reading_tick);
            largest_outside = largest_outside.max(outside_at(reading_tick));
            let feed_tick = tick_of(now + f64::from(skew) / 100.0);
            let mut s = node();
            s.time = now;
            s.poll_secs = Some(0.001);
            s.gpus.push(gpu(0, strata::fixtures::memory(80 * GIB, used)));
            let mut p = process(7, "GPU-test-0", Some(used));
            let feed_time = 1000.0 + feed_tick as f64 * 0.5;
            let mut f = feed(0, pool_at(feed_tick), Some(0), feed_time);
            f.stats.reserved_since = Some(since(feed_tick));
            p.feed = Some(f);
            s.processes.push(p);
            let attachment = judged(&s);
            contexts.observe(&s, &attachment.statuses);
            if let Some((bytes, source)) = contexts.estimate(&s.processes[0]) {
                prop_assert!(bytes >= context, "{bytes} below the true context {context} ({source:?})");
                prop_assert!(bytes <= context + largest_outside, "{bytes} above context + outside");
                prop_assert!(source != ContextSource::Fixed);
            }
        }
    }
}

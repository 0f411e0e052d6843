//! Property tests of the layer model against an independent oracle: for any sample, each
//! layer of every GPU and every MIG GPU instance is what the sample implies, computed here
//! from the processes and feeds their own way (live = Σ allocated of the usable feeds on the
//! device, and so on), or the layers are withheld for the reason the sample implies. Some
//! feeds report no pool (`reserved` null, as XLA's cuda_async): their live tensors are known,
//! the rest of their process's usage is not split.

use proptest::prelude::*;
use strata::accounting::{account, FeedStatus, Gap, Partition};
use strata::context::{ContextEstimator, ContextSource};
use strata::fixtures::{feed, gpu, judged, mig, node, process, unpooled_feed, GIB, MIB};
use strata::layers::{Layer, Layers};
use strata::sample::{DeviceMemory, NodeSample, ProcessSample};

/// A process spec: NVML used (maybe unknown), a feed (maybe, maybe self-contradicting, maybe
/// without a pool figure), visible or not, the feed's age, and now and then a record no
/// driver writes.
#[derive(Debug, Clone)]
struct Spec {
    used: Option<u64>,
    /// (allocated, reserved, inactive_split): reserved `None` is a pool not reported.
    feed: Option<(u64, Option<u64>, Option<u64>)>,
    visible: bool,
    feed_age: f64,
    odd_pid: Option<u32>,
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
                prop::bool::weighted(0.1),
                prop::bool::weighted(0.8),
            ),
        ),
        prop::bool::weighted(0.85),
        prop_oneof![4 => 0.0f64..2.5, 1 => 2.5f64..10.0],
        prop::option::weighted(0.03, prop_oneof![Just(0u32), Just(u32::MAX)]),
    )
        .prop_map(|(used, feed, visible, feed_age, odd_pid)| Spec {
            used,
            feed: feed.map(|(live, extra, split, broken, pooled)| {
                // Usually allocated + split <= reserved; now and then not.
                let reserved = if broken {
                    live / 2
                } else {
                    live + split.unwrap_or(0) + extra
                };
                (live, pooled.then_some(reserved), split)
            }),
            visible,
            feed_age,
            odd_pid,
        })
}

fn build(specs: &[Spec], device: &str, first_pid: u32, t: f64) -> Vec<ProcessSample> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut p = process(first_pid + i as u32, device, s.used);
            if let Some(pid) = s.odd_pid {
                p.pid = pid;
            }
            p.visible = s.visible;
            p.feed = s
                .feed
                .map(|(live, reserved, split)| match reserved {
                    Some(reserved) => feed(live, reserved, split, t - s.feed_age),
                    None => {
                        let mut f = unpooled_feed(live, t - s.feed_age);
                        f.stats.inactive_split = split;
                        f
                    }
                })
                .map(Box::new);
            // Most feeds sit inside NVML's figure; some do not (a different instant).
            if let (Some(used), Some(f)) = (p.used, &p.feed) {
                if i % 5 != 4 {
                    let pool = f.stats.reserved.unwrap_or(f.stats.allocated);
                    p.used = Some(used.max(pool) + (used % (512 * MIB)));
                }
            }
            p
        })
        .collect()
}

fn listed(processes: &[ProcessSample]) -> u64 {
    processes.iter().filter_map(|p| p.used).sum()
}

/// A device's memory: usually what its processes hold plus something unlisted plus free,
/// sometimes not derived from them at all, sometimes absurd.
fn device_memory(listed: u64, shape: (u64, u64, Option<u64>, u8, u64)) -> DeviceMemory {
    let (unlisted, free, reserved, kind, random) = shape;
    let used = listed + unlisted;
    let total = used + free + reserved.unwrap_or(0);
    let m = |total, used, free, driver_reserved| DeviceMemory {
        total,
        used,
        free,
        driver_reserved,
    };
    match kind {
        0 => m(total, used, total + 1, reserved),
        1 => m(total, total + 1, free, reserved),
        2 => m(total, used, free, Some(total + 1)),
        // v2 figures that do not add up.
        3 => m(total + 64 * MIB, used, free, Some(reserved.unwrap_or(0))),
        // Not derived from the processes: whatever NVML says.
        4..=6 => m(random + free, random, free, None),
        _ => m(total, used, free, reserved),
    }
}

fn shape() -> impl Strategy<Value = (u64, u64, Option<u64>, u8, u64)> {
    (
        0u64..4 * GIB,
        0u64..40 * GIB,
        prop::option::of(0u64..GIB),
        0u8..30,
        0u64..60 * GIB,
    )
}

prop_compose! {
    fn sample()(
        plain in prop::collection::vec((prop::collection::vec(spec(), 0..5), shape(), prop::bool::weighted(0.9)), 0..3),
        instances in prop::collection::vec((prop::collection::vec(prop::collection::vec(spec(), 0..3), 1..3), shape()), 0..3),
        gpu_shape in shape(),
    ) -> NodeSample {
        let mut s = node();
        let mut next_pid = 100;
        for (i, (specs, shape, known)) in plain.iter().enumerate() {
            let uuid = format!("GPU-test-{i}");
            let processes = build(specs, &uuid, next_pid, s.time);
            next_pid += 10;
            let mut g = gpu(i as u32, device_memory(listed(&processes), *shape));
            g.processes_known = *known;
            s.gpus.push(g);
            s.processes.extend(processes);
        }
        if !instances.is_empty() {
            let index = plain.len() as u32;
            let mut g = gpu(index, DeviceMemory { total: 0, used: 0, free: 0, driver_reserved: None });
            g.mig_mode = Some(true);
            let mut gpu_used = 0;
            // Each GPU instance has one or more compute instances, each reporting the GPU
            // instance's memory and listing its own processes.
            for (gi, (cis, shape)) in instances.iter().enumerate() {
                let mut members = Vec::new();
                for (ci, specs) in cis.iter().enumerate() {
                    let uuid = format!("MIG-test-{gi}-{ci}");
                    let processes = build(specs, &uuid, next_pid, s.time);
                    next_pid += 10;
                    members.push((uuid, processes));
                }
                let all: u64 = members.iter().map(|(_, p)| listed(p)).sum();
                let memory = device_memory(all, *shape);
                gpu_used += memory.total.saturating_sub(memory.free);
                for (ci, (uuid, processes)) in members.into_iter().enumerate() {
                    let mut m = mig(&uuid, "2g.20gb", memory);
                    m.gpu_instance_id = Some(gi as u32 + 1);
                    m.compute_instance_id = Some(ci as u32);
                    g.mig.push(m);
                    s.processes.extend(processes);
                }
            }
            g.memory = Some(device_memory(gpu_used, gpu_shape));
            s.gpus.push(g);
        }
        s
    }
}

/// A feed the oracle would combine with NVML: recent, and consistent with itself and NVML.
/// Without a pool figure, what it reports must fit in NVML's figure.
fn usable(p: &ProcessSample, now: f64) -> bool {
    p.feed.as_ref().is_some_and(|f| {
        let s = &f.stats;
        let parts = u128::from(s.allocated) + u128::from(s.inactive_split.unwrap_or(0));
        let consistent = match s.reserved {
            Some(reserved) => parts <= u128::from(reserved) && p.used.is_none_or(|u| reserved <= u),
            None => p.used.is_none_or(|u| parts <= u128::from(u)),
        };
        (now - s.time).abs() <= 3.0 && consistent
    })
}

/// What a device's layers must be, computed from the sample alone.
fn oracle(
    memory: Option<&DeviceMemory>,
    known: bool,
    processes: &[&ProcessSample],
    now: f64,
) -> Result<(Layers, Vec<Layer>, u64), &'static str> {
    let m = memory.ok_or("memory_unknown")?;
    if m.free > m.total {
        return Err("free_exceeds_total");
    }
    if m.used > m.total {
        return Err("used_exceeds_total");
    }
    if let Some(r) = m.driver_reserved {
        if r > m.total {
            return Err("reserved_exceeds_total");
        }
        let sum = u128::from(r) + u128::from(m.used) + u128::from(m.free);
        if sum.abs_diff(u128::from(m.total)) > 2 << 20 {
            return Err("memory_does_not_add_up");
        }
    }
    let occupied = m.total - m.free;
    let mut l = Layers::default();
    let mut partial = Vec::new();
    let mut beyond_pool = 0u64;
    if known {
        for p in processes {
            let odd = p.pid == u32::MAX
                || (p.pid == 0 && p.used != Some(0))
                || p.used.is_some_and(|u| u > m.total);
            if odd {
                return Err("implausible_process");
            }
        }
        let mut needed = 0u64;
        let mut unattributed_known = false;
        let mut unattributed_unknown = false;
        let add = |slot: &mut Option<u64>, v: u64| *slot = Some(slot.unwrap_or(0) + v);
        for p in processes {
            let pool = p
                .feed
                .as_ref()
                .and_then(|f| f.stats.reserved.map(|r| (&f.stats, r)));
            let unpooled = p
                .feed
                .as_ref()
                .map(|f| &f.stats)
                .filter(|s| s.reserved.is_none());
            if let (true, Some(s)) = (usable(p, now), unpooled) {
                // Only live is known; the rest of NVML's figure is held, not split.
                add(&mut l.live, s.allocated);
                partial.extend([
                    Layer::Fragmented,
                    Layer::Cached,
                    Layer::Context,
                    Layer::OutsidePool,
                ]);
                if p.visible {
                    match p.used {
                        Some(u) => {
                            add(&mut l.unattributed, u - s.allocated);
                            unattributed_known = true;
                        }
                        None => unattributed_unknown = true,
                    }
                }
                needed += p.used.unwrap_or(0).max(s.allocated);
            } else if let (true, Some((s, reserved))) = (usable(p, now), pool) {
                add(&mut l.live, s.allocated);
                add(
                    &mut l.cached,
                    reserved - s.allocated - s.inactive_split.unwrap_or(0),
                );
                match s.inactive_split {
                    Some(split) => add(&mut l.fragmented, split),
                    None => partial.push(Layer::Fragmented),
                }
                match p.used {
                    Some(u) => {
                        beyond_pool += u - reserved;
                        l.context = Some(l.context.unwrap_or(0));
                    }
                    None => partial.extend([Layer::Context, Layer::OutsidePool]),
                }
                needed += p.used.unwrap_or(0).max(reserved);
            } else {
                if p.feed.is_some() {
                    partial.extend([
                        Layer::Live,
                        Layer::Fragmented,
                        Layer::Cached,
                        Layer::Context,
                        Layer::OutsidePool,
                    ]);
                }
                if p.visible {
                    match p.used {
                        Some(u) => {
                            l.unattributed = Some(l.unattributed.unwrap_or(0) + u);
                            unattributed_known = true;
                        }
                        None => unattributed_unknown = true,
                    }
                }
                needed += p.used.unwrap_or(0);
            }
        }
        if !unattributed_known && !unattributed_unknown {
            l.unattributed = Some(0);
        }
        if unattributed_unknown {
            partial.push(Layer::Unattributed);
        }
        if needed > occupied {
            return Err("processes_exceed_occupied");
        }
    }
    let split = l.live.unwrap_or(0)
        + l.fragmented.unwrap_or(0)
        + l.cached.unwrap_or(0)
        + beyond_pool
        + l.unattributed.unwrap_or(0);
    l.other = Some(occupied - split);
    l.free = Some(m.free);
    let partial = Layer::ALL
        .into_iter()
        .filter(|x| partial.contains(x) && l.get(*x).is_some())
        .collect();
    Ok((l, partial, beyond_pool))
}

fn reason(gap: &Gap) -> &'static str {
    match gap {
        Gap::Lost => "lost",
        Gap::MemoryUnknown => "memory_unknown",
        Gap::FreeExceedsTotal { .. } => "free_exceeds_total",
        Gap::UsedExceedsTotal { .. } => "used_exceeds_total",
        Gap::ReservedExceedsTotal { .. } => "reserved_exceeds_total",
        Gap::MemoryDoesNotAddUp { .. } => "memory_does_not_add_up",
        Gap::ImplausibleProcess { .. } => "implausible_process",
        Gap::ProcessesExceedOccupied { .. } => "processes_exceed_occupied",
    }
}

/// The partition strata made against the oracle's, layer by layer.
fn compare(
    what: &str,
    made: &Partition,
    expected: Result<(Layers, Vec<Layer>, u64), &'static str>,
) -> Result<(), TestCaseError> {
    match (&made.layers, expected) {
        (Ok(l), Ok((e, partial, beyond_pool))) => {
            for layer in [
                Layer::Live,
                Layer::Fragmented,
                Layer::Cached,
                Layer::Unattributed,
                Layer::Other,
                Layer::Free,
            ] {
                prop_assert_eq!(l.get(layer), e.get(layer), "{}: {:?}", what, layer);
            }
            // How context and outside_pool share what lies beyond the pool is the
            // estimator's; together they are exactly that.
            prop_assert_eq!(
                l.context.unwrap_or(0) + l.outside_pool.unwrap_or(0),
                beyond_pool,
                "{}: context + outside_pool",
                what
            );
            // Which of context and outside_pool holds a byte is the estimator's: partial is
            // compared for every other layer.
            let without_outside = |p: &[Layer]| -> Vec<Layer> {
                p.iter()
                    .copied()
                    .filter(|&x| x != Layer::OutsidePool)
                    .collect()
            };
            prop_assert_eq!(
                without_outside(&made.partial),
                without_outside(&partial),
                "{}: partial layers",
                what
            );
        }
        (Err(gap), Err(expected)) => prop_assert_eq!(reason(gap), expected, "{}", what),
        (made, expected) => {
            prop_assert!(false, "{}: made {:?}, expected {:?}", what, made, expected)
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn every_layer_is_what_the_sample_implies(sample in sample()) {
        let mut contexts = ContextEstimator::learning();
        let attachment = judged(&sample);
        contexts.observe(&sample, &attachment.statuses);
        let node = account(&sample, &attachment, &contexts);
        for (g, acc) in sample.gpus.iter().zip(&node.gpus) {
            let on: Vec<&ProcessSample> =
                sample.processes.iter().filter(|p| g.holds(&p.device_uuid)).collect();
            let known = g.processes_known && g.mig.iter().all(|m| m.processes_known);
            let made = Partition { layers: acc.layers.clone(), partial: acc.partial.clone() };
            compare(&format!("GPU {}", g.index), &made, oracle(g.memory.as_ref(), known, &on, sample.time))?;
            if let Ok(l) = &acc.layers {
                prop_assert_eq!(l.sum(), u128::from(g.memory.map_or(0, |m| m.total)));
            }
            for (m, macc) in g.mig.iter().zip(&acc.mig) {
                // The GPU instance's processes: those of every compute instance sharing it.
                let members: Vec<&str> = g
                    .mig
                    .iter()
                    .filter(|c| c.gpu_instance_id == m.gpu_instance_id)
                    .map(|c| c.uuid.as_str())
                    .collect();
                let on: Vec<&ProcessSample> = sample
                    .processes
                    .iter()
                    .filter(|p| members.contains(&&*p.device_uuid))
                    .collect();
                let made = Partition { layers: macc.layers.clone(), partial: macc.partial.clone() };
                compare(&m.uuid, &made, oracle(m.memory.as_ref(), true, &on, sample.time))?;
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
            prop_assert_eq!(acc.feed_status.is_usable(), usable(p, sample.time), "{:?}", acc.feed_status);
            match (&acc.feed_status, p.used, &p.feed) {
                (FeedStatus::Fresh { .. }, used, Some(f)) if f.stats.reserved.is_none() => {
                    // No pool figure: live alone, the rest of NVML's figure held unsplit.
                    prop_assert_eq!(l.live, Some(f.stats.allocated));
                    prop_assert!(l.fragmented.is_none() && l.cached.is_none(), "unknown, never 0");
                    prop_assert!(l.context.is_none() && l.outside_pool.is_none(), "unknown, never 0");
                    prop_assert_eq!(acc.context_source, None);
                    let rest = used.map(|u| u - f.stats.allocated);
                    prop_assert_eq!(l.unattributed, if p.visible { rest } else { None });
                }
                (FeedStatus::Fresh { .. }, used, Some(f)) => {
                    let pool = l.live.unwrap_or(0) + l.fragmented.unwrap_or(0) + l.cached.unwrap_or(0);
                    prop_assert_eq!(Some(pool), f.stats.reserved);
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
                // Judged on the exact age, shown to the millisecond: 3.0004 s is stale, shown 3.0.
                prop_assert!(age.abs() >= 3.0 * sample.interval);
            }
        }
    }

    /// Context never exceeds what lies beyond the pool, over any sequence of samples of the
    /// same process.
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
            p.feed = Some(Box::new(feed(GIB, 10 * GIB, Some(0), s.time)));
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
        // Whether a reading so far was bracketed by a feed sample with an unchanged pool
        // (the module's rule for an exact pair): from then on the estimate must exist.
        let mut paired = false;
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
            p.feed = Some(Box::new(f));
            s.processes.push(p);
            let attachment = judged(&s);
            contexts.observe(&s, &attachment.statuses);
            paired |= since(feed_tick) <= now - 0.001 && now <= feed_time;
            let estimate = contexts.estimate(&s.processes[0]);
            prop_assert!(
                estimate.is_some() || !paired,
                "a reading was paired exactly by step {i}, and nothing is known"
            );
            if let Some((bytes, source)) = estimate {
                prop_assert!(bytes >= context, "{bytes} below the true context {context} ({source:?})");
                prop_assert!(bytes <= context + largest_outside, "{bytes} above context + outside");
                prop_assert!(source != ContextSource::Fixed);
            }
        }
    }
}

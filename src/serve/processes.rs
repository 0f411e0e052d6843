//! Process metrics of `strata serve`: NVML's used, the layers, the allocator's counters and
//! the feed's state, for at most `--max-processes` processes; the rest summed per device.

use super::labels::{
    device_labels, process_labels, set_bounds, set_bytes, set_layers, Counters, Floats, Ints, OTHER,
};
use crate::accounting::FeedStatus;
use crate::layers::Layers;
use crate::pipeline::Observed;
use crate::sample::NodeSample;
use prometheus_client::registry::{Registry, Unit};

/// The state names of a feed, as `strata_process_feed_state{state}` and the JSON
/// snapshot's `feed_status.state` spell them.
pub(crate) const FEED_STATES: [&str; 6] = [
    "absent",
    "refused",
    "pending",
    "fresh",
    "stale",
    "inconsistent",
];

fn feed_state(status: &FeedStatus) -> &'static str {
    match status {
        FeedStatus::Absent => "absent",
        FeedStatus::Refused { .. } => "refused",
        FeedStatus::Pending { .. } => "pending",
        FeedStatus::Fresh { .. } => "fresh",
        FeedStatus::Stale { .. } => "stale",
        FeedStatus::Inconsistent { .. } => "inconsistent",
    }
}

/// The processes exported one by one: at most `max_processes`, the largest by NVML's used
/// first (unknown usage last), then by pid. Positions in `sample.processes`.
pub(crate) fn exported_processes(sample: &NodeSample, max_processes: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sample.processes.len()).collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (&sample.processes[a], &sample.processes[b]);
        pb.used.cmp(&pa.used).then(pa.pid.cmp(&pb.pid))
    });
    order.truncate(max_processes);
    order.sort_unstable();
    order
}

pub(super) fn register(registry: &mut Registry, observed: &Observed, max_processes: usize) {
    let sample = &observed.sample;
    let used = Ints::default();
    let layers = Ints::default();
    let reserved = Ints::default();
    let bounds = Ints::default();
    let headroom = Ints::default();
    let retries = Counters::default();
    let ooms = Counters::default();
    let state = Ints::default();
    let age = Floats::default();
    let fragmentation = Floats::default();
    let omitted = Ints::default();
    let exported = exported_processes(sample, max_processes);
    // The processes left out, summed per device, so that sums over processes still hold.
    let mut rest: Vec<(&str, Option<u64>, Layers, i64)> = Vec::new();
    for (i, (p, acc)) in sample
        .processes
        .iter()
        .zip(&observed.account.processes)
        .enumerate()
    {
        let share = Layers {
            context: acc.layers.context,
            outside_pool: acc.layers.outside_pool,
            cached: acc.layers.cached,
            fragmented: acc.layers.fragmented,
            live: acc.layers.live,
            unattributed: acc.layers.unattributed,
            other: None,
            free: None,
        };
        if exported.binary_search(&i).is_err() {
            let slot = match rest.iter().position(|r| *r.0 == *p.device_uuid) {
                Some(at) => at,
                None => {
                    rest.push((&p.device_uuid, Some(0), Layers::default(), 0));
                    rest.len() - 1
                }
            };
            let entry = &mut rest[slot];
            // One unknown usage makes the sum unknown.
            entry.1 = entry.1.zip(p.used).map(|(a, b)| a.saturating_add(b));
            entry.2.absorb(&share);
            entry.3 += 1;
            continue;
        }
        let labels = process_labels(sample, p);
        if let Some(bytes) = p.used {
            set_bytes(&used, labels.clone(), bytes);
        }
        set_layers(&layers, &labels, Some(&share));
        if let Some(pool) = share.reserved() {
            set_bytes(&reserved, labels.clone(), pool);
        }
        set_bounds(&bounds, &labels, &acc.bounds());
        if let Some(Some(room)) = observed.headroom.get(i) {
            headroom.get_or_create(&labels).set(room.bytes);
        }
        if let Some(stats) = p.feed.as_ref().map(|f| &f.stats) {
            if let Some(n) = stats.alloc_retries {
                retries.get_or_create(&labels).inc_by(n);
            }
            if let Some(n) = stats.ooms {
                ooms.get_or_create(&labels).inc_by(n);
            }
        }
        let current = feed_state(&acc.feed_status);
        for name in FEED_STATES {
            let mut with_state = labels.clone();
            with_state.push(("state", name.to_string()));
            state
                .get_or_create(&with_state)
                .set(i64::from(name == current));
        }
        if let FeedStatus::Fresh { age: a } | FeedStatus::Stale { age: a } = acc.feed_status {
            age.get_or_create(&labels).set(a);
        }
        if let (Some(frag), Some(pool)) = (share.fragmented, share.reserved()) {
            if pool > 0 {
                fragmentation
                    .get_or_create(&labels)
                    .set(frag as f64 / pool as f64);
            }
        }
    }
    for (uuid, used_sum, share, count) in rest {
        let mut labels = device_labels(sample, uuid);
        labels.push(("pid", OTHER.to_string()));
        labels.push(("user", OTHER.to_string()));
        labels.push(("command", OTHER.to_string()));
        labels.extend(super::labels::owner_labels(None));
        if let Some(bytes) = used_sum {
            set_bytes(&used, labels.clone(), bytes);
        }
        set_layers(&layers, &labels, Some(&share));
        omitted
            .get_or_create(&device_labels(sample, uuid))
            .set(count);
    }
    registry.register_with_unit(
        "strata_process_used",
        "NVML's used memory of a process on a device (pid=\"other\": the processes beyond --max-processes, summed per device)",
        Unit::Bytes,
        used,
    );
    registry.register_with_unit(
        "strata_process_layer",
        "A process's memory on a device by layer (live, fragmented, cached, outside_pool, context for a fed process; unattributed for one without a feed); an unknown layer is absent",
        Unit::Bytes,
        layers,
    );
    registry.register_with_unit(
        "strata_process_reserved",
        "A fed process's allocator pool on a device (PyTorch's memory_reserved): live + fragmented + cached, or live + cached where the allocator reports no splits (cached then holds them); absent where unknown. Not a layer: a sum over layers must not add it",
        Unit::Bytes,
        reserved,
    );
    registry.register(
        "strata_process_layer_bound",
        "1 for each layer of a process that is a bound, not exact (bound=upper: an estimated context; bound=lower: the memory outside the pool beside it)",
        bounds,
    );
    registry.register_with_unit(
        "strata_process_headroom",
        "How far a fed process's peak of live tensors (over strata's last 15 minutes) can grow before an allocation of the same shape would fail: NVML free + reserved - fragmented - that peak; negative where it no longer fits",
        Unit::Bytes,
        headroom,
    );
    registry.register(
        "strata_process_alloc_retries",
        "The allocator's retries (cudaMalloc failed, cache flushed, tried again), as its feed reports them",
        retries,
    );
    registry.register(
        "strata_process_ooms",
        "Out-of-memory errors the process's allocator has raised, as its feed reports them",
        ooms,
    );
    registry.register(
        "strata_process_feed_state",
        "1 for the state of the process's allocator feed (absent, refused, pending, fresh, stale, inconsistent), 0 for the others",
        state,
    );
    registry.register_with_unit(
        "strata_process_feed_age",
        "Age of the feed's latest statistics when the sample was taken (fresh or stale feeds)",
        Unit::Seconds,
        age,
    );
    registry.register_with_unit(
        "strata_process_fragmentation",
        "Fragmented bytes as a share of the allocator's pool (live + fragmented + cached), where the backend reports splits",
        Unit::Other("ratio".into()),
        fragmentation,
    );
    registry.register(
        "strata_processes_omitted",
        "Processes on the device beyond --max-processes, summed into the pid=\"other\" series",
        omitted,
    );
}

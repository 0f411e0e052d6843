use super::*;
use crate::fixtures::*;
use crate::sample::DeviceMemory;

fn one_gpu_with(total: u64, used: u64, processes: Vec<ProcessSample>) -> NodeSample {
    let mut sample = node();
    sample.gpus.push(gpu(0, memory(total, used)));
    sample.processes = processes;
    sample
}

fn layers_of(sample: &NodeSample) -> Layers {
    let mut contexts = ContextEstimator::learning();
    contexts.observe(sample, &judged(sample).statuses);
    account(sample, &judged(sample), &contexts).gpus[0]
        .layers
        .clone()
        .expect("layers computable")
}

/// Seed article AM-214: 12 GiB of tensors in a 20 GiB pool plus 4 GiB outside is 24 GiB.
#[test]
fn tensors_inside_pool_are_not_counted_twice() {
    let mut p = process(10, "GPU-test-0", Some(24 * GIB));
    p.feed = Some(Box::new(feed(12 * GIB, 20 * GIB, Some(0), 1000.0)));
    let sample = one_gpu_with(40 * GIB, 24 * GIB, vec![p]);
    let layers = layers_of(&sample);
    assert_eq!(layers.live, Some(12 * GIB));
    assert_eq!(layers.cached, Some(8 * GIB), "pool not occupied by tensors");
    assert_eq!(layers.occupied(), 24 * GIB, "never 36");
    assert_eq!(
        layers.context.unwrap_or(0) + layers.outside_pool.unwrap_or(0),
        4 * GIB
    );
    assert_eq!(layers.sum(), u128::from(40 * GIB));
}

/// AM-214 later: tensors drop to 6 GiB, the pool stays 20 GiB: used stays 24, cached is 14.
#[test]
fn dropping_tensors_moves_bytes_to_cached_not_out_of_used() {
    let mut p = process(10, "GPU-test-0", Some(24 * GIB));
    p.feed = Some(Box::new(feed(6 * GIB, 20 * GIB, Some(0), 1000.0)));
    let sample = one_gpu_with(40 * GIB, 24 * GIB, vec![p]);
    let layers = layers_of(&sample);
    assert_eq!(layers.live, Some(6 * GIB));
    assert_eq!(layers.cached, Some(14 * GIB));
    assert_eq!(layers.occupied(), 24 * GIB);
}

#[test]
fn backend_without_split_stats_gives_null_fragmented() {
    let mut p = process(10, "GPU-test-0", Some(10 * GIB));
    let mut f = feed(4 * GIB, 8 * GIB, None, 1000.0);
    f.backend = "cudaMallocAsync".into();
    p.feed = Some(Box::new(f));
    let sample = one_gpu_with(40 * GIB, 10 * GIB, vec![p]);
    let mut contexts = ContextEstimator::learning();
    contexts.observe(&sample, &judged(&sample).statuses);
    let node = account(&sample, &judged(&sample), &contexts);
    assert_eq!(node.processes[0].layers.fragmented, None);
    assert_eq!(node.processes[0].layers.cached, Some(4 * GIB));
    let layers = node.gpus[0].layers.clone().expect("layers");
    assert_eq!(layers.fragmented, None, "unknown is null, not 0");
    assert_eq!(layers.sum(), u128::from(40 * GIB));
}

/// XLA's cuda_async allocator reports no pool: the process's live tensors are split out of
/// NVML's figure, the rest of it is held unsplit, and the pool's layers are unknown.
#[test]
fn a_feed_without_a_pool_figure_splits_out_live_alone() {
    let mut jax = process(10, "GPU-test-0", Some(10 * GIB));
    jax.feed = Some(Box::new(unpooled_feed(6 * GIB, 1000.0)));
    let sample = one_gpu_with(40 * GIB, 10 * GIB, vec![jax.clone()]);
    let mut contexts = ContextEstimator::learning();
    contexts.observe(&sample, &judged(&sample).statuses);
    let node = account(&sample, &judged(&sample), &contexts);
    let fed = &node.processes[0];
    assert!(fed.feed_status.is_usable(), "{:?}", fed.feed_status);
    assert_eq!(fed.layers.live, Some(6 * GIB));
    assert_eq!(fed.layers.unattributed, Some(4 * GIB), "held, not split");
    for unknown in [
        fed.layers.cached,
        fed.layers.fragmented,
        fed.layers.context,
        fed.layers.outside_pool,
    ] {
        assert_eq!(unknown, None, "unknown, never 0");
    }
    assert_eq!(fed.context_source, None);
    assert!(fed.bounds().is_empty());
    let gpu = &node.gpus[0];
    let layers = gpu.layers.clone().expect("layers");
    assert_eq!(layers.live, Some(6 * GIB));
    assert_eq!(layers.unattributed, Some(4 * GIB));
    assert_eq!((layers.cached, layers.context), (None, None));
    assert_eq!(layers.sum(), u128::from(40 * GIB), "exact where known");
    assert!(
        gpu.partial.is_empty(),
        "nobody knows the pool: unknown, not partial"
    );

    // Beside a torch job whose pool is known, the pool's layers are known in part.
    let mut torch = process(11, "GPU-test-0", Some(24 * GIB));
    torch.feed = Some(Box::new(feed(12 * GIB, 20 * GIB, Some(GIB), 1000.0)));
    let sample = one_gpu_with(40 * GIB, 34 * GIB, vec![jax, torch]);
    let mut contexts = ContextEstimator::learning();
    contexts.observe(&sample, &judged(&sample).statuses);
    let gpu = &account(&sample, &judged(&sample), &contexts).gpus[0];
    let layers = gpu.layers.clone().expect("layers");
    assert_eq!(layers.live, Some(18 * GIB));
    assert_eq!(layers.cached, Some(7 * GIB), "the torch pool's alone");
    assert_eq!(layers.unattributed, Some(4 * GIB));
    assert_eq!(layers.sum(), u128::from(40 * GIB));
    for layer in [
        Layer::Fragmented,
        Layer::Cached,
        Layer::Context,
        Layer::OutsidePool,
    ] {
        assert!(
            gpu.partial.contains(&layer),
            "{layer:?} is partial: {:?}",
            gpu.partial
        );
    }
    assert!(!gpu.partial.contains(&Layer::Live));
}

#[test]
fn process_without_nvml_usage_is_null_not_zero() {
    let p = process(10, "GPU-test-0", None);
    let sample = one_gpu_with(40 * GIB, 3 * GIB, vec![p]);
    let mut contexts = ContextEstimator::learning();
    contexts.observe(&sample, &judged(&sample).statuses);
    let node = account(&sample, &judged(&sample), &contexts);
    assert_eq!(node.processes[0].layers.unattributed, None);
    let layers = node.gpus[0].layers.clone().expect("layers");
    assert_eq!(
        layers.unattributed, None,
        "NVML does not say how much the process holds: n/a, never 0"
    );
    assert_eq!(layers.other, Some(3 * GIB), "its bytes stay in other");
    // Beside a process whose usage is known, the layer is a lower bound.
    let sample = one_gpu_with(
        40 * GIB,
        5 * GIB,
        vec![
            process(10, "GPU-test-0", None),
            process(11, "GPU-test-0", Some(2 * GIB)),
        ],
    );
    let node = account(&sample, &judged(&sample), &ContextEstimator::learning());
    assert_eq!(
        node.gpus[0].layers.clone().expect("layers").unattributed,
        Some(2 * GIB)
    );
    assert_eq!(node.gpus[0].partial, vec![Layer::Unattributed]);
}

/// The demo's GPU 2: a fragmentation figure summed without the cudaMallocAsync process,
/// whose backend does not report splits, is a lower bound.
#[test]
fn a_layer_summed_without_a_process_whose_share_is_unknown_is_partial() {
    let mut native = process(10, "GPU-test-0", Some(10 * GIB));
    native.feed = Some(Box::new(feed(4 * GIB, 8 * GIB, Some(180 * MIB), 1000.0)));
    let mut asynchronous = process(11, "GPU-test-0", Some(10 * GIB));
    asynchronous.feed = Some(Box::new(feed(4 * GIB, 8 * GIB, None, 1000.0)));
    let sample = one_gpu_with(40 * GIB, 20 * GIB, vec![native, asynchronous]);
    let node = account(&sample, &judged(&sample), &ContextEstimator::learning());
    let layers = node.gpus[0].layers.clone().expect("layers");
    assert_eq!(layers.fragmented, Some(180 * MIB));
    assert_eq!(node.gpus[0].partial, vec![Layer::Fragmented]);
    // A stale feed leaves the pool's layers only partly known.
    let mut stale = sample.clone();
    stale.processes[1].feed = Some(Box::new(feed(4 * GIB, 8 * GIB, Some(0), 990.0)));
    let node = account(&stale, &judged(&stale), &ContextEstimator::learning());
    assert!(node.gpus[0].partial.contains(&Layer::Live));
}

/// Several compute instances of one GPU instance share its memory: one partition holds all
/// their processes, so neither is counted in the other's `other`.
#[test]
fn compute_instances_of_one_gpu_instance_share_one_partition() {
    let mut sample = node();
    let mut g = gpu(0, memory(80 * GIB, 12 * GIB));
    g.mig_mode = Some(true);
    for (uuid, ci) in [("MIG-ci0", 0), ("MIG-ci1", 1)] {
        let mut m = mig(uuid, "4g.40gb", memory(40 * GIB, 12 * GIB));
        m.gpu_instance_id = Some(1);
        m.compute_instance_id = Some(ci);
        g.mig.push(m);
    }
    sample.gpus.push(g);
    sample.processes = vec![
        process(1, "MIG-ci0", Some(5 * GIB)),
        process(2, "MIG-ci1", Some(7 * GIB)),
    ];
    let node = account(&sample, &judged(&sample), &ContextEstimator::learning());
    for m in &node.gpus[0].mig {
        let layers = m.layers.clone().expect("layers");
        assert_eq!(layers.unattributed, Some(12 * GIB));
        assert_eq!(layers.other, Some(0), "no sibling's process in `other`");
        assert_eq!(m.gpu_instance_members, vec![0, 1]);
    }
    assert!(node.gpus[0].mig[0].leads(0) && !node.gpus[0].mig[1].leads(1));
}

#[test]
fn records_no_driver_writes_withhold_the_layers() {
    for (pid, used) in [(0, Some(GIB)), (u32::MAX, Some(GIB)), (7, Some(80 * GIB))] {
        let sample = one_gpu_with(40 * GIB, 2 * GIB, vec![process(pid, "GPU-test-0", used)]);
        let node = account(&sample, &judged(&sample), &ContextEstimator::learning());
        assert!(
            matches!(node.gpus[0].layers, Err(Gap::ImplausibleProcess { .. })),
            "{pid}: {:?}",
            node.gpus[0].layers
        );
    }
    // PID 0 holding nothing is a driver quirk, not a contradiction.
    let sample = one_gpu_with(40 * GIB, 2 * GIB, vec![process(0, "GPU-test-0", Some(0))]);
    let node = account(&sample, &judged(&sample), &ContextEstimator::learning());
    assert!(node.gpus[0].layers.is_ok());
}

#[test]
fn memory_figures_that_contradict_each_other_withhold_the_layers() {
    let with = |m: DeviceMemory| {
        let mut sample = one_gpu_with(40 * GIB, 0, vec![]);
        sample.gpus[0].memory = Some(m);
        account(&sample, &judged(&sample), &ContextEstimator::learning()).gpus[0]
            .layers
            .clone()
    };
    let m = |total, used, free, driver_reserved| DeviceMemory {
        total,
        used,
        free,
        driver_reserved,
    };
    assert!(matches!(
        with(m(GIB, 2 * GIB, 0, None)),
        Err(Gap::UsedExceedsTotal { .. })
    ));
    assert!(matches!(
        with(m(GIB, 0, GIB, Some(2 * GIB))),
        Err(Gap::ReservedExceedsTotal { .. })
    ));
    assert!(matches!(
        with(m(40 * GIB, GIB, GIB, Some(GIB))),
        Err(Gap::MemoryDoesNotAddUp { .. })
    ));
    assert!(with(m(40 * GIB, GIB, 38 * GIB + 512 * MIB, Some(512 * MIB))).is_ok());
}

#[test]
fn stale_feed_is_not_mixed_into_the_instant() {
    let mut p = process(10, "GPU-test-0", Some(24 * GIB));
    // Three intervals and a bit old.
    p.feed = Some(Box::new(feed(12 * GIB, 20 * GIB, Some(0), 1000.0 - 3.5)));
    let sample = one_gpu_with(40 * GIB, 24 * GIB, vec![p.clone()]);
    let mut contexts = ContextEstimator::learning();
    contexts.observe(&sample, &judged(&sample).statuses);
    let node = account(&sample, &judged(&sample), &contexts);
    assert!(matches!(
        node.processes[0].feed_status,
        FeedStatus::Stale { .. }
    ));
    assert_eq!(node.processes[0].layers.live, None);
    assert_eq!(node.processes[0].layers.unattributed, Some(24 * GIB));

    // Exactly three intervals old is still current.
    p.feed = Some(Box::new(feed(12 * GIB, 20 * GIB, Some(0), 997.0)));
    let sample = one_gpu_with(40 * GIB, 24 * GIB, vec![p]);
    assert!(judged(&sample).statuses[0].clone().is_usable());
}

#[test]
fn feed_reserving_more_than_nvml_sees_is_not_used() {
    let mut p = process(10, "GPU-test-0", Some(8 * GIB));
    p.feed = Some(Box::new(feed(4 * GIB, 9 * GIB, Some(0), 1000.0)));
    let sample = one_gpu_with(40 * GIB, 8 * GIB, vec![p]);
    let status = judged(&sample).statuses[0].clone();
    assert!(
        matches!(status, FeedStatus::Inconsistent { .. }),
        "{status:?}"
    );
    assert_eq!(layers_of(&sample).unattributed, Some(8 * GIB));
}

#[test]
fn context_is_the_smallest_gap_seen_and_the_rest_is_outside_pool() {
    let mut contexts = ContextEstimator::learning();
    // At start-up: 0.5 GiB beyond the pool, all of it context.
    let mut p = process(10, "GPU-test-0", Some(GIB / 2 + 2 * GIB));
    p.feed = Some(Box::new(feed(GIB, 2 * GIB, Some(0), 1000.0)));
    let first = one_gpu_with(80 * GIB, p.used.unwrap_or(0), vec![p.clone()]);
    contexts.observe(&first, &judged(&first).statuses);
    // Later NCCL adds 3 GiB outside the pool.
    p.used = Some(GIB / 2 + 3 * GIB + 10 * GIB);
    p.feed = Some(Box::new(feed(6 * GIB, 10 * GIB, Some(GIB), 1001.0)));
    let mut later = one_gpu_with(80 * GIB, p.used.unwrap_or(0), vec![p]);
    later.time = 1001.0;
    contexts.observe(&later, &judged(&later).statuses);
    let node = account(&later, &judged(&later), &contexts);
    let layers = node.processes[0].layers;
    assert_eq!(layers.context, Some(GIB / 2));
    assert_eq!(layers.outside_pool, Some(3 * GIB));
    assert_eq!(layers.fragmented, Some(GIB));
    assert_eq!(layers.cached, Some(3 * GIB));
}

#[test]
fn fixed_context_size_caps_at_what_is_beyond_the_pool() {
    let mut p = process(10, "GPU-test-0", Some(10 * GIB + 256 * MIB));
    p.feed = Some(Box::new(feed(GIB, 10 * GIB, Some(0), 1000.0)));
    let sample = one_gpu_with(80 * GIB, p.used.unwrap_or(0), vec![p]);
    let contexts = ContextEstimator::fixed(512 * MIB);
    let layers = account(&sample, &judged(&sample), &contexts).processes[0].layers;
    assert_eq!(layers.context, Some(256 * MIB));
    assert_eq!(layers.outside_pool, Some(0));
}

#[test]
fn reused_pid_starts_a_new_context_estimate() {
    let mut contexts = ContextEstimator::learning();
    let mut p = process(10, "GPU-test-0", Some(GIB + GIB / 4));
    p.feed = Some(Box::new(feed(0, GIB, Some(0), 1000.0)));
    let first = one_gpu_with(80 * GIB, p.used.unwrap_or(0), vec![p.clone()]);
    contexts.observe(&first, &judged(&first).statuses);
    p.start_time = Some(999_999);
    p.used = Some(GIB + GIB / 2);
    let sample = one_gpu_with(80 * GIB, p.used.unwrap_or(0), vec![p]);
    contexts.observe(&sample, &judged(&sample).statuses);
    assert_eq!(
        contexts.estimate(&sample.processes[0]).map(|e| e.0),
        Some(GIB / 2)
    );
}

#[test]
fn invisible_holder_without_feed_counts_as_other() {
    let mut p = process(10, "GPU-test-0", Some(2 * GIB));
    p.visible = false;
    p.proc_state = None;
    let sample = one_gpu_with(40 * GIB, 2 * GIB, vec![p]);
    let layers = layers_of(&sample);
    assert_eq!(layers.other, Some(2 * GIB));
    assert_eq!(layers.unattributed, Some(0));
}

#[test]
fn contradictory_counters_give_no_layers_rather_than_wrong_ones() {
    let p = process(10, "GPU-test-0", Some(5 * GIB));
    let sample = one_gpu_with(40 * GIB, 4 * GIB, vec![p]);
    let contexts = ContextEstimator::learning();
    let node = account(&sample, &judged(&sample), &contexts);
    assert!(matches!(
        node.gpus[0].layers,
        Err(Gap::ProcessesExceedOccupied { .. })
    ));

    let mut absurd = one_gpu_with(40 * GIB, 0, vec![]);
    if let Some(m) = absurd.gpus[0].memory.as_mut() {
        m.free = 50 * GIB;
    }
    let node = account(&absurd, &judged(&absurd), &contexts);
    assert!(matches!(
        node.gpus[0].layers,
        Err(Gap::FreeExceedsTotal { .. })
    ));
}

#[test]
fn driver_reservation_is_inside_other() {
    let mut sample = one_gpu_with(80 * GIB, 0, vec![]);
    sample.gpus[0].memory = Some(DeviceMemory {
        total: 80 * GIB,
        used: 10 * GIB,
        free: 80 * GIB - 10 * GIB - 512 * MIB,
        driver_reserved: Some(512 * MIB),
    });
    let layers = layers_of(&sample);
    assert_eq!(layers.other, Some(10 * GIB + 512 * MIB));
    assert_eq!(layers.sum(), u128::from(80 * GIB));
}

#[test]
fn mig_instances_and_their_gpu_each_add_up() {
    let mut sample = node();
    let mut g = gpu(0, memory(80 * GIB, 30 * GIB));
    g.mig_mode = Some(true);
    g.mig = vec![
        mig("MIG-a", "3g.40gb", memory(40 * GIB, 20 * GIB)),
        mig("MIG-b", "2g.20gb", memory(20 * GIB, 5 * GIB)),
    ];
    sample.gpus.push(g);
    let mut fed = process(1, "MIG-a", Some(18 * GIB));
    fed.feed = Some(Box::new(feed(10 * GIB, 16 * GIB, Some(GIB), 1000.0)));
    sample.processes = vec![fed, process(2, "MIG-b", Some(4 * GIB))];
    let mut contexts = ContextEstimator::learning();
    contexts.observe(&sample, &judged(&sample).statuses);
    let node = account(&sample, &judged(&sample), &contexts);
    let a = node.gpus[0].mig[0].layers.clone().expect("a");
    let b = node.gpus[0].mig[1].layers.clone().expect("b");
    let whole = node.gpus[0].layers.clone().expect("gpu");
    assert_eq!(a.sum(), u128::from(40 * GIB));
    assert_eq!(b.sum(), u128::from(20 * GIB));
    assert_eq!(whole.sum(), u128::from(80 * GIB));
    assert_eq!(a.other, Some(2 * GIB));
    assert_eq!(b.unattributed, Some(4 * GIB));
    assert_eq!(whole.live, Some(10 * GIB));
    assert_eq!(whole.unattributed, Some(4 * GIB));
}

#[test]
fn lost_gpu_has_no_layers() {
    let mut sample = one_gpu_with(40 * GIB, GIB, vec![]);
    sample.gpus[0].lost = true;
    let node = account(&sample, &judged(&sample), &ContextEstimator::learning());
    assert_eq!(node.gpus[0].layers, Err(Gap::Lost));
}

/// A GPU whose process list could not be read: what NVML says is occupied is `other`, held
/// by the unlisted processes as much as by none, so an upper bound, said in `bounds`; a GPU
/// whose list was read has an exact `other`.
#[test]
fn other_is_an_upper_bound_where_the_process_list_is_unread() {
    let mut sample = one_gpu_with(80 * GIB, 25 * GIB, Vec::new());
    let node = {
        let contexts = ContextEstimator::learning();
        account(&sample, &judged(&sample), &contexts)
    };
    assert_eq!(node.gpus[0].bounds().get(&Layer::Other), None);
    sample.gpus[0].processes_known = false;
    let contexts = ContextEstimator::learning();
    let node = account(&sample, &judged(&sample), &contexts);
    let gpu = &node.gpus[0];
    assert_eq!(
        gpu.layers.as_ref().ok().and_then(|l| l.other),
        Some(25 * GIB)
    );
    assert_eq!(gpu.bounds().get(&Layer::Other), Some(&Bound::Upper));
    assert!(!gpu.processes_known);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// The GPUs that hold each process, worked out once a run of processes, are the GPUs
    /// asked one by one: processes in any order, on GPUs, MIG instances, devices no GPU
    /// lists, and a UUID two GPUs both claim.
    #[test]
    fn each_process_s_holders_are_the_gpus_that_hold_its_device(
        on in proptest::collection::vec(0usize..7, 0..40),
    ) {
        let mut sample = node();
        for i in 0..3u32 {
            let mut g = gpu(i, memory(80 * GIB, 10 * GIB));
            if i == 1 {
                g.mig.push(mig("MIG-a", "1g.10gb", memory(10 * GIB, GIB)));
                g.mig.push(mig("MIG-b", "1g.10gb", memory(10 * GIB, GIB)));
            }
            if i == 2 {
                // Claims GPU 0's UUID as an instance of its own: both hold it.
                g.mig.push(mig("GPU-test-0", "1g.10gb", memory(10 * GIB, GIB)));
            }
            sample.gpus.push(g);
        }
        let uuids = ["GPU-test-0", "GPU-test-1", "GPU-test-2", "MIG-a", "MIG-b", "GPU-elsewhere", "GPU-test-0"];
        sample.processes = on
            .iter()
            .enumerate()
            .map(|(k, &d)| process(100 + k as u32, uuids[d], Some(GIB)))
            .collect();
        let masks = holders(&sample);
        proptest::prop_assert_eq!(masks.len(), sample.processes.len());
        for (p, mask) in sample.processes.iter().zip(masks) {
            for (g, gpu) in sample.gpus.iter().enumerate() {
                let mask = mask.expect("a few GPUs: a mask");
                proptest::prop_assert_eq!(mask & (1 << g) != 0, gpu.holds(&p.device_uuid), "{} on GPU {}", p.device_uuid, g);
            }
        }
    }
}

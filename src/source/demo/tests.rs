use super::*;
use crate::accounting::account;
use crate::context::ContextEstimator;

fn layers_sum_to_totals(sample: &NodeSample) {
    let mut contexts = ContextEstimator::learning();
    contexts.observe(sample);
    let node = account(sample, &contexts);
    for (gpu, acc) in sample.gpus.iter().zip(&node.gpus) {
        let layers = acc.layers.clone().expect("demo GPUs are consistent");
        let total = gpu.memory.map(|m| m.total).unwrap_or(0);
        assert_eq!(
            layers.sum(),
            u128::from(total),
            "GPU {} at {}",
            gpu.index,
            sample.time
        );
        for (m, macc) in gpu.mig.iter().zip(&acc.mig) {
            let layers = macc.layers.clone().expect("MIG consistent");
            assert_eq!(
                layers.sum(),
                u128::from(m.memory.map(|x| x.total).unwrap_or(0))
            );
        }
    }
}

#[test]
fn every_instant_of_the_story_partitions_exactly() {
    let mut t = 0.0;
    while t < 2.0 * LOOP_SECS {
        layers_sum_to_totals(&node_at(7, t, 10.0));
        t += 7.0;
    }
}

#[test]
fn same_seed_same_instant_same_sample() {
    assert_eq!(node_at(1, 333.0, 10.0), node_at(1, 333.0, 10.0));
    assert_ne!(node_at(1, 333.0, 10.0), node_at(2, 333.0, 10.0));
}

#[test]
fn the_story_has_every_situation() {
    let s = node_at(0, SNAPSHOT_AT, 10.0);
    assert_eq!(s.gpus.len(), 4);
    let mig: Vec<_> = s.gpus[3]
        .mig
        .iter()
        .filter_map(|m| m.profile.clone())
        .collect();
    assert_eq!(mig, ["3g.40gb", "2g.20gb", "1g.10gb"]);
    assert!(s.processes.iter().any(|p| !p.visible), "zombie context");
    assert!(
        s.processes.iter().any(|p| p.feed.is_none() && p.visible),
        "no feed"
    );
    let backend = |b: &str| {
        s.processes
            .iter()
            .any(|p| p.feed.as_ref().is_some_and(|f| f.backend == b))
    };
    assert!(backend("cudaMallocAsync"));
    let varlen = s
        .processes
        .iter()
        .find(|p| p.pid == 60112)
        .expect("varlen job");
    let feed = varlen.feed.as_ref().expect("fed");
    assert!(feed.ooms.unwrap_or(0) >= 1 && feed.alloc_retries.unwrap_or(0) > 50);
    // The leak climbs: later samples hold more live memory.
    let live = |t: f64| {
        node_at(0, t, 10.0)
            .processes
            .iter()
            .find(|p| p.pid == 52010)
            .and_then(|p| p.feed.as_ref().map(|f| f.allocated))
            .unwrap_or(0)
    };
    assert!(live(300.0) < live(600.0) && live(600.0) < live(1100.0));
    // The trainer plateaus: reserved is the same late in the story.
    let reserved = |t: f64| {
        node_at(0, t, 10.0).processes[0]
            .feed
            .as_ref()
            .map(|f| f.reserved)
    };
    assert_eq!(reserved(400.0), reserved(1100.0));
}

#[test]
fn a_stalled_agent_goes_stale() {
    let s = node_at(0, 720.0, 10.0);
    let p = s
        .processes
        .iter()
        .find(|p| p.pid == 52077)
        .expect("async server");
    assert!(!crate::accounting::feed_status(&s, p).is_usable());
}

#[test]
fn backlog_leads_up_to_the_first_sample() {
    let mut source = DemoSource::new(0, 1.0, 10.0, 100.0);
    let backlog = source.backlog();
    assert_eq!(backlog.len(), 10);
    let first = source.sample().expect("demo samples");
    assert!(backlog.windows(2).all(|w| w[0].time < w[1].time));
    assert_eq!(backlog.last().map(|s| s.time + 10.0), Some(first.time));
}

use super::*;
use crate::accounting::account;
use crate::accounting::attach::attach;
use crate::context::ContextEstimator;

/// The demo sample with its feeds attached, as the pipeline would.
fn attached(seed: u64, t: f64) -> NodeSample {
    let mut s = node_at(seed, t, 10.0);
    attach(&mut s);
    s
}

fn layers_sum_to_totals(sample: &NodeSample) {
    let mut sample = sample.clone();
    let attachment = attach(&mut sample);
    assert!(attachment.unlisted.is_empty(), "{:?}", attachment.unlisted);
    let sample = &sample;
    let mut contexts = ContextEstimator::learning();
    contexts.observe(sample, &attachment.statuses);
    let node = account(sample, &attachment, &contexts);
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
    let s = attached(0, SNAPSHOT_AT);
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
    assert!(feed.stats.ooms.unwrap_or(0) >= 1 && feed.stats.alloc_retries.unwrap_or(0) > 50);
    // JAX names its device by PCI id only: matched to its MIG instance all the same.
    let jax = s.processes.iter().find(|p| p.pid == 60500).expect("jax");
    assert_eq!(jax.feed.as_ref().map(|f| f.framework.as_str()), Some("jax"));
    // The leak climbs: later samples hold more live memory.
    let live = |t: f64| {
        attached(0, t)
            .processes
            .iter()
            .find(|p| p.pid == 52010)
            .and_then(|p| p.feed.as_ref().map(|f| f.stats.allocated))
            .unwrap_or(0)
    };
    assert!(live(300.0) < live(600.0) && live(600.0) < live(1100.0));
    // The trainer plateaus: reserved is the same late in the story.
    let reserved = |t: f64| {
        attached(0, t).processes[0]
            .feed
            .as_ref()
            .map(|f| f.stats.reserved)
    };
    assert_eq!(reserved(400.0), reserved(1100.0));
}

#[test]
fn a_stalled_agent_goes_stale() {
    let mut s = node_at(0, 720.0, 10.0);
    let statuses = attach(&mut s).statuses;
    let i = s
        .processes
        .iter()
        .position(|p| p.pid == 52077)
        .expect("async server");
    assert!(matches!(
        statuses[i],
        crate::accounting::FeedStatus::Stale { .. }
    ));
}

#[test]
fn the_trainers_context_is_observed_and_the_others_estimated() {
    let mut pipeline = crate::pipeline::Pipeline::new(None);
    for n in 0..=60 {
        pipeline.ingest(node_at(0, 5.0 + 10.0 * f64::from(n), 10.0));
    }
    let observed = pipeline.ingest(node_at(0, 615.0, 10.0));
    let source = |pid: u32| {
        let i = observed
            .sample
            .processes
            .iter()
            .position(|p| p.pid == pid)
            .expect("process");
        (
            observed.account.processes[i].context_source,
            observed.account.processes[i].layers.context,
        )
    };
    use crate::context::ContextSource;
    assert_eq!(
        source(41230),
        (Some(ContextSource::Observed), Some(story::CONTEXT_H100))
    );
    // The JAX server's pool never moves, and its library memory arrives 12 s in: paired
    // readings before then give its context exactly, but it is still an estimate.
    assert_eq!(
        source(60500),
        (Some(ContextSource::Estimated), Some(story::CONTEXT_A100))
    );
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

/// The story's leak, fragmentation, retries and out-of-memory errors are each flagged, with
/// the right cause or class, by the time a user watching would expect.
#[test]
fn the_story_is_diagnosed_when_a_user_would_expect() {
    use crate::detect::FindingKind;
    let mut pipeline = crate::pipeline::Pipeline::new(None);
    let mut first: Vec<(FindingKind, Option<u32>, String, f64)> = Vec::new();
    let mut t = 0.0;
    while t < LOOP_SECS {
        let observed = pipeline.ingest(node_at(0, t, 10.0));
        for f in &observed.findings {
            let json = f.evidence.to_json();
            let detail = json
                .get("cause")
                .or_else(|| json.get("class"))
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string();
            if !first
                .iter()
                .any(|(k, p, d, _)| *k == f.kind && *p == f.pid && *d == detail)
            {
                first.push((f.kind, f.pid, detail, t));
            }
        }
        t += 10.0;
    }
    let when = |kind: FindingKind, pid: u32, detail: &str| {
        first
            .iter()
            .find(|(k, p, d, _)| *k == kind && *p == Some(pid) && d == detail)
            .map(|x| x.3)
            .unwrap_or_else(|| panic!("{kind:?} {pid} {detail} never flagged: {first:?}"))
    };
    // The eval loop leaks from 70 s (after loading its model): flagged within ten minutes.
    let leak = when(FindingKind::Climb, 52010, "live");
    assert!(leak <= 70.0 + 600.0, "leak flagged at {leak}");
    // The fine-tune's split pieces grow from 60 s to 930 s; its retries from about 400 s.
    let fragmentation = when(FindingKind::Fragmentation, 60112, "");
    assert!((300.0..=700.0).contains(&fragmentation), "{fragmentation}");
    let retries = when(FindingKind::AllocRetries, 60112, "");
    assert!((390.0..=500.0).contains(&retries), "{retries}");
    // Its OOM at 900 s is fragmentation; the eval loop's at 1010 s, against its cap, capacity.
    assert_eq!(when(FindingKind::Oom, 60112, "fragmentation"), 900.0);
    assert_eq!(when(FindingKind::Oom, 52010, "capacity"), 1010.0);
    // No climb on the trainers' warm-up, saw-tooth and plateau, nor on the JAX server.
    for pid in [41230, 41231, 60500, 52077] {
        assert!(
            !first
                .iter()
                .any(|(k, p, _, _)| *k == FindingKind::Climb && *p == Some(pid)),
            "a false climb on {pid}: {first:?}"
        );
    }
}

//! Every kind has advice, and the advice follows the evidence: the allocator's settings, a
//! request's size, a climb's cause, who holds a device file.

use super::advice;
use crate::detect::evidence::examples::examples;
use crate::detect::evidence::units::*;
use crate::detect::evidence::*;
use crate::detect::{Evidence, FindingKind};
use crate::layers::Layer;

const GIB: u64 = 1 << 30;

/// Every kind the code can raise (`FindingKind::ALL`, which a new kind joins or does not
/// compile).
fn kinds() -> Vec<FindingKind> {
    FindingKind::ALL.to_vec()
}

/// One or two sentences, each a sentence: begun with a capital (or a command in backticks),
/// ended with a full stop, on one line.
fn well_formed(said: &[String], what: &str) {
    assert!(
        (1..=2).contains(&said.len()),
        "{what}: {} sentences: {said:?}",
        said.len()
    );
    for s in said {
        let first = s.chars().next().unwrap_or(' ');
        assert!(
            first.is_uppercase() || first == '`' || s.starts_with("strata"),
            "{what}: {s:?}"
        );
        assert!(s.ends_with('.'), "{what}: {s:?}");
        assert!(!s.contains('\n'), "{what}: {s:?}");
    }
}

#[test]
fn every_shape_of_every_kind_has_advice() {
    for e in examples() {
        let kind = e.kind().expect("typed");
        well_formed(&advice(kind, &e), &format!("{e:?}"));
    }
}

/// A finding read back from another strata, its evidence in no shape this one knows, still
/// says what to do: its kind's advice, without figures.
#[test]
fn every_kind_has_advice_without_typed_evidence() {
    for kind in kinds() {
        let said = advice(kind, &Evidence::Untyped(serde_json::json!({"renamed": 1})));
        well_formed(&said, &kind.name());
        assert!(
            !said.iter().any(|s| s.contains("GiB") || s.contains("MiB")),
            "{kind:?} names an amount it was not given: {said:?}"
        );
    }
}

fn example<T>(pick: impl Fn(&Evidence) -> Option<T>) -> T {
    examples()
        .iter()
        .find_map(pick)
        .expect("an example of that shape")
}

fn fragmentation(expandable: Option<bool>, framework: Option<&str>) -> Vec<String> {
    let mut e = example(|e| match e {
        Evidence::Fragmentation(f) => Some(f.clone()),
        _ => None,
    });
    e.expandable_segments = IfKnown(expandable);
    e.framework = IfKnown(framework.map(str::to_string));
    e.pinned_segments = IfKnown(None);
    advice(FindingKind::Fragmentation, &Evidence::Fragmentation(e))
}

#[test]
fn fragmentation_advice_follows_the_allocators_settings() {
    let off = fragmentation(Some(false), Some("torch"));
    assert!(
        off[0]
            .starts_with("Restart the job with `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`"),
        "{off:?}"
    );
    assert!(off[1].contains("max_split_size_mb"), "{off:?}");
    assert!(off[1].contains("largest shape first"), "{off:?}");
    // Pinned segments in the agent's map: long-lived tensors first, before the last resort.
    let mut e = example(|e| match e {
        Evidence::Fragmentation(f) => Some(f.clone()),
        _ => None,
    });
    e.expandable_segments = IfKnown(Some(false));
    let pinned = advice(FindingKind::Fragmentation, &Evidence::Fragmentation(e));
    assert!(
        pinned[1].contains("allocate long-lived tensors before the short-lived ones (2 segments (4.00 GiB) are kept by 63.0 MiB of them"),
        "{pinned:?}"
    );

    let on = fragmentation(Some(true), Some("torch"));
    assert!(
        on[0].contains("already runs with `expandable_segments:True`"),
        "{on:?}"
    );
    assert!(
        !on.join(" ").contains("PYTORCH_CUDA_ALLOC_CONF"),
        "not offered again: {on:?}"
    );
    assert!(
        on[1].contains("`inactive_split` does not measure fragmentation"),
        "{on:?}"
    );

    // Not said by the agent: offered on a condition, never as if known to be off.
    let unknown = fragmentation(None, Some("torch"));
    assert!(
        unknown[0].starts_with("If the job does not run with it yet"),
        "{unknown:?}"
    );

    // Another framework's allocator: no PyTorch setting.
    let jax = fragmentation(Some(false), Some("jax"));
    assert!(!jax.join(" ").contains("PYTORCH"), "{jax:?}");
    assert!(jax[0].contains("bucket variable-length batches"), "{jax:?}");
}

fn oom(class: &str) -> Oom {
    let mut e = example(|e| match e {
        Evidence::Oom(o) => Some(o.clone()),
        _ => None,
    });
    e.class = class.into();
    e
}

#[test]
fn an_oom_of_fragmentation_says_the_memory_was_there_and_follows_the_settings() {
    let mut e = oom("fragmentation");
    e.expandable_segments = IfKnown(Some(false));
    let off = advice(FindingKind::Oom, &Evidence::Oom(e.clone()));
    assert!(off[0].contains("expandable_segments:True"), "{off:?}");
    assert!(
        off[0].contains(": the 62.0 GiB it needed fit in the 78.0 GiB the device could give"),
        "{off:?}"
    );
    assert!(
        off[1].contains("`max_split_size_mb` is the last resort"),
        "{off:?}"
    );
    e.expandable_segments = IfKnown(Some(true));
    let on = advice(FindingKind::Oom, &Evidence::Oom(e.clone()));
    assert!(
        on[0].starts_with("The job already runs with `expandable_segments:True`"),
        "{on:?}"
    );
    assert!(on[1].starts_with("The 62.0 GiB it needed fit"), "{on:?}");
    assert!(on[1].contains("does not measure fragmentation"), "{on:?}");
    // The segments the agent's map says a few live bytes pin: the remedy before the last
    // resort. Without a map, the shapes.
    e.expandable_segments = IfKnown(Some(false));
    let pinned = advice(FindingKind::Oom, &Evidence::Oom(e.clone()));
    assert!(
        pinned[1].starts_with("Failing that, allocate long-lived tensors before the short-lived ones (12 segments (24.0 GiB) are kept by 63.0 MiB of them: `w` shows which lines hold them)"),
        "{pinned:?}"
    );
    e.pinned_segments = IfKnown(None);
    let unpinned = advice(FindingKind::Oom, &Evidence::Oom(e));
    assert!(
        unpinned[1].starts_with("Failing that, bucket variable-length batches"),
        "{unpinned:?}"
    );
}

#[test]
fn an_oom_of_capacity_says_how_much_is_missing_only_where_known() {
    let mut e = oom("capacity");
    e.needed_bytes = Some(Bytes(82 * GIB));
    e.could_have_bytes = Some(Bytes(78 * GIB));
    let known = advice(FindingKind::Oom, &Evidence::Oom(e.clone()));
    assert!(
        known[0].starts_with("Lower the peak by at least 4.00 GiB:"),
        "{known:?}"
    );
    assert!(known[0].contains("gradient accumulation"), "{known:?}");
    assert!(known[1].contains("the 2.50 GiB request"), "{known:?}");
    assert!(
        !known.join(" ").contains("expandable"),
        "no allocator setting: {known:?}"
    );
    // The device's free memory not reported, its total exceeded: short of the total.
    e.could_have_bytes = None;
    let of_total = advice(FindingKind::Oom, &Evidence::Oom(e.clone()));
    assert!(of_total[0].contains("by at least 2.00 GiB"), "{of_total:?}");
    assert!(
        of_total[1].contains("the device holds in all"),
        "{of_total:?}"
    );
    // Nothing to reckon with: no amount.
    e.needed_bytes = None;
    e.requested = None;
    let unknown = advice(FindingKind::Oom, &Evidence::Oom(e));
    assert!(unknown[0].starts_with("Lower the peak: "), "{unknown:?}");
    assert!(!unknown.join(" ").contains("GiB"), "{unknown:?}");
}

#[test]
fn an_uncertain_oom_gives_each_remedy_on_its_condition_and_says_what_was_missing() {
    let mut e = oom("uncertain");
    e.expandable_segments = IfKnown(None);
    e.requested = None;
    e.needed_bytes = None;
    let no_size = advice(FindingKind::Oom, &Evidence::Oom(e.clone()));
    assert!(
        no_size[0].starts_with("If live tensors (60.0 GiB) are near"),
        "{no_size:?}"
    );
    assert!(
        no_size[0].contains("if not, try `PYTORCH_CUDA_ALLOC_CONF"),
        "{no_size:?}"
    );
    assert!(
        no_size[1].starts_with("The request's size is not known"),
        "{no_size:?}"
    );
    e.requested = Some(Bytes(2 * GIB));
    e.needed_bytes = Some(Bytes(62 * GIB));
    e.device_free = None;
    let sized = advice(FindingKind::Oom, &Evidence::Oom(e.clone()));
    assert!(
        sized[0].contains("the request (62.0 GiB in all)"),
        "{sized:?}"
    );
    assert!(
        sized[1].contains("free memory at the OOM was not reported"),
        "{sized:?}"
    );
    e.reserved = None;
    let no_pool = advice(FindingKind::Oom, &Evidence::Oom(e));
    assert!(no_pool[1].contains("reports no pool"), "{no_pool:?}");
}

fn climb(cause: &str, per_step: Option<i64>) -> Vec<String> {
    let mut e = example(|e| match e {
        Evidence::Climb(c) => Some(c.clone()),
        _ => None,
    });
    e.cause = cause.into();
    e.bytes_per_step = IfKnown(per_step.map(BytesPerStep));
    advice(FindingKind::Climb, &Evidence::Climb(e))
}

#[test]
fn a_climbs_advice_follows_its_cause_and_its_pace_per_step() {
    let live = climb(Layer::Live.name(), Some(12 << 20));
    assert!(live[0].contains("about 12.0 MiB a step"), "{live:?}");
    assert!(live[0].contains("`.item()`"), "{live:?}");
    let live_in_time = climb(Layer::Live.name(), None);
    assert!(!live_in_time[0].contains("a step"), "{live_in_time:?}");
    assert!(
        live_in_time[0].contains("tensors kept across steps"),
        "{live_in_time:?}"
    );
    let cache = climb(Layer::Cached.short(), None);
    assert!(cache[0].contains("shapes"), "{cache:?}");
    assert!(!cache.join(" ").contains(".item()"), "{cache:?}");
    let outside = climb(Layer::OutsidePool.name(), None);
    assert!(outside[0].contains("NCCL"), "{outside:?}");
    assert!(outside[0].contains("CUDA graphs"), "{outside:?}");
    let unfed = climb(Layer::Unattributed.name(), None);
    assert!(unfed[0].contains("strata run"), "{unfed:?}");
    let nobody = climb("no_process", None);
    assert!(nobody[0].contains("NVML does not list"), "{nobody:?}");
    let all = [live, cache, outside, unfed, nobody];
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_ne!(a[0], b[0], "each cause its own advice");
        }
    }
}

#[test]
fn a_forecast_says_when_and_what_its_climb_calls_for() {
    let mut e = example(|e| match e {
        Evidence::OomForecast(f) => Some(f.clone()),
        _ => None,
    });
    e.bytes_per_step = Some(BytesPerStep(8 << 20));
    let said = advice(FindingKind::OomForecast, &Evidence::OomForecast(e.clone()));
    assert!(said[0].contains("within ~21m00s (~800 steps)"), "{said:?}");
    assert!(said[1].contains("about 8.00 MiB a step"), "{said:?}");
    e.cause = Layer::OutsidePool.name().into();
    e.eta_step = None;
    let outside = advice(FindingKind::OomForecast, &Evidence::OomForecast(e));
    assert!(outside[0].contains("within ~21m00s:"), "{outside:?}");
    assert!(outside[1].contains("NCCL"), "{outside:?}");
}

fn holding(holders: Option<Vec<Holder>>) -> Vec<String> {
    let mut e = example(|e| match e {
        Evidence::ZombieContext(h) if !h.holders.is_none() => Some(h.clone()),
        _ => None,
    });
    e.holders = IfKnown(holders);
    advice(FindingKind::ZombieContext, &Evidence::ZombieContext(e))
}

#[test]
fn a_zombies_advice_names_who_to_signal_where_the_files_were_searched() {
    let all = example(|e| match e {
        Evidence::ZombieContext(h) => h.holders.0.clone(),
        _ => None,
    });
    let suspect: Vec<Holder> = all.iter().filter(|h| !h.listed).cloned().collect();
    let one = holding(Some(all.clone()));
    assert!(
        one[0].starts_with(
            "Select this finding and press K to signal PID 31342 (python pretrain.py)"
        ),
        "{one:?}"
    );
    assert!(one[0].contains("/dev/nvidia2"), "{one:?}");
    let mut two = suspect.clone();
    two.push(Holder {
        pid: Pid(31343),
        ..suspect[0].clone()
    });
    let many = holding(Some(two));
    assert!(many[0].contains("the 2 processes"), "{many:?}");
    assert!(many[0].contains("PIDs 31342, 31343"), "{many:?}");
    let listed: Vec<Holder> = all.iter().filter(|h| h.listed).cloned().collect();
    let own = holding(Some(listed));
    assert!(own[1].contains("context of its own"), "{own:?}");
    let nobody = holding(Some(Vec::new()));
    assert!(nobody[0].starts_with("Run strata as root"), "{nobody:?}");
    assert!(nobody[1].contains("--gpu-reset"), "{nobody:?}");
    let unsearched = holding(None);
    assert!(
        unsearched[0].contains("fuser -v /dev/nvidia*"),
        "{unsearched:?}"
    );
    assert!(
        !unsearched.join(" ").contains("PID 31342"),
        "{unsearched:?}"
    );
}

#[test]
fn a_warm_ups_advice_follows_its_verdict() {
    let verdicts: Vec<Vec<String>> = examples()
        .iter()
        .filter(|e| matches!(e, Evidence::WarmUp(_)))
        .map(|e| advice(FindingKind::WarmUp, e))
        .collect();
    assert!(
        verdicts[0][0].starts_with("Lower the peak by at least 512 MiB"),
        "{verdicts:?}"
    );
    assert!(
        verdicts[1][0].starts_with("Nothing to do: it fits, with 1.00 GiB"),
        "{verdicts:?}"
    );
}

#[test]
fn bad_input_is_answered_by_what_went_wrong() {
    let only = |unknown_version: u64, rate_limited: u64, malformed: u64| {
        let e = BadInput {
            floods: Count(0),
            invalid: Count(0),
            lines: Count(10),
            malformed: Count(malformed),
            oversized: Count(0),
            rate_limited: Count(rate_limited),
            samples: Count(10),
            unknown_type: Count(0),
            unknown_version: Count(unknown_version),
        };
        advice(FindingKind::FeedBadInput, &Evidence::FeedBadInput(e))
    };
    assert!(only(3, 0, 0)[0].contains("protocol version"));
    assert!(only(0, 3, 0)[0].contains("--feed-interval"));
    assert!(only(0, 0, 3)[0].contains("cannot read"));
    assert_eq!(only(1, 1, 1).len(), 2, "two sentences at most");
}

/// The settings the agent reports in its `hello` reach the advice, through the pipeline: an
/// OOM of fragmentation in a job that already runs with expandable segments is not told to
/// turn them on.
#[test]
fn the_jobs_own_allocator_settings_reach_an_ooms_advice() {
    use crate::detect::tests_defects::{fed_node, pool};
    use crate::pipeline::Pipeline;
    use crate::sample::feed::{Hello, OomReport};
    let advised = |expandable: Option<bool>| {
        let mut pipeline = Pipeline::new(None);
        let mut last = Vec::new();
        for i in 0..4u32 {
            let t = 1000.0 + 5.0 * f64::from(i);
            let mut stats = pool(22 * GIB, 36 * GIB, 6 * GIB);
            stats.ooms = Some(u64::from(i >= 2));
            let mut s = fed_node(t, 45 * GIB + (512 << 20), GIB, stats.clone());
            s.interval = 5.0;
            if let Some(on) = expandable {
                let mut hello: Hello = (**s.feeds[0].hello.as_ref().expect("hello")).clone();
                hello
                    .settings
                    .insert("expandable_segments".into(), serde_json::Value::Bool(on));
                s.feeds[0].hello = Some(hello.into());
            }
            if i == 2 {
                s.feeds[0].ooms.push(OomReport {
                    time: t - 1.0,
                    seq: 7,
                    index: 0,
                    requested: Some(12 * GIB),
                    device_free: Some(6 * GIB),
                    device_total: Some(45 * GIB),
                    stats: Some(stats),
                });
            }
            last = pipeline.ingest(s).findings;
        }
        let oom = last
            .iter()
            .find(|f| f.kind == FindingKind::Oom)
            .expect("the OOM is shown");
        assert_eq!(oom.evidence.to_json()["class"], "fragmentation");
        let json = serde_json::to_value(oom).expect("json");
        assert_eq!(json["advice"], serde_json::json!(oom.advice()));
        oom.advice()
    };
    let on = advised(Some(true));
    assert!(on[0].contains("already runs with"), "{on:?}");
    let off = advised(Some(false));
    assert!(off[0].starts_with("Restart the job with"), "{off:?}");
    let unsaid = advised(None);
    assert!(
        unsaid[0].starts_with("If the job does not run with it yet"),
        "{unsaid:?}"
    );
}

/// Advice is written, never read: a finding of an older file (no `advice`) reads back, and
/// one whose file holds other advice (an older strata's) gets this strata's.
#[test]
fn advice_is_written_with_a_finding_and_worked_out_again_when_read() {
    use crate::detect::{Finding, Severity};
    let finding = Finding {
        kind: FindingKind::Fragmentation,
        severity: Severity::Warning,
        device_uuid: Some("GPU-a".into()),
        pid: Some(4021),
        since: 1_767_258_905.0,
        message: "fragmentation".into(),
        evidence: example(|e| matches!(e, Evidence::Fragmentation(_)).then(|| e.clone())),
    };
    let mut json = serde_json::to_value(&finding).expect("written");
    assert_eq!(json["advice"], serde_json::json!(finding.advice()));
    json["advice"] = serde_json::json!(["an older strata's advice."]);
    let back: Finding = serde_json::from_value(json.clone()).expect("read");
    assert_eq!(back, finding);
    assert_eq!(back.advice(), finding.advice());
    json.as_object_mut().expect("object").remove("advice");
    let older: Finding = serde_json::from_value(json).expect("read without advice");
    assert_eq!(older.advice(), finding.advice());
}

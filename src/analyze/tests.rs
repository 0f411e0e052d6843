//! analyze over small recordings of the demo: episodes, bad and cut lines, samples out
//! of order, and who leaves between two samples.

use super::*;
use crate::source::demo::node_at;

fn recording(lines: &[String]) -> Analysis {
    let text = lines.join("\n");
    let lines = Lines::new(
        Box::new(std::io::Cursor::new(text.into_bytes())),
        crate::recording::Progress::default(),
    )
    .expect("lines");
    analyze(lines, None)
}

fn demo_lines(from: f64, to: f64) -> Vec<String> {
    let mut lines = Vec::new();
    let mut t = from;
    while t < to {
        lines.push(serde_json::to_string(&node_at(0, t, 10.0)).expect("json"));
        t += 10.0;
    }
    lines
}

#[test]
fn a_recording_of_the_demo_shows_its_story_as_episodes() {
    let a = recording(&demo_lines(0.0, 1190.0));
    assert_eq!(a.samples, 119);
    let leak = a
        .findings
        .iter()
        .find(|e| e.kind == FindingKind::Climb && e.pid == Some(52010))
        .expect("the leak");
    assert!(leak.since < leak.until);
    assert!(a
        .findings
        .iter()
        .any(|e| e.kind == FindingKind::Oom && e.evidence.to_json()["class"] == "fragmentation"));
    let text = timeline(&a);
    assert!(text.contains("climb") && text.contains("oom"), "{text}");
}

#[test]
fn bad_lines_are_counted_and_a_cut_last_line_is_fine() {
    let mut lines = demo_lines(0.0, 100.0);
    lines.insert(3, "{not json".into());
    lines.insert(5, "[1,2]".into());
    let good = lines.last().cloned().unwrap_or_default();
    lines.push(good[..good.len() / 2].to_string());
    let a = recording(&lines);
    assert_eq!(a.samples, 10);
    assert_eq!(
        a.bad_lines.iter().map(|b| b.line).collect::<Vec<_>>(),
        vec![4, 6]
    );
    assert!(a.truncated);
}

#[test]
fn someone_leaves_when_a_process_or_its_feed_is_gone_in_any_order() {
    let before = node_at(0, 600.0, 10.0);
    assert!(before.processes.len() >= 3);
    let mut after = before.clone();
    assert!(!someone_leaves(&before, &after));
    after.processes.reverse(); // the same processes, listed otherwise
    assert!(!someone_leaves(&before, &after));
    let mut newcomer = before.processes[0].clone();
    newcomer.pid += 100_000;
    let mut grown = before.clone();
    grown.processes.push(newcomer.clone()); // one more, none gone
    assert!(!someone_leaves(&before, &grown));
    let mut more = grown.clone();
    more.processes[0].pid += 200_000; // one more, and one of the first gone
    assert!(someone_leaves(&before, &more));
    let mut fewer = before.clone();
    fewer.processes.pop();
    assert!(someone_leaves(&before, &fewer));
    if let Some(i) = before.processes.iter().position(|p| p.feed.is_some()) {
        let mut unfed = before.clone();
        unfed.processes[i].feed = None; // its feed gone, the process still there
        assert!(someone_leaves(&before, &unfed));
    }
}

#[test]
fn repeated_and_out_of_order_samples_are_skipped_without_a_false_finding() {
    let mut lines = demo_lines(0.0, 300.0);
    let copy = lines[10].clone();
    lines.insert(12, copy.clone());
    lines.insert(20, copy);
    let a = recording(&lines);
    assert_eq!(a.out_of_order, 2);
    let clean = recording(&demo_lines(0.0, 300.0));
    let kinds = |a: &Analysis| {
        a.findings
            .iter()
            .map(|e| (e.kind, e.pid))
            .collect::<Vec<_>>()
    };
    assert_eq!(kinds(&a), kinds(&clean));
}

/// The layers of every sample judged, worked out on the reading thread with its own context
/// estimates, are those a pipeline works out taking the samples in one by one; samples out
/// of order (here earlier ones, their NVML readings lowered) are learned from by neither.
#[test]
fn the_layers_worked_out_while_reading_are_the_pipelines() {
    let clean: Vec<crate::sample::NodeSample> = (0..60)
        .map(|i| node_at(0, f64::from(i) * 10.0, 10.0))
        .collect();
    let mut lines: Vec<String> = clean
        .iter()
        .map(|s| serde_json::to_string(s).expect("json"))
        .collect();
    for at in [7usize, 23, 41] {
        // Read as if the process held little beyond its pool: learned from, it would
        // shrink the context estimate.
        let mut late = clean[at - 3].clone();
        let reserved: Vec<(u32, Option<u64>)> = late
            .feeds
            .iter()
            .filter_map(|f| Some((f.pid()?, f.devices.first()?.latest.reserved)))
            .collect();
        for p in &mut late.processes {
            if let Some((_, Some(r))) = reserved.iter().find(|(pid, _)| *pid == p.pid) {
                p.used = Some(r + (1 << 20));
            }
        }
        lines.insert(at, serde_json::to_string(&late).expect("json"));
    }
    let text = lines.join("\n");
    let read = Lines::new(
        Box::new(std::io::Cursor::new(text.into_bytes())),
        crate::recording::Progress::default(),
    )
    .expect("lines");
    let mut accounts = Vec::new();
    let a = analyze_observing(read, None, Clock::EverySample, |o| {
        accounts.push(o.account.clone());
        ControlFlow::Continue(())
    });
    assert_eq!(a.out_of_order, 3);
    let mut pipeline = Pipeline::new(None);
    let expected: Vec<_> = clean
        .into_iter()
        .map(|s| pipeline.ingest(s).account)
        .collect();
    assert_eq!(accounts.len(), expected.len());
    let learned = |accounts: &[crate::accounting::NodeAccount]| {
        accounts
            .iter()
            .flat_map(|a| &a.processes)
            .filter(|p| p.context_source.is_some())
            .count()
    };
    assert!(learned(&expected) > 0, "the demo's contexts are learned");
    for (i, (got, want)) in accounts.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "sample {i}");
    }
}

/// Each episode says what to do, from its evidence when last seen: under its line in the
/// timeline, and as `advice` after its `message` in the JSON.
#[test]
fn every_episode_carries_its_advice_in_the_timeline_and_the_json() {
    let a = recording(&demo_lines(0.0, 1190.0));
    assert!(!a.findings.is_empty());
    let text = timeline(&a);
    let json = serde_json::to_value(&a).expect("json");
    for (e, written) in a
        .findings
        .iter()
        .zip(json["findings"].as_array().expect("list"))
    {
        let advice = e.advice();
        assert!(!advice.is_empty(), "{:?} has no advice", e.kind);
        assert_eq!(written["advice"], serde_json::json!(advice));
        for sentence in &advice {
            assert!(
                text.contains(&format!("→ {sentence}")),
                "{sentence} in\n{text}"
            );
        }
    }
    // Written after the message, before the evidence.
    let written = serde_json::to_string(&a.findings[0]).expect("json");
    let at = |key: &str| written.find(&format!("\"{key}\":"));
    assert!(
        at("message") < at("advice") && at("advice") < at("evidence"),
        "{written}"
    );
    // The OOM of fragmentation offers the allocator setting the demo's job does not say it has.
    let oom = a
        .findings
        .iter()
        .find(|e| e.kind == FindingKind::Oom)
        .expect("the OOM");
    assert!(
        oom.advice()[0].contains("expandable_segments:True"),
        "{:?}",
        oom.advice()
    );
}

//! The pause queue: bytes, not samples; strings once; coarser past the budget, never made
//! up; applied on resume a slice at a time.

use super::*;
use crate::app::{Action, State};
use crate::fixtures::process;
use crate::pipeline::Pipeline;
use crate::sample::feed::OomReport;
use crate::source::demo::node_at;
use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

const STEP: f64 = 0.05;

/// A node of `count` processes at `i` steps of 0.05 s, each with a long command line, as a
/// node of data-parallel jobs has; `used` changes with every sample.
fn busy_node(i: u64, count: u32) -> NodeSample {
    let mut sample = node_at(0, 600.0, STEP);
    sample.time += i as f64 * STEP;
    sample.feeds.clear();
    let uuid = sample.gpus[0].uuid.clone();
    sample.processes = (0..count)
        .map(|n| {
            let mut p = process(100_000 + n, &uuid, Some((u64::from(n) << 20) + i));
            p.command = Some(format!(
                "/usr/bin/python3.11 -m torch.distributed.run --rank {n} train.py {}",
                "--config configs/llama-70b.yaml ".repeat(6)
            ));
            p
        })
        .collect();
    sample
}

/// Bytes of every string of the sample's processes, as many times as they occur.
fn string_bytes_of(sample: &NodeSample) -> u64 {
    sample
        .processes
        .iter()
        .map(|p| {
            let texts = [
                p.proc_state.as_deref(),
                p.user.as_deref(),
                p.command.as_deref(),
                p.executable.as_deref(),
            ];
            p.device_uuid.len() + texts.iter().flatten().map(|t| t.len()).sum::<usize>()
        })
        .sum::<usize>() as u64
}

#[test]
fn identity_strings_are_held_once_for_the_whole_queue() {
    let t0 = Instant::now();
    let mut queue = PauseQueue::default();
    queue.push(busy_node(0, 1000), t0);
    let first = queue.bytes();
    let strings = string_bytes_of(&busy_node(0, 1000));
    assert!(
        first >= strings,
        "the first sample brings its strings: {first} < {strings}"
    );
    for i in 1..100 {
        queue.push(busy_node(i, 1000), t0);
    }
    let per_sample = (queue.bytes() - first) / 99;
    // Each further sample adds its numbers, not its command lines again: a process's raw
    // numbers (with host CPU, host memory and elapsed time) fit in 176 bytes, and the rest of the node (4 GPUs) in 8 KiB.
    assert!(
        per_sample <= 1000 * 176 + 8192,
        "{per_sample} bytes a sample for 1000 processes"
    );
    assert!(per_sample < strings / 2, "{per_sample} vs {strings}");
    // One entry in the table per distinct string, counted here from the samples.
    let distinct: HashSet<String> = (0..100)
        .flat_map(|i| busy_node(i, 1000).processes)
        .flat_map(|p| {
            [
                p.proc_state.as_deref().map(str::to_string),
                p.user,
                p.command,
                p.executable.as_deref().map(str::to_string),
                Some(p.device_uuid.to_string()),
            ]
            .into_iter()
            .flatten()
        })
        .collect();
    assert_eq!(queue.strings.index.len(), distinct.len());
}

/// A long pause of a large node, 1000 processes at 0.05 s (which a queue of 3600 samples held
/// as 2.3 GB). Whatever the length of the pause, the queue stays within its budget; the
/// samples kept stay spread over the whole pause (the first, the newest, and none further
/// apart than the stride); every sample is either kept or counted as dropped; and each one
/// kept comes back exactly as it came.
#[test]
fn past_its_budget_the_queue_grows_coarser_evenly_and_keeps_what_it_keeps_exact() {
    let budget = 4 << 20;
    let mut queue = PauseQueue::with_budget(budget);
    let t0 = Instant::now();
    let pushed = 3000;
    for i in 0..pushed {
        queue.push(busy_node(i, 200), t0);
        assert!(
            queue.bytes() <= budget,
            "{} bytes after {} samples",
            queue.bytes(),
            i + 1
        );
    }
    assert!(queue.dropped() > 0);
    assert_eq!(queue.len() as u64 + queue.dropped(), pushed);
    assert!(queue.stride() > 1);
    let times = queue.times();
    let at = |i: u64| busy_node(i, 200).time;
    assert_eq!(times.first().copied(), Some(at(0)), "the first is kept");
    assert_eq!(times.last().copied(), Some(at(pushed - 1)), "the newest");
    let widest = STEP * queue.stride() as f64 + 1e-6;
    for pair in times.windows(2) {
        assert!(pair[1] > pair[0], "in order: {pair:?}");
        assert!(pair[1] - pair[0] <= widest, "a hole wider than the stride");
    }
    let mut count = 0;
    while let Some((sample, _)) = queue.pop_front() {
        let i = ((sample.time - at(0)) / STEP).round() as u64;
        assert_eq!(sample, busy_node(i, 200), "sample {i} came back changed");
        count += 1;
    }
    assert_eq!(count, times.len());
    assert_eq!(queue.bytes(), 0, "an empty queue holds nothing");
}

/// The feeds' statistics are read at the agent's own instants: those a dropped sample
/// carried reach the history through the next sample kept, and OOM reports too.
#[test]
fn what_the_feeds_sent_in_a_dropped_sample_is_carried_into_the_next_kept() {
    let sample = |i: u64| {
        let mut s = node_at(0, 600.0, 1.0);
        s.time += i as f64;
        for (f, record) in s.feeds.iter_mut().enumerate() {
            for device in &mut record.devices {
                device.latest.time = s.time - 0.4;
                device.latest.allocated = i * 1000 + f as u64;
            }
            // An OOM every 7 samples, repeated as the latest until the next.
            let seq = i / 7;
            record.ooms = vec![OomReport {
                time: crate::source::demo::DEMO_EPOCH + seq as f64,
                seq,
                ..OomReport::default()
            }];
        }
        s
    };
    let seen = |s: &NodeSample, stats: &mut BTreeSet<(String, u64, u64)>| {
        for record in &s.feeds {
            for device in &record.devices {
                for st in device.earlier.iter().chain([&device.latest]) {
                    stats.insert((record.socket.clone(), st.time.to_bits(), st.allocated));
                }
            }
        }
    };
    let ooms = |s: &NodeSample, all: &mut BTreeSet<(String, u64)>| {
        for record in &s.feeds {
            all.extend(record.ooms.iter().map(|o| (record.socket.clone(), o.seq)));
        }
    };
    let one = {
        let mut q = PauseQueue::default();
        q.push(sample(0), Instant::now());
        q.bytes()
    };
    let mut queue = PauseQueue::with_budget(one * 12);
    let (mut sent, mut sent_ooms) = (BTreeSet::new(), BTreeSet::new());
    for i in 0..200 {
        let s = sample(i);
        seen(&s, &mut sent);
        ooms(&s, &mut sent_ooms);
        queue.push(s, Instant::now());
    }
    assert!(queue.dropped() > 100, "dropped {}", queue.dropped());
    let (mut got, mut got_ooms) = (BTreeSet::new(), BTreeSet::new());
    while let Some((s, _)) = queue.pop_front() {
        seen(&s, &mut got);
        ooms(&s, &mut got_ooms);
        for record in &s.feeds {
            for device in &record.devices {
                let times: Vec<f64> = device.earlier.iter().map(|e| e.time).collect();
                assert!(times.windows(2).all(|w| w[0] < w[1]), "oldest first");
                assert!(times.iter().all(|t| *t < device.latest.time));
            }
        }
    }
    assert!(!sent.is_empty());
    assert_eq!(
        got, sent,
        "every statistic the feeds sent reaches the history"
    );
    assert_eq!(got_ooms, sent_ooms, "and every OOM report");
}

fn state() -> State {
    State::new(Pipeline::new(None), "demo".into(), STEP)
}

fn shown_time(s: &State) -> Option<f64> {
    s.current.as_ref().map(|o| o.sample.time)
}

/// Resuming applies nothing by itself: the loop applies a slice between events, so a key
/// pressed while a long queue is applied is answered at once, and pausing again stops the
/// catch-up where it is. Nothing is lost or reordered on the way.
#[test]
fn resuming_applies_the_queue_a_slice_at_a_time_between_keys() {
    let t0 = Instant::now();
    let mut s = state();
    s.on_sample_at(busy_node(0, 20), t0);
    s.apply_action(Action::TogglePause);
    for i in 1..=100 {
        s.on_sample_at(busy_node(i, 20), t0);
    }
    assert_eq!(s.pause.queue.len(), 100);
    s.apply_action(Action::TogglePause);
    assert!(s.catching_up());
    assert_eq!(
        shown_time(&s),
        Some(busy_node(0, 20).time),
        "resume returned"
    );
    assert_eq!(s.catch_up(Duration::ZERO), 1, "one sample a zero slice");
    assert_eq!(shown_time(&s), Some(busy_node(1, 20).time));
    // A key between slices: handled now, with 99 samples still to apply.
    s.apply_action(Action::Down);
    assert!(s.process_table.selection_moved);
    assert_eq!(s.pause.queue.len(), 99);
    // Paused again: the catch-up stops; a sample arriving now queues behind the rest.
    s.apply_action(Action::TogglePause);
    assert!(!s.catching_up());
    assert_eq!(s.catch_up(Duration::from_secs(1)), 0);
    s.on_sample_at(busy_node(101, 20), t0);
    assert_eq!(s.pause.queue.len(), 100);
    s.apply_action(Action::TogglePause);
    // Caught up while samples keep arriving: they too wait their turn.
    s.catch_up(Duration::ZERO);
    s.on_sample_at(busy_node(102, 20), t0);
    let mut slices = 1;
    while s.catching_up() {
        s.catch_up(Duration::ZERO);
        slices += 1;
    }
    assert_eq!(slices, 101);
    assert_eq!(shown_time(&s), Some(busy_node(102, 20).time));
    let uuid = s.current.as_ref().map(|o| o.sample.gpus[0].uuid.clone());
    let series = s
        .pipeline
        .history
        .get(&crate::history::SeriesKey::device(
            &uuid.unwrap_or_default(),
            crate::history::Metric::Used,
        ))
        .expect("series");
    assert_eq!(series.raw().filter(|(_, v)| v.is_some()).count(), 103);
    // Live again: a sample shows at once.
    s.on_sample_at(busy_node(103, 20), t0);
    assert_eq!(shown_time(&s), Some(busy_node(103, 20).time));
}

/// The header says what the pause holds, and what it dropped; then what is left to apply.
#[test]
fn the_header_says_what_the_pause_keeps_and_drops_and_the_catch_up() {
    let header = |s: &State, width: u16| {
        let backend = ratatui::backend::TestBackend::new(width, 30);
        let mut terminal = ratatui::Terminal::new(backend).expect("test backend");
        terminal.draw(|f| crate::ui::draw(f, s)).expect("draws");
        let buffer = terminal.backend().buffer();
        (0..width)
            .map(|x| buffer[(x, 0)].symbol().to_string())
            .collect::<String>()
    };
    let t0 = Instant::now();
    let mut s = state();
    s.on_sample_at(busy_node(0, 20), t0);
    s.apply_action(Action::TogglePause);
    for i in 1..=3 {
        s.on_sample_at(busy_node(i, 20), t0);
    }
    let line = header(&s, 250);
    assert!(line.contains("‖ paused · 3 queued ("), "{line}");
    assert!(line.contains("of 64.0 MiB)"), "{line}");
    assert!(!line.contains("dropped"), "{line}");
    assert!(header(&s, 60).contains("‖ paused 3 queued"));
    // Past a small budget: how many dropped, one in how many kept.
    s.pause.queue = PauseQueue::with_budget(s.pause.queue.bytes() * 4);
    for i in 4..=40 {
        s.on_sample_at(busy_node(i, 20), t0);
    }
    let (dropped, stride) = (s.pause.queue.dropped(), s.pause.queue.stride());
    assert!(dropped > 0);
    let line = header(&s, 250);
    assert!(
        line.contains(&format!("{dropped} dropped, 1 in {stride} kept")),
        "{line}"
    );
    s.apply_action(Action::TogglePause);
    s.catch_up(Duration::ZERO);
    let left = s.pause.queue.len();
    let line = header(&s, 250);
    assert!(
        line.contains(&format!("⟳ catching up {left} samples, {dropped} dropped")),
        "{line}"
    );
    assert!(header(&s, 60).contains(&format!("⟳ catching up {left}")));
    while s.catching_up() {
        s.catch_up(Duration::from_secs(1));
    }
    assert!(header(&s, 250).contains("● live"));
}

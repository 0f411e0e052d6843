//! Fuzz target: `strata analyze`'s pipeline on arbitrary recordings. The first byte chooses
//! how the rest is read:
//! - as a recording's bytes, as they are;
//! - as the plan of a recording: samples of GPUs (lost or not, NVML refusing, memory figures
//!   that contradict themselves), processes and allocator feeds, times going on, repeating
//!   or going back, written as JSON lines with a line of junk now and then.
//!
//! What must hold for any input: no panic; an analysis whose times are in order (first ≤
//! last); episodes sorted by their start, each ending no later than the last sample, open
//! exactly when raised at the last sample; as many samples judged as were written in order.
//! Shared by the AFL binary (`fuzz/src/bin/analyze.rs`) and the corpus test
//! (`tests/fuzz_corpus.rs`).

use std::io::Cursor;
use strata::analyze::analyze;
use strata::fixtures::{gpu, memory, process, stats, GIB, MIB};
use strata::recording::{Lines, Progress};
use strata::sample::feed::{DeviceFeed, FeedDevice, FeedRecord, FeedState, FoundVia, Hello};
use strata::sample::NodeSample;

pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode.is_multiple_of(2) {
        check(rest.to_vec(), None);
    } else {
        let (text, in_order) = planned(rest);
        check(text, Some(in_order));
    }
}

fn check(bytes: Vec<u8>, in_order: Option<u64>) {
    let Ok(lines) = Lines::with_limits(
        Box::new(Cursor::new(bytes)),
        Progress::default(),
        1 << 20,
        1 << 22,
    ) else {
        return;
    };
    let a = analyze(lines, None);
    if let Some(n) = in_order {
        assert_eq!(
            a.samples, n,
            "samples written in order: {n}, judged {}",
            a.samples
        );
    }
    match (a.first_time, a.last_time) {
        (Some(first), Some(last)) => assert!(first <= last),
        (None, None) => assert_eq!(a.samples, 0),
        other => panic!("first and last time: {other:?}"),
    }
    assert!(
        a.findings.windows(2).all(|w| w[0].since <= w[1].since),
        "episodes out of order"
    );
    for e in &a.findings {
        let last = a.last_time.expect("episodes without a sample");
        assert!(e.until <= last, "an episode past the last sample");
        assert_eq!(e.open, e.until == last, "open is raised at the last sample");
    }
}

/// Reads the plan a byte at a time (zeros past its end).
struct Plan<'a>(&'a [u8]);

impl Plan<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }
}

/// The recording a plan describes, and how many of its samples come in order.
fn planned(bytes: &[u8]) -> (Vec<u8>, u64) {
    let mut plan = Plan(bytes);
    let mut text = Vec::new();
    let mut time = 1_767_258_000.0;
    let mut latest = f64::NEG_INFINITY;
    let mut in_order = 0;
    let count = plan.byte() % 64;
    for _ in 0..count {
        match plan.byte() % 16 {
            0 => time -= 5.0,
            1 => {}
            step => time += f64::from(step),
        }
        if plan.byte().is_multiple_of(32) {
            text.extend_from_slice(b"{\"not\": \"a sample\"}\n");
        }
        let sample = sample(&mut plan, time);
        if time > latest {
            latest = time;
            in_order += 1;
        }
        text.extend(serde_json::to_vec(&sample).unwrap_or_default());
        text.push(b'\n');
    }
    (text, in_order)
}

fn sample(plan: &mut Plan, time: f64) -> NodeSample {
    let mut sample = strata::fixtures::node();
    sample.time = time;
    for g in 0..u32::from(plan.byte() % 3) {
        let total = 80 * GIB;
        let used = u64::from(plan.byte()) * 300 * MIB;
        let mut device = gpu(g, memory(total, used.min(total)));
        match plan.byte() % 16 {
            0 => device.lost = true,
            1 => {
                device
                    .problems
                    .insert("utilization".into(), "Unknown Error".into());
            }
            2 => {
                if let Some(m) = device.memory.as_mut() {
                    m.free = m.total + u64::from(plan.byte());
                }
            }
            _ => {}
        }
        let uuid = device.uuid.clone();
        sample.gpus.push(device);
        for p in 0..u32::from(plan.byte() % 3) {
            let pid = 1000 + g * 10 + p;
            let held = u64::from(plan.byte()) * 100 * MIB;
            sample.processes.push(process(pid, &uuid, Some(held)));
            if plan.byte().is_multiple_of(2) {
                let allocated = u64::from(plan.byte()) * 64 * MIB;
                let reserved = allocated + u64::from(plan.byte()) * 32 * MIB;
                sample.feeds.push(FeedRecord {
                    socket: format!("/tmp/strata-0/{pid}.sock"),
                    found_via: FoundVia::FeedDir,
                    peer: Some(strata::sample::feed::PeerCred {
                        pid,
                        uid: 0,
                        gid: 0,
                    }),
                    nspid: Some(pid),
                    state: FeedState::Connected,
                    hello: Some(
                        Hello {
                            pid,
                            devices: vec![FeedDevice {
                                index: 0,
                                uuid: Some(uuid.clone()),
                                ..FeedDevice::default()
                            }],
                            ..Hello::default()
                        }
                        .into(),
                    ),
                    devices: vec![DeviceFeed {
                        latest: stats(allocated, reserved, time - 30.0, time - 0.2),
                        earlier: Vec::new(),
                    }],
                    ooms: Vec::new(),
                    counters: Default::default(),
                    connected_at: None,
                    last_heard: None,
                    segments: None,
                    sites: None,
                });
            }
        }
    }
    sample
}

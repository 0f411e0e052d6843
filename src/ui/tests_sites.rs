//! `w` and the sites view: what it asks, and what it draws of a window and a segment map.

use super::tests::{demo_state, render, text};
use crate::app::{Action, SitesAsker, State, View};
use crate::fixtures::{segment_map, sites_window};
use crate::sample::pool::{SitesReport, SitesState};
use std::sync::{Arc, Mutex};

/// Says yes, and keeps what it was asked.
#[derive(Debug, Clone, Default)]
struct Recorded(Arc<Mutex<Vec<(u32, u32, u32)>>>);

impl SitesAsker for Recorded {
    fn ask(&self, pid: u32, seconds: u32, top: u32) -> Result<u64, String> {
        self.0.lock().unwrap().push((pid, seconds, top));
        Ok(7)
    }
}

/// The demo with the fragmenting job (PID 60112) selected, its agent answering requests.
fn fragmenting() -> (State, Recorded) {
    let mut state = demo_state(false);
    let asked = Recorded::default();
    state.sites.asker = Box::new(asked.clone());
    state.apply_action(Action::Down);
    state.apply_action(Action::Down);
    let observed = state.current.as_mut().expect("a sample");
    for record in &mut observed.sample.feeds {
        if record.pid() == Some(60112) {
            let mut hello = (**record.hello.as_ref().expect("a hello")).clone();
            hello.requests = vec!["sites".into()];
            record.hello = Some(Arc::new(hello));
        }
    }
    (state, asked)
}

fn record_of(state: &mut State, pid: u32) -> &mut crate::sample::FeedRecord {
    let observed = state.current.as_mut().expect("a sample");
    observed
        .sample
        .feeds
        .iter_mut()
        .find(|r| r.pid() == Some(pid))
        .expect("its feed")
}

#[test]
fn w_asks_the_selected_fed_process_and_opens_its_sites_view() {
    let (mut state, asked) = fragmenting();
    state.apply_action(Action::Sites);
    assert!(
        matches!(state.view, View::Sites { pid: 60112, .. }),
        "{:?}",
        state.view
    );
    assert_eq!(asked.0.lock().unwrap().as_slice(), &[(60112, 60, 20)]);
    let screen = text(&render(&state, 120, 40));
    assert!(
        screen.contains("asked PID 60112's agent for a 60 s window"),
        "{screen}"
    );
    assert!(screen.contains("No window yet"), "{screen}");

    // Esc goes back; w from the reconciliation asks too.
    state.apply_action(Action::Back);
    state.apply_action(Action::Open);
    state.apply_action(Action::Sites);
    assert_eq!(asked.0.lock().unwrap().len(), 2);
}

#[test]
fn a_window_that_runs_is_shown_not_asked_again_until_w_in_its_view() {
    let (mut state, asked) = fragmenting();
    let now = state.current.as_ref().unwrap().sample.time;
    record_of(&mut state, 60112).sites = Some(Arc::new(SitesReport {
        state: SitesState::Running,
        started: Some(now - 20.0),
        window: None,
        devices: Vec::new(),
        ..sites_window(now - 20.0, "train.py:118 in evaluate", 610 << 20)
    }));
    state.apply_action(Action::Sites);
    assert!(
        asked.0.lock().unwrap().is_empty(),
        "a running window is not asked again"
    );
    let screen = text(&render(&state, 120, 40));
    assert!(screen.contains("the summary comes in 40s"), "{screen}");
    state.apply_action(Action::Sites);
    assert_eq!(
        asked.0.lock().unwrap().len(),
        1,
        "w in the view asks for another"
    );
}

#[test]
fn the_sites_view_draws_the_summary_and_the_segment_map_clean_at_every_size() {
    let (mut state, _) = fragmenting();
    let now = state.current.as_ref().unwrap().sample.time;
    let record = record_of(&mut state, 60112);
    record.sites = Some(Arc::new(sites_window(
        now - 5.0,
        "train.py:118 in evaluate\u{1b}]0;owned\u{7}",
        610 << 20,
    )));
    record.segments = Some(Arc::new(segment_map(now - 30.0)));
    state.apply_action(Action::Sites);
    let wide = text(&render(&state, 160, 48));
    for wanted in [
        "grew: 610 MiB allocated in the window and live at its end",
        "610 MiB      600      539  train.py:118 in evaluate",
        "90.0 MiB of them with no frames (allocated before recording began)",
        "device 0: 24.0 GiB reserved in 12 segments, largest free block 600 MiB",
        "pinned, large: 12 segments (24.0 GiB) pinned by 63.0 MiB live",
        "segments drawn: 1 of 12",
        "GIL held 3ms at most",
    ] {
        assert!(wide.contains(wanted), "{wanted}\n{wide}");
    }
    assert!(wide.contains(".#."), "the pinning block is drawn: {wide}");
    assert!(wide.contains("Window ended 5s ago"), "{wide}");
    for (w, h) in [(80, 24), (120, 40), (160, 48)] {
        let buffer = render(&state, w, h);
        let screen = text(&buffer);
        assert!(
            !screen.contains('\u{1b}') && !screen.contains('\u{7}'),
            "{screen}"
        );
        if (w, h) == (120, 40) {
            insta::assert_snapshot!(screen);
        }
        if (w, h) == (80, 24) {
            insta::assert_snapshot!("sites_view_80x24", screen);
        }
    }
    // The reconciliation says what the map says, in a line, and the key.
    state.apply_action(Action::Back);
    state.apply_action(Action::Open);
    let detail = text(&render(&state, 160, 48));
    assert!(detail.contains("largest free block 600 MiB"), "{detail}");
    assert!(
        detail.contains("w: which lines of its code hold the memory"),
        "{detail}"
    );
}

#[test]
fn w_on_a_process_without_a_feed_says_why_and_asks_nothing() {
    let (mut state, asked) = fragmenting();
    // The unfed process: the first row that has no feed.
    for _ in 0..10 {
        state.apply_action(Action::Up);
    }
    let unfed = state
        .current
        .as_ref()
        .unwrap()
        .sample
        .processes
        .iter()
        .find(|p| p.feed.is_none())
        .map(|p| (p.pid, p.device_uuid.to_string()))
        .expect("the demo has an unfed process");
    state.view = View::Detail {
        pid: unfed.0,
        device_uuid: unfed.1,
    };
    state.apply_action(Action::Sites);
    assert!(asked.0.lock().unwrap().is_empty());
    let screen = text(&render(&state, 120, 40));
    assert!(screen.contains("has no allocator feed"), "{screen}");
}

/// A job on an 80 GiB GPU whose agent answers requests, its live tensors `live` at `time`.
fn leaking_node(time: f64, live: u64) -> crate::sample::NodeSample {
    use crate::fixtures::*;
    use crate::sample::DeviceMemory;
    const GIB: u64 = 1 << 30;
    let reserved = live + 2 * GIB;
    let used = reserved + GIB;
    let mut s = node();
    s.time = time;
    s.interval = 5.0;
    s.gpus.push(gpu(
        0,
        DeviceMemory {
            total: 80 * GIB,
            used,
            free: 80 * GIB - 512 * (1 << 20) - used,
            driver_reserved: Some(512 * (1 << 20)),
        },
    ));
    s.processes.push(process(4242, "GPU-test-0", Some(used)));
    let mut record = feed_on_gpu_0(4242, stats(live, reserved, 0.0, time - 0.2), Vec::new());
    let mut hello = (**record.hello.as_ref().unwrap()).clone();
    hello.framework = Some("torch".into());
    hello.backend = Some("native".into());
    hello.interval = Some(0.5);
    hello.requests = vec!["sites".into()];
    record.hello = Some(Arc::new(hello));
    record.connected_at = Some(0.0);
    record.last_heard = Some(time - 0.2);
    s.feeds.push(record);
    s
}

/// `--sites-on-climb`: a climb of live tensors gets one window, asked when it is first
/// raised, however long it lasts; a new climb after it ends gets another. Off, none.
#[test]
fn sites_on_climb_asks_once_per_climb_of_live_tensors() {
    const GIB: f64 = (1u64 << 30) as f64;
    let rate = 600.0 * (1u64 << 20) as f64 / 60.0;
    for on in [true, false] {
        let mut state = State::new(crate::pipeline::Pipeline::new(None), "test".into(), 5.0);
        let asked = Recorded::default();
        state.sites.asker = Box::new(asked.clone());
        state.sites.on_climb = on;
        let mut raised_at = None;
        // Flat for 2 minutes, climbing for 15, flat for 20 (the climb ends), climbing again.
        let live = |t: f64| {
            let climb = |from: f64, to: f64| rate * (t.min(to) - from).max(0.0);
            20.0 * GIB + climb(120.0, 1020.0) + climb(2220.0, 3120.0)
        };
        let mut asks_at_first_end = None;
        for k in 0..=(3120 / 5) {
            let t = 5.0 * f64::from(k);
            state.on_sample(leaking_node(1000.0 + t, live(t) as u64));
            let climbing = state
                .current
                .as_ref()
                .unwrap()
                .findings
                .iter()
                .any(|f| f.kind == crate::detect::FindingKind::Climb);
            if climbing && raised_at.is_none() {
                raised_at = Some(t);
                let n = asked.0.lock().unwrap().len();
                assert_eq!(
                    n,
                    usize::from(on),
                    "asked as the climb is first raised, at {t}"
                );
            }
            if t == 2200.0 {
                asks_at_first_end = Some(asked.0.lock().unwrap().len());
            }
        }
        assert!(raised_at.is_some(), "the leak is a climb");
        let asks = asked.0.lock().unwrap().clone();
        if on {
            assert_eq!(asks_at_first_end, Some(1), "one window for the first climb");
            assert_eq!(asks.len(), 2, "and one for the second: {asks:?}");
            assert!(asks.iter().all(|&(pid, s, _)| pid == 4242 && s == 60));
        } else {
            assert!(asks.is_empty(), "off: never asked");
        }
    }
}

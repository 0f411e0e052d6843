use super::*;
use crate::app::{Action, ReplayView, State, View};
use crate::replay::source::{OpenError, ReplaySource};
use crate::source::demo::node_at;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The demo's story, one sample every 10 s from `from` to `to`, as JSON lines, each with
/// the derived fields of `snapshot --json` (which replay must ignore).
fn demo_lines(from: f64, to: f64) -> Vec<String> {
    let mut pipeline = Pipeline::new(None);
    let mut lines = Vec::new();
    let mut t = from;
    while t < to {
        let observed = pipeline.ingest(node_at(0, t, 10.0));
        let snapshot = crate::snapshot::Snapshot::of(&observed);
        lines.push(serde_json::to_string(&snapshot).expect("json"));
        t += 10.0;
    }
    lines
}

use crate::fixtures::TempDir;

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write");
    path
}

/// The monitor after a straight playback of `lines` up to and including `until`.
fn played(lines: &[String], until: f64) -> State {
    let mut state = State::new(Pipeline::new(None), "replay".into(), 1.0);
    for line in lines {
        let sample: NodeSample = serde_json::from_str(line).expect("sample");
        if sample.time > until {
            break;
        }
        state.on_sample(sample);
    }
    state
}

/// The monitor showing the model a seek rebuilt.
fn sought(model: Model) -> State {
    let mut state = State::new(Pipeline::new(None), "replay".into(), 1.0);
    state.on_rebuilt(model, Instant::now());
    state
}

fn series(state: &State) -> BTreeMap<String, String> {
    state
        .pipeline
        .history
        .iter()
        .map(|(k, s)| (format!("{k:?}"), format!("{s:?}")))
        .collect()
}

fn screen(state: &mut State, view: View) -> String {
    state.view = view;
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).expect("backend");
    terminal.draw(|f| crate::ui::draw(f, state)).expect("draws");
    let buffer = terminal.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            out.push_str(buffer[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// What a user sees and what the detectors remember: findings (with their `since`), every
/// history series, and the main and strata screens.
fn assert_same(a: &mut State, b: &mut State, what: &str) {
    let time = |s: &State| s.current.as_ref().map(|o| o.sample.time);
    assert_eq!(time(a), time(b), "{what}: the sample shown");
    assert_eq!(a.findings(), b.findings(), "{what}: findings");
    assert_eq!(series(a), series(b), "{what}: history");
    for view in [View::Main, View::Strata] {
        assert_eq!(
            screen(a, view.clone()),
            screen(b, view.clone()),
            "{what}: {view:?} screen"
        );
    }
}

#[test]
fn a_seek_shows_what_playing_through_to_it_shows() {
    let dir = TempDir::new("test-replay");
    // The story from 5 to 25 minutes: the leak's climb, fragmentation, both OOMs.
    let lines = demo_lines(300.0, 1500.0);
    let path = write(
        dir.path(),
        "demo.jsonl",
        (lines.join("\n") + "\n").as_bytes(),
    );
    let mut source = ReplaySource::open(&path, None).expect("opens");
    let t = |i: usize| -> f64 {
        serde_json::from_str::<NodeSample>(&lines[i])
            .expect("sample")
            .time
    };
    // On from the start, to the end, back (from a checkpoint), back again before the first
    // checkpoint, to the start, and between two samples.
    let mut story = vec![
        (SeekTarget::At(t(70)), 70),
        (SeekTarget::End, lines.len() - 1),
        (SeekTarget::At(t(100)), 100),
        (SeekTarget::At(t(62)), 62),
        (SeekTarget::At(t(30)), 30),
        (SeekTarget::At(f64::NEG_INFINITY), 0),
        (SeekTarget::At(t(90) + 5.0), 90),
    ];
    let mut kinds = std::collections::BTreeSet::new();
    for (target, index) in story.drain(..) {
        let model = source.rebuild(target).expect("rebuilds");
        let mut by_seek = sought(model);
        kinds.extend(by_seek.findings().iter().map(|f| f.kind.name().to_string()));
        let mut by_play = played(&lines, t(index));
        assert_same(&mut by_play, &mut by_seek, &format!("{target:?}"));
    }
    assert!(
        !source.control().lock().checkpoints.is_empty(),
        "the seeks left checkpoints to start from"
    );
    // The seeks met the story's findings.
    for kind in ["climb", "fragmentation", "oom"] {
        assert!(kinds.contains(kind), "{kind}: {kinds:?}");
    }
}

#[test]
fn checkpoints_offered_while_playing_give_the_same_seek() {
    let dir = TempDir::new("test-replay");
    let lines = demo_lines(0.0, 1400.0);
    let path = write(dir.path(), "demo.jsonl", lines.join("\n").as_bytes());
    let source = ReplaySource::open(&path, None).expect("opens");
    let control = source.control();
    let mut source = source;
    // Played through by the monitor, which offers checkpoints as it goes.
    let mut state = State::new(Pipeline::new(None), "replay".into(), 1.0);
    state.replay = Some(ReplayView::new(control.clone()));
    let mut all = Vec::new();
    while let Ok(sample) = crate::source::Source::sample(&mut source) {
        all.push(sample.time);
        state.on_sample(sample);
    }
    assert_eq!(all.len(), lines.len());
    let times: Vec<f64> = control.lock().checkpoints.iter().map(|c| c.time).collect();
    assert!(times.len() >= 2, "{times:?}");
    // Back to a point past a checkpoint: rebuilt from it, the same as played.
    let target = all[100];
    let mut by_seek = sought(source.rebuild(SeekTarget::At(target)).expect("rebuilds"));
    let mut by_play = played(&lines, target);
    assert_same(&mut by_play, &mut by_seek, "from a checkpoint");
}

/// A seek in a format-2 recording the background reading has been through: it reads from
/// the keyframe before its checkpoint, takes the samples up to the latest mark in unjudged,
/// and judges only those after it; what it shows is what playing through shows.
#[test]
fn a_seek_from_a_mark_shows_what_playing_through_to_it_shows() {
    let dir = TempDir::new("test-replay");
    let path = dir.path().join("demo.zst");
    // 50 minutes of the story at 10 s: keyframes every 5 minutes, checkpoints every 10,
    // marks every 30 s.
    let samples: Vec<NodeSample> = (0..300)
        .map(|i| node_at(0, f64::from(i) * 10.0, 10.0))
        .collect();
    let mut writer = crate::recording::RecordWriter::create(&path, None).expect("creates");
    for sample in &samples {
        writer.write(sample).expect("writes");
    }
    writer.finish().expect("finishes");
    let mut source = ReplaySource::open(&path, None).expect("opens");
    let control = source.control();
    let started = Instant::now();
    while control.lock().last_time.is_none() || control.lock().indexing.is_some() {
        assert!(
            started.elapsed().as_secs() < 120,
            "the background reading ends"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (checkpoints, marks, keyframes) = {
        let s = control.lock();
        (s.checkpoints.len(), s.marks.len(), s.keyframes.len())
    };
    assert!(checkpoints >= 3, "{checkpoints} checkpoints");
    assert_eq!(marks, 100);
    assert_eq!(keyframes, 10);
    let played_to = |until: f64| {
        let mut state = State::new(Pipeline::new(None), "replay".into(), 1.0);
        for sample in samples.iter().filter(|s| s.time <= until) {
            state.on_sample(sample.clone());
        }
        state
    };
    let t = |i: usize| samples[i].time;
    let mut rolled = 0;
    for (target, index) in [
        (SeekTarget::At(t(250)), 250),
        (SeekTarget::End, 299),
        (SeekTarget::At(t(118)), 118),
        (SeekTarget::At(t(61)), 61),
        (SeekTarget::At(t(65) + 5.0), 65),
        (SeekTarget::At(t(7)), 7),
    ] {
        let mut by_seek = sought(source.rebuild(target).expect("rebuilds"));
        let rebuilt = control.lock().rebuilt.clone().expect("said");
        assert!(rebuilt.judged <= 3, "{target:?}: {rebuilt:?}");
        if index >= 30 {
            assert!(rebuilt.keyframe.is_some(), "{target:?}: {rebuilt:?}");
            assert!(rebuilt.skipped < 30, "{target:?}: {rebuilt:?}");
        }
        rolled += rebuilt.rolled;
        let mut by_play = played_to(t(index));
        assert_same(&mut by_play, &mut by_seek, &format!("{target:?}"));
    }
    assert!(rolled > 0, "the seeks took samples in unjudged");
}

#[test]
fn zstd_and_gzip_recordings_replay_as_the_plain_one() {
    let dir = TempDir::new("test-replay");
    let text = demo_lines(600.0, 1000.0).join("\n") + "\n";
    let plain = write(dir.path(), "r.jsonl", text.as_bytes());
    let zst = write(
        dir.path(),
        "r.zst",
        &zstd::encode_all(text.as_bytes(), 3).expect("zstd"),
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).expect("gzip");
    let gz = write(dir.path(), "r.gz", &gz.finish().expect("gzip"));
    let end = |path: &Path| {
        let mut source = ReplaySource::open(path, None).expect("opens");
        let mut state = sought(source.rebuild(SeekTarget::End).expect("rebuilds"));
        let status = source.control().status();
        (
            state.findings().to_vec(),
            series(&state),
            screen(&mut state, View::Main),
            status.reading,
        )
    };
    let expected = end(&plain);
    assert!(!expected.0.is_empty(), "the story has findings by then");
    assert_eq!(end(&zst), expected, "zstd");
    assert_eq!(end(&gz), expected, "gzip");
}

#[test]
fn bad_lines_are_counted_with_their_numbers_and_a_cut_last_line_is_fine() {
    let dir = TempDir::new("test-replay");
    let mut lines = demo_lines(600.0, 700.0);
    lines.insert(3, "{not json".into());
    lines.insert(5, "[1,2]".into());
    // Out of order: the first sample again.
    let first = lines[0].clone();
    lines.insert(7, first);
    let good = lines.last().cloned().unwrap_or_default();
    lines.push(good[..good.len() / 2].to_string());
    let path = write(dir.path(), "bad.jsonl", lines.join("\n").as_bytes());
    let mut source = ReplaySource::open(&path, None).expect("opens");
    let mut shown = 0;
    while crate::source::Source::sample(&mut source).is_ok() {
        shown += 1;
    }
    assert_eq!(shown, 10, "every complete sample");
    let reading = source.control().status().reading;
    assert_eq!(
        reading,
        Reading {
            bad_lines: 2,
            last_bad_line: Some(6),
            out_of_order: 1,
            truncated: true,
            ..Reading::default()
        }
    );
    // Read again by a seek, nothing is counted twice.
    source.rebuild(SeekTarget::End).expect("rebuilds");
    assert_eq!(source.control().status().reading, reading);
}

#[test]
fn a_missing_empty_or_sampleless_file_is_refused_with_its_reason() {
    let dir = TempDir::new("test-replay");
    let missing = dir.path().join("nope.jsonl");
    let err = ReplaySource::open(&missing, None).err().expect("refused");
    assert!(matches!(err, OpenError::Unreadable { .. }), "{err}");
    assert!(err.to_string().contains("nope.jsonl"), "{err}");
    let empty = write(dir.path(), "empty.jsonl", b"");
    let err = ReplaySource::open(&empty, None).err().expect("refused");
    assert!(err.to_string().contains("it is empty"), "{err}");
    let stdin = ReplaySource::open(Path::new("-"), None)
        .err()
        .expect("refused");
    assert!(matches!(stdin, OpenError::Stdin), "{stdin}");
    let junk = write(dir.path(), "junk.jsonl", b"hello\n{\"time\": 3}\n\n");
    let err = ReplaySource::open(&junk, None).err().expect("refused");
    assert!(
        err.to_string()
            .contains("2 not a sample, the last at line 2"),
        "{err}"
    );
}

#[test]
fn the_clock_runs_at_its_speed_and_stops_when_paused() {
    let t0 = Instant::now();
    let mut clock = Clock::new();
    clock.set(100.0, t0);
    let later = t0 + Duration::from_secs(2);
    assert_eq!(clock.at(later), Some(102.0));
    clock.change(later, |c| c.speed = 6);
    assert_eq!(clock.rate(), 16.0);
    assert_eq!(
        clock.until(102.0 + 32.0, later),
        Some(Duration::from_secs(2))
    );
    clock.change(later, |c| c.paused = true);
    assert_eq!(clock.at(later + Duration::from_secs(60)), Some(102.0));
    assert_eq!(clock.until(200.0, later), None, "paused: never");
}

#[test]
fn replay_keys_move_the_clock_and_seek_and_leave_the_list_keys_alone() {
    let e = crate::source::demo::DEMO_EPOCH;
    let control = Control::new(e + 1000.0);
    let mut state = State::new(Pipeline::new(None), "replay".into(), 1.0);
    state.replay = Some(ReplayView::new(control.clone()));
    state.on_sample(node_at(0, 1300.0, 10.0));
    state.apply_action(Action::TogglePause);
    assert!(
        control.status().paused && !state.pause.paused,
        "the clock, not the queue"
    );
    state.apply_action(Action::ZoomIn);
    state.apply_action(Action::ZoomIn);
    assert_eq!(control.status().speed, 4.0);
    state.apply_action(Action::ZoomOut);
    assert_eq!(control.status().speed, 2.0);
    state.apply_action(Action::SeekBack);
    assert_eq!(control.lock().seek, Some(SeekTarget::At(e + 1240.0)));
    state.apply_action(Action::SeekBack);
    assert_eq!(
        control.lock().seek,
        Some(SeekTarget::At(e + 1180.0)),
        "keys pressed quickly add up"
    );
    for _ in 0..10 {
        state.apply_action(Action::SeekBack);
    }
    assert_eq!(
        control.lock().seek,
        Some(SeekTarget::At(e + 1000.0)),
        "not before the start"
    );
    state.apply_action(Action::GoLast);
    assert_eq!(control.lock().seek, Some(SeekTarget::End));
    state.apply_action(Action::GoFirst);
    assert_eq!(control.lock().seek, Some(SeekTarget::At(f64::NEG_INFINITY)));
    // In the strata view + and - zoom, as they do live.
    state.apply_action(Action::ToggleStrata);
    let zoom = state.strata.zoom;
    state.apply_action(Action::ZoomOut);
    assert_ne!(state.strata.zoom, zoom);
    assert_eq!(control.status().speed, 2.0);
    // Live, G is the list's bottom, g groups the table by owner, and ← → do nothing.
    let mut live = State::new(Pipeline::new(None), "demo".into(), 1.0);
    live.on_sample(node_at(0, 600.0, 10.0));
    live.apply_action(Action::GoLast);
    let bottom = live.process_table.selected.clone();
    live.apply_action(Action::Top);
    assert_ne!(
        live.process_table.selected, bottom,
        "Home and G move in the list"
    );
    live.apply_action(Action::GoFirst);
    assert_eq!(
        live.process_table.group_by,
        crate::accounting::GroupBy::Launcher,
        "g groups"
    );
    live.apply_action(Action::SeekForward);
    assert!(!live.pause.paused);
}

/// A seek asked while another is being done takes over: an earlier target starts again, a
/// later one goes on; either way the result is what playing through to it shows.
#[test]
fn a_seek_asked_during_a_seek_takes_over() {
    let dir = TempDir::new("test-replay");
    let lines = demo_lines(600.0, 900.0);
    let path = write(dir.path(), "demo.jsonl", lines.join("\n").as_bytes());
    let t = |i: usize| -> f64 {
        serde_json::from_str::<NodeSample>(&lines[i])
            .expect("sample")
            .time
    };
    let (send, receive) = std::sync::mpsc::channel();
    let end = lines.len() - 1;
    let targets = [
        (t(10), SeekTarget::At(t(25)), 25),
        (t(20), SeekTarget::End, end),
    ];
    std::thread::spawn(move || {
        let mut source = ReplaySource::open(&path, None).expect("opens");
        for (first, newer, _) in targets {
            // Asked before the seek below reads its first line: it is met at once.
            source.control().seek(newer);
            let model = source.rebuild(SeekTarget::At(first)).expect("rebuilds");
            send.send(model.time()).expect("sends");
        }
    });
    for (_, _, index) in targets {
        let shown = receive
            .recv_timeout(Duration::from_secs(60))
            .expect("the seek finished");
        assert_eq!(shown, Some(t(index)));
    }
}

/// The header says where the replay is, at what speed, and what reading skipped, with the
/// last bad line's number; narrower, the short form keeps the count and the number.
#[test]
fn the_header_shows_the_position_speed_and_skipped_lines() {
    let dir = TempDir::new("test-replay");
    let mut lines = demo_lines(600.0, 700.0);
    lines.insert(3, "{not json".into());
    lines.insert(5, "[1,2]".into());
    let path = write(dir.path(), "bad.jsonl", lines.join("\n").as_bytes());
    let mut source = ReplaySource::open(&path, None).expect("opens");
    let mut state = State::new(Pipeline::new(None), "replay bad.jsonl".into(), 1.0);
    state.replay = Some(ReplayView::new(source.control()));
    let model = source
        .rebuild(SeekTarget::At(f64::NEG_INFINITY))
        .expect("rebuilds");
    state.on_rebuilt(model, Instant::now());
    for _ in 0..3 {
        state.on_sample(crate::source::Source::sample(&mut source).expect("sample"));
    }
    // The whole file read (as a seek to the end does), the state left where it was.
    source.rebuild(SeekTarget::End).expect("rebuilds");
    source.control().step_speed(2);
    source.control().toggle_pause();
    state.refresh(Instant::now());
    let wide = screen(&mut state, View::Main);
    let head = wide.lines().next().unwrap_or_default();
    assert!(
        head.contains(
            "replay 09:10:30 UTC · 30s of 1m30s · ×4 ‖ paused · 2 bad lines (last: line 6)"
        ),
        "{head}"
    );
    let mut terminal = Terminal::new(TestBackend::new(90, 30)).expect("backend");
    terminal
        .draw(|f| crate::ui::draw(f, &state))
        .expect("draws");
    let buffer = terminal.backend().buffer().clone();
    let head: String = (0..90)
        .map(|x| buffer[(x, 0)].symbol().to_string())
        .collect();
    assert!(
        head.contains("▶ 30s/1m30s ×4 ‖ paused · 2 bad (l.6)"),
        "{head}"
    );
}

/// A recording gone from under a replay (deleted, unmounted): the seek that needs it fails
/// once with its reason, the header stops saying "seeking", and the replay waits at the end
/// rather than fail again at every call.
#[test]
fn a_recording_gone_mid_replay_fails_the_seek_once() {
    let dir = TempDir::new("test-replay");
    let lines = demo_lines(600.0, 700.0);
    let path = write(dir.path(), "gone.jsonl", lines.join("\n").as_bytes());
    let mut source = ReplaySource::open(&path, None).expect("opens");
    assert!(matches!(source.play(), Ok(Played::Sample(_))));
    std::fs::remove_file(&path).expect("removes");
    let control = source.control();
    control.seek(SeekTarget::At(f64::NEG_INFINITY));
    let err = source.play().expect_err("the seek fails");
    assert!(err.to_string().contains("gone.jsonl"), "{err}");
    assert_eq!(control.status().seeking, None);
    // Waiting for the next seek, not failing again at once.
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let next = source.play().map(|_| ()).map_err(|e| e.to_string());
        let _ = send.send(next);
    });
    assert!(
        receive.recv_timeout(Duration::from_millis(300)).is_err(),
        "failed again at once"
    );
    control.seek(SeekTarget::End);
    let again = receive
        .recv_timeout(Duration::from_secs(10))
        .expect("a new seek is answered");
    assert!(again.is_err(), "still gone");
}

/// A zstd recording whose writer was killed mid-frame: every sample before the cut plays,
/// and the cut is noted as a cut last line.
#[test]
fn a_compressed_recording_cut_mid_frame_plays_up_to_the_cut() {
    let dir = TempDir::new("test-replay");
    let lines = demo_lines(600.0, 800.0);
    // One frame per sample, as a recorder flushing per sample writes them.
    let mut bytes = Vec::new();
    for line in &lines {
        bytes.extend(zstd::encode_all(format!("{line}\n").as_bytes(), 3).expect("zstd"));
    }
    let whole = bytes.len();
    let last_frame = zstd::encode_all(format!("{}\n", lines[lines.len() - 1]).as_bytes(), 3)
        .expect("zstd")
        .len();
    bytes.truncate(whole - last_frame / 2);
    let path = write(dir.path(), "cut.zst", &bytes);
    let mut source = ReplaySource::open(&path, None).expect("opens");
    let mut times = Vec::new();
    while let Ok(sample) = crate::source::Source::sample(&mut source) {
        times.push(sample.time);
    }
    let expected: Vec<f64> = lines[..lines.len() - 1]
        .iter()
        .map(|l| serde_json::from_str::<NodeSample>(l).expect("sample").time)
        .collect();
    assert_eq!(times, expected);
    assert!(source.control().status().reading.truncated);
}

/// The replay's header and footer in tiny areas: no panic.
#[test]
fn a_replay_draws_in_tiny_areas() {
    let control = Control::new(crate::source::demo::DEMO_EPOCH + 600.0);
    let mut state = State::new(Pipeline::new(None), "replay x".into(), 1.0);
    state.replay = Some(ReplayView::new(control.clone()));
    state.on_sample(node_at(0, 900.0, 10.0));
    control.update(|s| {
        s.reading.bad_lines = 3;
        s.reading.last_bad_line = Some(1042);
        s.seeking = Some((SeekTarget::End, 0.5));
    });
    state.refresh(Instant::now());
    for (w, h) in [(0, 0), (1, 1), (20, 5), (60, 16), (80, 24)] {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("backend");
        terminal
            .draw(|f| crate::ui::draw(f, &state))
            .expect("draws");
    }
}

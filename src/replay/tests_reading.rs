//! The replay over recordings that are spoiled, large or not files at all: corruption said
//! in the header and counted once, the first reading's progress in the header, and a FIFO
//! or device refused before anything is read.

use super::*;
use crate::app::{ReplayView, State};
use crate::replay::source::{OpenError, ReplaySource};
use crate::source::demo::node_at;
use crate::source::Source;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::io::Write;
use std::path::PathBuf;

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "strata-test-replay-reading-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// The demo from `from`, `n` samples 10 s apart, as JSON lines.
fn demo_text(from: f64, n: u32) -> String {
    (0..n)
        .map(|i| {
            serde_json::to_string(&node_at(0, from + f64::from(i) * 10.0, 10.0)).expect("json")
                + "\n"
        })
        .collect()
}

fn head(state: &State, width: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, 30)).expect("backend");
    terminal.draw(|f| crate::ui::draw(f, state)).expect("draws");
    let buffer = terminal.backend().buffer().clone();
    (0..width)
        .map(|x| buffer[(x, 0)].symbol().to_string())
        .collect()
}

/// A zstd recording of two frames, the first damaged in the middle: the replay plays what
/// precedes the damage and all of the second frame, the header says where the damage is,
/// and a seek that reads it again does not count it twice.
#[test]
fn corruption_is_played_past_and_said_in_the_header_once() {
    let dir = temp("corrupt");
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 1).expect("zstd");
    let mut flushed = Vec::new();
    for line in demo_text(600.0, 10).lines() {
        encoder.write_all(line.as_bytes()).expect("write");
        encoder.write_all(b"\n").expect("write");
        encoder.flush().expect("flush");
        flushed.push(encoder.get_ref().len());
    }
    let mut bytes = encoder.finish().expect("finish");
    bytes.extend(zstd::encode_all(demo_text(700.0, 10).as_bytes(), 3).expect("zstd"));
    // The sixth block's type made the reserved one: zstd cannot decode it.
    let damaged = flushed[4];
    bytes[damaged] |= 0x06;
    let path = dir.join("damaged.zst");
    std::fs::write(&path, &bytes).expect("write");

    let mut source = ReplaySource::open(&path, None).expect("opens");
    let mut times = Vec::new();
    while let Ok(sample) = source.sample() {
        times.push(sample.time);
    }
    // The five samples before the damaged block, then the whole second frame.
    let want: Vec<f64> = (0..5)
        .chain(10..20)
        .map(|i| node_at(0, 600.0 + f64::from(i) * 10.0, 10.0).time)
        .collect();
    assert_eq!(times, want);
    let reading = source.control().status().reading;
    assert_eq!(reading.corrupt, 1, "{reading:?}");
    let at = reading.last_corrupt_at.expect("where");
    assert_eq!(at, damaged as u64);
    assert!(!reading.truncated, "{reading:?}");
    source.rebuild(SeekTarget::End).expect("rebuilds");
    assert_eq!(source.control().status().reading, reading);

    let mut state = State::new(Pipeline::new(None), "replay damaged.zst".into(), 1.0);
    state.replay = Some(ReplayView::new(source.control()));
    state.on_sample(node_at(0, 650.0, 10.0));
    state.refresh(Instant::now());
    let wide = head(&state, 200);
    assert!(wide.contains(&format!("· corrupt at byte {at}")), "{wide}");
    let narrow = head(&state, 60);
    assert!(narrow.contains("corrupt"), "{narrow}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// While the first reading of the whole file runs past a second, the header's length says
/// how far it has come instead of a bare `?`.
#[test]
fn the_header_says_how_far_the_first_reading_has_come() {
    let control = Control::new(node_at(0, 600.0, 10.0).time);
    let mut state = State::new(Pipeline::new(None), "replay big.zst".into(), 1.0);
    state.replay = Some(ReplayView::new(control.clone()));
    state.on_sample(node_at(0, 600.0, 10.0));
    let progress = crate::recording::Progress::new(Some(505 << 20));
    let began = Instant::now();
    control.update(|s| s.indexing = Some((progress.clone(), began)));
    state.refresh(began);
    // Within the first second: nothing said.
    assert!(
        head(&state, 200).contains("0s of ? ·"),
        "{}",
        head(&state, 200)
    );
    let earlier = began
        .checked_sub(std::time::Duration::from_secs(2))
        .expect("an instant 2 s back");
    control.update(|s| s.indexing = Some((progress.clone(), earlier)));
    state.refresh(Instant::now());
    let wide = head(&state, 200);
    assert!(
        wide.contains("0s of ? (reading 0 B of 505 MiB, 0%) ·"),
        "{wide}"
    );
    assert!(
        head(&state, 60).contains("▶ 0s/? 0% "),
        "{}",
        head(&state, 60)
    );
    control.update(|s| s.indexing = None);
    state.refresh(Instant::now());
    assert!(!head(&state, 200).contains("reading"));
}

/// A FIFO is refused at once (opening it would wait for a writer, on a blank screen), as is
/// a character device (`/dev/zero` never ends); both say why and what to use instead.
#[test]
fn a_fifo_or_a_device_is_refused_before_it_is_opened() {
    let dir = temp("fifo");
    let fifo = dir.join("pipe");
    let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    for (path, kind) in [
        (fifo.as_path(), "a FIFO (a named pipe)"),
        (std::path::Path::new("/dev/zero"), "a character device"),
    ] {
        let error = match ReplaySource::open(path, None) {
            Err(e) => e,
            Ok(_) => panic!("{} opened", path.display()),
        };
        assert!(
            matches!(&error, OpenError::NotAFile { kind: k, .. } if *k == kind),
            "{error}"
        );
        assert!(error.to_string().contains("not a regular file"), "{error}");
        assert!(
            error.hint().contains("strata analyze -"),
            "{}",
            error.hint()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

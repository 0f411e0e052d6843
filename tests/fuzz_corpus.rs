//! The fuzz corpus replayed through the fuzz targets' own entry points (`fuzz/targets/`),
//! without AFL: every input kept in `fuzz/corpus/<target>/` (the seeds, and the inputs AFL
//! found that once failed, kept after their fix) must run clean, each checked as the fuzzer
//! checks it.

// Tests may panic: `unwrap` and `expect` say which of a test's assumptions failed, in its
// helpers too (clippy.toml allows them only in `#[test]` functions and `#[cfg(test)]` code).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../fuzz/targets/analyze.rs"]
mod analyze;
#[path = "../fuzz/targets/recording_reader.rs"]
mod recording_reader;

use std::path::PathBuf;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut inputs: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("entry").path();
            let bytes = std::fs::read(&path).expect("read");
            (path, bytes)
        })
        .collect();
    inputs.sort();
    assert!(
        inputs.len() >= 10,
        "{}: {} inputs",
        dir.display(),
        inputs.len()
    );
    inputs
}

fn replay(target: &str, run: fn(&[u8])) {
    for (path, bytes) in corpus(target) {
        if std::panic::catch_unwind(|| run(&bytes)).is_err() {
            panic!("{target}: {} fails", path.display());
        }
    }
}

#[test]
fn the_recording_reader_corpus_runs_clean() {
    replay("recording_reader", recording_reader::run);
}

#[test]
fn the_analyze_corpus_runs_clean() {
    replay("analyze", analyze::run);
}

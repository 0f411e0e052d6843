//! Record, kill with TERM, replay: every complete sample of `strata snapshot --json --count`
//! killed mid-run is replayed, in order, whatever the compression; the line in flight (cut
//! short) is tolerated and noted.

use crate::common;

use common::{strata, Scratch};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use strata::replay::source::ReplaySource;
use strata::source::Source;

/// The times of the recording's complete lines, read independently of strata's reader.
fn complete_times(text: &[u8]) -> Vec<f64> {
    let mut times = Vec::new();
    let mut lines = text.split_inclusive(|&b| b == b'\n');
    for line in &mut lines {
        if !line.ends_with(b"\n") {
            break;
        }
        let value: serde_json::Value = serde_json::from_slice(line).expect("a complete line");
        times.push(value["time"].as_f64().expect("time"));
    }
    times
}

/// Every sample the replay source gives, in order, and whether it saw a cut last line.
fn replayed(path: &Path) -> (Vec<f64>, bool) {
    let mut source = ReplaySource::open(path, None).expect("opens");
    let mut times = Vec::new();
    while let Ok(sample) = source.sample() {
        times.push(sample.time);
    }
    (times, source.control().status().reading.truncated)
}

#[test]
fn every_complete_sample_of_a_recording_killed_with_term_is_replayed() {
    let scratch = Scratch::new("test-roundtrip");
    let dir = &scratch.dir;
    let path = dir.join("killed.jsonl");
    let file = std::fs::File::create(&path).expect("file");
    let mut child = Command::new(strata())
        .args([
            "snapshot",
            "--demo",
            "--demo-at",
            "600",
            "--interval",
            "5",
            "--json",
        ])
        .args(["--count", "100000"])
        .stdout(Stdio::from(file))
        .spawn()
        .expect("starts");
    let start = Instant::now();
    while std::fs::read(&path).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count()) < 40 {
        assert!(start.elapsed() < Duration::from_secs(60), "too slow");
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = child.wait().expect("waits");
    assert!(
        !status.success(),
        "killed mid-run, not finished: {status:?}"
    );
    let mut bytes = std::fs::read(&path).expect("reads");
    let complete = complete_times(&bytes);
    assert!(complete.len() >= 40, "{}", complete.len());
    // The sample in flight: half a line after the last newline (the kill may have landed
    // between lines; then it is made so).
    if bytes.ends_with(b"\n") {
        let last = bytes[..bytes.len() - 1]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let half = bytes[last..last + (bytes.len() - last) / 2].to_vec();
        bytes.extend_from_slice(&half);
        std::fs::write(&path, &bytes).expect("writes");
    }
    let (times, truncated) = replayed(&path);
    assert_eq!(times, complete, "every complete sample, in order");
    assert!(truncated, "the cut last line is noted");
    // The same recording compressed by the standard tools replays alike.
    for (tool, name) in [("zstd", "killed.jsonl.zst"), ("gzip", "killed.jsonl.gz")] {
        let out = Command::new(tool)
            .arg("-c")
            .arg(&path)
            .output()
            .unwrap_or_else(|e| panic!("{tool} must be installed: {e}"));
        assert!(out.status.success());
        let compressed = dir.join(name);
        std::fs::File::create(&compressed)
            .and_then(|mut f| f.write_all(&out.stdout))
            .expect("writes");
        assert_eq!(replayed(&compressed), (complete.clone(), true), "{tool}");
    }
}

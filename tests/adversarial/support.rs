//! What the adversarial cases share: recordings of the demo's story in either format, and
//! analyses run in this process against a deadline that only a hang reaches.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;
use strata::analyze::Analysis;
use strata::recording::{Lines, Progress};

/// How long one analysis of a small recording may take before it is called a hang: far past
/// what any machine takes (a few milliseconds), so only a hang reaches it.
pub const HANG: Duration = Duration::from_secs(120);

/// The demo's story as JSON lines: `count` samples `every` seconds apart from its start.
pub fn story(count: u32, every: u32) -> Vec<serde_json::Value> {
    let out = crate::common::strata_output(&[
        "snapshot",
        "--demo",
        "--demo-at",
        "0",
        "--demo-speed",
        "1",
        "--json",
        "--count",
        &count.to_string(),
        "--interval",
        &every.to_string(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a sample"))
        .collect()
}

/// Samples as JSON lines.
pub fn jsonl(samples: &[serde_json::Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in samples {
        out.extend_from_slice(s.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// The same samples in format 2, as `strata record OUT --from IN` writes them (zstd frames).
pub fn format_2(dir: &Path, samples: &[serde_json::Value]) -> Vec<u8> {
    let from = dir.join("story.jsonl");
    let to = dir.join("story.strata");
    std::fs::write(&from, jsonl(samples)).expect("write");
    let _ = std::fs::remove_file(&to);
    let out = crate::common::strata_output(&[
        "record",
        crate::common::utf8(&to),
        "--from",
        crate::common::utf8(&from),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&to).expect("read")
}

/// A recording's bytes analysed in this process; `None` when it did not end within
/// [`HANG`]. A panic in the analysis fails the test.
pub fn analyze_bytes(bytes: Vec<u8>) -> Option<Analysis> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let lines = Lines::new(Box::new(std::io::Cursor::new(bytes)), Progress::default());
        let analysis = match lines {
            Ok(lines) => strata::analyze::analyze(lines, None),
            Err(e) => Analysis {
                read_error: Some(e.to_string()),
                ..Analysis::default()
            },
        };
        // Said as a panic of the test's when the analysis panicked: the sender is dropped.
        let _ = tx.send(analysis);
    });
    match rx.recv_timeout(HANG) {
        Ok(analysis) => Some(analysis),
        Err(mpsc::RecvTimeoutError::Timeout) => None,
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the analysis panicked"),
    }
}

//! How long seeks take in `strata replay` of a long recording: the model rebuilt on the
//! replay source's thread, as the monitor asks for it. Prints one line per seek: where from,
//! where to, the wall time, and whether it started from a checkpoint; then the checkpoints
//! kept and their footprint, and the process's peak resident memory.
//! Usage: cargo bench --bench replay_seek -- FILE [--warm]   (benches/replay_seek.sh makes FILE)

// A benchmark may panic: `expect` says which of its assumptions failed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;
use strata::replay::source::ReplaySource;
use strata::replay::SeekTarget;

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Whether the background reading still runs (its thread is named).
fn indexing(_control: &strata::replay::Control) -> bool {
    std::fs::read_dir("/proc/self/task").is_ok_and(|tasks| {
        tasks.flatten().any(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.trim() == "strata-replay-i")
        })
    })
}

fn main() {
    let Some(file) = std::env::args().skip(1).find(|a| !a.starts_with("--")) else {
        eprintln!("usage: cargo bench --bench replay_seek -- FILE");
        std::process::exit(2);
    };
    let mut source = match ReplaySource::open(std::path::Path::new(&file), None) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let control = source.control();
    let first = control.status().first_time;
    let mut shown = first;
    let mut seek = |what: &str, target: SeekTarget| {
        let checkpoints = control.lock().checkpoints.len();
        let started = Instant::now();
        let model = source.rebuild(target).expect("rebuilds");
        let took = started.elapsed();
        let to = model.time().unwrap_or(first);
        let how = control.lock().rebuilt.clone().unwrap_or_default();
        println!(
            "{what:<28} {:>7.0}s -> {:>7.0}s  {:>8.3} s  ({checkpoints} checkpoint(s) before; \
             from {}, {} line(s) read through, {} sample(s) taken in, {} judged)",
            shown - first,
            to - first,
            took.as_secs_f64(),
            match (how.checkpoint, how.keyframe) {
                (Some(c), Some(k)) =>
                    format!("the checkpoint at {:.0}s, keyframe line {k}", c - first),
                (Some(c), None) => format!("the checkpoint at {:.0}s, the file's start", c - first),
                (None, _) => "the start".to_string(),
            },
            how.skipped,
            how.rolled,
            how.judged,
        );
        shown = to;
        to
    };
    let opened = Instant::now();
    // At once, while the background reading has only begun: from the start, mostly
    // (`--warm`: not done, the seeks wait for the background reading).
    if !std::env::args().any(|a| a == "--warm") {
        seek("G: at once (cold)", SeekTarget::End);
    }
    while control.status().last_time.is_none() || indexing(&control) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    println!(
        "the background reading (length, checkpoints) took {:.3} s from the start",
        opened.elapsed().as_secs_f64()
    );
    seek("g: to the start", SeekTarget::At(f64::NEG_INFINITY));
    let end = seek("G: to the end", SeekTarget::End);
    seek("<-: a minute back", SeekTarget::At(end - 60.0));
    let middle = first + (end - first) / 2.0;
    seek("to the middle", SeekTarget::At(middle));
    seek("->: a minute on", SeekTarget::At(middle + 60.0));
    let s = control.lock();
    let footprint: usize = s.checkpoints.iter().map(|c| c.footprint()).sum();
    println!(
        "checkpoints: {} ({} MiB of history beyond what they share), marks: {}, keyframes: {}; peak RSS {} MiB",
        s.checkpoints.len(),
        footprint >> 20,
        s.marks.len(),
        s.keyframes.len(),
        peak_rss_kib().map_or("n/a".into(), |k| (k >> 10).to_string())
    );
}

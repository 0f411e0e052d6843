//! What recording costs: bytes per sample and CPU per sample, by encoding and level, and a
//! whole day at 1 s of a busy node (8 GPUs x 8 fed processes each: 64 processes, 64 feeds)
//! through `strata::recording::RecordWriter`, to real files, read back at the end.
//!
//! Run: `cargo bench --bench record` (the table over 1 hour of samples, extrapolated to a
//! day, then the default encoding over a full day); `-- --hours H` for the table's hours,
//! `-- --day-hours H` for the full run's, `-- --per-gpu N` for N fed processes a GPU (8);
//! `-- --lean` for what the size would be without the feeds' in-between readings and with
//! times and CPU rounded (not what strata writes: a measure of where the bytes go). `benches/record.sh` runs it and the whole-process
//! measurement.
//!
//! The node is `tests/common/busy_node.rs` (how its data moves is said there);
//! `-- --full-precision` writes its CPU % and poll times at full f64 precision, as its first
//! version did (strata's sources round them: CPU to 0.1 %, the poll to 1 µs).

// A benchmark may panic: `expect` says which of its assumptions failed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/busy_node.rs"]
mod busy_node;

use busy_node::{Node, GPUS};
use std::path::Path;
use std::time::Instant;
use strata::recording::{Encoding, RecordWriter};

/// This thread's CPU time, seconds.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

struct Measured {
    samples: u64,
    bytes: u64,
    cpu_mean: f64,
    cpu_p99: f64,
}

/// Records `seconds` samples of the node (1 s apart) to `path` with `encoding`.
fn measure(path: &Path, encoding: Encoding, seconds: u64, per_gpu: u32) -> Measured {
    let _ = std::fs::remove_file(path);
    let mut node = make_node(per_gpu);
    let mut writer = RecordWriter::with_encoding(path, encoding, None).expect("create");
    let mut cpu = Vec::with_capacity(seconds as usize);
    for k in 0..seconds {
        let sample = node.sample(k);
        let before = thread_cpu();
        writer.write(&sample).expect("write");
        cpu.push(thread_cpu() - before);
    }
    let summary = writer.finish().expect("finish");
    cpu.sort_by(f64::total_cmp);
    Measured {
        samples: summary.samples,
        bytes: std::fs::metadata(path).expect("file").len(),
        cpu_mean: cpu.iter().sum::<f64>() / cpu.len().max(1) as f64,
        cpu_p99: cpu[((cpu.len() - 1) as f64 * 0.99) as usize],
    }
}

/// The node, as the command line asks.
fn make_node(per_gpu: u32) -> Node {
    let mut node = Node::new(per_gpu);
    node.lean = std::env::args().any(|a| a == "--lean");
    node.full_precision = std::env::args().any(|a| a == "--full-precision");
    node
}

fn value(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let hours: f64 = value("--hours").map_or(1.0, |v| v.parse().expect("hours"));
    let day_hours: f64 = value("--day-hours").map_or(24.0, |v| v.parse().expect("hours"));
    let dir = std::env::temp_dir().join(format!("strata-bench-record-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let seconds = (hours * 3600.0) as u64;
    let per_gpu: u32 = value("--per-gpu").map_or(8, |v| v.parse().expect("processes"));
    let day = 86_400.0 / seconds as f64;

    // The node's plain size over the whole day: the JSON lines alone, as plain writes them.
    let mut node = make_node(per_gpu);
    let mut plain_day = 0u64;
    let mut plain_table = 0u64;
    let whole = (day_hours * 3600.0) as u64;
    // A line is the sample's JSON with `"schema":"strata.snapshot/1",` after its `{`, and a
    // newline (checked against the plain file of the table below).
    const LINE_EXTRA: u64 = 30;
    for k in 0..whole.max(seconds) {
        let line = serde_json::to_vec(&node.sample(k)).expect("json").len() as u64 + LINE_EXTRA;
        if k < whole {
            plain_day += line;
        }
        if k < seconds {
            plain_table += line;
        }
    }
    println!(
        "node: {GPUS} GPUs x {per_gpu} fed processes each; plain JSON lines over {day_hours} h at 1 s: {:.1} MB ({:.0} B a sample)",
        plain_day as f64 / 1e6,
        plain_day as f64 / whole as f64
    );

    println!("\nover {hours} h ({seconds} samples), a day extrapolated x{day:.0}; CPU: serialise + compress + flush + write, per sample");
    println!(
        "{:<11} {:>12} {:>14} {:>12} {:>12} {:>14}",
        "format", "B/sample", "MB/day", "CPU mean", "CPU p99", "% of a core"
    );
    let table = [
        ("1 plain", Encoding::Plain),
        ("1 zstd -1", Encoding::Zstd(1)),
        ("1 zstd -3", Encoding::Zstd(3)),
        ("1 gzip -6", Encoding::Gzip(6)),
        ("2 zstd -1", Encoding::Records(1)),
        ("2 zstd -3", Encoding::Records(3)),
        ("2 zstd -6", Encoding::Records(6)),
        ("2 zstd -9", Encoding::Records(9)),
        ("2 zstd -19", Encoding::Records(19)),
    ];
    for (label, encoding) in table {
        let m = measure(&dir.join("table"), encoding, seconds, per_gpu);
        if encoding == Encoding::Plain {
            assert_eq!(m.bytes, plain_table, "the plain size counted above");
        }
        println!(
            "{label:<11} {:>12.0} {:>14.1} {:>10.0}µs {:>10.0}µs {:>13.4}%",
            m.bytes as f64 / m.samples as f64,
            m.bytes as f64 * day / 1e6,
            m.cpu_mean * 1e6,
            m.cpu_p99 * 1e6,
            m.cpu_mean * 100.0,
        );
    }
    let _ = std::fs::remove_file(dir.join("table"));

    let name = value("--day-file").unwrap_or_else(|| "day.zst".into());
    let default = Encoding::for_path(Path::new(&name));
    let path = dir.join(&name);
    let started = Instant::now();
    let m = measure(&path, default, whole, per_gpu);
    let read_started = Instant::now();
    let mut read = strata::recording::Lines::open(&path).expect("open");
    let mut lines = 0u64;
    while let Some((_, line)) = read.next_line().expect("reads") {
        assert!(
            matches!(line, strata::recording::Line::Sample(_)),
            "{line:?}"
        );
        lines += 1;
    }
    assert_eq!((lines, read.cut()), (m.samples, false), "reads back");
    let read_secs = read_started.elapsed().as_secs_f64();
    println!(
        "\n{} over {day_hours} h at 1 s ({} samples, {:.0} s to run): {:.1} MB ({:.0} B a sample), CPU {:.0}µs mean, {:.0}µs p99 a sample = {:.4}% of one core at a 1 s interval; read back: {lines} samples in {read_secs:.1} s",
        default.name(),
        m.samples,
        started.elapsed().as_secs_f64(),
        m.bytes as f64 / 1e6,
        m.bytes as f64 / m.samples as f64,
        m.cpu_mean * 1e6,
        m.cpu_p99 * 1e6,
        m.cpu_mean * 100.0,
    );
    if let Some(keep) = value("--keep-day") {
        std::fs::rename(&path, &keep).expect("keep the day's file");
        println!("the day's recording kept at {keep}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

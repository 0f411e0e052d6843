//! `strata record FILE`: headless, one raw sample per interval appended to a recording until
//! a signal (TERM, HUP, INT) or `--duration`; then the frame is finished. On stderr, and
//! never on stdout: at once, what is recorded, where, and how it stops; at the first sample,
//! the devices it holds; at the end, what was saved. The source is sampled on its own
//! thread, as in the monitor: a poll stuck in the driver never keeps a signal from finishing
//! the file.

pub(crate) mod live;
pub mod reencode;
pub mod ring;
mod said;

pub use said::{devices_line, file_words, opening_line, stopped_by};

use crate::recording::{Encoding, RecordWriter, Summary};
use crate::sample::NodeSample;
use crate::source::{Schedule, Source};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

/// `90s`, `30m`, `24h`, `2d`, or plain seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = split_unit(text);
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => {
            return Err(format!(
                "`{text}` is not a duration (hint: 90s, 30m, 24h, or seconds)"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (hint: 90s, 30m, 24h, or seconds)"))?;
    let secs = value * scale;
    if !secs.is_finite() || secs <= 0.0 || secs > 1e9 {
        return Err(format!(
            "the duration must be more than 0 and at most 1e9 s, not `{text}`"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `500M`, `2G`, `64K`, `1.5G` (binary: M is MiB), `500MB`, `500MiB`, or plain bytes.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let (number, unit) = split_unit(text);
    let unit = unit.to_ascii_lowercase();
    let unit = unit.trim_end_matches("ib").trim_end_matches('b');
    let scale: u64 = match unit {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(format!("`{text}` is not a size (hint: 500M, 2G, or bytes)")),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size (hint: 500M, 2G, or bytes)"))?;
    let bytes = value * scale as f64;
    if !bytes.is_finite() || bytes < 4096.0 || bytes > u64::MAX as f64 {
        return Err(format!("the size must be at least 4K, not `{text}`"));
    }
    Ok(bytes as u64)
}

fn split_unit(text: &str) -> (&str, &str) {
    let text = text.trim();
    let at = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    (text[..at].trim(), text[at..].trim())
}

/// Why the headless recorder stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Signal(i32),
    Duration,
    /// The source's thread ended (a bug in a source).
    SourceGone,
}

/// What the sampling thread sends.
enum Collected {
    Sample(Box<NodeSample>),
    Failed(String),
}

/// Samples `source` every `interval` on a thread of its own until the receiver is gone.
fn spawn_collector(
    mut source: Box<dyn Source>,
    interval: Duration,
    tx: mpsc::Sender<Collected>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("strata-record-collector".into())
        .spawn(move || {
            let mut schedule = Schedule::new(Instant::now(), interval);
            loop {
                let taken =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| source.sample()));
                let item = match taken {
                    Ok(Ok(sample)) => Collected::Sample(Box::new(sample)),
                    Ok(Err(e)) => Collected::Failed(format!("{e} (hint: {})", e.hint())),
                    // A bug in a source: stop sampling; the recorder finishes the file.
                    Err(_) => return,
                };
                if tx.blocking_send(item).is_err() {
                    return;
                }
                schedule.sleep_until_next();
            }
        })
        .map(|_| ())
}

/// Records from `source` into `writer` until a signal or `duration`; finishes the frame.
/// Returns why it stopped and what was written; a write error (a full disk) is returned as
/// the error, with the file cut back to its last complete sample.
pub fn record(
    source: Box<dyn Source>,
    mut writer: RecordWriter,
    interval: Duration,
    duration: Option<Duration>,
    on_first_sample: impl FnOnce(&NodeSample),
    on_poll_failed: impl FnMut(&str),
) -> anyhow::Result<(Stop, Summary)> {
    let mut first = Some(on_first_sample);
    let stop = collect_until_stopped(source, interval, duration, on_poll_failed, |sample| {
        writer.write(sample)?;
        if let Some(said) = first.take() {
            said(sample);
        }
        Ok(())
    })?;
    Ok((stop, writer.finish()?))
}

/// Records from `source` into the flight record `ring` until a signal or `duration`: each
/// sample through the pipeline too, for the findings that keep evidence. A write error (a
/// full disk) is returned, the segments as they are.
pub fn record_ring(
    source: Box<dyn Source>,
    mut ring: ring::Ring,
    mut pipeline: crate::pipeline::Pipeline,
    interval: Duration,
    duration: Option<Duration>,
    on_first_sample: impl FnOnce(&NodeSample),
    on_poll_failed: impl FnMut(&str),
) -> anyhow::Result<(Stop, u64)> {
    let mut samples = 0u64;
    let mut first = Some(on_first_sample);
    let stop = collect_until_stopped(source, interval, duration, on_poll_failed, |sample| {
        let observed = pipeline.ingest(sample.clone());
        ring.offer(sample, &observed.findings)?;
        samples += 1;
        if let Some(said) = first.take() {
            said(sample);
        }
        Ok(())
    })?;
    ring.finish()?;
    Ok((stop, samples))
}

/// Samples `source` every `interval` on a thread of its own and hands each sample to
/// `on_sample` until a signal (TERM, HUP, INT), `duration`, or the source's end. An error
/// from `on_sample` (a full disk) ends it and is returned.
fn collect_until_stopped(
    source: Box<dyn Source>,
    interval: Duration,
    duration: Option<Duration>,
    mut on_poll_failed: impl FnMut(&str),
    mut on_sample: impl FnMut(&NodeSample) -> anyhow::Result<()>,
) -> anyhow::Result<Stop> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        // Listening before the first sample: a TERM from the first instant is heard.
        let listen = |signo| signal(SignalKind::from_raw(signo));
        let mut term = listen(libc::SIGTERM)?;
        let mut hup = listen(libc::SIGHUP)?;
        let mut int = listen(libc::SIGINT)?;
        let (tx, mut rx) = mpsc::channel(64);
        // As the monitor does (`tui.rs`): what only starting read is let go of before the
        // first sample, and what only the first sample read once it is written. A recorder
        // runs for days on a node.
        crate::footprint::release_startup_pages();
        spawn_collector(source, interval, tx)?;
        let mut written = 0u64;
        let deadline = duration.map(|d| tokio::time::Instant::now() + d);
        let stop = loop {
            let far = tokio::time::Instant::now() + Duration::from_secs(3600);
            tokio::select! {
                biased;
                _ = term.recv() => break Stop::Signal(libc::SIGTERM),
                _ = hup.recv() => break Stop::Signal(libc::SIGHUP),
                _ = int.recv() => break Stop::Signal(libc::SIGINT),
                _ = tokio::time::sleep_until(deadline.unwrap_or(far)), if deadline.is_some() => {
                    break Stop::Duration
                }
                item = rx.recv() => match item {
                    Some(Collected::Sample(sample)) => {
                        on_sample(&sample)?;
                        written += 1;
                        if written == 1 {
                            crate::footprint::release_startup_pages();
                        }
                    }
                    Some(Collected::Failed(line)) => on_poll_failed(&line),
                    None => break Stop::SourceGone,
                },
            }
        };
        anyhow::Ok(stop)
    })
}

/// The summary line: what was written, where.
pub fn summary_line(path: &Path, encoding: Encoding, summary: &Summary) -> String {
    let rotated = match summary.rotations {
        0 => String::new(),
        1 => ", rotated once".to_string(),
        n => format!(", rotated {n} times"),
    };
    format!(
        "recorded {} sample{} ({}, {}{rotated}) to {}",
        summary.samples,
        if summary.samples == 1 { "" } else { "s" },
        crate::units::bytes(summary.bytes),
        encoding.name(),
        crate::text::clean(&path.display().to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_read_as_people_write_them() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
        for bad in ["", "0", "-3s", "5y", "abc", "nan"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_size("500M"), Ok(500 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("1.5g"), Ok(3 << 29));
        assert_eq!(parse_size("500MB"), Ok(500 << 20));
        assert_eq!(parse_size("100000"), Ok(100_000));
        for bad in ["", "10", "5X", "M", "-1M"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}

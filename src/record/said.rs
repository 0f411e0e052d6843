//! What `strata record` says on stderr: at once, what it records, where, and how it stops; at
//! the first sample, the devices; at the end, why it stopped (the summary is `summary_line`).

use super::Stop;
use crate::recording::{Encoding, Rotation};
use crate::sample::NodeSample;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The first line, said before the first sample is taken: `source` (what is sampled), every
/// `interval` seconds, into `into` (the file and its format), and how it stops.
pub fn opening_line(source: &str, interval: f64, into: &str, duration: Option<Duration>) -> String {
    let stops = match duration {
        Some(d) => format!(
            "stops after {} (--duration), or at Ctrl-C, TERM or HUP before",
            crate::units::duration(d.as_secs_f64())
        ),
        None => "Ctrl-C (or TERM, HUP) stops it".to_string(),
    };
    format!(
        "recording {} every {} into {into}; {stops}, and what was recorded is saved",
        crate::text::clean(source),
        crate::units::interval(interval)
    )
}

/// The file a recording goes into, in words: its path, its format, its rotation, and
/// whether it is appended to.
pub fn file_words(
    path: &Path,
    encoding: Encoding,
    rotation: Option<Rotation>,
    appended: bool,
) -> String {
    let rotated = match rotation {
        Some(r) => format!(
            ", rotated past {} with {} kept",
            crate::units::bytes(r.max_bytes),
            r.keep
        ),
        None => String::new(),
    };
    format!(
        "{} ({}{rotated}{})",
        crate::text::clean(&path.display().to_string()),
        encoding.name(),
        if appended { ", appended to" } else { "" },
    )
}

/// The devices of the first sample, said when it is written: `4 GPUs (NVIDIA H100 ×4), 9
/// processes`. The names come from NVML: cleaned for the terminal.
pub fn devices_line(sample: &NodeSample) -> String {
    let gpus = &sample.gpus;
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for gpu in gpus {
        let name = gpu.info.name.as_deref().unwrap_or("name n/a");
        *names
            .entry(crate::text::clean(name).into_owned())
            .or_default() += 1;
    }
    let kinds: Vec<String> = names
        .iter()
        .map(|(name, n)| match n {
            1 => name.clone(),
            n => format!("{name} ×{n}"),
        })
        .collect();
    let devices = match gpus.len() {
        0 => "no GPU".to_string(),
        1 => format!("1 GPU ({})", kinds.join(", ")),
        n => format!("{n} GPUs ({})", kinds.join(", ")),
    };
    let mig: usize = gpus.iter().map(|g| g.mig.len()).sum();
    let mig = match mig {
        0 => String::new(),
        1 => ", 1 MIG instance".to_string(),
        n => format!(", {n} MIG instances"),
    };
    let lost = gpus.iter().filter(|g| g.info.lost).count();
    let lost = match lost {
        0 => String::new(),
        n => format!(", {n} lost"),
    };
    let processes = match sample.processes.len() {
        1 => "1 process".to_string(),
        n => format!("{n} processes"),
    };
    format!("first sample written: {devices}{mig}{lost}, {processes}")
}

/// Why the recording stopped, in the words of the one who stopped it.
pub fn stopped_by(stop: Stop, duration: Option<Duration>) -> String {
    match stop {
        Stop::Signal(libc::SIGINT) => "stopped by Ctrl-C (INT)".to_string(),
        Stop::Signal(libc::SIGTERM) => "stopped by TERM".to_string(),
        Stop::Signal(libc::SIGHUP) => "stopped by HUP".to_string(),
        Stop::Signal(other) => format!("stopped by signal {other}"),
        Stop::Duration => format!(
            "stopped after {} (--duration)",
            crate::units::duration(duration.map_or(0.0, |d| d.as_secs_f64()))
        ),
        Stop::SourceGone => "sampling stopped".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opening_line_says_what_where_and_how_it_stops() {
        let line = opening_line(
            "the demo node",
            0.5,
            "n.zst (strata.recording/2, zstd)",
            None,
        );
        assert_eq!(
            line,
            "recording the demo node every 0.5s into n.zst (strata.recording/2, zstd); Ctrl-C (or TERM, HUP) stops it, and what was recorded is saved"
        );
        let line = opening_line("x\x1b[2J", 1.0, "n.zst", Some(Duration::from_secs(1800)));
        assert!(line.contains("stops after 30m00s (--duration)"), "{line}");
        assert!(!line.contains('\x1b'), "{line}");
    }

    #[test]
    fn the_devices_are_counted_by_name() {
        let sample = crate::source::demo::node_at(0, 600.0, 1.0);
        let line = devices_line(&sample);
        let n = sample.gpus.len();
        assert!(
            line.starts_with(&format!("first sample written: {n} GPUs (")),
            "{line}"
        );
        assert!(
            line.ends_with(&format!(", {} processes", sample.processes.len())),
            "{line}"
        );
        let mut none = sample.clone();
        none.gpus.clear();
        none.processes.truncate(1);
        assert_eq!(
            devices_line(&none),
            "first sample written: no GPU, 1 process"
        );
    }
}

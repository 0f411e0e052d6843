//! PyTorch snapshot files: `strata analyze FILE.pickle` reads what
//! `torch.cuda.memory._dump_snapshot()` writes (OOM snapshots included), plain or gzip, and
//! reduces it to the segment map and the allocation sites the agent sends
//! ([`crate::sample::pool`]), with the OOMs of its traces and what the snapshot shows alone
//! (fragmentation, pinned segments).
//!
//! The pieces, in order: [`pickle`] decodes the plain data of the file into a flat arena
//! (never running anything, every size bounded); [`shape`] reads the fields strata uses into
//! typed structures; [`segments`], [`by_site`] and [`ooms`] reduce them; [`findings`] says what
//! they show; [`command`] prints it.

mod by_site;
pub mod command;
mod findings;
mod ooms;
mod pickle;
mod segments;
mod shape;
mod sites;

pub use findings::SnapFinding;
pub use ooms::OomEvent;

use crate::sample::pool::{SegmentsReport, SitesCost, SitesReport, SitesState};
use serde::Serialize;
use std::io::Read;
use std::path::Path;

/// The schema name of `strata analyze FILE.pickle --json`.
pub const SCHEMA: &str = "strata.torch_snapshot/1";

/// What strata reads of a file at most: bytes of pickle (after decompression), values,
/// strings, nesting; segments, blocks, trace entries, frames, devices.
const PICKLE_LIMITS: pickle::Limits = pickle::Limits {
    bytes: 2 << 30,
    values: 1 << 25,
    string: 1 << 20,
    strings: 512 << 20,
    depth: 32,
    marks: 64,
};
const SHAPE_LIMITS: shape::Limits = shape::Limits {
    segments: 1 << 20,
    blocks: 1 << 24,
    entries: 1 << 24,
    frames: 1 << 14,
    devices: 1024,
};

/// Gzip's magic.
const GZIP: [u8; 2] = [0x1f, 0x8b];

/// Whether the bytes begin a pickle of protocol 2 to 5 (what Python 3 writes).
fn pickle_magic(head: &[u8]) -> bool {
    matches!(head, [0x80, 2..=5, ..])
}

/// Whether `path` holds a pickle (plain, or gzip whose data begins as one), told by its
/// content: a snapshot is saved under any name (`snapshot.pickle`, `oom_rank0.pkl`,
/// `mem.bin`), and no recording begins as a pickle does (`{`, format 2's magic, zstd's or
/// gzip's). A name ending `.pickle`, `.pkl` (or either with `.gz`) is read as a snapshot
/// whatever it holds, so that it is refused with why it is not one.
pub fn is_snapshot_file(path: &Path) -> bool {
    if path.as_os_str() == "-" {
        return false;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    if name.ends_with(".pickle") || name.ends_with(".pkl") {
        return true;
    }
    // Only a regular file is looked into: the bytes read of a FIFO would be lost to the
    // recording's reader.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let mut head = [0u8; 2];
    if file.read_exact(&mut head).is_err() {
        return false;
    }
    if pickle_magic(&head) {
        return true;
    }
    if head == GZIP {
        let Ok(file) = std::fs::File::open(path) else {
            return false;
        };
        let mut inner = [0u8; 2];
        let mut gz = flate2::read::MultiGzDecoder::new(file);
        return gz.read_exact(&mut inner).is_ok() && pickle_magic(&inner);
    }
    false
}

/// Why a file could not be read as a snapshot: one line, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    pub line: String,
    pub hint: &'static str,
}

const HINT_DUMP: &str =
    "strata reads what `torch.cuda.memory._dump_snapshot(PATH)` writes, plain or gzip";
const HINT_BOUND: &str = "strata bounds what it reads of a file; record fewer entries (`_record_memory_history(max_entries=N)`)";

fn read_error(e: pickle::PickleError, gzip: bool) -> ReadError {
    use pickle::PickleError as E;
    let hint = match &e {
        E::Truncated(_) => "the job may have been killed while it wrote the file; dump the snapshot again",
        E::Protocol(_) => "re-pickle it with `pickle.dump(snapshot, f)` (protocol 4 or 5)",
        E::TooLarge(_) if gzip => "a gzip bomb, or a snapshot larger than strata reads; record fewer entries (`_record_memory_history(max_entries=N)`)",
        E::TooLarge(_)
        | E::TooManyValues(_)
        | E::LongString { .. }
        | E::TooMuchText(_)
        | E::TooDeep(_)
        | E::TooManyMarks(_)
        | E::LongInt { .. } => HINT_BOUND,
        E::Io(_) if gzip => "its gzip data is corrupt; dump the snapshot again",
        _ => HINT_DUMP,
    };
    let line = match e {
        E::TooLarge(n) if gzip => format!("it decompresses to more than {n} bytes"),
        E::Io(why) if gzip => format!("reading its gzip data failed: {why}"),
        other => other.to_string(),
    };
    ReadError { line, hint }
}

/// A snapshot file read: what it holds and how big it was.
pub(crate) struct SnapshotFile {
    snapshot: shape::Snapshot,
    bytes: u64,
    gzip: bool,
    modified: Option<f64>,
}

/// Counts the bytes a reader gives.
struct Counted<R> {
    inner: R,
    count: u64,
}

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        Ok(n)
    }
}

/// Reads the snapshot in `path`.
pub(crate) fn read(path: &Path) -> Result<SnapshotFile, ReadError> {
    let io = |e: std::io::Error| ReadError {
        line: e.to_string(),
        hint: HINT_DUMP,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(ReadError {
            line: "it is a directory".into(),
            hint: HINT_DUMP,
        });
    }
    if meta.len() > PICKLE_LIMITS.bytes {
        return Err(ReadError {
            line: format!(
                "it is {} bytes, more than the {} strata reads",
                meta.len(),
                PICKLE_LIMITS.bytes
            ),
            hint: HINT_BOUND,
        });
    }
    let modified = meta
        .modified()
        .ok()
        .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64());
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, file);
    let gzip = {
        use std::io::BufRead;
        reader.fill_buf().map_err(io)?.starts_with(&GZIP)
    };
    let (decoded, bytes) = if gzip {
        let mut counted = Counted {
            inner: flate2::bufread::MultiGzDecoder::new(reader),
            count: 0,
        };
        let p = pickle::decode(&mut counted, PICKLE_LIMITS);
        (p, counted.count)
    } else {
        (pickle::decode(reader, PICKLE_LIMITS), meta.len())
    };
    let decoded = decoded.map_err(|e| read_error(e, gzip))?;
    let snapshot = shape::read(&decoded, SHAPE_LIMITS).map_err(|e| ReadError {
        hint: match e {
            shape::ShapeError::Bound(_) => HINT_BOUND,
            _ => HINT_DUMP,
        },
        line: match e {
            shape::ShapeError::NotSnapshot(what) => format!("it is {what}"),
            other => other.to_string(),
        },
    })?;
    Ok(SnapshotFile {
        snapshot,
        bytes,
        gzip,
        modified,
    })
}

/// How the file was read.
#[derive(Debug, Clone, Serialize)]
pub struct Source {
    /// Bytes of pickle (after decompression).
    pub bytes: u64,
    pub gzip: bool,
    pub segments: u64,
    pub blocks: u64,
    /// Trace entries over every device; `None` where the file has no traces.
    pub entries: Option<u64>,
    /// Distinct stacks of frames.
    pub stacks: u64,
}

/// What a snapshot file shows: `strata analyze FILE.pickle --json`.
#[derive(Debug, Clone, Serialize)]
pub struct TorchSnapshot {
    pub schema: &'static str,
    pub source: Source,
    pub segments: SegmentsReport,
    pub sites: SitesReport,
    pub ooms: Vec<OomEvent>,
    pub findings: Vec<SnapFinding>,
}

/// The snapshot's reduction.
pub(crate) fn analyze(read: &SnapshotFile) -> TorchSnapshot {
    let s = &read.snapshot;
    let times = s
        .traces
        .iter()
        .flat_map(|(_, e)| e.iter().filter_map(|e| e.time_us));
    let (first, last) = times.fold((None, None), |(lo, hi): (Option<i64>, Option<i64>), t| {
        (
            Some(lo.map_or(t, |l| l.min(t))),
            Some(hi.map_or(t, |h| h.max(t))),
        )
    });
    let time = read
        .modified
        .or(last.map(|t| t as f64 / 1e6))
        .unwrap_or(0.0);
    let entries: u64 = s.traces.iter().map(|(_, e)| e.len() as u64).sum();
    let devices = segments::reduce(&s.segments);
    let sites = SitesReport {
        time,
        id: 0,
        state: SitesState::Done,
        reason: None,
        started: first.map(|t| t as f64 / 1e6),
        seconds: None,
        window: match (first, last) {
            (Some(a), Some(b)) => Some((b - a) as f64 / 1e6),
            _ => None,
        },
        history: None,
        entries: s.has_traces.then_some(entries),
        dropped: None,
        cost: SitesCost::default(),
        stopped: None,
        devices: by_site::reduce(&s.segments, &s.traces, &s.stacks),
    };
    let mut ooms = Vec::new();
    let mut findings = Vec::new();
    let mut indexes: Vec<u32> = s.segments.iter().map(|g| g.device).collect();
    indexes.extend(s.traces.iter().map(|(d, _)| *d));
    indexes.sort_unstable();
    indexes.dedup();
    for device in indexes {
        let segs: Vec<&shape::Segment> = s.segments.iter().filter(|g| g.device == device).collect();
        let expandable = s
            .expandable_setting
            .or(segs.iter().any(|g| g.expandable).then_some(true));
        if let Some((_, entries)) = s.traces.iter().find(|(d, _)| *d == device) {
            let found = ooms::ooms(device, entries, &segs, &s.stacks, expandable);
            findings.extend(found.iter().map(findings::of_oom));
            ooms.extend(found);
        }
        findings.extend(findings::findings(device, &segs, s.expandable_setting));
    }
    TorchSnapshot {
        schema: SCHEMA,
        source: Source {
            bytes: read.bytes,
            gzip: read.gzip,
            segments: s.segments.len() as u64,
            blocks: s.segments.iter().map(|g| g.blocks.len() as u64).sum(),
            entries: s.has_traces.then_some(entries),
            stacks: s.stacks.len() as u64,
        },
        segments: SegmentsReport {
            time,
            took: None,
            devices,
        },
        sites,
        ooms,
        findings,
    }
}

#[cfg(test)]
mod tests;

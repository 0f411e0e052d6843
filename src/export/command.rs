//! `strata export FILE --to parquet|csv OUT` from the command line. The recording is read
//! as `strata analyze` reads it (its progress on a terminal's stderr), and the exit status
//! says what reading lost, as analyze's does:
//! - 0: every sample was read (a cut last line, the sample in flight when the recorder
//!   stopped, is not a loss), the tables are written;
//! - [`LOST`] (3): the tables of what was read are written, but part of the recording was
//!   lost (lines that are not samples, corrupt data, samples whose keyframe was lost): one
//!   line on stderr says what;
//! - 1: nothing was written (the recording cannot be read, OUT cannot take the tables, a
//!   table could not be written), or reading stopped before the end of the recording (the
//!   tables hold the samples before): one line on stderr says why, with a hint.

use super::out::{self, Out};
use super::tables::{self, ProcessRows, Table};
use super::{writer, Format, Origin, TableWriter};
use crate::analyze::command::LOST;
use crate::recording::{Lines, ReadError};
use std::io;
use std::ops::ControlFlow;
use std::path::Path;

fn shown(path: &Path) -> String {
    let text = if path.as_os_str() == "-" {
        "standard input".to_string()
    } else {
        path.display().to_string()
    };
    crate::text::clean(&text).into_owned()
}

/// The three tables' writers, each into its hidden file in `out`.
fn writers(
    out: &mut Out,
    format: Format,
    origin: &Origin,
) -> Result<[Box<dyn TableWriter>; 3], String> {
    let mut open = |table: &'static Table| -> Result<Box<dyn TableWriter>, String> {
        let name = format!("{}.{}", table.name, format.extension());
        let file = out.create(&name).map_err(|e| e.to_string())?;
        writer(format, table, file, origin).map_err(|e| format!("cannot write {name}: {e}"))
    };
    Ok([
        open(&tables::DEVICES)?,
        open(&tables::PROCESSES)?,
        open(&tables::FINDINGS)?,
    ])
}

const WRITE_HINT: &str = "check the free space and permissions where OUT is";

/// Runs `strata export` of `path` (`-`: standard input) into the directory `out_dir`;
/// returns the exit status.
pub fn run(
    path: &Path,
    format: Format,
    out_dir: &Path,
    force: bool,
    context_bytes: Option<u64>,
) -> u8 {
    let shown_in = shown(path);
    let shown_out = shown(out_dir);
    if !format.available() {
        eprintln!(
            "strata: cannot export to {}: this strata was built without it (the cargo feature `{}`) (hint: --to csv, or a strata built with its default features)",
            format.extension(),
            format.extension()
        );
        return 1;
    }
    if let Err(e) = out::check(out_dir, force) {
        eprintln!(
            "strata: cannot export into {shown_out}: {e} (hint: {})",
            e.hint()
        );
        return 1;
    }
    let lines = match Lines::open(path) {
        Ok(lines) => lines,
        Err(e) => {
            let hint = match e {
                ReadError::Io(_) => {
                    "record one with `strata record FILE`, or `strata snapshot --json --count N > FILE`"
                }
                ref other => other.hint(),
            };
            eprintln!("strata: cannot read the recording {shown_in}: {e} (hint: {hint})");
            return 1;
        }
    };
    let mut out = match Out::open(out_dir) {
        Ok(out) => out,
        Err(e) => {
            eprintln!(
                "strata: cannot export into {shown_out}: {e} (hint: {})",
                e.hint()
            );
            return 1;
        }
    };
    let origin = Origin {
        recording: path.display().to_string(),
    };
    let [mut devices, mut processes, findings] = match writers(&mut out, format, &origin) {
        Ok(writers) => writers,
        Err(e) => {
            eprintln!("strata: cannot export into {shown_out}: {e} (hint: {WRITE_HINT})");
            return 1;
        }
    };
    let progress = crate::recording::progress::on_stderr(lines.progress().clone(), &shown_in);
    let mut rows = ProcessRows::default();
    let mut failed: Option<io::Error> = None;
    let clock = crate::analyze::Clock::Coarse;
    let analysis = crate::analyze::analyze_observing(lines, context_bytes, clock, |observed| {
        let written = tables::device_rows(observed, &mut |cells| devices.row(cells))
            .and_then(|()| rows.rows(observed, &mut |cells| processes.row(cells)));
        match written {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                failed = Some(e);
                ControlFlow::Break(())
            }
        }
    });
    drop(progress);
    if let Some(e) = failed {
        eprintln!("strata: cannot write the tables into {shown_out}: {e} (hint: {WRITE_HINT})");
        return 1;
    }
    if let (Some(error), 0) = (&analysis.read_error, analysis.samples) {
        let hint = analysis.read_hint.unwrap_or("check the file");
        let error = crate::text::clean(error);
        eprintln!("strata: cannot read the recording {shown_in}: {error} (hint: {hint})");
        return 1;
    }
    if let Some(why) = crate::analyze::command::nothing_read(&analysis, &shown_in) {
        // No table is left behind (the output directory is only made by the commit).
        eprintln!("strata: {why}");
        return 1;
    }
    let written = finish(devices, processes, findings, &analysis.findings);
    let counts = match written.map_err(|e| e.to_string()).and_then(|counts| {
        out.commit().map_err(|e| e.to_string())?;
        Ok(counts)
    }) {
        Ok(counts) => counts,
        Err(e) => {
            eprintln!("strata: cannot write the tables into {shown_out}: {e} (hint: {WRITE_HINT})");
            return 1;
        }
    };
    let ext = format.extension();
    println!(
        "{} sample(s) of {shown_in} exported into {shown_out}: devices.{ext} ({} rows), processes.{ext} ({} rows), findings.{ext} ({} rows)",
        analysis.samples, counts[0], counts[1], counts[2]
    );
    if let Some(error) = &analysis.read_error {
        let hint = analysis.read_hint.unwrap_or("check the file");
        eprintln!(
            "strata: reading the recording {shown_in} stopped: {}; the tables hold the {} sample(s) before (hint: {hint})",
            crate::text::clean(error),
            analysis.samples
        );
        return 1;
    }
    if analysis.lost_some() {
        eprintln!(
            "strata: part of the recording {shown_in} was lost: {}; the tables hold what was read (hint: `strata analyze FILE --json` lists what was lost, line by line)",
            crate::analyze::command::lost(&analysis)
        );
        return LOST;
    }
    0
}

/// The findings written, then every table finished; the rows of each.
fn finish(
    devices: Box<dyn TableWriter>,
    processes: Box<dyn TableWriter>,
    mut findings: Box<dyn TableWriter>,
    episodes: &[crate::analyze::Episode],
) -> io::Result<[u64; 3]> {
    for e in episodes {
        findings.row(&tables::finding_row(e))?;
    }
    Ok([devices.finish()?, processes.finish()?, findings.finish()?])
}

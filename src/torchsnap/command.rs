//! `strata analyze FILE.pickle`: a PyTorch snapshot file read and printed, as text (the
//! segment map of each device, the sites that hold and grow, the OOMs, the findings) or as
//! `strata.torch_snapshot/1` JSON. Exit status: 0 when it was read; 1 when it could not be
//! (one line on stderr says why, with a hint; nothing on stdout).

use super::TorchSnapshot;
use crate::present::pool_text;
use crate::units::{bytes, clock};
use std::io::Write;
use std::path::Path;

/// The text's width.
const WIDTH: usize = 100;
/// Sites listed a device in the text (the JSON has the top 50).
const TOP: usize = 10;

/// `strata analyze FILE` where FILE is a snapshot: the options that judge a recording's
/// samples (`--report-at`, `--every-sample`, `--context-mib`) have nothing to act on, and
/// are refused in one line (exit status 2, as for any usage error); else [`run`].
pub fn analyze_args(
    path: &Path,
    json: bool,
    report_at: bool,
    every_sample: bool,
    context: bool,
) -> u8 {
    let refused = [
        (report_at, "--report-at"),
        (every_sample, "--every-sample"),
        (context, "--context-mib"),
    ]
    .into_iter()
    .find_map(|(given, option)| given.then_some(option));
    if let Some(option) = refused {
        let shown = crate::text::clean(&path.display().to_string()).into_owned();
        eprintln!(
            "strata: {option} judges the samples of a recording, and {shown} is a PyTorch snapshot (hint: `strata analyze {shown}` prints its segment map, sites and OOMs)"
        );
        return 2;
    }
    run(path, json)
}

/// Runs `strata analyze` on the snapshot `path`; returns the exit status.
pub fn run(path: &Path, json: bool) -> u8 {
    let shown = crate::text::clean(&path.display().to_string()).into_owned();
    let read = match super::read(path) {
        Ok(read) => read,
        Err(e) => {
            eprintln!(
                "strata: cannot read the PyTorch snapshot {shown}: {} (hint: {})",
                crate::text::clean(&e.line),
                e.hint
            );
            return 1;
        }
    };
    let analysis = super::analyze(&read);
    drop(read);
    let printed = {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let written = if json {
            serde_json::to_writer(&mut out, &analysis)
                .map_err(std::io::Error::from)
                .and_then(|()| writeln!(out))
        } else {
            out.write_all(text(&analysis, &shown).as_bytes())
        };
        written.and_then(|()| out.flush())
    };
    match printed {
        Ok(()) => 0,
        // The reader has gone (`strata analyze FILE | head`): it has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("strata: cannot write the analysis: {e}");
            1
        }
    }
}

/// The text of a snapshot's analysis.
pub fn text(a: &TorchSnapshot, shown: &str) -> String {
    let mut lines = Vec::new();
    let s = &a.source;
    let entries = s.entries.map_or_else(
        || "no trace".into(),
        |n| format!("{} trace entries", crate::present::grouped(n)),
    );
    lines.push(format!(
        "PyTorch memory snapshot {} ({} of pickle{}): {} segments, {} blocks, {entries}",
        crate::present::fit(shown, 60),
        bytes(s.bytes),
        if s.gzip { ", gzip" } else { "" },
        crate::present::grouped(s.segments),
        crate::present::grouped(s.blocks),
    ));
    lines.push(String::new());
    lines.push("Segments".into());
    lines.extend(pool_text::segments(&a.segments, WIDTH));
    lines.push(String::new());
    lines.push(if a.sites.entries.is_some() {
        "Sites: live blocks by where they were allocated; growth over the whole trace".into()
    } else {
        "Sites: live blocks by where they were allocated (the file has no trace: no growth)".into()
    });
    lines.extend(pool_text::sites(&a.sites, TOP, WIDTH));
    lines.push(String::new());
    if a.ooms.is_empty() {
        lines.push("OOMs: none in the trace".into());
    } else {
        lines.push("OOMs".into());
        for o in &a.ooms {
            lines.extend(oom_lines(o));
        }
    }
    lines.push(String::new());
    if a.findings.is_empty() {
        lines.push("Findings: none".into());
    } else {
        lines.push("Findings".into());
        for f in &a.findings {
            lines.push(format!(
                "  device {}: {}",
                f.device,
                crate::text::clean(&f.message)
            ));
            for advice in &f.advice {
                lines.push(format!("    - {advice}"));
            }
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

fn oom_lines(o: &super::OomEvent) -> Vec<String> {
    let when = o
        .time
        .map_or_else(|| "(no time)".into(), |t| format!("at {} UTC", clock(t)));
    let mut out = vec![format!(
        "  device {} {when}: asked for {}, CUDA had {} free",
        o.device,
        crate::units::opt_bytes(o.requested),
        crate::units::opt_bytes(o.device_free)
    )];
    if let Some(site) = &o.site {
        out.push(format!(
            "    asked at {}",
            crate::present::fit(site, WIDTH - 13)
        ));
    }
    match (o.reserved, o.live, o.pending_free, o.split_free) {
        (Some(r), Some(l), Some(p), Some(f)) => out.push(format!(
            "    the pool then: {} reserved, {} live, {} pending free, {} free in segments that hold live blocks",
            bytes(r),
            bytes(l),
            bytes(p),
            bytes(f)
        )),
        _ => out.push("    the pool then: not known (the trace after it does not add up to the snapshot)".into()),
    }
    out.push(match o.largest_free {
        Some(b) => format!(
            "    largest free block then: {} (no allocator event after it: the snapshot is the pool at the OOM)",
            bytes(b)
        ),
        None => format!(
            "    largest free block then: n/a ({} allocator events after it changed the pool before the snapshot)",
            crate::present::grouped(o.events_after)
        ),
    });
    out.push(format!("    {}: {}", o.class, crate::text::clean(&o.why)));
    out
}

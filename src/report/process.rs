//! The processes of the report: who holds what, each fed process reconciled with its
//! allocator's figures, peaks and the interval each holds over; and the last OOM.

use super::markdown::{code, count, escape, figure, offset, opt_escape, Clock};
use super::{held_peak, HeldPeak};
use crate::accounting::{FeedStatus, ProcessAccount};
use crate::context::ContextSource;
use crate::detect::device_name;
use crate::history::{History, KeyRef, Metric};
use crate::layers::Layer;
use crate::pipeline::Observed;
use crate::present::{metric_names, peak_words};
use crate::sample::{AllocatorStats, ProcessSample};
use std::fmt::Write;

pub(super) fn processes(out: &mut String, observed: &Observed, history: &History, clock: Clock) {
    let s = &observed.sample;
    let _ = writeln!(out, "## Processes\n");
    if s.processes.is_empty() {
        let _ = writeln!(
            out,
            "NVML lists no process on any device at this instant.\n"
        );
        return;
    }
    let _ = writeln!(
        out,
        "| PID | user | owner | device | command | framework | NVML `used` (per process) | feed |\n\
         |---:|---|---|---|---|---|---|---|"
    );
    for (p, acc) in s.processes.iter().zip(&observed.account.processes) {
        let framework = p.feed.as_ref().map_or_else(
            || "n/a".into(),
            |f| {
                format!(
                    "{} {}",
                    escape(&f.framework),
                    opt_escape(f.framework_version.as_deref())
                )
            },
        );
        let command = match (&p.command, p.visible, p.hidden) {
            (Some(command), _, _) => escape(command),
            (None, _, true) => "n/a (hidden by /proc)".into(),
            (None, false, false) => "n/a (not in this /proc)".into(),
            (None, true, false) => "n/a".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {command} | {framework} | {} | {} |",
            p.pid,
            opt_escape(p.user.as_deref()),
            owner_words(p),
            escape(&device_name(s, &p.device_uuid)),
            figure(p.used),
            feed_word(&acc.feed_status)
        );
    }
    out.push('\n');
    for (p, acc) in s.processes.iter().zip(&observed.account.processes) {
        if p.feed.is_some() {
            fed(out, observed, history, clock, p, acc);
        }
    }
}

/// The owner in the processes table: its short form and where its kind was read
/// (`pod train/llama-7b-0 (cgroup, pod_logs)`); `none`, or `n/a` with why.
fn owner_words(p: &crate::sample::ProcessSample) -> String {
    let Some(owner) = p.owner.as_deref() else {
        return match p.visible {
            true => "n/a".into(),
            false => "n/a (not in this /proc)".into(),
        };
    };
    let mut sources: Vec<&str> = owner.source.values().map(String::as_str).collect();
    sources.sort_unstable();
    sources.dedup();
    match owner.short() {
        Some(short) if sources.is_empty() => escape(&short),
        Some(short) => format!("{} ({})", escape(&short), escape(&sources.join(", "))),
        None => "none".into(),
    }
}

fn feed_word(status: &FeedStatus) -> String {
    match status {
        FeedStatus::Absent => "none".into(),
        FeedStatus::Refused { reason } => format!("refused: {}", escape(reason)),
        FeedStatus::Pending { reason, kind } => format!("{}: {}", kind.label(), escape(reason)),
        FeedStatus::Fresh { .. } => "fresh".into(),
        FeedStatus::Stale { age } => format!("stale ({age:.1} s from NVML's reading)"),
        FeedStatus::Inconsistent { reason } => format!("inconsistent: {}", escape(reason)),
    }
}

fn context_note(source: Option<ContextSource>) -> &'static str {
    match source {
        Some(ContextSource::Observed) => {
            "observed: NVML `used` while the pool was empty, at a reading paired with the pool"
        }
        Some(ContextSource::Reported) => {
            "reported: the agent's own NVML `used` right after CUDA init, while its pool was empty"
        }
        Some(ContextSource::Estimated) => {
            "estimated: the smallest `used` − reserved over paired readings (an upper bound)"
        }
        Some(ContextSource::Fixed) => "fixed by `--context-mib`",
        Some(ContextSource::Unsplit) => {
            "unsplit: `used` − reserved, context and memory outside the pool together"
        }
        None => "n/a",
    }
}

/// One row: figure, metric name, value, and the instant or interval it holds for.
fn row(out: &mut String, figure_name: &str, metric: &str, value: &str, holds: &str) {
    let _ = writeln!(out, "| {figure_name} | {metric} | {value} | {holds} |");
}

fn fed(
    out: &mut String,
    observed: &Observed,
    history: &History,
    clock: Clock,
    p: &ProcessSample,
    acc: &ProcessAccount,
) {
    let Some(feed) = &p.feed else { return };
    let s = &observed.sample;
    let stats = &feed.stats;
    let names = metric_names(&feed.framework);
    let _ = writeln!(
        out,
        "### PID {} · {}\n",
        p.pid,
        escape(&device_name(s, &p.device_uuid))
    );
    let _ = writeln!(
        out,
        "Command {} · user {} · device UUID {}\n",
        opt_escape(p.command.as_deref()),
        opt_escape(p.user.as_deref()),
        escape(&p.device_uuid)
    );
    let _ = writeln!(
        out,
        "Framework {} {} · allocator backend {} (from the feed's `hello`)\n",
        escape(&feed.framework),
        opt_escape(feed.framework_version.as_deref()),
        escape(&feed.backend)
    );
    let nvml_at = format!("NVML's reading at {}", clock.at(s.time));
    let feed_at = format!(
        "the feed's sample of {}, {}",
        clock.at(stats.time),
        offset(stats.time - s.time, "NVML's reading")
    );
    let pairing = match &acc.feed_status {
        FeedStatus::Fresh { .. } => {
            "fresh (within three intervals of NVML's reading): combined with it into layers"
        }
        FeedStatus::Stale { .. } => {
            "stale (more than three intervals from NVML's reading): shown, not combined with it"
        }
        FeedStatus::Inconsistent { .. } => {
            "inconsistent with NVML's reading: shown, not combined with it"
        }
        _ => "not combined with NVML's reading",
    };
    let _ = writeln!(
        out,
        "The allocator's figures are {feed_at}: {pairing}. NVML's figures are of {nvml_at}.\n"
    );
    let _ = writeln!(
        out,
        "| figure | metric | value | holds for |\n|---|---|---|---|"
    );
    let at_feed = format!("the feed's sample ({})", clock.at(stats.time));
    let at_nvml = format!("NVML's reading ({})", clock.at(s.time));
    row(
        out,
        "used",
        "NVML `usedGpuMemory` (per process)",
        &figure(p.used),
        &at_nvml,
    );
    row(
        out,
        "allocated",
        &code(names.allocated),
        &figure(Some(stats.allocated)),
        &at_feed,
    );
    row(
        out,
        "reserved",
        &code(names.reserved),
        &figure(stats.reserved),
        &at_feed,
    );
    row(
        out,
        Layer::Fragmented.name(),
        &code(names.inactive_split),
        &figure(stats.inactive_split),
        &at_feed,
    );
    let largest_at = stats
        .largest_free_block_time
        .map_or_else(|| "n/a".into(), |t| format!("measured at {}", clock.at(t)));
    row(
        out,
        "largest free block",
        "largest `inactive` block of the pool",
        &figure(stats.largest_free_block),
        &largest_at,
    );
    let reset = allocator_peak_interval(&feed.framework, p, clock, s.time);
    row(
        out,
        "peak allocated (allocator)",
        &code(names.peak_allocated),
        &figure(stats.peak_allocated),
        &reset,
    );
    row(
        out,
        "peak reserved (allocator)",
        &code(names.peak_reserved),
        &figure(stats.peak_reserved),
        &reset,
    );
    let series = |metric| held_peak(history.get(&KeyRef::of(p, metric)));
    let peak_row = |out: &mut String, name: &str, metric: String, peak: Option<HeldPeak>| {
        let holds = peak
            .as_ref()
            .map_or_else(|| "no history held".into(), |h| h.over(clock));
        row(out, name, &metric, &figure(peak.map(|h| h.max)), &holds);
    };
    peak_row(
        out,
        "peak allocated (strata)",
        format!("max of {} seen", code(names.allocated)),
        series(Metric::Allocated),
    );
    peak_row(
        out,
        "peak reserved (strata)",
        format!("max of {} seen", code(names.reserved)),
        series(Metric::Reserved),
    );
    peak_row(
        out,
        "peak used (strata)",
        "max of NVML `usedGpuMemory` seen".into(),
        series(Metric::Used),
    );
    let l = &acc.layers;
    let bounds = acc.bounds();
    let bounded =
        |layer: crate::layers::Layer, value: Option<u64>| match (value, bounds.get(&layer)) {
            (Some(_), Some(bound)) => format!("{} {}", bound.mark(), figure(value)),
            _ => figure(value),
        };
    row(
        out,
        Layer::Context.name(),
        "CUDA context",
        &bounded(crate::layers::Layer::Context, l.context),
        context_note(acc.context_source),
    );
    let outside_holds = match bounds.get(&crate::layers::Layer::OutsidePool) {
        Some(_) => format!("{at_nvml}; a lower bound, beside an estimated context"),
        None => at_nvml.clone(),
    };
    row(
        out,
        Layer::OutsidePool.name(),
        "NVML `usedGpuMemory` − reserved − context",
        &bounded(crate::layers::Layer::OutsidePool, l.outside_pool),
        &outside_holds,
    );
    let room = observed
        .sample
        .processes
        .iter()
        .position(|q| std::ptr::eq(q, p))
        .and_then(|i| observed.headroom.get(i).copied().flatten());
    if let Some(room) = room {
        let value = if room.bytes < 0 {
            format!("−{}", figure(Some(room.bytes.unsigned_abs())))
        } else {
            figure(Some(room.bytes.unsigned_abs()))
        };
        row(
            out,
            "headroom",
            &format!(
                "NVML `free` + reserved − fragmented ({}) − the peak of live tensors ({})",
                figure(Some(room.usable_bytes)),
                figure(Some(room.peak_live_bytes))
            ),
            &value,
            &format!("now, against {}", peak_words(&room)),
        );
    }
    row(
        out,
        Layer::Cached.name(),
        "reserved − allocated − fragmented",
        &figure(l.cached),
        &at_feed,
    );
    if stats.reserved.is_none() {
        // No pool figure: what NVML sees beyond the live tensors is not split.
        row(
            out,
            "not split",
            "NVML `usedGpuMemory` − allocated (the pool is not reported)",
            &figure(l.unattributed),
            &at_nvml,
        );
    }
    let counters = "count since the allocator started";
    row(
        out,
        "allocation retries",
        &code(names.retries),
        &count(stats.alloc_retries),
        counters,
    );
    row(out, "OOMs", &code(names.ooms), &count(stats.ooms), counters);
    out.push('\n');
    unreported(out, stats);
    super::pool::section(out, s, feed, clock);
}

/// Why the feed left figures out, as the agent said.
fn unreported(out: &mut String, stats: &AllocatorStats) {
    if stats.unreported.is_empty() {
        return;
    }
    let _ = writeln!(out, "Not reported by the allocator:\n");
    for (field, why) in &stats.unreported {
        let _ = writeln!(out, "- {}: {}", escape(field), escape(why));
    }
    out.push('\n');
}

/// The interval the allocator's own peaks hold over: what is known of it, and no more.
fn allocator_peak_interval(framework: &str, p: &ProcessSample, clock: Clock, now: f64) -> String {
    let started = p.elapsed.map_or_else(
        || "the process's start time is n/a".into(),
        |e| {
            format!(
                "the process started at {}, {} before this instant",
                clock.at(now - e as f64),
                crate::units::duration(e as f64)
            )
        },
    );
    let reset = match framework {
        "torch" => "since the process started or `torch.cuda.reset_peak_memory_stats()` was last called, whichever is later (the feed does not say which)",
        _ => "since the allocator's peak counters were last reset, at the latest since the process started (the feed does not say when)",
    };
    format!("{reset}; {started}")
}

//! The last OOM any feed reported: who, where, when, what it asked for, and its class.

use super::markdown::{code, escape, figure, Clock};
use crate::detect::device_name;
use crate::pipeline::Observed;
use crate::present::metric_names;
use crate::sample::AllocatorStats;
use std::fmt::Write;

pub(super) fn last_oom(out: &mut String, observed: &Observed, clock: Clock) {
    let s = &observed.sample;
    let _ = writeln!(out, "## Last OOM\n");
    let latest = s
        .feeds
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_trusted())
        .flat_map(|(i, r)| r.ooms.iter().map(move |o| (i, r, o)))
        .max_by(|a, b| a.2.time.total_cmp(&b.2.time));
    let counted: Vec<String> = s
        .processes
        .iter()
        .filter_map(|p| {
            let n = p.feed.as_ref()?.stats.ooms.filter(|&n| n > 0)?;
            Some(format!(
                "PID {} on {}: {n}",
                p.pid,
                escape(&device_name(s, &p.device_uuid))
            ))
        })
        .collect();
    let Some((feed_index, record, oom)) = latest else {
        let _ = writeln!(
            out,
            "No feed reported an out-of-memory error (its `oom` message, from the allocator's \
             OOM observer).{}\n",
            if counted.is_empty() {
                String::new()
            } else {
                format!(
                    " The allocators' OOM counters are above 0 for: {}.",
                    counted.join("; ")
                )
            }
        );
        return;
    };
    let process = s.processes.iter().find(|p| {
        p.feed
            .as_ref()
            .is_some_and(|f| f.feed == feed_index && f.stats.index == oom.index)
    });
    let pid = record
        .pid()
        .map_or_else(|| "n/a".into(), |pid| pid.to_string());
    let place = process.map_or_else(
        || format!("framework device {}", oom.index),
        |p| escape(&device_name(s, &p.device_uuid)),
    );
    let fallback = AllocatorStats::default();
    let stats = process
        .and_then(|p| p.feed.as_ref().map(|f| &f.stats))
        .unwrap_or(&fallback);
    let (class, why) = crate::detect::diagnosis::classify(Some(oom), stats);
    let _ = writeln!(
        out,
        "PID {pid} on {place}, at {} ({} before this instant): **{class}**: {}.\n",
        clock.at(oom.time),
        crate::units::duration(s.time - oom.time),
        escape(&why)
    );
    let _ = writeln!(out, "| figure | metric | value |\n|---|---|---|");
    let _ = writeln!(
        out,
        "| requested | OOM observer `alloc_size` | {} |",
        figure(oom.requested)
    );
    let _ = writeln!(
        out,
        "| device free | OOM observer `device_free` | {} |",
        figure(oom.device_free)
    );
    let _ = writeln!(
        out,
        "| device total | OOM observer `device_total` (or the allowed maximum) | {} |",
        figure(oom.device_total)
    );
    let at = oom.stats.as_ref();
    let framework = process
        .and_then(|p| p.feed.as_ref())
        .map_or("", |f| f.framework.as_str());
    let names = metric_names(framework);
    for (name, metric, value) in [
        (
            "allocated at the OOM",
            code(names.allocated),
            at.map(|a| a.allocated),
        ),
        (
            "reserved at the OOM",
            code(names.reserved),
            at.and_then(|a| a.reserved),
        ),
        (
            "fragmented at the OOM",
            code(names.inactive_split),
            at.and_then(|a| a.inactive_split),
        ),
        (
            "largest free block at the OOM",
            "largest `inactive` block of the pool".to_string(),
            at.and_then(|a| a.largest_free_block),
        ),
    ] {
        let _ = writeln!(out, "| {name} | {metric} | {} |", figure(value));
    }
    out.push('\n');
    if !counted.is_empty() {
        let _ = writeln!(
            out,
            "The allocators' OOM counters (count since each started): {}.\n",
            counted.join("; ")
        );
    }
}

//! Checks that a trace of the corpus is a recording a real node could have made, so that the
//! corpus cannot drift (`tests/corpus.rs`): every line parses as strata's raw sample with
//! the fields the generator promises, NVML's figures add up, and every fed process's NVML
//! `used` is its context + outside_pool + reserved, to the byte (against the generator's
//! truth, carried in each process's `layers`).

use super::{Labels, CAUSES, CLASSES, KINDS};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// How far before NVML's reading the feed is sampled, in seconds (with the poll's jitter).
const FEED_LAG: (f64, f64) = (0.1 - 0.05, 0.4 + 0.05);
const INTERVAL: f64 = 5.0;

const LINE_KEYS: [&str; 9] = [
    "time",
    "interval",
    "host",
    "driver_version",
    "cuda_driver_version",
    "host_pid_namespace",
    "gpus",
    "processes",
    "feeds",
];
const GPU_KEYS: [&str; 10] = [
    "index",
    "uuid",
    "name",
    "pci_bus_id",
    "memory",
    "utilization_gpu",
    "mig_mode",
    "lost",
    "processes_known",
    "mig",
];
const PROCESS_KEYS: [&str; 12] = [
    "pid",
    "device_uuid",
    "used",
    "kind",
    "visible",
    "proc_state",
    "start_time",
    "user",
    "command",
    "executable",
    "sm_util",
    "layers",
];
const FEED_KEYS: [&str; 11] = [
    "socket",
    "found_via",
    "peer",
    "nspid",
    "state",
    "hello",
    "devices",
    "ooms",
    "counters",
    "connected_at",
    "last_heard",
];
const STATS_KEYS: [&str; 15] = [
    "index",
    "seq",
    "time",
    "allocated",
    "reserved",
    "inactive_split",
    "active",
    "peak_allocated",
    "peak_reserved",
    "alloc_retries",
    "ooms",
    "device_allocs",
    "device_frees",
    "largest_free_block",
    "reserved_since",
];
const OOM_KEYS: [&str; 7] = [
    "time",
    "seq",
    "index",
    "requested",
    "device_free",
    "device_total",
    "stats",
];
/// Counters of one allocator that never go down while its feed is connected.
const MONOTONIC: [&str; 6] = [
    "seq",
    "alloc_retries",
    "ooms",
    "device_allocs",
    "device_frees",
    "peak_reserved",
];

/// What was seen of a trace, for checking its labels against it.
#[derive(Debug, Default)]
pub struct Seen {
    pub first_time: f64,
    pub last_time: f64,
    /// GPU UUIDs.
    pub gpus: BTreeSet<String>,
    /// (pid, device UUID) of every process listed.
    pub holders: BTreeSet<(u64, String)>,
}

/// The previous line's latest statistics of one feed connection.
struct Previous {
    line: usize,
    stats: Value,
}

/// Every problem with one trace's lines (at most a few per line), and what it holds.
pub fn check_lines(text: &str) -> (Vec<String>, Seen) {
    let mut problems = Vec::new();
    let mut seen = Seen::default();
    let mut previous_time: Option<f64> = None;
    let mut feeds: BTreeMap<(u64, u64), Previous> = BTreeMap::new();
    let mut count = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        count += 1;
        let mut say = |what: String| problems.push(format!("line {line}: {what}"));
        let value: Value = match serde_json::from_str(raw) {
            Ok(v) => v,
            Err(e) => {
                say(format!("not JSON: {e}"));
                continue;
            }
        };
        if let Err(e) = serde_json::from_value::<strata::sample::NodeSample>(value.clone()) {
            say(format!("not a strata raw sample: {e}"));
        }
        // The snapshot's derived form (an older recording's): each fed process's allocator
        // figures in its `feed`, no raw `feeds`.
        let derived = value.get("feeds").is_none()
            && array(&value, "processes")
                .iter()
                .any(|p| p.get("feed").is_some());
        for key in LINE_KEYS {
            if value.get(key).is_none() && !(derived && key == "feeds") {
                say(format!("no `{key}`"));
            }
        }
        let time = num(&value, "time");
        if let (Some(before), Some(now)) = (previous_time, time) {
            if !(INTERVAL - 0.1..=INTERVAL + 0.1).contains(&(now - before)) {
                say(format!("{:.3} s after the previous line", now - before));
            }
        }
        if value.get("interval").and_then(Value::as_f64) != Some(INTERVAL) {
            say("interval is not 5.0".into());
        }
        if value.get("host_pid_namespace") != Some(&Value::Bool(true)) {
            say("not in the host's PID namespace".into());
        }
        let Some(time) = time else { continue };
        if line == 1 {
            seen.first_time = time;
        }
        seen.last_time = time;
        previous_time = Some(time);
        let gpus = array(&value, "gpus");
        let processes = array(&value, "processes");
        let mut held: BTreeMap<String, u64> = BTreeMap::new();
        for gpu in gpus {
            let uuid = text_of(gpu, "uuid");
            for key in GPU_KEYS {
                if gpu.get(key).is_none() {
                    say(format!("GPU {uuid}: no `{key}`"));
                }
            }
            seen.gpus.insert(uuid.clone());
            held.insert(uuid, 0);
            // MIG instances: processes run on them as on a GPU.
            for mig in array(gpu, "mig") {
                let uuid = text_of(mig, "uuid");
                seen.gpus.insert(uuid.clone());
                held.insert(uuid, 0);
            }
        }
        for process in processes {
            let pid = int(process, "pid").unwrap_or(0);
            let device = text_of(process, "device_uuid");
            for key in PROCESS_KEYS {
                if process.get(key).is_none() {
                    say(format!("PID {pid}: no `{key}`"));
                }
            }
            let Some(total) = held.get_mut(&device) else {
                say(format!("PID {pid} is on {device}, which no GPU is"));
                continue;
            };
            *total += int(process, "used").unwrap_or(0);
            seen.holders.insert((pid, device));
            let visible = process.get("visible") == Some(&Value::Bool(true));
            if !visible && process.get("proc_state") != Some(&Value::Null) {
                say(format!("PID {pid} is gone from /proc but has a state"));
            }
        }
        for gpu in gpus {
            let uuid = text_of(gpu, "uuid");
            let memory = gpu.get("memory").unwrap_or(&Value::Null);
            let [total, used, free, reserved] =
                ["total", "used", "free", "driver_reserved"].map(|k| int(memory, k));
            let (Some(total), Some(used), Some(free), Some(reserved)) =
                (total, used, free, reserved)
            else {
                say(format!("GPU {uuid}: memory incomplete"));
                continue;
            };
            if reserved + used + free != total {
                say(format!(
                    "GPU {uuid}: driver_reserved + used + free = {} != total {total}",
                    reserved + used + free
                ));
            }
            if held[&uuid] > used {
                say(format!(
                    "GPU {uuid}: its processes hold {} > used {used}",
                    held[&uuid]
                ));
            }
            let mut in_migs = 0;
            for mig in array(gpu, "mig") {
                let uuid = text_of(mig, "uuid");
                let memory = mig.get("memory").unwrap_or(&Value::Null);
                let [total, used, free] = ["total", "used", "free"].map(|k| int(memory, k));
                let (Some(total), Some(used), Some(free)) = (total, used, free) else {
                    say(format!("MIG {uuid}: memory incomplete"));
                    continue;
                };
                in_migs += used;
                if used + free != total || held[&uuid] > used {
                    say(format!(
                        "MIG {uuid}: used {used} + free {free} != total {total}, or its processes hold {} > used",
                        held[&uuid]
                    ));
                }
            }
            if in_migs > used {
                say(format!(
                    "GPU {uuid}: its MIG instances use {in_migs} > used {used}"
                ));
            }
        }
        let mut fed = BTreeSet::new();
        for feed in array(&value, "feeds") {
            for key in FEED_KEYS {
                if feed.get(key).is_none() {
                    say(format!("a feed without `{key}`"));
                }
            }
            let pid = feed.get("peer").and_then(|p| int(p, "pid")).unwrap_or(0);
            fed.insert(pid);
            let closed = feed.pointer("/state/state") == Some(&Value::String("closed".into()));
            let Some(process) = processes.iter().find(|p| int(p, "pid") == Some(pid)) else {
                // The closed feed of a process that exited, kept a while: nothing to match.
                if !closed {
                    say(format!("a feed for PID {pid}, which NVML does not list"));
                }
                continue;
            };
            let connected =
                feed.pointer("/state/state") == Some(&Value::String("connected".into()));
            let hello_pid = feed.pointer("/hello/pid").and_then(Value::as_u64);
            if hello_pid != Some(pid) || int(feed, "nspid") != Some(pid) {
                say(format!(
                    "feed of PID {pid}: hello or nspid names another pid"
                ));
            }
            let device = text_of(process, "device_uuid");
            let named = feed
                .pointer("/hello/devices/0/uuid")
                .and_then(Value::as_str)
                .unwrap_or("");
            // Torch names a GPU by its bare UUID; the agent names a MIG instance `MIG-...`.
            if format!("GPU-{named}") != device && named != device {
                say(format!(
                    "feed of PID {pid} names device {named}, NVML {device}"
                ));
            }
            let Some(stats) = feed.pointer("/devices/0/latest") else {
                say(format!("feed of PID {pid}: no latest statistics"));
                continue;
            };
            for key in STATS_KEYS {
                if stats.get(key).is_none() {
                    say(format!("feed of PID {pid}: no `{key}`"));
                }
            }
            for oom in feed
                .get("ooms")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                for key in OOM_KEYS {
                    if oom.get(key).is_none() {
                        say(format!("feed of PID {pid}: an OOM report without `{key}`"));
                    }
                }
            }
            for problem in identity(process, stats) {
                say(format!("PID {pid}: {problem}"));
            }
            let (Some(sampled), Some(since)) = (num(stats, "time"), num(stats, "reserved_since"))
            else {
                continue;
            };
            if since > sampled {
                say(format!(
                    "feed of PID {pid}: reserved_since after its sample"
                ));
            }
            if !connected {
                continue;
            }
            let lag = time - sampled;
            if !(FEED_LAG.0..=FEED_LAG.1).contains(&lag) {
                say(format!("feed of PID {pid} sampled {lag:.3} s before NVML"));
            }
            let connection = (
                pid,
                (num(feed, "connected_at").unwrap_or(0.0) * 1000.0) as u64,
            );
            if let Some(before) = feeds.get(&connection) {
                for problem in continuity(&before.stats, stats) {
                    say(format!(
                        "feed of PID {pid} since line {}: {problem}",
                        before.line
                    ));
                }
            }
            feeds.insert(
                connection,
                Previous {
                    line,
                    stats: stats.clone(),
                },
            );
        }
        for process in processes.iter().filter(|_| derived) {
            let Some(stats) = process.get("feed") else {
                continue;
            };
            let pid = int(process, "pid").unwrap_or(0);
            fed.insert(pid);
            for problem in identity(process, stats) {
                say(format!("PID {pid}: {problem}"));
            }
        }
        for process in processes {
            let pid = int(process, "pid").unwrap_or(0);
            let unattributed = process
                .pointer("/layers/unattributed")
                .and_then(Value::as_u64);
            if !fed.contains(&pid) && unattributed != int(process, "used") {
                say(format!(
                    "PID {pid} has no feed: layers must say its used is unattributed"
                ));
            }
        }
    }
    if count == 0 {
        problems.push("no lines".into());
    }
    (problems, seen)
}

/// A fed process: the allocator's parts fit its pool, and NVML's `used` is context +
/// outside_pool + reserved, each layer as the generator knew it.
fn identity(process: &Value, stats: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let layer = |k: &str| {
        process
            .pointer(&format!("/layers/{k}"))
            .and_then(Value::as_u64)
    };
    let [allocated, reserved, inactive] =
        ["allocated", "reserved", "inactive_split"].map(|k| int(stats, k));
    // XLA's cuda_async: live tensors and their peak only, the pool unreported (and said so).
    if reserved.is_none() && stats.pointer("/unreported/reserved").is_some() {
        let (Some(allocated), Some(used)) = (allocated, int(process, "used")) else {
            return vec!["allocated or used missing".into()];
        };
        if allocated > used || layer("live") != Some(allocated) {
            out.push(format!(
                "allocated {allocated} above used {used}, or not the layers' live"
            ));
        }
        if int(stats, "peak_allocated").is_some_and(|p| p < allocated) {
            out.push("a peak below the current value".into());
        }
        return out;
    }
    let (Some(allocated), Some(reserved), Some(inactive), Some(used)) =
        (allocated, reserved, inactive, int(process, "used"))
    else {
        return vec!["allocated, reserved, inactive_split or used missing".into()];
    };
    let [context, outside, live, fragmented, cached] =
        ["context", "outside_pool", "live", "fragmented", "cached"].map(layer);
    let (Some(context), Some(outside), Some(live), Some(fragmented), Some(cached)) =
        (context, outside, live, fragmented, cached)
    else {
        return vec!["a fed process without its layers".into()];
    };
    if allocated + inactive > reserved {
        out.push(format!(
            "allocated + inactive_split {} > reserved {reserved}",
            allocated + inactive
        ));
    }
    if context + outside + reserved != used {
        out.push(format!(
            "context {context} + outside_pool {outside} + reserved {reserved} != used {used}"
        ));
    }
    if (live, fragmented, cached) != (allocated, inactive, reserved - allocated - inactive) {
        out.push("layers live/fragmented/cached are not the feed's".into());
    }
    if int(stats, "peak_reserved").is_some_and(|p| p < reserved)
        || int(stats, "peak_allocated").is_some_and(|p| p < allocated)
    {
        out.push("a peak below the current value".into());
    }
    out
}

/// One feed connection from one line to the next: the pool's `reserved_since` is true to
/// it, and counters only rise.
fn continuity(before: &Value, now: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for key in MONOTONIC {
        if int(now, key) < int(before, key) {
            out.push(format!("`{key}` went down"));
        }
    }
    let changed = int(now, "reserved") != int(before, "reserved");
    let since = num(now, "reserved_since");
    if changed && since <= num(before, "time") {
        out.push("reserved changed, yet reserved_since is before the previous sample".into());
    }
    if !changed && since != num(before, "reserved_since") {
        out.push("reserved held, yet reserved_since moved".into());
    }
    out
}

/// Every problem with a trace's labels, given what the trace holds.
pub fn check_labels(labels: &Labels, seen: &Seen) -> Vec<String> {
    let mut out = Vec::new();
    if labels.description.trim().is_empty() {
        out.push("no description".into());
    }
    let has_climb = labels
        .expect
        .iter()
        .any(|e| e.kind == "climb" || e.kind == "oom_forecast");
    if labels.normal == has_climb {
        out.push("`normal` must be true exactly when no climb (or forecast) is expected".into());
    }
    if labels
        .layers
        .as_deref()
        .is_some_and(|l| l != "exact" && l != "bounds")
    {
        out.push("`layers` is `exact` or `bounds`".into());
    }
    let minutes = (seen.last_time - seen.first_time) / 60.0;
    if (minutes - labels.minutes).abs() > 0.1 {
        out.push(format!(
            "labels say {} min, the trace lasts {minutes:.1}",
            labels.minutes
        ));
    }
    if !(10.0..=60.0).contains(&labels.minutes) {
        out.push(format!("{} min of story: 10-60 expected", labels.minutes));
    }
    for (i, e) in labels.expect.iter().enumerate() {
        let mut say = |what: String| out.push(format!("expect[{i}] ({}): {what}", e.kind));
        if !KINDS.contains(&e.kind.as_str()) {
            say("not a finding kind".into());
        }
        let cause_ok = e.cause.as_deref().is_some_and(|c| CAUSES.contains(&c));
        let class_ok = e.class.as_deref().is_some_and(|c| CLASSES.contains(&c));
        match e.kind.as_str() {
            "climb" if !cause_ok || e.rate_mib_per_min.is_none_or(|r| r <= 0.0) => {
                say("a climb needs a cause and a rate".into())
            }
            "oom" if !class_ok => say("an OOM needs a class".into()),
            "oom_forecast" if e.oom_at.is_none() => say("a forecast needs its oom_at".into()),
            "climb" | "oom" | "oom_forecast" => {}
            _ if e.cause.is_some() || e.class.is_some() || e.rate_mib_per_min.is_some() => {
                say("cause, class and rate are for climbs and OOMs".into())
            }
            _ => {}
        }
        if let Some(device) = &e.device_uuid {
            if !seen.gpus.contains(device) {
                say(format!("device {device} is not in the trace"));
            }
        }
        if let Some(pid) = e.pid {
            let listed = seen.holders.iter().any(|(p, d)| {
                *p == u64::from(pid) && e.device_uuid.as_ref().is_none_or(|e| e == d)
            });
            if !listed {
                say(format!("PID {pid} is never listed there"));
            }
        }
        if e.start < seen.first_time - 1.0 || e.start > seen.last_time {
            say("starts outside the trace".into());
        }
        if let Some(deadline) = e.deadline() {
            if deadline > seen.last_time {
                say("the trace ends before its deadline".into());
            }
        }
    }
    out
}

fn num(value: &Value, key: &str) -> Option<f64> {
    value.get(key).and_then(Value::as_f64)
}

fn int(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

fn text_of(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string()
}

fn array<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

//! The oracle for the layer tests: what `strata snapshot` must show for each device of a
//! scenario at a poll, worked out from the scenario JSON alone (not from strata's accounting)
//! and from which pids are visible, by the rules of ARCHITECTURE.md, "Layers":
//!
//! - a lost GPU, refused or self-contradictory memory (free, used or the reservation above the
//!   total, or `total != reserved + used + free`), a listed process that no real process
//!   makes (pid 0 or 0xFFFFFFFF, more than the whole device) or listed processes holding more
//!   than is occupied: no layers;
//! - else `free` = NVML free; `other` = occupied − Σ NVML used of the visible listed holders;
//!   `unattributed` = that Σ (none of them has a feed), or unknown when the device's process
//!   lists could not be read (then `other` = occupied); a visible holder whose used is not
//!   available leaves `unattributed` partial (unknown when none is known); the feed layers are
//!   unknown; `other` is an upper bound (`bounds.other: upper`) exactly when a process list
//!   could not be read (it holds the unlisted processes' memory too).
//!
//! A GPU in MIG mode is partitioned with every process on it; each MIG GPU instance with the
//! processes of all its compute instances, in the memory of its first one.
//!
//! Used by `tests/integration/nvml_source.rs`; models the fake's semantics as its README documents
//! them: per-poll scripts, `polls` windows, `lost_at_poll`, refusals, `count_jitter` against a
//! client that sizes its buffer `count + 5`, and faults with an `error` on memory, process
//! and MIG calls (not `calls` windows).

use serde_json::Value;
use std::collections::BTreeMap;

/// NVML's instance id that does not apply.
const NO_ID: u64 = 0xFFFF_FFFF;

/// What one device must show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// `layers: null`, with a `layers_gap`.
    Withheld(&'static str),
    Layers {
        other: u64,
        /// `other` is an upper bound: a process list could not be read.
        other_upper: bool,
        free: u64,
        unattributed: Option<u64>,
        /// `unattributed` sums known shares while some visible holder's is unknown.
        unattributed_partial: bool,
    },
}

/// A GPU and its MIG devices (in slot order, as strata lists the readable ones).
#[derive(Debug)]
pub struct GpuExpect {
    pub layers: Expect,
    pub mig: Vec<Expect>,
}

/// A holder as the lists name it: pid, used (None: not available), instance ids.
#[derive(Debug, Clone, Copy)]
struct Holder {
    pid: u64,
    used: Option<u64>,
    ids: (u64, u64),
}

fn at(value: &Value, poll: usize) -> Value {
    match value {
        Value::Array(items) => items
            .get(poll)
            .or(items.last())
            .cloned()
            .unwrap_or(Value::Null),
        single => single.clone(),
    }
}

fn in_window(window: Option<&Value>, poll: usize) -> bool {
    match window {
        None | Some(Value::Null) => true,
        Some(w) => {
            let from = w.get(0).and_then(Value::as_u64).unwrap_or(0) as usize;
            let to = w.get(1).and_then(Value::as_u64).map(|t| t as usize);
            poll >= from && to.is_none_or(|to| poll < to)
        }
    }
}

fn refused(field: Option<&Value>) -> bool {
    field.is_some_and(Value::is_string)
}

/// Whether a fault with an `error` on one of `calls` holds at `poll`.
fn faulted(entry: &Value, calls: &[&str], poll: usize) -> bool {
    entry
        .get("faults")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|f| {
            let call = f["call"].as_str().unwrap_or_default();
            call == "*" || calls.contains(&call)
        })
        .inspect(|f| {
            assert!(
                f.get("calls").is_none(),
                "the oracle models no `calls` windows: {f}"
            )
        })
        .any(|f| f.get("error").is_some() && in_window(f.get("polls"), poll))
}

fn lost(entry: &Value, poll: usize) -> bool {
    entry
        .get("lost_at_poll")
        .and_then(Value::as_u64)
        .is_some_and(|at| poll as u64 >= at)
}

/// (total, reserved, used, free) at `poll`, or None where refused.
fn memory(entry: &Value, poll: usize) -> Option<(u64, u64, u64, u64)> {
    let memory = entry.get("memory")?;
    if memory.is_string() || faulted(entry, &["nvmlDeviceGetMemoryInfo_v2"], poll) {
        return None;
    }
    let get = |key: &str| {
        memory
            .get(key)
            .map(|v| at(v, poll))
            .and_then(|v| v.as_u64())
    };
    let total = get("total").unwrap_or(0);
    let reserved = get("reserved").unwrap_or(0);
    let used = get("used").unwrap_or(0);
    let free = get("free").unwrap_or(total.saturating_sub(reserved).saturating_sub(used));
    Some((total, reserved, used, free))
}

const LISTS: [(&str, &str); 3] = [
    (
        "compute_processes",
        "nvmlDeviceGetComputeRunningProcesses_v3",
    ),
    (
        "graphics_processes",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
    ),
    (
        "mps_processes",
        "nvmlDeviceGetMPSComputeRunningProcesses_v3",
    ),
];

/// The entries of one list at `poll`, with default instance ids.
fn entries(list: Option<&Value>, poll: usize, ids: (u64, u64)) -> Vec<Holder> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| in_window(p.get("polls"), poll))
        .map(|p| Holder {
            pid: p["pid"].as_u64().unwrap_or(0),
            used: p.get("used").map(|u| at(u, poll)).and_then(|u| u.as_u64()),
            ids: (
                p.get("gpu_instance_id")
                    .and_then(Value::as_u64)
                    .unwrap_or(ids.0),
                p.get("compute_instance_id")
                    .and_then(Value::as_u64)
                    .unwrap_or(ids.1),
            ),
        })
        .collect()
}

/// A list through the two-call protocol with a client that retries a `count + 5` buffer:
/// empty when the size query says none, refused when the buffer stays too small.
fn through_protocol(list: Vec<Holder>, jitter: i64) -> Option<Vec<Holder>> {
    let real = list.len() as i64;
    let answered = (real + jitter).max(0);
    match answered {
        0 => Some(Vec::new()),
        n if n + 5 < real => None,
        _ => Some(list),
    }
}

fn jitter(entry: &Value, poll: usize) -> i64 {
    entry
        .get("count_jitter")
        .map(|j| at(j, poll))
        .and_then(|j| j.as_i64())
        .unwrap_or(0)
}

fn ids_of(instance: &Value) -> (u64, u64) {
    let id = |key: &str| instance.get(key).and_then(Value::as_u64).unwrap_or(NO_ID);
    (id("gpu_instance_id"), id("compute_instance_id"))
}

/// A MIG device's lists at `poll`: its holders, or None when a list that matters is refused
/// (a graphics or MPS list answering NotSupported is no gap).
fn instance_lists(instance: &Value, poll: usize) -> Option<Vec<Holder>> {
    let mut all = Vec::new();
    for (key, call) in LISTS {
        let field = instance.get(key);
        if faulted(instance, &[call], poll) {
            return None;
        }
        if refused(field) {
            if key != "compute_processes" && field == Some(&Value::from("NotSupported")) {
                continue;
            }
            return None;
        }
        all.extend(through_protocol(
            entries(field, poll, ids_of(instance)),
            jitter(instance, poll),
        )?);
    }
    Some(all)
}

/// A GPU's own lists (its own entries, then every MIG device's that is not refused or lost).
fn gpu_lists(device: &Value, poll: usize) -> Option<Vec<Holder>> {
    let mut all = Vec::new();
    for (key, call) in LISTS {
        let field = device.get(key);
        if faulted(device, &[call], poll) {
            return None;
        }
        if refused(field) {
            if key != "compute_processes" && field == Some(&Value::from("NotSupported")) {
                continue;
            }
            return None;
        }
        let mut list = entries(field, poll, (NO_ID, NO_ID));
        for instance in instances(device) {
            if !lost(instance, poll) && !refused(instance.get(key)) {
                list.extend(entries(instance.get(key), poll, ids_of(instance)));
            }
        }
        all.extend(through_protocol(list, jitter(device, poll))?);
    }
    Some(all)
}

fn instances(device: &Value) -> Vec<&Value> {
    let mut list: Vec<&Value> = device
        .get("mig")
        .and_then(Value::as_array)
        .map(|l| l.iter().collect())
        .unwrap_or_default();
    list.sort_by_key(|i| i["slot"].as_u64());
    list
}

/// One holder per pid: the largest known use (one context listed twice is one holder).
fn merged(holders: &[Holder]) -> BTreeMap<u64, Option<u64>> {
    let mut by_pid: BTreeMap<u64, Option<u64>> = BTreeMap::new();
    for h in holders {
        let entry = by_pid.entry(h.pid).or_insert(h.used);
        *entry = match (*entry, h.used) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    by_pid
}

/// The partition of one device's memory among `holders` (None: the lists are unknown).
fn partition(
    memory: Option<(u64, u64, u64, u64)>,
    holders: Option<&BTreeMap<u64, Option<u64>>>,
    visible: &dyn Fn(u64) -> bool,
) -> Expect {
    let Some((total, reserved, used, free)) = memory else {
        return Expect::Withheld("memory unknown");
    };
    if free > total || used > total || reserved > total {
        return Expect::Withheld("a part above the total");
    }
    if reserved + used + free != total {
        return Expect::Withheld("parts that do not add up");
    }
    let occupied = total - free;
    let Some(holders) = holders else {
        return Expect::Layers {
            other: occupied,
            other_upper: true,
            free,
            unattributed: None,
            unattributed_partial: false,
        };
    };
    let listed: u64 = holders.values().map(|u| u.unwrap_or(0)).sum();
    let implausible = holders
        .iter()
        .any(|(pid, used)| *pid == 0 || *pid == NO_ID || used.is_some_and(|u| u > total));
    if implausible {
        return Expect::Withheld("a record no process makes");
    }
    if listed > occupied {
        return Expect::Withheld("processes hold more than is occupied");
    }
    let seen: Vec<Option<u64>> = holders
        .iter()
        .filter(|(pid, _)| visible(**pid))
        .map(|(_, used)| *used)
        .collect();
    let known: u64 = seen.iter().flatten().sum();
    let some_unknown = seen.iter().any(Option::is_none);
    let none_known = !seen.is_empty() && seen.iter().all(Option::is_none);
    Expect::Layers {
        other: occupied - known,
        other_upper: false,
        free,
        unattributed: (!none_known).then_some(known),
        unattributed_partial: some_unknown && !none_known,
    }
}

/// Every GPU of `scenario` at `poll`, `visible` telling which pids this monitor's `/proc`
/// shows.
pub fn expected(scenario: &Value, poll: usize, visible: &dyn Fn(u64) -> bool) -> Vec<GpuExpect> {
    let devices = scenario["devices"].as_array().expect("devices");
    devices
        .iter()
        .map(|device| gpu(device, poll, visible))
        .collect()
}

fn gpu(device: &Value, poll: usize, visible: &dyn Fn(u64) -> bool) -> GpuExpect {
    if lost(device, poll) {
        return GpuExpect {
            layers: Expect::Withheld("lost"),
            mig: Vec::new(),
        };
    }
    let mig_on = device
        .get("mig_mode")
        .and_then(|m| m.get("current"))
        .and_then(Value::as_u64)
        == Some(1);
    let own = gpu_lists(device, poll);
    if !mig_on {
        let holders = own.as_deref().map(merged);
        return GpuExpect {
            layers: partition(memory(device, poll), holders.as_ref(), visible),
            mig: Vec::new(),
        };
    }
    // MIG mode: the readable MIG devices, their lists, and what the parent lists alone.
    let count_refused = faulted(device, &["nvmlDeviceGetMaxMigDeviceCount"], poll);
    let readable: Vec<&Value> = instances(device)
        .into_iter()
        .filter(|i| !count_refused && !faulted(i, &["nvmlDeviceGetMigDeviceHandleByIndex"], poll))
        .collect();
    let slot_refused = instances(device).len() != readable.len();
    let lists: Vec<Option<Vec<Holder>>> =
        readable.iter().map(|i| instance_lists(i, poll)).collect();
    let known = !slot_refused && own.is_some() && lists.iter().all(Option::is_some);
    let on_gpu: Option<BTreeMap<u64, Option<u64>>> = known.then(|| {
        let mut all: Vec<Holder> = lists.iter().flatten().flatten().copied().collect();
        all.extend(own.iter().flatten().copied());
        merged(&all)
    });
    // What the parent lists and no instance does: on the instance its ids name, if any.
    let on_instances: Vec<u64> = lists.iter().flatten().flatten().map(|h| h.pid).collect();
    let parent_only: Vec<Holder> = own
        .iter()
        .flatten()
        .filter(|h| !on_instances.contains(&h.pid))
        .copied()
        .collect();
    let placed = |i: usize| -> Option<Vec<Holder>> {
        let mut holders = lists[i].clone()?;
        let ids = ids_of(readable[i]);
        holders.extend(parent_only.iter().filter(|h| h.ids == ids));
        Some(holders)
    };
    // Each GPU instance: its compute instances' processes, the memory of the first.
    let mut mig = Vec::new();
    for instance in &readable {
        let gi = instance.get("gpu_instance_id").and_then(Value::as_u64);
        let members: Vec<usize> = readable
            .iter()
            .enumerate()
            .filter(|(_, other)| {
                let same_gi =
                    gi.is_some() && other.get("gpu_instance_id").and_then(Value::as_u64) == gi;
                same_gi || std::ptr::eq(**other, *instance)
            })
            .map(|(i, _)| i)
            .collect();
        let holders: Option<Vec<Holder>> = members
            .iter()
            .map(|&i| placed(i))
            .collect::<Option<Vec<Vec<Holder>>>>()
            .map(|l| l.concat());
        let lead = readable[members[0]];
        mig.push(partition(
            memory(lead, poll),
            holders.as_deref().map(merged).as_ref(),
            visible,
        ));
    }
    GpuExpect {
        layers: partition(memory(device, poll), on_gpu.as_ref(), visible),
        mig,
    }
}

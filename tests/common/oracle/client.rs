//! The oracle for the client cross-checks: what a correct NVML client must see for a scenario
//! at poll 0, worked out from the scenario JSON alone (not from the fake's code), in the shape
//! `crosscheck.py` prints. A refused call is `{"error": code}`.
//!
//! Used by `tests/fake_nvml_pynvml.rs`; documented in `tests/fake-nvml/README.md`.

use serde_json::{json, Map, Value};

const ERROR_NAMES: &[(&str, u64)] = &[
    ("Uninitialized", 1),
    ("InvalidArgument", 2),
    ("NotSupported", 3),
    ("NoPermission", 4),
    ("NotFound", 6),
    ("InsufficientSize", 7),
    ("InsufficientPower", 8),
    ("DriverNotLoaded", 9),
    ("Timeout", 10),
    ("IrqIssue", 11),
    ("FunctionNotFound", 13),
    ("CorruptedInfoROM", 14),
    ("GpuIsLost", 15),
    ("ResetRequired", 16),
    ("OperatingSystem", 17),
    ("LibRmVersionMismatch", 18),
    ("InUse", 19),
    ("Memory", 20),
    ("NoData", 21),
    ("InsufficientResources", 23),
    ("NotReady", 27),
    ("GpuNotFound", 28),
    ("Unknown", 999),
];
const NOT_SUPPORTED: u64 = 3;
const NOT_FOUND: u64 = 6;
const INSUFFICIENT_SIZE: u64 = 7;
const GPU_IS_LOST: u64 = 15;
/// What NVML writes for an instance id that does not apply.
const NO_ID: u64 = 0xFFFF_FFFF;

/// How a client sizes its buffer for the second call of the count protocol, from the count
/// the first call answered: pynvml takes `2 * count + 5`, nvml-wrapper `count + 5`.
pub type Capacity = fn(u64) -> u64;

pub fn error(code: u64) -> Value {
    json!({ "error": code })
}

/// A field's answer: the value, a refusal code, or `default` when the field is absent.
fn answer<'a>(field: Option<&'a Value>, default: Result<&'a Value, u64>) -> Result<&'a Value, u64> {
    let Some(value) = field else {
        return default;
    };
    let refusal = value
        .as_str()
        .and_then(|name| ERROR_NAMES.iter().find(|(known, _)| *known == name));
    match refusal {
        Some((_, code)) => Err(*code),
        None => Ok(value),
    }
}

/// The error an injected fault makes `call` answer on `entry` (a GPU or MIG device) at poll 0,
/// first call. Faults with a `calls` window are not modelled (no cross-checked scenario has one).
fn fault(entry: &Value, call: &str) -> Option<u64> {
    let faults = entry.get("faults").and_then(Value::as_array)?;
    faults.iter().find_map(|f| {
        assert!(
            f.get("calls").is_none(),
            "the client oracle does not model `calls` windows: {f}"
        );
        let named = f["call"] == call || f["call"] == "*";
        let window = f.get("polls").is_none_or(|w| {
            w.get(0).and_then(Value::as_u64) == Some(0)
                && w.get(1).and_then(Value::as_u64) != Some(0)
        });
        let code = match f.get("error")? {
            Value::String(name) => ERROR_NAMES.iter().find(|(n, _)| n == name).map(|(_, c)| *c),
            number => number.as_u64(),
        };
        (named && window).then_some(code).flatten()
    })
}

/// `value` unless a fault on `call` answers an error first.
fn unless_faulted(entry: &Value, call: &str, value: Value) -> Value {
    fault(entry, call).map_or(value, error)
}

fn or_error(result: Result<Value, u64>) -> Value {
    result.unwrap_or_else(error)
}

/// A per-poll script's value at poll 0.
fn at0(value: &Value) -> Value {
    match value {
        Value::Array(values) => values.first().cloned().unwrap_or(Value::Null),
        single => single.clone(),
    }
}

fn u64_at0(value: Option<&Value>, default: u64) -> u64 {
    value.map(at0).and_then(|v| v.as_u64()).unwrap_or(default)
}

fn present_at0(entry: &Value) -> bool {
    match entry.get("polls") {
        None | Some(Value::Null) => true,
        Some(window) => {
            let from = window.get(0).and_then(Value::as_u64).unwrap_or(0);
            let to = window.get(1).and_then(Value::as_u64);
            from == 0 && to.is_none_or(|to| to > 0)
        }
    }
}

fn lost_at0(entry: &Value) -> bool {
    entry.get("lost_at_poll").and_then(Value::as_u64) == Some(0)
}

fn memory(entry: &Value) -> Value {
    let field = entry.get("memory");
    if let Some(code) = fault(entry, "nvmlDeviceGetMemoryInfo_v2") {
        return error(code);
    }
    or_error(answer(field, Err(NOT_SUPPORTED)).map(|memory| {
        let total = u64_at0(memory.get("total"), 0);
        let reserved = u64_at0(memory.get("reserved"), 0);
        let used = u64_at0(memory.get("used"), 0);
        let derived_free = total.saturating_sub(reserved).saturating_sub(used);
        let free = u64_at0(memory.get("free"), derived_free);
        json!({ "total": total, "reserved": reserved, "used": used, "free": free })
    }))
}

fn process_entries(list: &Value, default_gi: u64, default_ci: u64) -> Vec<Value> {
    let entries = list.as_array().map(Vec::as_slice).unwrap_or_default();
    entries
        .iter()
        .filter(|entry| present_at0(entry))
        .map(|entry| {
            json!({
                "pid": entry.get("pid").cloned().unwrap_or(Value::Null),
                "used": entry.get("used").map(at0).unwrap_or(Value::Null),
                "gpu_instance_id": entry.get("gpu_instance_id").and_then(Value::as_u64).unwrap_or(default_gi),
                "compute_instance_id": entry.get("compute_instance_id").and_then(Value::as_u64).unwrap_or(default_ci),
            })
        })
        .collect()
}

/// The list a client ends up with after the two-call protocol, given the size query's jitter.
fn after_protocol(list: Vec<Value>, jitter: i64, capacity: Capacity) -> Value {
    let real = list.len() as i64;
    let answered = (real + jitter).max(0) as u64;
    if answered == 0 {
        return json!([]);
    }
    if capacity(answered) < real as u64 {
        return error(INSUFFICIENT_SIZE);
    }
    Value::Array(list)
}

fn jitter_of(entry: &Value) -> i64 {
    entry
        .get("count_jitter")
        .map(at0)
        .and_then(|v| v.as_i64())
        .unwrap_or(0)
}

fn instance_ids(instance: &Value) -> (u64, u64) {
    let id = |key| {
        answer(instance.get(key), Err(NOT_SUPPORTED))
            .ok()
            .and_then(Value::as_u64)
            .unwrap_or(NO_ID)
    };
    (id("gpu_instance_id"), id("compute_instance_id"))
}

fn instance_processes(instance: &Value, key: &str) -> Result<Vec<Value>, u64> {
    let (gi, ci) = instance_ids(instance);
    answer(instance.get(key), Ok(&Value::Null)).map(|list| process_entries(list, gi, ci))
}

fn instances_by_slot(device: &Value) -> Vec<&Value> {
    let mut instances: Vec<&Value> = device
        .get("mig")
        .and_then(Value::as_array)
        .map(|list| list.iter().collect())
        .unwrap_or_default();
    instances.sort_by_key(|instance| instance.get("slot").and_then(Value::as_u64));
    instances
}

/// A GPU's list: its own entries, then each live MIG device's (slot order), as the fake and
/// real NVML list them on the parent.
fn gpu_processes(device: &Value, key: &str, capacity: Capacity) -> Value {
    let own = match answer(device.get(key), Ok(&Value::Null)) {
        Ok(list) => process_entries(list, NO_ID, NO_ID),
        Err(code) => return error(code),
    };
    let mut all = own;
    for instance in instances_by_slot(device) {
        if !lost_at0(instance) {
            all.extend(instance_processes(instance, key).unwrap_or_default());
        }
    }
    after_protocol(all, jitter_of(device), capacity)
}

fn utilization(field: Option<&Value>) -> Value {
    or_error(answer(field, Err(NOT_SUPPORTED)).map(|rates| {
        json!({ "gpu": u64_at0(rates.get("gpu"), 0), "memory": u64_at0(rates.get("memory"), 0) })
    }))
}

fn samples(field: Option<&Value>, default: Result<&Value, u64>) -> Value {
    let list = match answer(field, default) {
        Ok(list) => list.as_array().cloned().unwrap_or_default(),
        Err(code) => return error(code),
    };
    let present: Vec<Value> = list
        .iter()
        .filter(|entry| present_at0(entry))
        .map(|entry| {
            json!({
                "pid": entry.get("pid").cloned().unwrap_or(Value::Null),
                "sm": u64_at0(entry.get("sm"), 0),
                "mem": u64_at0(entry.get("mem"), 0),
                "enc": u64_at0(entry.get("enc"), 0),
                "dec": u64_at0(entry.get("dec"), 0),
            })
        })
        .collect();
    match present.is_empty() {
        true => error(NOT_FOUND),
        false => Value::Array(present),
    }
}

fn text(field: Option<&Value>) -> Value {
    or_error(answer(field, Err(NOT_SUPPORTED)).cloned())
}

const LIST_CALLS: [(&str, &str); 3] = [
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

fn list_call(key: &str) -> &'static str {
    LIST_CALLS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, call)| *call)
        .unwrap_or("?")
}

fn mig_device(device: &Value, slot: u64, capacity: Capacity) -> Value {
    if let Some(code) = fault(device, "nvmlDeviceGetMigDeviceHandleByIndex") {
        return error(code);
    }
    match answer(device.get("mig_mode"), Err(NOT_SUPPORTED)) {
        Err(code) => return error(code),
        Ok(mode) if mode.get("current").and_then(Value::as_u64) != Some(1) => {
            return error(NOT_SUPPORTED)
        }
        Ok(_) => {}
    }
    let found = instances_by_slot(device)
        .into_iter()
        .find(|instance| instance.get("slot").and_then(Value::as_u64) == Some(slot));
    let Some(instance) = found else {
        return error(NOT_FOUND);
    };
    if let Some(code) = fault(instance, "nvmlDeviceGetMigDeviceHandleByIndex") {
        return error(code);
    }
    if lost_at0(instance) {
        return error(GPU_IS_LOST);
    }
    let processes = |key: &str| {
        let list = match instance_processes(instance, key) {
            Ok(list) => after_protocol(list, jitter_of(instance), capacity),
            Err(code) => error(code),
        };
        unless_faulted(instance, list_call(key), list)
    };
    let id = |key: &str, call: &str| {
        let value = or_error(answer(instance.get(key), Err(NOT_SUPPORTED)).cloned());
        unless_faulted(instance, call, value)
    };
    json!({
        "memory": memory(instance),
        "name": unless_faulted(instance, "nvmlDeviceGetName", text(instance.get("name"))),
        "uuid": unless_faulted(instance, "nvmlDeviceGetUUID", text(instance.get("uuid"))),
        "gpu_instance_id": id("gpu_instance_id", "nvmlDeviceGetGpuInstanceId"),
        "compute_instance_id": id("compute_instance_id", "nvmlDeviceGetComputeInstanceId"),
        "compute_processes": processes("compute_processes"),
        "mps_processes": processes("mps_processes"),
    })
}

fn gpu(device: &Value, capacity: Capacity) -> Value {
    if let Some(code) = fault(device, "nvmlDeviceGetHandleByIndex_v2") {
        return error(code);
    }
    if lost_at0(device) {
        return error(GPU_IS_LOST);
    }
    let zero = json!(0);
    let max_mig = answer(device.get("max_mig_devices"), Ok(&zero));
    let mig_mode = answer(device.get("mig_mode"), Err(NOT_SUPPORTED))
        .map(|mode| json!([mode.get("current"), mode.get("pending")]));
    let empty = json!([]);
    let mut out = Map::new();
    let faulted = |call: &str, value: Value| unless_faulted(device, call, value);
    out.insert("memory".into(), memory(device));
    out.insert(
        "name".into(),
        faulted("nvmlDeviceGetName", text(device.get("name"))),
    );
    out.insert(
        "uuid".into(),
        faulted("nvmlDeviceGetUUID", text(device.get("uuid"))),
    );
    out.insert(
        "utilization".into(),
        faulted(
            "nvmlDeviceGetUtilizationRates",
            utilization(device.get("utilization")),
        ),
    );
    out.insert(
        "temperature".into(),
        faulted(
            "nvmlDeviceGetTemperature",
            or_error(answer(device.get("temperature"), Err(NOT_SUPPORTED)).map(at0)),
        ),
    );
    for (key, call) in [
        ("power_usage", "nvmlDeviceGetPowerUsage"),
        ("power_limit", "nvmlDeviceGetEnforcedPowerLimit"),
        ("sm_clock", "nvmlDeviceGetClockInfo"),
        ("sm_clock_max", "nvmlDeviceGetMaxClockInfo"),
    ] {
        out.insert(
            key.into(),
            faulted(
                call,
                or_error(answer(device.get(key), Err(NOT_SUPPORTED)).map(at0)),
            ),
        );
    }
    for (key, call) in LIST_CALLS {
        out.insert(
            key.into(),
            faulted(call, gpu_processes(device, key, capacity)),
        );
    }
    out.insert(
        "process_utilization".into(),
        faulted(
            "nvmlDeviceGetProcessUtilization",
            samples(device.get("process_utilization"), Ok(&empty)),
        ),
    );
    out.insert(
        "mig_mode".into(),
        faulted("nvmlDeviceGetMigMode", or_error(mig_mode)),
    );
    let max_mig_answer = faulted("nvmlDeviceGetMaxMigDeviceCount", or_error(max_mig.cloned()));
    let slots = max_mig_answer.as_u64().unwrap_or(0);
    out.insert("max_mig_devices".into(), max_mig_answer);
    let mig = (0..slots)
        .map(|slot| mig_device(device, slot, capacity))
        .collect();
    out.insert("mig".into(), Value::Array(mig));
    Value::Object(out)
}

/// Everything a client reading `scenario` at poll 0 must see.
pub fn expected(scenario: &Value, capacity: Capacity) -> Value {
    let system = scenario.get("system").cloned().unwrap_or(Value::Null);
    let driver = json!("550.54.15");
    let cuda = json!(12040);
    let devices: Vec<Value> = scenario
        .get("devices")
        .and_then(Value::as_array)
        .map(|list| list.iter().map(|device| gpu(device, capacity)).collect())
        .unwrap_or_default();
    json!({
        "driver_version": or_error(answer(system.get("driver_version"), Ok(&driver)).cloned()),
        "cuda_driver_version": or_error(answer(system.get("cuda_driver_version"), Ok(&cuda)).cloned()),
        "device_count": devices.len(),
        "devices": devices,
    })
}

/// Every difference between `expected` and `actual`, one line each, with its JSON path.
pub fn differences(expected: &Value, actual: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff("$", expected, actual, &mut out);
    out
}

fn diff(path: &str, expected: &Value, actual: &Value, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for key in e.keys().chain(a.keys().filter(|k| !e.contains_key(*k))) {
                let null = Value::Null;
                let (ev, av) = (e.get(key), a.get(key));
                match (ev, av) {
                    (Some(_), None) => {
                        out.push(format!("{path}.{key}: missing from the client's view"))
                    }
                    (None, Some(_)) => out.push(format!("{path}.{key}: not expected")),
                    _ => diff(
                        &format!("{path}.{key}"),
                        ev.unwrap_or(&null),
                        av.unwrap_or(&null),
                        out,
                    ),
                }
            }
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            for (index, (ev, av)) in e.iter().zip(a).enumerate() {
                diff(&format!("{path}[{index}]"), ev, av, out);
            }
        }
        _ if expected == actual => {}
        _ => out.push(format!("{path}: expected {expected}, client saw {actual}")),
    }
}

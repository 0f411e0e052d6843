//! The fake libnvidia-ml (`tests/fake-nvml`) read by two independent clients, pynvml (the
//! `nvidia-ml-py` package, pinned to [`NVIDIA_ML_PY`], installed by this test in a venv under
//! `target/`) and nvml-wrapper, must show each scenario exactly as the scenario file says. This
//! is how we know the fake's C structs, version words and count protocol are right, and so that
//! strata's tests against it mean something. Needs `python3` with `venv`, and network access
//! for pip the first time.

// Tests may panic: `unwrap` and `expect` say which of a test's assumptions failed, in its
// helpers too (clippy.toml allows them only in `#[test]` functions and `#[cfg(test)]` code).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::c_uint;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock, PoisonError};

use common::fake_nvml::{fake_nvml_lib, fake_nvml_lib_dir, scenario, workspace_root, SCENARIO_ENV};
use common::oracle::client as client_oracle;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::{Device, Nvml};
use serde_json::{json, Value};

/// The one version of pynvml the cross-check uses: its struct layouts are what is checked.
const NVIDIA_ML_PY: &str = "nvidia-ml-py==13.615.71";

/// Every example scenario the cross-check models (not those with `calls`-window faults or
/// delays): each must read the same through both clients.
const SCENARIOS: &[&str] = &[
    "two_gpus",
    "mig",
    "not_supported",
    "unavailable_process_memory",
    "gpu_lost",
    "absurd",
    "missing_pid",
    "mps",
    "mig_multi_ci",
    "mig_parent",
    "process_list_refused",
    "raw_records",
    "old_driver",
];

fn scenario_json(name: &str) -> Value {
    let path = scenario(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn assert_same(client: &str, name: &str, expected: &Value, actual: &Value) {
    let differences = client_oracle::differences(expected, actual);
    assert!(
        differences.is_empty(),
        "{client} reading scenario {name} differs from the scenario at poll 0:\n  {}\nclient saw:\n{actual:#}",
        differences.join("\n  ")
    );
}

// ---- pynvml ----

fn run(command: &mut Command, what: &str) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot {what}: {e} ({command:?})"));
    assert!(
        output.status.success(),
        "failed to {what} ({command:?}, {}):\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn imports_pynvml(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import pynvml"])
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Whether the venv's nvidia-ml-py is the pinned version.
fn pinned(python: &Path) -> bool {
    let wanted = NVIDIA_ML_PY.trim_start_matches("nvidia-ml-py==");
    Command::new(python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('nvidia-ml-py'))",
        ])
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == wanted)
}

/// `target/pynvml-venv/bin/python`, with the pinned nvidia-ml-py installed (reused when it
/// imports and is that version). A failing pip (no network, say) fails the test with pip's
/// output: it is not skipped.
fn venv_python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let venv = workspace_root().join("target").join("pynvml-venv");
        let python = venv.join("bin").join("python");
        if imports_pynvml(&python) && pinned(&python) {
            return python;
        }
        let system_python =
            std::env::var_os("STRATA_TEST_PYTHON").unwrap_or_else(|| "python3".into());
        run(
            Command::new(&system_python)
                .args(["-m", "venv", "--clear"])
                .arg(&venv),
            "create the pynvml venv",
        );
        run(
            Command::new(&python).args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--quiet",
                NVIDIA_ML_PY,
            ]),
            &format!("pip install {NVIDIA_ML_PY} into target/pynvml-venv"),
        );
        assert!(
            imports_pynvml(&python) && pinned(&python),
            "pynvml installed but does not import, or is not {NVIDIA_ML_PY}"
        );
        python
    })
}

fn pynvml_view(name: &str) -> Value {
    let library_path = match std::env::var_os("LD_LIBRARY_PATH") {
        Some(existing) if !existing.is_empty() => {
            let mut joined = fake_nvml_lib_dir().into_os_string();
            joined.push(":");
            joined.push(existing);
            joined
        }
        _ => fake_nvml_lib_dir().into_os_string(),
    };
    let script = workspace_root()
        .join("tests")
        .join("fake-nvml")
        .join("crosscheck.py");
    let output = run(
        Command::new(venv_python())
            .arg(script)
            .env("LD_LIBRARY_PATH", library_path)
            .env(SCENARIO_ENV, scenario(name)),
        &format!("run crosscheck.py on scenario {name}"),
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "crosscheck.py printed no JSON for {name}: {e}\n{}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

#[test]
fn pynvml_sees_each_scenario_as_written() {
    for name in SCENARIOS {
        let expected = client_oracle::expected(&scenario_json(name), |count| 2 * count + 5);
        assert_same("pynvml", name, &expected, &pynvml_view(name));
    }
}

// ---- nvml-wrapper ----

/// The scenario variable is process-wide: in-process NVML tests take turns.
static IN_PROCESS: Mutex<()> = Mutex::new(());

fn code(error: NvmlError) -> Value {
    let code: c_uint = error.into();
    client_oracle::error(u64::from(code))
}

fn or_code<T>(result: Result<T, NvmlError>, to_json: impl FnOnce(T) -> Value) -> Value {
    result.map(to_json).unwrap_or_else(code)
}

fn processes_json(result: Result<Vec<ProcessInfo>, NvmlError>) -> Value {
    const NO_ID: u32 = 0xFFFF_FFFF;
    or_code(result, |list| {
        list.iter()
            .map(|p| {
                json!({
                    "pid": p.pid,
                    "used": match p.used_gpu_memory { UsedGpuMemory::Used(bytes) => json!(bytes), UsedGpuMemory::Unavailable => Value::Null },
                    "gpu_instance_id": p.gpu_instance_id.unwrap_or(NO_ID),
                    "compute_instance_id": p.compute_instance_id.unwrap_or(NO_ID),
                })
            })
            .collect()
    })
}

fn memory_json(device: &Device) -> Value {
    or_code(
        device.memory_info(),
        |m| json!({ "total": m.total, "reserved": m.reserved, "used": m.used, "free": m.free }),
    )
}

/// A raw call through `nvml.lib()`, as strata makes for the calls nvml-wrapper lacks.
fn instance_id(nvml: &Nvml, device: &Device, compute: bool) -> Value {
    let mut id: c_uint = 0;
    // SAFETY: a live device handle and a valid out pointer.
    let returned = unsafe {
        match compute {
            false => nvml
                .lib()
                .nvmlDeviceGetGpuInstanceId(device.handle(), &mut id),
            true => nvml
                .lib()
                .nvmlDeviceGetComputeInstanceId(device.handle(), &mut id),
        }
    };
    match returned {
        0 => json!(id),
        code => client_oracle::error(u64::from(code)),
    }
}

fn mig_json(nvml: &Nvml, parent: &Device, slot: u32) -> Value {
    let mig = match parent.mig_device_by_index(slot) {
        Ok(mig) => mig,
        Err(error) => return code(error),
    };
    json!({
        "memory": memory_json(&mig),
        "name": or_code(mig.name(), Value::from),
        "uuid": or_code(mig.uuid(), Value::from),
        "gpu_instance_id": instance_id(nvml, &mig, false),
        "compute_instance_id": instance_id(nvml, &mig, true),
        "compute_processes": processes_json(mig.running_compute_processes()),
        "mps_processes": processes_json(mig.mps_running_compute_processes()),
    })
}

fn device_json(nvml: &Nvml, index: u32) -> Value {
    let device = match nvml.device_by_index(index) {
        Ok(device) => device,
        Err(error) => return code(error),
    };
    let memory = memory_json(&device); // first: this read starts the poll
    let max_mig = device.mig_device_count();
    let slots = *max_mig.as_ref().unwrap_or(&0);
    json!({
        "memory": memory,
        "name": or_code(device.name(), Value::from),
        "uuid": or_code(device.uuid(), Value::from),
        "utilization": or_code(device.utilization_rates(), |u| json!({ "gpu": u.gpu, "memory": u.memory })),
        "temperature": or_code(device.temperature(TemperatureSensor::Gpu), Value::from),
        "power_usage": or_code(device.power_usage(), Value::from),
        "power_limit": or_code(device.enforced_power_limit(), Value::from),
        "sm_clock": or_code(device.clock_info(Clock::SM), Value::from),
        "sm_clock_max": or_code(device.max_clock_info(Clock::SM), Value::from),
        "compute_processes": processes_json(device.running_compute_processes()),
        "graphics_processes": processes_json(device.running_graphics_processes()),
        "mps_processes": processes_json(device.mps_running_compute_processes()),
        "process_utilization": or_code(device.process_utilization_stats(None), |samples| {
            samples.iter().map(|s| json!({ "pid": s.pid, "sm": s.sm_util, "mem": s.mem_util, "enc": s.enc_util, "dec": s.dec_util })).collect()
        }),
        "mig_mode": or_code(device.mig_mode(), |mode| json!([mode.current, mode.pending])),
        "max_mig_devices": or_code(max_mig, Value::from),
        "mig": (0..slots).map(|slot| mig_json(nvml, &device, slot)).collect::<Vec<_>>(),
    })
}

fn init_fake(name: &str) -> Nvml {
    std::env::set_var(SCENARIO_ENV, scenario(name));
    let lib = fake_nvml_lib();
    Nvml::builder()
        .lib_path(lib.as_os_str())
        .init()
        .unwrap_or_else(|e| panic!("nvml-wrapper cannot init the fake on {name}: {e}"))
}

fn wrapper_view(name: &str) -> Value {
    let nvml = init_fake(name);
    let count = nvml
        .device_count()
        .unwrap_or_else(|e| panic!("device_count on {name}: {e}"));
    json!({
        "driver_version": or_code(nvml.sys_driver_version(), Value::from),
        "cuda_driver_version": or_code(nvml.sys_cuda_driver_version(), Value::from),
        "device_count": count,
        "devices": (0..count).map(|index| device_json(&nvml, index)).collect::<Vec<_>>(),
    })
}

#[test]
fn nvml_wrapper_sees_each_scenario_as_written() {
    let _turn = IN_PROCESS.lock().unwrap_or_else(PoisonError::into_inner);
    for name in SCENARIOS {
        let expected = client_oracle::expected(&scenario_json(name), |count| count + 5);
        assert_same("nvml-wrapper", name, &expected, &wrapper_view(name));
    }
}

#[test]
fn nvml_wrapper_follows_the_polls_of_gpu_lost() {
    let _turn = IN_PROCESS.lock().unwrap_or_else(PoisonError::into_inner);
    let scenario = scenario_json("gpu_lost");
    let script = &scenario["devices"][0]["memory"]["used"];
    let lost_at = scenario["devices"][1]["lost_at_poll"]
        .as_u64()
        .expect("gpu_lost has lost_at_poll");
    let nvml = init_fake("gpu_lost");
    let (gpu0, gpu1) = (
        nvml.device_by_index(0).expect("GPU 0"),
        nvml.device_by_index(1).expect("GPU 1"),
    );
    for poll in 0..6u64 {
        let used = gpu0.memory_info().expect("GPU 0 is never lost").used;
        assert_eq!(
            Some(used),
            script[poll as usize].as_u64(),
            "GPU 0 used at poll {poll}"
        );
        let pids: Vec<u32> = gpu0
            .running_compute_processes()
            .expect("processes")
            .iter()
            .map(|p| p.pid)
            .collect();
        assert_eq!(
            pids.contains(&41299),
            poll < 2,
            "pid 41299 lives in polls [0, 2): poll {poll}"
        );
        assert_eq!(
            pids.contains(&41300),
            poll >= 2,
            "pid 41300 lives from poll 2: poll {poll}"
        );
        match gpu1.memory_info() {
            Ok(_) => assert!(poll < lost_at, "GPU 1 answered at poll {poll}"),
            Err(NvmlError::GpuLost) => assert!(poll >= lost_at, "GPU 1 lost early, at poll {poll}"),
            Err(other) => panic!("GPU 1 at poll {poll}: {other}"),
        }
    }
    assert!(matches!(gpu1.name(), Err(NvmlError::GpuLost)));
}

#[test]
fn nvml_wrapper_init_fails_without_a_readable_scenario() {
    let _turn = IN_PROCESS.lock().unwrap_or_else(PoisonError::into_inner);
    std::env::set_var(SCENARIO_ENV, scenario("no_such_scenario"));
    let lib = fake_nvml_lib();
    let result = Nvml::builder().lib_path(lib.as_os_str()).init();
    assert!(
        matches!(result, Err(NvmlError::Unknown)),
        "got {:?}",
        result.err()
    );
}

// ---- strata itself ----

/// `strata snapshot --json` through the fake library, for a scenario.
fn strata_view(name: &str) -> Value {
    let output = run(
        Command::new(common::strata())
            .args(["snapshot", "--json", "--nvml-lib"])
            .arg(fake_nvml_lib())
            .env(SCENARIO_ENV, scenario(name)),
        &format!("run strata snapshot on scenario {name}"),
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "strata printed no JSON for {name}: {e}\n{}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// pynvml's answer, `null` where NVML refused the call (strata's unknown).
fn or_null(value: &Value) -> Value {
    match value.get("error") {
        Some(_) => Value::Null,
        None => value.clone(),
    }
}

/// pynvml's memory answer in strata's terms (`null` where NVML refused the call).
fn pynvml_memory(memory: &Value) -> Value {
    if memory.get("error").is_some() {
        return Value::Null;
    }
    json!({
        "total": memory["total"],
        "used": memory["used"],
        "free": memory["free"],
        "driver_reserved": memory["reserved"],
    })
}

/// A holder as the snapshot shows it: pid, NVML used (`null`: not available), MPS client.
type Holder = (u64, Value, bool);

const LISTS: [&str; 3] = ["compute_processes", "graphics_processes", "mps_processes"];

/// The entries pynvml read in `device`'s lists (a refused list has none), with their list.
fn pynvml_entries(device: &Value) -> Vec<(&'static str, &Value)> {
    LISTS
        .iter()
        .flat_map(|list| {
            device[*list]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |p| (*list, p))
        })
        .collect()
}

/// pynvml's entries as sorted holders, merged as strata merges them: one process listed twice
/// (compute and graphics, or compute and MPS) is one holder, an MPS client if MPS lists it.
fn pynvml_holders(entries: &[(&str, &Value)]) -> Vec<Holder> {
    let mut holders: std::collections::BTreeMap<u64, (Value, bool)> = Default::default();
    for (list, p) in entries {
        let pid = p["pid"].as_u64().expect("pid");
        let used = p["used"].clone();
        let mps = *list == "mps_processes";
        holders
            .entry(pid)
            .and_modify(|(u, m)| {
                if let (Some(a), Some(b)) = (u.as_u64(), used.as_u64()) {
                    *u = json!(a.max(b));
                } else if u.is_null() {
                    *u = used.clone();
                }
                *m |= mps;
            })
            .or_insert((used, mps));
    }
    holders
        .into_iter()
        .map(|(pid, (used, mps))| (pid, used, mps))
        .collect()
}

fn strata_holders(snapshot: &Value, device_uuid: &str) -> Vec<Holder> {
    let mut holders: Vec<Holder> = snapshot["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter(|p| p["device_uuid"] == device_uuid)
        .map(|p| {
            let mps = p["mps"].as_bool().expect("mps");
            (p["pid"].as_u64().expect("pid"), p["used"].clone(), mps)
        })
        .collect();
    holders.sort_by_key(|h| h.0);
    holders
}

/// (GPU instance, compute instance) of an entry or a MIG device, as pynvml read it.
fn ids(v: &Value) -> (Value, Value) {
    (
        or_null(&v["gpu_instance_id"]),
        or_null(&v["compute_instance_id"]),
    )
}

/// What strata reports equals what pynvml reads through the same library: devices, memory
/// v2, processes (v3), MIG instances with their ids, memory and processes.
#[test]
fn strata_reports_what_pynvml_sees() {
    for name in [
        "two_gpus",
        "mig",
        "unavailable_process_memory",
        "not_supported",
        "mps",
        "mig_multi_ci",
        "mig_parent",
        "process_list_refused",
    ] {
        let py = pynvml_view(name);
        let st = strata_view(name);
        let gpus = st["gpus"].as_array().expect("gpus");
        assert_eq!(
            py["device_count"].as_u64(),
            Some(gpus.len() as u64),
            "{name}: device count"
        );
        assert_eq!(py["driver_version"], st["driver_version"], "{name}: driver");
        for (i, (pd, sg)) in py["devices"]
            .as_array()
            .expect("devices")
            .iter()
            .zip(gpus)
            .enumerate()
        {
            let at = format!("{name}: GPU {i}");
            assert_eq!(pd["uuid"], sg["uuid"], "{at} uuid");
            if pd["name"].is_string() {
                assert_eq!(pd["name"], sg["name"], "{at} name");
            }
            assert_eq!(pynvml_memory(&pd["memory"]), sg["memory"], "{at} memory");
            let uuid = sg["uuid"].as_str().expect("uuid");
            let mig_on = pd["mig_mode"]
                .as_array()
                .is_some_and(|m| m.first() == Some(&json!(1)));
            if !mig_on {
                assert_eq!(
                    pynvml_holders(&pynvml_entries(pd)),
                    strata_holders(&st, uuid),
                    "{at} processes"
                );
                continue;
            }
            // What the parent lists and no instance does: strata places it on the instance
            // its ids name, else on the parent.
            let on_instances: Vec<u64> = pd["mig"]
                .as_array()
                .expect("mig slots")
                .iter()
                .flat_map(|m| {
                    pynvml_entries(m)
                        .into_iter()
                        .map(|(_, p)| p["pid"].as_u64())
                })
                .flatten()
                .collect();
            let parent_only: Vec<(&str, &Value)> = pynvml_entries(pd)
                .into_iter()
                .filter(|(_, p)| {
                    !p["pid"]
                        .as_u64()
                        .is_some_and(|pid| on_instances.contains(&pid))
                })
                .collect();
            let instances: Vec<&Value> = pd["mig"]
                .as_array()
                .expect("mig slots")
                .iter()
                .filter(|m| m.get("error").is_none())
                .collect();
            let strata_mig = sg["mig"].as_array().expect("strata mig");
            assert_eq!(instances.len(), strata_mig.len(), "{at}: MIG instances");
            for (pm, sm) in instances.iter().zip(strata_mig) {
                let uuid = sm["uuid"].as_str().expect("mig uuid");
                assert_eq!(pm["uuid"], sm["uuid"], "{at} MIG uuid");
                assert_eq!(
                    pynvml_memory(&pm["memory"]),
                    sm["memory"],
                    "{at} MIG {uuid} memory"
                );
                assert_eq!(
                    or_null(&pm["gpu_instance_id"]),
                    sm["gpu_instance_id"],
                    "{at} MIG {uuid} GI"
                );
                assert_eq!(
                    or_null(&pm["compute_instance_id"]),
                    sm["compute_instance_id"],
                    "{at} MIG {uuid} CI"
                );
                let profile = pm["name"]
                    .as_str()
                    .and_then(|n| n.rsplit_once("MIG "))
                    .map(|(_, p)| p);
                assert_eq!(sm["profile"].as_str(), profile, "{at} MIG {uuid} profile");
                let mut entries = pynvml_entries(pm);
                entries.extend(parent_only.iter().filter(|(_, p)| ids(p) == ids(pm)));
                assert_eq!(
                    pynvml_holders(&entries),
                    strata_holders(&st, uuid),
                    "{at} MIG {uuid} processes"
                );
            }
            // On the parent: only what no instance lists or names (never one counted twice).
            let on_parent: Vec<(&str, &Value)> = parent_only
                .into_iter()
                .filter(|(_, p)| !instances.iter().any(|pm| ids(p) == ids(pm)))
                .collect();
            assert_eq!(
                pynvml_holders(&on_parent),
                strata_holders(&st, uuid),
                "{at}: processes on the parent itself"
            );
        }
    }
}

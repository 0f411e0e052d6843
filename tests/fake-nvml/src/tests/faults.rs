//! Fault injection, MPS lists, several compute instances per GPU instance and the older
//! process-call layouts, called as C would.

use std::ffi::c_uint;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use super::ffi_support::*;
use super::minimal;
use crate::abi::*;
use crate::codes::*;
use crate::ffi_process::*;
use crate::ffi_system::*;

fn count() -> Result<c_uint, u32> {
    let mut count: c_uint = 0;
    // SAFETY: valid out pointer.
    match unsafe { nvmlDeviceGetCount_v2(&mut count) } {
        SUCCESS => Ok(count),
        code => Err(code),
    }
}

fn handle_at(index: u32) -> Result<NvmlDevice, u32> {
    let mut device: NvmlDevice = null_mut();
    // SAFETY: valid out pointer.
    match unsafe { nvmlDeviceGetHandleByIndex_v2(index, &mut device) } {
        SUCCESS => Ok(device),
        code => Err(code),
    }
}

fn started(text: &str) -> Session {
    let session = Session::with_text(text);
    assert_eq!(nvmlInit_v2(), SUCCESS);
    session
}

#[test]
fn the_count_and_a_handle_fail_for_a_window_of_calls() {
    let _session = started(
        r#"{"system": {"faults": [{"call": "nvmlDeviceGetCount_v2", "error": "Unknown", "calls": [0, 2]}]},
            "devices": [
              {"name": "G0", "uuid": "GPU-0", "memory": {"total": 100, "used": 10}},
              {"name": "G1", "uuid": "GPU-1", "memory": {"total": 100, "used": 10},
               "faults": [{"call": "nvmlDeviceGetHandleByIndex_v2", "error": "NoPermission", "calls": [0, 1]},
                          {"call": "nvmlDeviceGetUUID", "error": "ResetRequired"}]}]}"#,
    );
    assert_eq!(count(), Err(ERROR_UNKNOWN));
    assert_eq!(count(), Err(ERROR_UNKNOWN));
    assert_eq!(count(), Ok(2), "the third call succeeds");
    assert!(handle_at(0).is_ok());
    assert_eq!(handle_at(1).err(), Some(ERROR_NO_PERMISSION));
    let gpu1 = handle_at(1).expect("the second try succeeds");
    assert_eq!(uuid(gpu1).err(), Some(ERROR_RESET_REQUIRED));
    assert_eq!(uuid(handle(0)).as_deref(), Ok("GPU-0"));
    // The unversioned count has its own counter, and no fault.
    let mut legacy: c_uint = 0;
    // SAFETY: valid out pointer.
    assert_eq!(unsafe { nvmlDeviceGetCount(&mut legacy) }, SUCCESS);
}

#[test]
fn a_fault_from_a_poll_on_follows_the_devices_clock() {
    let _session = started(&minimal(
        r#", "compute_processes": [{"pid": 5, "used": 1}],
            "faults": [{"call": "nvmlDeviceGetComputeRunningProcesses_v3", "error": "Unknown", "polls": [2, null]},
                       {"call": "nvmlDeviceGetMemoryInfo_v2", "error": "NoPermission", "polls": [3, 4]}]"#,
    ));
    let gpu = handle(0);
    let mut seen = Vec::new();
    for _poll in 0..5 {
        let memory = memory_v2(gpu).err();
        seen.push((memory, compute_processes(gpu).err()));
    }
    assert_eq!(
        seen,
        [
            (None, None),
            (None, None),
            (None, Some(ERROR_UNKNOWN)),
            (Some(ERROR_NO_PERMISSION), Some(ERROR_UNKNOWN)),
            (None, Some(ERROR_UNKNOWN)),
        ],
        "a refused memory read still starts its poll"
    );
}

#[test]
fn a_mig_slot_handle_and_an_instance_list_fail_on_their_own() {
    let _session = started(
        r#"{"devices": [{"name": "A100", "uuid": "GPU-0", "memory": {"total": 100, "used": 10},
            "mig_mode": {"current": 1, "pending": 1}, "max_mig_devices": 4,
            "mig": [
              {"slot": 0, "uuid": "MIG-0", "name": "A100 MIG 1g.10gb", "gpu_instance_id": 1,
               "compute_instance_id": 0, "memory": {"total": 50, "used": 5},
               "compute_processes": [{"pid": 11, "used": 3}],
               "faults": [{"call": "nvmlDeviceGetComputeRunningProcesses_v3", "error": "Unknown"}]},
              {"slot": 1, "uuid": "MIG-1", "name": "A100 MIG 1g.10gb", "gpu_instance_id": 2,
               "compute_instance_id": 0, "memory": {"total": 50, "used": 5},
               "faults": [{"call": "nvmlDeviceGetMigDeviceHandleByIndex", "error": "NoPermission"}]}]}]}"#,
    );
    let gpu = handle(0);
    let mig0 = mig_handle(gpu, 0).expect("slot 0");
    assert_eq!(mig_handle(gpu, 1).err(), Some(ERROR_NO_PERMISSION));
    assert_eq!(mig_handle(gpu, 2).err(), Some(ERROR_NOT_FOUND), "empty");
    assert_eq!(compute_processes(mig0).err(), Some(ERROR_UNKNOWN));
    // The parent's aggregate list still has the instance's process, with its ids.
    let parent: Vec<(u32, u32, u32)> = compute_processes(gpu)
        .expect("parent list")
        .iter()
        .map(|p| (p.pid, p.gpu_instance_id, p.compute_instance_id))
        .collect();
    assert_eq!(parent, [(11, 1, 0)]);
}

#[test]
fn a_delay_holds_the_call_and_not_the_others() {
    let _session = started(&minimal(
        r#", "faults": [{"call": "nvmlDeviceGetName", "delay_ms": 300, "polls": [1, null]}]"#,
    ));
    let gpu = handle(0);
    let timed = |f: &dyn Fn()| {
        let start = Instant::now();
        f();
        start.elapsed()
    };
    assert!(timed(&|| assert!(name(gpu).is_ok())) < Duration::from_millis(250));
    memory_v2(gpu).expect("poll 0");
    memory_v2(gpu).expect("poll 1");
    assert!(timed(&|| assert_eq!(name(gpu).as_deref(), Ok("G"))) >= Duration::from_millis(300));
    // Another thread is not held up while the slow call sleeps.
    let address = gpu as usize;
    let slow = std::thread::spawn(move || name(address as NvmlDevice).is_ok());
    std::thread::sleep(Duration::from_millis(50));
    assert!(timed(&|| assert!(memory_v2(gpu).is_ok())) < Duration::from_millis(200));
    assert!(slow.join().expect("thread"));
}

#[test]
fn mps_clients_are_listed_apart_and_on_the_parent() {
    let _session = started(
        r#"{"devices": [{"name": "H100", "uuid": "GPU-0", "memory": {"total": 100, "used": 10},
            "compute_processes": [{"pid": 900, "used": 4}],
            "mps_processes": [{"pid": 901, "used": 2}, {"pid": 902, "used": null}]}]}"#,
    );
    let gpu = handle(0);
    let mps: Vec<(u32, u64)> = list(gpu, nvmlDeviceGetMPSComputeRunningProcesses_v3)
        .expect("MPS list")
        .iter()
        .map(|p| (p.pid, p.used_gpu_memory))
        .collect();
    assert_eq!(mps, [(901, 2), (902, VALUE_NOT_AVAILABLE_U64)]);
    let compute: Vec<u32> = compute_processes(gpu)
        .expect("list")
        .iter()
        .map(|p| p.pid)
        .collect();
    assert_eq!(compute, [900]);
}

#[test]
fn older_process_calls_fill_their_own_layouts() {
    let _session = Session::example("mig");
    let gpu = handle(0);
    let v2: Vec<(u32, u64, u32, u32)> = list(gpu, nvmlDeviceGetComputeRunningProcesses_v2)
        .expect("_v2")
        .iter()
        .map(|p| {
            (
                p.pid,
                p.used_gpu_memory,
                p.gpu_instance_id,
                p.compute_instance_id,
            )
        })
        .collect();
    let v3: Vec<(u32, u64, u32, u32)> = compute_processes(gpu)
        .expect("_v3")
        .iter()
        .map(|p| {
            (
                p.pid,
                p.used_gpu_memory,
                p.gpu_instance_id,
                p.compute_instance_id,
            )
        })
        .collect();
    assert_eq!(v2, v3);
    let mut count: c_uint = 0;
    // SAFETY: valid count pointer, null array: a size query.
    let code = unsafe { nvmlDeviceGetComputeRunningProcesses(gpu, &mut count, null_mut()) };
    assert_eq!((code, count), (ERROR_INSUFFICIENT_SIZE, 3));
    let empty = NvmlProcessInfoV1 {
        pid: 0,
        used_gpu_memory: 0,
    };
    let mut v1 = vec![empty; 3];
    // SAFETY: the array holds `count` 16-byte entries.
    let code = unsafe { nvmlDeviceGetComputeRunningProcesses(gpu, &mut count, v1.as_mut_ptr()) };
    assert_eq!(code, SUCCESS);
    let v1: Vec<(u32, u64)> = v1.iter().map(|p| (p.pid, p.used_gpu_memory)).collect();
    let expected: Vec<(u32, u64)> = v3.iter().map(|p| (p.0, p.1)).collect();
    assert_eq!(v1, expected);
}

#[test]
fn several_compute_instances_share_a_gpu_instance_but_not_a_pair() {
    let instance = |slot: u32, ci: u32| {
        format!(
            r#"{{"slot": {slot}, "uuid": "MIG-{slot}", "name": "A100 MIG 1c.3g.40gb",
                "gpu_instance_id": 1, "compute_instance_id": {ci},
                "memory": {{"total": 40, "used": 9}}}}"#
        )
    };
    let scenario = |second_ci: u32| {
        format!(
            r#"{{"devices": [{{"name": "A100", "uuid": "GPU-0", "memory": {{"total": 80, "used": 20}},
                "mig_mode": {{"current": 1, "pending": 1}}, "max_mig_devices": 7,
                "mig": [{}, {}]}}]}}"#,
            instance(0, 0),
            instance(1, second_ci)
        )
    };
    assert!(crate::scenario::parse(&scenario(1)).is_ok());
    let twice = crate::scenario::parse(&scenario(0))
        .err()
        .unwrap_or_default();
    assert!(twice.contains("used twice"), "{twice}");
}

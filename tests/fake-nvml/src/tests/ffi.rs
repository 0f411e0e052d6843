//! The exported functions end to end: init, identity, memory, polls, MIG, counts, refusals.

use std::ffi::{c_char, c_uint, c_void, CStr};
use std::ptr::null_mut;

use super::ffi_support::*;
use super::{minimal, GIB};
use crate::abi::*;
use crate::codes::*;
use crate::ffi_board::*;
use crate::ffi_device::*;
use crate::ffi_mig::*;
use crate::ffi_process::*;
use crate::ffi_system::*;
use crate::state::SCENARIO_ENV;

#[test]
fn init_fails_loudly_without_a_good_scenario_and_calls_before_init_are_refused() {
    let session = Session::with_text("{ not json");
    let mut count: c_uint = 0;
    assert_eq!(
        // SAFETY: valid out pointer.
        unsafe { nvmlDeviceGetCount_v2(&mut count) },
        ERROR_UNINITIALIZED
    );
    assert_eq!(nvmlInit_v2(), ERROR_UNKNOWN, "malformed JSON");
    std::env::set_var(SCENARIO_ENV, session.file.with_extension("missing"));
    assert_eq!(nvmlInitWithFlags(0), ERROR_UNKNOWN, "missing file");
    std::env::remove_var(SCENARIO_ENV);
    assert_eq!(nvmlInit_v2(), ERROR_UNKNOWN, "variable unset");
    assert_eq!(
        // SAFETY: valid out pointer.
        unsafe { nvmlDeviceGetCount_v2(&mut count) },
        ERROR_UNINITIALIZED
    );
    assert_eq!(
        memory_v2(crate::state::handle_for(0, None)).err(),
        Some(ERROR_UNINITIALIZED)
    );
    assert_eq!(nvmlShutdown(), ERROR_UNINITIALIZED);
    // SAFETY: static strings.
    let text = unsafe { CStr::from_ptr(nvmlErrorString(ERROR_UNINITIALIZED)) };
    assert_eq!(text.to_str().ok(), Some("Uninitialized"));
}

#[test]
fn two_gpus_answers_identity_memory_and_processes() {
    let _session = Session::example("two_gpus");
    let mut count: c_uint = 0;
    // SAFETY: valid out pointers throughout.
    unsafe {
        assert_eq!(nvmlDeviceGetCount_v2(&mut count), SUCCESS);
        assert_eq!(count, 2);
        let mut device: NvmlDevice = null_mut();
        assert_eq!(
            nvmlDeviceGetHandleByIndex_v2(2, &mut device),
            ERROR_INVALID_ARGUMENT
        );
        let mut version = [0 as c_char; 80];
        assert_eq!(
            nvmlSystemGetDriverVersion(version.as_mut_ptr(), 80),
            SUCCESS
        );
        assert_eq!(
            CStr::from_ptr(version.as_ptr()).to_str().ok(),
            Some("550.54.15")
        );
        assert_eq!(
            nvmlSystemGetDriverVersion(version.as_mut_ptr(), 9),
            ERROR_INSUFFICIENT_SIZE
        );
        let mut cuda = 0;
        assert_eq!(nvmlSystemGetCudaDriverVersion_v2(&mut cuda), SUCCESS);
        assert_eq!(cuda, 12040);
    }
    let gpu0 = handle(0);
    assert_eq!(name(gpu0).as_deref(), Ok("NVIDIA H100 80GB HBM3"));
    let v2 = memory_v2(gpu0).expect("memory");
    assert_eq!(
        (v2.total, v2.reserved, v2.used, v2.free),
        (85520809984, 617611264, 63540559872, 21362638848)
    );
    let mut v1 = NvmlMemory {
        total: 0,
        free: 0,
        used: 0,
    };
    // SAFETY: valid out pointer.
    assert_eq!(unsafe { nvmlDeviceGetMemoryInfo(gpu0, &mut v1) }, SUCCESS);
    assert_eq!(
        (v1.total, v1.free, v1.used),
        (v2.total, v2.free, v2.used + v2.reserved)
    );
    let processes = compute_processes(gpu0).expect("processes");
    let seen: Vec<(u32, u64, u32)> = processes
        .iter()
        .map(|p| (p.pid, p.used_gpu_memory, p.gpu_instance_id))
        .collect();
    assert_eq!(
        seen,
        [
            (41237, 48845815808, NO_INSTANCE_ID),
            (41290, 14170456064, NO_INSTANCE_ID)
        ]
    );
    // A buffer too small gets the real count back.
    let mut small: c_uint = 1;
    let mut one = [processes[0]];
    assert_eq!(
        // SAFETY: the array holds 1 entry.
        unsafe { nvmlDeviceGetComputeRunningProcesses_v3(gpu0, &mut small, one.as_mut_ptr()) },
        ERROR_INSUFFICIENT_SIZE
    );
    assert_eq!(small, 2);
    // Graphics: none on GPU 0, so the size query succeeds with 0.
    let mut none: c_uint = 0;
    assert_eq!(
        // SAFETY: valid count pointer, null array.
        unsafe { nvmlDeviceGetGraphicsRunningProcesses_v3(gpu0, &mut none, null_mut()) },
        SUCCESS
    );
    assert_eq!(none, 0);
    let mut samples: c_uint = 0;
    assert_eq!(
        // SAFETY: valid count pointer, null array.
        unsafe { nvmlDeviceGetProcessUtilization(gpu0, null_mut(), &mut samples, 0) },
        ERROR_INSUFFICIENT_SIZE
    );
    assert_eq!(samples, 2);
    let mut pci = std::mem::MaybeUninit::<NvmlPciInfo>::zeroed();
    assert_eq!(
        // SAFETY: valid out pointer.
        unsafe { nvmlDeviceGetPciInfo_v3(handle(1), pci.as_mut_ptr()) },
        SUCCESS
    );
    // SAFETY: written by the call.
    let pci = unsafe { pci.assume_init() };
    assert_eq!((pci.bus, pci.domain), (0x2A, 0));
    assert_eq!(
        // SAFETY: NUL-terminated.
        unsafe { CStr::from_ptr(pci.bus_id.as_ptr()) }.to_str().ok(),
        Some("00000000:2A:00.0")
    );
}

#[test]
fn memory_v2_checks_the_version_word_and_handles_are_checked() {
    let _session = Session::example("two_gpus");
    let gpu0 = handle(0);
    let mut memory = NvmlMemoryV2 {
        version: 0x0100_0028,
        total: 0,
        reserved: 0,
        free: 0,
        used: 0,
    };
    assert_eq!(
        // SAFETY: valid out pointer.
        unsafe { nvmlDeviceGetMemoryInfo_v2(gpu0, &mut memory) },
        ERROR_ARGUMENT_VERSION_MISMATCH
    );
    assert_eq!(
        // SAFETY: a null pointer is refused, not written.
        unsafe { nvmlDeviceGetMemoryInfo_v2(gpu0, null_mut()) },
        ERROR_INVALID_ARGUMENT
    );
    let bogus = 0x1234usize as *mut c_void;
    assert_eq!(memory_v2(bogus).err(), Some(ERROR_INVALID_ARGUMENT));
    assert_eq!(memory_v2(null_mut()).err(), Some(ERROR_INVALID_ARGUMENT));
    // A handle inside the table but past the scenario's devices is refused too.
    assert_eq!(
        memory_v2(crate::state::handle_for(5, None)).err(),
        Some(ERROR_INVALID_ARGUMENT)
    );
    assert_eq!(
        memory_v2(crate::state::handle_for(0, Some(0))).err(),
        Some(ERROR_INVALID_ARGUMENT)
    );
}

#[test]
fn memory_reads_advance_polls_and_a_gpu_is_lost_at_its_poll() {
    let _session = Session::example("gpu_lost");
    let (gpu0, gpu1) = (handle(0), handle(1));
    let mut used = Vec::new();
    let mut lost = Vec::new();
    for _poll in 0..5 {
        used.push(memory_v2(gpu0).expect("GPU 0 never lost").used);
        let pids: Vec<u32> = compute_processes(gpu0)
            .expect("processes")
            .iter()
            .map(|p| p.pid)
            .collect();
        assert!(pids.contains(&41237));
        lost.push(memory_v2(gpu1).err());
    }
    assert_eq!(
        used,
        [
            12269387776,
            14416871424,
            20177747968,
            22325231616,
            24472715264
        ]
    );
    assert_eq!(
        lost,
        [
            None,
            None,
            None,
            Some(ERROR_GPU_IS_LOST),
            Some(ERROR_GPU_IS_LOST)
        ]
    );
    assert_eq!(name(gpu1).err(), Some(ERROR_GPU_IS_LOST));
    assert_eq!(compute_processes(gpu1).err(), Some(ERROR_GPU_IS_LOST));
    let mut device: NvmlDevice = null_mut();
    assert_eq!(
        // SAFETY: valid out pointer.
        unsafe { nvmlDeviceGetHandleByIndex_v2(1, &mut device) },
        ERROR_GPU_IS_LOST
    );
    // Re-init re-reads the scenario and starts again at poll 0.
    assert_eq!(nvmlInit_v2(), SUCCESS);
    assert_eq!(memory_v2(gpu1).map(|m| m.used), Ok(35883319296));
    assert_eq!(memory_v2(gpu0).map(|m| m.used), Ok(12269387776));
}

#[test]
fn mig_handles_ids_and_the_parent_process_union() {
    let _session = Session::example("mig");
    let gpu0 = handle(0);
    let slots: Vec<Result<NvmlDevice, u32>> = (0..8).map(|i| mig_handle(gpu0, i)).collect();
    assert!(slots[..3].iter().all(Result::is_ok));
    assert_eq!(
        slots[3..7].iter().map(|s| s.err()).collect::<Vec<_>>(),
        [Some(ERROR_NOT_FOUND); 4]
    );
    assert_eq!(
        slots[7].err(),
        Some(ERROR_INVALID_ARGUMENT),
        "index past max_mig_devices"
    );
    let mig0 = slots[0].expect("slot 0");
    assert_ne!(mig0, gpu0);
    assert_eq!(
        name(mig0).as_deref(),
        Ok("NVIDIA A100-SXM4-80GB MIG 3g.40gb")
    );
    let mut value: c_uint = 99;
    let mut parent: NvmlDevice = null_mut();
    // SAFETY: valid out pointers.
    unsafe {
        assert_eq!(nvmlDeviceIsMigDeviceHandle(mig0, &mut value), SUCCESS);
        assert_eq!(value, 1);
        assert_eq!(nvmlDeviceIsMigDeviceHandle(gpu0, &mut value), SUCCESS);
        assert_eq!(value, 0);
        assert_eq!(
            nvmlDeviceGetGpuInstanceId(slots[1].expect("slot 1"), &mut value),
            SUCCESS
        );
        assert_eq!(value, 5);
        assert_eq!(
            nvmlDeviceGetGpuInstanceId(gpu0, &mut value),
            ERROR_NOT_SUPPORTED
        );
        assert_eq!(
            nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig0, &mut parent),
            SUCCESS
        );
        assert_eq!(parent, gpu0);
        assert_eq!(
            nvmlDeviceGetDeviceHandleFromMigDeviceHandle(gpu0, &mut parent),
            ERROR_INVALID_ARGUMENT
        );
        let mut current: c_uint = 0;
        assert_eq!(
            nvmlDeviceGetMigMode(gpu0, &mut current, &mut value),
            SUCCESS
        );
        assert_eq!((current, value), (1, 1));
        let mut by_uuid: NvmlDevice = null_mut();
        let uuid = c"MIG-8c3b1e7f-0d2a-5c94-a6e1-4b7f9c2d8e03";
        assert_eq!(
            nvmlDeviceGetHandleByUUID(uuid.as_ptr(), &mut by_uuid),
            SUCCESS
        );
        assert_eq!(Ok(by_uuid), slots[1]);
        assert_eq!(
            nvmlDeviceGetHandleByUUID(c"GPU-nope".as_ptr(), &mut by_uuid),
            ERROR_NOT_FOUND
        );
    }
    assert_eq!(memory_v2(mig0).map(|m| m.total), Ok(42144366592));
    let on_mig0: Vec<(u32, u32, u32)> = compute_processes(mig0)
        .expect("list")
        .iter()
        .map(|p| (p.pid, p.gpu_instance_id, p.compute_instance_id))
        .collect();
    assert_eq!(on_mig0, [(61001, 1, 0), (61002, 1, 0)]);
    let on_parent: Vec<(u32, u32)> = compute_processes(gpu0)
        .expect("list")
        .iter()
        .map(|p| (p.pid, p.gpu_instance_id))
        .collect();
    assert_eq!(on_parent, [(61001, 1), (61002, 1), (62001, 5)]);
    // GPU 1 has MIG disabled: no MIG device handles.
    assert_eq!(mig_handle(handle(1), 0).err(), Some(ERROR_NOT_SUPPORTED));
}

#[test]
fn count_jitter_moves_the_size_query_only() {
    let _session = Session::example("absurd");
    let (gpu0, gpu1, gpu2) = (handle(0), handle(1), handle(2));
    let size_query = |device| {
        let mut count: c_uint = 0;
        // SAFETY: valid count pointer, null array.
        let code =
            unsafe { nvmlDeviceGetComputeRunningProcesses_v3(device, &mut count, null_mut()) };
        (code, count)
    };
    assert_eq!(size_query(gpu0), (ERROR_INSUFFICIENT_SIZE, 5));
    assert_eq!(compute_processes(gpu0).map(|l| l.len()), Ok(3));
    assert_eq!(size_query(gpu1), (SUCCESS, 0), "real 1, jitter -1");
    assert_eq!(size_query(gpu2), (ERROR_INSUFFICIENT_SIZE, 3));
    let memory = memory_v2(gpu0).expect("memory");
    assert!(memory.used > memory.total);
    memory_v2(gpu2).expect("poll 0");
    memory_v2(gpu2).expect("poll 1");
    assert_eq!(
        size_query(gpu2),
        (ERROR_INSUFFICIENT_SIZE, 7),
        "poll 1: jitter +3"
    );
}

#[test]
fn temperature_of_the_gpu_sensor_only() {
    let _session = Session::example("two_gpus");
    let (gpu0, gpu1) = (handle(0), handle(1));
    let mut celsius: c_uint = 0;
    // SAFETY: valid out pointers throughout; a null one is refused, not written.
    unsafe {
        assert_eq!(nvmlDeviceGetTemperature(gpu0, 0, &mut celsius), SUCCESS);
        assert_eq!(celsius, 64);
        assert_eq!(
            nvmlDeviceGetTemperature(gpu0, 1, &mut celsius),
            ERROR_NOT_SUPPORTED,
            "only the GPU sensor"
        );
        assert_eq!(
            nvmlDeviceGetTemperature(gpu0, 0, null_mut()),
            ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            nvmlDeviceGetTemperature(gpu1, 0, &mut celsius),
            ERROR_NOT_SUPPORTED,
            "absent from the scenario: not supported"
        );
    }
}

#[test]
fn power_and_the_sm_clock_follow_the_polls() {
    let _session = Session::example("two_gpus");
    let (gpu0, gpu1) = (handle(0), handle(1));
    let read = |f: unsafe extern "C" fn(NvmlDevice, *mut c_uint) -> u32, device| {
        let mut out: c_uint = 0;
        // SAFETY: a valid out pointer.
        let code = unsafe { f(device, &mut out) };
        (code == SUCCESS).then_some(out).ok_or(code)
    };
    let clock = |f: unsafe extern "C" fn(NvmlDevice, c_uint, *mut c_uint) -> u32, kind| {
        let mut out: c_uint = 0;
        // SAFETY: a valid out pointer.
        let code = unsafe { f(gpu0, kind, &mut out) };
        (code == SUCCESS).then_some(out).ok_or(code)
    };
    const SM: c_uint = 1;
    const GRAPHICS: c_uint = 0;
    for (poll, (power, sm)) in [(412_345, 1980), (398_020, 1755)].into_iter().enumerate() {
        assert!(
            memory_v2(gpu0).is_ok(),
            "poll {poll} starts with the memory read"
        );
        assert_eq!(
            read(nvmlDeviceGetPowerUsage, gpu0),
            Ok(power),
            "poll {poll}"
        );
        assert_eq!(clock(nvmlDeviceGetClockInfo, SM), Ok(sm), "poll {poll}");
        assert_eq!(read(nvmlDeviceGetEnforcedPowerLimit, gpu0), Ok(700_000));
        assert_eq!(clock(nvmlDeviceGetMaxClockInfo, SM), Ok(1980));
    }
    assert_eq!(
        clock(nvmlDeviceGetClockInfo, GRAPHICS),
        Err(ERROR_NOT_SUPPORTED),
        "only the SM clock"
    );
    assert_eq!(
        clock(nvmlDeviceGetMaxClockInfo, GRAPHICS),
        Err(ERROR_NOT_SUPPORTED)
    );
    for f in [nvmlDeviceGetPowerUsage, nvmlDeviceGetEnforcedPowerLimit] {
        assert_eq!(
            read(f, gpu1),
            Err(ERROR_NOT_SUPPORTED),
            "absent: not supported"
        );
        // SAFETY: a null out pointer is refused, not written.
        assert_eq!(unsafe { f(gpu0, null_mut()) }, ERROR_INVALID_ARGUMENT);
    }
}

#[test]
fn refusals_answer_their_codes() {
    let _session = Session::example("not_supported");
    let (gpu0, gpu1, gpu2) = (handle(0), handle(1), handle(2));
    assert_eq!(compute_processes(gpu0).err(), Some(ERROR_NO_PERMISSION));
    let mut rates = NvmlUtilization { gpu: 0, memory: 0 };
    assert_eq!(
        // SAFETY: valid out pointer.
        unsafe { nvmlDeviceGetUtilizationRates(gpu0, &mut rates) },
        ERROR_NOT_SUPPORTED
    );
    assert_eq!(name(gpu1).err(), Some(ERROR_NO_PERMISSION));
    let mut celsius: c_uint = 0;
    assert_eq!(
        // SAFETY: valid out pointer.
        unsafe { nvmlDeviceGetTemperature(gpu1, 0, &mut celsius) },
        ERROR_NO_PERMISSION
    );
    let mut out: c_uint = 0;
    // SAFETY: valid out pointers.
    unsafe {
        assert_eq!(nvmlDeviceGetPowerUsage(gpu1, &mut out), ERROR_NO_PERMISSION);
        assert_eq!(
            nvmlDeviceGetEnforcedPowerLimit(gpu1, &mut out),
            ERROR_NOT_SUPPORTED
        );
        assert_eq!(nvmlDeviceGetClockInfo(gpu1, 1, &mut out), ERROR_UNKNOWN);
        assert_eq!(nvmlDeviceGetMaxClockInfo(gpu1, 1, &mut out), SUCCESS);
    }
    assert_eq!(out, 1410);
    assert_eq!(memory_v2(gpu1).err(), Some(ERROR_NOT_SUPPORTED));
    let mig = mig_handle(gpu2, 0).expect("slot 0");
    let mut id: c_uint = 0;
    assert_eq!(
        // SAFETY: valid out pointer.
        unsafe { nvmlDeviceGetGpuInstanceId(mig, &mut id) },
        ERROR_NO_PERMISSION
    );
    assert_eq!(memory_v2(mig).err(), Some(ERROR_NOT_SUPPORTED));
    // The refused instance list is left out of the parent's union.
    assert_eq!(compute_processes(gpu2).map(|l| l.len()), Ok(0));
}

#[test]
fn each_init_rereads_the_file_and_shutdown_counts_inits() {
    let session = Session::with_text(&minimal(""));
    assert_eq!(nvmlInit_v2(), SUCCESS);
    assert_eq!(memory_v2(handle(0)).map(|m| m.total), Ok(100));
    std::fs::write(
        &session.file,
        minimal("").replace("100", &(3 * GIB).to_string()),
    )
    .expect("writable");
    assert_eq!(nvmlInitWithFlags(0), SUCCESS);
    assert_eq!(memory_v2(handle(0)).map(|m| m.total), Ok(3 * GIB));
    std::fs::write(&session.file, "[]").expect("writable");
    assert_eq!(nvmlInit_v2(), ERROR_UNKNOWN, "a bad file fails this init");
    assert_eq!(
        memory_v2(handle(0)).map(|m| m.total),
        Ok(3 * GIB),
        "and keeps the last good one"
    );
    let gpu0 = handle(0);
    assert_eq!(nvmlShutdown(), SUCCESS);
    assert_eq!(
        memory_v2(gpu0).map(|m| m.total),
        Ok(3 * GIB),
        "one init still open"
    );
    assert_eq!(nvmlShutdown(), SUCCESS);
    assert_eq!(memory_v2(gpu0).err(), Some(ERROR_UNINITIALIZED));
    assert_eq!(nvmlShutdown(), ERROR_UNINITIALIZED);
}

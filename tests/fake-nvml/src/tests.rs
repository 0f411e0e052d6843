//! Tests of the scenario format and of the exported functions, called as C would call them.
//! The library state is global, so the FFI tests take `SERIAL` and set the scenario variable.

use std::ffi::{c_char, c_uint, c_void, CStr};
use std::path::PathBuf;
use std::ptr::null_mut;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::abi::*;
use crate::codes::*;
use crate::ffi_device::*;
use crate::ffi_mig::*;
use crate::ffi_process::*;
use crate::ffi_system::*;
use crate::scenario::{parse, Answer, Scripted};
use crate::state::SCENARIO_ENV;

const GIB: u64 = 1 << 30;

fn scenarios_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

fn minimal(device_extra: &str) -> String {
    format!(
        r#"{{"devices": [{{"name": "G", "uuid": "GPU-1",
            "memory": {{"total": 100, "used": 10}} {device_extra}}}]}}"#
    )
}

// ---- scenario format ----

#[test]
fn every_example_scenario_parses() {
    let mut seen = 0;
    for entry in std::fs::read_dir(scenarios_dir()).expect("tests/scenarios exists") {
        let path = entry.expect("readable dir entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let loaded = crate::scenario::load(&path);
            assert!(loaded.is_ok(), "{}: {:?}", path.display(), loaded.err());
            seen += 1;
        }
    }
    assert!(seen >= 7, "expected the 7 example scenarios, found {seen}");
}

#[test]
fn example_memory_adds_up_except_in_absurd() {
    for name in [
        "two_gpus",
        "mig",
        "not_supported",
        "unavailable_process_memory",
        "gpu_lost",
        "missing_pid",
    ] {
        let path = scenarios_dir().join(format!("{name}.json"));
        let scenario = crate::scenario::load(&path).expect("example scenario loads");
        for device in &scenario.devices {
            let memories =
                std::iter::once(&device.memory).chain(device.mig.iter().map(|m| &m.memory));
            for memory in memories {
                if let Answer::Value(memory) = memory {
                    for poll in 0..8 {
                        let at = memory.at(poll);
                        assert_eq!(
                            at.reserved + at.used + at.free,
                            at.total,
                            "{name} poll {poll}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn scripted_values_index_by_poll_and_clamp() {
    let script: Scripted<u64> = serde_json::from_str("[5, 6, 7]").expect("valid script");
    assert_eq!(
        (0..5).map(|p| script.at(p)).collect::<Vec<_>>(),
        [5, 6, 7, 7, 7]
    );
    let fixed: Scripted<u64> = serde_json::from_str("9").expect("valid value");
    assert_eq!(fixed.at(1000), 9);
    let with_null: Scripted<Option<u64>> = serde_json::from_str("[1, null]").expect("valid");
    assert_eq!((with_null.at(0), with_null.at(3)), (Some(1), None));
    let empty = serde_json::from_str::<Scripted<u64>>("[]");
    assert!(empty
        .err()
        .is_some_and(|e| e.to_string().contains("empty array")));
}

#[test]
fn error_names_replace_values() {
    let scenario = parse(&minimal(
        r#", "utilization": "NoPermission", "max_mig_devices": "NotSupported""#,
    ))
    .expect("valid scenario");
    let device = &scenario.devices[0];
    assert_eq!(device.utilization.get().err(), Some(ERROR_NO_PERMISSION));
    assert_eq!(device.max_mig_devices, Answer::Error(ERROR_NOT_SUPPORTED));
    // Omitted fields take the documented defaults.
    assert_eq!(device.mig_mode.get().err(), Some(ERROR_NOT_SUPPORTED));
    assert_eq!(device.memory.get().map(|m| m.at(0).free), Ok(90));
}

#[test]
fn mistakes_in_a_scenario_are_reported() {
    let cases = [
        (
            minimal(r#", "utilisation": {"gpu": 1, "memory": 1}"#),
            "unknown field `utilisation`",
        ),
        (minimal(r#", "utilization": "Sometimes""#), "invalid type"),
        (
            minimal(
                r#", "max_mig_devices": 2, "mig": [{"slot": 2, "uuid": "MIG-1", "name": "m",
            "gpu_instance_id": 1, "compute_instance_id": 0, "memory": {"total": 1, "used": 0}}]"#,
            ),
            "slot must be below",
        ),
        (
            minimal(r#", "compute_processes": [{"pid": 1, "used": 1, "polls": [3, 1]}]"#),
            "ends before it starts",
        ),
        (minimal(r#", "pci_bus_id": "18:00.0""#), "pci_bus_id"),
        (
            r#"{"devices": [{"name": "a", "uuid": "GPU-1", "memory": {"total": 1, "used": 0}},
            {"name": "b", "uuid": "GPU-1", "memory": {"total": 1, "used": 0}}]}"#
                .to_owned(),
            "used twice",
        ),
    ];
    for (text, expected) in cases {
        let error = parse(&text).err().unwrap_or_default();
        assert!(error.contains(expected), "{expected:?} not in {error:?}");
    }
}

#[test]
fn process_windows_are_half_open() {
    let scenario = parse(&minimal(
        r#", "compute_processes": [{"pid": 1, "used": null, "polls": [1, 3]},
        {"pid": 2, "used": 5, "gpu_instance_id": 3}]"#,
    ))
    .expect("valid scenario");
    let list = scenario.devices[0].compute_processes.get().expect("a list");
    let pids = |poll| {
        crate::scenario::processes_at(list, poll, NO_INSTANCE_ID, 0)
            .iter()
            .map(|p| p.pid)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        (pids(0), pids(1), pids(2), pids(3)),
        (vec![2], vec![1, 2], vec![1, 2], vec![2])
    );
    let at1 = crate::scenario::processes_at(list, 1, NO_INSTANCE_ID, 0);
    assert_eq!(at1[0].used_bytes, VALUE_NOT_AVAILABLE_U64);
    assert_eq!((at1[1].gpu_instance_id, at1[1].compute_instance_id), (3, 0));
}

// ---- the exported functions ----

static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the library for one test: the lock, and the scenario file set for it.
struct Session {
    _guard: MutexGuard<'static, ()>,
    file: PathBuf,
}

impl Session {
    fn with_text(text: &str) -> Session {
        let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
        while nvmlShutdown() == SUCCESS {}
        let file =
            std::env::temp_dir().join(format!("strata-fake-nvml-test-{}.json", std::process::id()));
        std::fs::write(&file, text).expect("temp file writable");
        std::env::set_var(SCENARIO_ENV, &file);
        Session {
            _guard: guard,
            file,
        }
    }

    fn example(name: &str) -> Session {
        let text = std::fs::read_to_string(scenarios_dir().join(format!("{name}.json")))
            .expect("example exists");
        let session = Session::with_text(&text);
        assert_eq!(nvmlInit_v2(), SUCCESS);
        session
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        while nvmlShutdown() == SUCCESS {}
        let _ = std::fs::remove_file(&self.file);
    }
}

fn handle(index: u32) -> NvmlDevice {
    let mut device: NvmlDevice = null_mut();
    // SAFETY: a valid out pointer.
    assert_eq!(
        unsafe { nvmlDeviceGetHandleByIndex_v2(index, &mut device) },
        SUCCESS
    );
    device
}

fn mig_handle(parent: NvmlDevice, index: u32) -> Result<NvmlDevice, u32> {
    let mut device: NvmlDevice = null_mut();
    // SAFETY: a valid out pointer.
    match unsafe { nvmlDeviceGetMigDeviceHandleByIndex(parent, index, &mut device) } {
        SUCCESS => Ok(device),
        code => Err(code),
    }
}

fn memory_v2(device: NvmlDevice) -> Result<NvmlMemoryV2, u32> {
    let mut memory = NvmlMemoryV2 {
        version: NVML_MEMORY_V2_VERSION,
        total: 0,
        reserved: 0,
        free: 0,
        used: 0,
    };
    // SAFETY: a valid out pointer.
    match unsafe { nvmlDeviceGetMemoryInfo_v2(device, &mut memory) } {
        SUCCESS => Ok(memory),
        code => Err(code),
    }
}

fn name(device: NvmlDevice) -> Result<String, u32> {
    let mut buffer = [0 as c_char; 96];
    // SAFETY: the buffer holds 96 bytes.
    match unsafe { nvmlDeviceGetName(device, buffer.as_mut_ptr(), 96) } {
        // SAFETY: NUL-terminated by the callee.
        SUCCESS => Ok(unsafe { CStr::from_ptr(buffer.as_ptr()) }
            .to_string_lossy()
            .into_owned()),
        code => Err(code),
    }
}

/// The two-call protocol, as nvml-wrapper runs it: size query, then a buffer of count + 5.
fn compute_processes(device: NvmlDevice) -> Result<Vec<NvmlProcessInfo>, u32> {
    let mut count: c_uint = 0;
    // SAFETY: valid count pointer, null array.
    match unsafe { nvmlDeviceGetComputeRunningProcesses_v3(device, &mut count, null_mut()) } {
        SUCCESS => return Ok(Vec::new()),
        ERROR_INSUFFICIENT_SIZE => {}
        code => return Err(code),
    }
    let empty = NvmlProcessInfo {
        pid: 0,
        used_gpu_memory: 0,
        gpu_instance_id: 0,
        compute_instance_id: 0,
    };
    let mut infos = vec![empty; count as usize + 5];
    count += 5;
    // SAFETY: the array holds `count` entries.
    match unsafe { nvmlDeviceGetComputeRunningProcesses_v3(device, &mut count, infos.as_mut_ptr()) }
    {
        SUCCESS => {
            infos.truncate(count as usize);
            Ok(infos)
        }
        code => Err(code),
    }
}

#[test]
fn init_fails_loudly_without_a_good_scenario_and_calls_before_init_are_refused() {
    let session = Session::with_text("{ not json");
    let mut count: c_uint = 0;
    // SAFETY: valid out pointer.
    assert_eq!(
        unsafe { nvmlDeviceGetCount_v2(&mut count) },
        ERROR_UNINITIALIZED
    );
    assert_eq!(nvmlInit_v2(), ERROR_UNKNOWN, "malformed JSON");
    std::env::set_var(SCENARIO_ENV, session.file.with_extension("missing"));
    assert_eq!(nvmlInitWithFlags(0), ERROR_UNKNOWN, "missing file");
    std::env::remove_var(SCENARIO_ENV);
    assert_eq!(nvmlInit_v2(), ERROR_UNKNOWN, "variable unset");
    assert_eq!(
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
    // SAFETY: the array holds 1 entry.
    assert_eq!(
        unsafe { nvmlDeviceGetComputeRunningProcesses_v3(gpu0, &mut small, one.as_mut_ptr()) },
        ERROR_INSUFFICIENT_SIZE
    );
    assert_eq!(small, 2);
    // Graphics: none on GPU 0, so the size query succeeds with 0.
    let mut none: c_uint = 0;
    // SAFETY: valid count pointer, null array.
    assert_eq!(
        unsafe { nvmlDeviceGetGraphicsRunningProcesses_v3(gpu0, &mut none, null_mut()) },
        SUCCESS
    );
    assert_eq!(none, 0);
    let mut samples: c_uint = 0;
    // SAFETY: valid count pointer, null array.
    assert_eq!(
        unsafe { nvmlDeviceGetProcessUtilization(gpu0, null_mut(), &mut samples, 0) },
        ERROR_INSUFFICIENT_SIZE
    );
    assert_eq!(samples, 2);
    let mut pci = std::mem::MaybeUninit::<NvmlPciInfo>::zeroed();
    // SAFETY: valid out pointer.
    assert_eq!(
        unsafe { nvmlDeviceGetPciInfo_v3(handle(1), pci.as_mut_ptr()) },
        SUCCESS
    );
    // SAFETY: written by the call.
    let pci = unsafe { pci.assume_init() };
    assert_eq!((pci.bus, pci.domain), (0x2A, 0));
    // SAFETY: NUL-terminated.
    assert_eq!(
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
    // SAFETY: valid out pointer.
    assert_eq!(
        unsafe { nvmlDeviceGetMemoryInfo_v2(gpu0, &mut memory) },
        ERROR_ARGUMENT_VERSION_MISMATCH
    );
    // SAFETY: a null pointer is refused, not written.
    assert_eq!(
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
    // SAFETY: valid out pointer.
    assert_eq!(
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
fn refusals_answer_their_codes() {
    let _session = Session::example("not_supported");
    let (gpu0, gpu1, gpu2) = (handle(0), handle(1), handle(2));
    assert_eq!(compute_processes(gpu0).err(), Some(ERROR_NO_PERMISSION));
    let mut rates = NvmlUtilization { gpu: 0, memory: 0 };
    // SAFETY: valid out pointer.
    assert_eq!(
        unsafe { nvmlDeviceGetUtilizationRates(gpu0, &mut rates) },
        ERROR_NOT_SUPPORTED
    );
    assert_eq!(name(gpu1).err(), Some(ERROR_NO_PERMISSION));
    assert_eq!(memory_v2(gpu1).err(), Some(ERROR_NOT_SUPPORTED));
    let mig = mig_handle(gpu2, 0).expect("slot 0");
    let mut id: c_uint = 0;
    // SAFETY: valid out pointer.
    assert_eq!(
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

//! The board's calls (PCI in its three layouts, PCIe link and traffic, fan, temperature
//! thresholds, video engines), called as C would call them, as nvtop calls them.

use std::ffi::{c_uint, CStr};
use std::mem::MaybeUninit;
use std::ptr::null_mut;

use super::ffi_support::*;
use crate::abi::*;
use crate::codes::*;
use crate::ffi_board::*;

/// GPU 0 has every board figure (some scripted per poll), and MIG on with one instance;
/// GPU 1 none of them; GPU 2 refuses them.
const BOARD: &str = r#"{"devices": [
  {"name": "A", "uuid": "GPU-a", "pci_bus_id": "00000001:9A:1F.0",
   "memory": {"total": 100, "used": 10},
   "pcie_link": {"generation": [5, 4], "width": [16, 8], "max_generation": 5, "max_width": 16},
   "pcie_throughput": {"tx": [1200, 3400], "rx": 56000},
   "fan_speed": [30, 45],
   "temperature_thresholds": {"shutdown": 92, "slowdown": 89},
   "encoder_utilization": [0, 7], "decoder_utilization": 12,
   "bar1_memory": {"total": 1000, "used": [10, 30]},
   "mig_mode": {"current": 1, "pending": 1}, "max_mig_devices": 7,
   "mig": [{"slot": 0, "uuid": "MIG-a0", "name": "A MIG 1g.10gb", "gpu_instance_id": 9,
            "compute_instance_id": 0, "memory": {"total": 10, "used": 1},
            "bar1_memory": {"total": 100, "used": 4}}]},
  {"name": "B", "uuid": "GPU-b", "memory": {"total": 100, "used": 10}},
  {"name": "C", "uuid": "GPU-c", "memory": {"total": 100, "used": 10},
   "pcie_link": "NoPermission", "pcie_throughput": "Unknown", "fan_speed": "NoPermission",
   "temperature_thresholds": "NoPermission", "encoder_utilization": "NoPermission",
   "decoder_utilization": "NoPermission", "bar1_memory": "NoPermission"}
]}"#;

fn started(text: &str) -> Session {
    let session = Session::with_text(text);
    assert_eq!(crate::ffi_system::nvmlInit_v2(), SUCCESS);
    session
}

type Plain = unsafe extern "C" fn(NvmlDevice, *mut c_uint) -> u32;
type Indexed = unsafe extern "C" fn(NvmlDevice, c_uint, *mut c_uint) -> u32;
type Video = unsafe extern "C" fn(NvmlDevice, *mut c_uint, *mut c_uint) -> u32;

fn plain(f: Plain, device: NvmlDevice) -> Result<c_uint, u32> {
    let mut out: c_uint = 0;
    // SAFETY: a valid out pointer.
    match unsafe { f(device, &mut out) } {
        SUCCESS => Ok(out),
        code => Err(code),
    }
}

fn indexed(f: Indexed, device: NvmlDevice, which: c_uint) -> Result<c_uint, u32> {
    let mut out: c_uint = 0;
    // SAFETY: a valid out pointer.
    match unsafe { f(device, which, &mut out) } {
        SUCCESS => Ok(out),
        code => Err(code),
    }
}

fn video(f: Video, device: NvmlDevice) -> Result<(c_uint, c_uint), u32> {
    let (mut percent, mut period) = (0, 0);
    // SAFETY: valid out pointers.
    match unsafe { f(device, &mut percent, &mut period) } {
        SUCCESS => Ok((percent, period)),
        code => Err(code),
    }
}

/// A memory read starts the GPU's next poll.
fn next_poll(device: NvmlDevice) {
    assert!(memory_v2(device).is_ok());
}

const PLAIN: [Plain; 5] = [
    nvmlDeviceGetCurrPcieLinkGeneration,
    nvmlDeviceGetCurrPcieLinkWidth,
    nvmlDeviceGetMaxPcieLinkGeneration,
    nvmlDeviceGetMaxPcieLinkWidth,
    nvmlDeviceGetFanSpeed,
];

#[test]
fn the_board_answers_its_figures_at_each_poll() {
    let _session = started(BOARD);
    let gpu = handle(0);
    // Poll 0, then poll 1: ([generation, width, max generation, max width, fan], TX, encoder).
    let expected = [([5, 16, 5, 16, 30], 1200, 0), ([4, 8, 5, 16, 45], 3400, 7)];
    for (poll, (figures, tx, encoder)) in expected.iter().enumerate() {
        next_poll(gpu);
        let read: Vec<_> = PLAIN.iter().map(|f| plain(*f, gpu)).collect();
        let want: Vec<_> = figures.iter().map(|v| Ok(*v)).collect();
        assert_eq!(read, want, "poll {poll}");
        assert_eq!(
            indexed(nvmlDeviceGetPcieThroughput, gpu, 0),
            Ok(*tx),
            "TX at poll {poll}"
        );
        assert_eq!(indexed(nvmlDeviceGetPcieThroughput, gpu, 1), Ok(56000));
        assert_eq!(
            video(nvmlDeviceGetEncoderUtilization, gpu),
            Ok((*encoder, VIDEO_SAMPLING_PERIOD_US)),
            "encoder at poll {poll}"
        );
        assert_eq!(
            video(nvmlDeviceGetDecoderUtilization, gpu),
            Ok((12, VIDEO_SAMPLING_PERIOD_US))
        );
    }
    assert_eq!(indexed(nvmlDeviceGetTemperatureThreshold, gpu, 0), Ok(92));
    assert_eq!(indexed(nvmlDeviceGetTemperatureThreshold, gpu, 1), Ok(89));
    assert_eq!(
        indexed(nvmlDeviceGetTemperatureThreshold, gpu, 3),
        Err(ERROR_NOT_SUPPORTED),
        "only shutdown and slowdown"
    );
    assert_eq!(
        indexed(nvmlDeviceGetPcieThroughput, gpu, 2),
        Err(ERROR_INVALID_ARGUMENT),
        "only TX and RX"
    );
}

#[test]
fn absent_is_not_supported_refused_is_its_code_and_mig_has_no_board() {
    let _session = started(BOARD);
    let mig = mig_handle(handle(0), 0).expect("slot 0");
    for (device, code, what) in [
        (handle(1), ERROR_NOT_SUPPORTED, "absent"),
        (handle(2), ERROR_NO_PERMISSION, "refused"),
        (mig, ERROR_NOT_SUPPORTED, "a MIG device"),
    ] {
        for f in PLAIN {
            assert_eq!(plain(f, device), Err(code), "{what}");
        }
        assert_eq!(
            indexed(nvmlDeviceGetTemperatureThreshold, device, 0),
            Err(code),
            "{what}"
        );
        assert_eq!(
            video(nvmlDeviceGetEncoderUtilization, device),
            Err(code),
            "{what}"
        );
        assert_eq!(
            video(nvmlDeviceGetDecoderUtilization, device),
            Err(code),
            "{what}"
        );
    }
    assert_eq!(
        indexed(nvmlDeviceGetPcieThroughput, handle(2), 0),
        Err(ERROR_UNKNOWN)
    );
}

#[test]
fn null_out_pointers_are_refused() {
    let _session = started(BOARD);
    let gpu = handle(0);
    let mut out: c_uint = 0;
    // SAFETY: a null out pointer is refused, not written.
    unsafe {
        for f in PLAIN {
            assert_eq!(f(gpu, null_mut()), ERROR_INVALID_ARGUMENT);
        }
        assert_eq!(
            nvmlDeviceGetPcieThroughput(gpu, 0, null_mut()),
            ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            nvmlDeviceGetTemperatureThreshold(gpu, 0, null_mut()),
            ERROR_INVALID_ARGUMENT
        );
        for f in [
            nvmlDeviceGetEncoderUtilization,
            nvmlDeviceGetDecoderUtilization,
        ] {
            assert_eq!(f(gpu, null_mut(), &mut out), ERROR_INVALID_ARGUMENT);
            assert_eq!(f(gpu, &mut out, null_mut()), ERROR_INVALID_ARGUMENT);
        }
        assert_eq!(
            nvmlDeviceGetPciInfo(gpu, null_mut()),
            ERROR_INVALID_ARGUMENT
        );
    }
}

fn c_text(chars: &[std::ffi::c_char]) -> String {
    // SAFETY: the fake NUL-terminates every string it writes into these arrays.
    unsafe { CStr::from_ptr(chars.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn legacy(
    f: unsafe extern "C" fn(NvmlDevice, *mut NvmlPciInfoLegacy) -> u32,
    device: NvmlDevice,
) -> NvmlPciInfoLegacy {
    // Filled with 0xFF first, so that the reserved words are seen to be written.
    let mut pci = MaybeUninit::<NvmlPciInfoLegacy>::uninit();
    // SAFETY: the struct is plain data; every byte pattern is a valid value.
    unsafe { pci.as_mut_ptr().write_bytes(0xFF, 1) };
    // SAFETY: a valid out pointer.
    assert_eq!(unsafe { f(device, pci.as_mut_ptr()) }, SUCCESS);
    // SAFETY: initialised above and written by the call.
    unsafe { pci.assume_init() }
}

#[test]
fn pci_info_in_its_three_layouts_and_a_mig_device_answers_its_parents() {
    let _session = started(BOARD);
    let mig = mig_handle(handle(0), 0).expect("slot 0");
    for device in [handle(0), mig] {
        for f in [nvmlDeviceGetPciInfo, nvmlDeviceGetPciInfo_v2] {
            let pci = legacy(f, device);
            assert_eq!(
                c_text(&pci.bus_id),
                "0001:9A:1F.0",
                "the legacy 4-digit domain"
            );
            assert_eq!((pci.domain, pci.bus, pci.device), (1, 0x9A, 0x1F));
            assert_eq!(
                (pci.pci_device_id, pci.pci_sub_system_id),
                (0x2330_10DE, 0x16C1_10DE)
            );
            assert_eq!(pci.reserved, [0; 4]);
        }
        let mut pci = MaybeUninit::<NvmlPciInfo>::zeroed();
        // SAFETY: a valid out pointer.
        let code = unsafe { nvmlDeviceGetPciInfo_v3(device, pci.as_mut_ptr()) };
        assert_eq!(code, SUCCESS);
        // SAFETY: written by the call.
        let pci = unsafe { pci.assume_init() };
        assert_eq!(c_text(&pci.bus_id_legacy), "0001:9A:1F.0");
        assert_eq!(c_text(&pci.bus_id), "00000001:9A:1F.0");
    }
}

#[test]
fn a_fault_may_name_a_board_call() {
    let _session = started(
        r#"{"devices": [{"name": "A", "uuid": "GPU-a", "memory": {"total": 100, "used": 10},
            "fan_speed": 40,
            "faults": [{"call": "nvmlDeviceGetFanSpeed", "error": "Timeout", "calls": [0, 1]},
                       {"call": "nvmlDeviceGetPciInfo", "error": "Unknown"}]}]}"#,
    );
    let gpu = handle(0);
    assert_eq!(plain(nvmlDeviceGetFanSpeed, gpu), Err(ERROR_TIMEOUT));
    assert_eq!(
        plain(nvmlDeviceGetFanSpeed, gpu),
        Ok(40),
        "the window was one call"
    );
    let mut pci = MaybeUninit::<NvmlPciInfoLegacy>::zeroed();
    // SAFETY: a valid out pointer.
    let code = unsafe { nvmlDeviceGetPciInfo(gpu, pci.as_mut_ptr()) };
    assert_eq!(code, ERROR_UNKNOWN);
    let mut pci = MaybeUninit::<NvmlPciInfoLegacy>::zeroed();
    // SAFETY: a valid out pointer.
    let code = unsafe { nvmlDeviceGetPciInfo_v2(gpu, pci.as_mut_ptr()) };
    assert_eq!(code, SUCCESS, "v2 is its own call");
}

fn bar1(device: NvmlDevice) -> Result<(u64, u64, u64), u32> {
    let mut out = NvmlBar1Memory {
        bar1_total: 0,
        bar1_free: 0,
        bar1_used: 0,
    };
    // SAFETY: a valid out pointer.
    match unsafe { nvmlDeviceGetBAR1MemoryInfo(device, &mut out) } {
        SUCCESS => Ok((out.bar1_total, out.bar1_free, out.bar1_used)),
        code => Err(code),
    }
}

#[test]
fn bar1_of_a_gpu_follows_its_polls_and_a_mig_device_has_its_own() {
    let _session = started(BOARD);
    let gpu = handle(0);
    let mig = mig_handle(gpu, 0).expect("slot 0");
    for (poll, used) in [10, 30].into_iter().enumerate() {
        next_poll(gpu);
        assert_eq!(bar1(gpu), Ok((1000, 1000 - used, used)), "poll {poll}");
    }
    assert_eq!(bar1(mig), Ok((100, 96, 4)), "the MIG device's own share");
    assert_eq!(bar1(handle(1)), Err(ERROR_NOT_SUPPORTED), "absent");
    assert_eq!(bar1(handle(2)), Err(ERROR_NO_PERMISSION), "refused");
    // SAFETY: a null out pointer is refused, not written.
    let code = unsafe { nvmlDeviceGetBAR1MemoryInfo(gpu, null_mut()) };
    assert_eq!(code, ERROR_INVALID_ARGUMENT);
}

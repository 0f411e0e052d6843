//! Single NVML queries that need no choice of call: MIG profile names, raw instance-id calls
//! and per-process utilization.

use nvml_wrapper::Device;
use std::collections::HashMap;

/// A device handle, valid for the life of the `Nvml` that made it. NVML is thread-safe, so the
/// handle can move to the collector thread with its library.
#[derive(Clone, Copy)]
pub(super) struct Handle(pub(super) nvml_wrapper_sys::bindings::nvmlDevice_t);
// SAFETY: NVML handles are opaque pointers into the driver library, documented thread-safe.
unsafe impl Send for Handle {}

/// `3g.40gb` from `NVIDIA A100-SXM4-80GB MIG 3g.40gb`.
pub(crate) fn profile_from_name(name: &str) -> Option<String> {
    let (_, profile) = name.rsplit_once("MIG ")?;
    let profile = profile.trim();
    (!profile.is_empty()).then(|| profile.to_string())
}

type IdQuery = unsafe extern "C" fn(
    nvml_wrapper_sys::bindings::nvmlDevice_t,
    *mut std::os::raw::c_uint,
) -> nvml_wrapper_sys::bindings::nvmlReturn_t;

/// A raw `unsigned int` query through the library (`nvmlDeviceGetGpuInstanceId`,
/// `nvmlDeviceGetComputeInstanceId`), `None` where the symbol is missing or the call fails.
pub(super) fn raw_id(symbol: Option<&IdQuery>, handle: Handle) -> Option<u32> {
    let f = symbol?;
    let mut value: std::os::raw::c_uint = 0;
    // SAFETY: a valid handle and a valid out-pointer, as the NVML signature requires.
    let code = unsafe { f(handle.0, &mut value) };
    (code == 0).then_some(value)
}

/// Per-process SM utilization NVML has sampled since `since` (µs), latest per PID; and why
/// NVML would not say, where it refused (`NotFound`, no sample since, is no refusal).
pub(super) fn sm_utilization(
    device: &Device<'_>,
    since: Option<u64>,
    seen: &mut u64,
) -> (HashMap<u32, u32>, Option<super::refusal::Refusal>) {
    let mut latest: HashMap<u32, (u64, u32)> = HashMap::new();
    let refused = match device.process_utilization_stats(since) {
        Ok(samples) => {
            for s in samples {
                *seen = (*seen).max(s.timestamp);
                let entry = latest.entry(s.pid).or_insert((s.timestamp, s.sm_util));
                if s.timestamp >= entry.0 {
                    *entry = (s.timestamp, s.sm_util);
                }
            }
            None
        }
        Err(nvml_wrapper::error::NvmlError::NotFound) => None,
        Err(e) => Some(super::refusal::Refusal::of(
            "nvmlDeviceGetProcessUtilization",
            e,
        )),
    };
    let sm = latest.into_iter().map(|(pid, (_, sm))| (pid, sm)).collect();
    (sm, refused)
}

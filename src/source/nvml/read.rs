//! The vocabulary one poll reads with, shared by the GPU and MIG readers: the library and
//! its calls, a holder placed on its device, and a refusal kept as a value's `None` (or the
//! GPU lost).

use super::api::Api;
use super::processes::Holding;
use super::query::Handle;
use super::refusal::Refusal;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use std::collections::BTreeMap;

/// What a poll reads with: the library and the calls chosen for its driver.
pub(super) struct Reader<'a> {
    pub(super) nvml: &'a Nvml,
    pub(super) api: &'a Api,
}

impl Reader<'_> {
    pub(super) fn device(&self, handle: Handle) -> Device<'_> {
        // SAFETY: every handle comes from this `nvml`, and stays valid while it lives.
        unsafe { Device::new(handle.0, self.nvml) }
    }
}

/// The device answered `GPU_IS_LOST`: nothing read in this poll is current.
#[derive(Debug)]
pub(super) struct Lost;

/// A holder of memory, placed on the device (GPU or MIG instance) it holds memory on.
pub(super) struct Placed {
    pub(super) pid: u32,
    /// Shared by every process placed on the device: made once a read.
    pub(super) device_uuid: std::sync::Arc<str>,
    pub(super) holding: Holding,
}

/// A value, `None` with the refusal noted in `problems` under `key` (a `NotSupported` is not
/// noted), or [`Lost`].
pub(super) fn value<T>(
    result: Result<T, NvmlError>,
    call: &'static str,
    key: &str,
    problems: &mut BTreeMap<String, String>,
) -> Result<Option<T>, Lost> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(e) => note(Refusal::of(call, e), key, problems).map(|()| None),
    }
}

/// Notes a refusal under `key` unless it is `NotSupported`; [`Lost`] for `GPU_IS_LOST`.
pub(super) fn note(
    refusal: Refusal,
    key: &str,
    problems: &mut BTreeMap<String, String>,
) -> Result<(), Lost> {
    if refusal.is_lost() {
        return Err(Lost);
    }
    if !refusal.is_not_supported() {
        problems.insert(key.to_string(), refusal.line());
    }
    Ok(())
}

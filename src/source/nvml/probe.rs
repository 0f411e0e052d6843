//! The calls a poll makes, one at a time, for `strata doctor`: which of R510's calls this
//! driver has, and one device's memory and process lists read through the very calls a poll
//! chooses, each refusal in the poll's own words.

use super::api::{Api, ListKind};
use super::processes;
use super::query::Handle;
use super::refusal::{Refusal, Why, NO_PERMISSION};
use crate::sample::DeviceMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use std::marker::PhantomData;

/// What kind of refusal a call met: what a user can do about it differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RefusedKind {
    /// `NVML_ERROR_NO_PERMISSION`.
    NeedsRoot,
    /// `NVML_ERROR_GPU_IS_LOST`.
    Lost,
    /// `NVML_ERROR_NOT_SUPPORTED`: the value does not exist here.
    NotSupported,
    /// The library has no such function (an older driver).
    MissingCall,
    /// Any other code, or an answer that could not be decoded.
    Other,
}

/// One call NVML refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    /// NVML's error, the call and what it means, as the poll says it:
    /// `NVML_ERROR_NO_PERMISSION (nvmlDeviceGetMemoryInfo_v2): needs root (...)`.
    pub(crate) line: String,
    /// The call refused: `nvmlDeviceGetMemoryInfo_v2`.
    pub(crate) call: &'static str,
    pub(crate) kind: RefusedKind,
}

impl From<Refusal> for Refused {
    fn from(refusal: Refusal) -> Self {
        let kind = match refusal.why {
            Why::MissingSymbol => RefusedKind::MissingCall,
            _ if refusal.is(NO_PERMISSION) => RefusedKind::NeedsRoot,
            _ if refusal.is_lost() => RefusedKind::Lost,
            _ if refusal.is_not_supported() => RefusedKind::NotSupported,
            _ => RefusedKind::Other,
        };
        Refused {
            line: refusal.line(),
            call: refusal.call,
            kind,
        }
    }
}

/// The refusal of `call`, which nvml-wrapper reported as `error`.
pub(crate) fn refused(call: &'static str, error: NvmlError) -> Refused {
    Refusal::of(call, error).into()
}

/// What a device's three process lists (compute, graphics, MPS clients) said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProcessLists {
    /// Every pid listed, once, in order.
    pub(crate) pids: Vec<u32>,
    /// The lists that could not be read (an unsupported graphics or MPS list is no gap).
    pub(crate) refused: Vec<Refused>,
    /// A list answered `GPU_IS_LOST`.
    pub(crate) lost: bool,
}

/// The calls the poll chose for this driver. Made from an [`Nvml`], it lives no longer.
pub(crate) struct DriverCalls<'nvml> {
    api: Api,
    _library: PhantomData<&'nvml Nvml>,
}

impl<'nvml> DriverCalls<'nvml> {
    pub(crate) fn of(nvml: &'nvml Nvml) -> Self {
        DriverCalls {
            api: Api::of(nvml),
            _library: PhantomData,
        }
    }

    /// The poll's own line when the driver lacks a call strata prefers (R510's `_v2` memory
    /// and `_v3` process calls), naming what it uses instead; `None` when it has them all.
    pub(crate) fn lacking(&self, driver_version: Option<&str>) -> Option<String> {
        self.api.driver_problem(driver_version)
    }

    /// Whether some figure cannot be read at all: no memory call, or a process list with no
    /// call in any version.
    pub(crate) fn lacks_a_figure(&self) -> bool {
        self.api.memory_call().is_none() || ListKind::ALL.into_iter().any(|k| self.api.lacks(k))
    }

    /// The memory call a poll makes (`_v2`, else v1), `None` when there is none.
    pub(crate) fn memory_call(&self) -> Option<&'static str> {
        self.api.memory_call()
    }

    /// The device's memory, as a poll reads it. `device` must come from the same library.
    pub(crate) fn memory(&self, device: &Device<'nvml>) -> Result<DeviceMemory, Refused> {
        self.api.memory(device).map_err(Refused::from)
    }

    /// The device's process lists, as a poll reads them. `device` must come from the same
    /// library.
    pub(crate) fn processes(&self, device: &Device<'nvml>) -> ProcessLists {
        // SAFETY: a handle of this library, which outlives `self` and `device`.
        let handle = Handle(unsafe { device.handle() });
        let lists = processes::read(&self.api, handle);
        ProcessLists {
            pids: lists.by_pid.keys().copied().collect(),
            refused: lists.refused.into_iter().map(Refused::from).collect(),
            lost: lists.lost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::nvml::refusal::GPU_IS_LOST;

    #[test]
    fn each_refusal_is_told_apart_for_its_fix() {
        let kind = |r: Refusal| Refused::from(r).kind;
        assert_eq!(
            kind(Refusal::code("c", NO_PERMISSION)),
            RefusedKind::NeedsRoot
        );
        assert_eq!(kind(Refusal::code("c", GPU_IS_LOST)), RefusedKind::Lost);
        assert_eq!(kind(Refusal::code("c", 3)), RefusedKind::NotSupported);
        assert_eq!(kind(Refusal::missing("c")), RefusedKind::MissingCall);
        assert_eq!(kind(Refusal::code("c", 999)), RefusedKind::Other);
        let line = Refused::from(Refusal::code("nvmlDeviceGetMemoryInfo_v2", NO_PERMISSION)).line;
        assert!(line.starts_with("NVML_ERROR_NO_PERMISSION (nvmlDeviceGetMemoryInfo_v2)"));
    }
}

//! What NVML refused, in one line a user can act on: NVML's own error name, the call, and what
//! it means or what to try. These lines fill the `problems` maps of the raw sample.

use nvml_wrapper::error::NvmlError;

/// `NVML_ERROR_NOT_SUPPORTED`.
pub(super) const NOT_SUPPORTED: u32 = 3;
/// `NVML_ERROR_NO_PERMISSION`.
pub(super) const NO_PERMISSION: u32 = 4;
/// `NVML_ERROR_NOT_FOUND`.
pub(super) const NOT_FOUND: u32 = 6;
/// `NVML_ERROR_INSUFFICIENT_SIZE`.
pub(super) const INSUFFICIENT_SIZE: u32 = 7;
/// `NVML_ERROR_INVALID_ARGUMENT`.
pub(super) const INVALID_ARGUMENT: u32 = 2;
/// `NVML_ERROR_GPU_IS_LOST`.
pub(super) const GPU_IS_LOST: u32 = 15;

/// Why one NVML call gave no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
    /// NVML answered this return code.
    Code(u32),
    /// The library has no such function (an older driver).
    MissingSymbol,
    /// The wrapper refused the answer (a string that is not UTF-8, say).
    Wrapper,
}

/// One refused NVML call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Refusal {
    pub(super) call: &'static str,
    pub(super) why: Why,
}

impl Refusal {
    pub(super) fn code(call: &'static str, code: u32) -> Self {
        Refusal {
            call,
            why: Why::Code(code),
        }
    }

    pub(super) fn missing(call: &'static str) -> Self {
        Refusal {
            call,
            why: Why::MissingSymbol,
        }
    }

    /// The refusal of `call` that nvml-wrapper reported as `error`.
    pub(super) fn of(call: &'static str, error: NvmlError) -> Self {
        let why = match error {
            NvmlError::FailedToLoadSymbol(_) => Why::MissingSymbol,
            NvmlError::Utf8Error(_)
            | NvmlError::NulError(_)
            | NvmlError::StringTooLong { .. }
            | NvmlError::IncorrectBits(_)
            | NvmlError::LibloadingError(_) => Why::Wrapper,
            other => Why::Code(other.into()),
        };
        Refusal { call, why }
    }

    pub(super) fn is(&self, code: u32) -> bool {
        self.why == Why::Code(code)
    }

    pub(super) fn is_lost(&self) -> bool {
        self.is(GPU_IS_LOST)
    }

    /// `NotSupported`: the value does not exist here, which is not a problem to report.
    pub(super) fn is_not_supported(&self) -> bool {
        self.is(NOT_SUPPORTED)
    }

    /// `NVML_ERROR_NO_PERMISSION (nvmlDeviceGetComputeRunningProcesses_v3): needs root (...)`.
    pub(super) fn line(&self) -> String {
        let (name, meaning) = match self.why {
            Why::Code(code) => (error_name(code), meaning(code)),
            Why::MissingSymbol => (
                "missing".to_string(),
                "this driver's libnvidia-ml has no such function (an older driver: upgrade it)"
                    .to_string(),
            ),
            Why::Wrapper => (
                "unreadable".to_string(),
                "NVML's answer could not be decoded (check `nvidia-smi -q`)".to_string(),
            ),
        };
        format!("{name} ({}): {meaning}", self.call)
    }

    /// [`Refusal::line`] with a more specific meaning in place of the generic one.
    pub(super) fn line_saying(&self, meaning: &str) -> String {
        let name = match self.why {
            Why::Code(code) => error_name(code),
            Why::MissingSymbol => "missing".to_string(),
            Why::Wrapper => "unreadable".to_string(),
        };
        format!("{name} ({}): {meaning}", self.call)
    }
}

/// NVML's name for a return code, as `nvml.h` spells it.
pub(super) fn error_name(code: u32) -> String {
    let name = match code {
        1 => "UNINITIALIZED",
        2 => "INVALID_ARGUMENT",
        3 => "NOT_SUPPORTED",
        4 => "NO_PERMISSION",
        5 => "ALREADY_INITIALIZED",
        6 => "NOT_FOUND",
        7 => "INSUFFICIENT_SIZE",
        8 => "INSUFFICIENT_POWER",
        9 => "DRIVER_NOT_LOADED",
        10 => "TIMEOUT",
        11 => "IRQ_ISSUE",
        12 => "LIBRARY_NOT_FOUND",
        13 => "FUNCTION_NOT_FOUND",
        14 => "CORRUPTED_INFOROM",
        15 => "GPU_IS_LOST",
        16 => "RESET_REQUIRED",
        17 => "OPERATING_SYSTEM",
        18 => "LIB_RM_VERSION_MISMATCH",
        19 => "IN_USE",
        20 => "MEMORY",
        21 => "NO_DATA",
        22 => "VGPU_ECC_NOT_SUPPORTED",
        23 => "INSUFFICIENT_RESOURCES",
        24 => "FREQ_NOT_SUPPORTED",
        25 => "ARGUMENT_VERSION_MISMATCH",
        26 => "DEPRECATED",
        27 => "NOT_READY",
        28 => "GPU_NOT_FOUND",
        29 => "INVALID_STATE",
        999 => "UNKNOWN",
        other => return format!("NVML error {other}"),
    };
    format!("NVML_ERROR_{name}")
}

/// What a return code means for the user, and what to try.
fn meaning(code: u32) -> String {
    match code {
        1 => "NVML is not initialised (restart strata)",
        2 => "NVML refused the request (a stale handle? strata retries at the next poll)",
        3 => "not supported on this GPU or driver",
        4 => "needs root (run strata as root, or ask for the permission)",
        6 => "not found",
        7 => "the answer did not fit (it changed between two calls; strata retries)",
        8 => "the GPU lacks power: check its power cables",
        9 => "the NVIDIA kernel driver is not loaded",
        10 => "the driver timed out (the GPU may be hung: check `nvidia-smi` and dmesg)",
        11 => "the kernel saw an interrupt problem with this GPU (check dmesg)",
        13 => "this driver has no such function (an older driver: upgrade it)",
        14 => "the GPU's infoROM is corrupted (check `nvidia-smi -q`)",
        15 => "the GPU has fallen off the bus",
        16 => "the GPU needs a reset (`nvidia-smi -r`) or a reboot",
        17 => "the operating system blocked the request",
        18 => "libnvidia-ml and the kernel driver are different versions (reload the driver or reboot)",
        19 => "the GPU is in use by another client",
        20 => "the driver ran out of memory",
        21 => "no data yet",
        23 => "the driver lacks resources for the request",
        25 => "this driver does not know the version of the call (upgrade the driver)",
        27 => "the driver is not ready yet (strata retries)",
        28 => "the GPU was not found (removed, or in a reset)",
        _ => "NVML gave no reason (check `nvidia-smi` and dmesg)",
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_the_error_the_call_and_what_to_try() {
        let line = Refusal::code("nvmlDeviceGetComputeRunningProcesses_v3", NO_PERMISSION).line();
        assert_eq!(
            line,
            "NVML_ERROR_NO_PERMISSION (nvmlDeviceGetComputeRunningProcesses_v3): needs root (run strata as root, or ask for the permission)"
        );
        assert!(Refusal::code("x", 16).line().contains("RESET_REQUIRED"));
        assert!(Refusal::code("x", 12345)
            .line()
            .starts_with("NVML error 12345"));
        assert!(Refusal::missing("nvmlDeviceGetMemoryInfo_v2")
            .line()
            .contains("older driver"));
    }

    #[test]
    fn wrapper_errors_keep_nvmls_code() {
        let refusal = Refusal::of("nvmlDeviceGetUUID", NvmlError::ResetRequired);
        assert!(refusal.is(16));
        let lost = Refusal::of("nvmlDeviceGetName", NvmlError::GpuLost);
        assert!(lost.is_lost());
        let missing = Refusal::of("f", NvmlError::FailedToLoadSymbol("f".into()));
        assert_eq!(missing.why, Why::MissingSymbol);
        assert!(Refusal::of("f", NvmlError::NotSupported).is_not_supported());
    }
}

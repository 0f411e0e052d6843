//! NVML return codes and the static strings `nvmlErrorString` answers with.

use std::ffi::{c_char, CStr};

pub const SUCCESS: u32 = 0;
pub const ERROR_UNINITIALIZED: u32 = 1;
pub const ERROR_INVALID_ARGUMENT: u32 = 2;
pub const ERROR_NOT_SUPPORTED: u32 = 3;
pub const ERROR_NO_PERMISSION: u32 = 4;
pub const ERROR_NOT_FOUND: u32 = 6;
pub const ERROR_INSUFFICIENT_SIZE: u32 = 7;
pub const ERROR_INSUFFICIENT_POWER: u32 = 8;
pub const ERROR_DRIVER_NOT_LOADED: u32 = 9;
pub const ERROR_TIMEOUT: u32 = 10;
pub const ERROR_IRQ_ISSUE: u32 = 11;
pub const ERROR_FUNCTION_NOT_FOUND: u32 = 13;
pub const ERROR_CORRUPTED_INFOROM: u32 = 14;
pub const ERROR_GPU_IS_LOST: u32 = 15;
pub const ERROR_RESET_REQUIRED: u32 = 16;
pub const ERROR_OPERATING_SYSTEM: u32 = 17;
pub const ERROR_LIB_RM_VERSION_MISMATCH: u32 = 18;
pub const ERROR_IN_USE: u32 = 19;
pub const ERROR_MEMORY: u32 = 20;
pub const ERROR_NO_DATA: u32 = 21;
pub const ERROR_INSUFFICIENT_RESOURCES: u32 = 23;
pub const ERROR_ARGUMENT_VERSION_MISMATCH: u32 = 25;
pub const ERROR_NOT_READY: u32 = 27;
pub const ERROR_GPU_NOT_FOUND: u32 = 28;
pub const ERROR_UNKNOWN: u32 = 999;

/// `NVML_VALUE_NOT_AVAILABLE` as the unsigned 64-bit value NVML writes (e.g. process memory).
pub const VALUE_NOT_AVAILABLE_U64: u64 = u64::MAX;
/// `0xFFFFFFFF`: what NVML writes for a GPU/compute instance id that does not apply.
pub const NO_INSTANCE_ID: u32 = u32::MAX;

/// The error names a scenario may use in place of a value, with the code each one answers.
pub const SCENARIO_ERROR_NAMES: &[(&str, u32)] = &[
    ("Uninitialized", ERROR_UNINITIALIZED),
    ("InvalidArgument", ERROR_INVALID_ARGUMENT),
    ("NotSupported", ERROR_NOT_SUPPORTED),
    ("NoPermission", ERROR_NO_PERMISSION),
    ("NotFound", ERROR_NOT_FOUND),
    ("InsufficientSize", ERROR_INSUFFICIENT_SIZE),
    ("InsufficientPower", ERROR_INSUFFICIENT_POWER),
    ("DriverNotLoaded", ERROR_DRIVER_NOT_LOADED),
    ("Timeout", ERROR_TIMEOUT),
    ("IrqIssue", ERROR_IRQ_ISSUE),
    ("FunctionNotFound", ERROR_FUNCTION_NOT_FOUND),
    ("CorruptedInfoROM", ERROR_CORRUPTED_INFOROM),
    ("GpuIsLost", ERROR_GPU_IS_LOST),
    ("ResetRequired", ERROR_RESET_REQUIRED),
    ("OperatingSystem", ERROR_OPERATING_SYSTEM),
    ("LibRmVersionMismatch", ERROR_LIB_RM_VERSION_MISMATCH),
    ("InUse", ERROR_IN_USE),
    ("Memory", ERROR_MEMORY),
    ("NoData", ERROR_NO_DATA),
    ("InsufficientResources", ERROR_INSUFFICIENT_RESOURCES),
    ("NotReady", ERROR_NOT_READY),
    ("GpuNotFound", ERROR_GPU_NOT_FOUND),
    ("Unknown", ERROR_UNKNOWN),
];

/// The code for a scenario error name, if `name` is one.
pub fn code_for_name(name: &str) -> Option<u32> {
    SCENARIO_ERROR_NAMES
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, code)| *code)
}

/// The text NVML gives for `code`; a static, NUL-terminated string.
pub fn error_string(code: u32) -> &'static CStr {
    match code {
        0 => c"Success",
        1 => c"Uninitialized",
        2 => c"Invalid Argument",
        3 => c"Not Supported",
        4 => c"Insufficient Permissions",
        5 => c"Already Initialized",
        6 => c"Not Found",
        7 => c"Insufficient Size",
        8 => c"Insufficient External Power",
        9 => c"Driver Not Loaded",
        10 => c"Timeout",
        11 => c"Interrupt Request Issue",
        12 => c"NVML Shared Library Not Found",
        13 => c"Function Not Found",
        14 => c"Corrupted infoROM",
        15 => c"GPU is lost",
        16 => c"GPU requires restart",
        17 => c"The operating system has blocked the request.",
        18 => c"RM has detected an NVML/RM version mismatch.",
        19 => c"In use by another client",
        20 => c"Insufficient Memory",
        21 => c"No data",
        22 => c"The requested vgpu operation is not available on target device, because ECC is enabled",
        23 => c"Insufficient resources for request",
        24 => c"Frequency not supported",
        25 => c"Argument version mismatch",
        26 => c"Deprecated",
        27 => c"Not Ready",
        28 => c"GPU not found",
        29 => c"Invalid state",
        _ => c"Unknown Error",
    }
}

/// `error_string` as the raw pointer the C ABI returns.
pub fn error_string_ptr(code: u32) -> *const c_char {
    error_string(code).as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_the_codes_nvml_uses() {
        assert_eq!(code_for_name("NotSupported"), Some(3));
        assert_eq!(code_for_name("NoPermission"), Some(4));
        assert_eq!(code_for_name("GpuIsLost"), Some(15));
        assert_eq!(code_for_name("notsupported"), None);
    }

    #[test]
    fn every_code_has_a_string_and_unknown_codes_fall_back() {
        assert_eq!(error_string(15).to_str().ok(), Some("GPU is lost"));
        assert_eq!(error_string(12345).to_str().ok(), Some("Unknown Error"));
        assert_eq!(error_string(999).to_str().ok(), Some("Unknown Error"));
    }
}

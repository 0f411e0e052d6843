//! Fault injection: an error code and/or a delay for one exported function, on one device (or
//! the system), during a window of polls or of calls.
//!
//! In JSON (`faults` on a GPU, a MIG device or `system`):
//! `{ "call": "nvmlDeviceGetComputeRunningProcesses_v3", "error": "NoPermission",
//!    "delay_ms": 0, "polls": [3, null], "calls": [0, 2] }`. See the README.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use crate::codes::code_for_name;
use crate::scenario::PollWindow;

/// Every exported function that takes a device handle (or a device index), by name: what a
/// device's or MIG device's `faults` may name.
pub const DEVICE_CALLS: &[&str] = &[
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetIndex",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetPciInfo_v2",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetBAR1MemoryInfo",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetFanSpeed",
    "nvmlDeviceGetTemperatureThreshold",
    "nvmlDeviceGetEncoderUtilization",
    "nvmlDeviceGetDecoderUtilization",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetMPSComputeRunningProcesses",
    "nvmlDeviceGetMPSComputeRunningProcesses_v2",
    "nvmlDeviceGetMPSComputeRunningProcesses_v3",
    "nvmlDeviceGetProcessUtilization",
];

/// Every exported function that names no device: what `system.faults` may name.
pub const SYSTEM_CALLS: &[&str] = &[
    "nvmlDeviceGetCount",
    "nvmlDeviceGetCount_v2",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetNVMLVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
];

/// `call` matching every function of the list the fault is in.
pub const ANY_CALL: &str = "*";

/// One injected fault.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// The exported function's name, or `"*"` for every function the list may name.
    pub call: String,
    /// The code the call answers instead of its value; absent: it answers normally.
    #[serde(default, deserialize_with = "error_code")]
    pub error: Option<u32>,
    /// How long the call takes before it answers (milliseconds).
    #[serde(default)]
    pub delay_ms: u64,
    /// Polls of the device's clock (`[from, to)`) during which the fault holds.
    #[serde(default)]
    pub polls: Option<PollWindow>,
    /// Calls of this function on this device (0-based, counted since `nvmlInit`) during which
    /// the fault holds.
    #[serde(default)]
    pub calls: Option<PollWindow>,
}

/// An error given by name (`"NoPermission"`) or by NVML's number.
fn error_code<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Code {
        Name(String),
        Number(u32),
    }
    match Option::<Code>::deserialize(deserializer)? {
        None => Ok(None),
        Some(Code::Number(0)) => Err(D::Error::custom(
            "error 0 is NVML_SUCCESS: leave `error` out for a fault that only delays",
        )),
        Some(Code::Number(code)) => Ok(Some(code)),
        Some(Code::Name(name)) => code_for_name(&name)
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("unknown NVML error name {name:?}"))),
    }
}

/// What the faults of one list do to one call: the error it answers, if any, and its delay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    pub error: Option<u32>,
    pub delay_ms: u64,
}

impl Fault {
    fn holds(&self, call: &str, poll: usize, nth_call: usize) -> bool {
        (self.call == call || self.call == ANY_CALL)
            && self.polls.map_or(true, |w| w.contains(poll))
            && self.calls.map_or(true, |w| w.contains(nth_call))
    }
}

/// The faults of `list` that hold for the `nth_call` (0-based) of `call` at `poll`: the first
/// error among them, and the sum of their delays.
pub fn outcome(list: &[Fault], call: &str, poll: usize, nth_call: usize) -> Outcome {
    let mut out = Outcome::default();
    for fault in list.iter().filter(|f| f.holds(call, poll, nth_call)) {
        out.error = out.error.or(fault.error);
        out.delay_ms = out.delay_ms.saturating_add(fault.delay_ms);
    }
    out
}

/// Checks that every fault names a function of `known` (or `"*"`) and a window that ends
/// after it starts.
pub fn check(list: &[Fault], known: &[&str], at: &str) -> Result<(), String> {
    for fault in list {
        if fault.call != ANY_CALL && !known.contains(&fault.call.as_str()) {
            return Err(format!(
                "{at}: fault on {:?}: not a function this list can name (one of {}, or \"*\")",
                fault.call,
                known.join(", ")
            ));
        }
        for (what, window) in [("polls", fault.polls), ("calls", fault.calls)] {
            if let Some(PollWindow(from, Some(to))) = window {
                if to < from {
                    return Err(format!(
                        "{at}: fault on {}: {what} [{from}, {to}) ends before it starts",
                        fault.call
                    ));
                }
            }
        }
        if fault.error.is_none() && fault.delay_ms == 0 {
            return Err(format!(
                "{at}: fault on {} has neither `error` nor `delay_ms`",
                fault.call
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(json: &str) -> Fault {
        serde_json::from_str(json).expect("valid fault")
    }

    #[test]
    fn a_fault_holds_in_its_windows_only() {
        let list = [fault(
            r#"{"call": "nvmlDeviceGetName", "error": "Unknown", "polls": [2, 4]}"#,
        )];
        let at = |poll| outcome(&list, "nvmlDeviceGetName", poll, 0).error;
        assert_eq!(
            (0..5).map(at).collect::<Vec<_>>(),
            [None, None, Some(999), Some(999), None]
        );
        assert_eq!(
            outcome(&list, "nvmlDeviceGetUUID", 2, 0),
            Outcome::default()
        );
        let by_call = [fault(r#"{"call": "*", "error": 4, "calls": [1, null]}"#)];
        assert_eq!(outcome(&by_call, "nvmlDeviceGetUUID", 0, 0).error, None);
        assert_eq!(outcome(&by_call, "nvmlDeviceGetUUID", 0, 1).error, Some(4));
    }

    #[test]
    fn delays_add_up_and_the_first_error_wins() {
        let list = [
            fault(r#"{"call": "*", "delay_ms": 100}"#),
            fault(r#"{"call": "nvmlDeviceGetName", "error": "Timeout", "delay_ms": 50}"#),
            fault(r#"{"call": "nvmlDeviceGetName", "error": "Unknown"}"#),
        ];
        assert_eq!(
            outcome(&list, "nvmlDeviceGetName", 0, 0),
            Outcome {
                error: Some(10),
                delay_ms: 150
            }
        );
    }

    #[test]
    fn mistakes_are_named() {
        let typo = [fault(
            r#"{"call": "nvmlDeviceGetNmae", "error": "Unknown"}"#,
        )];
        assert!(check(&typo, DEVICE_CALLS, "devices[0]")
            .is_err_and(|e| e.contains("nvmlDeviceGetNmae")));
        let nothing = [fault(r#"{"call": "nvmlDeviceGetName"}"#)];
        assert!(check(&nothing, DEVICE_CALLS, "x").is_err());
        let backwards = [fault(r#"{"call": "*", "error": 4, "calls": [3, 1]}"#)];
        assert!(check(&backwards, DEVICE_CALLS, "x").is_err());
        let system = [fault(r#"{"call": "nvmlDeviceGetCount_v2", "error": 4}"#)];
        assert!(check(&system, DEVICE_CALLS, "x").is_err());
        assert!(check(&system, SYSTEM_CALLS, "system").is_ok());
        assert!(serde_json::from_str::<Fault>(r#"{"call": "*", "error": "Nope"}"#).is_err());
        assert!(serde_json::from_str::<Fault>(r#"{"call": "*", "error": 0}"#).is_err());
    }
}

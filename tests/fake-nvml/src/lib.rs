//! A fake `libnvidia-ml.so` that answers NVML calls from a JSON scenario, so that strata's
//! real NVML code path (nvml-wrapper) and independent clients (pynvml) can be tested without
//! a GPU. The scenario file is named by `STRATA_FAKE_NVML_SCENARIO` and re-read at every
//! `nvmlInit*`; see `README.md` beside this crate for its format and poll semantics.

mod abi;
mod codes;
mod faults;
mod ffi_board;
mod ffi_device;
mod ffi_mig;
mod ffi_process;
mod ffi_system;
mod ffi_util;
mod protocol;
mod scenario;
mod state;
mod validate;
mod values;

#[cfg(test)]
mod tests;

//! Tests of the scenario format and of the exported functions, called as C would call them.

mod board;
mod faults;
mod ffi;
mod ffi_support;
mod format;

use std::path::PathBuf;

pub(crate) const GIB: u64 = 1 << 30;

pub(crate) fn scenarios_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

pub(crate) fn minimal(device_extra: &str) -> String {
    format!(
        r#"{{"devices": [{{"name": "G", "uuid": "GPU-1",
            "memory": {{"total": 100, "used": 10}} {device_extra}}}]}}"#
    )
}

//! The driver: NVML found (where from, which version), the driver's and the CUDA driver's
//! versions, and whether the driver has R510's calls (`nvmlDeviceGetMemoryInfo_v2`, the `_v3`
//! process calls), as the monitor's poll chooses them. Once NVML is up, the GPUs' lanes start.

use super::gpus;
use super::refusals::NVML_HUNG;
use super::runner::{Lane, Runner};
use super::{Check, Group};
use crate::source::nvml::probe::{refused, DriverCalls};
use crate::source::SourceError;
use nvml_wrapper::{cuda_driver_version_major, cuda_driver_version_minor, Nvml};
use std::ffi::{CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What to do when NVML's start hangs.
const NVML_SLOW_START: &str = "the driver may be hung: check `nvidia-smi` and `dmesg` (Xid errors); without persistence mode NVML can take seconds per GPU to start: `nvidia-smi -pm 1`, or a longer --timeout";

pub(super) fn start(runner: &mut Runner, library: Option<PathBuf>) {
    runner.spawn((0, 0), move |lane| nvml_lane(lane, library));
}

fn nvml_lane(lane: Lane, library: Option<PathBuf>) {
    let tried = library
        .as_ref()
        .map_or("libnvidia-ml.so.1".to_string(), |p| p.display().to_string());
    lane.step(
        Group::Driver,
        "nvml",
        None,
        &format!("nvmlInit_v2 (of {tried})"),
        NVML_SLOW_START,
    );
    let (nvml, name) = match crate::source::nvml::load(library) {
        Ok(loaded) => loaded,
        Err(e) => {
            lane.report(not_loaded(&e));
            return;
        }
    };
    lane.step(
        Group::Driver,
        "nvml",
        None,
        "nvmlSystemGetNVMLVersion",
        NVML_HUNG,
    );
    let version = nvml
        .sys_nvml_version()
        .map_err(|e| refused("nvmlSystemGetNVMLVersion", e).line);
    lane.report(loaded(&name, loaded_from(&nvml).as_deref(), version));
    let nvml = Arc::new(nvml);
    let for_versions = Arc::clone(&nvml);
    lane.spawn((0, 1), move |lane| versions_lane(lane, &for_versions));
    lane.spawn((1, 0), move |lane| gpus::count_lane(lane, nvml));
}

/// The `nvml` check when the library could not be loaded or started.
fn not_loaded(e: &SourceError) -> Check {
    match e {
        SourceError::LibraryNotFound { .. } => Check::missing(
            Group::Driver,
            "nvml",
            &e.to_string(),
            "install the NVIDIA driver (libnvidia-ml.so.1 comes with it), or name the library with --nvml-lib PATH (STRATA_NVML_LIB); `strata --demo` runs without one",
        ),
        _ => Check::missing(Group::Driver, "nvml", &e.to_string(), e.hint()),
    }
}

/// The `nvml` check of a loaded library: the name it was asked by, the file it is, NVML's
/// version.
fn loaded(name: &Path, file: Option<&Path>, version: Result<String, String>) -> Check {
    let name = name.display().to_string();
    let path = match file {
        Some(file) if file != Path::new(&name) => format!("{name} ({})", file.display()),
        _ => name,
    };
    let detail = match version {
        Ok(version) => format!("loaded {path}, NVML {version}"),
        Err(line) => format!("loaded {path}; NVML's version unknown: {line}"),
    };
    Check::ok(Group::Driver, "nvml", &detail)
}

/// The file the library was loaded from, links resolved: the dynamic loader's name for the
/// object that holds `nvmlInit_v2`.
fn loaded_from(nvml: &Nvml) -> Option<PathBuf> {
    let init = nvml.lib().nvmlInit_v2.as_ref().ok()?;
    // SAFETY: `Dl_info` is plain data; zero is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: the address of a function in a loaded library, and a valid out pointer.
    let found = unsafe { libc::dladdr(*init as *const libc::c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: the loader's NUL-terminated name, valid while the library stays loaded.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    let path = PathBuf::from(OsStr::from_bytes(name.to_bytes()));
    Some(std::fs::canonicalize(&path).unwrap_or(path))
}

fn versions_lane(lane: Lane, nvml: &Nvml) {
    lane.step(
        Group::Driver,
        "driver_version",
        None,
        "nvmlSystemGetDriverVersion",
        NVML_HUNG,
    );
    let driver = nvml
        .sys_driver_version()
        .map_err(|e| refused("nvmlSystemGetDriverVersion", e).line);
    lane.report(match &driver {
        Ok(version) => Check::ok(Group::Driver, "driver_version", version),
        Err(line) => Check::limited(
            Group::Driver,
            "driver_version",
            &format!("{line}; the driver's version is shown as n/a"),
            "check the driver with `nvidia-smi`",
        ),
    });
    lane.step(
        Group::Driver,
        "r510_calls",
        None,
        "looking up the driver's calls",
        NVML_HUNG,
    );
    let calls = DriverCalls::of(nvml);
    lane.report(r510_calls(
        calls.lacking(driver.as_deref().ok()),
        calls.lacks_a_figure(),
    ));
    lane.step(
        Group::Driver,
        "cuda_driver_version",
        None,
        "nvmlSystemGetCudaDriverVersion_v2",
        NVML_HUNG,
    );
    lane.report(match nvml.sys_cuda_driver_version() {
        Ok(v) => Check::ok(
            Group::Driver,
            "cuda_driver_version",
            &format!(
                "CUDA {}.{}",
                cuda_driver_version_major(v),
                cuda_driver_version_minor(v)
            ),
        ),
        Err(e) => Check::limited(
            Group::Driver,
            "cuda_driver_version",
            &format!(
                "{}; the CUDA driver version is shown as n/a",
                refused("nvmlSystemGetCudaDriverVersion_v2", e).line
            ),
            "check the driver with `nvidia-smi`",
        ),
    });
}

/// The `r510_calls` check from the poll's own line (`lacking`) and whether a figure has no
/// call at all.
fn r510_calls(lacking: Option<String>, lacks_a_figure: bool) -> Check {
    const FIX: &str = "upgrade the driver to R510 or later";
    match lacking {
        None => Check::ok(
            Group::Driver,
            "r510_calls",
            "nvmlDeviceGetMemoryInfo_v2 and the _v3 process calls are there",
        ),
        Some(line) if lacks_a_figure => Check::missing(Group::Driver, "r510_calls", &line, FIX),
        Some(line) => Check::limited(Group::Driver, "r510_calls", &line, FIX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    #[test]
    fn a_driver_without_r510s_calls_is_limited_and_one_without_a_figure_missing() {
        assert_eq!(r510_calls(None, false).status, Status::Ok);
        let old = r510_calls(Some("driver 470.82.01 lacks ...".into()), false);
        assert_eq!(old.status, Status::Limited);
        assert_eq!(old.detail, "driver 470.82.01 lacks ...");
        assert_eq!(
            old.fix.as_deref(),
            Some("upgrade the driver to R510 or later")
        );
        assert_eq!(
            r510_calls(Some("no memory at all".into()), true).status,
            Status::Missing
        );
    }

    #[test]
    fn a_library_loaded_by_name_shows_the_file_it_is() {
        let by_name = loaded(
            Path::new("libnvidia-ml.so.1"),
            Some(Path::new("/usr/lib/libnvidia-ml.so.550.54.15")),
            Ok("12.550.54.15".into()),
        );
        assert_eq!(
            by_name.detail,
            "loaded libnvidia-ml.so.1 (/usr/lib/libnvidia-ml.so.550.54.15), NVML 12.550.54.15"
        );
        let by_path = loaded(
            Path::new("/x/lib.so"),
            Some(Path::new("/x/lib.so")),
            Err("E".into()),
        );
        assert_eq!(
            by_path.detail,
            "loaded /x/lib.so; NVML's version unknown: E"
        );
        let missing = not_loaded(&SourceError::LibraryNotFound {
            detail: "libnvidia-ml.so.1: cannot open shared object file".into(),
        });
        assert_eq!(missing.status, Status::Missing);
        assert!(missing
            .fix
            .as_deref()
            .is_some_and(|f| f.contains("--nvml-lib")));
    }
}

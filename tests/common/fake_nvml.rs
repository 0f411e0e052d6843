//! The fake `libnvidia-ml` (`tests/fake-nvml`), built on demand for integration tests.
//!
//! ```ignore
//! mod common;
//! let lib = common::fake_nvml::fake_nvml_lib(); // .../target/fake-nvml/debug/libnvidia_ml.so
//! std::env::set_var("STRATA_FAKE_NVML_SCENARIO", common::fake_nvml::scenario("two_gpus"));
//! let nvml = nvml_wrapper::Nvml::builder().lib_path(lib.as_os_str()).init()?;
//! ```
//! For a client that loads `libnvidia-ml.so.1` by name (pynvml, or a child process), put
//! `fake_nvml_lib_dir()` on `LD_LIBRARY_PATH`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The environment variable the fake reads its scenario path from, at every `nvmlInit`.
pub const SCENARIO_ENV: &str = "STRATA_FAKE_NVML_SCENARIO";

/// The workspace root (strata's manifest directory).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/scenarios/<name>.json`.
pub fn scenario(name: &str) -> PathBuf {
    workspace_root()
        .join("tests")
        .join("scenarios")
        .join(format!("{name}.json"))
}

/// The target dir the fake is built in: `target/fake-nvml`, apart from the one running the
/// tests so that the nested cargo never waits on the outer cargo's lock (and
/// `target/fake-nvml-nested` if the tests themselves were built in `target/fake-nvml`).
pub fn fake_nvml_target_dir() -> PathBuf {
    let dir = workspace_root().join("target").join("fake-nvml");
    let running_from_it = std::env::current_exe().is_ok_and(|exe| exe.starts_with(&dir));
    match running_from_it {
        true => workspace_root().join("target").join("fake-nvml-nested"),
        false => dir,
    }
}

/// Builds the fake library (once per test process) and returns the path of the `.so`.
/// Several test binaries may call it at once: cargo's lock on the target dir serializes them.
/// Panics with cargo's output if the build fails.
pub fn fake_nvml_lib() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| build_fake_nvml(&fake_nvml_target_dir(), None))
        .clone()
}

/// The fake built with one of its cargo features (`pre-r510`, `v1-processes`: a driver that
/// lacks newer symbols), into its own target dir `target/fake-nvml-<feature>`, once per test
/// process and feature.
pub fn fake_nvml_lib_with(feature: &str) -> PathBuf {
    static LIBS: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut built = LIBS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, lib)) = built.iter().find(|(f, _)| f == feature) {
        return lib.clone();
    }
    let target_dir = fake_nvml_target_dir().with_file_name(format!(
        "{}-{feature}",
        fake_nvml_target_dir()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    let lib = build_fake_nvml(&target_dir, Some(feature));
    built.push((feature.to_string(), lib.clone()));
    lib
}

fn build_fake_nvml(target_dir: &Path, feature: Option<&str>) -> PathBuf {
    let cargo = std::env::var_os("CARGO")
        .or_else(|| option_env!("CARGO").map(Into::into))
        .unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(&cargo);
    command.args([
        "build",
        "--quiet",
        "-p",
        "strata-fake-nvml",
        "--manifest-path",
    ]);
    command.arg(workspace_root().join("Cargo.toml"));
    if let Some(feature) = feature {
        command.args(["--features", feature]);
    }
    let output = command
        .env("CARGO_TARGET_DIR", target_dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo:?} to build the fake NVML library: {e}"));
    assert!(
        output.status.success(),
        "building the fake NVML library (cargo build -p strata-fake-nvml, features {feature:?}) failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let lib = target_dir.join("debug").join("libnvidia_ml.so");
    assert!(
        lib.is_file(),
        "cargo built the fake but {} is missing",
        lib.display()
    );
    lib
}

/// A directory holding `libnvidia-ml.so.1` and `libnvidia-ml.so`, links to the fake: put it
/// on `LD_LIBRARY_PATH` for clients that load NVML by name.
pub fn fake_nvml_lib_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let lib = fake_nvml_lib();
        let dir = fake_nvml_target_dir().join("soname");
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        for name in ["libnvidia-ml.so.1", "libnvidia-ml.so"] {
            link_atomically(&lib, &dir.join(name));
        }
        dir
    })
    .clone()
}

/// Points `link` at `target` with a rename, so that concurrent test processes never see a
/// missing or half-made link.
fn link_atomically(target: &Path, link: &Path) {
    if std::fs::read_link(link).is_ok_and(|current| current == target) {
        return;
    }
    let temporary = link.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    std::os::unix::fs::symlink(target, &temporary)
        .unwrap_or_else(|e| panic!("cannot link {}: {e}", temporary.display()));
    std::fs::rename(&temporary, link)
        .unwrap_or_else(|e| panic!("cannot rename a link to {}: {e}", link.display()));
}

/// The scenario variable and the fake's state are process-wide: in-process NVML tests take
/// turns.
pub static IN_PROCESS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `polls` samples of strata's NVML source, in this process, against `scenario_file` through
/// the fake at `lib` (one `NvmlSource::open`, so the fake's poll clocks and call counts start
/// at 0). The raw samples, with every field the source fills (`problems`, `mps`, `hidden`).
pub fn source_samples(
    lib: &Path,
    scenario_file: &Path,
    polls: usize,
) -> Vec<strata::sample::NodeSample> {
    use strata::source::Source;
    let _turn = IN_PROCESS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    std::env::set_var(SCENARIO_ENV, scenario_file);
    let mut source = strata::source::nvml::NvmlSource::open(Some(lib.to_path_buf()), 1.0)
        .unwrap_or_else(|e| panic!("cannot open the fake on {}: {e}", scenario_file.display()));
    (0..polls)
        .map(|poll| {
            source.sample().unwrap_or_else(|e| {
                panic!("poll {poll} of {} failed: {e}", scenario_file.display())
            })
        })
        .collect()
}

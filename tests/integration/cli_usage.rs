//! Usage errors and the environment, through the built binary: a context size that would
//! wrap, demo-only options without `--demo`, empty `STRATA_NVML_LIB` and `STRATA_FEED_DIR`.

use crate::common;

use common::fake_nvml::{fake_nvml_lib_dir, scenario, SCENARIO_ENV};
use common::strata_command;
use serde_json::Value;
use std::process::{Command, Output};

fn run(command: &mut Command) -> (Output, String) {
    let out = command.output().expect("runs strata");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, err)
}

#[test]
fn a_context_size_that_would_wrap_is_a_usage_error() {
    // 2^44 MiB is 2^64 bytes: `mib << 20` made it 0 B, silently.
    for size in ["17592186044416", "18446744073709551615"] {
        let (out, err) =
            run(strata_command().args(["--demo", "--context-mib", size, "snapshot", "--json"]));
        assert_eq!(out.status.code(), Some(2), "{size}: {err}");
        assert!(err.contains("--context-mib"), "{err}");
        assert!(err.contains("at most 17592186044415 MiB"), "{err}");
        assert!(out.stdout.is_empty(), "nothing printed");
    }
    let (out, err) = run(strata_command().args([
        "--demo",
        "--context-mib",
        "17592186044415",
        "snapshot",
        "--json",
    ]));
    assert_eq!(out.status.code(), Some(0), "the largest that fits: {err}");
}

#[test]
fn demo_only_options_without_the_demo_are_a_usage_error() {
    for args in [
        vec!["--demo-speed", "5"],
        vec!["--demo-at", "600", "snapshot"],
        vec!["snapshot", "--json", "--demo-seed", "7"],
        // The default value, typed: still a use of the option.
        vec!["snapshot", "--demo-speed", "10"],
    ] {
        let (out, err) = run(strata_command().args(&args));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: --demo-"), "clap's style: {err}");
        assert!(err.contains("add --demo"), "{err}");
        assert!(err.contains("Usage:"), "{err}");
    }
    // With --demo, wherever it is written, they are fine.
    for args in [
        vec!["--demo-seed", "7", "snapshot", "--json", "--demo"],
        vec!["--demo", "--demo-speed", "5", "--demo-at", "60", "snapshot"],
    ] {
        let (out, err) = run(strata_command().args(&args));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}

/// `STRATA_NVML_LIB=` is unset: strata loads the driver's library by its usual name (here
/// the fake, found on `LD_LIBRARY_PATH`), rather than failing on an empty path.
#[test]
fn empty_environment_variables_mean_unset() {
    let (out, err) = run(strata_command()
        .args(["snapshot", "--json"])
        .env("STRATA_NVML_LIB", "")
        .env("STRATA_FEED_DIR", "")
        .env("LD_LIBRARY_PATH", fake_nvml_lib_dir())
        .env(SCENARIO_ENV, scenario("two_gpus")));
    assert_eq!(out.status.code(), Some(0), "{err}");
    let snap: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(snap["gpus"].as_array().map(Vec::len), Some(2), "{snap}");
    // Each alone, too.
    for var in ["STRATA_NVML_LIB", "STRATA_FEED_DIR"] {
        let (out, err) = run(strata_command()
            .args(["snapshot", "--json"])
            .env(var, "")
            .env("LD_LIBRARY_PATH", fake_nvml_lib_dir())
            .env(SCENARIO_ENV, scenario("two_gpus")));
        assert_eq!(out.status.code(), Some(0), "{var}: {err}");
    }
}

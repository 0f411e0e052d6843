//! A GPU instance split into two compute instances (the fake NVML's `mig_multi_ci`: both
//! handles report the GPU instance's memory) is told once, as the monitor draws it
//! (`GI1/CI0+1`), by the text snapshot and by the Markdown report.

use crate::common;

use common::fake_nvml::{fake_nvml_lib, scenario, SCENARIO_ENV};
use common::strata;
use std::process::Command;

/// strata's standard output with `args` on the `mig_multi_ci` scenario.
fn on_mig(args: &[&str]) -> String {
    let output = Command::new(strata())
        .args(args)
        .arg("--nvml-lib")
        .arg(fake_nvml_lib())
        .env(SCENARIO_ENV, scenario("mig_multi_ci"))
        .output()
        .expect("strata runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

#[test]
fn the_text_snapshot_tells_a_gpu_instance_once_with_its_compute_instances() {
    let text = on_mig(&["snapshot"]);
    let devices: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("GPU ") || l.starts_with("  MIG "))
        .collect();
    assert_eq!(
        devices,
        [
            "GPU 0 NVIDIA A100-SXM4-80GB (total 80.0 GiB)",
            "  MIG 2c.4g.40gb GI1/CI0+1 (total 39.2 GiB)",
            "  MIG 3g.40gb GI2/CI0 (total 39.2 GiB)",
            "GPU 1 NVIDIA A100-SXM4-80GB (total 80.0 GiB)",
            "  MIG 2c.4g.40gb GI1/CI0+1 (total 39.2 GiB)",
        ],
        "{text}"
    );
    // Each device's layers once: two GPUs and three GPU instances.
    assert_eq!(
        text.lines()
            .filter(|l| l.trim_start().starts_with("free "))
            .count(),
        5,
        "{text}"
    );
}

#[test]
fn the_report_has_one_section_a_gpu_instance_naming_its_compute_instances() {
    let report = on_mig(&["snapshot", "--report"]);
    let sections: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("### GPU "))
        .collect();
    assert_eq!(
        sections,
        [
            "### GPU 0 · NVIDIA A100-SXM4-80GB",
            "### GPU 0 · MIG 2c.4g.40gb GI1/CI0+1 (compute instances 0 and 1 share GPU instance 1's memory)",
            "### GPU 0 · MIG 3g.40gb GI2/CI0",
            "### GPU 1 · NVIDIA A100-SXM4-80GB",
            "### GPU 1 · MIG 2c.4g.40gb GI1/CI0+1 (compute instances 0 and 1 share GPU instance 1's memory)",
        ],
        "{report}"
    );
    assert!(
        report.contains(
            "UUID MIG-66666666-0000-5000-8000-000000000000 (CI 0), MIG-66666666-0000-5000-8000-000000000001 (CI 1)\n"
        ),
        "{report}"
    );
}

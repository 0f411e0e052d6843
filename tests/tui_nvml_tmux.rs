//! The monitor on the real NVML path (the fake library) in a real pseudo-terminal: MIG
//! instances nested under their GPU, a lost GPU marked while the other goes on, `q` restores.

mod common;
#[path = "support/tmux.rs"]
mod tmux;

use common::fake_nvml::{fake_nvml_lib, scenario, SCENARIO_ENV};
use std::time::Duration;
use tmux::{strata, Pane};

fn monitor(name: &str, scenario_name: &str, interval: &str) -> Pane {
    let command = format!(
        "{SCENARIO_ENV}='{}' {} --interval {interval} --nvml-lib '{}'",
        scenario(scenario_name).display(),
        strata(),
        fake_nvml_lib().display()
    );
    Pane::start(name, &command, 160, 48)
}

fn quit_and_check(pane: &Pane) {
    pane.keys(&["q"]);
    let (exit, cooked) = pane
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("did not quit:\n{s}"));
    assert_eq!(exit, "EXIT=0");
    assert!(cooked, "terminal left raw:\n{}", pane.capture());
}

#[test]
fn mig_instances_appear_nested_under_their_gpu() {
    let pane = monitor("nvml-mig", "mig", "1");
    let screen = pane
        .wait_for(
            &[
                "GPU 0 · NVIDIA A100-SXM4-80GB",
                "└ 3g.40gb GI1/CI0",
                "└ 2g.20gb GI5/CI0",
                "└ 1g.10gb GI13/CI0",
            ],
            Duration::from_secs(15),
        )
        .unwrap_or_else(|s| panic!("MIG rows missing:\n{s}"));
    // Nested: the instances come after their GPU's title and before the next GPU's.
    let at = |needle: &str| screen.find(needle).unwrap_or(usize::MAX);
    assert!(at("GPU 0 ·") < at("└ 3g.40gb"), "{screen}");
    quit_and_check(&pane);
}

#[test]
fn a_lost_gpu_is_marked_and_the_other_goes_on() {
    let pane = monitor("nvml-lost", "gpu_lost", "0.2");
    let screen = pane
        .wait_for(
            &[
                "GPU 1 · H100 · LOST since",
                "fell off the bus (GPU_IS_LOST)",
            ],
            Duration::from_secs(15),
        )
        .unwrap_or_else(|s| panic!("lost GPU not marked:\n{s}"));
    assert!(screen.contains("GPU 0 · NVIDIA H100"), "{screen}");
    quit_and_check(&pane);
}

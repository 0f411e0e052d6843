//! A driver older than R510 lacks `nvmlDeviceGetMemoryInfo_v2` and the `_v3` process calls.
//! strata must fall back to the older calls whose layouts it knows (v1 memory, the `_v2` or
//! unversioned process calls) and say once, naming the driver, what is missing; not show n/a
//! everywhere. The fake is built without those symbols (features `pre-r510`, `v1-processes`).

// Tests may panic: `unwrap` and `expect` say which of a test's assumptions failed, in its
// helpers too (clippy.toml allows them only in `#[test]` functions and `#[cfg(test)]` code).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::fake_nvml::{fake_nvml_lib, fake_nvml_lib_with, scenario, source_samples};
use strata::sample::{ContextKind, NodeSample, ProcessSample};

const GIB: u64 = 1 << 30;

fn process(sample: &NodeSample, pid: u32) -> &ProcessSample {
    let found: Vec<&ProcessSample> = sample.processes.iter().filter(|p| p.pid == pid).collect();
    assert_eq!(found.len(), 1, "pid {pid} once: {:#?}", sample.processes);
    found[0]
}

/// What every build must read of `old_driver.json`, whichever calls it has.
fn assert_values_read(s: &NodeSample, driver_reserved: bool) {
    let gpu = &s.gpus[0];
    let memory = gpu.memory.expect("memory is read");
    let reserved = 617_611_264;
    assert_eq!(memory.total, 85_520_809_984);
    assert_eq!(memory.free, 85_520_809_984 - reserved - 24 * GIB);
    match driver_reserved {
        true => assert_eq!(
            (memory.used, memory.driver_reserved),
            (24 * GIB, Some(reserved))
        ),
        // v1: `used` includes the reservation, which is not known apart.
        false => assert_eq!(
            (memory.used, memory.driver_reserved),
            (24 * GIB + reserved, None)
        ),
    }
    assert!(gpu.processes_known && s.gpus[1].processes_known);
    assert_eq!(process(s, 75001).used, Some(20 * GIB));
    assert_eq!(process(s, 75002).kind, ContextKind::Graphics);
    assert!(process(s, 75003).mps);
    let mig = &s.gpus[1].mig[0];
    assert!(mig.memory.is_some() && mig.processes_known);
    assert_eq!(&*process(s, 75101).device_uuid, mig.uuid.as_str());
    assert_eq!(process(s, 75101).used, Some(10 * GIB));
}

#[test]
fn a_new_driver_has_nothing_to_say() {
    let s = source_samples(&fake_nvml_lib(), &scenario("old_driver"), 1).remove(0);
    assert_values_read(&s, true);
    assert!(!s.problems.contains_key("driver"), "{:?}", s.problems);
}

#[test]
fn without_the_r510_calls_the_v1_memory_and_v2_process_calls_are_used_and_said() {
    let lib = fake_nvml_lib_with("pre-r510");
    let s = source_samples(&lib, &scenario("old_driver"), 1).remove(0);
    assert_values_read(&s, false);
    let line = &s.problems["driver"];
    for needed in [
        "470.82.01",
        "nvmlDeviceGetMemoryInfo_v2",
        "_v3 process calls",
        "v1 call",
        "_v2 calls",
    ] {
        assert!(line.contains(needed), "{needed:?} in {line}");
    }
    assert!(
        s.gpus.iter().all(|g| g.problems.is_empty()),
        "said once, for the node"
    );
}

#[test]
fn with_only_the_unversioned_process_calls_their_16_byte_layout_is_read() {
    let lib = fake_nvml_lib_with("v1-processes");
    let s = source_samples(&lib, &scenario("old_driver"), 1).remove(0);
    assert_values_read(&s, false);
    let line = &s.problems["driver"];
    assert!(line.contains("unversioned calls"), "{line}");
    // Every entry read at its own offset: no pid or size from a misread neighbour.
    let pids: Vec<u32> = s.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, [75001, 75002, 75003, 75101]);
}

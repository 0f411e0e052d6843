//! strata's NVML source under NVML's failure modes, read in-process through the fake library
//! with faults injected: each refusal must be said (in `problems`, with NVML's error and the
//! call), never taken for an empty list, "no GPU" or a lost GPU, and retried where NVML may
//! answer later. Also MPS clients, processes listed on a MIG parent, several compute instances
//! per GPU instance, and records that no real process makes.

// Tests may panic: `unwrap` and `expect` say which of a test's assumptions failed, in its
// helpers too (clippy.toml allows them only in `#[test]` functions and `#[cfg(test)]` code).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::fake_nvml::{fake_nvml_lib, scenario, source_samples};
use strata::sample::{ContextKind, GpuSample, NodeSample, ProcessSample};

fn samples(name: &str, polls: usize) -> Vec<NodeSample> {
    source_samples(&fake_nvml_lib(), &scenario(name), polls)
}

fn one(name: &str) -> NodeSample {
    samples(name, 1).remove(0)
}

fn process(sample: &NodeSample, pid: u32) -> &ProcessSample {
    let found: Vec<&ProcessSample> = sample.processes.iter().filter(|p| p.pid == pid).collect();
    assert_eq!(found.len(), 1, "pid {pid} once: {:#?}", sample.processes);
    found[0]
}

fn problem<'a>(gpu: &'a GpuSample, key: &str) -> &'a str {
    gpu.problems.get(key).unwrap_or_else(|| {
        panic!(
            "GPU {} has no problem {key:?}: {:?}",
            gpu.index, gpu.problems
        )
    })
}

#[test]
fn a_process_list_that_cannot_be_read_is_unknown_and_says_why() {
    let s = one("process_list_refused");
    let g = &s.gpus;
    for (index, error, call) in [
        (
            0,
            "NVML_ERROR_UNKNOWN",
            "nvmlDeviceGetComputeRunningProcesses_v3",
        ),
        (
            1,
            "NVML_ERROR_NO_PERMISSION",
            "nvmlDeviceGetGraphicsRunningProcesses_v3",
        ),
        (
            2,
            "NVML_ERROR_TIMEOUT",
            "nvmlDeviceGetMPSComputeRunningProcesses_v3",
        ),
    ] {
        assert!(!g[index].processes_known, "GPU {index}");
        let line = problem(&g[index], "processes");
        assert!(line.starts_with(&format!("{error} ({call}): ")), "{line}");
        assert!(
            !g[index].lost && g[index].memory.is_some(),
            "the rest still shows"
        );
    }
    assert!(problem(&g[1], "processes").contains("needs root"));

    // MIG: a refused instance list, a refused slot; empty slots are no problem.
    let gpu = &g[3];
    assert!(!gpu.processes_known, "an instance could not be read");
    assert_eq!(
        problem(gpu, "mig_devices"),
        "slot 3: NVML_ERROR_NO_PERMISSION (nvmlDeviceGetMigDeviceHandleByIndex): needs root (run strata as root, or ask for the permission)"
    );
    let uuids: Vec<&str> = gpu.mig.iter().map(|m| m.uuid.as_str()).collect();
    assert_eq!(
        uuids,
        [
            "MIG-11111111-0003-5000-8000-000000000000",
            "MIG-11111111-0003-5000-8000-000000000001"
        ]
    );
    assert!(gpu.mig[0].processes_known && gpu.mig[0].problems.is_empty());
    let refused = &gpu.mig[1];
    assert!(!refused.processes_known);
    assert!(refused.problems["processes"]
        .starts_with("NVML_ERROR_UNKNOWN (nvmlDeviceGetComputeRunningProcesses_v3)"));
    assert!(refused.memory.is_some(), "its memory is still read");
    let line = problem(gpu, "processes");
    assert!(
        line.contains(&refused.uuid) && line.contains("slot 1"),
        "{line}"
    );
    // The parent's aggregate list still names the refused instance's process, with its ids.
    assert_eq!(&*process(&s, 71002).device_uuid, refused.uuid.as_str());
    assert_eq!(&*process(&s, 71001).device_uuid, gpu.mig[0].uuid.as_str());

    // A failing MIG device count.
    let gpu = &g[4];
    assert!(!gpu.processes_known && gpu.mig.is_empty());
    assert!(
        problem(gpu, "mig_devices").contains("NVML_ERROR_UNKNOWN (nvmlDeviceGetMaxMigDeviceCount)")
    );
}

#[test]
fn a_readable_node_has_no_problems() {
    for name in ["two_gpus", "mig", "gpu_lost", "unavailable_process_memory"] {
        let s = one(name);
        assert!(s.problems.is_empty(), "{name}: {:?}", s.problems);
        for gpu in &s.gpus {
            assert!(gpu.processes_known, "{name} GPU {}", gpu.index);
            assert!(
                gpu.problems.is_empty(),
                "{name} GPU {}: {:?}",
                gpu.index,
                gpu.problems
            );
            assert!(gpu
                .mig
                .iter()
                .all(|m| m.processes_known && m.problems.is_empty()));
        }
    }
}

#[test]
fn refusals_other_than_not_supported_are_said_beside_the_value() {
    let s = one("not_supported");
    let g = &s.gpus;
    // GPU 0: utilization and MIG mode NotSupported (nothing to say), the compute list refused.
    assert!(!g[0].problems.contains_key("utilization") && !g[0].problems.contains_key("mig_mode"));
    assert!(problem(&g[0], "processes").starts_with("NVML_ERROR_NO_PERMISSION"));
    // GPU 1: its name refused for permission; its memory NotSupported.
    assert!(problem(&g[1], "name").starts_with("NVML_ERROR_NO_PERMISSION (nvmlDeviceGetName)"));
    assert!(!g[1].problems.contains_key("memory"));
    // GPU 2's MIG device: its list refused.
    let m = &g[2].mig[0];
    assert!(!m.processes_known && m.problems["processes"].starts_with("NVML_ERROR_NO_PERMISSION"));
    assert!(!g[2].processes_known);
}

#[test]
fn mps_clients_are_read_merged_and_marked() {
    let s = one("mps");
    let gpu0 = &s.gpus[0].uuid;
    for (pid, used, mps) in [
        (8100, Some(32u64 << 20), false),
        (8201, Some(12u64 << 30), true),
        (8202, None, true),
        (8203, Some(2u64 << 30), true),
    ] {
        let p = process(&s, pid);
        assert_eq!(
            (&*p.device_uuid, p.used, p.mps),
            (gpu0.as_str(), used, mps),
            "pid {pid}"
        );
        assert_eq!(p.kind, ContextKind::Compute);
    }
    // Each device's UUID is made once a read and shared by the processes placed on it.
    assert!(std::sync::Arc::ptr_eq(
        &process(&s, 8201).device_uuid,
        &process(&s, 8203).device_uuid
    ));
    let client = process(&s, 8301);
    assert_eq!(&*client.device_uuid, s.gpus[1].mig[0].uuid.as_str());
    assert!(client.mps);
    assert!(!process(&s, 8300).mps);
    assert!(s.gpus.iter().all(|g| g.processes_known));
}

#[test]
fn a_refused_handle_is_said_retried_and_not_lost() {
    let polls = samples("handle_refused", 3);
    for (poll, s) in polls.iter().enumerate() {
        assert_eq!(s.gpus.len(), 5, "poll {poll}: every GPU appears");
        let indices: Vec<u32> = s.gpus.iter().map(|g| g.index).collect();
        assert_eq!(indices, [0, 1, 2, 3, 4]);
        assert!(s.gpus[0].memory.is_some() && s.gpus[0].problems.is_empty());
        for (index, error) in [(2, "NVML_ERROR_RESET_REQUIRED"), (3, "NVML_ERROR_UNKNOWN")] {
            let g = &s.gpus[index];
            assert!(!g.lost, "poll {poll} GPU {index}: refused is not lost");
            assert_eq!(g.uuid, format!("GPU-unreadable-{index}"));
            assert!(g.memory.is_none() && g.utilization_gpu.is_none() && !g.processes_known);
            assert!(
                problem(g, "handle")
                    .starts_with(&format!("{error} (nvmlDeviceGetHandleByIndex_v2): ")),
                "{:?}",
                g.problems
            );
        }
        assert!(problem(&s.gpus[2], "handle").contains("reset"));
        let lost = &s.gpus[4];
        assert!(
            lost.lost && !lost.problems.contains_key("handle"),
            "GPU_IS_LOST is lost"
        );
    }
    // GPU 1: refused at the first two polls, opened at the third.
    for s in &polls[..2] {
        let g = &s.gpus[1];
        assert!(!g.lost && g.memory.is_none());
        assert!(problem(g, "handle").starts_with("NVML_ERROR_NO_PERMISSION"));
        assert!(!s.processes.iter().any(|p| p.pid == 73101));
    }
    let g = &polls[2].gpus[1];
    assert!(g.problems.is_empty(), "{:?}", g.problems);
    assert_eq!(g.uuid, "GPU-33333333-0000-4000-8000-000000000001");
    assert_eq!(g.memory.map(|m| m.used), Some(30 << 30));
    assert_eq!(&*process(&polls[2], 73101).device_uuid, g.uuid.as_str());
}

#[test]
fn a_failing_gpu_count_is_said_and_retried() {
    let polls = samples("count_refused", 3);
    for s in &polls[..2] {
        assert!(s.gpus.is_empty());
        let line = &s.problems["device_count"];
        assert!(
            line.starts_with("NVML_ERROR_UNKNOWN (nvmlDeviceGetCount_v2): "),
            "{line}"
        );
    }
    assert!(polls[2].problems.is_empty(), "{:?}", polls[2].problems);
    assert_eq!(polls[2].gpus.len(), 1);
    assert_eq!(process(&polls[2], 74001).used, Some(19 << 30));
}

#[test]
fn a_process_listed_on_the_mig_parent_is_kept_and_a_refused_parent_needs_root() {
    let s = one("mig_parent");
    let (gpu0, gpu1) = (&s.gpus[0], &s.gpus[1]);
    assert_eq!(
        &*process(&s, 9001).device_uuid,
        gpu0.uuid.as_str(),
        "on the parent itself"
    );
    assert_eq!(process(&s, 9001).used, Some(1 << 30));
    assert_eq!(&*process(&s, 9101).device_uuid, gpu0.mig[0].uuid.as_str());
    assert_eq!(&*process(&s, 9201).device_uuid, gpu0.mig[1].uuid.as_str());
    // Listed by the parent alone, with an instance's ids: placed on that instance.
    assert_eq!(&*process(&s, 9002).device_uuid, gpu0.mig[1].uuid.as_str());
    assert!(
        gpu0.processes_known && gpu0.problems.is_empty(),
        "{:?}",
        gpu0.problems
    );

    assert!(gpu1.memory.is_none());
    let memory = problem(gpu1, "memory");
    assert!(
        memory.starts_with("NVML_ERROR_NO_PERMISSION (nvmlDeviceGetMemoryInfo_v2)")
            && memory.contains("needs root"),
        "{memory}"
    );
    let parent = problem(gpu1, "parent");
    assert!(
        parent.contains("nvmlDeviceGetComputeRunningProcesses_v3") && parent.contains("needs root"),
        "{parent}"
    );
    assert!(
        !gpu1.processes_known,
        "a process only the parent lists may be missing"
    );
    assert!(gpu1.mig[0].processes_known && gpu1.mig[0].memory.is_some());
    assert_eq!(&*process(&s, 9301).device_uuid, gpu1.mig[0].uuid.as_str());
}

#[test]
fn several_compute_instances_of_one_gpu_instance_each_with_their_processes() {
    let s = one("mig_multi_ci");
    let gpu = &s.gpus[0];
    let ids: Vec<(Option<u32>, Option<u32>)> = gpu
        .mig
        .iter()
        .map(|m| (m.gpu_instance_id, m.compute_instance_id))
        .collect();
    assert_eq!(
        ids,
        [(Some(1), Some(0)), (Some(1), Some(1)), (Some(2), Some(0))]
    );
    assert_eq!(
        gpu.mig[0].memory, gpu.mig[1].memory,
        "each CI reports its GI's memory"
    );
    assert_eq!(gpu.mig[0].profile.as_deref(), Some("2c.4g.40gb"));
    assert_eq!(&*process(&s, 9501).device_uuid, gpu.mig[0].uuid.as_str());
    assert_eq!(&*process(&s, 9502).device_uuid, gpu.mig[1].uuid.as_str());
    assert_eq!(&*process(&s, 9503).device_uuid, gpu.mig[1].uuid.as_str());
    assert_eq!(&*process(&s, 9601).device_uuid, gpu.mig[2].uuid.as_str());
    assert!(gpu.processes_known);
    // CI 1's own list refused: its process is placed by the parent's (GI 1, CI 1), not on CI 0.
    let gpu = &s.gpus[1];
    assert!(!gpu.mig[1].processes_known && !gpu.processes_known);
    assert_eq!(&*process(&s, 9702).device_uuid, gpu.mig[1].uuid.as_str());
    assert_eq!(&*process(&s, 9701).device_uuid, gpu.mig[0].uuid.as_str());
}

#[test]
fn records_no_process_makes_are_passed_on_raw() {
    let s = one("raw_records");
    let total = s.gpus[0].memory.map(|m| m.total).unwrap_or(0);
    for (pid, used) in [
        (0, 1u64 << 30),
        (u32::MAX, 2 << 30),
        (76003, 200 << 30),
        (76004, 0),
    ] {
        let p = process(&s, pid);
        assert_eq!(p.used, Some(used), "pid {pid}");
        assert!(
            !p.visible && !p.hidden,
            "pid {pid} is no process here: {p:?}"
        );
    }
    assert!(
        process(&s, 76003).used > Some(total),
        "not clamped to the total"
    );
}

#[test]
fn per_process_memory_not_available_stays_unknown() {
    let s = one("unavailable_process_memory");
    assert_eq!(process(&s, 7001).used, None);
    assert_eq!(process(&s, 1234).used, None);
    assert_eq!(process(&s, 7002).used, Some(9_678_356_480));
    let later = samples("unavailable_process_memory", 2).remove(1);
    assert_eq!(
        process(&later, 7003).used,
        None,
        "not available from poll 1"
    );
}

#[test]
fn a_stalled_nvml_makes_the_poll_slow_from_poll_three() {
    let polls = samples("stall", 4);
    let took: Vec<f64> = polls.iter().map(|s| s.poll_secs.unwrap_or(0.0)).collect();
    assert!(took[..3].iter().all(|t| *t < 1.0), "{took:?}");
    assert!(took[3] >= 2.9, "poll 3 waits on its memory read: {took:?}");
    assert!(polls[3].gpus[0].memory.is_some(), "slow, not refused");
}

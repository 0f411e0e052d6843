//! One full poll of a large node through the fake NVML library (target: under 2 ms of CPU for
//! 8 GPUs, 7 MIG instances each, 64 processes). The processes are real (`sleep` children), so
//! reading their identity from /proc costs what it costs on a node.
//!
//! Run: `cargo bench --bench nvml_poll`. Also writes the scenario to
//! `target/bench/large_node.json` for `benches/soak.sh`.

// A benchmark may panic: `expect` says which of its assumptions failed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/fake_nvml.rs"]
mod fake_nvml;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Value};
use std::hint::black_box;
use std::process::{Child, Command};
use strata::source::nvml::NvmlSource;
use strata::source::Source;

const GIB: u64 = 1 << 30;
const PROFILES: [(&str, u32, u64); 7] = [
    ("1g.10gb", 7, 9_728 << 20),
    ("1g.10gb", 8, 9_728 << 20),
    ("1g.10gb", 9, 9_728 << 20),
    ("1g.10gb", 10, 9_728 << 20),
    ("1g.10gb", 11, 9_728 << 20),
    ("1g.10gb", 12, 9_728 << 20),
    ("1g.10gb", 13, 9_728 << 20),
];

/// 8 A100s in MIG mode with 7 instances each, and 64 processes spread over the instances.
pub fn large_node(pids: &[u32]) -> Value {
    let devices: Vec<Value> = (0..8)
        .map(|g| {
            let mig: Vec<Value> = PROFILES
                .iter()
                .enumerate()
                .map(|(slot, (profile, gi, total))| {
                    let holders: Vec<Value> = pids
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| i % 56 == g * 7 + slot)
                        .map(|(_, pid)| json!({ "pid": pid, "used": 3 * GIB + u64::from(*pid) }))
                        .collect();
                    let used: u64 = holders.iter().filter_map(|h| h["used"].as_u64()).sum();
                    json!({
                        "slot": slot,
                        "uuid": format!("MIG-bench-{g}-{slot}"),
                        "name": format!("NVIDIA A100-SXM4-80GB MIG {profile}"),
                        "gpu_instance_id": gi,
                        "compute_instance_id": 0,
                        "memory": { "total": total, "reserved": 0, "used": used, "free": total - used },
                        "compute_processes": holders,
                    })
                })
                .collect();
            json!({
                "name": "NVIDIA A100-SXM4-80GB",
                "uuid": format!("GPU-bench-{g}"),
                "memory": { "total": 80 * GIB, "reserved": GIB / 2, "used": 40 * GIB },
                "utilization": { "gpu": 80, "memory": 40 },
                "mig_mode": { "current": 1, "pending": 1 },
                "max_mig_devices": 7,
                "mig": mig,
            })
        })
        .collect();
    json!({ "description": "benchmark node: 8 GPUs x 7 MIG instances, 64 processes", "devices": devices })
}

/// The fake built with optimisations, so its own cost (standing in for the driver's) does not
/// swamp strata's.
fn release_fake() -> std::path::PathBuf {
    let root = fake_nvml::workspace_root();
    let target = root.join("target").join("fake-nvml");
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "strata-fake-nvml",
            "--manifest-path",
        ])
        .arg(root.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .expect("cargo");
    assert!(status.success(), "building the fake NVML library failed");
    target.join("release").join("libnvidia_ml.so")
}

fn poll(c: &mut Criterion) {
    let mut children: Vec<Child> = (0..64)
        .map(|_| Command::new("sleep").arg("600").spawn().expect("sleep"))
        .collect();
    let pids: Vec<u32> = children.iter().map(Child::id).collect();
    let dir = fake_nvml::workspace_root().join("target").join("bench");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let file = dir.join("large_node.json");
    std::fs::write(
        &file,
        serde_json::to_string_pretty(&large_node(&pids)).expect("json"),
    )
    .expect("write");
    std::env::set_var(fake_nvml::SCENARIO_ENV, &file);
    let mut source = NvmlSource::open(Some(release_fake()), 1.0).expect("fake NVML opens");
    let first = source.sample().expect("sample");
    assert_eq!(first.gpus.len(), 8);
    assert_eq!(first.gpus.iter().map(|g| g.mig.len()).sum::<usize>(), 56);
    assert_eq!(first.processes.len(), 64);
    assert!(first.processes.iter().all(|p| p.visible));
    assert!(first.processes.iter().all(|p| p.owner.is_some()));
    c.bench_function("nvml poll: 8 GPUs x 7 MIG, 64 processes", |b| {
        b.iter(|| black_box(source.sample().expect("sample")))
    });
    // The owners of 64 processes read afresh (cgroup, environ, parent chain): what the first
    // poll of a process costs; later polls find them cached, inside the poll above.
    let starts: Vec<(u32, u64)> = first
        .processes
        .iter()
        .filter_map(|p| Some((p.pid, p.start_time?)))
        .collect();
    let mut cached = strata::source::owner::Owners::default();
    for &(pid, start) in &starts {
        cached.of(pid, start);
    }
    c.bench_function("owners of 64 processes, cached", |b| {
        b.iter(|| {
            for &(pid, start) in &starts {
                black_box(cached.of(pid, start));
            }
        })
    });
    c.bench_function("owners of 64 processes, read afresh", |b| {
        b.iter(|| {
            let mut owners = strata::source::owner::Owners::default();
            for &(pid, start) in &starts {
                black_box(owners.of(pid, start));
            }
        })
    });
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }
}

criterion_group!(benches, poll);
criterion_main!(benches);

//! The demo node's host side: CPU and memory of the machine and of each simulated process,
//! and who holds the GPUs' device files open (the zombie context's orphaned worker among
//! them). Pure functions of (seed, story time), like the rest of the story.

use super::noise;
use super::story::{Actor, Place};
use crate::sample::{DeviceFileScan, DeviceHolder, HostMemory};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// Hardware threads of the simulated machine (two 56-core CPUs, two threads a core).
const THREADS: f64 = 224.0;
/// Its memory: 2 TiB less what the firmware keeps.
const HOST_TOTAL: u64 = 2_015 * GIB + 612 * MIB;
/// Memory in use beside the GPU processes: page tables, the file cache's dirty part,
/// daemons.
const HOST_BASE: u64 = 143 * GIB;
/// The orphaned dataloader worker that keeps the zombie context of PID 31337 alive.
pub(crate) const ORPHAN_PID: u32 = 31342;
/// The launcher of the two training ranks.
const TORCHRUN_PID: u32 = 41229;

fn tenths(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// An actor's CPU, in percent of one core: data loading and the Python loop of a busy rank
/// keep more than a core busy; an idle server, a sliver.
pub(crate) fn cpu_percent(seed: u64, actor: &Actor, t: f64) -> Option<f64> {
    if !actor.visible {
        return None;
    }
    let sm = f64::from(actor.sm_util.unwrap_or(0));
    let jitter = noise(seed, 7_000 + u64::from(actor.pid), t as u64);
    Some(tenths(2.0 + sm * 1.15 + 18.0 * jitter))
}

/// An actor's resident host memory, bytes: pinned staging buffers and the dataset's pages grow
/// with what it holds on the GPU.
pub(crate) fn host_memory(seed: u64, actor: &Actor, t: f64) -> Option<u64> {
    if !actor.visible {
        return None;
    }
    let jitter = noise(seed, 8_000 + u64::from(actor.pid), (t / 10.0) as u64);
    let bytes = 1_536 * MIB + actor.used / 3 + (jitter * 256.0) as u64 * MIB;
    Some(bytes / 4096 * 4096)
}

/// Seconds since the actor started (its `start_time` says the same in clock ticks).
pub(crate) fn elapsed(actor: &Actor, t: f64) -> Option<u64> {
    actor
        .visible
        .then(|| (t - actor.started_at).max(0.0).floor() as u64)
}

/// The node's CPU (percent of all threads) and memory.
pub(crate) fn node(seed: u64, actors: &[Actor], t: f64) -> (Option<f64>, Option<HostMemory>) {
    let busy: f64 = actors.iter().filter_map(|a| cpu_percent(seed, a, t)).sum();
    let cpu = tenths(1.5 + busy / THREADS + 2.0 * noise(seed, 9_001, t as u64));
    let held: u64 = actors.iter().filter_map(|a| host_memory(seed, a, t)).sum();
    let drift = (noise(seed, 9_002, (t / 10.0) as u64) * 2048.0) as u64 * MIB;
    let memory = HostMemory {
        total: HOST_TOTAL,
        used: (HOST_BASE + held + drift).min(HOST_TOTAL),
    };
    (Some(cpu), Some(memory))
}

fn uid_of(user: &str) -> u32 {
    match user {
        "mlteam" => 1001,
        "bob" => 1002,
        "carol" => 1003,
        "dave" => 1004,
        _ => 1100,
    }
}

/// Who holds the device files open: every visible actor holds its GPU's (the MIG instances
/// share their GPU's file) and `/dev/nvidia-uvm`; so does the orphaned worker of the exited
/// PID 31337, on GPU 2, without a context of its own. GPU `g`'s minor number is `g`.
pub(crate) fn device_files(actors: &[Actor], epoch_ticks: impl Fn(f64) -> u64) -> DeviceFileScan {
    let mut holders: Vec<DeviceHolder> = actors
        .iter()
        .filter(|a| a.visible)
        .map(|a| {
            let gpu = match a.place {
                Place::Gpu(g) | Place::Mig(g, _) => g as u32,
            };
            let trainer = a.pid == 41230 || a.pid == 41231;
            let (ppid, parent) = match trainer {
                true => (
                    TORCHRUN_PID,
                    "torchrun --nproc-per-node=2 train.py --config llama-7b.yaml",
                ),
                false => (1, "/sbin/init"),
            };
            let user = a.user.unwrap_or("nobody");
            DeviceHolder {
                pid: a.pid,
                start_time: Some(epoch_ticks(a.started_at)),
                state: Some("S".into()),
                ppid: Some(ppid),
                uid: Some(uid_of(user)),
                user: Some(user.into()),
                command: a.command.map(str::to_string),
                parent_command: Some(parent.into()),
                minors: vec![gpu],
                uvm: true,
            }
        })
        .collect();
    holders.push(DeviceHolder {
        pid: ORPHAN_PID,
        start_time: Some(epoch_ticks(-5400.0)),
        state: Some("S".into()),
        ppid: Some(1),
        uid: Some(uid_of("dave")),
        user: Some("dave".into()),
        command: Some("python pretrain.py --data /datasets/c4 --workers 8".into()),
        parent_command: Some("/sbin/init".into()),
        minors: vec![2],
        uvm: true,
    });
    holders.sort_by_key(|h| h.pid);
    DeviceFileScan {
        holders,
        unreadable: 0,
    }
}

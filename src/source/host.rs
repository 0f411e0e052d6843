//! The host side of the node through `sysinfo`: CPU and memory of the machine, and of each
//! process that holds GPU memory (CPU %, resident memory, time since it started).
//!
//! CPU use is a difference between two readings, so the `System` is kept from poll to poll:
//! a process seen for the first time (and the node at the first poll) has no CPU figure yet,
//! `None`, never 0. A process's share is its CPU time (`sysinfo`'s accumulated time) over the
//! wall time between two polls: `sysinfo`'s own figure reads 0 at the second reading of a
//! process that had used no CPU time yet at the first.

use crate::sample::HostMemory;
use std::collections::HashMap;
use std::time::Instant;
use sysinfo::{MemoryRefreshKind, Pid, ProcessRefreshKind, ProcessesToUpdate, System};

/// What the host says of one process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ProcessHost {
    /// Percent of one core over the last interval.
    pub(crate) cpu_percent: Option<f64>,
    /// Resident set size, bytes.
    pub(crate) memory: Option<u64>,
    /// Seconds since it started.
    pub(crate) elapsed: Option<u64>,
}

/// The node's CPU and memory, and its GPU processes' share of them, between polls.
pub(crate) struct HostReader {
    system: System,
    /// The node's CPU has been read once: the next reading has a difference to show.
    cpu_primed: bool,
    /// Per pid read at the previous poll: its start time (seconds since the epoch: a reused
    /// pid is another process), its CPU time (ms) and when it was read.
    seen: HashMap<u32, (u64, u64, Instant)>,
}

impl std::fmt::Debug for HostReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostReader")
            .field("cpu_primed", &self.cpu_primed)
            .field("seen", &self.seen.len())
            .finish()
    }
}

impl Default for HostReader {
    fn default() -> Self {
        HostReader::new()
    }
}

/// One decimal place: a percentage read off a counter has no more, and JSON shows no float
/// noise.
fn tenths(value: f32) -> f64 {
    (f64::from(value) * 10.0).round() / 10.0
}

impl HostReader {
    pub(crate) fn new() -> Self {
        HostReader {
            system: System::new(),
            cpu_primed: false,
            seen: HashMap::new(),
        }
    }

    /// The node's CPU in use since the previous call (percent of all cores; `None` at the
    /// first call) and its memory.
    pub(crate) fn node(&mut self) -> (Option<f64>, Option<HostMemory>) {
        self.system.refresh_cpu_usage();
        let cpu = self
            .cpu_primed
            .then(|| tenths(self.system.global_cpu_usage()));
        self.cpu_primed = true;
        self.system
            .refresh_memory_specifics(MemoryRefreshKind::nothing().with_ram());
        let total = self.system.total_memory();
        let memory = (total > 0).then(|| HostMemory {
            total,
            used: self.system.used_memory().min(total),
        });
        (cpu, memory)
    }

    /// Reads the processes `pids` (as this machine's `/proc` numbers them). A pid that is not
    /// there is absent from the answer.
    pub(crate) fn processes(&mut self, pids: &[u32]) -> HashMap<u32, ProcessHost> {
        // Those read before are read again too, so that the ones that exited are dropped.
        let mut asked: Vec<Pid> = pids.iter().map(|&p| Pid::from_u32(p)).collect();
        asked.extend(self.system.processes().keys().copied());
        asked.sort_unstable();
        asked.dedup();
        self.system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&asked),
            true,
            ProcessRefreshKind::nothing().with_cpu().with_memory(),
        );
        let now = Instant::now();
        let mut out = HashMap::with_capacity(pids.len());
        let mut seen = HashMap::with_capacity(pids.len());
        for &pid in pids {
            let Some(process) = self.system.process(Pid::from_u32(pid)) else {
                continue;
            };
            let (started, cpu_ms) = (process.start_time(), process.accumulated_cpu_time());
            let cpu_percent = match self.seen.get(&pid) {
                Some(&(before_start, before_ms, at)) if before_start == started => {
                    let wall_ms = now.duration_since(at).as_secs_f64() * 1000.0;
                    let busy_ms = cpu_ms.saturating_sub(before_ms) as f64;
                    (wall_ms > 0.0).then(|| (busy_ms / wall_ms * 1000.0).round() / 10.0)
                }
                _ => None,
            };
            seen.insert(pid, (started, cpu_ms, now));
            out.insert(
                pid,
                ProcessHost {
                    cpu_percent,
                    memory: Some(process.memory()),
                    elapsed: Some(process.run_time()),
                },
            );
        }
        self.seen = seen;
        // Processes that no longer hold GPU memory but live on are not followed forever.
        if self.system.processes().len() > 2 * pids.len() + 64 {
            self.system = System::new();
            self.seen.clear();
            self.cpu_primed = false;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// CPU time (ticks) of `pid`, read from `/proc` directly: the oracle.
    fn ticks(pid: u32) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let close = stat.rfind(')').unwrap_or(0);
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // utime and stime are fields 14 and 15: the 12th and 13th after the state.
        let field = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        field(11) + field(12)
    }

    /// A child that burns CPU reads as `/proc` counts its CPU time over the same wall time
    /// (unknown at the first poll), a sleeping one near 0; both have resident memory and an
    /// age. Each reading is bracketed by `/proc`'s counts and the clock just before and just
    /// after it, so the share it must give is known within bounds whatever the machine's
    /// load; the second reading waits until the busy child has had CPU time, not a while.
    #[test]
    fn a_busy_process_reads_busy_and_an_idle_one_idle() {
        let started = Instant::now();
        let mut busy = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("sh runs");
        let mut idle = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        let pids = [busy.id(), idle.id()];
        let mut host = HostReader::new();
        let (cpu, memory) = host.node();
        assert_eq!(cpu, None, "no difference at the first reading");
        let memory = memory.expect("the host's memory");
        assert!(
            memory.total > 0 && memory.used <= memory.total,
            "{memory:?}"
        );
        let bracket = |host: &mut HostReader| {
            let (before, at_before) = (pids.map(ticks), Instant::now());
            let read = host.processes(&pids);
            (before, at_before, read, pids.map(ticks), Instant::now())
        };
        let (b1, w_b1, first, a1, w_a1) = bracket(&mut host);
        assert!(first.values().all(|p| p.cpu_percent.is_none()), "{first:?}");
        // SAFETY: sysconf has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        // A fifth of a second of CPU: the busy child has been busy, however loaded the machine.
        let deadline = Instant::now() + Duration::from_secs(60);
        while ticks(pids[0]) < a1[0] + per_second / 5.0 {
            assert!(
                Instant::now() < deadline,
                "the busy child got no CPU in a minute"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let (b2, w_b2, second, a2, w_a2) = bracket(&mut host);
        let (cpu, _) = host.node();
        let _ = busy.kill();
        let _ = idle.kill();
        let _ = busy.wait();
        let _ = idle.wait();
        let node_cpu = cpu.expect("a second reading has a difference");
        assert!((0.0..=100.0).contains(&node_cpu), "{node_cpu}");
        // The reader's CPU times were read between b and a, its instants between w_b and
        // w_a: the share lies between the least CPU time over the longest wall time and
        // the most over the shortest (and a tenth for its rounding).
        let (wall_least, wall_most) = (
            w_b2.duration_since(w_a1).as_secs_f64(),
            w_a2.duration_since(w_b1).as_secs_f64(),
        );
        for (i, name) in [(0, "busy"), (1, "idle")] {
            let share = second[&pids[i]].cpu_percent.expect("seen twice");
            let least = (b2[i] - a1[i]).max(0.0) / per_second / wall_most * 100.0;
            let most = (a2[i] - b1[i]) / per_second / wall_least * 100.0;
            assert!(
                share >= least - 0.05 && share <= most + 0.05,
                "{name}: {share} % read, /proc says {least:.2} to {most:.2} %"
            );
        }
        assert!(second[&pids[0]].cpu_percent > Some(0.0), "busy reads busy");
        for pid in pids {
            let p = second[&pid];
            assert!(p.memory.is_some_and(|m| m > 0), "{p:?}");
            let elapsed = p.elapsed.expect("an age");
            assert!(elapsed <= started.elapsed().as_secs() + 2, "{p:?}");
        }
    }

    #[test]
    fn a_pid_that_is_not_there_is_absent() {
        let mut host = HostReader::new();
        assert!(host.processes(&[4_000_000_000]).is_empty());
    }
}

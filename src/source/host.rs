//! The host side of the node: CPU and memory of the machine from the head of `/proc/stat`
//! and `/proc/meminfo`, each read through a descriptor kept open, and each GPU process's share
//! of them from the `/proc/PID/stat` that [`ProcFs`] reads once a sample for its identity (CPU
//! %, resident memory, time since it started).
//!
//! No `sysinfo`: asked for the node's CPU it opened `/proc/stat` anew each sample and parsed
//! a line per core into shares no one reads (128 lines a second on a 128-core node), and
//! asked for processes it refreshed every process it had ever seen and listed each one's
//! threads, where strata needs three numbers of the processes NVML lists, all in the one
//! `stat` it reads anyway. The node's share of CPU is sysinfo's: the time not idle (nor
//! waiting on I/O) over all the time the counters moved.
//!
//! CPU use is a difference between two readings: a process seen for the first time (and the
//! node at the first poll) has no CPU figure yet, `None`, never 0. A process's share is its
//! CPU time over the wall time between two polls.
//!
//! [`ProcFs`]: super::procfs::ProcFs

use crate::sample::HostMemory;
use hashbrown::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

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

/// One listed process's `stat` figures, as read this sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcessStat {
    pub(crate) pid: u32,
    /// Start time, clock ticks after boot: with the pid, which process it is.
    pub(crate) start_time: u64,
    /// User plus system CPU time so far, clock ticks.
    pub(crate) cpu_ticks: Option<u64>,
    /// Resident memory, bytes.
    pub(crate) resident: Option<u64>,
    /// When its `stat` was read.
    pub(crate) at: Instant,
}

/// How much of `/proc/stat` and `/proc/meminfo` is read: the first line of one (a few dozen
/// bytes, however many cores), every line the other's figures come from.
const HEAD: usize = 4096;

/// A `/proc` file read from its start through a descriptor kept open; opened again after a
/// failed read.
#[derive(Debug)]
struct Kept {
    path: PathBuf,
    file: Option<File>,
}

impl Kept {
    fn new(path: PathBuf) -> Kept {
        Kept { path, file: None }
    }

    /// Up to [`HEAD`] bytes from the file's start into `buf`; `None` where it cannot be read
    /// (gone, or unreadable twice, the second time through a fresh descriptor).
    fn head<'b>(&mut self, buf: &'b mut Vec<u8>) -> Option<&'b str> {
        // Zeroed once, not at every read (two pages a sample): a read writes over the bytes
        // it returns, and only those are looked at.
        if buf.len() != HEAD {
            buf.resize(HEAD, 0);
        }
        let mut read = None;
        for _ in 0..2 {
            if self.file.is_none() {
                self.file = File::open(&self.path).ok();
            }
            let file = self.file.as_ref()?;
            match file.read_at(buf, 0) {
                Ok(n) => {
                    read = Some(n);
                    break;
                }
                Err(_) => self.file = None,
            }
        }
        std::str::from_utf8(&buf[..read?]).ok()
    }
}

/// `/proc/stat`'s `cpu` line as (all the time counted, the time idle or waiting on I/O), in
/// clock ticks: user, nice, system, idle, iowait, irq, softirq and steal summed (guest time
/// is already in user and nice), idle and iowait.
fn cpu_times(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let mut fields = line.split_ascii_whitespace().map(|f| f.parse::<u64>());
    let mut times = [0u64; 8];
    for time in &mut times {
        // A kernel older than a field (steal: 2.6.11) leaves it out: 0, as it counts none.
        match fields.next() {
            Some(Ok(value)) => *time = value,
            Some(Err(_)) => return None,
            None => break,
        }
    }
    let total = times.iter().fold(0u64, |sum, t| sum.saturating_add(*t));
    Some((total, times[3].saturating_add(times[4])))
}

/// The node's memory from `/proc/meminfo`: in use is all but what is available
/// (`MemAvailable`; before Linux 3.14, free, buffers, page cache and reclaimable slab, less
/// shared memory, as the kernel itself estimates it). `None` without a total.
fn memory(meminfo: &str) -> Option<HostMemory> {
    let (mut total, mut available) = (None, None);
    let (mut free, mut buffers, mut cached, mut reclaimable, mut shared) = (0, 0, 0, 0, 0);
    for line in meminfo.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let Some(kib) = rest
            .split_ascii_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
        else {
            continue;
        };
        let bytes = kib.saturating_mul(1024);
        match key {
            "MemTotal" => total = Some(bytes),
            "MemAvailable" => available = Some(bytes),
            "MemFree" => free = bytes,
            "Buffers" => buffers = bytes,
            "Cached" => cached = bytes,
            "SReclaimable" => reclaimable = bytes,
            "Shmem" => shared = bytes,
            _ => {}
        }
        // MemTotal and MemAvailable are the first and third lines: the other fifty or so
        // are read only on a kernel without MemAvailable.
        if total.is_some() && available.is_some() {
            break;
        }
    }
    let total = total.filter(|&t| t > 0)?;
    let available =
        available.unwrap_or_else(|| (free + buffers + cached + reclaimable).saturating_sub(shared));
    Some(HostMemory {
        total,
        used: total.saturating_sub(available),
    })
}

/// The node's CPU and memory, and its GPU processes' share of them, between polls.
pub(crate) struct HostReader {
    stat: Kept,
    meminfo: Kept,
    buf: Vec<u8>,
    /// The node's CPU times at the previous reading (all, idle): the next has a difference
    /// to show.
    cpu_before: Option<(u64, u64)>,
    /// Per pid read at the previous poll: its start time (a reused pid is another process),
    /// its CPU time (ticks), when it was read, and at which of [`HostReader::polls`]. Kept
    /// in place from poll to poll (a node of thousands of processes made a second table of
    /// them at every one).
    seen: HashMap<u32, (u64, u64, Instant, u64)>,
    /// Polls of the processes so far.
    polls: u64,
    /// Clock ticks a second (`sysconf(_SC_CLK_TCK)`), the unit of `stat`'s times.
    ticks_per_second: u64,
}

impl std::fmt::Debug for HostReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostReader")
            .field("cpu_before", &self.cpu_before)
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
fn tenths(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// Clock ticks a second, the unit of `/proc/PID/stat`'s times (100 on every Linux strata
/// meets, but asked).
fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&hz| hz > 0).unwrap_or(100)
}

/// Seconds since boot, on the clock `stat`'s start times count on (`CLOCK_BOOTTIME`).
fn since_boot() -> Option<f64> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill.
    let done = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now) };
    (done == 0).then(|| now.tv_sec as f64 + now.tv_nsec as f64 / 1e9)
}

impl HostReader {
    pub(crate) fn new() -> Self {
        HostReader::under(Path::new("/proc"))
    }

    /// A reader of `stat` and `meminfo` under `proc` (a stand-in `/proc` in tests).
    fn under(proc: &Path) -> Self {
        HostReader {
            stat: Kept::new(proc.join("stat")),
            meminfo: Kept::new(proc.join("meminfo")),
            buf: Vec::with_capacity(HEAD),
            cpu_before: None,
            seen: HashMap::new(),
            polls: 0,
            ticks_per_second: ticks_per_second(),
        }
    }

    /// The node's CPU in use since the previous call (percent of all cores; `None` at the
    /// first call, where `/proc/stat` cannot be read, and where its counters did not move
    /// forward) and its memory (`None` where `/proc/meminfo` has no total).
    pub(crate) fn node(&mut self) -> (Option<f64>, Option<HostMemory>) {
        let now = self.stat.head(&mut self.buf).and_then(cpu_times);
        let cpu = match (self.cpu_before, now) {
            (Some((total_before, idle_before)), Some((total, idle))) if total > total_before => {
                let all = (total - total_before) as f64;
                let idle = idle.saturating_sub(idle_before) as f64;
                Some(tenths(((all - idle).max(0.0) / all * 100.0).min(100.0)))
            }
            _ => None,
        };
        self.cpu_before = now;
        let memory = self.meminfo.head(&mut self.buf).and_then(memory);
        (cpu, memory)
    }

    /// What the host says of the processes read this sample (parallel to `read`): their
    /// share of a core since the previous sample, their resident memory and age. Processes
    /// not in `read` are forgotten.
    pub(crate) fn processes(&mut self, read: &[ProcessStat]) -> Vec<ProcessHost> {
        let hz = self.ticks_per_second as f64;
        let boot = since_boot();
        self.polls += 1;
        let poll = self.polls;
        let out = read
            .iter()
            .map(|p| {
                let before = self.seen.get(&p.pid).copied();
                let cpu_percent = match (before, p.cpu_ticks) {
                    (Some((before_start, before_ticks, at, _)), Some(ticks))
                        if before_start == p.start_time =>
                    {
                        let wall = p.at.duration_since(at).as_secs_f64();
                        let busy = ticks.saturating_sub(before_ticks) as f64 / hz;
                        (wall > 0.0).then(|| (busy / wall * 1000.0).round() / 10.0)
                    }
                    _ => None,
                };
                match p.cpu_ticks {
                    Some(ticks) => {
                        self.seen.insert(p.pid, (p.start_time, ticks, p.at, poll));
                    }
                    None => {
                        self.seen.remove(&p.pid);
                    }
                }
                let elapsed = boot.map(|boot| (boot - p.start_time as f64 / hz).max(0.0) as u64);
                ProcessHost {
                    cpu_percent,
                    memory: p.resident,
                    elapsed,
                }
            })
            .collect();
        self.seen.retain(|_, seen| seen.3 == poll);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::procfs::ProcFs;
    use std::time::{Duration, Instant};

    /// A stand-in `/proc` holding `stat` and `meminfo`.
    fn stand_in(stat: &str, meminfo: &str) -> crate::fixtures::TempDir {
        let dir = crate::fixtures::TempDir::new("host");
        std::fs::write(dir.path().join("stat"), stat).expect("stat");
        std::fs::write(dir.path().join("meminfo"), meminfo).expect("meminfo");
        dir
    }

    const MEMINFO: &str = "MemTotal:       16000000 kB\nMemFree:         1000000 kB\n\
        MemAvailable:    12000000 kB\nBuffers:          200000 kB\nCached:          3000000 kB\n";

    /// The node's share of CPU is the time not idle nor waiting on I/O over all the time the
    /// counters moved (guest time already in user and nice); read again through the
    /// descriptor kept open, the file's new counters; counters that did not move, or a file
    /// gone, are no figure, never 0.
    #[test]
    fn the_node_cpu_is_the_time_not_idle_between_two_readings() {
        // user nice system idle iowait irq softirq steal guest guest_nice
        let dir = stand_in(
            "cpu  100 0 50 800 50 0 0 0 40 0\ncpu0 50 0 25 400 25 0 0 0 20 0\nintr 1 2 3\n",
            MEMINFO,
        );
        let mut host = HostReader::under(dir.path());
        let (cpu, memory) = host.node();
        assert_eq!(cpu, None, "no difference at the first reading");
        assert_eq!(
            memory,
            Some(HostMemory {
                total: 16_000_000 * 1024,
                used: 4_000_000 * 1024
            })
        );
        // 400 ticks more: 60 user, 20 system, 300 idle, 10 iowait, 10 steal.
        std::fs::write(
            dir.path().join("stat"),
            "cpu  160 0 70 1100 60 0 0 10 70 0\ncpu0 80 0 35 550 30 0 0 5 35 0\n",
        )
        .expect("stat");
        assert_eq!(host.node().0, Some(22.5), "90 busy of 400");
        assert_eq!(host.node().0, None, "counters that did not move");
        std::fs::write(
            dir.path().join("stat"),
            "cpu  1160 0 70 1100 60 0 0 10 70 0\n",
        )
        .expect("stat");
        assert_eq!(host.node().0, Some(100.0), "all busy");
        // Gone: the kept descriptor still reads what it held open; a file that cannot be
        // opened anew is no figure.
        host.stat = Kept::new(dir.path().join("no-such-stat"));
        host.meminfo = Kept::new(dir.path().join("no-such-meminfo"));
        assert_eq!(host.node(), (None, None));
    }

    /// Before Linux 3.14 `meminfo` has no `MemAvailable`: available is free, buffers, page
    /// cache and reclaimable slab, less shared memory. With no total there is no figure.
    #[test]
    fn memory_without_mem_available_is_estimated_as_the_kernel_does() {
        let old = "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 300 kB\n\
            Shmem: 20 kB\nSReclaimable: 70 kB\n";
        assert_eq!(
            memory(old),
            Some(HostMemory {
                total: 1000 * 1024,
                used: 500 * 1024
            })
        );
        assert_eq!(memory("MemFree: 100 kB\n"), None);
        assert_eq!(memory("MemTotal: 0 kB\n"), None);
        assert_eq!(
            cpu_times("cpu  1 2 x 4\n"),
            None,
            "a field that is not a number"
        );
        assert_eq!(cpu_times("intr 1 2\n"), None);
        assert_eq!(
            cpu_times("cpu  1 2 3 4\n"),
            Some((10, 4)),
            "an old kernel's fields"
        );
    }

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
        let mut procfs = ProcFs::default();
        let mut bracket = |host: &mut HostReader| {
            let (before, at_before) = (pids.map(ticks), Instant::now());
            let read = read(host, &mut procfs, &pids);
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

    /// Reads `pids` as the NVML source does: one `stat` each, through `procfs`.
    fn read(host: &mut HostReader, procfs: &mut ProcFs, pids: &[u32]) -> HashMap<u32, ProcessHost> {
        let stats: Vec<ProcessStat> = pids
            .iter()
            .filter_map(|&pid| {
                let who = procfs.identity(pid);
                Some(ProcessStat {
                    pid,
                    start_time: who.start_time?,
                    cpu_ticks: who.cpu_ticks,
                    resident: who.resident,
                    at: Instant::now(),
                })
            })
            .collect();
        let hosts = host.processes(&stats);
        assert_eq!(hosts.len(), stats.len(), "one for each read");
        stats.iter().map(|s| s.pid).zip(hosts).collect()
    }

    #[test]
    fn a_pid_that_is_not_there_is_absent() {
        let mut host = HostReader::new();
        assert!(read(&mut host, &mut ProcFs::default(), &[4_000_000_000]).is_empty());
    }

    /// The resident memory and the age are `/proc`'s own: `statm`'s resident pages and the
    /// start time against the boot clock, as `ps` reads them.
    #[test]
    fn resident_memory_and_age_are_procs() {
        let me = std::process::id();
        let mut host = HostReader::new();
        let statm = std::fs::read_to_string(format!("/proc/{me}/statm")).expect("statm");
        let resident_pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        let page = crate::source::procfs::page_size();
        let got = read(&mut host, &mut ProcFs::default(), &[me])[&me];
        let resident = got.memory.expect("resident memory");
        // The test's own threads allocate meanwhile: within a few MiB of statm's figure.
        assert!(
            resident.abs_diff(resident_pages * page) < 64 << 20,
            "{resident} read, statm says {}",
            resident_pages * page
        );
        let uptime: f64 = std::fs::read_to_string("/proc/uptime")
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
        let start = crate::source::procfs::parse_stat(&stat).2.unwrap() as f64;
        let hz = ticks_per_second() as f64;
        let age = uptime - start / hz;
        let elapsed = got.elapsed.expect("an age") as f64;
        assert!(
            (elapsed - age).abs() <= 2.0,
            "{elapsed} s read, /proc says {age:.1} s"
        );
    }
}

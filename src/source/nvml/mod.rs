//! The real node: NVML through `nvml-wrapper` 0.13 (and raw calls where it lacks one), plus
//! process identity from `/proc`.
//!
//! Every query may fail on its own, and what NVML refused is said in the sample's `problems`
//! beside the value it cost: a refused process list makes that device's processes unknown, a
//! refused handle or GPU count is retried at every poll, `GPU_IS_LOST` (and only that) marks a
//! GPU lost while the other GPUs go on. Only a library that cannot be loaded or initialised
//! stops strata.

mod api;
mod gpu;
mod handles;
mod mig;
pub(crate) mod probe;
mod processes;
mod query;
mod read;
mod refusal;

use super::demand::Demand;
use super::holders::HolderSearch;
use super::host::{HostReader, ProcessStat};
use super::procfs::{Identity, ProcFs};
use super::{Source, SourceError};
use crate::sample::{NodeSample, ProcessSample};
use api::Api;
use handles::Gpus;
use hashbrown::{HashMap, HashSet};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{cuda_driver_version_major, cuda_driver_version_minor, Nvml};
pub(crate) use query::profile_from_name;
use read::Reader;
use refusal::Refusal;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// Library names tried when none is given: the driver installs `.so.1`; the unversioned name
/// exists only with development packages.
const DEFAULT_LIBRARIES: [&str; 2] = ["libnvidia-ml.so.1", "libnvidia-ml.so"];

pub struct NvmlSource {
    /// The calls chosen for this driver: pointers into `nvml`'s library, which lives as long.
    api: Api,
    nvml: Nvml,
    library: String,
    gpus: Gpus,
    driver_version: Option<String>,
    cuda_driver_version: Option<String>,
    /// The versions NVML refused, by `problems` key.
    versions_refused: Vec<(&'static str, Refusal)>,
    /// What this driver lacks of the calls strata prefers, in one line.
    driver_problem: Option<String>,
    procfs: ProcFs,
    owners: super::owner::Owners,
    /// The host's CPU and memory, and each GPU process's share (kept between polls: CPU use
    /// is a difference).
    host_stats: HostReader,
    /// Who holds the device files open, while a context outlives its process.
    holder_search: HolderSearch,
    host: String,
    interval: f64,
    /// Latest process-utilization timestamp seen per GPU, so each poll asks only for new ones.
    utilization_seen: HashMap<u32, u64>,
    /// Whose figures the screen shows: the others' `stat` is not read at every sample.
    demand: Demand,
}

// SAFETY: `Nvml` holds a loaded library and plain function pointers (as does `Api`); NVML is
// thread-safe.
unsafe impl Send for NvmlSource {}

fn describe(e: &NvmlError) -> String {
    match e {
        NvmlError::LibloadingError(inner) => inner.to_string(),
        NvmlError::DriverNotLoaded => "the NVIDIA kernel driver is not loaded".into(),
        NvmlError::NoPermission => "no permission to talk to the driver (see /dev/nvidia*)".into(),
        NvmlError::LibRmVersionMismatch => {
            "the library and the kernel driver are different versions (reboot or reload the driver)"
                .into()
        }
        other => other.to_string(),
    }
}

/// Loads and initialises NVML from `library`, else from the driver's usual names in turn:
/// the library, and the name it was loaded by.
pub(crate) fn load(library: Option<PathBuf>) -> Result<(Nvml, PathBuf), SourceError> {
    let candidates: Vec<PathBuf> = match library {
        Some(path) => vec![path],
        None => DEFAULT_LIBRARIES.iter().map(PathBuf::from).collect(),
    };
    let mut failures = Vec::new();
    for path in candidates {
        match Nvml::builder().lib_path(OsStr::new(&path)).init() {
            Ok(nvml) => return Ok((nvml, path)),
            Err(NvmlError::LibloadingError(e)) => failures.push(e.to_string()),
            Err(e) => {
                return Err(SourceError::Init {
                    detail: format!("{}: {}", path.display(), describe(&e)),
                })
            }
        }
    }
    Err(SourceError::LibraryNotFound {
        detail: failures.join("; "),
    })
}

impl NvmlSource {
    /// Loads NVML from `library` (or the driver's usual names). The GPUs are counted and
    /// opened at the first poll, and again at later polls for whatever NVML refused.
    pub fn open(library: Option<PathBuf>, interval: f64) -> Result<Self, SourceError> {
        let (nvml, path) = load(library)?;
        Ok(Self::start(nvml, path.display().to_string(), interval))
    }

    fn start(nvml: Nvml, library: String, interval: f64) -> Self {
        // A version NVML refuses is n/a, and the refusal is said (not taken for one NVML
        // does not have).
        let mut versions_refused = Vec::new();
        let driver_version = match nvml.sys_driver_version() {
            Ok(version) => Some(version),
            Err(e) => {
                versions_refused.push((
                    "driver_version",
                    Refusal::of("nvmlSystemGetDriverVersion", e),
                ));
                None
            }
        };
        let cuda_driver_version = match nvml.sys_cuda_driver_version() {
            Ok(v) => Some(format!(
                "{}.{}",
                cuda_driver_version_major(v),
                cuda_driver_version_minor(v)
            )),
            Err(e) => {
                versions_refused.push((
                    "cuda_driver_version",
                    Refusal::of("nvmlSystemGetCudaDriverVersion_v2", e),
                ));
                None
            }
        };
        versions_refused.retain(|(_, refusal)| !refusal.is_not_supported());
        let api = Api::of(&nvml);
        let driver_problem = api.driver_problem(driver_version.as_deref());
        NvmlSource {
            api,
            nvml,
            library,
            gpus: Gpus::default(),
            driver_version,
            cuda_driver_version,
            versions_refused,
            driver_problem,
            procfs: ProcFs::default(),
            owners: super::owner::Owners::default(),
            host_stats: HostReader::new(),
            holder_search: HolderSearch::default(),
            host: host_name(),
            interval,
            utilization_seen: HashMap::new(),
            demand: Demand::default(),
        }
    }
}

impl Source for NvmlSource {
    fn sample(&mut self) -> Result<NodeSample, SourceError> {
        let started = std::time::Instant::now();
        self.procfs.next_sample();
        let wanted = self.demand.wanted();
        self.gpus.refresh(&self.nvml);
        let mut problems = BTreeMap::new();
        if let Some(refusal) = &self.gpus.count_refused {
            problems.insert(
                "device_count".to_string(),
                format!(
                    "{}; no GPU can be shown until NVML counts them (strata asks again at every poll)",
                    refusal.line()
                ),
            );
        }
        if let Some(line) = &self.driver_problem {
            problems.insert("driver".to_string(), line.clone());
        }
        for (key, refusal) in &self.versions_refused {
            problems.insert((*key).to_string(), refusal.line());
        }
        let reader = Reader {
            nvml: &self.nvml,
            api: &self.api,
        };
        let reads: Vec<gpu::GpuRead> = self
            .gpus
            .slots()
            .iter()
            .map(|slot| {
                let seen = self.utilization_seen.get(&slot.index).copied().unwrap_or(0);
                gpu::read(&reader, slot, seen)
            })
            .collect();
        // Before the first frame, the records it will show first: named now that they are listed.
        let wanted = wanted.resolve(
            reads
                .iter()
                .flat_map(|read| read.placed.iter())
                .map(|placed| (placed.pid, placed.holding.used)),
        );
        let mut gpus = Vec::with_capacity(reads.len());
        // Each sized once for the records listed: not grown (and copied) a doubling at a time.
        let listed: usize = reads.iter().map(|read| read.placed.len()).sum();
        let mut processes = Vec::with_capacity(listed);
        // One `stat` read per listed process a sample, whatever number of devices list it:
        // identity, CPU time and resident memory all come from it.
        // Where each pid was first placed in `processes`: a later device's record copies it.
        let mut first_at: HashMap<u32, usize> = HashMap::with_capacity(listed);
        let mut stats: Vec<ProcessStat> = Vec::with_capacity(listed);
        // Where each of `stats` is in `processes` (its process's first record).
        let mut stat_at: Vec<usize> = Vec::with_capacity(listed);
        for read in reads {
            self.utilization_seen.insert(read.gpu.index, read.seen);
            for placed in read.placed {
                let identity = match first_at.get(&placed.pid) {
                    Some(&at) => identity_of(&processes[at]),
                    None => {
                        let identity = self
                            .procfs
                            .identity_lean(placed.pid, wanted.wants(placed.pid));
                        if let (true, Some(start_time)) = (identity.visible, identity.start_time) {
                            stats.push(ProcessStat {
                                pid: placed.pid,
                                start_time,
                                cpu_ticks: identity.cpu_ticks,
                                resident: identity.resident,
                                at: std::time::Instant::now(),
                            });
                            stat_at.push(processes.len());
                        }
                        first_at.insert(placed.pid, processes.len());
                        identity
                    }
                };
                // Who owns it (its cgroup, environment and launcher: three reads and more at
                // its first look) is read for a process the screen wants; off the screen it is
                // what was read before, if anything.
                let owner = match (identity.visible, identity.start_time) {
                    (true, Some(start)) if wanted.wants(placed.pid) => {
                        Some(self.owners.of(placed.pid, start))
                    }
                    (true, Some(start)) => self.owners.cached(placed.pid, start),
                    _ => None,
                };
                processes.push(ProcessSample {
                    pid: placed.pid,
                    device_uuid: placed.device_uuid,
                    used: placed.holding.used,
                    kind: placed.holding.kind,
                    mps: placed.holding.mps,
                    visible: identity.visible,
                    hidden: identity.hidden,
                    proc_state: identity.state,
                    start_time: identity.start_time,
                    user: identity.user,
                    command: identity.command,
                    sm_util: read.sm.get(&placed.pid).copied(),
                    executable: identity.executable,
                    cpu_percent: None,
                    host_memory: None,
                    elapsed: None,
                    owner,
                    feed: None,
                });
            }
            gpus.push(read.gpu);
        }
        let alive: HashSet<(u32, u64)> = processes
            .iter()
            .filter_map(|p| p.start_time.map(|t| (p.pid, t)))
            .collect();
        self.procfs.retain(&alive);
        self.owners.retain(&alive);
        let host_pid_namespace = self.procfs.host_pid_namespace();
        // Only pids this /proc names as NVML does (the others are not `visible`): elsewhere the
        // number is another process.
        let host_use = self.host_stats.processes(&stats);
        for (host, &at) in host_use.iter().zip(&stat_at) {
            if let Some(p) = processes.get_mut(at) {
                p.cpu_percent = host.cpu_percent;
                p.host_memory = host.memory;
                p.elapsed = host.elapsed;
            }
        }
        // A process listed on several devices: its later records as its first.
        for at in 0..processes.len() {
            let first = first_at.get(&processes[at].pid).copied();
            if let Some(first) = first.filter(|&first| first != at && processes[at].visible) {
                let (cpu, memory, elapsed) = {
                    let p = &processes[first];
                    (p.cpu_percent, p.host_memory, p.elapsed)
                };
                let p = &mut processes[at];
                (p.cpu_percent, p.host_memory, p.elapsed) = (cpu, memory, elapsed);
            }
        }
        let (host_cpu_percent, host_memory) = self.host_stats.node();
        let zombies: Vec<u32> = processes
            .iter()
            .filter(|p| p.is_gone_or_defunct(host_pid_namespace))
            .map(|p| p.pid)
            .collect();
        let device_files = self.holder_search.search(&mut self.procfs, &zombies);
        Ok(NodeSample {
            time: now(),
            interval: self.interval,
            host: self.host.clone(),
            demo: false,
            driver_version: self.driver_version.clone(),
            cuda_driver_version: self.cuda_driver_version.clone(),
            host_pid_namespace,
            gpus,
            processes,
            feeds: Vec::new(),
            feed_scan: Default::default(),
            host_cpu_percent,
            host_memory,
            device_files,
            // To the microsecond: finer is noise.
            poll_secs: Some((started.elapsed().as_secs_f64() * 1e6).round() / 1e6),
            problems,
        })
    }

    fn label(&self) -> String {
        format!("nvml {}", self.library)
    }

    fn set_demand(&mut self, demand: Demand) {
        self.demand = demand;
    }
}

/// What `/proc` said of a process already placed this sample, for its record on another
/// device (its CPU time and memory are taken once, from the first).
fn identity_of(placed: &ProcessSample) -> Identity {
    Identity {
        visible: placed.visible,
        hidden: placed.hidden,
        state: placed.proc_state.clone(),
        start_time: placed.start_time,
        user: placed.user.clone(),
        command: placed.command.clone(),
        executable: placed.executable.clone(),
        ..Identity::default()
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// This machine's host name, from the kernel.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_profile_is_read_from_the_device_name() {
        assert_eq!(
            profile_from_name("NVIDIA A100-SXM4-80GB MIG 3g.40gb").as_deref(),
            Some("3g.40gb")
        );
        assert_eq!(profile_from_name("NVIDIA H100 80GB HBM3"), None);
        assert_eq!(profile_from_name("MIG "), None);
    }

    #[test]
    fn a_missing_library_names_itself() {
        let err = NvmlSource::open(Some(PathBuf::from("/nonexistent/libnvidia-ml.so.1")), 1.0)
            .err()
            .expect("cannot load");
        let text = err.to_string();
        assert!(
            text.contains("NVIDIA driver library was not found"),
            "{text}"
        );
        assert!(text.contains("/nonexistent/libnvidia-ml.so.1"), "{text}");
    }
}

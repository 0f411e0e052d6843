//! The real node: NVML through `nvml-wrapper` 0.13, plus process identity from `/proc`.
//!
//! Every query may fail on its own. `NotSupported`, `NoPermission` and the like make that
//! field `None` and the rest of the device still shows; `GPU_IS_LOST` marks the GPU lost and
//! the other GPUs go on. Only a library that cannot be loaded or initialised stops strata.

mod query;

use super::procfs::ProcFs;
use super::{Source, SourceError};
use crate::sample::{GpuSample, MigSample, NodeSample, ProcessSample};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{cuda_driver_version_major, cuda_driver_version_minor, Device, Nvml};
pub use query::profile_from_name;
use query::{holders, memory, raw_id, sm_utilization, Handle, Holding};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// Library names tried when none is given: the driver installs `.so.1`; the unversioned name
/// exists only with development packages.
const DEFAULT_LIBRARIES: [&str; 2] = ["libnvidia-ml.so.1", "libnvidia-ml.so"];

/// NVML's value for "enabled" in `nvmlDeviceGetMigMode`.
const MIG_ENABLED: u32 = 1;

/// What is read once per GPU at start.
struct GpuStatic {
    index: u32,
    handle: Option<Handle>,
    uuid: String,
    name: Option<String>,
    pci_bus_id: Option<String>,
}

pub struct NvmlSource {
    nvml: Nvml,
    library: String,
    gpus: Vec<GpuStatic>,
    driver_version: Option<String>,
    cuda_driver_version: Option<String>,
    procfs: ProcFs,
    host: String,
    interval: f64,
    /// Latest process-utilization timestamp seen per GPU, so each poll asks only for new ones.
    utilization_seen: HashMap<u32, u64>,
}

// SAFETY: `Nvml` holds a loaded library and plain function pointers; NVML is thread-safe.
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

impl NvmlSource {
    /// Loads NVML from `library` (or the driver's usual names) and reads each GPU's identity.
    pub fn open(library: Option<PathBuf>, interval: f64) -> Result<Self, SourceError> {
        let candidates: Vec<PathBuf> = match library {
            Some(path) => vec![path],
            None => DEFAULT_LIBRARIES.iter().map(PathBuf::from).collect(),
        };
        let mut failures = Vec::new();
        for path in &candidates {
            match Nvml::builder().lib_path(OsStr::new(path)).init() {
                Ok(nvml) => return Ok(Self::start(nvml, path.display().to_string(), interval)),
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

    fn start(nvml: Nvml, library: String, interval: f64) -> Self {
        let count = nvml.device_count().unwrap_or(0);
        let gpus = (0..count)
            .map(|index| match nvml.device_by_index(index) {
                Ok(device) => GpuStatic {
                    index,
                    // SAFETY: the handle stays valid while `nvml` lives, and both move together.
                    handle: Some(Handle(unsafe { device.handle() })),
                    uuid: device
                        .uuid()
                        .unwrap_or_else(|_| format!("GPU-unreadable-{index}")),
                    name: device.name().ok(),
                    pci_bus_id: device.pci_info().ok().map(|p| p.bus_id),
                },
                Err(_) => GpuStatic {
                    index,
                    handle: None,
                    uuid: format!("GPU-unreadable-{index}"),
                    name: None,
                    pci_bus_id: None,
                },
            })
            .collect();
        let driver_version = nvml.sys_driver_version().ok();
        let cuda_driver_version = nvml.sys_cuda_driver_version().ok().map(|v| {
            format!(
                "{}.{}",
                cuda_driver_version_major(v),
                cuda_driver_version_minor(v)
            )
        });
        NvmlSource {
            nvml,
            library,
            gpus,
            driver_version,
            cuda_driver_version,
            procfs: ProcFs::default(),
            host: host_name(),
            interval,
            utilization_seen: HashMap::new(),
        }
    }

    fn device(&self, handle: Handle) -> Device<'_> {
        // SAFETY: the handle came from this `nvml` and stays valid while it lives.
        unsafe { Device::new(handle.0, &self.nvml) }
    }
}

impl NvmlSource {
    /// Reads one GPU (and its MIG instances). On `GPU_IS_LOST` from any query the GPU is
    /// returned lost, with no values: none of them would be current.
    fn sample_gpu(&mut self, i: usize) -> (GpuSample, Vec<Holding>, HashMap<u32, u32>) {
        let g = &self.gpus[i];
        let mut gpu = GpuSample {
            index: g.index,
            uuid: g.uuid.clone(),
            name: g.name.clone(),
            pci_bus_id: g.pci_bus_id.clone(),
            memory: None,
            utilization_gpu: None,
            mig_mode: None,
            lost: true,
            processes_known: false,
            mig: Vec::new(),
            problems: Default::default(),
        };
        let Some(handle) = g.handle else {
            return (gpu, Vec::new(), HashMap::new());
        };
        let lost_gpu = |gpu: GpuSample| {
            (
                GpuSample {
                    memory: None,
                    utilization_gpu: None,
                    mig: Vec::new(),
                    processes_known: false,
                    lost: true,
                    ..gpu
                },
                Vec::new(),
                HashMap::new(),
            )
        };
        let device = self.device(handle);
        let mut lost = false;
        gpu.lost = false;
        gpu.memory = memory(&device, &mut lost);
        match device.utilization_rates() {
            Ok(u) => gpu.utilization_gpu = Some(u.gpu),
            Err(NvmlError::GpuLost) => lost = true,
            Err(_) => {}
        }
        if lost {
            return lost_gpu(gpu);
        }
        gpu.mig_mode = match device.mig_mode() {
            Ok(m) => Some(m.current == MIG_ENABLED),
            Err(NvmlError::GpuLost) => return lost_gpu(gpu),
            Err(_) => None,
        };
        let mut seen = self.utilization_seen.get(&gpu.index).copied().unwrap_or(0);
        let since = (seen > 0).then_some(seen);
        let mut sm = sm_utilization(&device, since, &mut seen);
        let mut found = Vec::new();
        if gpu.mig_mode == Some(true) {
            // Processes are read per instance: the parent's list aggregates them.
            gpu.processes_known = true;
            let slots = match device.mig_device_count() {
                Ok(n) => n,
                Err(NvmlError::GpuLost) => return lost_gpu(gpu),
                Err(_) => 0,
            };
            for slot in 0..slots {
                let mig = match device.mig_device_by_index(slot) {
                    Ok(m) => m,
                    Err(NvmlError::GpuLost) => return lost_gpu(gpu),
                    // An empty slot, or an instance destroyed since the count: skip it.
                    Err(_) => continue,
                };
                // SAFETY: a handle NVML just returned for this library.
                let mig_handle = Handle(unsafe { mig.handle() });
                let mig_uuid = match mig.uuid() {
                    Ok(u) => u,
                    Err(NvmlError::GpuLost) => return lost_gpu(gpu),
                    Err(_) => continue,
                };
                let mig_memory = memory(&mig, &mut lost);
                let mig_holders = holders(&mig, &mut lost);
                if lost {
                    return lost_gpu(gpu);
                }
                let mut mig_seen = 0;
                sm.extend(sm_utilization(&mig, since, &mut mig_seen));
                let lib = self.nvml.lib();
                gpu.mig.push(MigSample {
                    uuid: mig_uuid.clone(),
                    profile: mig.name().ok().and_then(|n| profile_from_name(&n)),
                    gpu_instance_id: raw_id(
                        lib.nvmlDeviceGetGpuInstanceId.as_ref().ok(),
                        mig_handle,
                    ),
                    compute_instance_id: raw_id(
                        lib.nvmlDeviceGetComputeInstanceId.as_ref().ok(),
                        mig_handle,
                    ),
                    memory: mig_memory,
                    processes_known: mig_holders.known,
                    problems: Default::default(),
                });
                for (pid, (used, kind)) in mig_holders.by_pid {
                    found.push(Holding {
                        pid,
                        device_uuid: mig_uuid.clone(),
                        used,
                        kind,
                    });
                }
            }
        } else {
            let gpu_holders = holders(&device, &mut lost);
            if lost {
                return lost_gpu(gpu);
            }
            gpu.processes_known = gpu_holders.known;
            for (pid, (used, kind)) in gpu_holders.by_pid {
                found.push(Holding {
                    pid,
                    device_uuid: gpu.uuid.clone(),
                    used,
                    kind,
                });
            }
        }
        let index = gpu.index;
        self.utilization_seen.insert(index, seen);
        (gpu, found, sm)
    }
}

impl Source for NvmlSource {
    fn sample(&mut self) -> Result<NodeSample, SourceError> {
        let started = std::time::Instant::now();
        let mut gpus = Vec::with_capacity(self.gpus.len());
        let mut processes = Vec::new();
        for i in 0..self.gpus.len() {
            let (gpu, found, sm) = self.sample_gpu(i);
            for h in found {
                let identity = self.procfs.identity(h.pid);
                processes.push(ProcessSample {
                    pid: h.pid,
                    device_uuid: h.device_uuid,
                    used: h.used,
                    kind: h.kind,
                    mps: false,
                    visible: identity.visible,
                    hidden: false,
                    proc_state: identity.state,
                    start_time: identity.start_time,
                    user: identity.user,
                    command: identity.command,
                    sm_util: sm.get(&h.pid).copied(),
                    executable: identity.executable,
                    feed: None,
                });
            }
            gpus.push(gpu);
        }
        let alive: Vec<(u32, u64)> = processes
            .iter()
            .filter_map(|p| p.start_time.map(|t| (p.pid, t)))
            .collect();
        self.procfs.retain(&alive);
        Ok(NodeSample {
            time: now(),
            interval: self.interval,
            host: self.host.clone(),
            driver_version: self.driver_version.clone(),
            cuda_driver_version: self.cuda_driver_version.clone(),
            host_pid_namespace: self.procfs.host_pid_namespace(),
            gpus,
            processes,
            feeds: Vec::new(),
            poll_secs: Some(started.elapsed().as_secs_f64()),
            problems: Default::default(),
        })
    }

    fn label(&self) -> String {
        format!("nvml {}", self.library)
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// This machine's host name, from the kernel.
pub fn host_name() -> String {
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

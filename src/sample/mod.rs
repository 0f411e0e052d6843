//! The raw node sample: what the sources observed at one instant, nothing derived.
//!
//! This is the one schema shared by `snapshot`, `record`, `replay` and `analyze`:
//! everything downstream (layers, findings) is recomputed from these fields.
//! Every value that a source could fail to read is an `Option`: unknown is `null`,
//! never 0.

pub(crate) mod derived;
pub mod feed;
pub(crate) mod fields;
pub(crate) mod owner;
pub mod pool;

pub use derived::{make_raw, FeedShape};
pub use feed::{AllocatorStats, FeedRecord, FeedScan};
use fields::schema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The name of the JSON schema of one instant, whose raw fields are a [`NodeSample`]'s:
/// `snapshot --json` writes them with the derived fields beside them, a format-1 recording
/// line alone.
pub(crate) const SNAPSHOT_SCHEMA: &str = "strata.snapshot/1";

/// Memory of one device (a whole GPU or one MIG instance) as NVML reports it, in bytes.
///
/// With `nvmlDeviceGetMemoryInfo_v2`, `total = driver_reserved + used + free`: NVML's
/// v2 `used` excludes the driver/firmware reservation (v1's `used` includes it, and then
/// `driver_reserved` is `None`). The accounting therefore works from
/// `occupied = total - free`, which is right under both versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMemory {
    pub total: u64,
    pub used: u64,
    pub free: u64,
    pub driver_reserved: Option<u64>,
}

schema! {
    /// What NVML says of one MIG instance of a GPU in MIG mode.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct MigInfo {
        pub uuid: String,
        /// Profile such as `3g.40gb`, where NVML names it.
        pub profile: Option<String>,
        pub gpu_instance_id: Option<u32>,
        pub compute_instance_id: Option<u32>,
        pub memory: Option<DeviceMemory>,
        /// False when the process list of this instance could not be read: then no usage on it
        /// can be attributed to a process.
        #[serde(default = "yes")]
        pub processes_known: bool,
    }
}

impl MigInfo {
    /// An instance of which nothing is known yet but its UUID.
    pub(crate) fn new(uuid: String) -> Self {
        MigInfo {
            uuid,
            profile: None,
            gpu_instance_id: None,
            compute_instance_id: None,
            memory: None,
            processes_known: true,
        }
    }
}

/// One MIG instance of a GPU in MIG mode: what NVML says of it ([`MigInfo`], whose fields it
/// reads as its own and writes as its own in JSON), and what NVML refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MigSample {
    #[serde(flatten)]
    pub(crate) info: MigInfo,
    /// What NVML refused for this instance, by what was asked (see [`GpuSample::problems`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub problems: BTreeMap<String, String>,
}

schema! {
    /// What NVML says of one physical GPU itself (its instances and its refusals apart).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct GpuInfo {
        pub index: u32,
        pub uuid: String,
        pub(crate) name: Option<String>,
        /// `DDDDDDDD:BB:DD.0` as NVML writes it: how a feed without UUIDs, or on a MIG instance,
        /// is matched to this GPU.
        #[serde(default)]
        pub(crate) pci_bus_id: Option<String>,
        pub memory: Option<DeviceMemory>,
        /// Percent of time a kernel ran over NVML's last sample period.
        pub utilization_gpu: Option<u32>,
        /// The GPU die's temperature, °C (`nvmlDeviceGetTemperature`, the GPU sensor); `None`
        /// where NVML does not give it (a refusal is in `problems` under `temperature`).
        #[serde(default)]
        pub(crate) temperature: Option<u32>,
        /// The board's power draw, milliwatts (`nvmlDeviceGetPowerUsage`); `None` where NVML
        /// does not give it (a refusal is in `problems` under `power`).
        #[serde(default)]
        pub(crate) power_mw: Option<u32>,
        /// The power limit the GPU enforces, milliwatts (`nvmlDeviceGetEnforcedPowerLimit`:
        /// the lowest of the limits an administrator, the driver and the board set); a
        /// refusal is under `power_limit`.
        #[serde(default)]
        pub(crate) power_limit_mw: Option<u32>,
        /// The SM clock, MHz (`nvmlDeviceGetClockInfo`, `NVML_CLOCK_SM`); a refusal is under
        /// `sm_clock`.
        #[serde(default)]
        pub(crate) sm_clock_mhz: Option<u32>,
        /// The SM clock's maximum, MHz (`nvmlDeviceGetMaxClockInfo`, `NVML_CLOCK_SM`); a
        /// refusal is under `sm_clock_max`.
        #[serde(default)]
        pub(crate) sm_clock_max_mhz: Option<u32>,
        /// Current MIG mode; `None` where the GPU does not support MIG.
        pub mig_mode: Option<bool>,
        /// The minor number of the GPU's device file, `/dev/nvidia<N>` (NVML's
        /// `nvmlDeviceGetMinorNumber`): the file a process holding a context keeps open.
        #[serde(default)]
        pub(crate) minor_number: Option<u32>,
        /// The GPU answered `GPU_IS_LOST` (fallen off the bus): no value of this sample is current.
        /// Only that error: any other failure is in `problems`.
        pub lost: bool,
        #[serde(default = "yes")]
        pub processes_known: bool,
    }
}

impl GpuInfo {
    /// A GPU of which nothing is known yet but its place and UUID.
    pub(crate) fn new(index: u32, uuid: String) -> Self {
        GpuInfo {
            index,
            uuid,
            name: None,
            pci_bus_id: None,
            memory: None,
            utilization_gpu: None,
            temperature: None,
            power_mw: None,
            power_limit_mw: None,
            sm_clock_mhz: None,
            sm_clock_max_mhz: None,
            mig_mode: None,
            minor_number: None,
            lost: false,
            processes_known: true,
        }
    }
}

/// One physical GPU: what NVML says of it ([`GpuInfo`], whose fields it reads as its own and
/// writes as its own in JSON), its MIG instances, and what NVML refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    #[serde(flatten)]
    pub(crate) info: GpuInfo,
    #[serde(default)]
    pub mig: Vec<MigSample>,
    /// What NVML refused, by what was asked, with NVML's own error and what it means:
    /// `handle` (the GPU could not be opened: no value of it is known), `memory`, `processes`
    /// (a list could not be read), `utilization`, `temperature`, `power`, `power_limit`,
    /// `sm_clock`, `sm_clock_max`, `mig_mode`, `mig_devices` (the
    /// instances could not be listed), `parent` (in MIG mode, the parent's own memory or
    /// process list: it needs root). A missing value with no entry here is one NVML does not support.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub problems: BTreeMap<String, String>,
}

/// How a process uses the device, as NVML lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextKind {
    Compute,
    Graphics,
    ComputeGraphics,
}

/// A process's allocator feed for one device, matched to NVML's listing of that process
/// ([`crate::accounting::attach`]). Derived: not part of the raw sample, which holds the feeds
/// themselves in [`NodeSample::feeds`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedSample {
    /// `torch`, `jax`, `cupy`.
    pub(crate) framework: String,
    pub(crate) framework_version: Option<String>,
    /// Allocator backend: `native`, `cudaMallocAsync`, `bfc`, ...
    pub(crate) backend: String,
    /// Position of the feed in [`NodeSample::feeds`].
    pub(crate) feed: usize,
    /// The allocator's statistics for this device, at `stats.time`.
    #[serde(flatten)]
    pub stats: AllocatorStats,
}

/// Copied whole (its statistics' map included), as before it was refilled field by field.
impl fields::Refill for FeedSample {
    fn refill(&mut self, from: &Self) {
        self.clone_from(from);
    }
}

/// Boxed where a process holds it (most processes have no feed, and the statistics are
/// large), and kept so in a queue.
impl<I: fields::Interner> fields::Pack<I> for Box<FeedSample> {
    type Packed = Box<FeedSample>;
    fn pack(self, _: &mut I) -> Box<FeedSample> {
        self
    }
    fn unpack(packed: Box<FeedSample>, _: &I) -> Box<FeedSample> {
        packed
    }
}

impl FeedSample {
    /// The readings of this device that arrived in `sample`'s feed before the latest one
    /// (a feed met for the first time brings its backlog), oldest first; none when the
    /// feed or its device is not in `sample`.
    pub(crate) fn earlier<'a>(&self, sample: &'a NodeSample) -> &'a [AllocatorStats] {
        sample
            .feeds
            .get(self.feed)
            .and_then(|r| {
                r.devices
                    .iter()
                    .find(|d| d.latest.index == self.stats.index)
            })
            .map(|d| d.earlier.as_slice())
            .unwrap_or_default()
    }
}

schema! {
    packed PackedProcess;
    /// One process holding memory on one device (a GPU, or a MIG instance of it).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct ProcessSample {
        /// PID as NVML reports it (the host's PID namespace).
        pub pid: u32,
        /// UUID of the GPU, or of the MIG instance the process runs on.
        pub device_uuid: std::sync::Arc<str>,
        /// NVML's per-process used memory; `None` where NVML reports it not available.
        pub used: Option<u64>,
        pub kind: ContextKind,
        /// Listed by `nvmlDeviceGetMPSComputeRunningProcesses`: a client of the MPS server.
        #[serde(default)]
        pub mps: bool,
        /// Whether `/proc` of this monitor shows the PID (and so who it is).
        pub visible: bool,
        /// The PID exists here but `/proc` hides it (`hidepid`, permissions): not visible, and
        /// not gone either.
        #[serde(default)]
        pub hidden: bool,
        /// The state letter of `/proc/PID/stat` (`R`, `S`, `D`, `Z`...), when visible.
        pub(crate) proc_state: Option<std::sync::Arc<str>>,
        /// Start time in clock ticks since boot (`/proc/PID/stat` field 22): tells a reused PID
        /// from the process that held it before.
        pub start_time: Option<u64>,
        pub user: Option<String>,
        pub command: Option<String>,
        /// Per-process SM utilization in percent, where NVML gives it.
        pub sm_util: Option<u32>,
        /// The process's executable (`/proc/PID/exe`), when visible and readable.
        #[serde(default)]
        pub(crate) executable: Option<std::sync::Arc<str>>,
        /// Host CPU the process used over the last interval, in percent of one core (a process
        /// busy on four cores reads 400); unknown until it has been seen twice.
        #[serde(default)]
        pub cpu_percent: Option<f64>,
        /// Host memory the process holds (resident set size), in bytes.
        #[serde(default)]
        pub host_memory: Option<u64>,
        /// Seconds since the process started.
        #[serde(default)]
        pub elapsed: Option<u64>,
        /// Who the process belongs to (pod, container, Slurm step, unit, launcher), when
        /// visible: observed once per process and shared by its entries.
        #[serde(default)]
        pub owner: Option<std::sync::Arc<owner::Owner>>,
        /// Derived by [`crate::accounting::attach`] from [`NodeSample::feeds`]; never written as a raw
        /// field. Read from input only for recordings of the snapshot's derived form, which
        /// carried the allocator's figures here and no `feeds` ([`derived`]); attaching replaces
        /// it.
        #[serde(default, skip_serializing)]
        pub feed: Option<Box<FeedSample>>,
    }
}

/// Everything observed on one node at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSample {
    /// When the sample was taken (unix seconds).
    pub time: f64,
    /// The sampling interval in effect, in seconds; feed staleness is judged against it.
    pub interval: f64,
    pub host: String,
    /// Made by the built-in demo, not observed on a node: its times are the demo's story
    /// clock. Written by the demo source only; absent (false) from every other sample.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) demo: bool,
    pub(crate) driver_version: Option<String>,
    pub(crate) cuda_driver_version: Option<String>,
    /// Whether this monitor's `/proc` shows the initial (host) PID namespace, the one NVML's
    /// PIDs are in: on the host, or in a container given the host's `/proc`. Then NVML's PIDs
    /// are looked up in it, and one it does not show (and does not hide) has exited: its
    /// context is a zombie. `false`: none of NVML's PIDs can be named here.
    pub host_pid_namespace: Option<bool>,
    pub gpus: Vec<GpuSample>,
    pub processes: Vec<ProcessSample>,
    /// Every allocator feed the monitor holds, trusted or refused (empty for a source
    /// without feeds).
    #[serde(default)]
    pub feeds: Vec<FeedRecord>,
    /// What the search for feeds met that is not a feed: dirs cut short, suspicious entries
    /// (empty for a source without feeds).
    #[serde(default, skip_serializing_if = "FeedScan::is_empty")]
    pub(crate) feed_scan: FeedScan,
    /// Host CPU in use over the last interval, in percent of all cores (0 to 100).
    #[serde(default)]
    pub host_cpu_percent: Option<f64>,
    /// Host memory, in bytes.
    #[serde(default)]
    pub host_memory: Option<HostMemory>,
    /// Who holds the GPUs' device files open, as `fuser` finds them through `/proc/*/fd`:
    /// searched only while the holder of a context is gone or defunct (`None` otherwise).
    #[serde(default)]
    pub(crate) device_files: Option<DeviceFileScan>,
    /// How long the poll that produced this sample took (seconds): NVML's readings were
    /// taken between `time - poll_secs` and `time`.
    #[serde(default)]
    pub poll_secs: Option<f64>,
    /// What NVML refused for the node as a whole: `device_count` (the GPUs could not be
    /// counted: none is shown, and that is not "no GPU"), `driver` (a driver too old for the
    /// calls strata uses, naming its version).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub problems: BTreeMap<String, String>,
}

/// The host's memory, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostMemory {
    pub total: u64,
    /// In use: total less what is available without swapping (`MemAvailable`).
    pub used: u64,
}

/// The result of one search for the processes that hold the GPUs' device files open.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct DeviceFileScan {
    pub(crate) holders: Vec<DeviceHolder>,
    /// Processes whose open files could not be read (another user's, without root): a holder
    /// may be among them.
    pub(crate) unreadable: u32,
}

/// A process holding `/dev/nvidia<N>` or `/dev/nvidia-uvm` open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DeviceHolder {
    pub(crate) pid: u32,
    /// Start time in clock ticks since boot: who the pid named when it was found.
    pub(crate) start_time: Option<u64>,
    /// The state letter of `/proc/PID/stat` (`Z`: defunct).
    pub(crate) state: Option<String>,
    pub(crate) ppid: Option<u32>,
    pub(crate) uid: Option<u32>,
    pub(crate) user: Option<String>,
    pub(crate) command: Option<String>,
    pub(crate) parent_command: Option<String>,
    /// The minor numbers of the `/dev/nvidia<N>` it holds open.
    pub(crate) minors: Vec<u32>,
    /// Whether it holds `/dev/nvidia-uvm` open.
    pub(crate) uvm: bool,
}

impl ProcessSample {
    /// Whether this holder of a context has exited or is defunct (its context is then a
    /// zombie): a PID `/proc` shows in state `Z`, or one that the host's `/proc` neither shows
    /// nor hides.
    pub(crate) fn is_gone_or_defunct(&self, host_pid_namespace: Option<bool>) -> bool {
        match (self.visible, self.proc_state.as_deref()) {
            (true, state) => state == Some("Z"),
            (false, _) => !self.hidden && host_pid_namespace == Some(true),
        }
    }
}

fn yes() -> bool {
    true
}

/// A GPU's own figures read as the GPU's (`gpu.memory`), as its JSON writes them.
impl std::ops::Deref for GpuSample {
    type Target = GpuInfo;
    fn deref(&self) -> &GpuInfo {
        &self.info
    }
}

impl std::ops::DerefMut for GpuSample {
    fn deref_mut(&mut self) -> &mut GpuInfo {
        &mut self.info
    }
}

/// An instance's own figures read as the instance's (`mig.memory`), as its JSON writes them.
impl std::ops::Deref for MigSample {
    type Target = MigInfo;
    fn deref(&self) -> &MigInfo {
        &self.info
    }
}

impl std::ops::DerefMut for MigSample {
    fn deref_mut(&mut self) -> &mut MigInfo {
        &mut self.info
    }
}

impl GpuSample {
    /// Whether a process on the device with this UUID runs on this GPU: on the GPU itself or
    /// on one of its MIG instances.
    pub fn holds(&self, device_uuid: &str) -> bool {
        self.uuid == device_uuid || self.mig.iter().any(|m| m.uuid == device_uuid)
    }
}

impl NodeSample {
    /// The processes running on the device with this UUID, directly (not through MIG).
    pub(crate) fn processes_on<'a>(
        &'a self,
        uuid: &'a str,
    ) -> impl Iterator<Item = &'a ProcessSample> {
        self.processes
            .iter()
            .filter(move |p| *p.device_uuid == *uuid)
    }

    /// The GPU (and MIG instance, if any) a device UUID names.
    pub(crate) fn locate(&self, uuid: &str) -> Option<(&GpuSample, Option<&MigSample>)> {
        self.gpus.iter().find_map(|g| {
            if g.uuid == uuid {
                Some((g, None))
            } else {
                g.mig.iter().find(|m| m.uuid == uuid).map(|m| (g, Some(m)))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    /// A sample holds a record per listed process (4,096 on a big node, two or three samples
    /// alive at once): the allocator's statistics, which few processes have, are boxed out
    /// of it. Inline they made a record 648 bytes.
    #[test]
    fn a_process_record_holds_its_feed_boxed() {
        let size = std::mem::size_of::<super::ProcessSample>();
        assert!(size <= 256, "{size}");
    }
}

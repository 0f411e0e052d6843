//! The scenario file: what the fake answers, and how the answers change from poll to poll.
//!
//! The format is documented in `tests/fake-nvml/README.md`; this module parses it, checks it,
//! and resolves a device's values at a given poll number.

use std::path::Path;

use serde::Deserialize;

use crate::codes::ERROR_NOT_SUPPORTED;
use crate::faults::Fault;
pub use crate::values::{present, Answer, PollWindow, Scripted};

/// Most GPUs a scenario may describe (the handle table has room for this many).
pub const MAX_DEVICES: usize = 64;
/// Most MIG slots per GPU (real GPUs have at most 7).
pub const MAX_MIG_SLOTS: u32 = 15;

fn not_supported<T>() -> Answer<T> {
    Answer::Error(ERROR_NOT_SUPPORTED)
}

fn empty_list<T>() -> Answer<Vec<T>> {
    Answer::Value(Vec::new())
}

/// The whole scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Free text for the reader of the file; the fake never reads it.
    #[serde(default)]
    #[allow(dead_code)]
    pub description: Option<String>,
    #[serde(default)]
    pub system: System,
    pub devices: Vec<Device>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct System {
    #[serde(default = "default_driver_version")]
    pub driver_version: Answer<String>,
    #[serde(default = "default_nvml_version")]
    pub nvml_version: Answer<String>,
    #[serde(default = "default_cuda_driver_version")]
    pub cuda_driver_version: Answer<i32>,
    /// Faults of the calls that name no device (`nvmlDeviceGetCount*`, `nvmlSystemGet*`).
    #[serde(default)]
    pub faults: Vec<Fault>,
}

fn default_driver_version() -> Answer<String> {
    Answer::Value("550.54.15".to_owned())
}
fn default_nvml_version() -> Answer<String> {
    Answer::Value("12.550.54.15".to_owned())
}
fn default_cuda_driver_version() -> Answer<i32> {
    Answer::Value(12040)
}

impl Default for System {
    fn default() -> Self {
        System {
            driver_version: default_driver_version(),
            nvml_version: default_nvml_version(),
            cuda_driver_version: default_cuda_driver_version(),
            faults: Vec::new(),
        }
    }
}

/// A physical GPU; its position in `devices` is its NVML index.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    pub name: Answer<String>,
    pub uuid: Answer<String>,
    #[serde(default)]
    pub pci_bus_id: Option<String>,
    /// The minor number of the GPU's `/dev/nvidia<N>`; absent: its index.
    #[serde(default)]
    pub minor_number: Option<Answer<u32>>,
    pub memory: Answer<Memory>,
    #[serde(default = "not_supported")]
    pub utilization: Answer<Utilization>,
    /// The GPU sensor's temperature, °C.
    #[serde(default = "not_supported")]
    pub temperature: Answer<Scripted<u32>>,
    /// The board's power draw, milliwatts (`nvmlDeviceGetPowerUsage`).
    #[serde(default = "not_supported")]
    pub power_usage: Answer<Scripted<u32>>,
    /// The enforced power limit, milliwatts (`nvmlDeviceGetEnforcedPowerLimit`).
    #[serde(default = "not_supported")]
    pub power_limit: Answer<u32>,
    /// The SM clock, MHz (`nvmlDeviceGetClockInfo` with `NVML_CLOCK_SM`).
    #[serde(default = "not_supported")]
    pub sm_clock: Answer<Scripted<u32>>,
    /// The SM clock's maximum, MHz (`nvmlDeviceGetMaxClockInfo` with `NVML_CLOCK_SM`).
    #[serde(default = "not_supported")]
    pub sm_clock_max: Answer<u32>,
    /// The BAR1 aperture, bytes (`nvmlDeviceGetBAR1MemoryInfo`).
    #[serde(default = "not_supported")]
    pub bar1_memory: Answer<Bar1Memory>,
    /// The PCIe link, now and at most (`nvmlDevice{Curr,Max}PcieLink{Generation,Width}`).
    #[serde(default = "not_supported")]
    pub pcie_link: Answer<PcieLink>,
    /// PCIe traffic, KB/s (`nvmlDeviceGetPcieThroughput`).
    #[serde(default = "not_supported")]
    pub pcie_throughput: Answer<PcieThroughput>,
    /// The fan's speed, percent of its maximum (`nvmlDeviceGetFanSpeed`).
    #[serde(default = "not_supported")]
    pub fan_speed: Answer<Scripted<u32>>,
    /// The shutdown and slowdown temperatures, °C (`nvmlDeviceGetTemperatureThreshold`).
    #[serde(default = "not_supported")]
    pub temperature_thresholds: Answer<TemperatureThresholds>,
    /// The video encoder's utilization, percent (`nvmlDeviceGetEncoderUtilization`).
    #[serde(default = "not_supported")]
    pub encoder_utilization: Answer<Scripted<u32>>,
    /// The video decoder's utilization, percent (`nvmlDeviceGetDecoderUtilization`).
    #[serde(default = "not_supported")]
    pub decoder_utilization: Answer<Scripted<u32>>,
    #[serde(default = "not_supported")]
    pub mig_mode: Answer<MigMode>,
    #[serde(default = "zero_mig_devices")]
    pub max_mig_devices: Answer<u32>,
    #[serde(default)]
    pub mig: Vec<MigInstance>,
    #[serde(default = "empty_list")]
    pub compute_processes: Answer<Vec<Process>>,
    #[serde(default = "empty_list")]
    pub graphics_processes: Answer<Vec<Process>>,
    /// Clients of an MPS server (`nvmlDeviceGetMPSComputeRunningProcesses*`).
    #[serde(default = "empty_list")]
    pub mps_processes: Answer<Vec<Process>>,
    #[serde(default = "empty_list")]
    pub process_utilization: Answer<Vec<ProcessUtilization>>,
    #[serde(default)]
    pub lost_at_poll: Option<usize>,
    #[serde(default)]
    pub count_jitter: Scripted<i64>,
    /// Errors and delays injected into the calls on this GPU's handle.
    #[serde(default)]
    pub faults: Vec<Fault>,
}

fn zero_mig_devices() -> Answer<u32> {
    Answer::Value(0)
}

/// A MIG device (one GPU instance + compute instance) in a slot of its parent GPU.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigInstance {
    pub slot: u32,
    pub uuid: Answer<String>,
    pub name: Answer<String>,
    pub gpu_instance_id: Answer<u32>,
    pub compute_instance_id: Answer<u32>,
    pub memory: Answer<Memory>,
    #[serde(default = "not_supported")]
    pub utilization: Answer<Utilization>,
    /// The MIG device's share of the BAR1 aperture, bytes (`nvmlDeviceGetBAR1MemoryInfo`).
    #[serde(default = "not_supported")]
    pub bar1_memory: Answer<Bar1Memory>,
    #[serde(default = "empty_list")]
    pub compute_processes: Answer<Vec<Process>>,
    #[serde(default = "empty_list")]
    pub graphics_processes: Answer<Vec<Process>>,
    #[serde(default = "empty_list")]
    pub mps_processes: Answer<Vec<Process>>,
    #[serde(default = "not_supported")]
    pub process_utilization: Answer<Vec<ProcessUtilization>>,
    #[serde(default)]
    pub lost_at_poll: Option<usize>,
    #[serde(default)]
    pub count_jitter: Scripted<i64>,
    /// Errors and delays injected into the calls on this MIG device's handle.
    #[serde(default)]
    pub faults: Vec<Fault>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    pub total: Scripted<u64>,
    #[serde(default)]
    pub reserved: Scripted<u64>,
    pub used: Scripted<u64>,
    /// When absent: `total - reserved - used`, floored at 0.
    #[serde(default)]
    pub free: Option<Scripted<u64>>,
}

/// Memory at one poll, in `nvmlMemory_v2_t` terms (`used` excludes `reserved`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryAt {
    pub total: u64,
    pub reserved: u64,
    pub used: u64,
    pub free: u64,
}

impl Memory {
    pub fn at(&self, poll: usize) -> MemoryAt {
        let total = self.total.at(poll);
        let reserved = self.reserved.at(poll);
        let used = self.used.at(poll);
        let free = match &self.free {
            Some(free) => free.at(poll),
            None => total.saturating_sub(reserved).saturating_sub(used),
        };
        MemoryAt {
            total,
            reserved,
            used,
            free,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Utilization {
    pub gpu: Scripted<u32>,
    pub memory: Scripted<u32>,
}

/// The BAR1 aperture (the GPU memory the CPU can map), bytes; free is `total - used`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bar1Memory {
    pub total: u64,
    pub used: Scripted<u64>,
}

/// A GPU's PCIe link: the generation and lane count it runs at, and the most it can.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcieLink {
    pub generation: Scripted<u32>,
    pub width: Scripted<u32>,
    pub max_generation: u32,
    pub max_width: u32,
}

/// PCIe traffic over NVML's last sampling window, KB/s each way.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcieThroughput {
    pub tx: Scripted<u32>,
    pub rx: Scripted<u32>,
}

/// The temperatures at which the GPU shuts down and slows down, °C.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemperatureThresholds {
    pub shutdown: u32,
    pub slowdown: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigMode {
    pub current: u32,
    pub pending: u32,
}

/// A process in a running-process list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    /// Bytes; `null` answers `NVML_VALUE_NOT_AVAILABLE` (`u64::MAX`).
    pub used: Scripted<Option<u64>>,
    #[serde(default)]
    pub gpu_instance_id: Option<u32>,
    #[serde(default)]
    pub compute_instance_id: Option<u32>,
    #[serde(default)]
    pub polls: Option<PollWindow>,
}

/// A process as one `nvmlProcessInfo_t` entry at one poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessAt {
    pub pid: u32,
    pub used_bytes: u64,
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
}

/// The entries of `list` present at `poll`; instance ids not given take the defaults.
pub fn processes_at(
    list: &[Process],
    poll: usize,
    default_gpu_instance_id: u32,
    default_compute_instance_id: u32,
) -> Vec<ProcessAt> {
    list.iter()
        .filter(|process| present(&process.polls, poll))
        .map(|process| ProcessAt {
            pid: process.pid,
            used_bytes: process
                .used
                .at(poll)
                .unwrap_or(crate::codes::VALUE_NOT_AVAILABLE_U64),
            gpu_instance_id: process.gpu_instance_id.unwrap_or(default_gpu_instance_id),
            compute_instance_id: process
                .compute_instance_id
                .unwrap_or(default_compute_instance_id),
        })
        .collect()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessUtilization {
    pub pid: u32,
    pub sm: Scripted<u32>,
    pub mem: Scripted<u32>,
    #[serde(default)]
    pub enc: Scripted<u32>,
    #[serde(default)]
    pub dec: Scripted<u32>,
    #[serde(default)]
    pub polls: Option<PollWindow>,
}

/// Microseconds since the epoch stamped on poll 0's utilization samples; each poll adds 1 s.
pub const SAMPLE_EPOCH_US: u64 = 1_700_000_000_000_000;

/// One `nvmlProcessUtilizationSample_t` at one poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleAt {
    pub pid: u32,
    pub timestamp_us: u64,
    pub sm: u32,
    pub mem: u32,
    pub enc: u32,
    pub dec: u32,
}

/// Samples present at `poll` and newer than `last_seen_us` (NVML's `lastSeenTimeStamp`).
pub fn samples_at(list: &[ProcessUtilization], poll: usize, last_seen_us: u64) -> Vec<SampleAt> {
    let timestamp_us = SAMPLE_EPOCH_US.saturating_add((poll as u64).saturating_mul(1_000_000));
    if timestamp_us <= last_seen_us {
        return Vec::new();
    }
    list.iter()
        .filter(|entry| present(&entry.polls, poll))
        .map(|entry| SampleAt {
            pid: entry.pid,
            timestamp_us,
            sm: entry.sm.at(poll),
            mem: entry.mem.at(poll),
            enc: entry.enc.at(poll),
            dec: entry.dec.at(poll),
        })
        .collect()
}

/// Parses and checks a scenario.
pub fn parse(text: &str) -> Result<Scenario, String> {
    let scenario: Scenario = serde_json::from_str(text).map_err(|e| e.to_string())?;
    crate::validate::check(&scenario)?;
    Ok(scenario)
}

/// Reads, parses and checks the scenario at `path`; the error says what is wrong and where.
pub fn load(path: &Path) -> Result<Scenario, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read scenario {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("bad scenario {}: {e}", path.display()))
}

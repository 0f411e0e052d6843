//! Estimating each fed process's CUDA context.
//!
//! NVML's per-process figure includes the CUDA context, which no allocator sees. The context
//! is fixed once created, while memory outside the pool (NCCL, cuDNN workspaces) comes and
//! grows later, so the smallest `NVML used - reserved` seen for a process on a device is the
//! best estimate of its context available without the driver's help. `--context-mib` replaces
//! the estimate with a fixed size.

use crate::accounting::feed_status;
use crate::sample::{NodeSample, ProcessSample};
use std::collections::HashMap;

/// A process on a device, across samples. The start time tells a reused PID apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ProcessKey {
    pid: u32,
    start_time: Option<u64>,
    device_uuid: String,
}

impl ProcessKey {
    fn of(process: &ProcessSample) -> Self {
        ProcessKey {
            pid: process.pid,
            start_time: process.start_time,
            device_uuid: process.device_uuid.clone(),
        }
    }
}

/// The running minimum of `NVML used - reserved` per process and device.
#[derive(Debug, Clone, Default)]
pub struct ContextEstimator {
    fixed_bytes: Option<u64>,
    smallest: HashMap<ProcessKey, u64>,
}

impl ContextEstimator {
    /// An estimator that learns from what it observes.
    pub fn learning() -> Self {
        Self::default()
    }

    /// An estimator that answers a fixed context size (`--context-mib`).
    pub fn fixed(bytes: u64) -> Self {
        ContextEstimator {
            fixed_bytes: Some(bytes),
            smallest: HashMap::new(),
        }
    }

    /// Learns from one sample. Processes no longer present are forgotten, so memory stays
    /// bounded by the processes alive now.
    pub fn observe(&mut self, sample: &NodeSample) {
        if self.fixed_bytes.is_some() {
            return;
        }
        let mut seen: HashMap<ProcessKey, u64> = HashMap::with_capacity(sample.processes.len());
        for process in &sample.processes {
            let key = ProcessKey::of(process);
            let beyond_pool = match (&process.feed, process.used) {
                (Some(feed), Some(used)) if feed_status(sample, process).is_usable() => {
                    Some(used - feed.reserved)
                }
                _ => None,
            };
            let previous = self.smallest.get(&key).copied();
            let smallest = match (previous, beyond_pool) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if let Some(bytes) = smallest {
                seen.insert(key, bytes);
            }
        }
        self.smallest = seen;
    }

    /// The context estimate for a process, if any was observed (or fixed).
    pub fn estimate(&self, process: &ProcessSample) -> Option<u64> {
        self.fixed_bytes
            .or_else(|| self.smallest.get(&ProcessKey::of(process)).copied())
    }
}

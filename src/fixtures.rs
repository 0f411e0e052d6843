//! Small builders of raw samples, shared by unit, property and screen tests.
#![doc(hidden)]

use crate::sample::{
    ContextKind, DeviceMemory, FeedSample, GpuSample, MigSample, NodeSample, ProcessSample,
};

pub const GIB: u64 = 1 << 30;
pub const MIB: u64 = 1 << 20;

/// A node with no GPUs at unix time 1000, sampled every second.
pub fn node() -> NodeSample {
    NodeSample {
        time: 1000.0,
        interval: 1.0,
        host: "test-node".into(),
        driver_version: Some("550.90.07".into()),
        cuda_driver_version: Some("12.4".into()),
        host_pid_namespace: Some(true),
        gpus: Vec::new(),
        processes: Vec::new(),
    }
}

/// Memory with `total = used + free` and no driver reservation reported.
pub fn memory(total: u64, used: u64) -> DeviceMemory {
    DeviceMemory {
        total,
        used,
        free: total - used,
        driver_reserved: None,
    }
}

pub fn gpu(index: u32, memory: DeviceMemory) -> GpuSample {
    GpuSample {
        index,
        uuid: format!("GPU-test-{index}"),
        name: Some("NVIDIA H100 80GB HBM3".into()),
        memory: Some(memory),
        utilization_gpu: Some(50),
        mig_mode: Some(false),
        lost: false,
        processes_known: true,
        mig: Vec::new(),
    }
}

pub fn mig(uuid: &str, profile: &str, memory: DeviceMemory) -> MigSample {
    MigSample {
        uuid: uuid.into(),
        profile: Some(profile.into()),
        gpu_instance_id: Some(1),
        compute_instance_id: Some(0),
        memory: Some(memory),
        processes_known: true,
    }
}

/// A visible, running process without a feed.
pub fn process(pid: u32, device_uuid: &str, used: Option<u64>) -> ProcessSample {
    ProcessSample {
        pid,
        device_uuid: device_uuid.into(),
        used,
        kind: ContextKind::Compute,
        visible: true,
        proc_state: Some("R".into()),
        start_time: Some(u64::from(pid) * 10),
        user: Some("alice".into()),
        command: Some(format!("python train.py --rank {pid}")),
        sm_util: Some(40),
        feed: None,
    }
}

/// A torch feed with the native backend, read at `time`.
pub fn feed(allocated: u64, reserved: u64, inactive_split: Option<u64>, time: f64) -> FeedSample {
    FeedSample {
        framework: "torch".into(),
        framework_version: Some("2.5.1".into()),
        backend: "native".into(),
        allocated,
        reserved,
        inactive_split,
        peak_allocated: Some(allocated),
        peak_reserved: Some(reserved),
        alloc_retries: Some(0),
        ooms: Some(0),
        largest_free_block: None,
        time,
    }
}

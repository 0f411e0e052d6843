//! The devices a GPU's findings are judged on: the GPU itself and, in MIG mode, each of its
//! GPU instances once (its first compute instance stands for it), whose partitions hold the
//! processes NVML lists.

use crate::accounting::{Gap, GpuAccount};
use crate::layers::Layers;
use crate::sample::{DeviceMemory, GpuSample};

/// One device a finding about memory use can be raised on.
pub(super) struct Judged<'a> {
    pub(crate) uuid: &'a str,
    pub(crate) memory: Option<&'a DeviceMemory>,
    pub(crate) layers: &'a Result<Layers, Gap>,
    /// Whether NVML listed the processes of every member.
    pub(crate) known: bool,
    /// The devices whose processes it holds: the GPU itself, or a GPU instance's compute
    /// instances.
    pub(crate) members: Vec<&'a str>,
    /// A MIG GPU's own figures, which repeat its instances': what its memory holds is judged
    /// there.
    pub(crate) repeats_instances: bool,
}

/// The GPU first, then its GPU instances in the order of their first compute instance.
pub(super) fn judged<'a>(gpu: &'a GpuSample, account: &'a GpuAccount) -> Vec<Judged<'a>> {
    let mut devices = vec![Judged {
        uuid: gpu.uuid.as_str(),
        memory: gpu.memory.as_ref(),
        layers: &account.layers,
        known: gpu.processes_known,
        members: vec![gpu.uuid.as_str()],
        repeats_instances: !gpu.mig.is_empty(),
    }];
    for (i, (m, m_account)) in gpu.mig.iter().zip(&account.mig).enumerate() {
        if !m_account.leads(i) {
            continue;
        }
        let members = m_account
            .gpu_instance_members
            .iter()
            .filter_map(|&j| gpu.mig.get(j).map(|c| c.uuid.as_str()))
            .collect();
        let known = m_account
            .gpu_instance_members
            .iter()
            .all(|&j| gpu.mig.get(j).is_some_and(|c| c.processes_known));
        devices.push(Judged {
            uuid: m.uuid.as_str(),
            memory: m.memory.as_ref(),
            layers: &m_account.layers,
            known,
            members,
            repeats_instances: false,
        });
    }
    devices
}

//! The GPUs of the node: counted, then opened one by one. A count or a handle that NVML
//! refuses is retried at every later poll; what it refused is said, never taken for "no GPU"
//! or "lost".

use super::query::Handle;
use super::refusal::Refusal;
use nvml_wrapper::{Device, Nvml};

/// One GPU slot of the node, by NVML index.
pub(super) struct GpuSlot {
    pub(super) index: u32,
    /// `None` until NVML gives one.
    pub(super) handle: Option<Handle>,
    /// The GPU's UUID, or a placeholder (`GPU-unreadable-<index>`) while it cannot be read.
    pub(super) uuid: String,
    pub(super) name: Option<String>,
    pub(super) pci_bus_id: Option<String>,
    /// The minor number of `/dev/nvidia<N>`, which the search for who keeps a zombie context
    /// alive needs; asked again while unknown, and said when refused.
    pub(super) minor_number: Option<u32>,
    /// Why the handle, UUID, name or PCI bus id could not be read (by `problems` key).
    pub(super) refused: Vec<(&'static str, Refusal)>,
    /// Taking the handle answered `GPU_IS_LOST`.
    pub(super) lost: bool,
}

impl GpuSlot {
    fn new(index: u32) -> Self {
        GpuSlot {
            index,
            handle: None,
            uuid: placeholder(index),
            name: None,
            pci_bus_id: None,
            minor_number: None,
            refused: Vec::new(),
            lost: false,
        }
    }

    /// Takes the handle if it is not taken yet, and reads what of the identity is still
    /// missing (a refused UUID, name or bus id is asked again at every poll).
    fn open(&mut self, nvml: &Nvml) {
        self.refused.clear();
        let handle = match self.handle {
            Some(handle) => handle,
            None => match nvml.device_by_index(self.index) {
                // SAFETY: the handle stays valid while `nvml` lives, and both live in the
                // source.
                Ok(device) => Handle(unsafe { device.handle() }),
                Err(e) => {
                    let refusal = Refusal::of("nvmlDeviceGetHandleByIndex_v2", e);
                    self.lost = refusal.is_lost();
                    if !self.lost {
                        self.refused.push(("handle", refusal));
                    }
                    return;
                }
            },
        };
        self.handle = Some(handle);
        self.lost = false;
        // SAFETY: a handle of this library, which `nvml` keeps loaded.
        let device = unsafe { Device::new(handle.0, nvml) };
        // A `GPU_IS_LOST` here is said too: where the readings that follow answer, the GPU
        // is shown, and what it would not say is not taken for what it does not have.
        let mut note = |key: &'static str, refusal: Refusal| {
            if !refusal.is_not_supported() {
                self.refused.push((key, refusal));
            }
        };
        if self.uuid == placeholder(self.index) {
            match device.uuid() {
                Ok(uuid) => self.uuid = uuid,
                Err(e) => note("uuid", Refusal::of("nvmlDeviceGetUUID", e)),
            }
        }
        if self.name.is_none() {
            match device.name() {
                Ok(name) => self.name = Some(name),
                Err(e) => note("name", Refusal::of("nvmlDeviceGetName", e)),
            }
        }
        if self.minor_number.is_none() {
            match device.minor_number() {
                Ok(minor) => self.minor_number = Some(minor),
                Err(e) => note("minor_number", Refusal::of("nvmlDeviceGetMinorNumber", e)),
            }
        }
        if self.pci_bus_id.is_none() {
            match device.pci_info() {
                Ok(pci) => self.pci_bus_id = Some(pci.bus_id),
                Err(e) => note("pci_bus_id", Refusal::of("nvmlDeviceGetPciInfo_v3", e)),
            }
        }
    }
}

/// What stands for a GPU's UUID while NVML will not give it.
pub(super) fn placeholder(index: u32) -> String {
    format!("GPU-unreadable-{index}")
}

/// The node's GPUs, as far as NVML has let them be known.
#[derive(Default)]
pub(super) struct Gpus {
    /// `None` until `nvmlDeviceGetCount` answers.
    slots: Option<Vec<GpuSlot>>,
    /// Why the count failed at the last try.
    pub(super) count_refused: Option<Refusal>,
}

impl Gpus {
    /// Counts the GPUs if not counted yet, and takes every handle not taken yet.
    pub(super) fn refresh(&mut self, nvml: &Nvml) {
        if self.slots.is_none() {
            match nvml.device_count() {
                Ok(count) => {
                    self.slots = Some((0..count).map(GpuSlot::new).collect());
                    self.count_refused = None;
                }
                Err(e) => self.count_refused = Some(Refusal::of("nvmlDeviceGetCount_v2", e)),
            }
        }
        for slot in self.slots.iter_mut().flatten() {
            slot.open(nvml);
        }
    }

    pub(super) fn slots(&self) -> &[GpuSlot] {
        self.slots.as_deref().unwrap_or_default()
    }
}

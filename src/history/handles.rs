//! Series found once and written at every sample: a [`Handle`] is a series' place in the
//! history, and [`Handles`] keeps those of each device and process a sample lists from one
//! sample to the next, so that their series are found by their names only when one is new
//! at its place in the samples (or a series of it was let go), not at every sample.

use super::{KeyRef, Metric};
use crate::layers::Layer;
use crate::sample::ProcessSample;
use std::num::NonZeroU64;

/// A series' place in the history, and which series held it when the handle was got: a
/// series let go (its place since held by another, or by none) is not found through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Handle {
    pub(super) place: usize,
    /// Never 0, so that `Option<Handle>`, nine to a process, is 16 bytes, not 24.
    pub(super) serial: NonZeroU64,
}

/// The series a process's sample writes: NVML's used, SM utilisation, the allocator's
/// six figures (allocated, reserved, inactive split, peak allocated, retries, OOMs) and
/// the bytes outside its pool, in that order.
pub(crate) const PROCESS_SERIES: usize = 9;

/// Where a process's series of `metric` is among its [`PROCESS_SERIES`], if it has one.
fn process_series(metric: Metric) -> Option<usize> {
    Some(match metric {
        Metric::Used => 0,
        Metric::Sm => 1,
        Metric::Allocated => 2,
        Metric::Reserved => 3,
        Metric::InactiveSplit => 4,
        Metric::PeakAllocated => 5,
        Metric::Retries => 6,
        Metric::Ooms => 7,
        Metric::OutsidePool => 8,
        Metric::Layer(_) => return None,
    })
}

/// The series a device's sample writes: its occupied bytes, then each layer in the order
/// of [`Layer::ALL`] at `1 + layer as usize` (free, the total less the occupied, has none).
pub(crate) const DEVICE_SERIES: usize = 1 + Layer::ALL.len();

/// The handles of the device last listed at one place of the samples (a GPU, then each of
/// its MIG instances).
#[derive(Debug, Clone, Default)]
struct DeviceHandles {
    uuid: String,
    series: [Option<Handle>; DEVICE_SERIES],
}

/// The series only a fed process writes: the allocator's six and the bytes outside its
/// pool, the last of [`PROCESS_SERIES`].
const FED_SERIES: usize = PROCESS_SERIES - 2;

/// The handles of the process last listed at one place of the samples.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProcessHandles {
    pid: u32,
    start_time: Option<u64>,
    /// The sample's own, shared.
    device_uuid: std::sync::Arc<str>,
    /// The handles of NVML's used and SM utilisation, once got: every process's.
    pub(crate) used: Option<Handle>,
    pub(crate) sm: Option<Handle>,
    /// Those of the series only a fed process writes ([`FED_SERIES`]), made at its first:
    /// a node of thousands of processes without feeds keeps a pointer for each, not 112
    /// bytes ([`ProcessHandles::fed`]).
    fed: Option<Box<[Option<Handle>; FED_SERIES]>>,
}

impl ProcessHandles {
    /// The handles of the series only a fed process writes, in the order of
    /// [`PROCESS_SERIES`] (allocated, reserved, inactive split, peak allocated, retries,
    /// OOMs, outside the pool).
    pub(crate) fn fed(&mut self) -> &mut [Option<Handle>; FED_SERIES] {
        self.fed.get_or_insert_with(Box::default)
    }

    /// The handle of the series of `metric`, where a process has one.
    #[cfg(test)]
    pub(crate) fn slot(&mut self, metric: Metric) -> Option<&mut Option<Handle>> {
        match process_series(metric)? {
            0 => Some(&mut self.used),
            1 => Some(&mut self.sm),
            i => self.fed().get_mut(i - 2),
        }
    }

    /// The handle held for the series of `metric`, if one was got.
    fn get(&self, metric: Metric) -> Option<Handle> {
        match process_series(metric)? {
            0 => self.used,
            1 => self.sm,
            i => *self.fed.as_ref()?.get(i - 2)?,
        }
    }
}

/// The handles of each process the samples list, by its place in the list: the same
/// process is almost always at the same place from one sample to the next.
#[derive(Debug, Clone, Default)]
pub(crate) struct Handles {
    places: Vec<ProcessHandles>,
    devices: Vec<DeviceHandles>,
}

impl Handles {
    /// The handles of `process`, listed at `place`: those got at that place before if the
    /// same process (PID, start time and device) was there, otherwise none yet.
    pub(crate) fn of(&mut self, place: usize, process: &ProcessSample) -> &mut ProcessHandles {
        if self.places.len() <= place {
            self.places.resize_with(place + 1, ProcessHandles::default);
        }
        let held = &mut self.places[place];
        if held.pid != process.pid
            || held.start_time != process.start_time
            || held.device_uuid != process.device_uuid
        {
            held.pid = process.pid;
            held.start_time = process.start_time;
            held.device_uuid = std::sync::Arc::clone(&process.device_uuid);
            (held.used, held.sm, held.fed) = (None, None, None);
        }
        held
    }

    /// The handle the sample last recorded got for the series `key` names, where the
    /// process it listed at `place` is `key`'s: what a reader of that sample's processes
    /// finds their series through, without a search.
    pub(crate) fn of_listed(&self, place: usize, key: KeyRef<'_>) -> Option<Handle> {
        let KeyRef::Process(pid, start_time, device_uuid, metric) = key else {
            return None;
        };
        let held = self.places.get(place)?;
        if held.pid != pid || held.start_time != start_time || *held.device_uuid != *device_uuid {
            return None;
        }
        held.get(metric)
    }

    /// Keeps the places of a sample that lists `processes`, letting go of those past it.
    pub(crate) fn listed(&mut self, processes: usize) {
        self.places.truncate(processes);
    }

    /// The handles of the device `uuid`, at `place` among the devices a sample lists:
    /// those got at that place before if the same device was there, otherwise none yet.
    pub(crate) fn device(
        &mut self,
        place: usize,
        uuid: &str,
    ) -> &mut [Option<Handle>; DEVICE_SERIES] {
        if self.devices.len() <= place {
            self.devices.resize_with(place + 1, DeviceHandles::default);
        }
        let held = &mut self.devices[place];
        if held.uuid != uuid {
            uuid.clone_into(&mut held.uuid);
            held.series = [None; DEVICE_SERIES];
        }
        &mut held.series
    }

    /// Keeps the places of a sample that lists `devices`, letting go of those past it.
    pub(crate) fn devices_listed(&mut self, devices: usize) {
        self.devices.truncate(devices);
    }
}

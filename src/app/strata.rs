//! The strata view's model: its zoom through the history's tiers, and the devices it charts.

use crate::sample::NodeSample;

/// The strata view (`v`): how much of the past it shows, and which device.
#[derive(Debug)]
pub struct StrataView {
    pub(crate) zoom: Zoom,
    /// The selected device (its position in [`strata_devices`]).
    pub(crate) device: usize,
}

impl Default for StrataView {
    fn default() -> Self {
        StrataView {
            zoom: Zoom::Minutes15,
            device: 0,
        }
    }
}

/// How much of the past the strata view shows: one zoom per tier of the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zoom {
    /// The last 15 minutes, at full resolution.
    Minutes15,
    /// The last 2 hours, from the first folded tier.
    Hours2,
    /// The last 24 hours, from the second folded tier.
    Hours24,
}

impl Zoom {
    pub(crate) const ALL: [Zoom; 3] = [Zoom::Minutes15, Zoom::Hours2, Zoom::Hours24];

    /// Seconds of the past shown.
    pub(crate) fn window_secs(self) -> f64 {
        match self {
            Zoom::Minutes15 => 900.0,
            Zoom::Hours2 => 7200.0,
            Zoom::Hours24 => 86_400.0,
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Zoom::Minutes15 => "15m",
            Zoom::Hours2 => "2h",
            Zoom::Hours24 => "24h",
        }
    }

    fn position(self) -> usize {
        Self::ALL.iter().position(|&z| z == self).unwrap_or(0)
    }

    /// A shorter window, finer (stays at 15 minutes).
    pub(crate) fn zoom_in(self) -> Zoom {
        Self::ALL[self.position().saturating_sub(1)]
    }

    /// A longer window, coarser (stays at 24 hours).
    pub(crate) fn zoom_out(self) -> Zoom {
        Self::ALL[(self.position() + 1).min(Self::ALL.len() - 1)]
    }

    /// The next zoom out, back to 15 minutes after 24 hours.
    pub(crate) fn cycle(self) -> Zoom {
        Self::ALL[(self.position() + 1) % Self::ALL.len()]
    }
}

/// One chart of the strata view: a whole GPU, or one MIG GPU instance (its compute
/// instances share its memory, so the first one stands for them all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StrataDevice {
    pub(crate) uuid: String,
    /// Index of its GPU in the sample.
    pub(crate) gpu: usize,
    /// Its MIG instance's position in the GPU's list, if it is one.
    pub(crate) mig: Option<usize>,
}

/// The devices the strata view charts, in screen order: each GPU, then its MIG instances.
pub(crate) fn strata_devices(sample: &NodeSample) -> Vec<StrataDevice> {
    let mut devices = Vec::new();
    for (gpu_index, gpu) in sample.gpus.iter().enumerate() {
        devices.push(StrataDevice {
            uuid: gpu.uuid.clone(),
            gpu: gpu_index,
            mig: None,
        });
        for group in crate::accounting::gpu_instances(&gpu.mig) {
            if let Some(&lead) = group.first() {
                devices.push(StrataDevice {
                    uuid: gpu.mig[lead].uuid.clone(),
                    gpu: gpu_index,
                    mig: Some(lead),
                });
            }
        }
    }
    devices
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zoom_goes_through_the_tiers_and_stops_at_the_ends() {
        assert_eq!(Zoom::Minutes15.zoom_out(), Zoom::Hours2);
        assert_eq!(Zoom::Hours2.zoom_out(), Zoom::Hours24);
        assert_eq!(Zoom::Hours24.zoom_out(), Zoom::Hours24);
        assert_eq!(Zoom::Hours24.zoom_in(), Zoom::Hours2);
        assert_eq!(Zoom::Minutes15.zoom_in(), Zoom::Minutes15);
        assert_eq!(Zoom::Hours24.cycle(), Zoom::Minutes15);
        assert_eq!(Zoom::Hours2.window_secs(), 7200.0);
    }

    #[test]
    fn the_demo_has_a_chart_per_gpu_and_per_mig_instance() {
        let sample = crate::source::demo::node_at(0, 600.0, 10.0);
        let devices = strata_devices(&sample);
        assert_eq!(devices.len(), 4 + 3, "{devices:?}");
        assert_eq!(devices[4].gpu, 3);
        assert_eq!(devices[4].mig, Some(0));
        assert_eq!(devices[3].mig, None);
    }
}

//! What the monitor keeps of the samples it has shown, beyond the pipeline's own state:
//! each GPU's last good reading, drawn greyed once it is lost. A replay's seek rebuilds it
//! as playback does (`replay::Model`), so it lives here, below both, and not in `app`.

use crate::accounting::Gap;
use crate::accounting::NodeAccount;
use crate::layers::Layers;
use crate::sample::{GpuSample, NodeSample};
use std::collections::HashMap;

/// The last good reading of a GPU that has since been lost, drawn greyed.
#[derive(Debug, Clone)]
pub struct LastKnown {
    pub(crate) gpu: GpuSample,
    pub(crate) layers: Result<Layers, Gap>,
    pub(crate) time: f64,
}

/// Keeps the last good reading of each GPU of a sample (with its layers) that is not lost.
pub(crate) fn remember_last_known(
    last_known: &mut HashMap<String, LastKnown>,
    sample: &NodeSample,
    account: &NodeAccount,
) {
    for (gpu, acc) in sample.gpus.iter().zip(&account.gpus) {
        if !gpu.lost {
            last_known.insert(
                gpu.uuid.clone(),
                LastKnown {
                    gpu: gpu.clone(),
                    layers: acc.layers.clone(),
                    time: sample.time,
                },
            );
        }
    }
}

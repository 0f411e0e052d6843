//! The layers memory is split into, and their fixed order, names and glyphs.

use serde::{Deserialize, Serialize};

/// One layer of the model (ARCHITECTURE.md, "Layers").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    Live,
    Fragmented,
    Cached,
    OutsidePool,
    Context,
    Unattributed,
    Other,
    Free,
}

impl Layer {
    /// Drawing order of a bar, left to right: the allocator pool, then what a fed process
    /// holds outside it, then what cannot be split, then free.
    pub const ALL: [Layer; 8] = [
        Layer::Live,
        Layer::Fragmented,
        Layer::Cached,
        Layer::OutsidePool,
        Layer::Context,
        Layer::Unattributed,
        Layer::Other,
        Layer::Free,
    ];

    /// The field name used in JSON and on screen.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Live => "live",
            Layer::Fragmented => "fragmented",
            Layer::Cached => "cached",
            Layer::OutsidePool => "outside_pool",
            Layer::Context => "context",
            Layer::Unattributed => "unattributed",
            Layer::Other => "other",
            Layer::Free => "free",
        }
    }

    /// A short label for narrow screens.
    pub fn short(self) -> &'static str {
        match self {
            Layer::Live => "live",
            Layer::Fragmented => "frag",
            Layer::Cached => "cache",
            Layer::OutsidePool => "outside",
            Layer::Context => "ctx",
            Layer::Unattributed => "unattr",
            Layer::Other => "other",
            Layer::Free => "free",
        }
    }

    /// Each layer has its own glyph, so a bar reads without colour.
    pub fn glyph(self) -> char {
        match self {
            Layer::Live => '█',
            Layer::Fragmented => '▚',
            Layer::Cached => '▒',
            Layer::OutsidePool => '≡',
            Layer::Context => '▓',
            Layer::Unattributed => '░',
            Layer::Other => '×',
            Layer::Free => '·',
        }
    }

    /// One line saying what the layer is, for the help screen (fits 80 columns).
    pub fn meaning(self) -> &'static str {
        match self {
            Layer::Live => "bytes held by live tensors",
            Layer::Fragmented => {
                "free pieces of split blocks: reusable by requests that fit, not by larger ones"
            }
            Layer::Cached => "pool bytes neither live nor fragmented: reusable cache",
            Layer::OutsidePool => "outside the allocator: NCCL, cuDNN, raw cudaMalloc",
            Layer::Context => "CUDA context of a fed process (an estimate)",
            Layer::Unattributed => "held by a visible process without a feed: not split",
            Layer::Other => "driver reservation, other PID namespaces, exited PIDs",
            Layer::Free => "free device memory",
        }
    }
}

/// The layers of one device (a GPU or a MIG instance) at one instant, in bytes.
///
/// The known layers partition the device's NVML total exactly. A `None` layer holds no bytes
/// of the partition: nothing is known of it on this device (no feed reports it), and whatever
/// it would hold is counted in the layer that contains it (`cached` for a backend that does not
/// report splits, `unattributed` or `other` for a process without a feed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layers {
    pub context: Option<u64>,
    pub outside_pool: Option<u64>,
    pub cached: Option<u64>,
    pub fragmented: Option<u64>,
    pub live: Option<u64>,
    pub unattributed: Option<u64>,
    pub other: Option<u64>,
    pub free: Option<u64>,
}

impl Layers {
    pub fn get(&self, layer: Layer) -> Option<u64> {
        match layer {
            Layer::Live => self.live,
            Layer::Fragmented => self.fragmented,
            Layer::Cached => self.cached,
            Layer::OutsidePool => self.outside_pool,
            Layer::Context => self.context,
            Layer::Unattributed => self.unattributed,
            Layer::Other => self.other,
            Layer::Free => self.free,
        }
    }

    fn slot(&mut self, layer: Layer) -> &mut Option<u64> {
        match layer {
            Layer::Live => &mut self.live,
            Layer::Fragmented => &mut self.fragmented,
            Layer::Cached => &mut self.cached,
            Layer::OutsidePool => &mut self.outside_pool,
            Layer::Context => &mut self.context,
            Layer::Unattributed => &mut self.unattributed,
            Layer::Other => &mut self.other,
            Layer::Free => &mut self.free,
        }
    }

    /// Adds `bytes` to a layer, making it known. Saturates: inputs are validated before.
    pub fn add(&mut self, layer: Layer, bytes: u64) {
        let slot = self.slot(layer);
        *slot = Some(slot.unwrap_or(0).saturating_add(bytes));
    }

    /// Adds every known layer of `other` into `self`.
    pub fn absorb(&mut self, other: &Layers) {
        for layer in Layer::ALL {
            if let Some(bytes) = other.get(layer) {
                self.add(layer, bytes);
            }
        }
    }

    /// The sum of the known layers, without overflow.
    pub fn sum(&self) -> u128 {
        Layer::ALL
            .iter()
            .filter_map(|&l| self.get(l))
            .map(u128::from)
            .sum()
    }

    /// The pool a fed process's allocator holds: live + fragmented + cached.
    pub fn reserved(&self) -> Option<u64> {
        match (self.live, self.cached) {
            (Some(live), Some(cached)) => Some(live + cached + self.fragmented.unwrap_or(0)),
            _ => None,
        }
    }

    /// Everything but free: what NVML counts as occupied on the device.
    pub fn occupied(&self) -> u64 {
        Layer::ALL
            .iter()
            .filter(|&&l| l != Layer::Free)
            .filter_map(|&l| self.get(l))
            .fold(0u64, u64::saturating_add)
    }
}

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

    /// Its spellings, from the one table.
    const fn spelling(self) -> &'static Spelling {
        &SPELLINGS[self as usize]
    }

    /// The field name used in JSON, in Prometheus labels and on screen.
    pub const fn name(self) -> &'static str {
        self.spelling().name
    }

    /// Its one short form, where width forces one (`frag`, `outside`, `unattr`): the name
    /// where it has none.
    pub const fn short(self) -> &'static str {
        match self.spelling().short {
            Some(short) => short,
            None => self.spelling().name,
        }
    }

    /// Its short form, `None` where the name is the only spelling.
    pub const fn short_form(self) -> Option<&'static str> {
        self.spelling().short
    }

    /// The head of its column (the process table, the text snapshot): [`Layer::short`] in
    /// capitals, at every width.
    pub const fn head(self) -> &'static str {
        self.spelling().head
    }

    /// What older strata wrote for it, still read by [`Layer::named`], never written.
    pub(crate) const fn former(self) -> &'static [&'static str] {
        self.spelling().former
    }

    /// Each layer has its own glyph, so a bar reads without colour.
    pub(crate) const fn glyph(self) -> char {
        self.spelling().glyph
    }

    /// The layer's glyph in ASCII mode (the theme picks between the two).
    pub(crate) const fn ascii_glyph(self) -> char {
        self.spelling().ascii_glyph
    }

    /// One line saying what the layer is, for the help screen (fits 80 columns).
    pub(crate) const fn meaning(self) -> &'static str {
        self.spelling().meaning
    }

    /// The layer a name (as [`Layer::name`] or [`Layer::short`] spells it, or as an older
    /// strata did: `cache`) names.
    pub(crate) fn named(name: &str) -> Option<Layer> {
        Layer::ALL
            .into_iter()
            .find(|l| l.name() == name || l.short() == name || l.former().contains(&name))
    }
}

/// How one layer is spelled everywhere: the one place a layer's words are written (a test,
/// `tests/integration/layer_names.rs`, fails on a layer named by a string anywhere else, and
/// `src/ui/tests_vocabulary.rs` on a screen that names one otherwise).
struct Spelling {
    /// The name: the JSON key, the Prometheus label, the legend's word. Never changes.
    name: &'static str,
    /// At most one short form, for narrow screens.
    short: Option<&'static str>,
    /// The column head: the short form (else the name) in capitals, one at every width.
    head: &'static str,
    /// Spellings older strata wrote (a climb's `cause: "cache"` in a recording), still read.
    former: &'static [&'static str],
    glyph: char,
    /// The glyph in ASCII mode: printable ASCII, one per layer.
    ascii_glyph: char,
    meaning: &'static str,
}

/// The spellings, in [`Layer::ALL`]'s order (the enum's: `Layer as usize` indexes it).
const SPELLINGS: [Spelling; 8] = [
    Spelling {
        name: "live",
        short: None,
        head: "LIVE",
        former: &[],
        glyph: '█',
        ascii_glyph: '#',
        meaning: "bytes held by live tensors",
    },
    Spelling {
        name: "fragmented",
        short: Some("frag"),
        head: "FRAG",
        former: &[],
        glyph: '▚',
        ascii_glyph: '%',
        meaning: "free pieces of split blocks: reusable by requests that fit, not by larger ones",
    },
    Spelling {
        name: "cached",
        short: None,
        head: "CACHED",
        former: &["cache"],
        glyph: '▒',
        ascii_glyph: '+',
        meaning: "pool bytes neither live nor fragmented: kept for reuse",
    },
    Spelling {
        name: "outside_pool",
        short: Some("outside"),
        head: "OUTSIDE",
        former: &[],
        glyph: '≡',
        ascii_glyph: '=',
        meaning: "outside the allocator: NCCL, cuDNN, raw cudaMalloc",
    },
    Spelling {
        name: "context",
        short: Some("ctx"),
        head: "CTX",
        former: &[],
        glyph: '▓',
        ascii_glyph: '@',
        meaning: "CUDA context of a fed process (an estimate)",
    },
    Spelling {
        name: "unattributed",
        short: Some("unattr"),
        head: "UNATTR",
        former: &[],
        glyph: '░',
        ascii_glyph: ':',
        meaning: "held by a visible process without a feed: not split",
    },
    Spelling {
        name: "other",
        short: None,
        head: "OTHER",
        former: &[],
        glyph: '×',
        ascii_glyph: 'x',
        meaning: "driver reservation, other PID namespaces, exited PIDs",
    },
    Spelling {
        name: "free",
        short: None,
        head: "FREE",
        former: &[],
        glyph: '·',
        ascii_glyph: '.',
        meaning: "free device memory",
    },
];

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
    pub(crate) fn add(&mut self, layer: Layer, bytes: u64) {
        let slot = self.slot(layer);
        *slot = Some(slot.unwrap_or(0).saturating_add(bytes));
    }

    /// Adds every known layer of `other` into `self`.
    pub(crate) fn absorb(&mut self, other: &Layers) {
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
    pub(crate) fn reserved(&self) -> Option<u64> {
        match (self.live, self.cached) {
            (Some(live), Some(cached)) => Some(live + cached + self.fragmented.unwrap_or(0)),
            _ => None,
        }
    }

    /// Everything but free: what NVML counts as occupied on the device.
    pub(crate) fn occupied(&self) -> u64 {
        Layer::ALL
            .iter()
            .filter(|&&l| l != Layer::Free)
            .filter_map(|&l| self.get(l))
            .fold(0u64, u64::saturating_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_layer_is_spelled_by_its_own_row_and_its_json_key_is_its_name() {
        let mut layers = Layers::default();
        for (i, layer) in Layer::ALL.into_iter().enumerate() {
            assert_eq!(layer as usize, i, "ALL is the enum's order");
            // serde's name of the variant is the table's.
            assert_eq!(
                serde_json::to_value(layer).ok(),
                Some(serde_json::Value::from(layer.name()))
            );
            assert_eq!(Layer::named(layer.name()), Some(layer));
            assert_eq!(Layer::named(layer.short()), Some(layer));
            // One head at every width: the short form (else the name) in capitals.
            assert_eq!(layer.head(), layer.short().to_uppercase());
            assert_ne!(
                layer.short_form(),
                Some(layer.name()),
                "a short form is shorter"
            );
            layers.add(layer, i as u64);
        }
        // The struct's fields are the layers' names, each holding its own layer.
        let json = serde_json::to_value(layers).expect("json");
        let object = json.as_object().expect("an object");
        assert_eq!(object.len(), Layer::ALL.len());
        for (i, layer) in Layer::ALL.into_iter().enumerate() {
            assert_eq!(object.get(layer.name()), Some(&serde_json::Value::from(i)));
        }
        let glyphs: std::collections::HashSet<char> =
            Layer::ALL.into_iter().map(Layer::glyph).collect();
        assert_eq!(glyphs.len(), Layer::ALL.len(), "a glyph each");
        let ascii: std::collections::HashSet<char> =
            Layer::ALL.into_iter().map(Layer::ascii_glyph).collect();
        assert_eq!(ascii.len(), Layer::ALL.len(), "an ASCII glyph each");
        assert!(
            ascii.iter().all(|c| c.is_ascii_graphic()),
            "printable, not blank: {ascii:?}"
        );
    }

    #[test]
    fn spellings_of_older_strata_are_still_read_but_never_written() {
        // A recording's climb said `cause: "cache"`.
        assert_eq!(Layer::named("cache"), Some(Layer::Cached));
        assert_eq!(Layer::named("CACHE"), None, "names are lower case");
        for layer in Layer::ALL {
            for former in layer.spelling().former {
                assert_ne!(layer.short(), *former);
                assert_ne!(layer.name(), *former);
            }
        }
        assert_eq!(Layer::Cached.short(), "cached");
        assert_eq!(Layer::Context.head(), "CTX");
    }
}

//! What the writer and the reader of format 2 both remember from one sample to the next: per
//! thing (the node, each GPU and MIG instance, each process, each feed and its devices) the
//! part that rarely changes, as it was last said, and a slot for each moving number.
//!
//! The rarely changing part of a thing is the thing itself with its moving numbers taken
//! out ([`node_rest`], [`gpu_rest`], [`process_rest`], [`feed_rest`]): a field added to the
//! schema lands there, and is recorded, without a change here.
//!
//! A GPU's moving vitals (temperature, power draw, SM clock) have columns of their own since
//! layout 2.1 ([`GpuLayout`]); a record of layout 2.0 carries them in the GPU's rest.

use super::slots::{FloatSlot, IntSlot};
use crate::sample::feed::{AllocatorStats, FeedCounters, FeedRecord, OomReport};
use crate::sample::{GpuSample, NodeSample, ProcessSample};
use std::collections::BTreeMap;

/// The columns: one per moving field.
pub(crate) mod col {
    pub(crate) const TIME: usize = 0;
    pub(crate) const POLL: usize = 1;
    pub(crate) const HOST_CPU: usize = 2;
    pub(crate) const HOST_TOTAL: usize = 3;
    pub(crate) const HOST_USED: usize = 4;
    pub(crate) const MEM_TOTAL: usize = 5;
    pub(crate) const MEM_USED: usize = 6;
    pub(crate) const MEM_FREE: usize = 7;
    pub(crate) const MEM_RESERVED: usize = 8;
    pub(crate) const GPU_UTIL: usize = 9;
    pub(crate) const PROC_USED: usize = 10;
    pub(crate) const PROC_SM: usize = 11;
    pub(crate) const PROC_CPU: usize = 12;
    pub(crate) const PROC_HOST_MEMORY: usize = 13;
    pub(crate) const PROC_ELAPSED: usize = 14;
    /// The nine feed counters, in [`super::counters`]' order.
    pub(crate) const COUNTERS: usize = 15;
    pub(crate) const LAST_HEARD: usize = 24;
    /// The allocator's statistics, in [`super::StatsSlots`]' order.
    pub(crate) const STATS: usize = 25;
    pub(crate) const STATS_FIELDS: usize = 23;
    /// The columns of layout 2.0: a record of it has no more in its table.
    pub(crate) const COUNT_2_0: usize = STATS + STATS_FIELDS;
    /// A GPU's moving vitals (layout 2.1, [`super::GpuLayout::Vitals`]).
    pub(crate) const GPU_TEMPERATURE: usize = COUNT_2_0;
    pub(crate) const GPU_POWER: usize = COUNT_2_0 + 1;
    pub(crate) const GPU_SM_CLOCK: usize = COUNT_2_0 + 2;
    pub(crate) const COUNT: usize = COUNT_2_0 + 3;
}

/// How a GPU's record is laid out, said by its first control byte with whether its rest
/// follows (RECORDING.md, "A GPU's vitals"): `0` or `1` (layout 2.0: the rest holds the
/// vitals), `2` or `3` (layout 2.1: the moving vitals in columns after `utilization_gpu`);
/// the low bit says the rest follows. A reader of layout 2.0 refuses `2` and `3` as flags it
/// does not know, so it never takes a record of 2.1 for one of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GpuLayout {
    /// Every field but the memory and utilisation in the rest.
    Rest,
    /// Temperature, power draw and SM clock in columns, not in the rest.
    Vitals,
}

impl GpuLayout {
    /// The control byte of a GPU in this layout whose rest does (or does not) follow.
    pub(crate) fn byte(self, rest_follows: bool) -> u8 {
        let base = match self {
            GpuLayout::Rest => 0,
            GpuLayout::Vitals => 2,
        };
        base | u8::from(rest_follows)
    }

    /// The layout and whether the rest follows, of a GPU's control byte; `None` for a byte
    /// no layout this build knows writes.
    pub(crate) fn of_byte(byte: u8) -> Option<(GpuLayout, bool)> {
        let layout = match byte >> 1 {
            0 => GpuLayout::Rest,
            1 => GpuLayout::Vitals,
            _ => return None,
        };
        Some((layout, byte & 1 == 1))
    }
}

/// A GPU's moving vitals: temperature, power draw, SM clock.
#[derive(Debug, Clone, Default)]
pub(crate) struct VitalSlots {
    pub(crate) temperature: IntSlot,
    pub(crate) power: IntSlot,
    pub(crate) sm_clock: IntSlot,
}

/// A device's memory figures.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemSlots {
    pub(crate) total: IntSlot,
    pub(crate) used: IntSlot,
    pub(crate) free: IntSlot,
    pub(crate) driver_reserved: IntSlot,
}

#[derive(Debug, Clone)]
pub(crate) struct GpuState {
    pub(crate) rest: GpuSample,
    pub(crate) memory: MemSlots,
    pub(crate) utilization: IntSlot,
    pub(crate) vitals: VitalSlots,
    pub(crate) mig: Vec<MemSlots>,
}

#[derive(Debug, Clone)]
pub(crate) struct ProcState {
    pub(crate) rest: ProcessSample,
    pub(crate) used: IntSlot,
    pub(crate) sm_util: IntSlot,
    pub(crate) cpu_percent: FloatSlot,
    pub(crate) host_memory: IntSlot,
    pub(crate) elapsed: IntSlot,
}

/// One device of a feed: its readings, one after the other, through the same slots.
#[derive(Debug, Clone, Default)]
pub(crate) struct StatsSlots {
    pub(crate) ints: [IntSlot; STATS_INTS],
    pub(crate) floats: [FloatSlot; 3],
    pub(crate) unreported: BTreeMap<String, String>,
    /// Each reading's time in the last sample that had a reading at that place, counted
    /// back from the latest (0), as its offset in bits from that sample's time: the first
    /// [`PLACES`] places.
    pub(crate) places: [Option<u64>; PLACES],
}

/// The places of a feed device's readings remembered (see [`StatsSlots::places`]): the
/// latest and the readings just before it (an agent sampling up to 8 times a node sample).
pub(crate) const PLACES: usize = 8;

impl StatsSlots {
    /// The offset remembered at `place` (see [`StatsSlots::places`]).
    pub(crate) fn place(&self, place: usize) -> Option<u64> {
        self.places.get(place).copied().flatten()
    }

    /// Remembers the reading at `place` (its time, and the sample's).
    pub(crate) fn remember_place(&mut self, place: usize, time: f64, sample_time: f64) {
        if let Some(at) = self.places.get_mut(place) {
            *at = Some(time.to_bits().wrapping_sub(sample_time.to_bits()));
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct FeedState {
    pub(crate) rest: FeedRecord,
    pub(crate) ooms: Vec<OomReport>,
    pub(crate) counters: [IntSlot; 9],
    pub(crate) last_heard: FloatSlot,
    pub(crate) devices: Vec<StatsSlots>,
}

/// Everything remembered.
#[derive(Debug, Clone, Default)]
pub(crate) struct State {
    pub(crate) rest: Option<NodeSample>,
    pub(crate) time: FloatSlot,
    pub(crate) poll: FloatSlot,
    pub(crate) host_cpu: FloatSlot,
    pub(crate) host_total: IntSlot,
    pub(crate) host_used: IntSlot,
    /// Boxed, as are the processes and feeds: every sample moves each thing's state to
    /// its new place, and a pointer moves cheaper than the state.
    #[allow(clippy::vec_box)]
    pub(crate) gpus: Vec<Box<GpuState>>,
    #[allow(clippy::vec_box)]
    pub(crate) processes: Vec<Box<ProcState>>,
    #[allow(clippy::vec_box)]
    pub(crate) feeds: Vec<Box<FeedState>>,
}

impl GpuState {
    pub(crate) fn new(rest: GpuSample) -> Self {
        GpuState {
            mig: vec![MemSlots::default(); rest.mig.len()],
            rest,
            memory: MemSlots::default(),
            utilization: IntSlot::default(),
            vitals: VitalSlots::default(),
        }
    }
}

impl ProcState {
    pub(crate) fn new(rest: ProcessSample) -> Self {
        ProcState {
            rest,
            used: IntSlot::default(),
            sm_util: IntSlot::default(),
            cpu_percent: FloatSlot::default(),
            host_memory: IntSlot::default(),
            elapsed: IntSlot::default(),
        }
    }
}

impl FeedState {
    pub(crate) fn new(rest: FeedRecord) -> Self {
        FeedState {
            rest,
            ooms: Vec::new(),
            counters: Default::default(),
            last_heard: FloatSlot::default(),
            devices: Vec::new(),
        }
    }
}

/// The node with its moving numbers and its things taken out.
pub(crate) fn node_rest(s: &NodeSample) -> NodeSample {
    let NodeSample {
        time: _,
        interval,
        host,
        demo,
        driver_version,
        cuda_driver_version,
        host_pid_namespace,
        gpus: _,
        processes: _,
        feeds: _,
        host_cpu_percent: _,
        host_memory: _,
        device_files,
        poll_secs: _,
        problems,
        feed_scan,
    } = s;
    NodeSample {
        time: 0.0,
        interval: *interval,
        host: host.clone(),
        demo: *demo,
        driver_version: driver_version.clone(),
        cuda_driver_version: cuda_driver_version.clone(),
        host_pid_namespace: *host_pid_namespace,
        gpus: Vec::new(),
        processes: Vec::new(),
        feeds: Vec::new(),
        host_cpu_percent: None,
        host_memory: None,
        device_files: device_files.clone(),
        poll_secs: None,
        problems: problems.clone(),
        feed_scan: feed_scan.clone(),
    }
}

/// A GPU without its memory figures, its utilisation, its moving vitals and its instances'
/// memory (as layout 2.1 writes it: the limits `power_limit_mw` and `sm_clock_max_mhz`,
/// which stand still, stay).
pub(crate) fn gpu_rest(g: &GpuSample) -> GpuSample {
    let mut rest = g.clone();
    rest.memory = None;
    rest.utilization_gpu = None;
    rest.temperature = None;
    rest.power_mw = None;
    rest.sm_clock_mhz = None;
    for m in &mut rest.mig {
        m.memory = None;
    }
    rest
}

/// A process without its moving figures (and without the feed matched to it, which is
/// derived).
pub(crate) fn process_rest(p: &ProcessSample) -> ProcessSample {
    let mut rest = p.clone();
    rest.used = None;
    rest.sm_util = None;
    rest.cpu_percent = None;
    rest.host_memory = None;
    rest.elapsed = None;
    rest.feed = None;
    rest
}

/// A feed without its readings, OOM reports, counters and last word. Its segment map and
/// sites stay in the rest: they change once a minute at most.
pub(crate) fn feed_rest(f: &FeedRecord) -> FeedRecord {
    let FeedRecord {
        socket,
        found_via,
        peer,
        nspid,
        state,
        hello,
        devices: _,
        ooms: _,
        counters: _,
        connected_at,
        last_heard: _,
        segments,
        sites,
    } = f;
    FeedRecord {
        socket: socket.clone(),
        found_via: *found_via,
        peer: *peer,
        nspid: *nspid,
        state: state.clone(),
        hello: hello.clone(),
        devices: Vec::new(),
        ooms: Vec::new(),
        counters: FeedCounters::default(),
        connected_at: *connected_at,
        last_heard: None,
        segments: segments.clone(),
        sites: sites.clone(),
    }
}

/// The nine counters of a feed, in column order.
pub(crate) fn counters(c: &FeedCounters) -> [u64; 9] {
    let FeedCounters {
        lines,
        samples,
        oversized,
        malformed,
        unknown_version,
        unknown_type,
        invalid,
        rate_limited,
        floods,
    } = *c;
    [
        lines,
        samples,
        oversized,
        malformed,
        unknown_version,
        unknown_type,
        invalid,
        rate_limited,
        floods,
    ]
}

pub(crate) fn counters_from(v: [u64; 9]) -> FeedCounters {
    let [lines, samples, oversized, malformed, unknown_version, unknown_type, invalid, rate_limited, floods] =
        v;
    FeedCounters {
        lines,
        samples,
        oversized,
        malformed,
        unknown_version,
        unknown_type,
        invalid,
        rate_limited,
        floods,
    }
}

/// The integer statistics of a reading, in column order (from [`col::STATS`]), and its
/// floats: `time`, `largest_free_block_time`, `reserved_since`. `active` is written as its
/// excess over `allocated`, `requested` as its shortfall (each follows `allocated` closely).
pub(crate) fn stats_fields(s: &AllocatorStats) -> ([Option<u64>; STATS_INTS], [Option<f64>; 3]) {
    let AllocatorStats {
        index,
        seq,
        time,
        allocated,
        reserved,
        active,
        inactive_split,
        requested,
        peak_allocated,
        peak_reserved,
        peak_active,
        peak_inactive_split,
        peak_requested,
        alloc_retries,
        ooms,
        device_allocs,
        device_frees,
        largest_free_block,
        largest_free_block_time,
        limit,
        reserved_since,
        unreported: _,
        step,
        at_step_end,
    } = s;
    (
        [
            Some(u64::from(*index)),
            Some(*seq),
            Some(*allocated),
            *reserved,
            active.map(|a| a.wrapping_sub(*allocated)),
            *inactive_split,
            requested.map(|r| allocated.wrapping_sub(r)),
            *peak_allocated,
            *peak_reserved,
            *peak_active,
            *peak_inactive_split,
            *peak_requested,
            *alloc_retries,
            *ooms,
            *device_allocs,
            *device_frees,
            *largest_free_block,
            *limit,
            *step,
            Some(u64::from(*at_step_end)),
        ],
        [Some(*time), *largest_free_block_time, *reserved_since],
    )
}

/// The peak columns (from [`col::STATS`]) and the columns of the figures they are the peaks
/// of, in [`stats_fields`]' order.
pub(crate) const PEAKS: [(usize, usize); 5] = [(7, 2), (8, 3), (9, 4), (10, 5), (11, 6)];

/// The figures said against a reference figure of the same reading, read before them
/// (`IntSlot::put_ratio`), in [`stats_fields`]' order: `inactive_split` against `active`'s
/// excess, `requested`'s shortfall against `allocated`.
pub(crate) const RATIOS: [(usize, usize); 2] = [(5, 4), (6, 2)];

/// The integer statistics of a reading; its three floats' columns follow theirs.
pub(crate) const STATS_INTS: usize = 20;

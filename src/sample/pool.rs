//! Inside the pool: the segment map of an allocator snapshot and the allocation sites of a
//! recorded window, as an agent sends them (`segments` and `sites` messages,
//! assets/python/PROTOCOL.md) or as strata reduces a PyTorch snapshot file itself
//! (`strata analyze FILE.pickle`). Both reductions produce these same structures, so every
//! view draws them one way.
//!
//! Raw fields: bytes and unix seconds; text from the job (sites) is bounded by whoever made
//! it and sanitised by whoever draws it.

use serde::{Deserialize, Serialize};

/// Most segments a device's map carries as strips.
pub const MAX_STRIPS: usize = 32;
/// Most runs in one strip; past it, the rest are one `Mixed` run.
pub const MAX_RUNS: usize = 64;
/// Most sites a device's list carries, live or growth.
pub const MAX_SITES: usize = 50;
/// Longest FILE of a site, in characters: a longer one has its start cut to `...`.
pub const MAX_SITE_CHARS: usize = 256;
/// Longest FUNCTION of a site, in characters.
pub const MAX_FUNCTION_CHARS: usize = 128;
/// Longest whole site (`FILE:LINE in FUNCTION`), in characters: what a reader keeps.
pub const MAX_SITE_TEXT_CHARS: usize = MAX_SITE_CHARS + MAX_FUNCTION_CHARS + 32;

/// A segment is pinned when live blocks hold something of it and its free part is at least
/// this share of it (`free * PINNED_FREE_DEN >= size * PINNED_FREE_NUM`): a long-lived
/// tensor in the middle of a segment that is otherwise free, which the allocator cannot
/// release.
pub const PINNED_FREE_NUM: u64 = 3;
pub const PINNED_FREE_DEN: u64 = 4;

/// The state of a stretch of a segment, in a strip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RunState {
    /// Live blocks (`active_allocated`).
    #[serde(rename = "l")]
    Live,
    /// Freed by the job, waiting on a stream (`active_pending_free`).
    #[serde(rename = "p")]
    Pending,
    /// Free cached blocks (`inactive`).
    #[serde(rename = "f")]
    Free,
    /// The strip's tail past [`MAX_RUNS`] runs, of more than one state.
    #[serde(rename = "m")]
    Mixed,
}

/// Free blocks whose size is at least `at_least` (a power of two) and under twice that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreeBucket {
    pub at_least: u64,
    pub blocks: u64,
    pub bytes: u64,
}

/// Segments pinned by a small share of live bytes ([`PINNED_FREE_NUM`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pinned {
    pub segments: u64,
    /// Their size in all.
    pub reserved: u64,
    /// Their live bytes in all.
    pub live: u64,
}

/// One pool of one device: the allocator's `large` or `small` segments, expandable or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolMap {
    /// `large` or `small` (the snapshot's `segment_type`).
    pub pool: String,
    pub expandable: bool,
    pub segments: u64,
    /// The segments' sizes in all: the pool's reserved bytes.
    pub reserved: u64,
    pub live: u64,
    pub pending_free: u64,
    pub free: u64,
    /// The largest free block, 0 when there is none.
    pub largest_free: u64,
    /// Free blocks by size, smallest bucket first; empty buckets left out.
    #[serde(default)]
    pub free_blocks: Vec<FreeBucket>,
    #[serde(default)]
    pub pinned: Pinned,
}

/// One segment drawn as a strip: its blocks in address order, merged into runs of a state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentStrip {
    pub pool: String,
    pub expandable: bool,
    pub size: u64,
    pub live: u64,
    pub free: u64,
    pub largest_free: u64,
    pub pinned: bool,
    /// (bytes, state), in address order; they add up to `size`.
    pub runs: Vec<(u64, RunState)>,
}

/// The segment map of one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSegments {
    /// The framework's device index.
    pub index: u32,
    pub pools: Vec<PoolMap>,
    /// At most [`MAX_STRIPS`]: pinned segments first (most free first), then the largest.
    #[serde(default)]
    pub strips: Vec<SegmentStrip>,
    /// Segments in the device's map that are not among `strips`.
    #[serde(default)]
    pub strips_left_out: u64,
}

impl DeviceSegments {
    /// The largest free block over every pool, 0 when none is free.
    pub fn largest_free(&self) -> u64 {
        self.pools.iter().map(|p| p.largest_free).max().unwrap_or(0)
    }

    /// Pinned segments over every pool.
    pub fn pinned(&self) -> Pinned {
        self.pools.iter().fold(Pinned::default(), |a, p| Pinned {
            segments: a.segments + p.pinned.segments,
            reserved: a.reserved + p.pinned.reserved,
            live: a.live + p.pinned.live,
        })
    }

    /// Reserved bytes over every pool.
    pub fn reserved(&self) -> u64 {
        self.pools.iter().map(|p| p.reserved).sum()
    }
}

/// A segment map, as of one allocator snapshot (a `segments` message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentsReport {
    /// When the snapshot was taken (unix seconds).
    pub time: f64,
    /// How long the snapshot call took, seconds, where known.
    #[serde(default)]
    pub took: Option<f64>,
    pub devices: Vec<DeviceSegments>,
}

/// Live bytes held by one allocation site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteLive {
    /// `FILE:LINE in FUNCTION`: the innermost frame in the job's own code.
    pub site: String,
    /// Up to two callers of it in the job's own code, innermost first.
    #[serde(default)]
    pub via: Vec<String>,
    pub bytes: u64,
    pub count: u64,
}

/// What one site allocated over the window and did not free.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteGrowth {
    pub site: String,
    #[serde(default)]
    pub via: Vec<String>,
    /// Bytes allocated in the window and still live at its end.
    pub bytes: u64,
    /// Allocations in the window, and how many of those were freed in it.
    pub allocs: u64,
    pub frees: u64,
}

/// The sites of one device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSites {
    pub index: u32,
    /// Largest first, at most [`MAX_SITES`].
    #[serde(default)]
    pub live: Vec<SiteLive>,
    /// Every live block's bytes and count, also those of sites left out of `live`.
    pub live_bytes: u64,
    pub live_blocks: u64,
    /// Live bytes whose block has no frames (allocated before recording began).
    #[serde(default)]
    pub live_unattributed: u64,
    /// Largest growth first, at most [`MAX_SITES`]; only sites that grew.
    #[serde(default)]
    pub growth: Vec<SiteGrowth>,
    /// Bytes allocated in the window and live at its end, over every site.
    #[serde(default)]
    pub growth_bytes: u64,
}

/// What a window cost the job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SitesCost {
    /// CPU seconds of the reduction.
    #[serde(default)]
    pub cpu: Option<f64>,
    /// The longest the reduction held the GIL at once, seconds.
    #[serde(default)]
    pub gil_max: Option<f64>,
    /// The snapshot call (one hold of the GIL, which cannot be sliced), seconds.
    #[serde(default)]
    pub snapshot: Option<f64>,
}

/// Where a sites window stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SitesState {
    /// Recording; the summary follows when it ends.
    Running,
    Done,
    /// Not started: `reason` says why (another window runs, the torch lacks the calls...).
    Refused,
    /// Started and could not finish: `reason` says why.
    Failed,
}

/// A sites window and its summary (a `sites` message), or a file's sites.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SitesReport {
    pub time: f64,
    /// The request's id (0 for a window the agent started itself, or a file).
    #[serde(default)]
    pub id: u64,
    pub state: SitesState,
    #[serde(default)]
    pub reason: Option<String>,
    /// When recording began.
    #[serde(default)]
    pub started: Option<f64>,
    /// The length asked for, seconds.
    #[serde(default)]
    pub seconds: Option<f64>,
    /// The length the summary covers, seconds (shorter when cut by the job's exit).
    #[serde(default)]
    pub window: Option<f64>,
    /// Who recorded the history: `agent` (for this window) or `job` (its own, left as it was).
    #[serde(default)]
    pub history: Option<String>,
    /// Trace entries read.
    #[serde(default)]
    pub entries: Option<u64>,
    /// Allocations and frees the allocator counted in the window that the ring no longer
    /// held (it was full), where known.
    #[serde(default)]
    pub dropped: Option<u64>,
    #[serde(default)]
    pub cost: SitesCost,
    /// Why the reduction stopped early (its CPU budget), and what the summary covers then.
    #[serde(default)]
    pub stopped: Option<String>,
    #[serde(default)]
    pub devices: Vec<DeviceSites>,
}

impl SitesReport {
    /// The site that grew most on any device: (device index, its growth).
    pub fn grew_most(&self) -> Option<(u32, &SiteGrowth)> {
        self.devices
            .iter()
            .flat_map(|d| d.growth.iter().map(move |g| (d.index, g)))
            .max_by_key(|(_, g)| g.bytes)
            .filter(|(_, g)| g.bytes > 0)
    }
}

//! The evidence of findings from history: climbs, pressure, OOMs, usage, forecasts, warm-ups.

use super::units::{
    Bytes, BytesPerSec, BytesPerStep, Count, Field, Figure, IfKnown, MibPerMin, Pct, PerMin, Secs,
    Share, SignedBytes, Steps, Time,
};
use serde::{Deserialize, Serialize};

evidence! {
    /// A series rising steadily: which, how fast, since when, from where to where.
    pub struct Climb {
        /// Its pace per training step, where the process reports steps.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) bytes_per_step: IfKnown<BytesPerStep>,
        /// The layer that grows: `live`, `cache`, `outside_pool`, `unattributed`,
        /// `no_process`.
        pub(crate) cause: String,
        pub(crate) duration_secs: Secs,
        pub(crate) from_bytes: Bytes,
        /// The allocation site that grew most over the process's latest sites window
        /// (`strata sites`, `w`) that overlaps the climb: `train.py:118 in evaluate`.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) grew_most_at: IfKnown<String>,
        /// What it allocated in that window and still held at its end.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) grew_most_bytes: IfKnown<Bytes>,
        /// The window's length.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) grew_most_window_secs: IfKnown<Secs>,
        pub rate_mib_per_min: MibPerMin,
        /// The series that climbs: `allocated`, `reserved`, `used`...
        pub(crate) series: String,
        pub(crate) start: Time,
        /// The steps `bytes_per_step` spans.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) steps: IfKnown<Steps>,
        pub(crate) to_bytes: Bytes,
        /// How the warm-up's end was told, where it ended: `not_seen`, `knee`,
        /// `steady_past_300s`.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) warm_up_end: IfKnown<String>,
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) warm_up_end_step: IfKnown<Steps>,
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) warm_up_end_time: IfKnown<Time>,
        /// The window the rate was read over.
        pub(crate) window_secs: Secs,
    }

    /// Free split pieces large and growing as a share of the pool.
    pub struct Fragmentation {
        /// Whether the job runs with `expandable_segments` (the agent's allocator settings),
        /// where it says.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) expandable_segments: IfKnown<bool>,
        /// `torch`, `jax`, `cupy`: whose allocator it is.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) framework: IfKnown<String>,
        pub(crate) grown_bytes: Option<Bytes>,
        pub(crate) growth_window_secs: Secs,
        pub(crate) inactive_split_bytes: Bytes,
        pub(crate) largest_free_block: Option<Bytes>,
        /// Segments held by a small share of live bytes (three quarters or more free), in
        /// the agent's latest segment map: their count, size and live bytes, and when.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) pinned_live: IfKnown<Bytes>,
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) pinned_reserved: IfKnown<Bytes>,
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) pinned_segments: IfKnown<Count>,
        /// `growing`, `sitting`, `retries`.
        pub(crate) reason: Vec<String>,
        pub(crate) reserved_bytes: Bytes,
        pub(crate) retries_in_window: Option<Count>,
        /// When the agent took the snapshot the pinned figures come from.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) segment_map_time: IfKnown<Time>,
        pub(crate) share: Share,
        pub(crate) share_before: Option<Share>,
        pub(crate) share_floor: Option<Share>,
        pub(crate) window_secs: Secs,
    }

    /// The allocator's retries rising.
    pub struct Retries {
        pub(crate) rate_per_min: PerMin,
        pub(crate) retries_in_window: Count,
        pub(crate) retries_total: Count,
        pub(crate) window_secs: Secs,
    }

    /// An out-of-memory error: its class, the report's figures, the allocator's.
    pub struct Oom {
        pub(crate) allocated: Bytes,
        /// `capacity`, `fragmentation` or `uncertain`.
        pub(crate) class: String,
        pub(crate) could_have_bytes: Option<Bytes>,
        pub(crate) device_free: Option<Bytes>,
        pub(crate) device_total: Option<Bytes>,
        /// Whether the job runs with `expandable_segments`, where its agent says.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) expandable_segments: IfKnown<bool>,
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) framework: IfKnown<String>,
        pub(crate) inactive_split: Option<Bytes>,
        pub(crate) largest_free_block: Option<Bytes>,
        pub(crate) needed_bytes: Option<Bytes>,
        pub(crate) ooms_in_window: Option<Count>,
        pub(crate) ooms_total: Option<Count>,
        /// Segments pinned by a small share of live bytes in the agent's latest segment map
        /// (see [`Fragmentation`]).
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) pinned_live: IfKnown<Bytes>,
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) pinned_reserved: IfKnown<Bytes>,
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) pinned_segments: IfKnown<Count>,
        pub(crate) requested: Option<Bytes>,
        pub(crate) reserved: Option<Bytes>,
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub(crate) segment_map_time: IfKnown<Time>,
        /// When the agent reported it.
        pub(crate) time: Option<Time>,
    }

    /// Live tensors' peak near what they can have.
    pub struct Capacity {
        pub(crate) holdable: Bytes,
        pub(crate) peak_live: Bytes,
        pub(crate) total: Bytes,
        pub(crate) window_secs: Secs,
    }

    /// A process holding memory with its SMs idle.
    pub struct Idle {
        pub(crate) idle_secs: Secs,
        pub(crate) sm_mean_pct: Pct,
        pub(crate) sm_peak_limit_pct: Pct,
        pub(crate) sm_peak_pct: Pct,
        pub(crate) sm_threshold_pct: Pct,
        pub(crate) used: Bytes,
        pub(crate) window_secs: Secs,
    }

    /// A climb that will run out of memory: when, and from what.
    pub struct Forecast {
        pub(crate) available_bytes: Bytes,
        pub(crate) bytes_per_step: Option<BytesPerStep>,
        pub(crate) cause: String,
        pub(crate) device_free_bytes: Bytes,
        pub(crate) eta_secs: Secs,
        pub(crate) eta_step: Option<Steps>,
        pub(crate) level_bytes: Bytes,
        /// `allocator` (its own peak counter) or `sampled`.
        pub(crate) level_source: String,
        pub(crate) limit_bytes: Bytes,
        pub(crate) oom_at: Time,
        pub(crate) peak_window_secs: Secs,
        pub(crate) rate_bytes_per_sec: BytesPerSec,
        pub(crate) series: String,
        pub(crate) start: Time,
    }

    /// A warm-up's verdict from its headroom, once its step-end memory and peak have held.
    pub struct WarmUpVerdict {
        /// Below zero where the peak no longer fits.
        pub(crate) headroom_bytes: SignedBytes,
        pub(crate) held_secs: Secs,
        pub(crate) held_steps: Steps,
        pub(crate) peak_live_bytes: Bytes,
        pub(crate) peak_window_secs: Secs,
        pub(crate) spread_bytes: Bytes,
        pub(crate) steps: Steps,
        pub(crate) usable_bytes: Bytes,
        pub(crate) verdict: Verdict,
    }

    /// A warm-up's verdict from its forecast: it will not fit.
    pub struct WarmUpForecast {
        pub(crate) eta_secs: Option<Secs>,
        pub(crate) eta_step: Option<Steps>,
        pub(crate) oom_at: Option<Time>,
        pub(crate) steps: Steps,
        pub(crate) verdict: Verdict,
    }

    /// A job still warming up.
    pub struct Warming {
        pub(crate) allocated: Bytes,
        pub(crate) bytes_per_step: BytesPerStep,
        pub(crate) steps: Steps,
        pub(crate) verdict: Verdict,
        pub(crate) warming_secs: Secs,
    }
}

/// What a warm-up comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Verdict {
    Fits,
    WillNotFit,
    WarmingUp,
}

impl Verdict {
    /// Its name in the JSON.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Verdict::Fits => "fits",
            Verdict::WillNotFit => "will_not_fit",
            Verdict::WarmingUp => "warming_up",
        }
    }
}

impl Field for Verdict {
    fn figure(&self) -> Option<Figure<'_>> {
        Some(Figure::Text(self.name()))
    }
}

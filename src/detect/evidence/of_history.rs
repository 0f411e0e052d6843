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
        pub bytes_per_step: IfKnown<BytesPerStep>,
        /// The layer that grows: `live`, `cache`, `outside_pool`, `unattributed`,
        /// `no_process`.
        pub cause: String,
        pub duration_secs: Secs,
        pub from_bytes: Bytes,
        pub rate_mib_per_min: MibPerMin,
        /// The series that climbs: `allocated`, `reserved`, `used`...
        pub series: String,
        pub start: Time,
        /// The steps `bytes_per_step` spans.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub steps: IfKnown<Steps>,
        pub to_bytes: Bytes,
        /// How the warm-up's end was told, where it ended: `not_seen`, `knee`,
        /// `steady_past_300s`.
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub warm_up_end: IfKnown<String>,
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub warm_up_end_step: IfKnown<Steps>,
        #[serde(default, skip_serializing_if = "IfKnown::is_none")]
        pub warm_up_end_time: IfKnown<Time>,
        /// The window the rate was read over.
        pub window_secs: Secs,
    }

    /// Free split pieces large and growing as a share of the pool.
    pub struct Fragmentation {
        pub grown_bytes: Option<Bytes>,
        pub growth_window_secs: Secs,
        pub inactive_split_bytes: Bytes,
        pub largest_free_block: Option<Bytes>,
        /// `growing`, `sitting`, `retries`.
        pub reason: Vec<String>,
        pub reserved_bytes: Bytes,
        pub retries_in_window: Option<Count>,
        pub share: Share,
        pub share_before: Option<Share>,
        pub share_floor: Option<Share>,
        pub window_secs: Secs,
    }

    /// The allocator's retries rising.
    pub struct Retries {
        pub rate_per_min: PerMin,
        pub retries_in_window: Count,
        pub retries_total: Count,
        pub window_secs: Secs,
    }

    /// An out-of-memory error: its class, the report's figures, the allocator's.
    pub struct Oom {
        pub allocated: Bytes,
        /// `capacity`, `fragmentation` or `uncertain`.
        pub class: String,
        pub could_have_bytes: Option<Bytes>,
        pub device_free: Option<Bytes>,
        pub device_total: Option<Bytes>,
        pub inactive_split: Option<Bytes>,
        pub largest_free_block: Option<Bytes>,
        pub needed_bytes: Option<Bytes>,
        pub ooms_in_window: Option<Count>,
        pub ooms_total: Option<Count>,
        pub requested: Option<Bytes>,
        pub reserved: Option<Bytes>,
        /// When the agent reported it.
        pub time: Option<Time>,
    }

    /// Live tensors' peak near what they can have.
    pub struct Capacity {
        pub holdable: Bytes,
        pub peak_live: Bytes,
        pub total: Bytes,
        pub window_secs: Secs,
    }

    /// A process holding memory with its SMs idle.
    pub struct Idle {
        pub idle_secs: Secs,
        pub sm_mean_pct: Pct,
        pub sm_peak_limit_pct: Pct,
        pub sm_peak_pct: Pct,
        pub sm_threshold_pct: Pct,
        pub used: Bytes,
        pub window_secs: Secs,
    }

    /// A climb that will run out of memory: when, and from what.
    pub struct Forecast {
        pub available_bytes: Bytes,
        pub bytes_per_step: Option<BytesPerStep>,
        pub cause: String,
        pub device_free_bytes: Bytes,
        pub eta_secs: Secs,
        pub eta_step: Option<Steps>,
        pub level_bytes: Bytes,
        /// `allocator` (its own peak counter) or `sampled`.
        pub level_source: String,
        pub limit_bytes: Bytes,
        pub oom_at: Time,
        pub peak_window_secs: Secs,
        pub rate_bytes_per_sec: BytesPerSec,
        pub series: String,
        pub start: Time,
    }

    /// A warm-up's verdict from its headroom, once its step-end memory and peak have held.
    pub struct WarmUpVerdict {
        /// Below zero where the peak no longer fits.
        pub headroom_bytes: SignedBytes,
        pub held_secs: Secs,
        pub held_steps: Steps,
        pub peak_live_bytes: Bytes,
        pub peak_window_secs: Secs,
        pub spread_bytes: Bytes,
        pub steps: Steps,
        pub usable_bytes: Bytes,
        pub verdict: Verdict,
    }

    /// A warm-up's verdict from its forecast: it will not fit.
    pub struct WarmUpForecast {
        pub eta_secs: Option<Secs>,
        pub eta_step: Option<Steps>,
        pub oom_at: Option<Time>,
        pub steps: Steps,
        pub verdict: Verdict,
    }

    /// A job still warming up.
    pub struct Warming {
        pub allocated: Bytes,
        pub bytes_per_step: BytesPerStep,
        pub steps: Steps,
        pub verdict: Verdict,
        pub warming_secs: Secs,
    }
}

/// What a warm-up comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Fits,
    WillNotFit,
    WarmingUp,
}

impl Verdict {
    /// Its name in the JSON.
    pub fn name(self) -> &'static str {
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

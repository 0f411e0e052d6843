//! Sources of raw node samples. Real NVML and the demo node implement [`Source`] (and
//! [`fed`] adds the allocator feeds to any of them), so everything downstream is tested
//! without a GPU; so does the replay of a recording (`replay::source`), which hands the
//! monitor its samples and its seeks by a path of its own.

pub mod demand;
pub mod demo;
pub mod fed;
pub(crate) mod holders;
pub(crate) mod host;
pub(crate) mod liveness;
pub mod nvml;
pub mod owner;
pub(crate) mod procfs;

use crate::sample::NodeSample;
use std::time::{Duration, Instant};

/// Why a source could not start or sample.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("the NVIDIA driver library was not found ({detail})")]
    LibraryNotFound { detail: String },
    #[error("NVML could not start: {detail}")]
    Init { detail: String },
    #[error("sampling failed: {detail}")]
    Sample { detail: String },
}

impl SourceError {
    /// What the user can try, printed after the error.
    pub fn hint(&self) -> &'static str {
        match self {
            SourceError::LibraryNotFound { .. } => {
                "run `strata --demo` for the built-in demo node, or name the library with --nvml-lib PATH (or STRATA_NVML_LIB)"
            }
            SourceError::Init { .. } => {
                "check the driver with `nvidia-smi`, choose another library with --nvml-lib PATH, or run `strata --demo`"
            }
            SourceError::Sample { .. } => "strata keeps trying at every interval; if it persists, check `nvidia-smi`",
        }
    }
}

/// Something that observes a node.
pub trait Source: Send {
    /// Takes one sample of the node now. Failures of single queries are recorded as `None`
    /// fields or `lost` GPUs inside the sample, not returned here.
    fn sample(&mut self) -> Result<NodeSample, SourceError>;

    /// Samples from before the first [`Source::sample`], oldest first, where the source has
    /// any (the demo's story so far; a recording). A live source has none.
    fn backlog(&mut self) -> Vec<NodeSample> {
        Vec::new()
    }

    /// A short description for the header: `demo`, `nvml`.
    fn label(&self) -> String;

    /// From now on, reads the figures of the processes `demand` names (a source that reads
    /// every process anyway ignores it).
    fn set_demand(&mut self, _demand: demand::Demand) {}
}

/// Sampling at a fixed rate, as the monitor, `record` and `serve` do: each sample is due one
/// interval after the one before, or at once when a slow poll made it late (no burst of
/// samples to catch up).
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    due: Instant,
    interval: Duration,
}

impl Schedule {
    /// The first sample is due at `first`.
    pub(crate) fn new(first: Instant, interval: Duration) -> Schedule {
        Schedule {
            due: first,
            interval,
        }
    }

    /// When the next sample is due.
    pub(crate) fn due(&self) -> Instant {
        self.due
    }

    /// Moves on to the next sample: one interval later, or now if that has passed.
    pub(crate) fn advance(&mut self) {
        self.due = (self.due + self.interval).max(Instant::now());
    }

    /// Moves on, then sleeps until the next sample is due.
    pub(crate) fn sleep_until_next(&mut self) {
        self.advance();
        std::thread::sleep(self.due.saturating_duration_since(Instant::now()));
    }
}

/// Makes room, before any thread starts, for the descriptors a sampling source keeps (see
/// `procfs::reserve_descriptors`): the monitor, `serve`, `record` and `snapshot` call it first.
pub fn reserve_descriptors() {
    procfs::reserve_descriptors();
}

#[cfg(test)]
mod schedule_tests {
    use super::Schedule;
    use std::time::{Duration, Instant};

    #[test]
    fn a_sample_is_due_an_interval_on_or_now_when_late() {
        let second = Duration::from_secs(1);
        let start = Instant::now();
        let mut on_time = Schedule::new(start, second);
        on_time.advance();
        assert_eq!(on_time.due(), start + second);
        on_time.advance();
        assert_eq!(on_time.due(), start + 2 * second);
        // A poll that took 10 intervals: the next is due now, not ten at once.
        let mut late = Schedule::new(start - 10 * second, second);
        late.advance();
        let now = Instant::now();
        assert!(late.due() >= start && late.due() <= now, "{late:?}");
    }
}

//! The words strata names things by: a framework's own names for its allocator's
//! statistics, the peak a headroom is read against, and a process's STATE.

use crate::accounting::FeedStatus;
use crate::sample::ProcessSample;
use crate::units;

/// The framework's own names for the statistics a feed carries.
pub(crate) struct MetricNames {
    pub(crate) allocated: &'static str,
    pub(crate) reserved: &'static str,
    pub(crate) inactive_split: &'static str,
    pub(crate) peak_allocated: &'static str,
    pub(crate) peak_reserved: &'static str,
    pub(crate) retries: &'static str,
    pub(crate) ooms: &'static str,
}

pub(crate) fn metric_names(framework: &str) -> MetricNames {
    match framework {
        "torch" => MetricNames {
            allocated: "allocated_bytes.all.current",
            reserved: "reserved_bytes.all.current",
            inactive_split: "inactive_split_bytes.all.current",
            peak_allocated: "allocated_bytes.all.peak",
            peak_reserved: "reserved_bytes.all.peak",
            retries: "num_alloc_retries",
            ooms: "num_ooms",
        },
        "jax" => MetricNames {
            allocated: "bytes_in_use",
            reserved: "pool_bytes",
            inactive_split: "(not reported)",
            peak_allocated: "peak_bytes_in_use",
            peak_reserved: "peak_pool_bytes",
            retries: "(not reported)",
            ooms: "num_ooms",
        },
        "cupy" => MetricNames {
            allocated: "MemoryPool.used_bytes()",
            reserved: "MemoryPool.total_bytes()",
            inactive_split: "(not reported)",
            peak_allocated: "peak used_bytes",
            peak_reserved: "peak total_bytes",
            retries: "(not reported)",
            ooms: "OutOfMemoryError count",
        },
        _ => MetricNames {
            allocated: "allocated",
            reserved: "reserved",
            inactive_split: "inactive_split",
            peak_allocated: "peak_allocated",
            peak_reserved: "peak_reserved",
            retries: "alloc_retries",
            ooms: "ooms",
        },
    }
}

/// Which peak a headroom is read against.
pub(crate) fn peak_words(room: &crate::detect::Headroom) -> String {
    match room.peak_source {
        "allocator" => "the allocator's peak, since the process started or reset it".into(),
        _ => format!(
            "the highest strata read over the last {}",
            units::duration(room.peak_window_secs)
        ),
    }
}

/// The STATE column: process state and feed state, e.g. `R fed`, `S nofeed`; or, for a PID
/// `/proc` does not show: `gone` (exited), `hidden` (`hidepid`), `foreign` (another PID
/// namespace).
pub(crate) fn state_label(
    process: &ProcessSample,
    feed: &FeedStatus,
    host_namespace: Option<bool>,
) -> String {
    let proc_state = match (process.visible, process.proc_state.as_deref()) {
        (false, _) if process.hidden => return "hidden".into(),
        (false, _) if host_namespace == Some(true) => return "gone".into(),
        (false, _) => return "foreign".into(),
        (true, Some("Z")) => return "zombie".into(),
        (true, Some(s)) => s.to_string(),
        (true, None) => "?".into(),
    };
    format!("{proc_state} {}", feed.label())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PID /proc does not show is `gone` only in the host's PID namespace; hidden by `hidepid`
    /// it is `hidden`, and in a container's namespace `foreign`.
    #[test]
    fn a_pid_proc_does_not_show_is_named_for_why() {
        let mut p = crate::fixtures::process(9, "GPU-test-0", Some(1 << 30));
        p.visible = false;
        assert_eq!(state_label(&p, &FeedStatus::Absent, Some(true)), "gone");
        assert_eq!(state_label(&p, &FeedStatus::Absent, Some(false)), "foreign");
        p.hidden = true;
        assert_eq!(state_label(&p, &FeedStatus::Absent, Some(true)), "hidden");
    }
}

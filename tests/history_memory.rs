//! What the history really allocates, counted by a global allocator: a process that came and
//! went costs in proportion to how long it lived, and the history's own count of its bytes
//! (which its budget is kept by) is close to what the allocator has handed out.

// Tests may panic: `unwrap` and `expect` say which of a test's assumptions failed, in its
// helpers too (clippy.toml allows them only in `#[test]` functions and `#[cfg(test)]` code).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use strata::history::{History, Metric, SeriesKey};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to `System` as it is; only the sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const UUID: &str = "GPU-5f3c2a1e-8b7d-4c6e-9a10-2d4f6b8e0c31";

/// Heap bytes a history holds after `processes` processes, one starting each second and
/// each living `life` seconds with NVML's used and SM series, each moving at every sample
/// or (`still`) holding one value; and its own count.
fn held_after(processes: u64, life: u64, still: bool) -> (usize, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    let mut h = History::default();
    for t in 0..processes + life {
        h.begin(t as f64, 1.0);
        h.record(
            SeriesKey::device(UUID, Metric::Used),
            t as f64,
            Some(1 << 30),
        );
        for n in t.saturating_sub(life - 1)..=t.min(processes - 1) {
            let pid = n as u32 + 100;
            for metric in [Metric::Used, Metric::Sm] {
                let key = SeriesKey::process(pid, Some(n), UUID, metric);
                let moved = if still { 0 } else { t - n };
                h.record(key, t as f64, Some((300 << 20) + (moved << 10)));
            }
        }
    }
    let held = LIVE.load(Ordering::Relaxed) - before;
    let counted = h.footprint();
    drop(h);
    (held, counted)
}

#[test]
fn a_process_costs_in_proportion_to_its_life_and_the_count_is_honest() {
    // Within the samples before any is forgotten: every process is still held.
    let (brief, brief_counted) = held_after(400, 2, false);
    let (longer, longer_counted) = held_after(400, 200, false);
    let (still, still_counted) = held_after(400, 200, true);
    let per_brief = brief / 400;
    let per_longer = longer / 400;
    let per_still = still / 400;
    assert!(per_brief < 1500, "{per_brief} bytes a process of 2 s");
    // 200 s: about 1.6 KB more in raw slots and 20 folded points for each of two series.
    assert!(
        per_longer > per_brief + 1600 && per_longer < per_brief + 4000,
        "{per_longer} bytes a process of 200 s, {per_brief} of 2 s"
    );
    // Held still, its raw slots are one block of 64 and an echo of the rest: the 20
    // folded points are most of what it adds.
    assert!(
        per_still + 600 < per_longer,
        "{per_still} bytes a still process of 200 s, {per_longer} a moving one"
    );
    for (held, counted) in [
        (brief, brief_counted),
        (longer, longer_counted),
        (still, still_counted),
    ] {
        let ratio = counted as f64 / held as f64;
        assert!(
            (0.9..=1.1).contains(&ratio),
            "counted {counted} for {held} allocated"
        );
    }
}

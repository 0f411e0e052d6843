//! The order of the monitor's process table, kept still (below `app`, which shows it, and
//! `replay`, whose seek rebuilds it as playback does): rows are ordered by a settled value, not the
//! instant's, so two processes whose memory saw-tooths past each other do not swap rows every
//! second.
//!
//! Per row and sort key the settled value is the peak of its last [`WINDOW`] samples (a
//! saw-tooth's peak holds still; a rise shows at once), and it moves only when that peak
//! departs from it by more than [`HYSTERESIS`] (or a small absolute step). Rows are then
//! sorted strictly by it, unknown values last, ties by pid: a total order, the same at every
//! redraw.

use crate::accounting::NodeAccount;
use crate::accounting::ProcessLayers;
use crate::layers::Layer;
use crate::sample::{NodeSample, ProcessSample};

/// What the process table is ordered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Used,
    Live,
    Fragmented,
    Cached,
    /// Per-process SM utilization.
    Sm,
    /// Host CPU.
    Cpu,
    /// Host memory (resident).
    HostMemory,
    /// Time since the process started.
    Elapsed,
    Pid,
    Device,
}

impl SortKey {
    pub(crate) const CYCLE: [SortKey; 10] = [
        SortKey::Used,
        SortKey::Live,
        SortKey::Fragmented,
        SortKey::Cached,
        SortKey::Sm,
        SortKey::Cpu,
        SortKey::HostMemory,
        SortKey::Elapsed,
        SortKey::Pid,
        SortKey::Device,
    ];

    pub(crate) fn next(self) -> SortKey {
        let i = Self::CYCLE.iter().position(|&k| k == self).unwrap_or(0);
        Self::CYCLE[(i + 1) % Self::CYCLE.len()]
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            SortKey::Used => "used",
            SortKey::Live => Layer::Live.name(),
            SortKey::Fragmented => Layer::Fragmented.name(),
            SortKey::Cached => Layer::Cached.name(),
            SortKey::Sm => "sm",
            SortKey::Cpu => "cpu",
            SortKey::HostMemory => "host mem",
            SortKey::Elapsed => "time",
            SortKey::Pid => "pid",
            SortKey::Device => "gpu",
        }
    }

    /// Whether the key, not reversed, puts the largest first: every amount does; pids and
    /// GPUs go up.
    pub(crate) fn descending(self) -> bool {
        !matches!(self, SortKey::Pid | SortKey::Device)
    }
}

/// The arrow beside a sort key: `▼` largest first, `▲` smallest first.
pub(crate) fn sort_arrow(key: SortKey, reversed: bool) -> &'static str {
    if key.descending() != reversed {
        "▼"
    } else {
        "▲"
    }
}

/// Samples whose peak a row is ordered by.
pub(crate) const WINDOW: usize = 10;
/// How far (relative) a row's peak must move from its settled value before the row moves.
pub(crate) const HYSTERESIS: f64 = 0.05;

/// The numeric keys every process has a value of (or may have), in the order of
/// [`Tracks::every`].
const EVERY: [SortKey; 5] = [
    SortKey::Used,
    SortKey::Sm,
    SortKey::Cpu,
    SortKey::HostMemory,
    SortKey::Elapsed,
];

/// The keys only a fed process's allocator gives, in the order of [`Tracks::fed`].
const FED: [SortKey; 3] = [SortKey::Live, SortKey::Fragmented, SortKey::Cached];

/// Below this a difference never moves a row, by key: 64 MiB, 2 points of percent, 1 s.
fn floor(key: SortKey) -> f64 {
    match key {
        SortKey::Sm | SortKey::Cpu => 2.0,
        SortKey::Elapsed => 1.0,
        _ => f64::from(64u32 << 20),
    }
}

/// One key's recent values of one row, and the value the row is ordered by.
///
/// Held in single precision: a node's thousands of rows each have a track per key, all
/// updated at every sample, so a track is 52 bytes, not 128. An order within 5 % needs no
/// more: bytes keep 24 bits (a MiB-multiple exact to 16 TiB; any figure within a 16-millionth
/// of itself), seconds are exact for 194 days.
#[derive(Debug, Clone, Copy, Default)]
struct Track {
    /// The last [`WINDOW`] values at most, a ring from `oldest`, held inline.
    recent: [f32; WINDOW],
    oldest: u8,
    len: u8,
    /// The largest value in the window, kept as values come and go: the window is read
    /// again only when the value leaving it was the largest.
    peak: Known,
    settled: Known,
}

/// A value or none, in the room of the value: NaN is none (a value is never NaN: one is
/// taken as a gap). An `Option<f32>` takes 8 bytes, and a row has sixteen.
#[derive(Debug, Clone, Copy)]
struct Known(f32);

impl Default for Known {
    fn default() -> Self {
        Known(f32::NAN)
    }
}

impl Known {
    fn of(value: Option<f32>) -> Self {
        Known(value.unwrap_or(f32::NAN))
    }

    fn get(self) -> Option<f32> {
        (!self.0.is_nan()).then_some(self.0)
    }
}

impl Track {
    /// The values in the window (the ring in two runs, no division per value).
    fn window(&self) -> impl Iterator<Item = &f32> {
        let (oldest, len) = (usize::from(self.oldest), usize::from(self.len));
        let end = oldest + len;
        let (first, second) = match end.checked_sub(WINDOW) {
            Some(wrapped) => (&self.recent[oldest..], &self.recent[..wrapped]),
            None => (&self.recent[oldest..end], &self.recent[..0]),
        };
        first.iter().chain(second)
    }

    /// The ring's next place after `at`.
    fn after(at: u8) -> u8 {
        (at + 1) % WINDOW as u8
    }

    fn push(&mut self, value: Option<f64>, key: SortKey) {
        // Single precision, see [`Track`].
        match value.map(|v| v as f32).filter(|v| !v.is_nan()) {
            Some(v) => {
                let left = if usize::from(self.len) == WINDOW {
                    let at = usize::from(self.oldest);
                    let left = self.recent[at];
                    self.recent[at] = v;
                    self.oldest = Self::after(self.oldest);
                    Some(left)
                } else {
                    self.recent[usize::from(self.oldest + self.len) % WINDOW] = v;
                    self.len += 1;
                    None
                };
                self.peak = Known::of(match (self.peak.get(), left) {
                    (Some(peak), _) if v >= peak => Some(v),
                    (None, None) => Some(v),
                    // The largest is still in the window.
                    (Some(peak), None) => Some(peak),
                    (Some(peak), Some(left)) if left < peak => Some(peak),
                    _ => self.window().copied().reduce(f32::max),
                });
            }
            // A gap: the peak comes from what is still known, until the window runs dry.
            None if self.len > 0 => {
                let left = self.recent[usize::from(self.oldest)];
                self.oldest = Self::after(self.oldest);
                self.len -= 1;
                // Unless a larger value stays, the window is read again.
                let larger_stays = self.peak.get().is_some_and(|peak| left < peak);
                if !larger_stays {
                    self.peak = Known::of(self.window().copied().reduce(f32::max));
                }
            }
            None => {}
        }
        let peak = self.peak.get();
        self.settled = Known::of(match (self.settled.get(), peak) {
            (Some(settled), Some(peak)) => {
                let (wide, peak_wide) = (f64::from(settled), f64::from(peak));
                let step = (HYSTERESIS * wide.abs()).max(floor(key));
                if (peak_wide - wide).abs() > step {
                    Some(peak)
                } else {
                    Some(settled)
                }
            }
            (_, peak) => peak,
        });
    }
}

/// A row's tracks, one per numeric key. Those of the allocator's keys are made at the first
/// value of one of them: a gap written to an empty track changes nothing, so a process
/// without a feed keeps a pointer for them, not 156 bytes.
#[derive(Debug, Clone, Default)]
struct Tracks {
    every: [Track; EVERY.len()],
    fed: Option<Box<[Track; FED.len()]>>,
}

impl Tracks {
    /// Takes in one sample's value of each key.
    fn push(&mut self, value: impl Fn(SortKey) -> Option<f64>) {
        for (track, key) in self.every.iter_mut().zip(EVERY) {
            track.push(value(key), key);
        }
        if self.fed.is_none() && FED.iter().all(|&key| value(key).is_none()) {
            return;
        }
        let fed = self.fed.get_or_insert_with(Box::default);
        for (track, key) in fed.iter_mut().zip(FED) {
            track.push(value(key), key);
        }
    }

    /// The track of a numeric key, where the row has one.
    fn get(&self, key: SortKey) -> Option<&Track> {
        if let Some(i) = EVERY.iter().position(|&k| k == key) {
            return self.every.get(i);
        }
        let i = FED.iter().position(|&k| k == key)?;
        self.fed.as_ref()?.get(i)
    }
}

/// The settled sort values of every row on screen, by device and pid.
#[derive(Debug, Default, Clone)]
pub struct SortMemory {
    /// By device (a node has a few: found by a scan, from the last one found), by pid: the
    /// tracks, and the last sample (of [`SortMemory::samples`]) that listed the row.
    rows: Vec<(String, ByPid)>,
    /// Samples taken in so far.
    samples: u64,
}

/// One device's rows, by pid (foldhash: a pid is no secret worth sip's cost). A row's tracks
/// are boxed: the table keeps up to half its slots empty, and at 4,096 rows an empty slot of
/// tracks inline (then 488 bytes) left 2 MB of the monitor's heap unused.
type ByPid = hashbrown::HashMap<u32, Box<(Tracks, u64)>>;

/// Where `uuid` is in `rows`, trying `from` first: a node lists a device's processes together.
fn device_at(rows: &[(String, ByPid)], uuid: &str, from: usize) -> Option<usize> {
    match rows.get(from) {
        Some((d, _)) if d == uuid => Some(from),
        _ => rows.iter().position(|(d, _)| d == uuid),
    }
}

/// A row's value under a numeric key, as the sample has it.
fn value(process: &ProcessSample, layers: &ProcessLayers, key: SortKey) -> Option<f64> {
    let bytes = |v: Option<u64>| v.map(|v| v as f64);
    match key {
        SortKey::Used => bytes(process.used),
        SortKey::Live => bytes(layers.live),
        SortKey::Fragmented => bytes(layers.fragmented),
        SortKey::Cached => bytes(layers.cached),
        SortKey::Sm => process.sm_util.map(f64::from),
        SortKey::Cpu => process.cpu_percent,
        SortKey::HostMemory => bytes(process.host_memory),
        SortKey::Elapsed => process.elapsed.map(|s| s as f64),
        SortKey::Pid | SortKey::Device => None,
    }
}

impl SortMemory {
    /// Takes in one sample's values; forgets rows no longer listed.
    pub(crate) fn observe(&mut self, sample: &NodeSample, account: &NodeAccount) {
        // Updated in place (a node's rows stay from sample to sample): no map is built and
        // no device name copied but for a row new to it.
        self.samples += 1;
        let now = self.samples;
        let mut at = 0;
        // Rows this sample lists, each once: when every row kept is one, none is forgotten.
        let mut listed = 0;
        for (index, process) in sample.processes.iter().enumerate() {
            at = match device_at(&self.rows, &process.device_uuid, at) {
                Some(at) => at,
                None => {
                    self.rows
                        .push((process.device_uuid.to_string(), ByPid::default()));
                    self.rows.len() - 1
                }
            };
            let Some((_, by_pid)) = self.rows.get_mut(at) else {
                continue;
            };
            let (tracks, seen) = &mut **by_pid.entry(process.pid).or_default();
            if *seen == now {
                // Listed twice on one device: the later record alone, as a new row.
                *tracks = Tracks::default();
            } else {
                listed += 1;
            }
            *seen = now;
            // Without its account (never, as the pipeline makes them), a gap in every key.
            let layers = account.processes.get(index).map(|a| &a.layers);
            tracks.push(|key| layers.and_then(|l| value(process, l, key)));
        }
        if listed
            == self
                .rows
                .iter()
                .map(|(_, by_pid)| by_pid.len())
                .sum::<usize>()
        {
            return;
        }
        for (_, by_pid) in &mut self.rows {
            by_pid.retain(|_, row| row.1 == now);
        }
        self.rows.retain(|(_, by_pid)| !by_pid.is_empty());
    }

    /// The value each row, given as (pid, device uuid), is ordered by under `key`: for rows
    /// asked one after another, each device found from the last row's.
    pub(crate) fn settled_each(&self, key: SortKey) -> impl FnMut(u32, &str) -> Option<f64> + '_ {
        let mut at = 0;
        move |pid, device_uuid| {
            at = device_at(&self.rows, device_uuid, at)?;
            let (_, by_pid) = self.rows.get(at)?;
            by_pid.get(&pid)?.0.get(key)?.settled.get().map(f64::from)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The peak kept as values come and go is the window's largest, read afresh, through
        /// any run of values (repeats, rises, falls) and gaps.
        #[test]
        fn the_kept_peak_is_the_windows_largest(
            values in proptest::collection::vec(
                proptest::option::weighted(0.8, proptest::sample::select(vec![0.0, 1.0, 2.0, 5.0, 1e9, 3e9])),
                0..60,
            )
        ) {
            let mut kept = Track::default();
            for value in values {
                kept.push(value, SortKey::Used);
                proptest::prop_assert_eq!(kept.peak.get(), kept.window().copied().reduce(f32::max));
            }
        }
    }

    fn settle(values: &[Option<f64>]) -> Vec<Option<f64>> {
        let mut track = Track::default();
        values
            .iter()
            .map(|&v| {
                track.push(v, SortKey::Used);
                track.settled.get().map(f64::from)
            })
            .collect()
    }

    const GIB: f64 = (1u64 << 30) as f64;

    /// A row's eight tracks fit in eight cache lines: a node of thousands of rows writes
    /// every one at every sample. A track is its ten values and 12 bytes: an unknown peak
    /// or settled value takes no room of its own.
    #[test]
    fn a_track_fits_a_cache_line() {
        assert!(
            std::mem::size_of::<Track>() <= 52,
            "{}",
            std::mem::size_of::<Track>()
        );
    }

    /// The allocator's tracks are made at a row's first value of one of them, and read
    /// then as tracks kept from the start would: a gap to an empty track changes nothing.
    #[test]
    fn the_allocators_tracks_are_made_at_their_first_value() {
        let live = |t: usize| (t >= 5).then(|| (1 + t % 3) as f64 * GIB);
        let mut tracks = Tracks::default();
        let mut kept = Track::default();
        for t in 0..20 {
            tracks.push(|key| match key {
                SortKey::Live => live(t),
                SortKey::Used => Some(GIB),
                _ => None,
            });
            kept.push(live(t), SortKey::Live);
            assert_eq!(tracks.fed.is_some(), t >= 5, "at {t}");
            let made = tracks.get(SortKey::Live).and_then(|t| t.settled.get());
            assert_eq!(made, kept.settled.get(), "at {t}");
        }
        assert_eq!(
            tracks.get(SortKey::Cached).map(|t| t.settled.get()),
            Some(None)
        );
        assert!(tracks.get(SortKey::Pid).is_none());
    }

    /// A value that is not a number is a gap: it never becomes the peak, and the peak and
    /// the settled value stay what the other values make them.
    #[test]
    fn a_value_that_is_no_number_is_a_gap() {
        assert_eq!(
            settle(&[Some(GIB), Some(f64::NAN), Some(GIB)]),
            settle(&[Some(GIB), None, Some(GIB)])
        );
        assert_eq!(settle(&[Some(f64::NAN)]), vec![None]);
    }

    #[test]
    fn a_saw_tooth_settles_on_its_peak_and_a_rise_shows_at_once() {
        let tooth = |i: usize| Some((20.0 + 4.0 * (i % 6) as f64 / 5.0) * GIB);
        let values: Vec<Option<f64>> = (0..30).map(tooth).collect();
        let settled = settle(&values);
        // Once a whole tooth is in the window: still, within the hysteresis of the peak.
        let still = settled[6];
        assert!(settled[6..].iter().all(|&s| s == still), "{settled:?}");
        let still = still.unwrap_or(0.0);
        assert!(
            (24.0 * GIB * (1.0 - HYSTERESIS)..=24.0 * GIB).contains(&still),
            "{settled:?}"
        );
        let mut rising = values.clone();
        rising.push(Some(40.0 * GIB));
        assert_eq!(settle(&rising).last(), Some(&Some(40.0 * GIB)));
    }

    #[test]
    fn small_moves_leave_the_settled_value_and_large_ones_move_it() {
        let s = settle(&[Some(100.0 * GIB), Some(100.0 * GIB)]);
        assert_eq!(s[1], Some(100.0 * GIB));
        // 4 % up: within the hysteresis.
        let s = settle(&[Some(100.0 * GIB), Some(104.0 * GIB)]);
        assert_eq!(s[1], Some(100.0 * GIB));
        // 6 % up: moves.
        let s = settle(&[Some(100.0 * GIB), Some(106.0 * GIB)]);
        assert_eq!(s[1], Some(106.0 * GIB));
        // Falls only once the peak has left the window, then by more than the step.
        let mut values = vec![Some(100.0 * GIB)];
        values.extend(std::iter::repeat_n(Some(50.0 * GIB), WINDOW));
        let s = settle(&values);
        assert_eq!(s[WINDOW - 1], Some(100.0 * GIB));
        assert_eq!(s[WINDOW], Some(50.0 * GIB));
        // Unknown stays unknown; a gap keeps what was known until the window runs dry.
        assert_eq!(settle(&[None]), [None]);
        assert_eq!(settle(&[Some(GIB), Some(GIB), None])[2], Some(GIB));
        assert_eq!(settle(&[Some(GIB), Some(GIB), None, None])[3], None);
    }
}

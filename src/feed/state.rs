//! What the hub holds per feed between two `collect()` calls, with its memory bounds.

use super::candidate::FeedKey;
use crate::sample::feed::{
    AllocatorStats, DeviceFeed, FeedCounters, FeedRecord, FeedState, FoundVia, Hello, OomReport,
    PeerCred,
};
use crate::sample::pool::{SegmentsReport, SitesReport};
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// How a connection ended: what the feed's state says of it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum End {
    Refused(String),
    Dropped(String),
    Closed { reason: String, bye: bool },
}

/// Refused sockets are tried again at most this often.
pub(crate) const RETRY_REFUSED: Duration = Duration::from_secs(30);
/// A feed dropped for flooding is not tried again for this long.
const RETRY_DROPPED: Duration = Duration::from_secs(60);
/// A connection that closed without `bye` while its socket is still there is tried again.
const RETRY_CLOSED: Duration = Duration::from_secs(5);
/// Closed feeds stay shown this long.
const KEEP_CLOSED: Duration = Duration::from_secs(60);
/// Samples kept per device between two collects (oldest dropped first).
const EARLIER_PER_DEVICE: usize = 2048;
/// ... per feed, all devices together.
const EARLIER_PER_FEED: usize = 8192;
/// ... over all feeds.
const EARLIER_TOTAL: usize = 131_072;
/// Devices kept per feed: as many as the agent reports.
const MAX_DEVICES_PER_FEED: usize = super::protocol::MAX_DEVICES;
/// OOM reports kept between two collects.
const MAX_PENDING_OOMS: usize = 64;

struct DeviceState {
    latest: AllocatorStats,
    /// `latest` was already handed out by a collect: it does not go to `earlier` again.
    latest_out: bool,
    earlier: VecDeque<AllocatorStats>,
}

/// One feed as the hub holds it.
pub(crate) struct Feed {
    pub(crate) socket: String,
    pub(crate) found_via: FoundVia,
    pub(crate) peer: Option<PeerCred>,
    pub(crate) nspid: Option<u32>,
    pub(crate) state: FeedState,
    /// False while the hello is awaited: not shown yet.
    pub(crate) judged: bool,
    pub(crate) hello: Option<std::sync::Arc<Hello>>,
    devices: Vec<DeviceState>,
    ooms: VecDeque<OomReport>,
    last_oom: Option<OomReport>,
    pub(crate) segments: Option<std::sync::Arc<SegmentsReport>>,
    pub(crate) sites: Option<std::sync::Arc<SitesReport>>,
    earlier: usize,
    pub(crate) counters: FeedCounters,
    pub(crate) connected_at: Option<f64>,
    pub(crate) last_heard: Option<f64>,
    /// When a refused, dropped or closed socket may be tried again; `None`: not while kept.
    pub(crate) retry_at: Option<Instant>,
    /// When a closed record is forgotten.
    pub(crate) forget_at: Option<Instant>,
    /// The scan that last saw its socket.
    pub(crate) seen: u64,
}

impl Feed {
    pub(crate) fn new(socket: String, found_via: FoundVia, seen: u64) -> Self {
        Feed {
            socket,
            found_via,
            peer: None,
            nspid: None,
            state: FeedState::Connected,
            judged: false,
            hello: None,
            devices: Vec::new(),
            ooms: VecDeque::new(),
            last_oom: None,
            segments: None,
            sites: None,
            earlier: 0,
            counters: FeedCounters::default(),
            connected_at: None,
            last_heard: None,
            retry_at: None,
            forget_at: None,
            seen,
        }
    }

    pub(crate) fn is_connected(&self) -> bool {
        matches!(self.state, FeedState::Connected)
    }

    /// The newest sample time over its devices.
    pub(crate) fn newest_time(&self) -> Option<f64> {
        self.devices.iter().map(|d| d.latest.time).reduce(f64::max)
    }

    pub(crate) fn has_devices(&self) -> bool {
        !self.devices.is_empty()
    }
}

/// All feeds, and the count of samples waiting in `earlier` over all of them.
#[derive(Default)]
pub(crate) struct Feeds {
    pub(crate) map: BTreeMap<FeedKey, Feed>,
    earlier_total: usize,
}

impl Feeds {
    pub(crate) fn insert(&mut self, key: FeedKey, feed: Feed) {
        if let Some(old) = self.map.insert(key, feed) {
            self.earlier_total -= old.earlier;
        }
    }

    pub(crate) fn remove(&mut self, key: &FeedKey) {
        if let Some(old) = self.map.remove(key) {
            self.earlier_total -= old.earlier;
        }
    }

    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Feed) -> bool) {
        let total = &mut self.earlier_total;
        self.map.retain(|_, feed| {
            let kept = keep(feed);
            if !kept {
                *total -= feed.earlier;
            }
            kept
        });
    }

    pub(crate) fn apply_sample(&mut self, key: &FeedKey, samples: Vec<AllocatorStats>) {
        let Some(feed) = self.map.get_mut(key) else {
            return;
        };
        feed.counters.samples += 1;
        for stats in samples {
            let at = match feed
                .devices
                .binary_search_by_key(&stats.index, |d| d.latest.index)
            {
                Ok(at) => at,
                Err(at) => {
                    if feed.devices.len() < MAX_DEVICES_PER_FEED {
                        let fresh = DeviceState {
                            latest: stats,
                            latest_out: false,
                            earlier: VecDeque::new(),
                        };
                        feed.devices.insert(at, fresh);
                    }
                    continue;
                }
            };
            let device = &mut feed.devices[at];
            let old = std::mem::replace(&mut device.latest, stats);
            if std::mem::replace(&mut device.latest_out, false) {
                continue;
            }
            let full = device.earlier.len() >= EARLIER_PER_DEVICE
                || feed.earlier >= EARLIER_PER_FEED
                || self.earlier_total >= EARLIER_TOTAL;
            if full {
                if device.earlier.pop_front().is_none() {
                    continue; // the room is held by other devices: this one keeps only its latest
                }
                feed.earlier -= 1;
                self.earlier_total -= 1;
            }
            device.earlier.push_back(old);
            feed.earlier += 1;
            self.earlier_total += 1;
        }
    }

    pub(crate) fn apply_oom(&mut self, key: &FeedKey, report: OomReport) {
        let Some(feed) = self.map.get_mut(key) else {
            return;
        };
        if feed.ooms.len() >= MAX_PENDING_OOMS {
            feed.ooms.pop_front();
        }
        feed.last_oom = Some(report.clone());
        feed.ooms.push_back(report);
    }

    /// Keeps the latest segment map.
    pub(crate) fn apply_segments(&mut self, key: &FeedKey, report: SegmentsReport) {
        if let Some(feed) = self.map.get_mut(key) {
            feed.segments = Some(std::sync::Arc::new(report));
        }
    }

    /// Keeps the latest word on a sites window: a newer window's, or a later state of the
    /// same one (running, then done). A backlog's older report does not replace a newer one.
    pub(crate) fn apply_sites(&mut self, key: &FeedKey, report: SitesReport) {
        if let Some(feed) = self.map.get_mut(key) {
            let older = feed.sites.as_ref().is_some_and(|s| s.time > report.time);
            if !older {
                feed.sites = Some(std::sync::Arc::new(report));
            }
        }
    }

    /// Records how a connection ended.
    pub(crate) fn finish(&mut self, key: FeedKey, end: End, now: Instant) {
        let refused = matches!(end, End::Refused(_));
        if let Some(feed) = self.map.get_mut(&key) {
            feed.judged = true;
            match end {
                End::Refused(reason) => {
                    feed.state = FeedState::Refused { reason };
                    feed.retry_at = Some(now + RETRY_REFUSED);
                }
                End::Dropped(reason) => {
                    feed.state = FeedState::Dropped { reason };
                    feed.retry_at = Some(now + RETRY_DROPPED);
                }
                End::Closed { reason, bye } => {
                    feed.state = FeedState::Closed { reason };
                    feed.forget_at = Some(now + KEEP_CLOSED);
                    feed.retry_at = (!bye).then_some(now + RETRY_CLOSED);
                }
            }
        }
        if refused {
            self.clear_data(&key);
        }
    }

    /// Nothing a refused feed sent is kept.
    pub(crate) fn clear_data(&mut self, key: &FeedKey) {
        let Some(feed) = self.map.get_mut(key) else {
            return;
        };
        self.earlier_total -= feed.earlier;
        feed.earlier = 0;
        feed.hello = None;
        feed.devices.clear();
        feed.ooms.clear();
        feed.last_oom = None;
        feed.segments = None;
        feed.sites = None;
    }

    /// The judged feeds as records, handing out what arrived since the previous call.
    pub(crate) fn collect(&mut self) -> Vec<FeedRecord> {
        let mut records = Vec::with_capacity(self.map.len());
        for feed in self.map.values_mut().filter(|f| f.judged) {
            self.earlier_total -= feed.earlier;
            feed.earlier = 0;
            let devices = feed
                .devices
                .iter_mut()
                .map(|d| {
                    d.latest_out = true;
                    DeviceFeed {
                        latest: d.latest.clone(),
                        earlier: d.earlier.drain(..).collect(),
                    }
                })
                .collect();
            let ooms = if feed.ooms.is_empty() {
                feed.last_oom.iter().cloned().collect()
            } else {
                feed.ooms.drain(..).collect()
            };
            records.push(FeedRecord {
                socket: feed.socket.clone(),
                found_via: feed.found_via,
                peer: feed.peer,
                nspid: feed.nspid,
                state: feed.state.clone(),
                hello: feed.hello.clone(),
                devices,
                ooms,
                counters: feed.counters,
                connected_at: feed.connected_at,
                last_heard: feed.last_heard,
                segments: feed.segments.clone(),
                sites: feed.sites.clone(),
            });
        }
        records
    }

    #[cfg(test)]
    pub(crate) fn earlier_total(&self) -> usize {
        self.earlier_total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(index: u32, seq: u64) -> AllocatorStats {
        AllocatorStats {
            index,
            seq,
            time: seq as f64,
            allocated: seq,
            reserved: Some(seq),
            ..Default::default()
        }
    }

    fn feeds_with_one() -> (Feeds, FeedKey) {
        let mut feeds = Feeds::default();
        let mut feed = Feed::new("/x/1.sock".into(), FoundVia::FeedDir, 0);
        feed.judged = true;
        feeds.insert((1, 1), feed);
        (feeds, (1, 1))
    }

    fn seqs(d: &DeviceFeed) -> (Vec<u64>, u64) {
        (d.earlier.iter().map(|s| s.seq).collect(), d.latest.seq)
    }

    #[test]
    fn each_sample_goes_out_once_and_latest_stays() {
        let (mut feeds, key) = feeds_with_one();
        for seq in 1..=3 {
            feeds.apply_sample(&key, vec![stats(1, seq), stats(0, seq)]);
        }
        let first = feeds.collect();
        assert_eq!(first[0].devices.len(), 2);
        assert_eq!(
            first[0].devices[0].latest.index, 0,
            "devices in index order"
        );
        assert_eq!(seqs(&first[0].devices[0]), (vec![1, 2], 3));
        let again = feeds.collect();
        assert_eq!(
            seqs(&again[0].devices[1]),
            (vec![], 3),
            "latest stays, earlier drained"
        );
        feeds.apply_sample(&key, vec![stats(0, 4)]);
        let third = feeds.collect();
        assert_eq!(
            seqs(&third[0].devices[0]),
            (vec![], 4),
            "seq 3 was handed out already"
        );
        assert_eq!(seqs(&third[0].devices[1]), (vec![], 3));
        assert_eq!(feeds.earlier_total(), 0);
    }

    #[test]
    fn earlier_is_bounded_per_device_keeping_the_newest() {
        let (mut feeds, key) = feeds_with_one();
        for seq in 0..(EARLIER_PER_DEVICE as u64 + 100) {
            feeds.apply_sample(&key, vec![stats(0, seq)]);
        }
        let records = feeds.collect();
        let (earlier, latest) = seqs(&records[0].devices[0]);
        assert_eq!(earlier.len(), EARLIER_PER_DEVICE);
        assert_eq!(latest, EARLIER_PER_DEVICE as u64 + 99);
        assert_eq!(earlier.first(), Some(&99), "oldest dropped first");
        assert_eq!(records[0].counters.samples, EARLIER_PER_DEVICE as u64 + 100);
    }

    #[test]
    fn earlier_is_bounded_per_feed() {
        let (mut feeds, key) = feeds_with_one();
        for seq in 0..(EARLIER_PER_DEVICE as u64 + 10) {
            let all: Vec<AllocatorStats> = (0..8).map(|i| stats(i, seq)).collect();
            feeds.apply_sample(&key, all);
        }
        assert!(feeds.earlier_total() <= EARLIER_PER_FEED);
        let records = feeds.collect();
        let kept: usize = records[0].devices.iter().map(|d| d.earlier.len()).sum();
        assert!(kept <= EARLIER_PER_FEED, "{kept}");
        assert_eq!(feeds.earlier_total(), 0);
    }

    #[test]
    fn devices_per_feed_are_bounded() {
        let (mut feeds, key) = feeds_with_one();
        for base in 0..4u32 {
            let batch: Vec<AllocatorStats> = (0..64).map(|i| stats(base * 64 + i, 1)).collect();
            feeds.apply_sample(&key, batch);
        }
        assert_eq!(feeds.collect()[0].devices.len(), MAX_DEVICES_PER_FEED);
    }

    #[test]
    fn ooms_since_the_last_collect_then_the_latest_one() {
        let (mut feeds, key) = feeds_with_one();
        assert!(feeds.collect()[0].ooms.is_empty());
        for seq in [5, 6] {
            feeds.apply_oom(
                &key,
                OomReport {
                    seq,
                    time: seq as f64,
                    ..Default::default()
                },
            );
        }
        let got: Vec<u64> = feeds.collect()[0].ooms.iter().map(|o| o.seq).collect();
        assert_eq!(got, vec![5, 6]);
        let got: Vec<u64> = feeds.collect()[0].ooms.iter().map(|o| o.seq).collect();
        assert_eq!(got, vec![6], "the latest always stays");
    }

    #[test]
    fn unjudged_feeds_are_not_shown_and_removal_frees_the_budget() {
        let (mut feeds, key) = feeds_with_one();
        feeds.insert((2, 2), Feed::new("/x/2.sock".into(), FoundVia::FeedDir, 0));
        for seq in 0..10 {
            feeds.apply_sample(&key, vec![stats(0, seq)]);
        }
        assert_eq!(feeds.earlier_total(), 9);
        assert_eq!(feeds.collect().len(), 1);
        for seq in 10..20 {
            feeds.apply_sample(&key, vec![stats(0, seq)]);
        }
        feeds.remove(&key);
        assert_eq!(feeds.earlier_total(), 0);
    }
}

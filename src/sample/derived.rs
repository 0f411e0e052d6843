//! Recordings of the snapshot's derived form: lines that carry each process's allocator
//! figures in `processes[].feed` (as `strata snapshot --json` shows them, matched to NVML)
//! and no raw `feeds`. Such a line means what a raw one means, with the feed records left
//! out; read as it is, every process would look unfed. Its feed records are rebuilt from the
//! figures it does carry (marked `found_via: snapshot`), so the line is analysed with its
//! allocator figures; what the derived form never held (the agent's hello beyond framework
//! and backend, the backlog, OOM reports, the feed's counters) stays unknown.

use super::feed::{DeviceFeed, FeedDevice, FeedRecord, FeedState, FoundVia, Hello};
use super::NodeSample;

/// What reading a line's feeds found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FeedShape {
    /// Raw feed records (or no feed at all): read as they are.
    #[default]
    Raw,
    /// The derived form: this many feed records rebuilt from `processes[].feed`.
    Derived(usize),
}

/// Makes a sample of the derived form raw: when it has no `feeds` but its processes carry
/// allocator figures, one feed record per pid is rebuilt from them (a device entry per
/// process entry, named by the process's NVML device). A sample with raw feeds keeps them
/// and drops the derived figures, which attaching recomputes.
pub fn make_raw(sample: &mut NodeSample) -> FeedShape {
    if !sample.feeds.is_empty() || sample.processes.iter().all(|p| p.feed.is_none()) {
        for p in &mut sample.processes {
            p.feed = None;
        }
        return FeedShape::Raw;
    }
    let mut records: Vec<FeedRecord> = Vec::new();
    for p in &mut sample.processes {
        let Some(feed) = p.feed.take() else { continue };
        let at = match records.iter().position(|r| r.pid() == Some(p.pid)) {
            Some(at) => at,
            None => {
                records.push(FeedRecord {
                    socket: String::new(),
                    found_via: FoundVia::Snapshot,
                    peer: None,
                    nspid: None,
                    state: FeedState::Connected,
                    hello: Some(
                        Hello {
                            pid: p.pid,
                            time: feed.stats.time,
                            framework: Some(feed.framework.clone()),
                            framework_version: feed.framework_version.clone(),
                            backend: Some(feed.backend.clone()),
                            ..Hello::default()
                        }
                        .into(),
                    ),
                    devices: Vec::new(),
                    ooms: Vec::new(),
                    counters: Default::default(),
                    connected_at: None,
                    last_heard: None,
                    segments: None,
                    sites: None,
                });
                records.len() - 1
            }
        };
        let record = &mut records[at];
        let index = feed.stats.index;
        if record.devices.iter().any(|d| d.latest.index == index) {
            continue;
        }
        if let Some(hello) = record.hello.as_mut().map(std::sync::Arc::make_mut) {
            hello.devices.push(FeedDevice {
                index,
                uuid: Some(p.device_uuid.to_string()),
                ..FeedDevice::default()
            });
        }
        record.devices.push(DeviceFeed {
            latest: feed.stats,
            earlier: Vec::new(),
        });
    }
    for record in &mut records {
        record.devices.sort_by_key(|d| d.latest.index);
    }
    let n = records.len();
    sample.feeds = records;
    FeedShape::Derived(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    #[test]
    fn derived_figures_become_one_record_per_pid_and_raw_feeds_win() {
        let mut s = node();
        s.gpus.push(gpu(0, memory(80 * GIB, 30 * GIB)));
        s.gpus.push(gpu(1, memory(80 * GIB, 30 * GIB)));
        for (device, index) in [("GPU-test-0", 0), ("GPU-test-1", 1)] {
            let mut p = process(7, device, Some(12 * GIB));
            let mut f = feed(5 * GIB, 10 * GIB, Some(GIB), 999.8);
            f.stats.index = index;
            p.feed = Some(Box::new(f));
            s.processes.push(p);
        }
        let mut derived = s.clone();
        assert_eq!(make_raw(&mut derived), FeedShape::Derived(1));
        let record = &derived.feeds[0];
        assert_eq!(record.pid(), Some(7));
        assert!(record.is_trusted());
        assert_eq!(record.devices.len(), 2);
        let hello = record.hello.as_ref().expect("hello");
        assert_eq!(hello.devices[1].uuid.as_deref(), Some("GPU-test-1"));
        assert!(derived.processes.iter().all(|p| p.feed.is_none()));
        // With raw feeds the derived figures are dropped, the raw ones kept.
        let mut raw = s.clone();
        raw.feeds = derived.feeds.clone();
        raw.feeds[0].found_via = FoundVia::FeedDir;
        assert_eq!(make_raw(&mut raw), FeedShape::Raw);
        assert_eq!(raw.feeds[0].found_via, FoundVia::FeedDir);
        assert!(raw.processes.iter().all(|p| p.feed.is_none()));
    }
}

//! Any source's samples, with the allocator feeds the hub holds attached as raw records.

use super::{Source, SourceError};
use crate::feed::FeedHub;
use crate::sample::NodeSample;
use std::time::Duration;

/// A source whose samples carry the feeds: the NVML source, the fake NVML, anything live.
pub struct FedSource {
    inner: Box<dyn Source>,
    hub: FeedHub,
    /// For a one-shot snapshot: how long to wait, after NVML's reading, to connect to every
    /// feed and read its hello and backlog, then for each feed to send a sample newer than the
    /// reading, so that the reading can be paired with the pool around it.
    snapshot_waits: Option<(Duration, Duration)>,
}

impl FedSource {
    /// What asks this source's agents for sites windows, from the monitor's thread.
    pub fn sites_asker(&self) -> anyhow::Result<crate::feed::HubAsker> {
        self.hub
            .asker()
            .map_err(|e| anyhow::anyhow!("cannot ask allocator feeds: {e}"))
    }

    pub fn new(inner: Box<dyn Source>, hub: FeedHub) -> Self {
        FedSource {
            inner,
            hub,
            snapshot_waits: None,
        }
    }

    /// For `snapshot`: after each NVML reading, find and read every feed (hello and backlog,
    /// the jobs NVML lists included) within `settle`, then wait up to `newer` for the feeds to
    /// send samples past the reading. NVML is read once per sample all the same.
    pub fn for_snapshot(&mut self, settle: Duration, newer: Duration) {
        self.snapshot_waits = Some((settle, newer));
    }
}

/// The processes this `/proc` names, each with its start time (which process the pid is).
fn visible_pids(sample: &NodeSample) -> Vec<(u32, Option<u64>)> {
    let mut pids: Vec<(u32, Option<u64>)> = sample
        .processes
        .iter()
        .filter(|p| p.visible)
        .map(|p| (p.pid, p.start_time))
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

impl Source for FedSource {
    fn sample(&mut self) -> Result<NodeSample, SourceError> {
        let mut sample = self.inner.sample()?;
        self.hub.watch_pids(&visible_pids(&sample));
        if let Some((settle, newer)) = self.snapshot_waits {
            self.hub.settle(settle);
            self.hub.wait_newer(sample.time, newer);
        }
        sample.feeds = self.hub.collect();
        sample.feed_scan = self.hub.scan_notes();
        Ok(sample)
    }

    fn backlog(&mut self) -> Vec<NodeSample> {
        self.inner.backlog()
    }

    fn label(&self) -> String {
        format!("{} + feeds", self.inner.label())
    }

    fn set_demand(&mut self, demand: super::demand::Demand) {
        self.inner.set_demand(demand);
    }
}

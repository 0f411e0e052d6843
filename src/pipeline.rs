//! The model's one direction of flow: raw sample → layers → history → findings.

use crate::accounting::{account, NodeAccount};
use crate::context::ContextEstimator;
use crate::detect::{detect_instant, Finding, FindingTracker};
use crate::feed::attach::{attach, Attachment};
use crate::history::{History, SeriesKey};
use crate::sample::NodeSample;

/// One instant, with everything derived from it.
#[derive(Debug, Clone)]
pub struct Observed {
    /// The raw sample, with each process's feed attached.
    pub sample: NodeSample,
    /// How the feeds matched NVML's processes, and each feed's judgement.
    pub attachment: Attachment,
    pub account: NodeAccount,
    pub findings: Vec<Finding>,
}

/// The state that carries from one sample to the next.
#[derive(Debug, Default)]
pub struct Pipeline {
    pub contexts: ContextEstimator,
    pub tracker: FindingTracker,
    pub history: History,
}

impl Pipeline {
    /// `context_bytes` fixes every context estimate (`--context-mib`) instead of learning it.
    pub fn new(context_bytes: Option<u64>) -> Self {
        Pipeline {
            contexts: context_bytes
                .map_or_else(ContextEstimator::learning, ContextEstimator::fixed),
            tracker: FindingTracker::default(),
            history: History::default(),
        }
    }

    /// Takes in one sample and returns it with its layers and findings.
    pub fn ingest(&mut self, mut sample: NodeSample) -> Observed {
        let attachment = attach(&mut sample);
        self.contexts.observe(&sample, &attachment.statuses);
        let account = account(&sample, &attachment, &self.contexts);
        let mut findings = detect_instant(&sample, &attachment, &account);
        self.tracker.stamp(&mut findings);
        self.record(&sample, &account);
        Observed {
            sample,
            attachment,
            account,
            findings,
        }
    }

    fn record(&mut self, sample: &NodeSample, account: &NodeAccount) {
        let time = sample.time;
        let history = &mut self.history;
        history.begin();
        for (gpu, acc) in sample.gpus.iter().zip(&account.gpus) {
            let mut devices = vec![(&gpu.uuid, &acc.layers)];
            devices.extend(
                gpu.mig
                    .iter()
                    .map(|m| &m.uuid)
                    .zip(acc.mig.iter().map(|m| &m.layers)),
            );
            for (uuid, layers) in devices {
                let layers = layers.as_ref().ok();
                history.record(
                    SeriesKey::DeviceUsed(uuid.clone()),
                    time,
                    layers.map(|l| l.occupied()),
                );
                history.record(
                    SeriesKey::DeviceLive(uuid.clone()),
                    time,
                    layers.and_then(|l| l.live),
                );
            }
        }
        for (p, acc) in sample.processes.iter().zip(&account.processes) {
            history.record(
                SeriesKey::ProcessUsed(p.pid, p.start_time, p.device_uuid.clone()),
                time,
                p.used,
            );
            let live = SeriesKey::ProcessLive(p.pid, p.start_time, p.device_uuid.clone());
            // A feed met for the first time brings its backlog: the warm-up before this
            // monitor started, at the monitor's own spacing.
            if let Some(feed) = &p.feed {
                if history.get(&live).is_none_or(|s| s.raw().len() == 0) {
                    let earlier = sample
                        .feeds
                        .get(feed.feed)
                        .and_then(|r| {
                            r.devices
                                .iter()
                                .find(|d| d.latest.index == feed.stats.index)
                        })
                        .map(|d| d.earlier.as_slice())
                        .unwrap_or_default();
                    let mut last = f64::NEG_INFINITY;
                    for stats in earlier {
                        if stats.time >= last + sample.interval && stats.time < time {
                            history.record(live.clone(), stats.time, Some(stats.allocated));
                            last = stats.time;
                        }
                    }
                }
            }
            history.record(live, time, acc.layers.live);
        }
    }
}

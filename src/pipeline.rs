//! The model's one direction of flow: raw sample → layers → history → findings.

use crate::accounting::{account, NodeAccount};
use crate::context::ContextEstimator;
use crate::detect::{detect_instant, settle, Finding, FindingTracker};
use crate::feed::attach::{attach, Attachment};
use crate::history::{History, SeriesKey};
use crate::layers::Layer;
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
        settle(&mut findings, sample.time);
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
            let mut devices = vec![(&gpu.uuid, &acc.layers, &acc.partial)];
            devices.extend(
                gpu.mig
                    .iter()
                    .map(|m| &m.uuid)
                    .zip(acc.mig.iter().map(|m| (&m.layers, &m.partial)))
                    .map(|(uuid, (layers, partial))| (uuid, layers, partial)),
            );
            for (uuid, layers, partial) in devices {
                let layers = layers.as_ref().ok();
                history.record(
                    SeriesKey::DeviceUsed(uuid.clone()),
                    time,
                    layers.map(|l| l.occupied()),
                );
                // Live tensors only partly known (a feed gone stale) is a gap, not a dip.
                let live = layers
                    .and_then(|l| l.live)
                    .filter(|_| !partial.contains(&Layer::Live));
                history.record(SeriesKey::DeviceLive(uuid.clone()), time, live);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::sample::feed::{DeviceFeed, FeedCounters, FeedDevice, FeedRecord, FeedState};
    use crate::sample::feed::{FoundVia, Hello, PeerCred};

    /// A monitor that meets a feed late draws the warm-up the agent kept, at its own spacing.
    #[test]
    fn a_new_feeds_backlog_goes_into_the_process_history() {
        let mut sample = node();
        sample.gpus.push(gpu(0, memory(80 * GIB, 10 * GIB)));
        sample
            .processes
            .push(process(7, "GPU-test-0", Some(10 * GIB)));
        // Warm-up every 0.5 s from 980 to 999.5: live grows by 100 MiB a step.
        let earlier = (0u32..40)
            .map(|i| {
                stats(
                    u64::from(i) * 100 * MIB,
                    8 * GIB,
                    0.0,
                    980.0 + f64::from(i) / 2.0,
                )
            })
            .collect();
        sample.feeds.push(FeedRecord {
            socket: "/tmp/strata-0/7.sock".into(),
            found_via: FoundVia::FeedDir,
            peer: Some(PeerCred {
                pid: 7,
                uid: 0,
                gid: 0,
            }),
            nspid: Some(7),
            state: FeedState::Connected,
            hello: Some(Hello {
                pid: 7,
                devices: vec![FeedDevice {
                    index: 0,
                    uuid: Some("GPU-test-0".into()),
                    ..FeedDevice::default()
                }],
                ..Hello::default()
            }),
            devices: vec![DeviceFeed {
                latest: stats(4 * GIB, 8 * GIB, 990.0, 999.8),
                earlier,
            }],
            ooms: Vec::new(),
            counters: FeedCounters::default(),
            connected_at: None,
            last_heard: None,
        });
        let mut pipeline = Pipeline::new(None);
        let observed = pipeline.ingest(sample);
        let p = &observed.sample.processes[0];
        let series = pipeline
            .history
            .get(&SeriesKey::ProcessLive(
                p.pid,
                p.start_time,
                p.device_uuid.clone(),
            ))
            .expect("series");
        let times: Vec<f64> = series.raw().map(|pt| pt.time).collect();
        assert_eq!(times.first(), Some(&980.0), "from the start of the backlog");
        assert_eq!(times.last(), Some(&1000.0), "then this instant");
        assert!(
            times.windows(2).all(|w| w[1] - w[0] >= 1.0 - 1e-9),
            "{times:?}"
        );
        assert_eq!(series.recent(1), vec![Some(4 * GIB)]);
    }
}

//! Recording from the monitor (`r`): samples are handed over as they arrive (paused or not)
//! and written on a thread of their own, so a slow disk never holds up a key.

use crate::recording::{Encoding, RecordError, RecordWriter, Summary};
use crate::sample::NodeSample;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::thread::JoinHandle;

/// What the writing thread tells the monitor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum News {
    /// Another sample is on disk: the totals so far.
    Written { samples: u64, bytes: u64 },
    /// A write failed (a full disk): the recording has stopped. One line, with a hint.
    Failed(String),
}

/// Samples that may wait for the writer in its queue.
const WAITING: usize = 64;
/// Samples held beside the queue while it is full, handed over as it empties; beyond them, a
/// sample is dropped and counted. A screen that stops drawing (a terminal that does not
/// read, the drawing thread blocked in its write) takes the samples that waited for it at
/// once, as many as the collector's channel holds (1,024): a backlog, not a slow disk, and
/// none of it is dropped.
const HELD: usize = 1024;

/// A recording in progress.
pub(crate) struct LiveRecorder {
    path: PathBuf,
    tx: Option<SyncSender<Box<NodeSample>>>,
    thread: Option<JoinHandle<Result<Summary, RecordError>>>,
    /// Samples the queue had no room for, oldest first: handed over before any later one.
    held: VecDeque<Box<NodeSample>>,
    /// Samples dropped because the writer was that far behind.
    pub(crate) dropped: u64,
}

impl LiveRecorder {
    /// Opens the recording now (a bad path fails here, before anything is recorded) and
    /// starts its writer; `news` hears of each sample written and of a failure.
    pub(crate) fn start(
        path: &Path,
        news: impl Fn(News) + Send + 'static,
    ) -> Result<LiveRecorder, RecordError> {
        let mut writer = RecordWriter::create(path, None)?;
        let (tx, rx) = mpsc::sync_channel::<Box<NodeSample>>(WAITING);
        let thread = std::thread::Builder::new()
            .name("strata-recorder".into())
            .spawn(move || {
                for sample in rx {
                    if let Err(e) = writer.write(&sample) {
                        news(News::Failed(format!("{e} (hint: {})", e.hint())));
                        return Err(e);
                    }
                    let done = writer.summary();
                    news(News::Written {
                        samples: done.samples,
                        bytes: done.bytes,
                    });
                }
                writer.finish()
            })
            .map_err(|e| RecordError::Open {
                path: path.display().to_string(),
                cause: e.to_string(),
            })?;
        Ok(LiveRecorder {
            path: path.to_path_buf(),
            tx: Some(tx),
            thread: Some(thread),
            held: VecDeque::new(),
            dropped: 0,
        })
    }

    /// Hands a sample to the writer, after those held; never waits. Where the writer's queue
    /// is full the sample is held, up to [`HELD`], and dropped beyond.
    pub(crate) fn send(&mut self, sample: &NodeSample) {
        self.hand_over();
        let Some(tx) = &self.tx else { return };
        if self.held.is_empty() {
            match tx.try_send(Box::new(sample.clone())) {
                Ok(()) => {}
                Err(TrySendError::Full(sample)) => self.held.push_back(sample),
                // The writer stopped on an error, which it has reported.
                Err(TrySendError::Disconnected(_)) => {}
            }
        } else if self.held.len() < HELD {
            self.held.push_back(Box::new(sample.clone()));
        } else {
            self.dropped += 1;
        }
    }

    /// Hands the held samples over, oldest first, as far as the writer's queue has room:
    /// called at each sample and each time the writer says it wrote one.
    pub(crate) fn hand_over(&mut self) {
        let Some(tx) = &self.tx else { return };
        while let Some(sample) = self.held.pop_front() {
            match tx.try_send(sample) {
                Ok(()) => {}
                Err(TrySendError::Full(sample)) => {
                    self.held.push_front(sample);
                    return;
                }
                Err(TrySendError::Disconnected(_)) => {
                    self.held.clear();
                    return;
                }
            }
        }
    }

    /// Writes what waits, finishes the frame and says what was written.
    pub(crate) fn stop(mut self) -> Result<Summary, RecordError> {
        self.finish()
    }

    /// Finishes the recording and says where it is and what it holds: the monitor's
    /// parting words when it quits while recording.
    pub(crate) fn parting_words(mut self) -> String {
        let dropped = self.dropped;
        let path = std::path::absolute(&self.path).unwrap_or_else(|_| self.path.clone());
        match self.finish() {
            Ok(summary) => {
                let encoding = Encoding::for_path(&self.path);
                let line = super::summary_line(&path, encoding, &summary);
                match dropped {
                    0 => format!("{line}, saved"),
                    n => format!("{line}, saved ({n} sample(s) dropped: the disk was behind)"),
                }
            }
            Err(e) => format!(
                "the recording {} could not be finished: {e} (hint: {})",
                crate::text::clean(&path.display().to_string()),
                e.hint()
            ),
        }
    }

    fn finish(&mut self) -> Result<Summary, RecordError> {
        // What is held is written before the file is finished: here waiting is the point.
        if let Some(tx) = self.tx.take() {
            for sample in self.held.drain(..) {
                if tx.send(sample).is_err() {
                    break;
                }
            }
        }
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(done)) => done,
            Some(Err(_)) => Err(RecordError::Write {
                path: self.path.display().to_string(),
                error: std::io::Error::other("the recorder's thread panicked"),
            }),
            None => Err(RecordError::Write {
                path: self.path.display().to_string(),
                error: std::io::Error::other("the recording has stopped"),
            }),
        }
    }
}

impl Drop for LiveRecorder {
    /// Quitting the monitor (or a TERM) while recording still finishes the file.
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::demo::node_at;
    use std::sync::{Arc, Mutex};

    #[test]
    fn samples_handed_over_are_written_and_reported() {
        let dir = crate::fixtures::TempDir::new("live");
        let path = dir.join("live.jsonl.zst");
        let heard = Arc::new(Mutex::new(Vec::new()));
        let log = heard.clone();
        let mut recorder = LiveRecorder::start(&path, move |n| {
            log.lock().expect("lock").push(n);
        })
        .expect("start");
        for k in 0..3 {
            recorder.send(&node_at(0, 100.0 + f64::from(k), 1.0));
        }
        let summary = recorder.stop().expect("stop");
        assert_eq!(summary.samples, 3);
        let heard = heard.lock().expect("lock");
        assert_eq!(heard.len(), 3);
        assert!(matches!(heard[2], News::Written { samples: 3, .. }));
        assert_eq!(std::fs::metadata(&path).expect("file").len(), summary.bytes);
        let err = LiveRecorder::start(&dir.join("nope/x.zst"), |_| {})
            .err()
            .expect("refused");
        assert!(
            err.to_string().contains("directory does not exist"),
            "{err}"
        );
    }

    /// A backlog taken at once (the screen blocked in its write while samples waited) is
    /// held while the writer's queue is full, and written whole, in order: none dropped.
    /// Beyond what may be held, a sample is dropped and counted.
    #[test]
    fn a_backlog_beyond_the_writers_queue_is_held_and_written_in_order() {
        let dir = crate::fixtures::TempDir::new("live-backlog");
        let path = dir.join("backlog.jsonl");
        // The writer stops after its first sample until released: a disk that waits.
        let (entered_tx, entered) = std::sync::mpsc::channel::<()>();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let gate = Mutex::new(Some((entered_tx, released)));
        let mut recorder = LiveRecorder::start(&path, move |_| {
            if let Some((entered, released)) = gate.lock().expect("lock").take() {
                let _ = entered.send(());
                let _ = released.recv();
            }
        })
        .expect("start");
        let sample = |k: usize| node_at(0, 100.0 + k as f64, 1.0);
        recorder.send(&sample(0));
        entered.recv().expect("the writer wrote its first sample");
        // The queue's room, then as many as may be held, then three more.
        let backlog = WAITING + HELD + 3;
        for k in 1..=backlog {
            recorder.send(&sample(k));
        }
        // Released before anything is asserted: a failed assertion must not leave the writer
        // waiting, and the recorder's drop joining it.
        release.send(()).expect("release");
        assert_eq!(recorder.held.len(), HELD);
        assert_eq!(recorder.dropped, 3, "only what is beyond the held ones");
        let summary = recorder.stop().expect("stop");
        assert_eq!(summary.samples, (1 + WAITING + HELD) as u64);
        // In order: each written sample's time after the one before.
        let text = std::fs::read_to_string(&path).expect("the recording");
        let times: Vec<f64> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v.get("time").and_then(serde_json::Value::as_f64))
            .collect();
        assert_eq!(
            times.len(),
            1 + WAITING + HELD,
            "{}",
            &text[..text.len().min(300)]
        );
        assert!(times.windows(2).all(|w| w[0] < w[1]), "out of order");
    }
}

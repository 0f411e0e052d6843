//! Recording from the monitor (`r`): samples are handed over as they arrive (paused or not)
//! and written on a thread of their own, so a slow disk never holds up a key.

use crate::recording::{Encoding, RecordError, RecordWriter, Summary};
use crate::sample::NodeSample;
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

/// Samples that may wait for the writer; beyond them, a sample is dropped and counted.
const WAITING: usize = 64;

/// A recording in progress.
pub(crate) struct LiveRecorder {
    path: PathBuf,
    tx: Option<SyncSender<Box<NodeSample>>>,
    thread: Option<JoinHandle<Result<Summary, RecordError>>>,
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
            dropped: 0,
        })
    }

    /// Hands a sample to the writer; never waits.
    pub(crate) fn send(&mut self, sample: &NodeSample) {
        if let Some(tx) = &self.tx {
            match tx.try_send(Box::new(sample.clone())) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => self.dropped += 1,
                // The writer stopped on an error, which it has reported.
                Err(TrySendError::Disconnected(_)) => {}
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
        drop(self.tx.take());
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
}

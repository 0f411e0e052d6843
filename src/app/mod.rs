//! The monitor's state and how events change it. No drawing, no terminal: testable alone.

mod rows;
mod update;

pub use rows::{process_rows, ProcessRow, SortKey};
pub use update::{key_action, Action};

use crate::accounting::Gap;
use crate::layers::Layers;
use crate::pipeline::{Observed, Pipeline};
use crate::sample::{GpuSample, NodeSample};
use std::collections::{HashMap, VecDeque};

/// Which part of the main screen the arrow keys move in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Processes,
    Findings,
}

/// What fills the screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    Main,
    /// The reconciliation of one process on one device.
    Detail {
        pid: u32,
        device_uuid: String,
    },
    Help,
}

/// The last good reading of a GPU that has since been lost, drawn greyed.
#[derive(Debug, Clone)]
pub struct LastKnown {
    pub gpu: GpuSample,
    pub layers: Result<Layers, Gap>,
    pub time: f64,
}

/// Samples kept while paused, applied on resume so nothing is lost.
const PAUSE_QUEUE: usize = 3600;

/// Everything the UI draws from.
#[derive(Debug)]
pub struct State {
    pub pipeline: Pipeline,
    pub current: Option<Observed>,
    /// Last good values of each GPU, by UUID, for when it is lost.
    pub last_known: HashMap<String, LastKnown>,
    pub source_label: String,
    /// Sampling interval in wall-clock seconds.
    pub interval: f64,
    pub paused: bool,
    pub queued: VecDeque<NodeSample>,
    pub recording: Option<String>,
    pub focus: Focus,
    pub view: View,
    pub sort: SortKey,
    /// Selected process, by (pid, device uuid), so it stays selected as rows move.
    pub selected: Option<(u32, String)>,
    /// Until the user moves, the selection stays on the top row, whatever comes there.
    pub selection_moved: bool,
    pub finding_scroll: usize,
    /// First line of the help screen shown.
    pub help_scroll: usize,
    /// The last error from the source, shown in the footer.
    pub status: Option<String>,
    /// Draw with glyphs only (`NO_COLOR`).
    pub monochrome: bool,
    pub quit: bool,
}

impl State {
    pub fn new(pipeline: Pipeline, source_label: String, interval: f64) -> Self {
        State {
            pipeline,
            current: None,
            last_known: HashMap::new(),
            source_label,
            interval,
            paused: false,
            queued: VecDeque::new(),
            recording: None,
            focus: Focus::Processes,
            view: View::Main,
            sort: SortKey::Used,
            selected: None,
            selection_moved: false,
            finding_scroll: 0,
            help_scroll: 0,
            status: None,
            monochrome: false,
            quit: false,
        }
    }

    /// Takes in a new sample; while paused it waits in a bounded queue.
    pub fn on_sample(&mut self, sample: NodeSample) {
        if self.paused {
            if self.queued.len() == PAUSE_QUEUE {
                self.queued.pop_front();
            }
            self.queued.push_back(sample);
            return;
        }
        self.apply(sample);
    }

    fn apply(&mut self, sample: NodeSample) {
        let observed = self.pipeline.ingest(sample);
        for (gpu, acc) in observed.sample.gpus.iter().zip(&observed.account.gpus) {
            if !gpu.lost {
                self.last_known.insert(
                    gpu.uuid.clone(),
                    LastKnown {
                        gpu: gpu.clone(),
                        layers: acc.layers.clone(),
                        time: observed.sample.time,
                    },
                );
            }
        }
        self.current = Some(observed);
        self.status = None;
        self.clamp_selection();
    }

    /// Resumes from pause, applying every queued sample in order.
    pub fn resume(&mut self) {
        self.paused = false;
        while let Some(sample) = self.queued.pop_front() {
            self.apply(sample);
        }
    }

    /// The process rows in the current sort order.
    pub fn rows(&self) -> Vec<ProcessRow<'_>> {
        match &self.current {
            Some(observed) => process_rows(observed, &self.pipeline.history, self.sort),
            None => Vec::new(),
        }
    }

    /// Index of the selected row, if it is still there.
    pub fn selected_index(&self, rows: &[ProcessRow<'_>]) -> Option<usize> {
        let (pid, uuid) = self.selected.as_ref()?;
        rows.iter()
            .position(|r| r.process.pid == *pid && &r.process.device_uuid == uuid)
    }

    /// Keeps the selection on an existing row: the first one when the old one went away.
    fn clamp_selection(&mut self) {
        let rows = self.rows();
        let keep = self.selected_index(&rows).is_some();
        let first = rows
            .first()
            .map(|r| (r.process.pid, r.process.device_uuid.clone()));
        if !keep || !self.selection_moved {
            self.selected = first;
        }
    }
}

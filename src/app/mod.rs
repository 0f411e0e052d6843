//! The monitor's state and how events change it. No drawing, no terminal: testable alone.

mod attach;
mod findings;
mod freshness;
mod group;
mod heap;
mod keys;
mod kill;
mod pause;
mod record;
mod replay;
mod report;
mod rows;
mod strata;

pub(crate) use crate::present::shown::{remember_last_known, LastKnown};
pub(crate) use crate::present::sort::{sort_arrow, SortKey, SortMemory};
pub(crate) use attach::{AttachOffer, Attaching, ATTACH_POLL};
pub(crate) use findings::{climbs, ClimbNote, FindingId};
pub(crate) use freshness::Freshness;
pub(crate) use group::TableEntry;
pub use keys::{key_action, Action};
#[cfg(test)]
pub(crate) use kill::Offer;
pub(crate) use kill::{KillDialog, Notice, Stage};
pub(crate) use pause::PauseQueue;
pub(crate) use record::{RecordPrompt, RecordRequest, RecordingShown};
pub use replay::ReplayView;
pub(crate) use rows::{process_rows, ProcessRow};
pub(crate) use strata::{strata_devices, StrataDevice, Zoom};

use crate::detect::Finding;
use crate::pipeline::{Observed, Pipeline};
use crate::process_signal::{Refuse, Signaller};
use crate::sample::NodeSample;
use std::collections::HashMap;
use std::time::{Duration, Instant};

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
    /// The evidence of one finding.
    Evidence(FindingId),
    /// Every device's layers stacked over time.
    Strata,
    /// One group of the grouped table (`g`): its sums, members and findings.
    Group {
        key: String,
        device_uuid: String,
    },
}

/// Everything the UI draws from.
#[derive(Debug)]
pub struct State {
    pub pipeline: Pipeline,
    pub current: Option<Observed>,
    /// Last good values of each GPU, by UUID, for when it is lost.
    pub last_known: HashMap<String, LastKnown>,
    pub source_label: String,
    /// Whether the source is the built-in demo node: its times are story time, its
    /// processes simulated.
    pub demo: bool,
    /// Sampling interval in wall-clock seconds.
    pub interval: f64,
    pub paused: bool,
    /// Samples that arrived while paused, applied on resume a slice at a time
    /// ([`State::catch_up`]); while it holds any, new samples queue behind them.
    pub queue: PauseQueue,
    /// The recording in progress (`r`), as its writer last reported it.
    pub recording: Option<RecordingShown>,
    /// The prompt for a recording's name, while open: it takes the keys.
    pub record_prompt: Option<RecordPrompt>,
    /// A start or stop for the event loop, which owns the writer.
    pub record_request: Option<RecordRequest>,
    /// Why the last recording stopped by itself (a write error), until the next `r`.
    pub record_failed: Option<String>,
    /// Where `R` writes its report: the directory strata was started in.
    pub report_dir: std::path::PathBuf,
    pub focus: Focus,
    pub view: View,
    pub sort: SortKey,
    /// The other way round from the key's own (`S`): smallest first for amounts.
    pub sort_reversed: bool,
    /// The settled values the rows are ordered by, so that they do not swap at every sample.
    pub sort_memory: SortMemory,
    /// Selected process, by (pid, device uuid), so it stays selected as rows move.
    pub selected: Option<(u32, String)>,
    /// Until the user moves, the selection stays on the top row, whatever comes there.
    pub selection_moved: bool,
    /// How the process table is grouped (`g`).
    pub group_by: crate::accounting::GroupBy,
    /// The selected group row, by (key, device uuid), when a group rather than a process is
    /// selected (then `selected` is `None`).
    pub selected_group: Option<(String, String)>,
    /// The finding picked in the group view.
    pub group_cursor: usize,
    /// The selected finding, by identity, so it stays selected as findings come and go.
    pub finding_selected: Option<FindingId>,
    /// Its row when last seen: where the selection goes when it clears.
    pub finding_index: usize,
    /// Until the user moves, the selection stays on the top (most severe) finding.
    pub finding_moved: bool,
    /// The finding the evidence view shows, as last seen: it stays readable once cleared.
    pub evidence_last: Option<Finding>,
    /// First line of the evidence view shown.
    pub evidence_scroll: usize,
    /// How much of the past the strata view shows.
    pub zoom: Zoom,
    /// The strata view's selected device (its position in [`strata_devices`]).
    pub strata_device: usize,
    /// The view the help screen was opened from, to go back to.
    pub help_from: Option<View>,
    /// First line of the help screen shown.
    pub help_scroll: usize,
    /// First line of the reconciliation view shown.
    pub detail_scroll: usize,
    /// How far the scrolling view last drawn (help, reconciliation, evidence) can scroll, as
    /// its drawing found: the scroll stops where its last line reaches the bottom.
    pub scroll_room: std::cell::Cell<Option<usize>>,
    /// The last error from the source, shown in the footer.
    pub status: Option<String>,
    /// The outcome of the last key that did something out of sight (a signal sent or
    /// refused), shown in the footer until the next key.
    pub notice: Option<Notice>,
    /// The signal dialog (`k`), while open: it takes the keys.
    pub dialog: Option<KillDialog>,
    /// What sends signals: the kernel on a live node, nothing for the demo.
    pub signaller: Box<dyn Signaller>,
    /// The confirmation of `a`, while open: it takes the keys.
    pub attach_offer: Option<AttachOffer>,
    /// An attach under way (`a`, confirmed): its outcome comes to the footer.
    pub attaching: Option<Attaching>,
    /// What attaches the agent: `strata attach` on a live node, nothing for the demo or a
    /// replay.
    pub attacher: Box<dyn crate::launch::offer::Attacher>,
    /// Draw with glyphs only (`NO_COLOR`).
    pub monochrome: bool,
    pub quit: bool,
    /// Ctrl-Z: the event loop gives the terminal back and stops the process.
    pub suspend_requested: bool,
    /// When the poll now running started; `None` between polls.
    pub poll_started: Option<Instant>,
    /// Whether the last poll failed (its error is in `status`).
    pub poll_failed: bool,
    /// When the last sample arrived (shown, or queued while paused).
    pub last_arrival: Option<Instant>,
    /// When the sample shown arrived: the age of the data on screen.
    pub shown_since: Option<Instant>,
    /// How current the data shown is, as of the last [`State::refresh`]: drawing reads it,
    /// so that it never looks at the clock itself.
    pub freshness: Freshness,
    /// `strata replay`: the replay's clock and what reading the recording found.
    pub replay: Option<ReplayView>,
}

impl State {
    pub fn new(pipeline: Pipeline, source_label: String, interval: f64) -> Self {
        State {
            pipeline,
            current: None,
            last_known: HashMap::new(),
            source_label,
            demo: false,
            interval,
            paused: false,
            queue: PauseQueue::default(),
            recording: None,
            report_dir: std::path::PathBuf::from("."),
            record_prompt: None,
            record_request: None,
            record_failed: None,
            focus: Focus::Processes,
            view: View::Main,
            sort: SortKey::Used,
            sort_reversed: false,
            sort_memory: SortMemory::default(),
            selected: None,
            selection_moved: false,
            group_by: crate::accounting::GroupBy::None,
            selected_group: None,
            group_cursor: 0,
            finding_selected: None,
            finding_index: 0,
            finding_moved: false,
            evidence_last: None,
            evidence_scroll: 0,
            zoom: Zoom::Minutes15,
            strata_device: 0,
            help_from: None,
            help_scroll: 0,
            detail_scroll: 0,
            scroll_room: std::cell::Cell::new(None),
            status: None,
            notice: None,
            dialog: None,
            signaller: Box::new(Refuse::simulated()),
            attach_offer: None,
            attaching: None,
            attacher: Box::new(crate::launch::offer::NoAttacher(
                "the demo node's processes are simulated: there is nothing to attach to",
            )),
            monochrome: false,
            quit: false,
            suspend_requested: false,
            poll_started: None,
            poll_failed: false,
            last_arrival: None,
            shown_since: None,
            freshness: Freshness::Live,
            replay: None,
        }
    }

    /// Takes in a new sample; while paused it waits in a bounded queue.
    pub fn on_sample(&mut self, sample: NodeSample) {
        self.on_sample_at(sample, Instant::now());
    }

    /// Takes in a sample that arrived at `now`: the poll that made it is over. While paused,
    /// or catching up after a pause, it queues behind the others, so they apply in order.
    pub(crate) fn on_sample_at(&mut self, sample: NodeSample, now: Instant) {
        self.poll_started = None;
        self.poll_failed = false;
        self.last_arrival = Some(now);
        if self.paused || !self.queue.is_empty() {
            self.queue.push(sample, now);
            return;
        }
        self.apply(sample, now);
    }

    /// Shows a sample that arrived at `arrived`, with its layers and findings.
    fn apply(&mut self, sample: NodeSample, arrived: Instant) {
        let observed = self.pipeline.ingest(sample);
        remember_last_known(&mut self.last_known, &observed.sample, &observed.account);
        self.sort_memory
            .observe(&observed.sample, &observed.account);
        self.current = Some(observed);
        self.shown(arrived);
        self.offer_replay_checkpoint();
    }

    /// A new sample is on screen since `arrived`: the selections follow it.
    fn shown(&mut self, arrived: Instant) {
        self.shown_since = Some(arrived);
        self.status = None;
        self.clamp_selection();
        self.follow_findings();
        self.clamp_strata_device();
    }

    /// Resumes from pause. The queued samples are applied by [`State::catch_up`], between
    /// events: a long queue never keeps a key waiting.
    pub(crate) fn resume(&mut self) {
        self.paused = false;
        self.queue.keep_every_sample();
    }

    /// Whether samples queued during a pause still wait to be applied (and the user has not
    /// paused again).
    pub(crate) fn catching_up(&self) -> bool {
        !self.paused && !self.queue.is_empty()
    }

    /// Applies queued samples, oldest first, until `slice` has passed (at least one, if any
    /// waits); returns how many. The event loop calls it while nothing else waits.
    pub(crate) fn catch_up(&mut self, slice: Duration) -> usize {
        let start = Instant::now();
        let mut applied = 0;
        while self.catching_up() {
            let Some((sample, arrived)) = self.queue.pop_front() else {
                break;
            };
            self.apply(sample, arrived);
            applied += 1;
            if start.elapsed() >= slice {
                break;
            }
        }
        applied
    }

    /// The process rows in the current sort order.
    pub(crate) fn rows(&self) -> Vec<ProcessRow<'_>> {
        match &self.current {
            Some(observed) => process_rows(
                observed,
                &self.pipeline.history,
                self.sort,
                self.sort_reversed,
                &self.sort_memory,
            ),
            None => Vec::new(),
        }
    }

    /// Index of the selected row, if it is still there.
    pub(crate) fn selected_index(&self, rows: &[ProcessRow<'_>]) -> Option<usize> {
        let (pid, uuid) = self.selected.as_ref()?;
        rows.iter()
            .position(|r| r.process.pid == *pid && &r.process.device_uuid == uuid)
    }

    /// Keeps the selection on an existing row: the first one when the old one went away.
    pub(super) fn clamp_selection(&mut self) {
        if self.group_by != crate::accounting::GroupBy::None {
            self.clamp_table_selection();
            return;
        }
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

#[cfg(test)]
mod tests;

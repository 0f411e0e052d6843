//! The monitor's state and how events change it. No drawing, no terminal: testable alone.

mod attach;
mod demand;
pub(crate) use demand::FirstScreen;
mod filter;
mod findings;
mod freshness;
mod group;
mod heap;
mod keys;
mod kill;
mod mouse;
mod pause;
mod record;
mod replay;
mod report;
mod rows;
mod sites;
mod strata;

pub(crate) use crate::present::shown::{remember_last_known, LastKnown};
pub(crate) use crate::present::sort::sort_arrow;
#[cfg(test)]
pub(crate) use crate::present::sort::SortKey;
pub use attach::Attach;
pub(crate) use attach::{AttachOffer, ATTACH_POLL};
pub(crate) use findings::{climbs, ClimbNote, FindingId, FindingList};
pub(crate) use freshness::{Freshness, PollClock, Polls};
pub(crate) use group::TableEntry;
pub use keys::{key_action, Action};
pub use kill::Kill;
#[cfg(test)]
pub(crate) use kill::Offer;
pub(crate) use kill::{KillDialog, Notice, Stage};
pub(crate) use mouse::{GpuDrawn, Mouse, TableDrawn, TableLine};
pub(crate) use pause::Pause;
#[cfg(test)]
pub(crate) use record::RecordingShown;
pub(crate) use record::{RecordRequest, Recorder};
pub use replay::ReplayView;
pub(crate) use rows::{trend, ProcessRow, ProcessTable};
pub use sites::{NoSitesAsker, Sites, SitesAsker};
pub(crate) use strata::{strata_devices, StrataDevice, StrataView, Zoom};

use crate::detect::Finding;
use crate::pipeline::{Observed, Pipeline};
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
    /// Which lines of one process's code hold its memory (`w`), and its segment map.
    Sites {
        pid: u32,
        device_uuid: String,
    },
    /// Every device's layers stacked over time.
    Strata,
    /// One group of the grouped table (`g`): its sums, members and findings.
    Group {
        key: String,
        device_uuid: String,
    },
}

/// What this monitor watches and how it draws, settled when it starts.
#[derive(Debug)]
pub struct Setup {
    /// The source, as the header and the first screen name it: `nvml libnvidia-ml.so.1`.
    pub(crate) source_label: String,
    /// Whether the source is the built-in demo node: its times are story time, its
    /// processes simulated.
    pub demo: bool,
    /// Sampling interval in wall-clock seconds.
    pub(crate) interval: f64,
    /// Draw with glyphs only (`NO_COLOR`).
    pub monochrome: bool,
    /// Where `R` writes its report: the directory strata was started in.
    pub(crate) report_dir: std::path::PathBuf,
    /// Capture the mouse: clicks and the wheel (`--no-mouse` leaves it to the terminal).
    pub mouse: bool,
    /// The colours' background (`--theme`, the config file's `theme`).
    pub palette: crate::config::Palette,
    /// Draw with ASCII only (`--ascii`, the config file's `ascii`).
    pub ascii: bool,
    /// The process table's extra columns offered, in order (the config file's `columns`).
    pub columns: Vec<crate::config::Column>,
}

/// What the views over the main screen keep: where each is scrolled, what it holds, where
/// it goes back to.
#[derive(Debug, Default)]
pub struct Views {
    /// First line of the reconciliation view shown.
    pub(crate) detail_scroll: usize,
    /// The finding the evidence view shows, as last seen: it stays readable once cleared.
    pub(crate) evidence_last: Option<Finding>,
    /// First line of the evidence view shown.
    pub(crate) evidence_scroll: usize,
    /// The finding picked in the group view.
    pub(crate) group_cursor: usize,
    /// The view the help screen was opened from, to go back to.
    pub(crate) help_from: Option<View>,
    /// First line of the help screen shown.
    pub(crate) help_scroll: usize,
    /// How far the scrolling view last drawn (help, reconciliation, evidence) can scroll, as
    /// its drawing found: the scroll stops where its last line reaches the bottom.
    pub(crate) scroll_room: std::cell::Cell<Option<usize>>,
}

/// Everything the UI draws from, grouped by what each part serves (ARCHITECTURE.md, "The
/// monitor"): the model the samples built, then the state behind each view and key.
#[derive(Debug)]
pub struct State {
    pub(crate) pipeline: Pipeline,
    pub(crate) current: Option<Observed>,
    /// Last good values of each GPU, by UUID, for when it is lost.
    pub(crate) last_known: HashMap<String, LastKnown>,
    /// The source, its interval, how to draw, where reports go.
    pub setup: Setup,
    /// The collector's polls, and how current the data shown is.
    pub(crate) polls: Polls,
    /// `p`: whether paused, and the samples that wait.
    pub(crate) pause: Pause,
    pub(crate) focus: Focus,
    pub(crate) view: View,
    /// The process table: its order, grouping and selection.
    pub(crate) process_table: ProcessTable,
    /// The findings list: its selection.
    pub(crate) finding_list: FindingList,
    /// The reconciliation, evidence, group and help views.
    pub(crate) views: Views,
    /// The strata view (`v`): its zoom and device.
    pub(crate) strata: StrataView,
    /// Clicks and the wheel: where the table was drawn, the last click.
    pub(crate) mouse: Mouse,
    /// `K`: the signal dialog and what sends signals.
    pub kill: Kill,
    /// `a`: the offer, an attach under way, and what attaches.
    pub attach: Attach,
    /// `w`: what asks agents for sites windows, and the last one asked.
    pub sites: Sites,
    /// `r`: the recording in progress, its prompt, and what the event loop is asked.
    pub(crate) recorder: Recorder,
    /// The outcome of the last key that did something out of sight (a signal sent or
    /// refused), shown in the footer until the next key.
    pub(crate) notice: Option<Notice>,
    pub(crate) quit: bool,
    /// Ctrl-Z: the event loop gives the terminal back and stops the process.
    pub(crate) suspend_requested: bool,
    /// `strata replay`: the replay's clock and what reading the recording found.
    pub replay: Option<ReplayView>,
}

impl State {
    pub fn new(pipeline: Pipeline, source_label: String, interval: f64) -> Self {
        State {
            pipeline,
            current: None,
            last_known: HashMap::new(),
            setup: Setup {
                source_label,
                demo: false,
                interval,
                monochrome: false,
                report_dir: std::path::PathBuf::from("."),
                mouse: true,
                palette: crate::config::Palette::Dark,
                ascii: false,
                columns: crate::config::Column::ALL.to_vec(),
            },
            polls: Polls::default(),
            pause: Pause::default(),
            focus: Focus::Processes,
            view: View::Main,
            process_table: ProcessTable::default(),
            finding_list: FindingList::default(),
            views: Views::default(),
            strata: StrataView::default(),
            mouse: Mouse::default(),
            kill: Kill::default(),
            attach: Attach::default(),
            sites: Sites::default(),
            recorder: Recorder::default(),
            notice: None,
            quit: false,
            suspend_requested: false,
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
        self.polls.started = None;
        self.polls.failed = false;
        self.polls.last_arrival = Some(now);
        if self.pause.paused || !self.pause.queue.is_empty() {
            self.pause.queue.push(sample, now);
            return;
        }
        self.apply(sample, now);
    }

    /// Shows a sample that arrived at `arrived`, with its layers and findings.
    fn apply(&mut self, sample: NodeSample, arrived: Instant) {
        let observed = self.pipeline.ingest(sample);
        remember_last_known(&mut self.last_known, &observed.sample, &observed.account);
        self.process_table
            .sort_memory
            .observe(&observed.sample, &observed.account);
        self.show(Some(observed));
        self.shown(arrived);
        self.sites_on_climb();
        self.offer_replay_checkpoint();
    }

    /// Puts `observed` on screen: the rows of the sample before are not lent out again.
    pub(super) fn show(&mut self, observed: Option<Observed>) {
        self.current = observed;
        self.process_table.samples_shown += 1;
    }

    /// The sample shown, to change in place (a test's findings): as if a new one came.
    #[cfg(test)]
    pub(crate) fn current_mut(&mut self) -> Option<&mut Observed> {
        self.process_table.samples_shown += 1;
        self.current.as_mut()
    }

    /// A new sample is on screen since `arrived`: the selections follow it.
    fn shown(&mut self, arrived: Instant) {
        self.polls.shown_since = Some(arrived);
        self.polls.error = None;
        self.clamp_selection();
        self.follow_findings();
        self.clamp_strata_device();
    }

    /// Resumes from pause. The queued samples are applied by [`State::catch_up`], between
    /// events: a long queue never keeps a key waiting.
    pub(crate) fn resume(&mut self) {
        self.pause.paused = false;
        self.pause.queue.keep_every_sample();
    }

    /// Whether samples queued during a pause still wait to be applied (and the user has not
    /// paused again).
    pub(crate) fn catching_up(&self) -> bool {
        !self.pause.paused && !self.pause.queue.is_empty()
    }

    /// Applies queued samples, oldest first, until `slice` has passed (at least one, if any
    /// waits); returns how many. The event loop calls it while nothing else waits.
    pub(crate) fn catch_up(&mut self, slice: Duration) -> usize {
        let start = Instant::now();
        let mut applied = 0;
        while self.catching_up() {
            let Some((sample, arrived)) = self.pause.queue.pop_front() else {
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

    /// The process rows the filter shows (`/`), in the current sort order.
    pub(crate) fn rows(&self) -> Vec<ProcessRow<'_>> {
        match &self.current {
            Some(observed) => self.process_table.rows(observed),
            None => Vec::new(),
        }
    }

    /// Index of the selected row, if it is still there.
    pub(crate) fn selected_index(&self, rows: &[ProcessRow<'_>]) -> Option<usize> {
        let (pid, uuid) = self.process_table.selected.as_ref()?;
        rows.iter()
            .position(|r| r.process.pid == *pid && *r.process.device_uuid == **uuid)
    }

    /// Keeps the selection on an existing row: the first one when the old one went away.
    pub(super) fn clamp_selection(&mut self) {
        if self.process_table.group_by != crate::accounting::GroupBy::None {
            self.clamp_table_selection();
            return;
        }
        let Some(observed) = &self.current else {
            self.process_table.selected = None;
            return;
        };
        let (first, keep) = self
            .process_table
            .first_and_holding(observed, self.process_table.selected.as_ref());
        if !keep || !self.process_table.selection_moved {
            self.process_table.selected = first;
        }
    }
}

#[cfg(test)]
mod tests;

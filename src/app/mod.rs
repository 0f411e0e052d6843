//! The monitor's state and how events change it. No drawing, no terminal: testable alone.

mod findings;
mod rows;
mod strata;
mod update;

pub use findings::{climbs, ClimbNote, FindingId};
pub use rows::{process_rows, ProcessRow, SortKey};
pub use strata::{strata_devices, StrataDevice, Zoom};
pub use update::{key_action, Action, Freshness};

use crate::accounting::Gap;
use crate::detect::Finding;
use crate::layers::Layers;
use crate::pipeline::{Observed, Pipeline};
use crate::sample::{GpuSample, NodeSample};
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

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
    /// The last error from the source, shown in the footer.
    pub status: Option<String>,
    /// Draw with glyphs only (`NO_COLOR`).
    pub monochrome: bool,
    pub quit: bool,
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
            status: None,
            monochrome: false,
            quit: false,
            poll_started: None,
            poll_failed: false,
            last_arrival: None,
            shown_since: None,
            freshness: Freshness::Live,
        }
    }

    /// Takes in a new sample; while paused it waits in a bounded queue.
    pub fn on_sample(&mut self, sample: NodeSample) {
        self.on_sample_at(sample, Instant::now());
    }

    /// Takes in a sample that arrived at `now`: the poll that made it is over.
    pub fn on_sample_at(&mut self, sample: NodeSample, now: Instant) {
        self.poll_started = None;
        self.poll_failed = false;
        self.last_arrival = Some(now);
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
        self.shown_since = self.last_arrival;
        self.status = None;
        self.clamp_selection();
        self.follow_findings();
        self.clamp_strata_device();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{FindingKind, Severity};
    use crate::history::SeriesKey;
    use crate::source::demo::node_at;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn state() -> State {
        State::new(Pipeline::new(None), "demo".into(), 1.0)
    }

    #[test]
    fn pausing_freezes_the_screen_and_loses_no_sample() {
        let mut s = state();
        s.on_sample(node_at(0, 100.0, 10.0));
        s.apply_action(Action::TogglePause);
        for t in [110.0, 120.0, 130.0] {
            s.on_sample(node_at(0, t, 10.0));
        }
        let shown = s.current.as_ref().map(|o| o.sample.time);
        assert_eq!(
            shown,
            Some(crate::source::demo::DEMO_EPOCH + 100.0),
            "frozen while paused"
        );
        assert_eq!(s.queued.len(), 3);
        s.apply_action(Action::TogglePause);
        assert!(s.queued.is_empty());
        let uuid = s
            .current
            .as_ref()
            .map(|o| o.sample.gpus[0].uuid.clone())
            .unwrap_or_default();
        let series = s
            .pipeline
            .history
            .get(&SeriesKey::device(&uuid, crate::history::Metric::Used))
            .expect("series");
        assert_eq!(
            series.raw().filter(|(_, v)| v.is_some()).count(),
            4,
            "every queued sample went into history"
        );
    }

    #[test]
    fn selection_follows_its_process_once_the_user_moved() {
        let mut s = state();
        s.on_sample(node_at(0, 600.0, 10.0));
        let first = s.selected.clone();
        s.apply_action(Action::Down);
        let chosen = s.selected.clone();
        assert_ne!(first, chosen);
        s.apply_action(Action::CycleSort);
        s.on_sample(node_at(0, 610.0, 10.0));
        assert_eq!(
            s.selected, chosen,
            "stays on the same process when rows move"
        );
        s.apply_action(Action::Open);
        let (pid, uuid) = chosen.expect("a selection");
        assert_eq!(
            s.view,
            View::Detail {
                pid,
                device_uuid: uuid
            }
        );
        s.apply_action(Action::Back);
        assert_eq!(s.view, View::Main);
        s.apply_action(Action::Back);
        assert!(s.quit, "Esc on the main screen quits");
    }

    #[test]
    fn keys_map_to_actions() {
        let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
        assert_eq!(key_action(key(KeyCode::Char('q'))), Some(Action::Quit));
        assert_eq!(
            key_action(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
        );
        assert_eq!(key_action(key(KeyCode::Char('j'))), Some(Action::Down));
        assert_eq!(key_action(key(KeyCode::Up)), Some(Action::Up));
        assert_eq!(key_action(key(KeyCode::Enter)), Some(Action::Open));
        assert_eq!(key_action(key(KeyCode::Tab)), Some(Action::FocusNext));
        assert_eq!(key_action(key(KeyCode::Char('s'))), Some(Action::CycleSort));
        assert_eq!(
            key_action(key(KeyCode::Char('p'))),
            Some(Action::TogglePause)
        );
        assert_eq!(
            key_action(key(KeyCode::Char('?'))),
            Some(Action::ToggleHelp)
        );
        assert_eq!(
            key_action(key(KeyCode::Char('v'))),
            Some(Action::ToggleStrata)
        );
        assert_eq!(key_action(key(KeyCode::Char('z'))), Some(Action::ZoomCycle));
        assert_eq!(key_action(key(KeyCode::Char('+'))), Some(Action::ZoomIn));
        assert_eq!(key_action(key(KeyCode::Char('='))), Some(Action::ZoomIn));
        assert_eq!(key_action(key(KeyCode::Char('-'))), Some(Action::ZoomOut));
        assert_eq!(key_action(key(KeyCode::Char('x'))), None);
    }

    /// The demo's story up to `at` seconds, a sample every 10 s: its history and findings.
    fn demo(at: f64) -> State {
        let mut s = state();
        let mut t = 0.0;
        while t <= at {
            s.on_sample(node_at(0, t, 10.0));
            t += 10.0;
        }
        s
    }

    fn finding(kind: FindingKind, pid: Option<u32>, severity: Severity, since: f64) -> Finding {
        Finding {
            kind,
            severity,
            device_uuid: Some("GPU-a".into()),
            pid,
            since,
            message: format!("{kind:?} {pid:?}"),
            evidence: serde_json::json!({}),
        }
    }

    /// The demo at 905 s, with its findings replaced by `findings` as if a sample brought them.
    fn with_findings(s: &mut State, findings: Vec<Finding>) {
        if let Some(o) = s.current.as_mut() {
            o.findings = findings;
        }
        s.follow_findings();
    }

    #[test]
    fn tab_arrows_and_enter_open_the_selected_findings_evidence() {
        let mut s = demo(905.0);
        let count = s.findings().len();
        assert!(count >= 5, "the demo at 905 s has findings");
        assert_eq!(s.selected_finding_index(), Some(0), "the most severe first");
        s.apply_action(Action::FocusNext);
        assert_eq!(s.focus, Focus::Findings);
        s.apply_action(Action::Down);
        s.apply_action(Action::Down);
        assert_eq!(s.selected_finding_index(), Some(2));
        s.apply_action(Action::Bottom);
        assert_eq!(s.selected_finding_index(), Some(count - 1));
        s.apply_action(Action::Top);
        s.apply_action(Action::Down);
        let chosen = s.findings()[1].clone();
        s.apply_action(Action::Open);
        assert_eq!(s.view, View::Evidence(FindingId::of(&chosen)));
        assert_eq!(s.evidence_last.as_ref(), Some(&chosen));
        s.apply_action(Action::Down);
        assert_eq!(s.evidence_scroll, 1, "arrows scroll the evidence");
        s.apply_action(Action::FocusNext);
        assert_eq!(s.focus, Focus::Findings, "Tab does nothing unseen");
        s.apply_action(Action::Back);
        assert_eq!(s.view, View::Main);
        assert_eq!(s.focus, Focus::Findings, "back where it was");
        assert_eq!(s.selected_finding_index(), Some(1));
        assert!(!s.quit);
    }

    /// The selection follows its finding by kind, device and process as others come, go and
    /// reorder; when it clears, its neighbour takes its place; the open evidence stays.
    #[test]
    fn the_finding_selection_stays_on_its_finding_as_findings_come_and_go() {
        let mut s = state();
        s.on_sample(node_at(0, 905.0, 10.0));
        let a = finding(FindingKind::Climb, Some(1), Severity::Warning, 10.0);
        let b = finding(FindingKind::Fragmentation, Some(2), Severity::Warning, 20.0);
        let c = finding(FindingKind::AllocRetries, Some(2), Severity::Warning, 30.0);
        with_findings(&mut s, vec![a.clone(), b.clone(), c.clone()]);
        assert_eq!(
            s.finding_selected,
            Some(FindingId::of(&a)),
            "top until moved"
        );
        s.apply_action(Action::FocusNext);
        s.apply_action(Action::Down);
        assert_eq!(s.finding_selected, Some(FindingId::of(&b)));
        // A critical one comes on top: the selection stays on b, now third.
        let oom = finding(FindingKind::Oom, Some(2), Severity::Critical, 40.0);
        with_findings(&mut s, vec![oom.clone(), a.clone(), b.clone(), c.clone()]);
        assert_eq!(s.finding_selected, Some(FindingId::of(&b)));
        assert_eq!(s.selected_finding_index(), Some(2));
        // Its message and figures change: still the same finding.
        let mut b2 = b.clone();
        b2.message = "grown".into();
        with_findings(&mut s, vec![oom.clone(), a.clone(), b2.clone(), c.clone()]);
        assert_eq!(s.selected_finding_index(), Some(2));
        // The same kind on another process is another finding.
        let mut other = b.clone();
        other.pid = Some(3);
        assert!(!FindingId::of(&b).matches(&other));
        s.apply_action(Action::Open);
        assert_eq!(s.view, View::Evidence(FindingId::of(&b)));
        // b clears: the selection moves to what took its row; the view keeps b as last seen.
        with_findings(&mut s, vec![oom.clone(), a.clone(), c.clone()]);
        assert_eq!(s.finding_selected, Some(FindingId::of(&c)));
        let id = FindingId::of(&b);
        let (shown, raised) = s.evidence_finding(&id).expect("kept");
        assert_eq!((shown.message.as_str(), raised), ("grown", false));
        // Everything clears, then findings return: nothing selected, then the neighbour row.
        with_findings(&mut s, Vec::new());
        assert_eq!(s.finding_selected, None);
        with_findings(&mut s, vec![a.clone()]);
        assert_eq!(s.finding_selected, Some(FindingId::of(&a)));
    }

    #[test]
    fn the_strata_view_opens_zooms_and_scrolls_its_devices() {
        let mut s = state();
        s.on_sample(node_at(0, 905.0, 10.0));
        s.apply_action(Action::ZoomCycle);
        assert_eq!(s.zoom, Zoom::Minutes15, "no zoom where it does not show");
        s.apply_action(Action::ToggleStrata);
        assert_eq!(s.view, View::Strata);
        s.apply_action(Action::ZoomCycle);
        assert_eq!(s.zoom, Zoom::Hours2);
        s.apply_action(Action::ZoomOut);
        assert_eq!(s.zoom, Zoom::Hours24);
        s.apply_action(Action::ZoomOut);
        assert_eq!(s.zoom, Zoom::Hours24, "24 h is the longest");
        s.apply_action(Action::ZoomIn);
        s.apply_action(Action::ZoomIn);
        s.apply_action(Action::ZoomIn);
        assert_eq!(s.zoom, Zoom::Minutes15);
        // Seven devices: 4 GPUs and GPU 3's three MIG instances.
        s.apply_action(Action::Down);
        assert_eq!(s.strata_device, 1);
        s.apply_action(Action::PageDown);
        assert_eq!(s.strata_device, 6, "clamped to the last device");
        s.apply_action(Action::Up);
        assert_eq!(s.strata_device, 5);
        let rows_selected = s.selected.clone();
        assert_eq!(s.selected, rows_selected, "the process table did not move");
        // Help from the strata view goes back to it.
        s.apply_action(Action::ToggleHelp);
        assert_eq!(s.view, View::Help);
        s.apply_action(Action::Back);
        assert_eq!(s.view, View::Strata);
        s.apply_action(Action::ToggleStrata);
        assert_eq!(s.view, View::Main);
        s.apply_action(Action::ToggleStrata);
        s.apply_action(Action::Back);
        assert_eq!(s.view, View::Main);
        assert!(!s.quit);
        s.apply_action(Action::Quit);
        assert!(s.quit, "q quits from anywhere");
    }

    #[test]
    fn a_climb_flagged_for_a_process_is_on_its_row() {
        let s = demo(905.0);
        let rows = s.rows();
        let leak = rows
            .iter()
            .find(|r| r.process.pid == 52010)
            .and_then(|r| r.climb.clone())
            .expect("the eval loop's leak is on its row");
        assert_eq!(leak.cause, "live");
        assert!(leak.rate_mib_per_min > 300.0, "{leak:?}");
        assert!(leak.window_secs > 0.0);
        assert!(rows
            .iter()
            .filter(|r| [41230, 41231, 52077, 60500].contains(&r.process.pid))
            .all(|r| r.climb.is_none()));
    }
}

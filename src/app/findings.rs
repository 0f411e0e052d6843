//! Findings as the monitor handles them: which one is selected (by identity, so the selection
//! stays on it as others come and go), and what a climb's evidence says for the views that mark
//! it (the trend column, sparklines, the strata view).

use super::State;
use crate::detect::{Evidence, Finding, FindingKind};

/// A finding's identity from sample to sample: its kind, device and process (the same
/// identity the detectors use to carry `since` forward).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindingId {
    pub(crate) kind: FindingKind,
    pub(crate) device_uuid: Option<String>,
    pub(crate) pid: Option<u32>,
}

impl FindingId {
    pub(crate) fn of(finding: &Finding) -> Self {
        FindingId {
            kind: finding.kind,
            device_uuid: finding.device_uuid.clone(),
            pid: finding.pid,
        }
    }

    pub(crate) fn matches(&self, finding: &Finding) -> bool {
        self.kind == finding.kind
            && self.pid == finding.pid
            && self.device_uuid == finding.device_uuid
    }
}

/// The findings list on the main screen: its selection.
#[derive(Debug, Default)]
pub struct FindingList {
    /// The selected finding, by identity, so it stays selected as findings come and go.
    pub(crate) selected: Option<FindingId>,
    /// Its row when last seen: where the selection goes when it clears.
    pub(crate) index: usize,
    /// Until the user moves, the selection stays on the top (most severe) finding.
    pub(crate) moved: bool,
}

/// What a `climb` finding's evidence says, for the views that mark it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClimbNote {
    /// Which layer climbs: `live`, `cache`, `outside_pool`, `unattributed`, `no_process`.
    pub(crate) cause: String,
    pub(crate) rate_mib_per_min: f64,
    /// Unix seconds where the climb began.
    pub(crate) start: f64,
    /// The window the detector read the rate over, seconds.
    pub(crate) window_secs: f64,
    pub(crate) from_bytes: Option<u64>,
    pub(crate) to_bytes: Option<u64>,
}

impl ClimbNote {
    /// The note of a climb finding; `None` for other kinds or evidence without a rate.
    pub(crate) fn of(finding: &Finding) -> Option<Self> {
        let Evidence::Climb(e) = &finding.evidence else {
            return None;
        };
        Some(ClimbNote {
            cause: e.cause.clone(),
            rate_mib_per_min: Some(e.rate_mib_per_min.0).filter(|r| r.is_finite())?,
            start: Some(e.start.0).filter(|s| s.is_finite())?,
            window_secs: e.window_secs.0,
            from_bytes: Some(e.from_bytes.0),
            to_bytes: Some(e.to_bytes.0),
        })
    }
}

/// Every flagged climb of the findings, with the finding it comes from.
pub(crate) fn climbs(findings: &[Finding]) -> impl Iterator<Item = (&Finding, ClimbNote)> {
    findings
        .iter()
        .filter_map(|f| ClimbNote::of(f).map(|note| (f, note)))
}

impl State {
    /// The findings shown now (none before the first sample).
    pub(crate) fn findings(&self) -> &[Finding] {
        self.current.as_ref().map_or(&[], |o| o.findings.as_slice())
    }

    /// The time of the sample shown (not a number before the first).
    pub(crate) fn now(&self) -> f64 {
        self.current.as_ref().map_or(f64::NAN, |o| o.sample.time)
    }

    /// Where the flagged climbs on a GPU began: on the GPU itself or on one of its MIG
    /// instances (whose memory is part of the GPU's).
    pub(crate) fn climb_starts_on_gpu(&self, gpu_uuid: &str) -> Vec<f64> {
        let Some(observed) = &self.current else {
            return Vec::new();
        };
        climbs(&observed.findings)
            .filter(|(f, _)| {
                f.device_uuid.as_deref().is_some_and(|uuid| {
                    observed
                        .sample
                        .locate(uuid)
                        .is_some_and(|(gpu, _)| gpu.uuid == gpu_uuid)
                })
            })
            .map(|(_, note)| note.start)
            .collect()
    }

    /// Where the flagged climb of a process on a device began.
    pub(crate) fn climb_starts_of(&self, pid: u32, device_uuid: &str) -> Vec<f64> {
        climbs(self.findings())
            .filter(|(f, _)| f.pid == Some(pid) && f.device_uuid.as_deref() == Some(device_uuid))
            .map(|(_, note)| note.start)
            .collect()
    }

    /// Index of the selected finding in the panel's order, if it is still raised.
    pub(crate) fn selected_finding_index(&self) -> Option<usize> {
        let id = self.finding_list.selected.as_ref()?;
        self.findings().iter().position(|f| id.matches(f))
    }

    /// The finding the evidence view shows: the current one while it is raised, else the
    /// copy last seen (with `false`: it has cleared since).
    pub(crate) fn evidence_finding(&self, id: &FindingId) -> Option<(&Finding, bool)> {
        match self.findings().iter().find(|f| id.matches(f)) {
            Some(f) => Some((f, true)),
            None => self
                .views
                .evidence_last
                .as_ref()
                .filter(|f| id.matches(f))
                .map(|f| (f, false)),
        }
    }

    /// After a new sample: the selected finding stays selected while it is raised; once it
    /// clears, its neighbour takes its place. Until the user moves, the top (most severe) one
    /// is selected, whatever it is. The evidence view keeps a copy of the finding it shows.
    pub(super) fn follow_findings(&mut self) {
        let Some(observed) = &self.current else {
            return;
        };
        let findings = &observed.findings;
        if let super::View::Evidence(id) = &self.view {
            if let Some(f) = findings.iter().find(|f| id.matches(f)) {
                self.views.evidence_last = Some(f.clone());
            }
        }
        if findings.is_empty() {
            self.finding_list.selected = None;
            return;
        }
        let at = self
            .finding_list
            .selected
            .as_ref()
            .and_then(|id| findings.iter().position(|f| id.matches(f)));
        let index = match at {
            Some(i) if self.finding_list.moved => i,
            _ if !self.finding_list.moved => 0,
            _ => self.finding_list.index.min(findings.len() - 1),
        };
        self.finding_list.index = index;
        self.finding_list.selected = Some(FindingId::of(&findings[index]));
    }

    /// Moves the finding selection by `delta` rows, clamped to the list.
    pub(super) fn move_finding(&mut self, delta: isize) {
        let count = self.findings().len();
        if count == 0 {
            return;
        }
        let at = self.selected_finding_index().unwrap_or(0) as isize;
        let to = at.saturating_add(delta).clamp(0, count as isize - 1) as usize;
        self.finding_list.index = to;
        self.finding_list.moved = true;
        self.finding_list.selected = Some(FindingId::of(&self.findings()[to]));
    }
}

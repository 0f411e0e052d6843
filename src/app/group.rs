//! `g`: the process table grouped by owner (none, launcher, pod or container, Slurm job,
//! user). Each group has a row per device, with NVML used and each layer summed over its
//! members ([`crate::accounting::groups`]), and its members below it in the table's order;
//! processes no group names follow. Enter on a group row opens the group: its sums, its
//! members and their findings, each finding's evidence a key away.

use super::{Action, FindingId, ProcessRow, State, View};
use crate::accounting::{GroupBy, GroupRow};
use crate::detect::Finding;

/// One line of the grouped table.
#[derive(Debug, Clone)]
pub(crate) enum TableEntry<'a> {
    Group(GroupRow),
    /// A process; `member` when it sits under a group row.
    Process {
        row: ProcessRow<'a>,
        member: bool,
    },
}

impl TableEntry<'_> {
    /// The selection this line is: a process by (pid, device), a group by (key, device).
    fn key(&self) -> Picked {
        match self {
            TableEntry::Group(g) => Picked::Group(g.key.clone(), g.device_uuid.clone()),
            TableEntry::Process { row, .. } => {
                Picked::Process(row.process.pid, row.process.device_uuid.to_string())
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Picked {
    Process(u32, String),
    Group(String, String),
}

impl State {
    /// The table's lines: without a grouping, the process rows; with one, each group row
    /// (the largest used first) with its members under it, then the processes in no group.
    pub(crate) fn table(&self) -> Vec<TableEntry<'_>> {
        let rows = self.rows();
        let Some(observed) = &self.current else {
            return Vec::new();
        };
        if self.process_table.group_by == GroupBy::None {
            return rows
                .into_iter()
                .map(|row| TableEntry::Process { row, member: false })
                .collect();
        }
        let groups = self.process_table.groups(observed);
        let mut out = Vec::new();
        let mut placed = vec![false; rows.len()];
        for group in groups {
            let members: Vec<usize> = rows
                .iter()
                .enumerate()
                .filter(|(_, r)| {
                    *r.process.device_uuid == *group.device_uuid
                        && group.pids.contains(&r.process.pid)
                })
                .map(|(i, _)| i)
                .collect();
            // A filter (`/`) shows the groups of the processes it shows, their sums whole.
            if members.is_empty() && self.process_table.filter.is_on() {
                continue;
            }
            out.push(TableEntry::Group(group));
            for i in members {
                placed[i] = true;
                out.push(TableEntry::Process {
                    row: rows[i].clone(),
                    member: true,
                });
            }
        }
        for (i, row) in rows.into_iter().enumerate() {
            if !placed[i] {
                out.push(TableEntry::Process { row, member: false });
            }
        }
        out
    }

    /// How many lines [`State::table`] has, without lending them where it is not grouped.
    pub(crate) fn table_len(&self) -> usize {
        match (&self.current, self.process_table.group_by) {
            (Some(observed), GroupBy::None) => self.process_table.row_count(observed),
            _ => self.table().len(),
        }
    }

    fn picked(&self) -> Option<Picked> {
        match (
            &self.process_table.selected_group,
            &self.process_table.selected,
        ) {
            (Some((key, uuid)), _) => Some(Picked::Group(key.clone(), uuid.clone())),
            (None, Some((pid, uuid))) => Some(Picked::Process(*pid, uuid.clone())),
            (None, None) => None,
        }
    }

    fn pick(&mut self, picked: Option<Picked>) {
        match picked {
            Some(Picked::Group(key, uuid)) => {
                self.process_table.selected_group = Some((key, uuid));
                self.process_table.selected = None;
            }
            Some(Picked::Process(pid, uuid)) => {
                self.process_table.selected_group = None;
                self.process_table.selected = Some((pid, uuid));
            }
            None => {
                self.process_table.selected_group = None;
                self.process_table.selected = None;
            }
        }
    }

    /// Index of the selected line of [`State::table`], if it is still there.
    pub(crate) fn table_index(&self, table: &[TableEntry<'_>]) -> Option<usize> {
        let picked = self.picked()?;
        table.iter().position(|e| e.key() == picked)
    }

    /// Moves the selection `delta` lines through the grouped table.
    pub(super) fn move_in_table(&mut self, delta: isize) {
        let table = self.table();
        if table.is_empty() {
            return;
        }
        let at = self.table_index(&table).unwrap_or(0) as isize;
        let to = at.saturating_add(delta).clamp(0, table.len() as isize - 1) as usize;
        let picked = table[to].key();
        self.process_table.selection_moved = true;
        self.pick(Some(picked));
    }

    /// Keeps the selection on a line that is there: the first when it went away.
    pub(super) fn clamp_table_selection(&mut self) {
        let table = self.table();
        let keep = self.table_index(&table).is_some();
        if !keep || !self.process_table.selection_moved {
            let first = table.first().map(TableEntry::key);
            self.pick(first);
        }
    }

    /// `g`: the next grouping; the selection starts at the top.
    pub(super) fn cycle_grouping(&mut self) {
        self.process_table.group_by = self.process_table.group_by.next();
        self.process_table.selection_moved = false;
        self.process_table.selected_group = None;
        self.clamp_table_selection();
    }

    /// The group the view shows, as of the sample shown.
    pub(crate) fn group_shown(&self, key: &str, device_uuid: &str) -> Option<GroupRow> {
        let observed = self.current.as_ref()?;
        crate::accounting::groups(
            &observed.sample,
            &observed.account.processes,
            self.process_table.group_by,
        )
        .into_iter()
        .find(|g| g.key == key && g.device_uuid == device_uuid)
    }

    /// The findings of a group's members on its device, the most severe first.
    pub(crate) fn group_findings(&self, group: &GroupRow) -> Vec<&Finding> {
        self.findings()
            .iter()
            .filter(|f| {
                f.pid.is_some_and(|pid| group.pids.contains(&pid))
                    && f.device_uuid
                        .as_deref()
                        .is_none_or(|d| d == group.device_uuid)
            })
            .collect()
    }

    /// Enter on a group row: the group's view.
    pub(super) fn open_group(&mut self) -> bool {
        let Some((key, device_uuid)) = self.process_table.selected_group.clone() else {
            return false;
        };
        self.view = View::Group { key, device_uuid };
        self.views.group_cursor = 0;
        true
    }

    /// A key in the group's view: ↑↓ pick one of its findings, Enter its evidence.
    pub(super) fn group_action(&mut self, action: Action) -> bool {
        let View::Group { key, device_uuid } = self.view.clone() else {
            return false;
        };
        let Some(group) = self.group_shown(&key, &device_uuid) else {
            return matches!(action, Action::Up | Action::Down | Action::Open);
        };
        let findings: Vec<Finding> = self.group_findings(&group).into_iter().cloned().collect();
        match action {
            Action::Up => self.views.group_cursor = self.views.group_cursor.saturating_sub(1),
            Action::Down => {
                self.views.group_cursor =
                    (self.views.group_cursor + 1).min(findings.len().saturating_sub(1))
            }
            Action::Open => {
                if let Some(finding) = findings.get(self.views.group_cursor) {
                    self.view = View::Evidence(FindingId::of(finding));
                    self.views.evidence_last = Some(finding.clone());
                    self.views.evidence_scroll = 0;
                }
            }
            _ => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Pipeline;
    use crate::source::Source;

    fn demo_state() -> State {
        let mut source =
            crate::source::demo::DemoSource::new(0, 1.0, 10.0, crate::source::demo::SNAPSHOT_AT);
        let mut state = State::new(Pipeline::new(None), "test".into(), 1.0);
        for earlier in source.backlog() {
            state.on_sample(earlier);
        }
        state.on_sample(source.sample().expect("demo sample"));
        state
    }

    fn lines(state: &State) -> Vec<String> {
        state
            .table()
            .iter()
            .map(|e| match e {
                TableEntry::Group(g) => format!("G {}", g.key),
                TableEntry::Process { row, member } => {
                    format!("{}{}", if *member { "  " } else { "" }, row.process.pid)
                }
            })
            .collect()
    }

    #[test]
    fn g_cycles_the_groupings_and_members_sit_under_their_group() {
        let mut state = demo_state();
        let plain = lines(&state);
        assert!(plain.iter().all(|l| !l.starts_with('G')));
        state.apply_action(Action::CycleGroup);
        assert_eq!(state.process_table.group_by, GroupBy::Launcher);
        let by_launcher = lines(&state);
        // Two torchrun ranks, one per GPU: a group row per device, each with its rank.
        let groups: Vec<&String> = by_launcher.iter().filter(|l| l.starts_with("G ")).collect();
        assert_eq!(groups, ["G torchrun 41200", "G torchrun 41200"]);
        let first = by_launcher
            .iter()
            .position(|l| l.starts_with("G "))
            .expect("a group");
        assert!(
            by_launcher[first + 1].starts_with("  4123"),
            "{by_launcher:?}"
        );
        // Every process appears once, grouped or not.
        assert_eq!(by_launcher.len(), plain.len() + 2);
        state.apply_action(Action::CycleGroup);
        assert_eq!(state.process_table.group_by, GroupBy::Pod);
        let by_pod = lines(&state);
        assert!(
            by_pod.iter().any(|l| l == "G pod serving/t5-3b-0"),
            "{by_pod:?}"
        );
        assert!(
            by_pod.iter().any(|l| l == "G docker carol-finetune"),
            "{by_pod:?}"
        );
        for _ in 0..3 {
            state.apply_action(Action::CycleGroup);
        }
        assert_eq!(state.process_table.group_by, GroupBy::None);
    }

    #[test]
    fn a_group_row_opens_the_group_and_its_findings_lead_to_their_evidence() {
        let mut state = demo_state();
        // By user: bob's eval loop climbs.
        for _ in 0..4 {
            state.apply_action(Action::CycleGroup);
        }
        assert_eq!(state.process_table.group_by, GroupBy::User);
        let table = state.table();
        let at = table
            .iter()
            .position(|e| matches!(e, TableEntry::Group(g) if g.key == "user bob"))
            .expect("bob's group");
        let here = state.table_index(&table).unwrap_or(0);
        state.apply_action(if at >= here { Action::Down } else { Action::Up });
        for _ in 1..at.abs_diff(here) {
            state.apply_action(if at >= here { Action::Down } else { Action::Up });
        }
        assert_eq!(
            state
                .process_table
                .selected_group
                .as_ref()
                .map(|g| g.0.as_str()),
            Some("user bob")
        );
        assert_eq!(
            state.process_table.selected, None,
            "no process is selected with a group"
        );
        state.apply_action(Action::Open);
        let View::Group { key, device_uuid } = state.view.clone() else {
            panic!("not the group view: {:?}", state.view)
        };
        let group = state.group_shown(&key, &device_uuid).expect("shown");
        let findings = state.group_findings(&group);
        assert!(
            findings.iter().any(|f| f.kind.name() == "climb"),
            "bob's climb is the group's: {findings:?}"
        );
        let climb_at = findings
            .iter()
            .position(|f| f.kind.name() == "climb")
            .expect("climb");
        for _ in 0..climb_at {
            state.apply_action(Action::Down);
        }
        state.apply_action(Action::Open);
        assert!(matches!(state.view, View::Evidence(_)), "{:?}", state.view);
        assert_eq!(
            state.views.evidence_last.as_ref().map(|f| f.kind.name()),
            Some("climb".into())
        );
    }
}

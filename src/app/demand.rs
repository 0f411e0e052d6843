//! What the screen as last drawn needs read of the processes at the next sample (the event
//! loop hands it to the source as a `source::demand::Wanted`): the rows the table shows and a
//! screen's worth above and two below them, the one selected, the one a detail view shows,
//! the one the finding selected or whose evidence is open names (the evidence says who it
//! is); every process when the order itself needs their host figures, a filter or a grouping
//! reads them all, a view shows them all, or a recording keeps them.

use super::{State, TableLine, View};
use crate::present::sort::SortKey;
use hashbrown::HashSet;

/// Before any sample has been drawn, which processes the first screen will show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstScreen {
    /// A sample has been taken in: [`State::wanted`] says what the screen shows.
    Drawn,
    /// The table in its default order (used, largest first): its first rows are the records
    /// that hold the most, as many as the screen has lines (the first sample has no history,
    /// so the order is the figures' own, ties by pid; the next sample wants the rows near the
    /// screen too).
    Largest(usize),
    /// Another order: its first rows are not known before the figures are, so every process.
    Unknown,
}

impl State {
    /// What the first screen, `rows()` lines high (asked only before the first sample), will
    /// show of the processes, while no sample has been taken in.
    pub(crate) fn first_screen(&self, rows: impl FnOnce() -> usize) -> FirstScreen {
        if self.current.is_some() {
            FirstScreen::Drawn
        } else if self.process_table.sort == SortKey::Used && !self.process_table.sort_reversed {
            FirstScreen::Largest(rows())
        } else {
            FirstScreen::Unknown
        }
    }

    /// The pids whose figures the next sample must read, `recording` while a recording
    /// started here (`r`) takes every sample whole; `None`: every process's.
    pub(crate) fn wanted(&self, recording: bool) -> Option<HashSet<u32>> {
        let needs_all_figures = matches!(
            self.process_table.sort,
            SortKey::Cpu | SortKey::HostMemory | SortKey::Elapsed
        );
        // A filter (`/`) and a grouping (`g`) read every process's owner and figures.
        let every_row = self.process_table.filter.is_on()
            || self.process_table.group_by != crate::accounting::GroupBy::None;
        if recording || needs_all_figures || every_row || matches!(self.view, View::Group { .. }) {
            return None;
        }
        let mut pids: HashSet<u32> = HashSet::new();
        if let Some(table) = self.mouse.table.borrow().as_ref() {
            pids.extend(table.lines.iter().filter_map(|line| match line {
                TableLine::Process(pid, _) => Some(*pid),
                TableLine::Group(..) => None,
            }));
            // And a screen's worth of rows above and two below: where a scroll or a change in
            // the order brings the next rows from, so that they come with their figures.
            if let Some(observed) = &self.current {
                let first = table.lines.iter().find_map(|line| match line {
                    TableLine::Process(pid, uuid) => Some((*pid, uuid.as_str())),
                    TableLine::Group(..) => None,
                });
                let height = table.lines.len();
                pids.extend(self.process_table.pids_around(
                    observed,
                    first,
                    height,
                    height.saturating_mul(3),
                ));
            }
        }
        if let Some((pid, _)) = &self.process_table.selected {
            pids.insert(*pid);
        }
        if let View::Detail { pid, .. } = &self.view {
            pids.insert(*pid);
        }
        // The finding selected and the one whose evidence is open: the evidence says who
        // the process is (the others' lines name only its pid).
        let selected = self
            .selected_finding_index()
            .and_then(|i| self.findings().get(i))
            .and_then(|f| f.pid);
        let open = match &self.view {
            View::Evidence(id) => id.pid,
            _ => None,
        };
        pids.extend(selected.into_iter().chain(open));
        Some(pids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::TableDrawn;
    use crate::pipeline::Pipeline;

    fn state() -> State {
        State::new(Pipeline::new(None), "demo".into(), 1.0)
    }

    fn drawn(state: &State, pids: &[u32]) {
        *state.mouse.table.borrow_mut() = Some(TableDrawn {
            left: 0,
            width: 80,
            top: 3,
            lines: pids
                .iter()
                .map(|&pid| TableLine::Process(pid, "GPU-0".into()))
                .chain([TableLine::Group("alice".into(), "GPU-0".into())])
                .collect(),
        });
    }

    #[test]
    fn the_rows_drawn_and_the_selection_are_wanted_and_no_other() {
        let mut state = state();
        drawn(&state, &[10, 11]);
        state.process_table.selected = Some((99, "GPU-1".into()));
        assert_eq!(
            state.wanted(false),
            Some([10, 11, 99].into_iter().collect())
        );
        state.view = View::Detail {
            pid: 7,
            device_uuid: "GPU-0".into(),
        };
        assert!(state.wanted(false).is_some_and(|pids| pids.contains(&7)));
    }

    /// The process the finding selected names is wanted, on the screen or not, and so is
    /// the one whose evidence is open: the evidence says who it is. Another finding's is not.
    #[test]
    fn the_process_of_the_finding_selected_or_open_is_wanted() {
        let mut state = state();
        state.on_sample(crate::source::demo::node_at(7, 600.0, 1.0));
        drawn(&state, &[10]);
        state.process_table.selected = None;
        if let Some(o) = state.current_mut() {
            o.findings = [Some(4242), None, Some(4343), Some(4444)]
                .into_iter()
                .map(|pid| crate::detect::Finding {
                    kind: crate::detect::FindingKind::IdleHolder,
                    severity: crate::detect::Severity::Info,
                    device_uuid: Some("GPU-0".into()),
                    pid,
                    since: 0.0,
                    message: String::new(),
                    evidence: crate::detect::Evidence::Untyped(serde_json::json!({})),
                })
                .collect();
        }
        state.follow_findings();
        let wanted = state.wanted(false).expect("some pids");
        assert!(wanted.contains(&4242), "the first is selected: {wanted:?}");
        assert!(wanted.contains(&10), "{wanted:?}");
        assert!(
            !wanted.contains(&4343) && !wanted.contains(&4444),
            "{wanted:?}"
        );
        state.view = View::Evidence(crate::app::findings::FindingId {
            kind: crate::detect::FindingKind::IdleHolder,
            device_uuid: Some("GPU-0".into()),
            pid: Some(4444),
        });
        let wanted = state.wanted(false).expect("some pids");
        assert!(wanted.contains(&4444), "its evidence is open: {wanted:?}");
        assert!(!wanted.contains(&4343), "{wanted:?}");
    }

    /// Beside the rows drawn: a screen's worth above and two below, in the table's order,
    /// and no other row.
    #[test]
    fn the_rows_near_the_screen_are_wanted_too() {
        let mut state = state();
        state.on_sample(crate::source::demo::node_at(7, 600.0, 1.0));
        let order: Vec<(u32, String)> = state
            .rows()
            .iter()
            .map(|r| (r.process.pid, r.process.device_uuid.to_string()))
            .collect();
        assert!(
            order.len() >= 6,
            "the demo node has rows enough: {}",
            order.len()
        );
        // One line drawn, the second row: the first above it, and three below.
        *state.mouse.table.borrow_mut() = Some(TableDrawn {
            left: 0,
            width: 80,
            top: 3,
            lines: vec![TableLine::Process(order[1].0, order[1].1.clone())],
        });
        state.process_table.selected = None;
        let wanted = state.wanted(false).expect("some pids");
        let expected: HashSet<u32> = order[0..4].iter().map(|(pid, _)| *pid).collect();
        assert_eq!(wanted, expected);
    }

    /// Before the first sample, the default order names its first rows by what they hold;
    /// another order cannot, and wants every process; once a sample is in, the rows say.
    #[test]
    fn the_first_screen_is_the_largest_holders_in_the_default_order_only() {
        let mut state = state();
        assert_eq!(state.first_screen(|| 40), FirstScreen::Largest(40));
        state.process_table.sort_reversed = true;
        assert_eq!(state.first_screen(|| 40), FirstScreen::Unknown);
        state.process_table.sort_reversed = false;
        state.process_table.sort = SortKey::Pid;
        assert_eq!(state.first_screen(|| 40), FirstScreen::Unknown);
        state.process_table.sort = SortKey::Used;
        state.on_sample(crate::source::demo::node_at(7, 600.0, 1.0));
        assert_eq!(state.first_screen(|| 40), FirstScreen::Drawn);
    }

    #[test]
    fn an_order_by_host_figures_a_filter_a_grouping_or_a_recording_wants_everything() {
        let mut state = state();
        drawn(&state, &[10]);
        assert_eq!(state.wanted(true), None, "a recording keeps every process");
        for key in [SortKey::Cpu, SortKey::HostMemory, SortKey::Elapsed] {
            state.process_table.sort = key;
            assert_eq!(state.wanted(false), None, "{key:?}");
        }
        state.process_table.sort = SortKey::Used;
        assert_eq!(state.wanted(false), Some([10].into_iter().collect()));
        state.process_table.group_by = crate::accounting::GroupBy::User;
        assert_eq!(state.wanted(false), None, "a grouping sums every row");
        state.process_table.group_by = crate::accounting::GroupBy::None;
        state.process_table.filter.terms =
            crate::app::filter::parse("owner:alice").expect("a filter");
        assert_eq!(state.wanted(false), None, "a filter matches every row");
        state.process_table.filter.terms.clear();
        assert_eq!(state.wanted(false), Some([10].into_iter().collect()));
        state.view = View::Group {
            key: "alice".into(),
            device_uuid: "GPU-0".into(),
        };
        assert_eq!(state.wanted(false), None);
    }
}

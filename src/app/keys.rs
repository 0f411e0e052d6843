//! The key map: keys become actions, htop/nvtop style, and actions change the state.

use super::{strata_devices, FindingId, Focus, State, View};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// Everything a user can ask of the monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    /// Ctrl-Z: give the terminal back and stop, as SIGTSTP does in a cooked terminal.
    Suspend,
    /// Esc: close the open view. On the main screen it clears the filter (`/`), and else
    /// does nothing: `q` quits (an Esc that ends the monitor, pressed once too often, loses
    /// the screen).
    Back,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    /// `g`: the top of the list; in a replay, its start.
    GoFirst,
    /// `G`: the bottom of the list; in a replay, its end.
    GoLast,
    /// `←`: in a replay, a minute back.
    SeekBack,
    /// `→`: in a replay, a minute on.
    SeekForward,
    Open,
    FocusNext,
    CycleSort,
    /// `S`: the same key, the other way round.
    ReverseSort,
    /// `K` (or F9): signal the selected process (or a zombie context's holders).
    Signal,
    /// `a`: attach the allocator feed to the selected Python process.
    Attach,
    /// `w`: where in the selected process's code its memory is held (allocation sites).
    Sites,
    /// `o` (and `g` outside a replay): group the process table by owner, the next way.
    CycleGroup,
    /// `y`: confirm (in the signal dialog).
    Yes,
    /// `n`: decline (in the signal dialog).
    No,
    TogglePause,
    ToggleHelp,
    /// Open or close the strata view.
    ToggleStrata,
    /// The strata view: a shorter window (finer tier), a longer one, or the next one round.
    ZoomIn,
    ZoomOut,
    ZoomCycle,
    /// `R`: write the Markdown report of the instant shown to a file.
    Report,
    /// `r`: start recording (a prompt for the file's name) or stop.
    Record,
    /// `/`: the process table's filter, a prompt that takes the keys until Enter or Esc.
    Filter,
}

/// Maps a key to an action, htop/nvtop style.
pub fn key_action(key: KeyEvent) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    Some(match key.code {
        KeyCode::Char('c') if ctrl => Action::Quit,
        // Raw mode turns job control's Ctrl-Z into a key: it must still stop strata.
        KeyCode::Char('z') if ctrl => Action::Suspend,
        KeyCode::Char('q') | KeyCode::F(10) => Action::Quit,
        KeyCode::Esc => Action::Back,
        // `k` moves up as `j` moves down (vim's keys); the signal is `K`, as in nvitop.
        KeyCode::Up | KeyCode::Char('k') => Action::Up,
        KeyCode::Char('K') | KeyCode::F(9) => Action::Signal,
        KeyCode::Char('a') => Action::Attach,
        KeyCode::Char('w') => Action::Sites,
        KeyCode::Char('S') => Action::ReverseSort,
        KeyCode::Char('y') => Action::Yes,
        KeyCode::Char('n') => Action::No,
        KeyCode::Down | KeyCode::Char('j') => Action::Down,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown | KeyCode::Char(' ') => Action::PageDown,
        KeyCode::Home => Action::Top,
        KeyCode::End => Action::Bottom,
        KeyCode::Char('g') => Action::GoFirst,
        KeyCode::Char('o') => Action::CycleGroup,
        KeyCode::Char('G') => Action::GoLast,
        KeyCode::Left => Action::SeekBack,
        KeyCode::Right => Action::SeekForward,
        KeyCode::Enter => Action::Open,
        KeyCode::Tab | KeyCode::BackTab => Action::FocusNext,
        KeyCode::Char('s') | KeyCode::F(6) => Action::CycleSort,
        KeyCode::Char('p') => Action::TogglePause,
        KeyCode::Char('?') | KeyCode::Char('h') | KeyCode::F(1) => Action::ToggleHelp,
        KeyCode::Char('v') => Action::ToggleStrata,
        KeyCode::Char('+') | KeyCode::Char('=') => Action::ZoomIn,
        KeyCode::Char('-') | KeyCode::Char('_') => Action::ZoomOut,
        KeyCode::Char('z') => Action::ZoomCycle,
        KeyCode::Char('R') => Action::Report,
        KeyCode::Char('r') => Action::Record,
        KeyCode::Char('/') => Action::Filter,
        _ => return None,
    })
}

const PAGE: isize = 10;
/// The reconciliation view's lines, at most: the scroll never goes past them.
const DETAIL_LINES: usize = 48;
/// The help screen's lines, at most.
const HELP_LINES: usize = 200;
/// The evidence view's lines, at most (a long message wrapped, every field, a chart).
const EVIDENCE_LINES: usize = 60;

impl State {
    /// Applies one action.
    pub fn apply_action(&mut self, action: Action) {
        let view = self.view.clone();
        self.act(action);
        // Another view: how far it scrolls is known when it is drawn.
        if self.view != view {
            self.views.scroll_room.set(None);
        }
    }

    fn act(&mut self, action: Action) {
        // A notice answers the key before; the next key clears it.
        self.notice = None;
        // Ctrl-Z stops strata whatever is open, as it would any program in a shell.
        if action == Action::Suspend {
            self.suspend_requested = true;
            return;
        }
        if self.kill.dialog.is_some() {
            self.dialog_action(action);
            return;
        }
        if self.attach.offer.is_some() {
            self.attach_action(action);
            return;
        }
        if self.replay_action(action) {
            return;
        }
        if self.group_action(action) {
            return;
        }
        match action {
            Action::Quit => self.quit = true,
            Action::Back => match self.view {
                View::Main => self.clear_filter(),
                View::Help => self.view = self.views.help_from.take().unwrap_or(View::Main),
                _ => self.view = View::Main,
            },
            Action::ToggleHelp => {
                if self.view == View::Help {
                    self.view = self.views.help_from.take().unwrap_or(View::Main);
                } else {
                    let from = std::mem::replace(&mut self.view, View::Help);
                    self.views.help_from = (from != View::Main).then_some(from);
                    self.views.help_scroll = 0;
                }
            }
            Action::ToggleStrata => {
                self.view = if self.view == View::Strata {
                    View::Main
                } else {
                    View::Strata
                };
                self.views.help_from = None;
                self.clamp_strata_device();
            }
            Action::ZoomIn | Action::ZoomOut | Action::ZoomCycle => {
                // Only where the zoom shows: elsewhere the key would change something unseen.
                if self.view == View::Strata {
                    self.strata.zoom = match action {
                        Action::ZoomIn => self.strata.zoom.zoom_in(),
                        Action::ZoomOut => self.strata.zoom.zoom_out(),
                        _ => self.strata.zoom.cycle(),
                    };
                }
            }
            Action::TogglePause => {
                if self.pause.paused {
                    self.resume();
                } else {
                    self.pause.paused = true;
                }
            }
            Action::CycleSort => {
                self.process_table.sort = self.process_table.sort.next();
                self.process_table.sort_reversed = false;
                self.clamp_selection();
            }
            Action::ReverseSort => {
                self.process_table.sort_reversed = !self.process_table.sort_reversed;
                self.clamp_selection();
            }
            Action::Signal => self.open_kill_dialog(),
            Action::Attach => self.open_attach(),
            Action::Sites => self.open_sites(),
            Action::Report => self.write_report(),
            Action::Record => self.record_key(),
            Action::Filter => self.open_filter(),
            // Only the dialog answers these.
            Action::Yes | Action::No => {}
            // Answered before anything else, above.
            Action::Suspend => {}
            // The focus is the main screen's: elsewhere Tab would change it unseen.
            Action::FocusNext if self.view != View::Main => {}
            Action::FocusNext => {
                self.focus = match self.focus {
                    Focus::Processes => Focus::Findings,
                    Focus::Findings => Focus::Processes,
                }
            }
            Action::Open => self.open(),
            Action::Up => self.move_by(-1),
            Action::Down => self.move_by(1),
            Action::PageUp => self.move_by(-PAGE),
            Action::PageDown => self.move_by(PAGE),
            Action::Top => self.move_by(isize::MIN / 2),
            // `g` live: the next grouping of the table (in a replay it seeks to the start).
            Action::GoFirst | Action::CycleGroup => self.cycle_grouping(),
            Action::Bottom | Action::GoLast => self.move_by(isize::MAX / 2),
            // Only a replay moves in time.
            Action::SeekBack | Action::SeekForward => {}
        }
    }

    /// Enter on the main screen: the selected process's reconciliation, or the selected
    /// finding's evidence.
    fn open(&mut self) {
        if self.view != View::Main {
            return;
        }
        match self.focus {
            Focus::Processes => {
                if self.open_group() {
                    return;
                }
                if let Some((pid, device_uuid)) = self.process_table.selected.clone() {
                    self.view = View::Detail { pid, device_uuid };
                    self.views.detail_scroll = 0;
                }
            }
            Focus::Findings => {
                let Some(index) = self.selected_finding_index() else {
                    return;
                };
                let finding = self.findings()[index].clone();
                self.view = View::Evidence(FindingId::of(&finding));
                self.views.evidence_last = Some(finding);
                self.views.evidence_scroll = 0;
            }
        }
    }

    /// Keeps the strata view's selected device among those there are.
    pub(super) fn clamp_strata_device(&mut self) {
        let count = self
            .current
            .as_ref()
            .map_or(0, |o| strata_devices(&o.sample).len());
        self.strata.device = self.strata.device.min(count.saturating_sub(1));
    }

    fn move_by(&mut self, delta: isize) {
        let scroll = |at: usize, most: usize| {
            (at as isize).saturating_add(delta).clamp(0, most as isize) as usize
        };
        // A scrolling view: as far as its drawing found room for, else the most it can have.
        let room = self.views.scroll_room.get();
        let scroll_view =
            |at: usize, most: usize| scroll(at.min(most), room.map_or(most, |r| r.min(most)));
        match self.view {
            // The help screen has a couple of dozen lines: scroll within them.
            View::Help => self.views.help_scroll = scroll_view(self.views.help_scroll, HELP_LINES),
            // Drawing clamps these to the lines there are.
            View::Detail { .. } | View::Sites { .. } => {
                self.views.detail_scroll = scroll_view(self.views.detail_scroll, DETAIL_LINES)
            }
            View::Evidence(_) => {
                self.views.evidence_scroll = scroll_view(self.views.evidence_scroll, EVIDENCE_LINES)
            }
            View::Strata => {
                let count = self
                    .current
                    .as_ref()
                    .map_or(0, |o| strata_devices(&o.sample).len());
                self.strata.device = scroll(self.strata.device, count.saturating_sub(1));
            }
            // The group view takes its keys in `group_action`.
            View::Group { .. } => {}
            View::Main => match self.focus {
                Focus::Processes
                    if self.process_table.group_by != crate::accounting::GroupBy::None =>
                {
                    self.move_in_table(delta)
                }
                Focus::Processes => {
                    let rows = self.rows();
                    if rows.is_empty() {
                        return;
                    }
                    let at = self.selected_index(&rows).unwrap_or(0) as isize;
                    let to = (at.saturating_add(delta)).clamp(0, rows.len() as isize - 1) as usize;
                    let chosen = (
                        rows[to].process.pid,
                        rows[to].process.device_uuid.to_string(),
                    );
                    self.process_table.selection_moved = true;
                    self.process_table.selected = Some(chosen);
                }
                Focus::Findings => self.move_finding(delta),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Pipeline;

    fn state(interval: f64) -> State {
        State::new(
            Pipeline::new(None),
            "nvml libnvidia-ml.so.1".into(),
            interval,
        )
    }

    /// In raw mode job control's Ctrl-Z is a key: it suspends, as it would in a cooked
    /// terminal; a plain `z` still cycles the strata view's zoom.
    #[test]
    fn ctrl_z_suspends_and_z_zooms() {
        let key = |code, modifiers| key_action(KeyEvent::new(code, modifiers));
        assert_eq!(
            key(KeyCode::Char('z'), KeyModifiers::CONTROL),
            Some(Action::Suspend)
        );
        assert_eq!(
            key(KeyCode::Char('z'), KeyModifiers::NONE),
            Some(Action::ZoomCycle)
        );
        let mut s = state(1.0);
        s.apply_action(Action::Suspend);
        assert!(s.suspend_requested && !s.quit);
    }
}

//! Keys become actions; actions change the state.

use super::{Focus, State, View};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// Everything a user can ask of the monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    /// Esc: close the open view, or quit from the main screen.
    Back,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Open,
    FocusNext,
    CycleSort,
    TogglePause,
    ToggleHelp,
}

/// Maps a key to an action, htop/nvtop style.
pub fn key_action(key: KeyEvent) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    Some(match key.code {
        KeyCode::Char('c') if ctrl => Action::Quit,
        KeyCode::Char('q') | KeyCode::F(10) => Action::Quit,
        KeyCode::Esc => Action::Back,
        KeyCode::Up | KeyCode::Char('k') => Action::Up,
        KeyCode::Down | KeyCode::Char('j') => Action::Down,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown | KeyCode::Char(' ') => Action::PageDown,
        KeyCode::Home | KeyCode::Char('g') => Action::Top,
        KeyCode::End | KeyCode::Char('G') => Action::Bottom,
        KeyCode::Enter => Action::Open,
        KeyCode::Tab | KeyCode::BackTab => Action::FocusNext,
        KeyCode::Char('s') | KeyCode::F(6) => Action::CycleSort,
        KeyCode::Char('p') => Action::TogglePause,
        KeyCode::Char('?') | KeyCode::Char('h') | KeyCode::F(1) => Action::ToggleHelp,
        _ => return None,
    })
}

const PAGE: isize = 10;
/// The reconciliation view's lines, at most: the scroll never goes past them.
const DETAIL_LINES: isize = 48;

impl State {
    /// Applies one action.
    pub fn apply_action(&mut self, action: Action) {
        match action {
            Action::Quit => self.quit = true,
            Action::Back => match self.view {
                View::Main => self.quit = true,
                _ => self.view = View::Main,
            },
            Action::ToggleHelp => {
                self.view = if self.view == View::Help {
                    View::Main
                } else {
                    View::Help
                }
            }
            Action::TogglePause => {
                if self.paused {
                    self.resume();
                } else {
                    self.paused = true;
                }
            }
            Action::CycleSort => self.sort = self.sort.next(),
            Action::FocusNext => {
                self.focus = match self.focus {
                    Focus::Processes => Focus::Findings,
                    Focus::Findings => Focus::Processes,
                }
            }
            Action::Open => {
                if self.view == View::Main && self.focus == Focus::Processes {
                    if let Some((pid, device_uuid)) = self.selected.clone() {
                        self.view = View::Detail { pid, device_uuid };
                        self.detail_scroll = 0;
                    }
                }
            }
            Action::Up => self.move_by(-1),
            Action::Down => self.move_by(1),
            Action::PageUp => self.move_by(-PAGE),
            Action::PageDown => self.move_by(PAGE),
            Action::Top => self.move_by(isize::MIN / 2),
            Action::Bottom => self.move_by(isize::MAX / 2),
        }
    }

    fn move_by(&mut self, delta: isize) {
        if self.view == View::Help {
            // The help screen has about twenty lines: scroll within them.
            self.help_scroll = (self.help_scroll as isize)
                .saturating_add(delta)
                .clamp(0, 20) as usize;
            return;
        }
        if let View::Detail { .. } = self.view {
            // The view has some forty lines at most; drawing clamps to what there is.
            self.detail_scroll = (self.detail_scroll as isize)
                .saturating_add(delta)
                .clamp(0, DETAIL_LINES) as usize;
            return;
        }
        if self.view != View::Main {
            return;
        }
        match self.focus {
            Focus::Processes => {
                let rows = self.rows();
                if rows.is_empty() {
                    return;
                }
                let at = self.selected_index(&rows).unwrap_or(0) as isize;
                let to = (at.saturating_add(delta)).clamp(0, rows.len() as isize - 1) as usize;
                let chosen = (rows[to].process.pid, rows[to].process.device_uuid.clone());
                self.selection_moved = true;
                self.selected = Some(chosen);
            }
            Focus::Findings => {
                let count = self.current.as_ref().map_or(0, |o| o.findings.len());
                let to = (self.finding_scroll as isize).saturating_add(delta);
                self.finding_scroll = to.clamp(0, count.saturating_sub(1) as isize) as usize;
            }
        }
    }
}

//! Keys become actions; actions, and what the collector says of its polls, change the state.

use super::{strata_devices, FindingId, Focus, State, View};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::time::{Duration, Instant};

/// Everything a user can ask of the monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    /// Ctrl-Z: give the terminal back and stop, as SIGTSTP does in a cooked terminal.
    Suspend,
    /// Esc: close the open view. On the main screen it does nothing: `q` quits (an Esc that
    /// ends the monitor, pressed once too often, loses the screen).
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
    /// `k`: signal the selected process (or a zombie context's holders).
    Signal,
    /// `a`: attach the allocator feed to the selected Python process.
    Attach,
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
        KeyCode::Up => Action::Up,
        KeyCode::Char('k') | KeyCode::F(9) => Action::Signal,
        KeyCode::Char('a') => Action::Attach,
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
        _ => return None,
    })
}

/// How current the data on screen is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// The polls come back in time.
    Live,
    /// A poll has been running longer than it should (NVML stuck in the driver): the data
    /// shown is `data_age` old (`None`: nothing shown yet).
    Stalled {
        data_age: Option<Duration>,
        poll_running: Duration,
    },
    /// The last poll failed: the data shown is from an earlier one, `data_age` old.
    Failed { data_age: Option<Duration> },
}

impl Freshness {
    pub fn is_live(self) -> bool {
        self == Freshness::Live
    }
}

/// A poll is overdue once it has run this long (or the interval, if longer): a redraw a
/// second is then worth its bytes, and a shorter wait would flag the ordinary jitter of a
/// short interval.
const STALL_AFTER: Duration = Duration::from_secs(1);
/// How often a seek's progress is redrawn.
const REPLAY_PROGRESS_EVERY: Duration = Duration::from_millis(200);

impl State {
    /// The collector started a poll at `now`.
    pub fn on_poll_started(&mut self, now: Instant) {
        self.poll_started = Some(now);
    }

    /// The poll ended in an error: the data shown stays, and grows old.
    pub fn on_poll_failed(&mut self, message: String) {
        self.poll_started = None;
        self.poll_failed = true;
        self.status = Some(message);
    }

    /// How long a poll may run before it is overdue.
    pub fn stall_after(&self) -> Duration {
        Duration::try_from_secs_f64(self.interval)
            .unwrap_or(STALL_AFTER)
            .max(STALL_AFTER)
    }

    /// How current the data shown is at `now`.
    pub fn freshness_at(&self, now: Instant) -> Freshness {
        // A replay's source waits for each sample's time on purpose: never a stall.
        if self.replay.is_some() && !self.poll_failed {
            return Freshness::Live;
        }
        let data_age = self.shown_since.map(|t| now.saturating_duration_since(t));
        match self.poll_started {
            Some(started) if now.saturating_duration_since(started) >= self.stall_after() => {
                Freshness::Stalled {
                    data_age,
                    poll_running: now.saturating_duration_since(started),
                }
            }
            _ if self.poll_failed => Freshness::Failed { data_age },
            _ => Freshness::Live,
        }
    }

    /// Brings [`State::freshness`] up to `now`, before drawing.
    pub fn refresh(&mut self, now: Instant) {
        self.freshness = self.freshness_at(now);
        self.refresh_replay();
        self.poll_attach();
    }

    /// When the screen must next be redrawn with no event: the moment the running poll
    /// becomes overdue, then each second while it stays so (the header counts the seconds).
    /// `None` when all is well (no poll running, or paused): the monitor then sleeps until
    /// data or input arrives.
    pub fn next_wake(&self, now: Instant) -> Option<Instant> {
        if self.attaching.is_some() {
            return Some(now + super::ATTACH_POLL);
        }
        if let Some(replay) = &self.replay {
            // A seek under way: its progress, a few times a second.
            let seeking =
                replay.status.seeking.is_some() || replay.control.status().seeking.is_some();
            return seeking.then(|| now + REPLAY_PROGRESS_EVERY);
        }
        if self.paused {
            return None;
        }
        let started = self.poll_started?;
        let due = started + self.stall_after();
        if now < due {
            return Some(due);
        }
        let running = now.saturating_duration_since(started);
        Some(started + Duration::from_secs(running.as_secs() + 1))
    }
}

const PAGE: isize = 10;
/// The reconciliation view's lines, at most: the scroll never goes past them.
const DETAIL_LINES: usize = 48;
/// The help screen's lines, at most.
const HELP_LINES: usize = 80;
/// The evidence view's lines, at most (a long message wrapped, every field, a chart).
const EVIDENCE_LINES: usize = 60;

impl State {
    /// Applies one action.
    pub fn apply_action(&mut self, action: Action) {
        let view = self.view.clone();
        self.act(action);
        // Another view: how far it scrolls is known when it is drawn.
        if self.view != view {
            self.scroll_room.set(None);
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
        if self.dialog.is_some() {
            self.dialog_action(action);
            return;
        }
        if self.attach_offer.is_some() {
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
            Action::Suspend => self.suspend_requested = true,
            Action::Back => match self.view {
                View::Main => {}
                View::Help => self.view = self.help_from.take().unwrap_or(View::Main),
                _ => self.view = View::Main,
            },
            Action::ToggleHelp => {
                if self.view == View::Help {
                    self.view = self.help_from.take().unwrap_or(View::Main);
                } else {
                    let from = std::mem::replace(&mut self.view, View::Help);
                    self.help_from = (from != View::Main).then_some(from);
                    self.help_scroll = 0;
                }
            }
            Action::ToggleStrata => {
                self.view = if self.view == View::Strata {
                    View::Main
                } else {
                    View::Strata
                };
                self.help_from = None;
                self.clamp_strata_device();
            }
            Action::ZoomIn | Action::ZoomOut | Action::ZoomCycle => {
                // Only where the zoom shows: elsewhere the key would change something unseen.
                if self.view == View::Strata {
                    self.zoom = match action {
                        Action::ZoomIn => self.zoom.zoom_in(),
                        Action::ZoomOut => self.zoom.zoom_out(),
                        _ => self.zoom.cycle(),
                    };
                }
            }
            Action::TogglePause => {
                if self.paused {
                    self.resume();
                } else {
                    self.paused = true;
                }
            }
            Action::CycleSort => {
                self.sort = self.sort.next();
                self.sort_reversed = false;
                self.clamp_selection();
            }
            Action::ReverseSort => {
                self.sort_reversed = !self.sort_reversed;
                self.clamp_selection();
            }
            Action::Signal => self.open_kill_dialog(),
            Action::Attach => self.open_attach(),
            Action::Report => self.write_report(),
            Action::Record => self.record_key(),
            // Only the dialog answers these.
            Action::Yes | Action::No => {}
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
                if let Some((pid, device_uuid)) = self.selected.clone() {
                    self.view = View::Detail { pid, device_uuid };
                    self.detail_scroll = 0;
                }
            }
            Focus::Findings => {
                let Some(index) = self.selected_finding_index() else {
                    return;
                };
                let finding = self.findings()[index].clone();
                self.view = View::Evidence(FindingId::of(&finding));
                self.evidence_last = Some(finding);
                self.evidence_scroll = 0;
            }
        }
    }

    /// Keeps the strata view's selected device among those there are.
    pub(super) fn clamp_strata_device(&mut self) {
        let count = self
            .current
            .as_ref()
            .map_or(0, |o| strata_devices(&o.sample).len());
        self.strata_device = self.strata_device.min(count.saturating_sub(1));
    }

    fn move_by(&mut self, delta: isize) {
        let scroll = |at: usize, most: usize| {
            (at as isize).saturating_add(delta).clamp(0, most as isize) as usize
        };
        // A scrolling view: as far as its drawing found room for, else the most it can have.
        let room = self.scroll_room.get();
        let scroll_view =
            |at: usize, most: usize| scroll(at.min(most), room.map_or(most, |r| r.min(most)));
        match self.view {
            // The help screen has a couple of dozen lines: scroll within them.
            View::Help => self.help_scroll = scroll_view(self.help_scroll, HELP_LINES),
            // Drawing clamps these to the lines there are.
            View::Detail { .. } => {
                self.detail_scroll = scroll_view(self.detail_scroll, DETAIL_LINES)
            }
            View::Evidence(_) => {
                self.evidence_scroll = scroll_view(self.evidence_scroll, EVIDENCE_LINES)
            }
            View::Strata => {
                let count = self
                    .current
                    .as_ref()
                    .map_or(0, |o| strata_devices(&o.sample).len());
                self.strata_device = scroll(self.strata_device, count.saturating_sub(1));
            }
            // The group view takes its keys in `group_action`.
            View::Group { .. } => {}
            View::Main => match self.focus {
                Focus::Processes if self.group_by != crate::accounting::GroupBy::None => {
                    self.move_in_table(delta)
                }
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
                Focus::Findings => self.move_finding(delta),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Pipeline;
    use crate::source::demo::node_at;

    fn state(interval: f64) -> State {
        State::new(
            Pipeline::new(None),
            "nvml libnvidia-ml.so.1".into(),
            interval,
        )
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// The stall of issue 7: polls that take 3 s at a 1 s interval. Between samples the poll
    /// is overdue, the data's age and the poll's time are counted, and the next sample makes
    /// it live again.
    #[test]
    fn a_poll_running_past_the_interval_is_a_stall_until_its_sample_comes() {
        let t0 = Instant::now();
        let mut s = state(1.0);
        s.on_sample_at(node_at(0, 100.0, 10.0), t0);
        assert_eq!(s.freshness_at(t0), Freshness::Live);
        s.on_poll_started(t0 + secs(1.0));
        assert_eq!(s.freshness_at(t0 + secs(1.5)), Freshness::Live, "in time");
        assert_eq!(
            s.freshness_at(t0 + secs(12.25)),
            Freshness::Stalled {
                data_age: Some(secs(12.25)),
                poll_running: secs(11.25)
            }
        );
        s.on_sample_at(node_at(0, 110.0, 10.0), t0 + secs(13.0));
        assert_eq!(s.freshness_at(t0 + secs(13.5)), Freshness::Live);
    }

    #[test]
    fn a_long_interval_leaves_a_poll_its_whole_interval() {
        let t0 = Instant::now();
        let mut s = state(5.0);
        s.on_sample_at(node_at(0, 100.0, 10.0), t0);
        s.on_poll_started(t0);
        assert!(s.freshness_at(t0 + secs(4.9)).is_live());
        assert!(!s.freshness_at(t0 + secs(5.0)).is_live());
        // A tiny interval still gives a poll a second: no flicker on ordinary jitter.
        let mut s = state(0.1);
        s.on_poll_started(t0);
        assert!(s.freshness_at(t0 + secs(0.9)).is_live());
        assert_eq!(
            s.freshness_at(t0 + secs(1.0)),
            Freshness::Stalled {
                data_age: None,
                poll_running: secs(1.0)
            },
            "a first poll that hangs: nothing shown yet"
        );
    }

    /// No timer when all is well: between polls, and during a poll until it is overdue, the
    /// only wake-up is the moment it would become overdue; then one a second, on the second.
    #[test]
    fn the_screen_wakes_by_itself_only_for_an_overdue_poll() {
        let t0 = Instant::now();
        let mut s = state(1.0);
        assert_eq!(s.next_wake(t0), None, "before any poll");
        s.on_sample_at(node_at(0, 100.0, 10.0), t0);
        assert_eq!(s.next_wake(t0 + secs(0.5)), None, "between polls");
        s.on_poll_started(t0 + secs(1.0));
        assert_eq!(
            s.next_wake(t0 + secs(1.01)),
            Some(t0 + secs(2.0)),
            "armed for when it would be overdue"
        );
        s.on_sample_at(node_at(0, 101.0, 10.0), t0 + secs(1.05));
        assert_eq!(s.next_wake(t0 + secs(1.05)), None, "disarmed by the sample");
        s.on_poll_started(t0 + secs(2.0));
        assert_eq!(s.next_wake(t0 + secs(3.0)), Some(t0 + secs(4.0)));
        assert_eq!(s.next_wake(t0 + secs(4.3)), Some(t0 + secs(5.0)));
        s.apply_action(Action::TogglePause);
        assert_eq!(
            s.next_wake(t0 + secs(4.3)),
            None,
            "paused: nothing to count"
        );
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

    #[test]
    fn a_failed_poll_leaves_the_data_stale_until_one_succeeds() {
        let t0 = Instant::now();
        let mut s = state(1.0);
        s.on_sample_at(node_at(0, 100.0, 10.0), t0);
        s.on_poll_started(t0 + secs(1.0));
        s.on_poll_failed("NVML: Unknown Error".into());
        assert_eq!(
            s.freshness_at(t0 + secs(1.2)),
            Freshness::Failed {
                data_age: Some(secs(1.2))
            }
        );
        assert_eq!(s.next_wake(t0 + secs(1.2)), None, "no poll running");
        assert_eq!(s.status.as_deref(), Some("NVML: Unknown Error"));
        s.on_sample_at(node_at(0, 102.0, 10.0), t0 + secs(2.1));
        assert!(s.freshness_at(t0 + secs(2.2)).is_live());
        assert_eq!(s.status, None);
    }

    /// The age is that of the data on screen: while paused, samples queue; on resume the
    /// newest one is shown, and the age counts from its arrival.
    #[test]
    fn the_age_is_that_of_the_sample_shown() {
        let t0 = Instant::now();
        let mut s = state(1.0);
        s.on_sample_at(node_at(0, 100.0, 10.0), t0);
        s.apply_action(Action::TogglePause);
        s.on_sample_at(node_at(0, 101.0, 10.0), t0 + secs(1.0));
        s.on_sample_at(node_at(0, 102.0, 10.0), t0 + secs(2.0));
        assert_eq!(
            s.shown_since,
            Some(t0),
            "paused: the first one is still shown"
        );
        s.apply_action(Action::TogglePause);
        while s.catch_up(Duration::ZERO) > 0 {}
        s.on_poll_started(t0 + secs(3.0));
        assert_eq!(
            s.freshness_at(t0 + secs(5.0)),
            Freshness::Stalled {
                data_age: Some(secs(3.0)),
                poll_running: secs(2.0)
            }
        );
    }
}

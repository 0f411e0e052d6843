//! The monitor's side of `strata replay`: keys that move the replay clock (pause, speed,
//! seek), the model rebuilt by a seek, and checkpoints of the model offered as it plays.

use super::{Action, State, View};
use crate::replay::{Control, Model, ReplayStatus, SeekTarget, SEEK_STEP_SECS};
use std::sync::Arc;
use std::time::Instant;

/// What the monitor holds of a replay.
#[derive(Debug)]
pub struct ReplayView {
    pub(crate) control: Arc<Control>,
    /// As of the last [`State::refresh`]: drawing reads this, never the shared state.
    pub(crate) status: ReplayStatus,
}

impl ReplayView {
    pub fn new(control: Arc<Control>) -> Self {
        let status = control.status();
        ReplayView { control, status }
    }
}

impl State {
    /// A replay's model rebuilt up to a seek's target: shown instead of all that came before.
    pub(crate) fn on_rebuilt(&mut self, model: Model, now: Instant) {
        self.polls.started = None;
        self.polls.failed = false;
        self.polls.last_arrival = Some(now);
        self.pipeline = model.pipeline;
        self.last_known = model.last_known;
        self.process_table.sort_memory = model.sort_memory;
        self.show(model.current);
        self.shown(now);
        if let Some(replay) = &mut self.replay {
            replay.status = replay.control.status();
        }
    }

    /// As it plays, the model is kept now and then, so that a seek back starts near its
    /// target rather than at the start.
    pub(super) fn offer_replay_checkpoint(&self) {
        let Some(replay) = &self.replay else { return };
        let Some(time) = self.current.as_ref().map(|o| o.sample.time) else {
            return;
        };
        // Copied only when kept: one sample in many.
        if !replay.control.wants_checkpoint(time) {
            return;
        }
        replay.control.keep_checkpoint(
            Model {
                pipeline: self.pipeline.clone(),
                last_known: self.last_known.clone(),
                sort_memory: self.process_table.sort_memory.clone(),
                current: self.current.clone(),
            },
            None,
        );
    }

    /// The keys a replay gives their own meaning; says whether `action` was one of them.
    /// `p` pauses the replay clock, `+`/`-` change its speed (in the strata view they still
    /// zoom), `←`/`→` seek a minute, `g`/`G` to the start and the end.
    pub(super) fn replay_action(&mut self, action: Action) -> bool {
        let Some(replay) = &self.replay else {
            return false;
        };
        let control = &replay.control;
        match action {
            Action::TogglePause => control.toggle_pause(),
            Action::ZoomIn if self.view != View::Strata => control.step_speed(1),
            Action::ZoomOut if self.view != View::Strata => control.step_speed(-1),
            Action::GoFirst => control.seek(SeekTarget::At(f64::NEG_INFINITY)),
            Action::GoLast => control.seek(SeekTarget::End),
            Action::SeekBack | Action::SeekForward => {
                let step = if action == Action::SeekBack {
                    -SEEK_STEP_SECS
                } else {
                    SEEK_STEP_SECS
                };
                let status = control.status();
                // From where a seek under way is going, so that keys pressed quickly add up.
                let base = match status.seeking {
                    Some((SeekTarget::At(t), _)) => Some(t),
                    Some((SeekTarget::End, _)) => status.last_time,
                    None => None,
                }
                .or_else(|| self.current.as_ref().map(|o| o.sample.time));
                let Some(base) = base else { return true };
                let base = base.max(status.first_time);
                let mut target = base + step;
                if let Some(last) = status.last_time {
                    if target >= last {
                        control.seek(SeekTarget::End);
                        self.refresh_replay();
                        return true;
                    }
                }
                target = target.max(status.first_time);
                control.seek(SeekTarget::At(target));
            }
            _ => return false,
        }
        self.refresh_replay();
        true
    }

    /// Copies the replay's shared state for drawing.
    pub(super) fn refresh_replay(&mut self) {
        if let Some(replay) = &mut self.replay {
            replay.status = replay.control.status();
        }
    }
}

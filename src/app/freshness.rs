//! What the collector says of its polls, and how current that makes the data on screen:
//! live, stalled (a poll running past its time) or failed; and when the screen must wake by
//! itself to say so.

use super::State;
use std::time::{Duration, Instant};

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
    pub(crate) fn is_live(self) -> bool {
        self == Freshness::Live
    }
}

/// What the collector said of its polls, and how current that makes the data shown.
#[derive(Debug)]
pub struct Polls {
    /// When the poll now running started; `None` between polls.
    pub(crate) started: Option<Instant>,
    /// Whether the last poll failed (its error is in `error`).
    pub(crate) failed: bool,
    /// The last error from the source, shown in the footer until a sample is shown.
    pub(crate) error: Option<String>,
    /// When the last sample arrived (shown, or queued while paused).
    pub(crate) last_arrival: Option<Instant>,
    /// When the sample shown arrived: the age of the data on screen.
    pub(crate) shown_since: Option<Instant>,
    /// How current the data shown is, as of the last [`State::refresh`]: drawing reads it,
    /// so that it never looks at the clock itself.
    pub(crate) freshness: Freshness,
}

impl Default for Polls {
    fn default() -> Self {
        Polls {
            started: None,
            failed: false,
            error: None,
            last_arrival: None,
            shown_since: None,
            freshness: Freshness::Live,
        }
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
    pub(crate) fn on_poll_started(&mut self, now: Instant) {
        self.polls.started = Some(now);
    }

    /// The poll ended in an error: the data shown stays, and grows old.
    pub(crate) fn on_poll_failed(&mut self, message: String) {
        self.polls.started = None;
        self.polls.failed = true;
        self.polls.error = Some(message);
    }

    /// How long a poll may run before it is overdue.
    pub(crate) fn stall_after(&self) -> Duration {
        Duration::try_from_secs_f64(self.setup.interval)
            .unwrap_or(STALL_AFTER)
            .max(STALL_AFTER)
    }

    /// How current the data shown is at `now`.
    pub(crate) fn freshness_at(&self, now: Instant) -> Freshness {
        // A replay's source waits for each sample's time on purpose: never a stall.
        if self.replay.is_some() && !self.polls.failed {
            return Freshness::Live;
        }
        let data_age = self
            .polls
            .shown_since
            .map(|t| now.saturating_duration_since(t));
        match self.polls.started {
            Some(started) if now.saturating_duration_since(started) >= self.stall_after() => {
                Freshness::Stalled {
                    data_age,
                    poll_running: now.saturating_duration_since(started),
                }
            }
            _ if self.polls.failed => Freshness::Failed { data_age },
            _ => Freshness::Live,
        }
    }

    /// Brings [`Polls::freshness`] up to `now`, before drawing.
    pub(crate) fn refresh(&mut self, now: Instant) {
        self.polls.freshness = self.freshness_at(now);
        self.refresh_replay();
        self.poll_attach();
    }

    /// When the screen must next be redrawn with no event: the moment the running poll
    /// becomes overdue, then each second while it stays so (the header counts the seconds).
    /// `None` when all is well (no poll running, or paused): the monitor then sleeps until
    /// data or input arrives.
    pub(crate) fn next_wake(&self, now: Instant) -> Option<Instant> {
        if self.attach.under_way.is_some() {
            return Some(now + super::ATTACH_POLL);
        }
        if let Some(replay) = &self.replay {
            // A seek under way: its progress, a few times a second.
            let seeking =
                replay.status.seeking.is_some() || replay.control.status().seeking.is_some();
            return seeking.then(|| now + REPLAY_PROGRESS_EVERY);
        }
        if self.pause.paused {
            return None;
        }
        let started = self.polls.started?;
        let due = started + self.stall_after();
        if now < due {
            return Some(due);
        }
        let running = now.saturating_duration_since(started);
        Some(started + Duration::from_secs(running.as_secs() + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::Action;
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

    /// A stall: polls that take 3 s at a 1 s interval. Between samples the poll is overdue,
    /// the data's age and the poll's time are counted, and the next sample makes it live
    /// again.
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
        assert_eq!(s.polls.error.as_deref(), Some("NVML: Unknown Error"));
        s.on_sample_at(node_at(0, 102.0, 10.0), t0 + secs(2.1));
        assert!(s.freshness_at(t0 + secs(2.2)).is_live());
        assert_eq!(s.polls.error, None);
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
            s.polls.shown_since,
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

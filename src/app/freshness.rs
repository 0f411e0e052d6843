//! What the collector says of its polls, and how current that makes the data on screen:
//! live, stalled (a poll running past its time) or failed; and when the screen must wake by
//! itself to say so.

use super::State;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// When the collector's last poll started and whether it still runs: set by the sampling
/// thread, read by the event loop when something else wakes it. A poll's start is not news
/// worth a wake (its sample follows within milliseconds); the loop wakes by itself only when
/// a poll that started on time would be overdue ([`State::next_wake`]).
#[derive(Debug)]
pub(crate) struct PollClock {
    base: Instant,
    /// The last start, in nanoseconds from `base`, shifted left one, with the low bit set
    /// while that poll runs; 0 before the first poll. One word, so a reader never sees one
    /// poll's start with another's end.
    word: AtomicU64,
}

impl PollClock {
    pub(crate) fn new() -> Arc<PollClock> {
        Arc::new(PollClock {
            base: Instant::now(),
            word: AtomicU64::new(0),
        })
    }

    /// A poll starts at `at`.
    pub(crate) fn start(&self, at: Instant) {
        // At most 2^63 - 1 (292 years), so that the shift keeps every bit.
        let nanos = u64::try_from(at.saturating_duration_since(self.base).as_nanos())
            .map_or(u64::MAX >> 1, |n| n.min(u64::MAX >> 1));
        self.word.store((nanos << 1) | 1, Ordering::Release);
    }

    /// The poll started last is over (its sample or its error is on its way).
    pub(crate) fn end(&self) {
        self.word.fetch_and(!1, Ordering::Release);
    }

    /// When the last poll started, and whether it still runs; `None` before the first.
    pub(crate) fn read(&self) -> Option<(Instant, bool)> {
        let word = self.word.load(Ordering::Acquire);
        (word != 0).then(|| (self.base + Duration::from_nanos(word >> 1), word & 1 == 1))
    }
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
    pub(crate) fn is_live(self) -> bool {
        self == Freshness::Live
    }
}

/// What the collector said of its polls, and how current that makes the data shown.
#[derive(Debug)]
pub struct Polls {
    /// The collector's clock of its polls, where it keeps one (live monitoring): read
    /// instead of `started`.
    pub(crate) clock: Option<Arc<PollClock>>,
    /// When the poll now running started; `None` between polls. Kept where there is no
    /// clock.
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
            clock: None,
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
    /// Reads the collector's polls from `clock` from now on.
    pub(crate) fn keep_poll_clock(&mut self, clock: Arc<PollClock>) {
        self.polls.clock = Some(clock);
    }

    /// A poll started at `now` (where no clock says so).
    #[cfg(test)]
    pub(crate) fn on_poll_started(&mut self, now: Instant) {
        self.polls.started = Some(now);
    }

    /// When the poll now running started, if one runs.
    fn poll_running(&self) -> Option<Instant> {
        match &self.polls.clock {
            Some(clock) => clock.read().and_then(|(at, running)| running.then_some(at)),
            None => self.polls.started,
        }
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
        match self.poll_running() {
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
    /// Between polls, with the collector's clock, the moment the next poll would be overdue
    /// if it started on time (an interval after the last started; or, before the first or
    /// where that moment has passed with no poll running, `stall_after` from now): every
    /// sample in time comes first and moves it on, so the monitor wakes only for data or
    /// input. `None` with no clock and no poll running, or paused.
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
        let Some(started) = self.poll_running() else {
            let clock = self.polls.clock.as_ref()?;
            let interval = Duration::try_from_secs_f64(self.setup.interval).unwrap_or_default();
            let due = clock
                .read()
                .map(|(last, _)| last + interval + self.stall_after())
                .filter(|&due| due > now);
            return Some(due.unwrap_or(now + self.stall_after()));
        };
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

    /// With the collector's clock the loop is not woken when a poll starts: between polls
    /// it is armed for the moment the next poll would be overdue if it started on time; a
    /// poll that hangs is overdue at that moment, and one that starts late gets its own
    /// stall time.
    #[test]
    fn with_the_clock_the_screen_wakes_only_when_a_poll_would_be_overdue() {
        let ms = Duration::from_millis;
        let clock = PollClock::new();
        let t0 = Instant::now();
        let mut s = state(1.0);
        s.keep_poll_clock(clock.clone());
        assert_eq!(
            s.next_wake(t0),
            Some(t0 + ms(1000)),
            "no poll yet: a look in a second"
        );
        clock.start(t0);
        assert_eq!(
            s.next_wake(t0 + ms(1)),
            Some(t0 + ms(1000)),
            "the first poll's stall"
        );
        clock.end();
        s.on_sample_at(node_at(0, 100.0, 10.0), t0 + ms(2));
        assert_eq!(
            s.next_wake(t0 + ms(2)),
            Some(t0 + ms(2000)),
            "the next poll, due at 1 s, overdue at 2 s"
        );
        assert!(s.freshness_at(t0 + ms(1500)).is_live());
        // It starts on time and hangs: at that moment it is found overdue.
        clock.start(t0 + ms(1000));
        assert_eq!(
            s.freshness_at(t0 + ms(2000)),
            Freshness::Stalled {
                data_age: Some(ms(1998)),
                poll_running: ms(1000)
            }
        );
        assert_eq!(s.next_wake(t0 + ms(2000)), Some(t0 + ms(3000)));
        clock.end();
        s.on_sample_at(node_at(0, 101.0, 10.0), t0 + ms(2500));
        assert!(s.freshness_at(t0 + ms(2500)).is_live());
        assert_eq!(s.next_wake(t0 + ms(2500)), Some(t0 + ms(3000)));
        // That moment comes with no poll running (the collector late): a look a second on.
        assert_eq!(s.next_wake(t0 + ms(3000)), Some(t0 + ms(4000)));
        assert!(s.freshness_at(t0 + ms(3000)).is_live());
        // A poll that starts late is overdue a second after its own start.
        clock.start(t0 + ms(3200));
        assert_eq!(s.next_wake(t0 + ms(3300)), Some(t0 + ms(4200)));
        assert!(s.freshness_at(t0 + ms(4100)).is_live());
        assert!(!s.freshness_at(t0 + ms(4200)).is_live());
        s.apply_action(Action::TogglePause);
        assert_eq!(s.next_wake(t0 + ms(4300)), None, "paused: nothing to count");
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

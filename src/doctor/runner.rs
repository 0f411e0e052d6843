//! Lanes of checks, each on its own thread, and a collector that never waits on one for
//! longer than the timeout.
//!
//! A lane announces each step that may block (`step`: an NVML call, a read of `/proc`) and
//! reports each check when it has it. Every event restarts that lane's clock; a lane silent
//! for the whole timeout is abandoned: its announced step becomes a timed-out check, and
//! whatever it sends later is ignored. Its thread is left to finish or hang on its own: the
//! process exits without waiting for it.

use super::{Check, Group, Status};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// Where a lane's checks go among the others of their group: lanes are shown in this order.
pub(crate) type Order = (u32, u32);

/// What a lane is about to do, in case it does not come back.
#[derive(Debug, Clone)]
struct Step {
    group: Group,
    check: &'static str,
    subject: Option<String>,
    /// The call or read: `nvmlDeviceGetMigMode`.
    what: String,
    /// What to do if it hangs.
    fix: &'static str,
}

enum Event {
    Opened { lane: usize, order: Order },
    Step { lane: usize, step: Step },
    Report { lane: usize, check: Check },
    Listed { pids: Vec<u32> },
    Closed { lane: usize, panicked: bool },
}

/// One lane's end of the channel, given to the lane's thread.
pub(crate) struct Lane {
    id: usize,
    tx: Sender<Event>,
    next_id: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Lane {
    /// Announces a step that may block, for the check `check` of `group`.
    pub(crate) fn step(
        &self,
        group: Group,
        check: &'static str,
        subject: Option<&str>,
        what: &str,
        fix: &'static str,
    ) {
        let step = Step {
            group,
            check,
            subject: subject.map(str::to_string),
            what: what.to_string(),
            fix,
        };
        let _ = self.tx.send(Event::Step {
            lane: self.id,
            step,
        });
    }

    pub(crate) fn report(&self, check: Check) {
        let _ = self.tx.send(Event::Report {
            lane: self.id,
            check,
        });
    }

    /// The pids NVML listed (any lane may send some; the collector keeps them all).
    pub(crate) fn listed(&self, pids: Vec<u32>) {
        let _ = self.tx.send(Event::Listed { pids });
    }

    /// Starts another lane, shown at `order`.
    pub(crate) fn spawn(&self, order: Order, body: impl FnOnce(Lane) + Send + 'static) {
        spawn(&self.tx, &self.next_id, order, body);
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        let _ = self.tx.send(Event::Closed {
            lane: self.id,
            panicked: std::thread::panicking(),
        });
    }
}

fn spawn(
    tx: &Sender<Event>,
    next_id: &std::sync::Arc<std::sync::atomic::AtomicUsize>,
    order: Order,
    body: impl FnOnce(Lane) + Send + 'static,
) {
    let id = next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Opened before the thread starts: the collector waits for the lane from now on.
    let _ = tx.send(Event::Opened { lane: id, order });
    let (lane_tx, lane_next) = (tx.clone(), next_id.clone());
    let started = std::thread::Builder::new()
        .name(format!("doctor-{id}"))
        .spawn(move || {
            body(Lane {
                id,
                tx: lane_tx,
                next_id: lane_next,
            })
        });
    if let Err(e) = started {
        let detail = format!("cannot start a thread for a check: {e}");
        let check = Check::missing(
            Group::Driver,
            "thread",
            &detail,
            "the node is out of threads or memory: try again",
        );
        let _ = tx.send(Event::Report { lane: id, check });
        let _ = tx.send(Event::Closed {
            lane: id,
            panicked: false,
        });
    }
}

/// What a run of lanes found.
pub(crate) struct Finished {
    /// In group order is left to the report; here, by lane order and then as reported.
    pub(crate) checks: Vec<Check>,
    /// Every pid NVML listed, once; `None` when no process list was read at all.
    pub(crate) listed: Option<Vec<u32>>,
}

#[derive(Default)]
struct LaneState {
    order: Order,
    open: bool,
    last_heard: Option<Instant>,
    step: Option<Step>,
    checks: Vec<Check>,
}

/// Starts lanes and collects what they report.
pub(crate) struct Runner {
    tx: Sender<Event>,
    rx: Receiver<Event>,
    next_id: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    timeout: Duration,
}

impl Runner {
    pub(crate) fn new(timeout: Duration) -> Runner {
        let (tx, rx) = mpsc::channel();
        Runner {
            tx,
            rx,
            next_id: Default::default(),
            timeout,
        }
    }

    pub(crate) fn spawn(&mut self, order: Order, body: impl FnOnce(Lane) + Send + 'static) {
        spawn(&self.tx, &self.next_id, order, body);
    }

    /// Waits for every lane to close, abandoning each that stays silent for the timeout.
    pub(crate) fn finish(self) -> Finished {
        let Runner {
            tx, rx, timeout, ..
        } = self;
        drop(tx);
        let mut lanes: BTreeMap<usize, LaneState> = BTreeMap::new();
        let mut listed: Option<BTreeSet<u32>> = None;
        loop {
            let now = Instant::now();
            let open: Vec<(usize, Instant)> = lanes
                .iter()
                .filter(|(_, l)| l.open)
                .map(|(id, l)| (*id, l.last_heard.unwrap_or(now) + timeout))
                .collect();
            // Abandon the lanes silent for too long.
            for (id, deadline) in &open {
                if *deadline <= now {
                    if let Some(lane) = lanes.get_mut(id) {
                        abandon(lane, timeout);
                    }
                }
            }
            let wait = open
                .iter()
                .map(|(_, deadline)| deadline.saturating_duration_since(now))
                .filter(|d| !d.is_zero())
                .min();
            let event = match wait {
                Some(wait) => rx.recv_timeout(wait),
                // Nothing open: take what is already queued (the first lanes' Opened).
                None => rx.try_recv().map_err(|e| match e {
                    mpsc::TryRecvError::Empty => RecvTimeoutError::Timeout,
                    mpsc::TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
                }),
            };
            match event {
                Ok(event) => apply(&mut lanes, &mut listed, event),
                Err(RecvTimeoutError::Timeout) if wait.is_none() => break,
                Err(RecvTimeoutError::Timeout) => {}
                // Every lane's sender is gone: nothing more can come.
                Err(RecvTimeoutError::Disconnected) => {
                    if lanes.values().all(|l| !l.open) {
                        break;
                    }
                    for lane in lanes.values_mut().filter(|l| l.open) {
                        lane.open = false;
                    }
                }
            }
        }
        let mut ordered: Vec<LaneState> = lanes.into_values().collect();
        ordered.sort_by_key(|l| l.order);
        Finished {
            checks: ordered.into_iter().flat_map(|l| l.checks).collect(),
            listed: listed.map(|pids| pids.into_iter().collect()),
        }
    }
}

fn apply(lanes: &mut BTreeMap<usize, LaneState>, listed: &mut Option<BTreeSet<u32>>, event: Event) {
    let now = Instant::now();
    // What an abandoned lane sends is too late to count.
    fn lane_of(
        lanes: &mut BTreeMap<usize, LaneState>,
        id: usize,
        now: Instant,
    ) -> Option<&mut LaneState> {
        let lane = lanes.get_mut(&id).filter(|l| l.open)?;
        lane.last_heard = Some(now);
        Some(lane)
    }
    match event {
        Event::Opened { lane, order } => {
            lanes.insert(
                lane,
                LaneState {
                    order,
                    open: true,
                    last_heard: Some(now),
                    ..LaneState::default()
                },
            );
        }
        Event::Step { lane, step } => {
            if let Some(l) = lane_of(lanes, lane, now) {
                l.step = Some(step);
            }
        }
        Event::Report { lane, check } => {
            if let Some(l) = lane_of(lanes, lane, now) {
                l.step = None;
                l.checks.push(check);
            }
        }
        Event::Listed { pids } => listed.get_or_insert_default().extend(pids),
        Event::Closed { lane, panicked } => {
            if let Some(l) = lane_of(lanes, lane, now) {
                l.open = false;
                if panicked {
                    let (group, check) = l
                        .step
                        .as_ref()
                        .map_or((Group::Driver, "check"), |s| (s.group, s.check));
                    l.checks.push(Check::missing(
                        group,
                        check,
                        "this check stopped on an internal error",
                        "a bug in strata: please report it with the lines above",
                    ));
                }
            }
        }
    }
}

/// The lane did not answer in time: its step becomes a timed-out check.
fn abandon(lane: &mut LaneState, timeout: Duration) {
    lane.open = false;
    let Some(step) = lane.step.take() else {
        return;
    };
    let mut check = Check::new(
        step.group,
        step.check,
        Status::Missing,
        &format!(
            "timed out: {} did not answer within {} (what would have been checked after it was not)",
            step.what,
            seconds(timeout)
        ),
    )
    .fix(step.fix);
    if let Some(subject) = &step.subject {
        check = check.about(subject);
    }
    check.timed_out = true;
    lane.checks.push(check);
}

/// `2 s`, `0.5 s`.
fn seconds(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0} s")
    } else {
        format!("{secs} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lanes that answer have sent all they will before the collector starts (it times
    /// a lane from the events it takes, so none of them can be late on a loaded machine);
    /// the silent one is abandoned after the timeout.
    #[test]
    fn a_silent_lane_is_abandoned_with_its_step_timed_out_and_the_others_finish() {
        let mut runner = Runner::new(Duration::from_secs(1));
        let (release, held) = mpsc::channel::<()>();
        let (sent, all_sent) = mpsc::channel::<&str>();
        let stuck_sent = sent.clone();
        runner.spawn((1, 0), move |lane| {
            lane.step(
                Group::Gpus,
                "mig_mode",
                Some("GPU 0"),
                "nvmlDeviceGetMigMode",
                "fix it",
            );
            let _ = stuck_sent.send("stuck");
            // Blocks until the test ends: longer than the timeout.
            let _ = held.recv();
            lane.report(Check::ok(Group::Gpus, "mig_mode", "too late"));
        });
        runner.spawn((0, 0), move |lane| {
            lane.listed(vec![7, 3]);
            lane.step(Group::Driver, "nvml", None, "nvmlInit_v2", "");
            lane.report(Check::ok(Group::Driver, "nvml", "loaded"));
            let inner_sent = sent.clone();
            lane.spawn((0, 1), move |inner| {
                inner.listed(vec![3, 5]);
                inner.report(Check::ok(Group::Driver, "driver_version", "550"));
                drop(inner);
                let _ = inner_sent.send("inner");
            });
            drop(lane);
            let _ = sent.send("outer");
        });
        let mut seen: Vec<&str> = (0..3)
            .map(|_| {
                all_sent
                    .recv_timeout(Duration::from_secs(60))
                    .expect("every lane gets as far as it can")
            })
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, ["inner", "outer", "stuck"]);
        let finished = runner.finish();
        drop(release);
        let got: Vec<(&str, Status, bool)> = finished
            .checks
            .iter()
            .map(|c| (c.check, c.status, c.timed_out))
            .collect();
        assert_eq!(
            got,
            [
                ("nvml", Status::Ok, false),
                ("driver_version", Status::Ok, false),
                ("mig_mode", Status::Missing, true),
            ]
        );
        let stuck = &finished.checks[2];
        assert_eq!(stuck.subject.as_deref(), Some("GPU 0"));
        assert!(
            stuck
                .detail
                .starts_with("timed out: nvmlDeviceGetMigMode did not answer within 1 s"),
            "{}",
            stuck.detail
        );
        assert_eq!(stuck.fix.as_deref(), Some("fix it"));
        assert_eq!(finished.listed, Some(vec![3, 5, 7]));
    }

    #[test]
    fn a_lane_that_panics_says_so() {
        let mut runner = Runner::new(Duration::from_secs(5));
        runner.spawn((0, 0), |lane| {
            lane.step(Group::Feeds, "feed_dir", None, "stat", "");
            if lane.id < usize::MAX {
                panic!("deliberately, in a test");
            }
        });
        let finished = runner.finish();
        assert_eq!(finished.checks.len(), 1);
        let c = &finished.checks[0];
        assert_eq!(
            (c.group, c.check, c.status),
            (Group::Feeds, "feed_dir", Status::Missing)
        );
        assert!(c.detail.contains("internal error"));
    }

    #[test]
    fn nothing_to_run_finishes_at_once() {
        let finished = Runner::new(Duration::from_secs(60)).finish();
        assert!(finished.checks.is_empty() && finished.listed.is_none());
    }
}

//! `a`: attach the allocator feed to the selected process, from where the monitor's hint is
//! (a Python process without a feed). The process is checked first and only offered when
//! attaching can work; a confirmation names it; the attach runs on its own thread and its
//! outcome, in `strata attach`'s own words, comes to the footer.

use super::{Focus, Notice, State, View};
use crate::accounting::attach::FeedStatus;
use crate::launch::offer::{Attacher, NoAttacher};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Duration;

/// `a`: the agent attached to the selected process.
#[derive(Debug)]
pub struct Attach {
    /// The confirmation, while open: it takes the keys.
    pub(crate) offer: Option<AttachOffer>,
    /// An attach under way (confirmed): its outcome comes to the footer.
    pub(crate) under_way: Option<Attaching>,
    /// What attaches the agent: `strata attach` on a live node, nothing for the demo or a
    /// replay.
    pub attacher: Box<dyn Attacher>,
}

impl Default for Attach {
    fn default() -> Self {
        Attach {
            offer: None,
            under_way: None,
            attacher: Box::new(NoAttacher(
                "the demo node's processes are simulated: there is nothing to attach to",
            )),
        }
    }
}

/// The confirmation open: attach to this process? y/Enter or n/Esc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachOffer {
    pub(crate) pid: u32,
    /// `PID 4242 (python3.14 train.py)`.
    pub(crate) title: String,
}

/// An attach under way.
#[derive(Debug)]
pub struct Attaching {
    pub(crate) pid: u32,
    pub(crate) outcome: Receiver<Result<String, String>>,
}

/// How often the monitor looks for the outcome while an attach runs.
pub(crate) const ATTACH_POLL: Duration = Duration::from_millis(200);

impl State {
    /// `a`: checks the selected process and offers to attach, or says why not.
    pub(super) fn open_attach(&mut self) {
        match self.attach_target() {
            Ok(offer) => self.attach.offer = Some(offer),
            Err(why) => {
                self.notice = Some(Notice {
                    text: format!("not attached: {why}"),
                    alert: true,
                })
            }
        }
    }

    fn attach_target(&self) -> Result<AttachOffer, String> {
        if let Some(busy) = &self.attach.under_way {
            return Err(format!("still attaching to PID {}", busy.pid));
        }
        let observed = self.current.as_ref().ok_or("nothing shown yet")?;
        let (pid, uuid) = match (&self.view, self.focus) {
            (View::Main, Focus::Processes) => self
                .process_table
                .selected
                .clone()
                .ok_or("no process selected")?,
            (View::Detail { pid, device_uuid }, _) => (*pid, device_uuid.clone()),
            _ => return Err("select a process in the table first".into()),
        };
        let at = observed
            .sample
            .processes
            .iter()
            .position(|p| p.pid == pid && *p.device_uuid == *uuid)
            .ok_or("the selected process is gone")?;
        let process = &observed.sample.processes[at];
        if !process.visible {
            return Err(format!(
                "PID {pid} is not visible in this /proc: strata cannot reach it from here"
            ));
        }
        match &observed.account.processes[at].feed_status {
            FeedStatus::Fresh { .. } | FeedStatus::Stale { .. } => {
                return Err(format!("PID {pid} is fed already"))
            }
            FeedStatus::Pending { .. } => {
                return Err(format!(
                    "PID {pid} runs the agent already; it is waiting for its framework"
                ))
            }
            _ => {}
        }
        let named = self.attach.attacher.check(pid)?;
        Ok(AttachOffer {
            pid,
            title: format!("PID {pid} ({named})"),
        })
    }

    /// A key while the confirmation is open: it has the keys to itself.
    pub(super) fn attach_action(&mut self, action: super::Action) {
        use super::Action;
        match action {
            Action::Open | Action::Yes => {
                if let Some(offer) = self.attach.offer.take() {
                    self.attach.under_way = Some(Attaching {
                        pid: offer.pid,
                        outcome: self.attach.attacher.start(offer.pid),
                    });
                    self.notice = Some(Notice {
                        text: format!("attaching to {}…", offer.title),
                        alert: false,
                    });
                }
            }
            Action::No | Action::Back | Action::Quit => {
                self.attach.offer = None;
                self.notice = Some(Notice {
                    text: "cancelled: not attached".into(),
                    alert: false,
                });
            }
            _ => {}
        }
    }

    /// Takes the outcome of an attach under way, when it has come: to the footer.
    pub(super) fn poll_attach(&mut self) {
        let Some(busy) = &self.attach.under_way else {
            return;
        };
        let outcome = match busy.outcome.try_recv() {
            Ok(outcome) => outcome,
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => Err("the attach ended without a word".into()),
        };
        self.attach.under_way = None;
        self.notice = Some(match outcome {
            Ok(said) => Notice {
                text: said,
                alert: false,
            },
            Err(why) => Notice {
                text: format!("not attached: {why}"),
                alert: true,
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::Action;
    use crate::launch::offer::Attacher;
    use crate::pipeline::Pipeline;
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};

    /// Says yes to every check, and records what it was asked to attach.
    #[derive(Debug, Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<u32>>>);

    impl Attacher for Recorder {
        fn check(&self, pid: u32) -> Result<String, String> {
            Ok(format!("python3.14 job-{pid}.py"))
        }
        fn start(&self, pid: u32) -> Receiver<Result<String, String>> {
            self.0.lock().expect("lock").push(pid);
            let (tx, rx) = mpsc::channel();
            let _ = tx.send(Ok("attached: feed at /tmp/strata-0/1.sock".into()));
            rx
        }
    }

    fn demo_state() -> State {
        let mut source =
            crate::source::demo::DemoSource::new(0, 1.0, 10.0, crate::source::demo::SNAPSHOT_AT);
        let mut state = State::new(Pipeline::new(None), "test".into(), 1.0);
        use crate::source::Source;
        state.on_sample(source.sample().expect("demo sample"));
        state
    }

    fn select(state: &mut State, pid: u32) {
        let p = state
            .current
            .as_ref()
            .expect("shown")
            .sample
            .processes
            .iter()
            .find(|p| p.pid == pid)
            .expect("listed")
            .clone();
        state.process_table.selected = Some((p.pid, p.device_uuid.to_string()));
        state.process_table.selection_moved = true;
    }

    #[test]
    fn a_python_process_without_a_feed_is_offered_confirmed_and_attached() {
        let mut state = demo_state();
        let recorder = Recorder::default();
        state.attach.attacher = Box::new(recorder.clone());
        // The embedding service: Python, no feed.
        select(&mut state, 38811);
        state.apply_action(Action::Attach);
        let offer = state.attach.offer.clone().expect("offered");
        assert_eq!(offer.title, "PID 38811 (python3.14 job-38811.py)");
        // Nothing happens until confirmed.
        assert!(recorder.0.lock().expect("lock").is_empty());
        state.apply_action(Action::Yes);
        assert_eq!(*recorder.0.lock().expect("lock"), vec![38811]);
        state.poll_attach();
        let notice = state.notice.clone().expect("the outcome");
        assert_eq!(notice.text, "attached: feed at /tmp/strata-0/1.sock");
        assert!(!notice.alert);
        assert!(state.attach.under_way.is_none());
    }

    #[test]
    fn a_fed_process_or_a_refusal_is_said_and_nothing_is_offered() {
        let mut state = demo_state();
        state.attach.attacher = Box::new(Recorder::default());
        select(&mut state, 41230);
        state.apply_action(Action::Attach);
        assert!(state.attach.offer.is_none());
        assert_eq!(
            state.notice.as_ref().map(|n| n.text.as_str()),
            Some("not attached: PID 41230 is fed already")
        );
        // The attacher's own reason, as strata attach says it.
        state.attach.attacher = Box::new(crate::launch::offer::NoAttacher(
            "PID 38811 runs Python 3.11.7, which has no sys.remote_exec (hint: ...)",
        ));
        select(&mut state, 38811);
        state.apply_action(Action::Attach);
        assert!(state.attach.offer.is_none());
        let notice = state.notice.clone().expect("said");
        assert!(notice
            .text
            .starts_with("not attached: PID 38811 runs Python 3.11.7"));
        assert!(notice.alert);
    }

    #[test]
    fn a_cancel_attaches_nothing() {
        let mut state = demo_state();
        let recorder = Recorder::default();
        state.attach.attacher = Box::new(recorder.clone());
        select(&mut state, 38811);
        state.apply_action(Action::Attach);
        state.apply_action(Action::No);
        assert!(state.attach.offer.is_none());
        assert!(recorder.0.lock().expect("lock").is_empty());
        assert_eq!(
            state.notice.as_ref().map(|n| n.text.as_str()),
            Some("cancelled: not attached")
        );
    }
}

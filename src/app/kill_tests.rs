//! The signal dialog without a terminal: a recording signaller stands in for the kernel.

use super::*;
use crate::app::SortKey;
use crate::pipeline::Pipeline;
use crate::process_signal::{Refusal, Signaller};
use crate::source::demo::node_at;
use std::sync::{Arc, Mutex};

/// What was sent: pid, start time, signal.
type Sent = Vec<(u32, Option<u64>, Signal)>;

/// Records what it was asked to send; refuses the pids in `refused`.
#[derive(Debug, Default, Clone)]
struct Recorder {
    sent: Arc<Mutex<Sent>>,
    refused: Vec<u32>,
}

impl Recorder {
    fn sent(&self) -> Sent {
        self.sent.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Signaller for Recorder {
    fn check(&self, target: &Target) -> Result<(), Refusal> {
        match self.refused.contains(&target.pid) {
            true => Err(Refusal::NotPermitted {
                pid: target.pid,
                owner: "user bob".into(),
            }),
            false => Ok(()),
        }
    }

    fn send(&self, target: &Target, signal: Signal) -> Result<(), Refusal> {
        self.check(target)?;
        if let Ok(mut sent) = self.sent.lock() {
            sent.push((target.pid, target.start_time, signal));
        }
        Ok(())
    }
}

fn demo_with(recorder: &Recorder) -> State {
    let mut s = State::new(Pipeline::new(None), "nvml".into(), 1.0);
    for t in 0..8 {
        s.on_sample(node_at(0, 890.0 + f64::from(t) * 2.0, 2.0));
    }
    s.kill.signaller = Box::new(recorder.clone());
    s
}

fn select(s: &mut State, pid: u32) {
    let rows = s.rows();
    let at = rows
        .iter()
        .position(|r| r.process.pid == pid)
        .unwrap_or_else(|| panic!("pid {pid} listed"));
    s.apply_action(Action::Top);
    for _ in 0..at {
        s.apply_action(Action::Down);
    }
    assert_eq!(
        s.process_table.selected.as_ref().map(|(p, _)| *p),
        Some(pid)
    );
}

#[test]
fn k_picks_a_signal_and_sends_it_only_on_confirmation() {
    let recorder = Recorder::default();
    let mut s = demo_with(&recorder);
    select(&mut s, 52010);
    s.apply_action(Action::Signal);
    let dialog = s.kill.dialog.clone().expect("a dialog");
    assert_eq!(
        dialog.stage,
        Stage::Signal,
        "one process: straight to the signal"
    );
    assert_eq!(dialog.signal, Signal::Term, "SIGTERM first");
    s.apply_action(Action::Down);
    assert_eq!(s.kill.dialog.as_ref().map(|d| d.signal), Some(Signal::Kill));
    s.apply_action(Action::Down);
    assert_eq!(
        s.kill.dialog.as_ref().map(|d| d.signal),
        Some(Signal::Kill),
        "clamped"
    );
    s.apply_action(Action::Open);
    assert_eq!(
        s.kill.dialog.as_ref().map(|d| d.stage),
        Some(Stage::Confirm)
    );
    assert!(
        recorder.sent().is_empty(),
        "nothing before the confirmation"
    );
    // The table's keys belong to the dialog meanwhile.
    s.apply_action(Action::CycleSort);
    assert_eq!(s.process_table.sort, SortKey::Used);
    s.apply_action(Action::Yes);
    assert!(s.kill.dialog.is_none());
    let start = s
        .rows()
        .iter()
        .find(|r| r.process.pid == 52010)
        .and_then(|r| r.process.start_time);
    assert_eq!(recorder.sent(), [(52010, start, Signal::Kill)]);
    let notice = s.notice.clone().expect("the outcome");
    assert!(
        notice
            .text
            .starts_with("SIGKILL sent to PID 52010 (python eval_loop.py"),
        "{notice:?}"
    );
    assert!(!notice.alert);
    s.apply_action(Action::Down);
    assert!(s.notice.is_none(), "gone at the next key");
}

#[test]
fn escape_or_n_cancels_and_sends_nothing() {
    let recorder = Recorder::default();
    let mut s = demo_with(&recorder);
    for cancel in [Action::Back, Action::No, Action::Quit] {
        s.apply_action(Action::Signal);
        s.apply_action(Action::Open);
        assert_eq!(
            s.kill.dialog.as_ref().map(|d| d.stage),
            Some(Stage::Confirm)
        );
        s.apply_action(cancel);
        assert!(s.kill.dialog.is_none(), "{cancel:?}");
        assert!(!s.quit, "{cancel:?} closes the dialog, not strata");
        assert_eq!(s.view, View::Main);
        assert_eq!(
            s.notice.as_ref().map(|n| n.text.as_str()),
            Some("cancelled: no signal sent")
        );
    }
    assert!(recorder.sent().is_empty());
}

#[test]
fn a_process_that_may_not_be_signalled_is_not_offered_and_the_reason_is_given() {
    let recorder = Recorder {
        refused: vec![52010],
        ..Recorder::default()
    };
    let mut s = demo_with(&recorder);
    select(&mut s, 52010);
    s.apply_action(Action::Signal);
    assert!(s.kill.dialog.is_none());
    let notice = s.notice.clone().expect("why");
    assert!(notice.alert);
    assert!(
        notice
            .text
            .contains("not permitted (EPERM): PID 52010 belongs to user bob"),
        "{notice:?}"
    );
}

#[test]
fn a_gone_or_foreign_pid_is_never_offered_and_the_reason_is_given() {
    let recorder = Recorder::default();
    let mut s = demo_with(&recorder);
    select(&mut s, 31337);
    s.apply_action(Action::Signal);
    assert!(s.kill.dialog.is_none());
    let text = s.notice.clone().map(|n| n.text).unwrap_or_default();
    assert!(text.contains("PID 31337 no longer exists"), "{text}");
    assert!(text.contains("zombie_context finding"), "{text}");
    // In a container's own PID namespace nothing NVML lists is visible.
    let mut sample = node_at(0, 910.0, 2.0);
    sample.host_pid_namespace = Some(false);
    for p in &mut sample.processes {
        p.visible = false;
    }
    s.on_sample(sample);
    s.apply_action(Action::Top);
    s.apply_action(Action::Signal);
    assert!(s.kill.dialog.is_none());
    let text = s.notice.clone().map(|n| n.text).unwrap_or_default();
    assert!(text.contains("in another PID namespace"), "{text}");
    assert!(recorder.sent().is_empty());
}

/// From the findings panel, `K` on the zombie context offers the holders of its device file,
/// the one without a context of its own first; the chosen one gets the signal.
#[test]
fn k_on_a_zombie_context_offers_the_holders_of_its_device_file() {
    let recorder = Recorder {
        refused: vec![52077],
        ..Recorder::default()
    };
    let mut s = demo_with(&recorder);
    s.apply_action(Action::FocusNext);
    let at = s
        .findings()
        .iter()
        .position(|f| f.kind == FindingKind::ZombieContext)
        .expect("the demo's zombie context");
    s.apply_action(Action::Top);
    for _ in 0..at {
        s.apply_action(Action::Down);
    }
    s.apply_action(Action::Signal);
    let dialog = s.kill.dialog.clone().expect("a dialog");
    assert_eq!(dialog.stage, Stage::Process);
    assert_eq!(dialog.title, "the holders of /dev/nvidia2");
    let pids: Vec<u32> = dialog.offers.iter().map(|o| o.target.pid).collect();
    assert_eq!(pids, [31342, 52010, 52077]);
    assert_eq!(
        dialog.offers[0].target.note.as_deref(),
        Some("no context of its own · child of 1 /sbin/init")
    );
    assert!(
        dialog.offers[2].refusal.is_some(),
        "checked before it is offered"
    );
    // The refused one cannot be taken further.
    s.apply_action(Action::Down);
    s.apply_action(Action::Down);
    s.apply_action(Action::Open);
    let dialog = s.kill.dialog.clone().expect("still open");
    assert_eq!(dialog.stage, Stage::Process);
    assert!(dialog.message.is_some_and(|m| m.contains("EPERM")));
    for _ in 0..2 {
        s.apply_action(Action::Up);
    }
    s.apply_action(Action::Open);
    s.apply_action(Action::Open);
    s.apply_action(Action::Open);
    assert_eq!(recorder.sent(), [(31342, Some(25_380_000), Signal::Term)]);
}

#[test]
fn the_demo_signals_nothing_and_says_why() {
    let mut s = State::new(Pipeline::new(None), "demo".into(), 1.0);
    s.on_sample(node_at(0, 900.0, 2.0));
    s.apply_action(Action::Signal);
    assert!(s.kill.dialog.is_none());
    let text = s.notice.clone().map(|n| n.text).unwrap_or_default();
    assert!(text.contains("simulated"), "{text}");
}

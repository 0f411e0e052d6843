//! `K`: the dialog that signals a process. Pick the process (when a zombie context's device
//! file has several holders), pick the signal, confirm. Each process offered has been checked
//! first (the signaller says whether this user may signal it); the pid and start time are
//! checked again when the signal is sent.

use super::{Action, Focus, State, View};
use crate::detect::{Evidence, Finding, FindingKind};
use crate::process_signal::{Refuse, Signal, Signaller, Target};
use crate::sample::ProcessSample;

/// Where the dialog is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Which process (several holders of a device file).
    Process,
    /// Which signal.
    Signal,
    /// Send it? y/Enter or n/Esc.
    Confirm,
}

/// `K`: the signal dialog, and what sends signals.
#[derive(Debug)]
pub struct Kill {
    /// The dialog, while open: it takes the keys.
    pub(crate) dialog: Option<KillDialog>,
    /// What sends signals: the kernel on a live node, nothing for the demo.
    pub signaller: Box<dyn Signaller>,
}

impl Default for Kill {
    fn default() -> Self {
        Kill {
            dialog: None,
            signaller: Box::new(Refuse::simulated()),
        }
    }
}

/// A process offered, with why it cannot be signalled when it cannot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Offer {
    pub(crate) target: Target,
    pub(crate) refusal: Option<String>,
}

/// The open dialog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillDialog {
    /// What is being signalled: `PID 4242`, `the holders of /dev/nvidia2`.
    pub(crate) title: String,
    pub(crate) offers: Vec<Offer>,
    pub(crate) chosen: usize,
    pub(crate) signal: Signal,
    pub(crate) stage: Stage,
    /// Why Enter did not move on (the process chosen cannot be signalled).
    pub(crate) message: Option<String>,
}

impl KillDialog {
    pub(crate) fn offer(&self) -> Option<&Offer> {
        self.offers.get(self.chosen)
    }
}

/// A line for the footer after a key: what was sent, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub(crate) text: String,
    /// Shown as a warning (a refusal, a failure) rather than plain news.
    pub(crate) alert: bool,
}

/// Why a process NVML lists cannot be signalled from here, from what `/proc` said of it.
fn unreachable(p: &ProcessSample, host_pid_namespace: Option<bool>) -> Option<String> {
    let pid = p.pid;
    if p.visible {
        return (p.proc_state.as_deref() == Some("Z")).then(|| {
            format!("PID {pid} is defunct: signals do nothing; what keeps its context alive is in the zombie_context finding (Tab, then k there)")
        });
    }
    Some(if p.hidden {
        format!("PID {pid} is hidden by /proc here (hidepid): strata cannot make sure who it is, so it does not signal it")
    } else if host_pid_namespace == Some(true) {
        format!("PID {pid} no longer exists; what keeps its context alive is in the zombie_context finding (Tab, then k there)")
    } else {
        format!("PID {pid} is in another PID namespace, not visible here: it cannot be signalled from here (run strata on the host, or with --pid=host)")
    })
}

fn target_of(p: &ProcessSample) -> Target {
    Target {
        pid: p.pid,
        start_time: p.start_time,
        user: p.user.clone(),
        command: p.command.clone(),
        note: None,
    }
}

/// The holders a zombie context's evidence names, those without a context of their own first.
fn holders_of(finding: &Finding) -> Vec<Target> {
    let Some(holders) = finding.evidence.holders() else {
        return Vec::new();
    };
    holders
        .iter()
        .map(|h| {
            let parent = match (h.ppid, &h.parent_command) {
                (Some(ppid), Some(command)) => format!("child of {} {command}", ppid.0),
                (Some(ppid), None) => format!("child of {}", ppid.0),
                _ => String::new(),
            };
            let own = if h.listed {
                "has a context of its own"
            } else {
                "no context of its own"
            };
            Target {
                pid: h.pid.0,
                start_time: h.start_time.map(|t| t.0),
                user: h.user.clone(),
                command: h.command.clone(),
                note: Some(match parent.is_empty() {
                    true => own.to_string(),
                    false => format!("{own} · {parent}"),
                }),
            }
        })
        .collect()
}

impl State {
    /// `K`: the processes the view in front offers, checked, in a dialog; or, where there is
    /// nothing to signal, a notice saying why.
    pub(super) fn open_kill_dialog(&mut self) {
        let (title, targets) = match self.signal_targets() {
            Ok(found) => found,
            Err(why) => {
                self.notice = Some(Notice {
                    text: why,
                    alert: true,
                });
                return;
            }
        };
        let offers: Vec<Offer> = targets
            .into_iter()
            .map(|(target, unreachable)| {
                let refusal = unreachable.or_else(|| {
                    self.kill
                        .signaller
                        .check(&target)
                        .err()
                        .map(|refusal| refusal.to_string())
                });
                Offer { target, refusal }
            })
            .collect();
        // None may be signalled, all for one reason (one process, or the demo): nothing to
        // choose, say why.
        let first = offers.first().and_then(|o| o.refusal.clone());
        if let Some(why) = first.filter(|why| {
            offers
                .iter()
                .all(|o| o.refusal.as_deref() == Some(why.as_str()))
        }) {
            self.notice = Some(Notice {
                text: format!("not signalled: {why}"),
                alert: true,
            });
            return;
        }
        let stage = match offers.len() {
            1 => Stage::Signal,
            _ => Stage::Process,
        };
        let chosen = offers.iter().position(|o| o.refusal.is_none()).unwrap_or(0);
        self.kill.dialog = Some(KillDialog {
            title,
            offers,
            chosen,
            signal: Signal::Term,
            stage,
            message: None,
        });
    }

    /// What `K` would signal where the user is, each with why it cannot be reached (a pid
    /// `/proc` does not show); or why there is nothing.
    #[allow(clippy::type_complexity)]
    fn signal_targets(&self) -> Result<(String, Vec<(Target, Option<String>)>), String> {
        let observed = self.current.as_ref().ok_or("nothing shown yet")?;
        let namespace = observed.sample.host_pid_namespace;
        let process = |pid: u32, uuid: &str| {
            observed
                .sample
                .processes
                .iter()
                .find(|p| p.pid == pid && *p.device_uuid == *uuid)
        };
        let one = |p: &ProcessSample| {
            Ok((
                format!("PID {}", p.pid),
                vec![(target_of(p), unreachable(p, namespace))],
            ))
        };
        let finding = match (&self.view, self.focus) {
            (View::Main, Focus::Processes) => {
                let (pid, uuid) = self
                    .process_table
                    .selected
                    .as_ref()
                    .ok_or("no process selected")?;
                let p = process(*pid, uuid).ok_or("the selected process is gone")?;
                return one(p);
            }
            (View::Detail { pid, device_uuid }, _) => {
                let p = process(*pid, device_uuid)
                    .ok_or_else(|| format!("PID {pid} no longer holds memory on this device"))?;
                return one(p);
            }
            (View::Main, Focus::Findings) => {
                let index = self.selected_finding_index().ok_or("no finding selected")?;
                self.findings()[index].clone()
            }
            (View::Evidence(id), _) => self
                .evidence_finding(id)
                .map(|(f, _)| f.clone())
                .ok_or("this finding is no longer raised")?,
            _ => {
                return Err(
                    "K signals a process: select one in the process table or a finding".into(),
                )
            }
        };
        if finding.kind == FindingKind::ZombieContext {
            let file = match &finding.evidence {
                Evidence::ZombieContext(zombie) => zombie.device_file.0.as_deref(),
                _ => None,
            }
            .unwrap_or("the device file")
            .to_string();
            let holders = holders_of(&finding);
            if holders.is_empty() {
                return Err(match finding.evidence.holders() {
                    Some(_) => {
                        format!("no process is known to hold {file} open: nothing to signal")
                    }
                    None => {
                        "the device files were not searched for this context: nothing to signal"
                            .into()
                    }
                });
            }
            let title = format!("the holders of {file}");
            return Ok((title, holders.into_iter().map(|t| (t, None)).collect()));
        }
        let pid = finding
            .pid
            .ok_or("this finding names no process to signal")?;
        let uuid = finding.device_uuid.as_deref().unwrap_or_default();
        let p = process(pid, uuid).ok_or_else(|| format!("PID {pid} is no longer listed"))?;
        one(p)
    }

    /// An action while the dialog is open: it has the keys to itself.
    pub(super) fn dialog_action(&mut self, action: Action) {
        let Some(dialog) = self.kill.dialog.as_mut() else {
            return;
        };
        dialog.message = None;
        let moved = |at: usize, delta: isize, len: usize| {
            (at as isize + delta).clamp(0, len.saturating_sub(1) as isize) as usize
        };
        let signal_at = |s: Signal| Signal::ALL.iter().position(|&x| x == s).unwrap_or(1);
        match (action, dialog.stage) {
            (Action::Back | Action::No | Action::Quit, _) => {
                self.kill.dialog = None;
                self.notice = Some(Notice {
                    text: "cancelled: no signal sent".into(),
                    alert: false,
                });
            }
            (Action::Up | Action::Down, Stage::Process) => {
                let delta = if action == Action::Up { -1 } else { 1 };
                dialog.chosen = moved(dialog.chosen, delta, dialog.offers.len());
            }
            (Action::Up | Action::Down, Stage::Signal) => {
                let delta = if action == Action::Up { -1 } else { 1 };
                let at = moved(signal_at(dialog.signal), delta, Signal::ALL.len());
                dialog.signal = Signal::ALL[at];
            }
            (Action::Open, Stage::Process) => match dialog.offer().map(|o| o.refusal.clone()) {
                Some(Some(why)) => dialog.message = Some(why),
                Some(None) => dialog.stage = Stage::Signal,
                None => {}
            },
            (Action::Open, Stage::Signal) => dialog.stage = Stage::Confirm,
            (Action::Open | Action::Yes, Stage::Confirm) => self.send_chosen(),
            _ => {}
        }
    }

    fn send_chosen(&mut self) {
        let Some(dialog) = self.kill.dialog.take() else {
            return;
        };
        let Some(offer) = dialog.offer() else {
            return;
        };
        let signal = dialog.signal;
        let who = offer.target.describe();
        self.notice = Some(match self.kill.signaller.send(&offer.target, signal) {
            Ok(()) => Notice {
                text: format!("{} sent to {who}", signal.name()),
                alert: false,
            },
            Err(refusal) => Notice {
                text: format!("{} not sent: {refusal}", signal.name()),
                alert: true,
            },
        });
    }
}

#[cfg(test)]
#[path = "kill_tests.rs"]
mod tests;

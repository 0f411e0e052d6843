//! `w`: which lines of the selected process's code hold its memory. The monitor asks the
//! process's agent for a window of its allocator's history (PROTOCOL.md, "Inside the pool")
//! and opens the sites view, which draws the window as it runs, its summary when it ends, and
//! the agent's latest segment map. The request goes through the feed hub's thread; the
//! answer comes with the samples, so nothing here waits.

use super::{Focus, Notice, State, View};
use crate::detect::evidence::Evidence;
use crate::detect::FindingKind;
use crate::sample::pool::SitesState;

/// The window `w` asks for, seconds.
pub(crate) const SITES_SECONDS: u32 = 60;
/// Sites asked for per device.
pub(crate) const SITES_TOP: u32 = 20;

/// Asks agents for sites windows (tests and the demo use another).
pub trait SitesAsker: Send + std::fmt::Debug {
    /// Asks `pid`'s agent for a window; the request's id, or why not in one line.
    fn ask(&self, pid: u32, seconds: u32, top: u32) -> Result<u64, String>;
}

/// Never asks: the demo's processes are simulated, a replay's are in the past.
#[derive(Debug, Clone)]
pub struct NoSitesAsker(pub &'static str);

impl SitesAsker for NoSitesAsker {
    fn ask(&self, _pid: u32, _seconds: u32, _top: u32) -> Result<u64, String> {
        Err(self.0.to_string())
    }
}

/// `w`: what asks, and the last request made from this monitor.
#[derive(Debug)]
pub struct Sites {
    pub asker: Box<dyn SitesAsker>,
    /// The pid and request id of the last window asked from here.
    pub(crate) asked: Option<(u32, u64)>,
    /// `--sites-on-climb`: ask on its own when a climb of live tensors is first raised.
    pub on_climb: bool,
    /// The live climbs raised (pid, device) whose window was asked: once per episode, until
    /// the climb is no longer raised.
    climbs_asked: std::collections::HashSet<(u32, String)>,
}

impl Default for Sites {
    fn default() -> Self {
        Sites {
            asker: Box::new(NoSitesAsker(
                "the demo node's processes are simulated: there is no job to record",
            )),
            asked: None,
            on_climb: false,
            climbs_asked: std::collections::HashSet::new(),
        }
    }
}

impl State {
    /// `--sites-on-climb`: for each climb of live tensors raised now whose process's agent
    /// answers requests, a window asked once per episode (the climb raised without a break).
    pub(super) fn sites_on_climb(&mut self) {
        if !self.sites.on_climb {
            return;
        }
        let Some(observed) = &self.current else {
            return;
        };
        let climbing: Vec<(u32, String)> = observed
            .findings
            .iter()
            .filter(|f| f.kind == FindingKind::Climb)
            .filter(|f| matches!(&f.evidence, Evidence::Climb(e) if e.cause == crate::layers::Layer::Live.name()))
            .filter_map(|f| Some((f.pid?, f.device_uuid.clone()?)))
            .collect();
        self.sites
            .climbs_asked
            .retain(|episode| climbing.contains(episode));
        for (pid, device) in climbing {
            if self.sites.climbs_asked.contains(&(pid, device.clone())) {
                continue;
            }
            let answers = observed
                .sample
                .feeds
                .iter()
                .find(|r| r.pid() == Some(pid))
                .and_then(|r| r.hello.as_ref())
                .is_some_and(|h| h.answers("sites"));
            if !answers {
                continue;
            }
            self.sites.climbs_asked.insert((pid, device));
            let said = match self.sites.asker.ask(pid, SITES_SECONDS, SITES_TOP) {
                Ok(id) => {
                    self.sites.asked = Some((pid, id));
                    format!("live tensors of PID {pid} climbing: asked its agent for a {SITES_SECONDS} s sites window (w shows it)")
                }
                Err(why) => format!("live tensors of PID {pid} climbing: no sites window: {why}"),
            };
            self.notice = Some(Notice {
                text: said,
                alert: false,
            });
        }
    }

    /// `w`: opens the sites view of the selected process and asks for a window, unless one
    /// runs already (then the view shows it).
    pub(super) fn open_sites(&mut self) {
        let target = match (&self.view, self.focus) {
            (View::Main, Focus::Processes) => self.process_table.selected.clone(),
            (View::Detail { pid, device_uuid } | View::Sites { pid, device_uuid }, _) => {
                Some((*pid, device_uuid.clone()))
            }
            _ => None,
        };
        let Some((pid, device_uuid)) = target else {
            self.notice = Some(Notice {
                text: "sites: select a process in the table first".into(),
                alert: true,
            });
            return;
        };
        let record = self
            .current
            .as_ref()
            .and_then(|o| o.sample.feeds.iter().find(|r| r.pid() == Some(pid)));
        let Some(record) = record else {
            self.notice = Some(Notice {
                text: format!(
                    "sites: PID {pid} has no allocator feed (start it under `strata run`, or `a` to attach)"
                ),
                alert: true,
            });
            return;
        };
        let running = record
            .sites
            .as_ref()
            .is_some_and(|s| s.state == SitesState::Running);
        let again = matches!(self.view, View::Sites { .. });
        self.view = View::Sites { pid, device_uuid };
        self.views.detail_scroll = 0;
        if running && !again {
            return;
        }
        match self.sites.asker.ask(pid, SITES_SECONDS, SITES_TOP) {
            Ok(id) => {
                self.sites.asked = Some((pid, id));
                self.notice = Some(Notice {
                    text: format!(
                        "asked PID {pid}'s agent for a {SITES_SECONDS} s window of its allocator's history"
                    ),
                    alert: false,
                });
            }
            Err(why) => {
                self.notice = Some(Notice {
                    text: format!("sites: {why}"),
                    alert: true,
                })
            }
        }
    }
}

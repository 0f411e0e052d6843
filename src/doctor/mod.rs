//! `strata doctor`: what strata can and cannot see on this node, and why.
//!
//! Each check is one line, `ok`, `limited` (strata shows it, with a gap) or `missing` (strata
//! cannot show it at all), with the reason and the fix. The checks run in lanes, each on its
//! own thread: NVML's initialisation, its system calls, and one lane per GPU; `/proc`; the
//! feed dirs; the terminal; the serve port; and, once NVML has listed its processes, what
//! `strata attach` and the search through `/proc/<pid>/root` would meet. A lane that stays
//! silent for longer than the timeout (a stuck NVML call, a `/proc` read of a process in
//! uninterruptible sleep) is left behind and its check says it timed out, so the command
//! finishes promptly whatever hangs.
//!
//! Exit status: 0 when every check is `ok`, 3 when some are `limited`, 1 when any is
//! `missing`.

mod attach;
mod driver;
mod export;
mod feeds;
mod gpus;
mod mig;
mod processes;
mod refusals;
mod render;
mod runner;
mod terminal;

use crate::cli::DoctorArgs;
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The JSON's schema name.
pub(crate) const SCHEMA: &str = "strata.doctor/1";

/// How far strata can see what a check looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    Ok,
    /// Shown, with a gap: part of it, or not for every process.
    Limited,
    /// Not shown at all.
    Missing,
}

impl Status {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Limited => "limited",
            Status::Missing => "missing",
        }
    }
}

/// The groups of checks, in the order they are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Group {
    Driver,
    Gpus,
    Processes,
    Feeds,
    Attach,
    Terminal,
    Export,
}

impl Group {
    pub(crate) fn title(self) -> &'static str {
        match self {
            Group::Driver => "driver",
            Group::Gpus => "GPUs and MIG",
            Group::Processes => "processes",
            Group::Feeds => "feeds",
            Group::Attach => "attach",
            Group::Terminal => "terminal",
            Group::Export => "export",
        }
    }
}

/// One check: what it found and, unless it is `ok`, what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Check {
    pub(crate) group: Group,
    /// The check's name, stable: `nvml`, `mig_mode`, `hidepid`...
    pub(crate) check: &'static str,
    /// What it is about, where there are several: `GPU 0`.
    pub(crate) subject: Option<String>,
    pub(crate) status: Status,
    /// What was found, or why it could not be.
    pub(crate) detail: String,
    /// What to do; `None` when there is nothing to do.
    pub(crate) fix: Option<String>,
    /// The check did not answer within the timeout.
    pub(crate) timed_out: bool,
}

/// Every string of a check may hold text from outside (NVML, `/proc`, the environment).
fn clean(text: &str) -> String {
    crate::text::clean(text).into_owned()
}

impl Check {
    pub(crate) fn new(group: Group, check: &'static str, status: Status, detail: &str) -> Check {
        Check {
            group,
            check,
            subject: None,
            status,
            detail: clean(detail),
            fix: None,
            timed_out: false,
        }
    }

    pub(crate) fn ok(group: Group, check: &'static str, detail: &str) -> Check {
        Check::new(group, check, Status::Ok, detail)
    }

    pub(crate) fn limited(group: Group, check: &'static str, detail: &str, fix: &str) -> Check {
        Check::new(group, check, Status::Limited, detail).fix(fix)
    }

    pub(crate) fn missing(group: Group, check: &'static str, detail: &str, fix: &str) -> Check {
        Check::new(group, check, Status::Missing, detail).fix(fix)
    }

    pub(crate) fn fix(mut self, fix: &str) -> Check {
        self.fix = (!fix.is_empty()).then(|| clean(fix));
        self
    }

    pub(crate) fn about(mut self, subject: &str) -> Check {
        self.subject = Some(clean(subject));
        self
    }
}

/// How many checks ended each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Counts {
    pub(crate) ok: usize,
    pub(crate) limited: usize,
    pub(crate) missing: usize,
}

/// Everything `strata doctor` found: what `--json` prints.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    pub(crate) schema: &'static str,
    pub(crate) host: String,
    /// The effective uid strata ran as: most of what it can see depends on it.
    pub(crate) euid: u32,
    /// The worst status of any check.
    pub(crate) status: Status,
    pub(crate) exit_status: u8,
    pub(crate) counts: Counts,
    pub(crate) checks: Vec<Check>,
}

impl Report {
    pub(crate) fn new(host: String, euid: u32, mut checks: Vec<Check>) -> Report {
        // Stable: within a group, the order the lanes were started in and reported.
        checks.sort_by_key(|c| c.group);
        let mut counts = Counts::default();
        for check in &checks {
            match check.status {
                Status::Ok => counts.ok += 1,
                Status::Limited => counts.limited += 1,
                Status::Missing => counts.missing += 1,
            }
        }
        let status = checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok);
        Report {
            schema: SCHEMA,
            host,
            euid,
            status,
            exit_status: exit_status(status),
            counts,
            checks,
        }
    }
}

/// 0 when all is `ok`, 1 when anything is `missing`, 3 when anything is `limited`.
pub(crate) fn exit_status(worst: Status) -> u8 {
    match worst {
        Status::Ok => 0,
        Status::Missing => 1,
        Status::Limited => 3,
    }
}

/// What the checks look at.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// `--nvml-lib`: else the driver's usual names.
    pub(crate) nvml_lib: Option<PathBuf>,
    /// `--feed-dir`: else `/tmp/strata-<uid>` (and, as root, every user's).
    pub(crate) feed_dir: Option<PathBuf>,
    /// The address `strata serve` would listen on.
    pub(crate) listen: String,
    /// How long one check may take.
    pub(crate) timeout: Duration,
}

/// What to do when a read of another user's process is refused: become root, or, as root
/// already, find what still stops it.
pub(crate) fn root_fix(euid: u32) -> &'static str {
    match euid {
        0 => "strata runs as root and is still refused: give it CAP_SYS_PTRACE (containers drop it by default), or see what a security module (AppArmor, SELinux) denies",
        _ => "run strata as root",
    }
}

/// The effective uid of this process.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Runs every check. Returns within about two timeouts of the slowest healthy check, whatever
/// hangs.
pub(crate) fn run(options: &Options) -> Report {
    let timeout = options.timeout;
    let mut first = runner::Runner::new(timeout);
    driver::start(&mut first, options.nvml_lib.clone());
    processes::start(&mut first);
    feeds::start(&mut first, options.feed_dir.clone());
    terminal::start(&mut first);
    export::start(&mut first, options.listen.clone());
    let first = first.finish();
    let mut second = runner::Runner::new(timeout);
    let listed = first.listed.clone();
    feeds::start_roots(&mut second, listed.clone().unwrap_or_default());
    attach::start(&mut second, listed);
    let second = second.finish();
    let mut checks = first.checks;
    checks.extend(second.checks);
    Report::new(crate::source::nvml::host_name(), euid(), checks)
}

/// `strata doctor`: prints the checks (text, or JSON with `--json`); the exit status says how
/// they went.
pub fn main(args: &DoctorArgs) -> ExitCode {
    // No `--demo`: doctor checks what strata meets on this node (the driver, /proc, the feed
    // dirs, the terminal, the port), and the simulated node has none of them to check.
    let options = Options {
        nvml_lib: args.nvml.nvml_lib.clone(),
        feed_dir: args.feeds.feed_dir.clone(),
        listen: args.listen.clone(),
        timeout: Duration::from_secs_f64(args.timeout),
    };
    let report = run(&options);
    let text = if args.json {
        match serde_json::to_string(&report) {
            Ok(mut line) => {
                line.push('\n');
                line
            }
            Err(e) => {
                eprintln!("strata: cannot write the report as JSON: {e} (hint: a bug in strata: please report it)");
                return ExitCode::FAILURE;
            }
        }
    } else {
        render::text(&report, render::colour_wanted())
    };
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        // A reader that has gone (`strata doctor | head`) took what it wanted.
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => {
            eprintln!("strata: cannot write the report: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::from(report.exit_status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(group: Group, status: Status) -> Check {
        Check::new(group, "x", status, "d")
    }

    #[test]
    fn the_exit_status_is_that_of_the_worst_check() {
        let report = |statuses: &[Status]| {
            Report::new(
                "h".into(),
                0,
                statuses.iter().map(|s| check(Group::Driver, *s)).collect(),
            )
        };
        assert_eq!(report(&[]).exit_status, 0);
        assert_eq!(report(&[Status::Ok, Status::Ok]).exit_status, 0);
        assert_eq!(report(&[Status::Ok, Status::Limited]).exit_status, 3);
        let both = report(&[Status::Limited, Status::Missing, Status::Ok]);
        assert_eq!((both.exit_status, both.status), (1, Status::Missing));
        assert_eq!(
            both.counts,
            Counts {
                ok: 1,
                limited: 1,
                missing: 1
            }
        );
    }

    #[test]
    fn checks_are_grouped_in_order_keeping_their_order_within_a_group() {
        let mut late = check(Group::Export, Status::Ok);
        late.check = "late";
        let mut a = check(Group::Driver, Status::Ok);
        a.check = "a";
        let mut b = check(Group::Driver, Status::Ok);
        b.check = "b";
        let report = Report::new("h".into(), 0, vec![late, a, b]);
        let names: Vec<&str> = report.checks.iter().map(|c| c.check).collect();
        assert_eq!(names, ["a", "b", "late"]);
    }

    #[test]
    fn strings_from_outside_are_defused() {
        let c =
            Check::limited(Group::Gpus, "gpu", "NVIDIA\x1b]0;x\x07", "fix\u{202e}").about("GPU\n0");
        assert!(!format!("{c:?}").contains('\x1b'));
        assert_eq!(c.detail, "NVIDIA\u{FFFD}]0;x\u{FFFD}");
        assert_eq!(c.fix.as_deref(), Some("fix\u{FFFD}"));
        assert_eq!(c.subject.as_deref(), Some("GPU\u{FFFD}0"));
    }
}

//! The report as text: a heading per group, one line per check (its status, name and what it
//! found), the fix under it, and a summary with the exit status.

use super::{Report, Status};
use std::fmt::Write;
use std::io::IsTerminal;

/// Width of the column of check names.
const NAME_WIDTH: usize = 24;

/// Colour the status words only on a terminal, and not under `NO_COLOR` or `TERM=dumb`.
pub(super) fn colour_wanted() -> bool {
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var_os("TERM").is_some_and(|t| t != "dumb")
}

fn status_word(status: Status, colour: bool) -> String {
    let word = format!("{:<8}", status.word());
    if !colour {
        return word;
    }
    let code = match status {
        Status::Ok => "32",
        Status::Limited => "33",
        Status::Missing => "31;1",
    };
    format!("\x1b[{code}m{word}\x1b[0m")
}

pub(super) fn text(report: &Report, colour: bool) -> String {
    let mut out = String::new();
    let who = match report.euid {
        0 => "root".to_string(),
        uid => format!("uid {uid}"),
    };
    let _ = writeln!(
        out,
        "strata doctor: what strata can see on {} as {who}",
        crate::text::clean(&report.host)
    );
    let mut group = None;
    let indent = " ".repeat(2 + 9 + NAME_WIDTH + 1);
    for check in &report.checks {
        if group != Some(check.group) {
            group = Some(check.group);
            let _ = writeln!(out, "\n{}", check.group.title());
        }
        let name = match &check.subject {
            Some(subject) => format!("{subject} {}", check.check),
            None => check.check.to_string(),
        };
        let _ = writeln!(
            out,
            "  {} {name:<NAME_WIDTH$} {}",
            status_word(check.status, colour),
            check.detail
        );
        if let Some(fix) = &check.fix {
            let _ = writeln!(out, "{indent}fix: {fix}");
        }
    }
    let c = &report.counts;
    let _ = writeln!(
        out,
        "\n{} ok, {} limited, {} missing: exit status {}",
        c.ok, c.limited, c.missing, report.exit_status
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::{Check, Group};

    #[test]
    fn each_check_is_a_line_with_its_fix_under_it_and_a_summary() {
        let report = Report::new(
            "node\x1b[2J".into(),
            1000,
            vec![
                Check::ok(Group::Driver, "nvml", "loaded"),
                Check::limited(Group::Gpus, "mig_mode", "refused", "run as root").about("GPU 0"),
            ],
        );
        let text = text(&report, false);
        assert!(!text.contains('\x1b'), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "strata doctor: what strata can see on node\u{FFFD}[2J as uid 1000"
        );
        assert!(
            lines.contains(&"  ok       nvml                     loaded"),
            "{text}"
        );
        assert!(
            lines.contains(&"  limited  GPU 0 mig_mode           refused"),
            "{text}"
        );
        let fix = lines
            .iter()
            .position(|l| l.ends_with("fix: run as root"))
            .expect("fix");
        assert!(lines[fix - 1].contains("GPU 0 mig_mode"));
        assert_eq!(
            lines.last(),
            Some(&"1 ok, 1 limited, 0 missing: exit status 3")
        );
        let coloured = super::text(&report, true);
        assert!(coloured.contains("\x1b[33mlimited"));
    }
}

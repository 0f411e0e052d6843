//! The terminal the monitor would draw on: `TERM`, its colours, its size (of the controlling
//! terminal, `/dev/tty`, even when doctor's own output is piped), and `NO_COLOR`.

use super::runner::{Lane, Runner};
use super::{Check, Group};
use std::os::fd::AsRawFd;

/// Below this the monitor shows one line asking for room.
const SMALLEST: (u16, u16) = (60, 16);
/// From this width the monitor lays out two columns.
const TWO_COLUMNS: u16 = 150;

pub(super) fn start(runner: &mut Runner) {
    runner.spawn((5, 0), |lane| terminal_lane(&lane));
}

fn variable(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

fn terminal_lane(lane: &Lane) {
    lane.step(
        Group::Terminal,
        "size",
        None,
        "asking /dev/tty its size",
        "",
    );
    let term = variable("TERM");
    lane.report(term_check(term.as_deref()));
    lane.report(colour(term.as_deref(), variable("COLORTERM").as_deref()));
    lane.report(size(window_size()));
    lane.report(no_color(variable("NO_COLOR").as_deref()));
}

/// The controlling terminal's size in columns and rows, `None` without one.
fn window_size() -> Option<(u16, u16)> {
    let tty = std::fs::File::open("/dev/tty").ok()?;
    // SAFETY: `winsize` is plain data; zero is valid.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and a pointer to a `winsize` for TIOCGWINSZ to fill.
    let done = unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCGWINSZ, &mut size) };
    (done == 0 && size.ws_col > 0 && size.ws_row > 0).then_some((size.ws_col, size.ws_row))
}

fn is_dumb(term: Option<&str>) -> bool {
    matches!(term, None | Some("") | Some("dumb"))
}

pub(super) fn term_check(term: Option<&str>) -> Check {
    match term {
        None | Some("") => Check::limited(
            Group::Terminal,
            "term",
            "TERM is not set: the monitor cannot tell what the terminal draws",
            "set TERM to the terminal's own name (`export TERM=xterm-256color`; ssh passes the client's)",
        ),
        Some("dumb") => Check::limited(
            Group::Terminal,
            "term",
            "TERM=dumb: a terminal that cannot move its cursor, where the monitor cannot draw",
            "use a terminal (`ssh -t HOST strata`), or `strata snapshot` where there is none",
        ),
        Some(term) => Check::ok(Group::Terminal, "term", &format!("TERM={term}")),
    }
}

pub(super) fn colour(term: Option<&str>, colorterm: Option<&str>) -> Check {
    const USED: &str = "strata draws with the 16 basic colours, and a glyph for every layer";
    if is_dumb(term) || term.is_some_and(|t| t.starts_with("vt1") || t.starts_with("vt2")) {
        return Check::limited(
            Group::Terminal,
            "colour",
            &format!(
                "no colour for TERM={}: the layers are told apart by their glyphs alone",
                term.unwrap_or("")
            ),
            "set TERM to the terminal's own name; NO_COLOR=1 chooses glyphs alone on purpose",
        );
    }
    let depth = match (colorterm, term) {
        (Some("truecolor" | "24bit"), _) => "24-bit colour",
        (_, Some(t)) if t.contains("256color") => "256 colours",
        _ => "colour",
    };
    Check::ok(Group::Terminal, "colour", &format!("{depth}: {USED}"))
}

pub(super) fn size(size: Option<(u16, u16)>) -> Check {
    let Some((columns, rows)) = size else {
        return Check::ok(
            Group::Terminal,
            "size",
            "no terminal here (no /dev/tty): the monitor needs one (`ssh -t HOST strata`); strata snapshot, record and serve do not",
        );
    };
    let shown = format!("{columns}×{rows}");
    if columns < SMALLEST.0 || rows < SMALLEST.1 {
        return Check::limited(
            Group::Terminal,
            "size",
            &format!(
                "{shown}: below {}×{} the monitor shows one line asking for room",
                SMALLEST.0, SMALLEST.1
            ),
            "enlarge the window",
        );
    }
    let layout = match columns >= TWO_COLUMNS {
        true => "two columns",
        false => "one column (two from 150 columns)",
    };
    Check::ok(
        Group::Terminal,
        "size",
        &format!("{shown}: the monitor lays out {layout}"),
    )
}

pub(super) fn no_color(value: Option<&str>) -> Check {
    let detail = match value {
        None => "not set: the monitor draws in colour",
        Some("") => "set but empty, which counts as not set: the monitor draws in colour",
        Some(_) => "set: the monitor draws without colour, each layer in its own glyph",
    };
    Check::ok(Group::Terminal, "no_color", detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    #[test]
    fn a_dumb_or_missing_term_is_limited() {
        assert_eq!(term_check(None).status, Status::Limited);
        assert_eq!(term_check(Some("dumb")).status, Status::Limited);
        assert_eq!(
            term_check(Some("xterm-256color")).detail,
            "TERM=xterm-256color"
        );
        assert_eq!(colour(Some("dumb"), None).status, Status::Limited);
        assert!(colour(Some("xterm-256color"), None)
            .detail
            .starts_with("256 colours"));
        assert!(colour(Some("xterm"), Some("truecolor"))
            .detail
            .starts_with("24-bit"));
        assert_eq!(colour(Some("vt100"), None).status, Status::Limited);
    }

    #[test]
    fn a_terminal_too_small_for_the_monitor_is_limited() {
        assert_eq!(size(Some((59, 40))).status, Status::Limited);
        assert_eq!(size(Some((200, 15))).status, Status::Limited);
        assert!(size(Some((60, 16))).detail.contains("one column"));
        assert!(size(Some((150, 40))).detail.contains("two columns"));
        assert_eq!(size(None).status, Status::Ok);
    }

    #[test]
    fn an_empty_no_color_is_not_set() {
        assert!(no_color(Some("")).detail.contains("counts as not set"));
        assert!(no_color(Some("1")).detail.starts_with("set:"));
        assert!(no_color(None).detail.starts_with("not set"));
    }
}

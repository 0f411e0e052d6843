//! The monitor under a real pseudo-terminal: it starts, draws the bars and MIG rows, quits
//! on `q` without waiting for its next sample, and leaves the terminal in cooked mode, also on
//! SIGTERM and SIGHUP.

use crate::common;

use common::strata;
use common::tmux::Pane;
use std::time::Duration;

const START: Duration = Duration::from_secs(15);

fn start_demo(name: &str, width: u16, height: u16) -> Pane {
    start_demo_with(name, "", width, height)
}

fn start_demo_with(name: &str, options: &str, width: u16, height: u16) -> Pane {
    let pane = Pane::start(
        name,
        &format!("{} --demo --demo-at 600 {options}", strata()),
        width,
        height,
    );
    if let Err(screen) = pane.wait_for(&["live", "3g.40gb", "2g.20gb", "1g.10gb"], START) {
        panic!("the monitor did not draw its bars and MIG rows:\n{screen}");
    }
    pane
}

/// A sample a minute: a monitor that waited out its sampling interval before quitting would
/// still run half a minute after `q`, a wait that only such a defect or a hang reaches.
#[test]
fn q_quits_without_waiting_for_the_next_sample_and_restores_the_terminal() {
    let pane = start_demo_with("q", "--interval 60", 120, 40);
    pane.keys(&["q"]);
    let (exit, cooked) = pane
        .wait_exit(Duration::from_secs(30))
        .unwrap_or_else(|screen| {
            panic!("still running half a sampling interval after q:\n{screen}")
        });
    assert_eq!(exit, "EXIT=0");
    assert!(cooked, "terminal left raw:\n{}", pane.capture());
    assert!(
        !pane.capture().contains("Processes ("),
        "alternate screen not left"
    );
}

#[test]
fn compact_layout_at_80x24_then_resize_to_wide() {
    let pane = Pane::start(
        "resize",
        &format!("{} --demo --demo-at 600", strata()),
        80,
        24,
    );
    let compact = pane
        .wait_for(&["█live", "└3g.40gb", "Processes (", "Findings ("], START)
        .unwrap_or_else(|s| panic!("compact layout missing:\n{s}"));
    assert!(compact.contains("PID"), "{compact}");
    pane.resize(200, 60);
    pane.wait_for(
        &["GPU 3 · NVIDIA A100-SXM4-80GB", "GI1/CI0", "CTX "],
        Duration::from_secs(5),
    )
    .unwrap_or_else(|s| panic!("wide layout did not appear on resize:\n{s}"));
    pane.resize(30, 8);
    pane.wait_for(&["too small"], Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("no too-small message:\n{s}"));
    pane.keys(&["q"]);
    let (exit, cooked) = pane
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("{s}"));
    assert_eq!(exit, "EXIT=0");
    assert!(cooked);
}

#[test]
fn enter_opens_the_reconciliation_and_escape_returns() {
    let pane = start_demo("detail", 120, 40);
    pane.keys(&["Enter"]);
    pane.wait_for(
        &["Reconciliation · PID", "NVML used", "= live", "+ cached"],
        Duration::from_secs(5),
    )
    .unwrap_or_else(|s| panic!("no reconciliation view:\n{s}"));
    pane.keys(&["Escape"]);
    pane.wait_for(&["Processes ("], Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("escape did not return:\n{s}"));
    pane.keys(&["?"]);
    pane.wait_for(
        &["┌ Help", "q Ctrl-C quit", "Process table"],
        Duration::from_secs(5),
    )
    .unwrap_or_else(|s| panic!("no help:\n{s}"));
    pane.keys(&["C-c"]);
    let (exit, cooked) = pane
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("{s}"));
    assert_eq!(exit, "EXIT=0");
    assert!(cooked);
}

fn signal_restores(signal: &str) {
    let pane = start_demo(signal, 100, 30);
    let pid = pane.program_pid();
    let status = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let (exit, cooked) = pane
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("still running after SIG{signal}:\n{s}"));
    assert_eq!(exit, "EXIT=0", "a signal is a normal way out");
    assert!(
        cooked,
        "terminal left raw after SIG{signal}:\n{}",
        pane.capture()
    );
}

#[test]
fn sigterm_restores_the_terminal() {
    signal_restores("TERM");
}

#[test]
fn sighup_restores_the_terminal() {
    signal_restores("HUP");
}

/// The words of the string literals of the sources the help screen is drawn from: what a
/// line of the help may end with.
fn help_words() -> std::collections::HashSet<String> {
    let mut words = std::collections::HashSet::new();
    for file in ["src/ui/help.rs", "src/layers.rs", "src/history/budget.rs"] {
        let path = format!("{}/{file}", env!("CARGO_MANIFEST_DIR"));
        let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut literal: Option<String> = None;
        let mut chars = source.chars();
        while let Some(c) = chars.next() {
            match (&mut literal, c) {
                (None, '"') => literal = Some(String::new()),
                (Some(text), '"') => {
                    words.extend(text.split_whitespace().map(str::to_string));
                    literal = None;
                }
                // An escape: a quote, or the line's end that continues the literal.
                (Some(text), '\\') => match chars.next() {
                    Some('"') => text.push('"'),
                    Some('\n') => text.push(' '),
                    Some(other) => {
                        text.push('\\');
                        text.push(other);
                    }
                    None => {}
                },
                (Some(text), c) => text.push(c),
                (None, _) => {}
            }
        }
    }
    words
}

/// At 80x24 the help wraps between words: page by page to its end, every line inside its
/// border ends with a whole word of the help's text (or a figure of the history's budget),
/// and the border says how much is below, then how much above.
#[test]
fn the_help_at_80x24_ends_no_line_mid_word() {
    let words = help_words();
    let pane = start_demo("help-words", 80, 24);
    pane.keys(&["?"]);
    let first = pane
        .wait_for(&["┌ Help", "more lines below"], Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("no help saying what is below:\n{s}"));
    let below: usize = first
        .lines()
        .find(|l| l.starts_with('└'))
        .unwrap_or_default()
        .split("↓ ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("how much is below:\n{first}"));
    let mut screen = first;
    let mut page = 0;
    loop {
        let inside = screen
            .lines()
            .skip_while(|l| !l.starts_with("┌ Help"))
            .skip(1)
            .take_while(|l| !l.starts_with('└'));
        for line in inside {
            let text = line
                .trim_start_matches('│')
                .trim_end()
                .trim_end_matches('│')
                .trim_end();
            let Some(last) = text.split_whitespace().last() else {
                continue;
            };
            assert!(
                words.contains(last) || last.parse::<f64>().is_ok(),
                "a line ends mid-word ({last:?}):\n{screen}"
            );
        }
        if page * 10 >= below {
            break;
        }
        page += 1;
        pane.keys(&["NPage"]);
        let above = format!("↑ {} lines above", (page * 10).min(below));
        screen = pane
            .wait_for(&[&above], Duration::from_secs(5))
            .unwrap_or_else(|s| panic!("PgDn did not scroll to {above}:\n{s}"));
    }
    assert!(!screen.contains("more lines below"), "{screen}");
    pane.keys(&["q"]);
}

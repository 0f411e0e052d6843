//! The mouse in a real terminal, on the demo: strata asks for clicks and the wheel (not for
//! every motion), a click selects the row under it and Enter opens that one, the wheel moves
//! the selection; the mouse is given back on quit and on a stop, and taken again on `fg`;
//! `--no-mouse` never takes it. Needs tmux.
//!
//! tmux sends the pane what a terminal would: a report in SGR's encoding
//! (`ESC [ < button ; column ; row M` on a press, `m` on the release, 1-based), typed
//! literally with `send-keys -l`.

use crate::common;

use common::tmux::Pane;
use common::{strata, wait_until, Scratch};
use std::time::Duration;

const DEMO: &str = "--demo --demo-at 600";
const DRAWN: [&str; 2] = ["live", "Processes ("];

/// The screen row (1-based, as the report counts) whose first word is `pid`.
fn row_of(screen: &str, pid: &str) -> Option<usize> {
    screen
        .lines()
        .position(|l| l.split_whitespace().next() == Some(pid))
        .map(|i| i + 1)
}

/// A press and a release of `button` at (`column`, `row`), 1-based.
fn click(pane: &Pane, button: u8, column: usize, row: usize) {
    pane.keys(&[
        "-l",
        &format!("\x1b[<{button};{column};{row}M\x1b[<{button};{column};{row}m"),
    ]);
}

/// The wheel, a notch down, at (`column`, `row`): the report of button 65, press only.
fn wheel_down(pane: &Pane, column: usize, row: usize) {
    pane.keys(&["-l", &format!("\x1b[<65;{column};{row}M")]);
}

/// The pane's mouse modes, as tmux tracks what the program asked for: normal tracking
/// (1000), SGR encoding (1006), motion while a button is down (1002), every motion (1003).
fn modes(pane: &Pane) -> String {
    pane.format("#{mouse_standard_flag}#{mouse_sgr_flag}#{mouse_button_flag}#{mouse_all_flag}")
}

/// The process rows of the paused table, top to bottom.
fn table_rows(screen: &str) -> Vec<String> {
    let header = screen
        .lines()
        .position(|l| l.starts_with("PID "))
        .expect("the table's header");
    screen
        .lines()
        .skip(header + 1)
        .map_while(|l| {
            let first = l.split_whitespace().next()?;
            first.parse::<u32>().ok().map(|_| first.to_string())
        })
        .collect()
}

#[test]
fn a_click_selects_the_row_under_it_and_enter_opens_it() {
    let pane = Pane::start("mouse", &format!("{} {DEMO}", strata()), 200, 50);
    pane.must_show(&DRAWN, "the monitor did not draw");
    assert_eq!(
        modes(&pane),
        "1100",
        "clicks and the wheel in SGR, no motion"
    );
    // Paused, the rows hold still between reading the screen and clicking it.
    pane.keys(&["p"]);
    let screen = pane.must_show(&["‖ paused"], "p did not pause");
    let rows = table_rows(&screen);
    assert!(rows.len() >= 4, "{screen}");
    // The third row: not the one selected to begin with.
    let pid = &rows[2];
    let row = row_of(&screen, pid).expect("its row");
    click(&pane, 0, 20, row);
    pane.keys(&["Enter"]);
    pane.must_show(
        &[&format!("Reconciliation · PID {pid}")],
        "Enter did not open the clicked row",
    );
    pane.keys(&["Escape"]);
    pane.must_show(&["‖ paused", "Processes ("], "back to the table");
    // The wheel, a notch down over the table: the next row.
    wheel_down(&pane, 20, row);
    pane.keys(&["Enter"]);
    pane.must_show(
        &[&format!("Reconciliation · PID {}", rows[3])],
        "the wheel did not move to the next row",
    );
    pane.keys(&["Escape"]);
    pane.must_show(&["Processes ("], "back to the table");
    pane.quit();
    assert_eq!(modes(&pane), "0000", "the mouse was not given back on quit");
}

#[test]
fn no_mouse_leaves_the_mouse_to_the_terminal() {
    let pane = Pane::start(
        "no-mouse",
        &format!("{} {DEMO} --no-mouse", strata()),
        200,
        50,
    );
    pane.must_show(&DRAWN, "the monitor did not draw");
    assert_eq!(modes(&pane), "0000", "--no-mouse took the mouse");
    pane.keys(&["p"]);
    let screen = pane.must_show(&["‖ paused"], "p did not pause");
    let rows = table_rows(&screen);
    let row = row_of(&screen, &rows[2]).expect("its row");
    // A report that comes through anyway selects nothing: Enter opens the first row.
    click(&pane, 0, 20, row);
    pane.keys(&["Enter"]);
    pane.must_show(
        &[&format!("Reconciliation · PID {}", rows[0])],
        "a click was taken without the mouse",
    );
    pane.keys(&["Escape"]);
    pane.quit();
}

/// A stop (SIGTSTP, under a shell with job control) gives the mouse back with the terminal,
/// and `fg` takes it again.
#[test]
fn a_stop_gives_the_mouse_back_and_fg_takes_it_again() {
    let scratch = Scratch::new("mouse-tstp");
    let go = scratch.dir.join("go");
    let script = format!(
        "set -m\n{strata} {DEMO}\necho \"STOPPED=$?\"\n\
         while [ ! -e '{go}' ]; do sleep 0.05; done\nfg >/dev/null",
        strata = strata(),
        go = go.display()
    );
    let pane = Pane::start("mouse-tstp", &script, 100, 30);
    pane.must_show(&DRAWN, "the monitor did not draw");
    assert_eq!(modes(&pane), "1100");
    let pid = pane.program_pid();
    // SAFETY: kill(2) on the pid this test started.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGTSTP) }, 0);
    pane.must_show(&["STOPPED=148"], "strata did not stop");
    assert_eq!(modes(&pane), "0000", "stopped with the mouse captured");
    std::fs::write(&go, "").expect("flag");
    wait_until(Duration::from_secs(10), "the mouse taken again", || {
        modes(&pane) == "1100"
    });
    pane.must_show(&DRAWN, "not repainted after fg");
    pane.keys(&["q"]);
    wait_until(
        common::tmux::PATIENCE,
        "the mouse given back on quit",
        || modes(&pane) == "0000",
    );
}

//! A terminal that survives anything, under a real pseudo-terminal: a stop (SIGTSTP, or
//! Ctrl-Z in a shell with job control) gives the terminal back before stopping and takes it
//! again on SIGCONT, keys answering without Enter; every signal that ends strata ends it with
//! the terminal restored (cooked mode, primary screen, cursor shown) and the conventional
//! status (128 + the signal's number).

use crate::common;

use common::tmux::Pane;
use common::{strata, wait_until, Scratch};
use std::process::Command;
use std::time::Duration;

const START: Duration = Duration::from_secs(20);
const DEMO: &str = "--demo --demo-at 600";
/// What the monitor shows once drawn.
const DRAWN: [&str; 2] = ["live", "Processes ("];

fn send(pid: u32, signo: i32) {
    // SAFETY: kill(2) on a pid this test started.
    let sent = unsafe { libc::kill(pid as libc::pid_t, signo) };
    assert_eq!(sent, 0, "kill {signo} {pid}");
}

/// The state letter of `/proc/PID/stat` (`T` when stopped).
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// The first child of `parent`.
fn child_of(parent: u32) -> Option<u32> {
    let out = Command::new("pgrep")
        .args(["-P", &parent.to_string()])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
}

/// Whether `modes` (a line of `stty -a` words) is cooked: canonical input and echo.
fn cooked(modes: &str) -> bool {
    let words: Vec<&str> = modes.split_whitespace().collect();
    words.contains(&"icanon") && words.contains(&"echo")
}

/// The terminal as a user finds it once strata has let go of it.
fn assert_given_back(pane: &Pane, when: &str) {
    assert_eq!(
        pane.format("#{alternate_on}"),
        "0",
        "{when}: still on the alternate screen:\n{}",
        pane.capture()
    );
    assert_eq!(
        pane.format("#{cursor_flag}"),
        "1",
        "{when}: cursor left hidden"
    );
}

/// `kill -TSTP` under a shell with job control (`sh` with `set -m`, which leaves the
/// terminal's mode alone): strata gives the terminal back before it stops, so the shell's
/// next lines land on its own screen in cooked mode; continued (`fg`), it takes the
/// terminal again, repaints, and `q` quits without Enter.
#[test]
fn sigtstp_gives_the_terminal_back_then_sigcont_takes_it_again() {
    let scratch = Scratch::new("tstp");
    let go = scratch.dir.join("go");
    let script = format!(
        "set -m\nulimit -c 0\n{strata} {DEMO}\necho \"STOPPED=$?\"\n\
         stty -a | tr ' ' '\\n' | grep -E '^-?(icanon|echo)$' | tr '\\n' ' '\necho ' STOPPED-MODES'\n\
         while [ ! -e '{go}' ]; do sleep 0.05; done\nfg >/dev/null",
        strata = strata(),
        go = go.display()
    );
    let pane = Pane::start("tstp", &script, 100, 30);
    pane.wait_for(&DRAWN, START)
        .unwrap_or_else(|s| panic!("the monitor did not draw:\n{s}"));
    assert_eq!(pane.format("#{alternate_on}"), "1");
    let pid = pane.program_pid();
    send(pid, libc::SIGTSTP);
    let screen = pane
        .wait_for(&["STOPPED=148", "STOPPED-MODES"], Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("strata did not stop on SIGTSTP:\n{s}"));
    assert_eq!(proc_state(pid), Some('T'), "stopped");
    let modes = screen
        .lines()
        .find(|l| l.contains("STOPPED-MODES"))
        .unwrap_or_default();
    assert!(cooked(modes), "stopped with the terminal raw: {modes}");
    assert!(
        !screen.contains("Processes ("),
        "the shell wrote over strata's screen:\n{screen}"
    );
    assert_given_back(&pane, "stopped");

    std::fs::write(&go, "").expect("flag");
    wait_until(Duration::from_secs(5), "strata to run again", || {
        proc_state(pid) != Some('T')
    });
    pane.wait_for(&DRAWN, Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("not repainted after SIGCONT:\n{s}"));
    assert_eq!(
        pane.format("#{alternate_on}"),
        "1",
        "alternate screen again"
    );
    assert_eq!(pane.format("#{cursor_flag}"), "0", "cursor hidden again");
    let tty = pane.format("#{pane_tty}");
    let out = Command::new("stty")
        .args(["-a", "-F", &tty])
        .output()
        .expect("stty");
    let modes = String::from_utf8_lossy(&out.stdout).replace(';', " ");
    assert!(
        modes.split_whitespace().any(|w| w == "-icanon"),
        "raw mode again: {modes}"
    );
    pane.keys(&["q"]);
    let (exit, cooked) = pane
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("q without Enter did not quit after SIGCONT:\n{s}"));
    assert_eq!(exit, "EXIT=0");
    assert!(cooked);
    assert_given_back(&pane, "quit");
}

/// The user's way: in an interactive bash, Ctrl-Z stops strata (raw mode makes it a key)
/// and the "Stopped" line and the prompt come on the shell's own screen; `fg` brings strata
/// back, repainted, and a key works without Enter. The same with `kill -TSTP`.
#[test]
fn ctrl_z_and_fg_in_an_interactive_shell() {
    let pane = Pane::start(
        "ctrlz",
        "PS1='prompt$ ' bash --norc --noprofile -i",
        100,
        30,
    );
    pane.wait_for(&["prompt$"], START)
        .unwrap_or_else(|s| panic!("no shell prompt:\n{s}"));
    let shell = child_of(pane.format("#{pane_pid}").parse().expect("pane pid"))
        .expect("the interactive shell");
    pane.keys(&[&format!("{} {DEMO}", strata()), "Enter"]);
    pane.wait_for(&DRAWN, START)
        .unwrap_or_else(|s| panic!("the monitor did not draw:\n{s}"));
    let pid = child_of(shell).expect("strata");

    for (round, stop) in ["Ctrl-Z", "kill -TSTP"].into_iter().enumerate() {
        if round == 0 {
            pane.keys(&["C-z"]);
        } else {
            send(pid, libc::SIGTSTP);
        }
        let screen = pane
            .wait_for(&["Stopped"], Duration::from_secs(5))
            .unwrap_or_else(|s| panic!("{stop}: strata did not stop:\n{s}"));
        assert_eq!(proc_state(pid), Some('T'), "{stop}");
        assert_given_back(&pane, stop);
        let screen = pane
            .wait_for(&["Stopped", "prompt$"], Duration::from_secs(5))
            .unwrap_or(screen);
        let last = screen.lines().rev().find(|l| !l.trim().is_empty());
        assert_eq!(
            last.map(str::trim_end),
            Some("prompt$"),
            "{stop}: the prompt is not the last line:\n{screen}"
        );
        assert!(
            !screen.contains("Processes ("),
            "{stop}: the shell's lines landed on strata's screen:\n{screen}"
        );
        pane.keys(&["clear", "Enter"]);
        pane.keys(&["fg", "Enter"]);
        pane.wait_for(&DRAWN, Duration::from_secs(5))
            .unwrap_or_else(|s| panic!("{stop}: not repainted after fg:\n{s}"));
        assert_eq!(pane.format("#{alternate_on}"), "1", "{stop}: after fg");
        wait_until(Duration::from_secs(5), "strata to run", || {
            proc_state(pid) != Some('T')
        });
    }
    // A key without Enter: raw mode was taken again.
    pane.keys(&["q"]);
    wait_until(Duration::from_secs(5), "q without Enter to quit", || {
        proc_state(pid).is_none()
    });
    assert_given_back(&pane, "quit");
    pane.keys(&["echo \"RC=$?\"", "Enter"]);
    pane.wait_for(&["RC=0"], Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("strata did not exit cleanly:\n{s}"));
}

/// A terminal that hangs up with no SIGHUP for strata (it runs in a session of its own,
/// under a shell that ignores the signal): strata quits as SIGHUP asks (status 0), at once,
/// though its next sample is a minute away. Before, crossterm's reader spun on the ended
/// terminal, a whole core, until a frame's write failed at the next sample (and the error,
/// said to the same dead terminal, panicked: status 101).
#[test]
fn a_terminal_hung_up_without_sighup_ends_the_monitor() {
    let pane = Pane::start(
        "hangup",
        &format!(
            "trap '' HUP\nsetsid -w {} {DEMO} --interval 60\necho \"$?\" > \"$(dirname \"$0\")/status\"",
            strata()
        ),
        100,
        30,
    );
    pane.wait_for(&DRAWN, START)
        .unwrap_or_else(|s| panic!("the monitor did not draw:\n{s}"));
    let status = pane.dir().join("status");
    // In a session of its own, strata outlives the server: where it has not ended (no
    // status written), a failure must not leave it running.
    struct KilledUnlessEnded(u32, std::path::PathBuf);
    impl Drop for KilledUnlessEnded {
        fn drop(&mut self) {
            if !self.1.exists() {
                // SAFETY: kill(2) of a pid this test started, still running.
                unsafe { libc::kill(self.0 as libc::pid_t, libc::SIGKILL) };
            }
        }
    }
    let _strata = KilledUnlessEnded(pane.program_pid(), status.clone());
    pane.hang_up();
    wait_until(
        common::tmux::PATIENCE,
        "strata to end on the hangup",
        || status.exists(),
    );
    // The shell writes the status once strata has ended; a read may still see it empty.
    wait_until(Duration::from_secs(5), "the status written", || {
        std::fs::read_to_string(&status).is_ok_and(|s| s.ends_with('\n'))
    });
    let said = std::fs::read_to_string(&status).expect("the status");
    assert_eq!(said.trim(), "0", "strata's exit status on a hangup");
}

/// strata killed by `signo`: it exits with 128 + `signo` (as if it had not caught the
/// signal), the terminal in cooked mode, on the primary screen, the cursor shown.
fn ends_restored(name: &str, signo: i32) {
    let pane = Pane::start(name, &format!("ulimit -c 0\n{} {DEMO}", strata()), 100, 30);
    pane.wait_for(&DRAWN, START)
        .unwrap_or_else(|s| panic!("the monitor did not draw:\n{s}"));
    assert_eq!(pane.format("#{alternate_on}"), "1");
    assert_eq!(pane.format("#{cursor_flag}"), "0");
    send(pane.program_pid(), signo);
    let (exit, cooked) = pane
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("still running after signal {signo}:\n{s}"));
    assert_eq!(exit, format!("EXIT={}", 128 + signo), "signal {signo}");
    assert!(
        cooked,
        "terminal left raw after signal {signo}:\n{}",
        pane.capture()
    );
    assert_given_back(&pane, name);
}

macro_rules! ends_restored {
    ($($test:ident: $signo:expr;)*) => {$(
        #[test]
        fn $test() {
            ends_restored(stringify!($test), $signo);
        }
    )*};
}

ends_restored! {
    sigquit: libc::SIGQUIT;
    sigusr1: libc::SIGUSR1;
    sigusr2: libc::SIGUSR2;
    sigalrm: libc::SIGALRM;
    sigvtalrm: libc::SIGVTALRM;
    sigprof: libc::SIGPROF;
    sigxcpu: libc::SIGXCPU;
    sigxfsz: libc::SIGXFSZ;
    sigio: libc::SIGIO;
    sigpwr: libc::SIGPWR;
    sigstkflt: libc::SIGSTKFLT;
    sigrtmin: libc::SIGRTMIN();
    sigrtmax: libc::SIGRTMAX();
    sigsegv: libc::SIGSEGV;
    sigbus: libc::SIGBUS;
    sigill: libc::SIGILL;
    sigfpe: libc::SIGFPE;
    sigabrt: libc::SIGABRT;
    sigtrap: libc::SIGTRAP;
    sigsys: libc::SIGSYS;
}

//! Signals to real child processes: each one ends it with that signal; a reused, gone or
//! defunct pid, init, nothing and strata itself are refused.

use super::*;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command};

/// `sleep 60` with every signal strata sends at its default action. A test run started in
/// the background (`cmd &` in a script, nohup) hands its children SIGINT ignored, and a
/// SIGINT would then end nothing.
fn sleeper() -> Child {
    let mut command = Command::new("sleep");
    command.arg("60");
    // SAFETY: between fork and exec the closure makes only signal(2) calls, which are
    // async-signal-safe, and touches no memory of the parent's.
    unsafe {
        command.pre_exec(|| {
            for signal in Signal::ALL {
                libc::signal(signal.number(), libc::SIG_DFL);
            }
            Ok(())
        });
    }
    command.spawn().expect("sleep")
}

fn target_of(child: &Child) -> Target {
    let pid = child.id();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    Target {
        pid,
        start_time: crate::source::procfs::parse_stat(&stat).2,
        user: None,
        command: Some("sleep 60".into()),
        note: None,
    }
}

#[test]
fn each_signal_reaches_the_process_shown_and_ends_it_with_that_signal() {
    for signal in Signal::ALL {
        let mut child = sleeper();
        let target = target_of(&child);
        assert_eq!(Kernel::default().check(&target), Ok(()));
        Kernel::default().send(&target, signal).expect("sent");
        let status = child.wait().expect("reaped");
        assert_eq!(status.signal(), Some(signal.number()), "{}", signal.name());
    }
}

#[test]
fn a_reused_or_gone_pid_is_never_signalled() {
    let mut child = sleeper();
    let mut target = target_of(&child);
    // Another start time: what the screen showed is not what the pid names now.
    target.start_time = target.start_time.map(|t| t + 1);
    let kernel = Kernel::default();
    assert_eq!(kernel.check(&target), Err(Refusal::Reused(target.pid)));
    assert_eq!(
        kernel.send(&target, Signal::Kill),
        Err(Refusal::Reused(target.pid))
    );
    assert_eq!(child.try_wait().expect("wait"), None, "still alive");
    target.start_time = None;
    assert_eq!(
        kernel.check(&target),
        Err(Refusal::UnknownStart(target.pid))
    );
    let _ = child.kill();
    let _ = child.wait();
    let gone = target_of_gone();
    assert_eq!(
        kernel.send(&gone, Signal::Term),
        Err(Refusal::Gone(gone.pid))
    );
}

fn target_of_gone() -> Target {
    let mut child = Command::new("true").spawn().expect("true");
    child.wait().expect("reaped");
    Target {
        pid: child.id(),
        start_time: Some(1),
        user: None,
        command: None,
        note: None,
    }
}

#[test]
fn init_nothing_and_itself_are_refused_before_anything_is_read() {
    let kernel = Kernel {
        proc_root: PathBuf::from("/nonexistent"),
    };
    let at = |pid| Target {
        pid,
        start_time: Some(1),
        user: None,
        command: None,
        note: None,
    };
    assert_eq!(kernel.check(&at(0)), Err(Refusal::Reserved(0)));
    assert_eq!(kernel.send(&at(1), Signal::Kill), Err(Refusal::Reserved(1)));
    assert_eq!(
        kernel.check(&at(u32::MAX)),
        Err(Refusal::Reserved(u32::MAX))
    );
    let me = std::process::id();
    assert_eq!(kernel.send(&at(me), Signal::Term), Err(Refusal::Itself(me)));
}

#[test]
fn a_defunct_process_is_said_to_be_so() {
    // A child that exits and is not reaped yet: state Z.
    let mut child = Command::new("true").spawn().expect("true");
    let pid = child.id();
    let mut target = None;
    for _ in 0..200 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let (_, state, start) = crate::source::procfs::parse_stat(&stat);
        if state.as_deref() == Some("Z") {
            target = start;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let target = Target {
        pid,
        start_time: target,
        user: None,
        command: None,
        note: None,
    };
    let refused = Kernel::default().check(&target);
    child.wait().expect("reaped");
    let me = std::process::id().to_string();
    assert_eq!(refused, Err(Refusal::Defunct { pid, parent: me }));
}

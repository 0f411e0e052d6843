//! `K`, the kill dialog, in a real terminal, on the NVML path (the fake library listing real
//! processes): the dialog, its confirmation, the signal the process dies of, a cancel that
//! leaves it alive, EPERM said as such; the holder of a zombie context's device file named
//! and signalled.

use crate::common;

use common::fake_nvml::{fake_nvml_lib, SCENARIO_ENV};
use common::tmux::Pane;
use common::{strata, Running, Scratch};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const START: Duration = Duration::from_secs(15);

fn sleeper(script: &str) -> Running {
    let child = Running::spawn(
        Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
    );
    let pid = child.pid();
    // The shell becomes `sleep` (after opening what the script opens).
    for _ in 0..300 {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline.starts_with(b"sleep") {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// One GPU listing `pids` (1 GiB each), as a scenario file in `dir`.
fn scenario(dir: &Path, pids: &[u32]) -> PathBuf {
    let processes: Vec<_> = pids
        .iter()
        .map(|pid| json!({ "pid": pid, "used": 1u64 << 30 }))
        .collect();
    let device = json!({
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-dddddddd-0000-4000-8000-000000000000",
        "memory": { "total": 85520809984u64, "reserved": 617611264u64,
                    "used": 8589934592u64, "free": 76313264128u64 },
        "utilization": { "gpu": 50, "memory": 20 },
        "mig_mode": { "current": 0, "pending": 0 },
        "compute_processes": processes,
    });
    let file = dir.join("scenario.json");
    std::fs::write(&file, json!({ "devices": [device] }).to_string()).expect("scenario");
    file
}

/// The monitor on `file`, its command line behind `wrapper` and `env`.
fn monitor(name: &str, file: &Path, wrapper: &str, env: &str) -> Pane {
    let command = format!(
        "{SCENARIO_ENV}='{}' {env} {wrapper} {} --interval 0.5 --nvml-lib '{}'",
        file.display(),
        strata(),
        fake_nvml_lib().display()
    );
    Pane::start(name, &command, 160, 40)
}

/// `K` on a real `sleep`: Esc cancels and it lives on; then SIGTERM, confirmed with `y`, ends
/// it with SIGTERM, and the footer says so.
#[test]
fn k_cancelled_leaves_a_real_sleep_alive_and_confirmed_ends_it_with_sigterm() {
    let scratch = Scratch::shared("k-term");
    let mut target = sleeper("exec sleep 300");
    let pid = target.pid();
    let pane = monitor("k-term", &scenario(&scratch.dir, &[pid]), "", "");
    pane.wait_for(&[&pid.to_string(), "sleep 300"], START)
        .unwrap_or_else(|s| panic!("the sleep is not listed:\n{s}"));
    pane.keys(&["K"]);
    pane.must_show(
        &[
            &format!("Signal PID {pid} (sleep 300)"),
            "› SIGTERM",
            "SIGKILL",
        ],
        "no dialog",
    );
    pane.keys(&["Escape"]);
    pane.must_show(&["cancelled: no signal sent"], "no word of the cancel");
    assert_eq!(target.died_of(Duration::from_secs(1)), None, "still alive");
    pane.keys(&["K"]);
    pane.keys(&["Enter"]);
    pane.must_show(
        &[
            &format!("Send SIGTERM to PID {pid} (sleep 300)"),
            "y/Enter send",
        ],
        "no confirmation asked",
    );
    assert_eq!(
        target.died_of(Duration::from_millis(300)),
        None,
        "not before y"
    );
    pane.keys(&["y"]);
    assert_eq!(target.died_of(Duration::from_secs(5)), Some(libc::SIGTERM));
    pane.must_show(
        &[&format!("SIGTERM sent to PID {pid} (sleep 300)")],
        "no outcome in the footer",
    );
    pane.quit();
}

/// The other signals: ↑ for SIGINT, ↓ for SIGKILL, Enter to confirm; `n` declines.
#[test]
fn k_sends_sigint_or_sigkill_as_chosen_and_n_declines() {
    let scratch = Scratch::shared("k-int");
    let mut first = sleeper("exec sleep 301");
    let mut second = sleeper("exec sleep 302");
    let (a, b) = (first.pid(), second.pid());
    let pane = monitor("k-int", &scenario(&scratch.dir, &[a, b]), "", "");
    pane.wait_for(&["sleep 301", "sleep 302"], START)
        .unwrap_or_else(|s| panic!("not listed:\n{s}"));
    // Both hold 1 GiB: ordered by pid.
    let (low, high) = if a < b { (a, b) } else { (b, a) };
    pane.keys(&["Home", "K", "Enter"]);
    pane.must_show(&[&format!("Send SIGTERM to PID {low}")], "no confirmation");
    pane.keys(&["n"]);
    pane.must_show(&["cancelled: no signal sent"], "n did not decline");
    pane.keys(&["K", "Up", "Enter"]);
    pane.must_show(&[&format!("Send SIGINT to PID {low}")], "SIGINT not chosen");
    pane.keys(&["Enter"]);
    let (low_child, high_child) = if a < b {
        (&mut first, &mut second)
    } else {
        (&mut second, &mut first)
    };
    assert_eq!(
        low_child.died_of(Duration::from_secs(5)),
        Some(libc::SIGINT)
    );
    pane.wait_for(
        &[&format!("SIGINT sent to PID {low}")],
        Duration::from_secs(5),
    )
    .unwrap_or_else(|s| panic!("{s}"));
    // The scenario still lists it: its row says it is gone, and stays first.
    pane.wait_for(&["gone"], Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("the row is not marked gone:\n{s}"));
    pane.keys(&["Home", "Down", "K", "Down", "Down", "Enter"]);
    pane.must_show(
        &[&format!("Send SIGKILL to PID {high}")],
        "SIGKILL not chosen",
    );
    pane.keys(&["y"]);
    assert_eq!(
        high_child.died_of(Duration::from_secs(5)),
        Some(libc::SIGKILL)
    );
    pane.quit();
}

/// strata as `nobody` may not signal root's `sleep`: no dialog, the footer says EPERM and
/// what to do, and the sleep lives on. Needs root for setpriv (CI runs as root).
#[test]
fn another_users_process_is_refused_with_eperm_said() {
    assert_eq!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() },
        0,
        "setpriv needs root (CI runs as root)"
    );
    let scratch = Scratch::shared("k-eperm");
    let mut target = sleeper("exec sleep 303");
    let pid = target.pid();
    let file = scenario(&scratch.dir, &[pid]);
    let wrapper = "setpriv --reuid 65534 --regid 65534 --clear-groups";
    let pane = monitor("k-eperm", &file, wrapper, "");
    pane.wait_for(&["sleep 303"], START)
        .unwrap_or_else(|s| panic!("not listed:\n{s}"));
    pane.keys(&["K"]);
    let screen = pane.must_show(
        &[&format!(
            "not signalled: not permitted (EPERM): PID {pid} belongs to user root"
        )],
        "EPERM not said",
    );
    assert!(!screen.contains("Send SIG"), "{screen}");
    assert_eq!(target.died_of(Duration::from_secs(1)), None, "still alive");
    pane.quit();
}

/// NVML lists a pid that has exited; a real `sleep` holds GPU 0's device file open (an
/// ordinary file `nvidia0` in `STRATA_DEV_DIR`). The finding names it with its parent, its
/// evidence lists it, and `K` there signals it after confirmation.
#[test]
fn the_holder_of_a_zombie_context_is_named_and_signalled() {
    let scratch = Scratch::shared("k-zombie");
    let dev = scratch.dir.join("dev");
    std::fs::create_dir_all(&dev).expect("dev");
    std::fs::write(dev.join("nvidia0"), b"").expect("device file");
    let mut holder = sleeper(&format!(
        "exec 3<'{}/nvidia0'; exec sleep 304",
        dev.display()
    ));
    let holder_pid = holder.pid();
    let mut gone = Command::new("true").spawn().expect("true");
    gone.wait().expect("reaped");
    let file = scenario(&scratch.dir, &[gone.id()]);
    let env = format!("STRATA_DEV_DIR='{}'", dev.display());
    let pane = monitor("k-zombie", &file, "", &env);
    pane.wait_for(
        &[&format!(
            "/dev/nvidia0 is still held open by PID {holder_pid} (sleep 304)"
        )],
        Duration::from_secs(20),
    )
    .unwrap_or_else(|s| panic!("the holder is not named:\n{s}"));
    pane.keys(&["Tab", "Home", "Enter"]);
    let me = std::process::id();
    pane.must_show(
        &[
            "Finding · zombie_context",
            &format!("PID {holder_pid}"),
            &format!("sleep 304 · no context of its own · child of {me}"),
            "K: signal one of the holders",
        ],
        "the evidence does not list the holder",
    );
    pane.keys(&["K"]);
    pane.must_show(
        &[
            "Signal · the holders of /dev/nvidia0",
            &format!("Signal PID {holder_pid} (sleep 304)"),
        ],
        "no dialog for the holder",
    );
    pane.keys(&["Down", "Enter"]);
    pane.must_show(
        &[&format!("Send SIGKILL to PID {holder_pid}")],
        "no confirmation",
    );
    assert_eq!(
        holder.died_of(Duration::from_millis(300)),
        None,
        "not before y"
    );
    pane.keys(&["y"]);
    assert_eq!(holder.died_of(Duration::from_secs(5)), Some(libc::SIGKILL));
    // Nobody holds it now: the finding says so once the search comes round again.
    pane.keys(&["Escape"]);
    pane.wait_for(
        &["no process holds /dev/nvidia0 open"],
        Duration::from_secs(15),
    )
    .unwrap_or_else(|s| panic!("the holder is still named:\n{s}"));
    pane.quit();
}

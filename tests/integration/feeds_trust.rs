//! Trust and bad input, end to end: feeds the monitor must refuse (wrong dir mode or owner, a
//! foreign uid, a hello that claims another pid), and peers that send garbage or flood, with
//! the monitor unharmed. Needs root (CI runs as root) for chown and `setpriv`.

use crate::common;

use common::feeds::*;
use common::{strata, wait_until, Running, Scratch};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A peer from `tests/feeds/hostile_agent.py`, killed on drop.
struct Hostile {
    _child: Running,
    pid: u32,
}

impl Hostile {
    fn start(feed_dir: &Path, mode: &str) -> Hostile {
        let script = common::fake_nvml::workspace_root().join("tests/feeds/hostile_agent.py");
        let mut child = Running::spawn(
            Command::new("python3")
                .arg(script)
                .arg(feed_dir)
                .arg(mode)
                .stdout(Stdio::piped()),
        );
        let pid = announced_pid(&mut child, "ready");
        Hostile { _child: child, pid }
    }
}

fn listed(pid: u32) -> Value {
    one_gpu(vec![holder(pid, json!(4 * GIB))], json!(4 * GIB))
}

fn refusal_of(snap: &Value, pid: u32) -> String {
    let p = process_of(snap, pid);
    assert_eq!(p["feed_status"]["state"], "refused", "{p}");
    assert!(
        p["feed"].is_null(),
        "nothing of a refused feed is used: {p}"
    );
    assert!(p["layers"]["live"].is_null());
    assert_eq!(p["layers"]["unattributed"], 4 * GIB);
    assert!(
        finding_kinds(snap).contains(&"refused_feed".to_string()),
        "{}",
        snap["findings"]
    );
    p["feed_status"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_feed_dir_with_the_wrong_mode_or_owner_is_refused() {
    assert!(is_root(), "the trust tests run as root (chown)");
    let scratch = Scratch::new("dir-trust");
    let mut job = Job::start(&scratch.feeds(), &[], false);
    job.wait_for_socket(&scratch.feeds());

    std::fs::set_permissions(scratch.feeds(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let snap = &snapshot(&scratch, &listed(job.pid), &[])[0];
    let reason = refusal_of(snap, job.pid);
    assert!(reason.contains("0755"), "{reason}");

    std::fs::set_permissions(scratch.feeds(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    std::os::unix::fs::chown(scratch.feeds(), Some(65534), Some(65534)).expect("chown");
    let snap = &snapshot(&scratch, &listed(job.pid), &[])[0];
    let reason = refusal_of(snap, job.pid);
    assert!(reason.contains("65534"), "{reason}");
    job.run("pass");
}

/// An agent run as `nobody`, whose socket ends up in a directory of root's: the kernel's
/// credentials for the peer are not the directory owner's.
#[test]
fn an_agent_of_a_foreign_uid_is_refused() {
    assert!(is_root(), "the trust tests run as root (setpriv)");
    let scratch = Scratch::new("foreign");
    // nobody's own feed dir, where nobody's agent can listen.
    let nobodys = Scratch::new("nobody");
    let dir = &nobodys.dir;
    std::os::unix::fs::chown(dir, Some(65534), Some(65534)).expect("chown");
    // The system's interpreter: nobody may run it (a per-user one under /root it may not).
    let mut agent = Running::spawn(Command::new("setpriv").args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            "import os, strata_feed, time; strata_feed.start(interval=0.1); print('up', os.getpid(), flush=True); time.sleep(60)",
        ])
        .env("PYTHONPATH", pythonpath())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("STRATA_FEED_DIR", dir)
        .stdout(Stdio::piped()));
    let pid = announced_pid(&mut agent, "up");
    assert_eq!(pid, agent.id());
    wait_until(
        std::time::Duration::from_secs(10),
        "nobody's socket",
        || dir.join(format!("{pid}.sock")).exists(),
    );
    // Root takes the directory over: the socket in it is still nobody's agent.
    std::os::unix::fs::chown(dir, Some(0), Some(0)).expect("chown");
    let path = scenario_file(&scratch, &listed(pid));
    let output = snapshot_command(&path, dir, &[]).output().expect("strata");
    drop(agent);
    assert!(output.status.success());
    let snap: Value = serde_json::from_slice(&output.stdout).expect("json");
    let reason = refusal_of(&snap, pid);
    assert!(
        reason.contains("65534") && reason.contains("uid"),
        "{reason}"
    );
}

#[test]
fn a_hello_that_claims_another_pid_is_refused() {
    let scratch = Scratch::new("claim");
    let peer = Hostile::start(&scratch.feeds(), "claim-other-pid");
    let snap = &snapshot(&scratch, &listed(peer.pid), &[])[0];
    let reason = refusal_of(snap, peer.pid);
    assert!(reason.contains(&(peer.pid + 1).to_string()), "{reason}");
}

#[test]
fn garbage_is_counted_on_its_feed_and_the_good_lines_still_serve() {
    let scratch = Scratch::new("garbage");
    let peer = Hostile::start(&scratch.feeds(), "bad-lines");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let snap = &snapshot(
        &scratch,
        &one_gpu(vec![holder(peer.pid, json!(3 * GIB))], json!(3 * GIB)),
        &[],
    )[0];
    let feed = feed_of(snap, peer.pid);
    let c = &feed["counters"];
    assert!(c["malformed"].as_u64() >= Some(2), "{c}");
    assert_eq!(c["oversized"], 1, "{c}");
    assert_eq!(c["unknown_version"], 1, "{c}");
    assert_eq!(c["unknown_type"], 1, "{c}");
    assert!(c["invalid"].as_u64() >= Some(1), "{c}");
    assert_eq!(feed["state"]["state"], "connected");
    let p = process_of(snap, peer.pid);
    assert_eq!(p["feed_status"]["state"], "fresh", "{p}");
    assert_eq!(p["layers"]["live"], GIB);
    assert!(
        finding_kinds(snap).contains(&"feed_bad_input".to_string()),
        "{}",
        snap["findings"]
    );
    // The text view says the same, with nothing from the peer reaching the terminal raw.
    let text = Command::new(strata())
        .args(["snapshot", "--nvml-lib"])
        .arg(common::fake_nvml::fake_nvml_lib())
        .arg("--feed-dir")
        .arg(scratch.feeds())
        .env(
            common::fake_nvml::SCENARIO_ENV,
            scratch.path("scenario.json"),
        )
        .output()
        .expect("strata");
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(out.contains("skipped"), "{out}");
    assert!(!out.contains('\u{1b}'), "no escape reaches the terminal");
}

#[test]
fn a_flood_is_rate_limited_then_dropped_and_the_monitor_carries_on() {
    let scratch = Scratch::new("flood");
    let peer = Hostile::start(&scratch.feeds(), "flood");
    let samples = snapshot(
        &scratch,
        &listed(peer.pid),
        &["--count", "4", "--interval", "1"],
    );
    assert_eq!(samples.len(), 4, "every sample came out");
    let last = samples.last().expect("samples");
    let feed = feed_of(last, peer.pid);
    assert!(
        feed["counters"]["rate_limited"].as_u64() > Some(0),
        "{feed}"
    );
    assert!(feed["counters"]["floods"].as_u64() >= Some(1), "{feed}");
    assert_eq!(feed["state"]["state"], "dropped", "{feed}");
    assert_eq!(
        process_of(last, peer.pid)["feed_status"]["state"],
        "refused"
    );
}

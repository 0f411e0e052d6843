//! Feed dirs of several users as a root monitor meets them, end to end, each case under a
//! private /tmp (a tmpfs in its own mount namespace, `tests/feeds/isolated_tmp.py`): one
//! user's dead sockets or links never hide or get refused another user's live feed; a
//! directory cut short and a suspicious entry are said. Needs root (CI runs as root) for
//! `unshare`, `mount` and `setpriv`.

use crate::common;

use common::fake_nvml::{fake_nvml_lib, workspace_root};
use common::feeds::pythonpath;
use common::strata;
use serde_json::Value;
use std::process::Command;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `case` under a private /tmp: `{facts, snapshot}`.
fn isolated(case: &str, extra: &[&str]) -> Value {
    assert!(
        is_root(),
        "these tests run as root (unshare, mount, setpriv)"
    );
    let output = Command::new("unshare")
        .args(["-m", "--propagation", "private", "python3"])
        .arg(workspace_root().join("tests/feeds/isolated_tmp.py"))
        .arg(case)
        .arg(strata())
        .arg(fake_nvml_lib())
        .arg(pythonpath())
        .args(extra)
        .output()
        .expect("unshare and python3");
    assert!(
        output.status.success(),
        "{case}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

fn process(snap: &Value, pid: u64) -> &Value {
    snap["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("no process {pid}: {}", snap["processes"]))
}

/// The feed of `pid` is found, trusted and attached to its process (the agent has no
/// framework here: its process is `pending`, with the agent's note, never `absent`).
fn assert_fed(snap: &Value, pid: u64) {
    let feed = snap["feeds"]
        .as_array()
        .expect("feeds")
        .iter()
        .find(|f| f["peer"]["pid"] == pid)
        .unwrap_or_else(|| panic!("no feed of PID {pid}: {}", snap["feeds"]));
    assert_eq!(feed["state"]["state"], "connected", "{feed}");
    assert_eq!(feed["hello"]["pid"], pid, "{feed}");
    let p = process(snap, pid);
    assert_eq!(p["feed_status"]["state"], "pending", "{p}");
}

fn findings<'a>(snap: &'a Value, kind: &str) -> Vec<&'a Value> {
    snap["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == kind)
        .collect()
}

#[test]
fn another_users_dead_sockets_never_hide_a_live_feed() {
    let out = isolated("cross-user", &[]);
    let snap = &out["snapshot"];
    assert_fed(snap, out["facts"]["agent"].as_u64().expect("agent pid"));
    let cut = findings(snap, "feed_dir_cut_short");
    assert_eq!(cut.len(), 1, "{}", snap["findings"]);
    assert_eq!(cut[0]["evidence"]["dir"], "/tmp/strata-1000");
    assert_eq!(cut[0]["evidence"]["entries"], 5000);
    assert_eq!(cut[0]["evidence"]["read"], 4096);
    let message = cut[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("/tmp/strata-1000 holds 5000 entries"),
        "{message}"
    );
    assert_eq!(snap["feed_scan"]["cut_short"][0]["dir"], "/tmp/strata-1000");
}

#[test]
fn dead_sockets_in_a_jobs_own_dir_do_not_hide_its_feed() {
    let out = isolated("own-dir", &[]);
    // tmpfs lists the newest first: the job's socket, bound before the dead ones, comes after
    // all of them, where a scan that stops at 4096 entries never reads it.
    assert!(
        out["facts"]["position"].as_u64() >= Some(4096),
        "{}",
        out["facts"]
    );
    let snap = &out["snapshot"];
    assert_fed(snap, out["facts"]["agent"].as_u64().expect("agent pid"));
    assert_eq!(findings(snap, "feed_dir_cut_short").len(), 1);
}

#[test]
fn a_link_to_another_users_dir_never_gets_its_feed_refused() {
    let out = isolated("link", &[]);
    let snap = &out["snapshot"];
    let pid = out["facts"]["agent"].as_u64().expect("agent pid");
    assert_fed(snap, pid);
    let feeds = snap["feeds"].as_array().expect("feeds");
    assert_eq!(feeds.len(), 1, "one feed, through the real dir: {feeds:?}");
    assert_eq!(feeds[0]["socket"], format!("/tmp/strata-65534/{pid}.sock"));
    assert!(
        findings(snap, "refused_feed").is_empty(),
        "{}",
        snap["findings"]
    );
    let suspicious = findings(snap, "suspicious_feed_entry");
    assert_eq!(suspicious.len(), 1, "reported once: {}", snap["findings"]);
    let evidence = &suspicious[0]["evidence"];
    assert_eq!(evidence["path"], "/tmp/strata-1");
    assert_eq!(evidence["kind"], "symbolic link");
    assert_eq!(evidence["owner"], 1000);
    assert_eq!(evidence["target"], "/tmp/strata-65534");
    let message = suspicious[0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("owner uid 1000"), "{message}");
}

#[test]
fn a_fifo_link_or_file_at_a_processs_socket_path_says_why() {
    let out = isolated("not-socket", &[]);
    let snap = &out["snapshot"];
    for (kind, shown) in [
        ("fifo", "is a FIFO"),
        ("link", "is a symbolic link to /etc/shadow"),
        ("file", "is a regular file"),
    ] {
        let pid = out["facts"]["pids"][kind].as_u64().expect("pid");
        let p = process(snap, pid);
        assert_eq!(p["feed_status"]["state"], "refused", "{p}");
        let reason = p["feed_status"]["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains(&format!("/tmp/strata-1000/{pid}.sock {shown}")),
            "{reason}"
        );
        assert!(
            reason.contains(&format!("agent socket of PID {pid}")),
            "{reason}"
        );
        assert!(reason.contains("owner uid 1000"), "{reason}");
    }
    assert_eq!(
        snap["feed_scan"]["suspicious"].as_array().map(Vec::len),
        Some(3),
        "{}",
        snap["feed_scan"]
    );
    assert!(!findings(snap, "suspicious_feed_entry").is_empty());
}

/// The monitor says the same: the process is `refused` in its table, and its reconciliation
/// view (Enter) says what is at its socket path and that it is never opened.
#[test]
fn the_monitor_says_why_a_process_has_no_feed() {
    let out = isolated("not-socket", &["--detail"]);
    let screen = out["screen"].as_str().unwrap_or_default();
    assert!(screen.contains("refused"), "{screen}");
    let said = ["fifo", "link", "file"].iter().any(|kind| {
        let pid = out["facts"]["pids"][kind].as_u64().unwrap_or_default();
        screen.contains(&format!("/tmp/strata-1000/{pid}.sock is a"))
            && screen.contains(&format!("agent socket of PID {pid} belongs"))
    });
    assert!(said, "{screen}");
    assert!(screen.contains("owner uid 1000"), "{screen}");
}

//! Escape sequences from outside never reach the terminal: a real process whose argv holds
//! `ESC ] 0 ; pwned BEL` (which would retitle the terminal) and a newline, listed by the fake
//! NVML on a GPU whose name and driver version carry escapes too. The text snapshot shows
//! each one defused; the JSON keeps the data, escaped as JSON escapes it.

use crate::common;

use common::fake_nvml::{fake_nvml_lib, SCENARIO_ENV};
use common::{strata, Running, Scratch};
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::process::Command;

const ARGV0: &str = "evil\x1b]0;pwned\x07\nnext";

fn scenario(dir: &std::path::Path, pid: u32) -> std::path::PathBuf {
    let gib = 1u64 << 30;
    let scenario = json!({
        "system": { "driver_version": "550.54\u{1b}[2J", "cuda_driver_version": 12040 },
        "devices": [{
            "name": "NVIDIA H100\u{1b}]0;gpu\u{7} 80GB\u{202e}",
            "uuid": "GPU-5f3c2a1e-8b7d-4c6e-9a10-2d4f6b8e0c31",
            "memory": { "total": 80 * gib, "reserved": 0, "used": 4 * gib, "free": 76 * gib },
            "compute_processes": [{ "pid": pid, "used": 4 * gib }]
        }]
    });
    let path = dir.join("hostile.json");
    std::fs::write(&path, scenario.to_string()).expect("scenario");
    path
}

fn snapshot(scenario: &std::path::Path, json: bool) -> Vec<u8> {
    let mut command = Command::new(strata());
    command.arg("snapshot");
    if json {
        command.arg("--json");
    }
    let out = command
        .arg("--nvml-lib")
        .arg(fake_nvml_lib())
        .env(SCENARIO_ENV, scenario)
        .env_remove("STRATA_FEED_DIR")
        .output()
        .expect("strata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A control character a terminal acts on: C0 (but the line ends), DEL, C1.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| c != '\n' && c.is_control())
        .collect()
}

#[test]
fn an_escape_in_a_process_argv_reaches_no_terminal() {
    let scratch = Scratch::new("hostile");
    let holder = Running::spawn(Command::new("sleep").arg0(ARGV0).arg("600"));
    let pid = holder.pid();
    let scenario = scenario(&scratch.dir, pid);

    let text = String::from_utf8(snapshot(&scenario, false)).expect("utf-8");
    assert!(raw_controls(&text).is_empty(), "{:?}", raw_controls(&text));
    let row = text
        .lines()
        .find(|l| l.contains(&pid.to_string()))
        .unwrap_or_else(|| panic!("no row for {pid}:\n{text}"));
    assert!(
        row.contains("evil\u{fffd}]0;pwned\u{fffd}\u{fffd}next 600"),
        "the command line, defused, on one line: {row}"
    );
    assert!(
        text.contains("NVIDIA H100\u{fffd}]0;gpu\u{fffd} 80GB\u{fffd}"),
        "{text}"
    );
    assert!(text.contains("driver 550.54\u{fffd}[2J"), "{text}");

    // The JSON keeps what the process really says, with JSON's own escapes.
    let raw = snapshot(&scenario, true);
    assert!(
        !raw.iter().any(|&b| (b < 0x20 && b != b'\n') || b == 0x7f),
        "a raw control byte in the JSON"
    );
    let snap: Value = serde_json::from_slice(&raw).expect("JSON");
    let process = snap["processes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["pid"] == pid))
        .unwrap_or_else(|| panic!("{pid} not listed: {snap}"));
    assert_eq!(process["command"], format!("{ARGV0} 600"), "{process}");
    assert_eq!(snap["driver_version"], "550.54\u{1b}[2J");
    drop(holder);
}

//! strata's real NVML path, end to end, against the fake driver library: the binary loads it
//! with `--nvml-lib`, reads every GPU and MIG instance and every process, and keeps each
//! failure local to the field or GPU it belongs to. Every device's layers are what the
//! scenario implies (`common/oracle/layers.rs`, worked out from the scenario file), or withheld
//! exactly where the scenario makes NVML contradict itself.

use crate::common;

use assert_cmd::Command;
use common::fake_nvml::{fake_nvml_lib, scenario, SCENARIO_ENV};
use common::oracle::layers::{self as oracle, Expect};
use common::{strata, Running, Scratch};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Runs `strata snapshot --json` against a scenario file; returns each sample.
fn snapshots(scenario_file: &Path, extra: &[&str]) -> Vec<Value> {
    let out = Command::new(strata())
        .args(["snapshot", "--json", "--interval", "0.05", "--nvml-lib"])
        .arg(fake_nvml_lib())
        .args(extra)
        .env(SCENARIO_ENV, scenario_file)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "strata failed on {}: {}",
        scenario_file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

/// The largest `pid_max` Linux allows (`PID_MAX_LIMIT` on 64-bit): no process can hold a pid
/// above it.
const PID_MAX_LIMIT: u64 = 4_194_304;

/// The samples of scenario `name`, its pids first moved above [`PID_MAX_LIMIT`], where no
/// process can be, and each sample checked against what the scenario implies with none of
/// its processes on this node; then given their pids back. The scenarios' own pids (7001,
/// 41299...) may be live processes on the machine that runs the suite (a benchmark's
/// thousands of `sleep`s held 7001 to 7003 once), and `/proc` would show them.
fn absent(name: &str, extra: &[&str]) -> Vec<Value> {
    let mut written = scenario_json(&scenario(name));
    let mut pids = Vec::new();
    listed_pids(&written, &mut pids);
    pids.sort_unstable();
    pids.dedup();
    let (mut moved, mut back) = (BTreeMap::new(), BTreeMap::new());
    let could_be_here = pids.into_iter().filter(|p| (1..=PID_MAX_LIMIT).contains(p));
    for (to, pid) in (PID_MAX_LIMIT + 1000..).zip(could_be_here) {
        moved.insert(pid, to);
        back.insert(to, pid);
    }
    replace_pids(&mut written, &moved);
    let scratch = Scratch::new(&format!("absent-{name}"));
    let file = scratch.write("scenario.json", written.to_string(), 0o644);
    let mut samples = snapshots(&file, extra);
    for (poll, s) in samples.iter_mut().enumerate() {
        assert_implied(s, &written, poll, &|_| false, name);
        replace_pids(s, &back);
    }
    samples
}

fn one(name: &str) -> Value {
    absent(name, &[]).remove(0)
}

fn scenario_json(file: &Path) -> Value {
    let text = std::fs::read_to_string(file).expect("scenario readable");
    serde_json::from_str(&text).expect("scenario is JSON")
}

/// One device's layers against the oracle's.
fn assert_device(device: &Value, expect: &Expect, at: &str) {
    let layers = &device["layers"];
    match expect {
        Expect::Withheld(why) => {
            assert!(layers.is_null(), "{at}: layers withheld ({why}): {device}");
            assert!(!device["layers_gap"].is_null(), "{at}: a reason: {device}");
        }
        Expect::Layers {
            other,
            other_upper,
            free,
            unattributed,
            unattributed_partial,
        } => {
            assert!(layers.is_object(), "{at}: layers expected: {device}");
            assert_eq!(
                layers["other"].as_u64(),
                Some(*other),
                "{at} other: {device}"
            );
            assert_eq!(layers["free"].as_u64(), Some(*free), "{at} free");
            let bound = device["bounds"]["other"].as_str();
            assert_eq!(
                bound,
                other_upper.then_some("upper"),
                "{at}: other a bound exactly when a process list is unread: {device}"
            );
            assert_eq!(
                layers["unattributed"].as_u64(),
                *unattributed,
                "{at} unattributed: {device}"
            );
            for feed_layer in ["context", "outside_pool", "cached", "fragmented", "live"] {
                assert!(
                    layers[feed_layer].is_null(),
                    "{at}: no feed, no {feed_layer}"
                );
            }
            let partial = device["partial"]
                .as_array()
                .is_some_and(|p| p.iter().any(|l| l == "unattributed"));
            assert_eq!(
                partial, *unattributed_partial,
                "{at}: unattributed partial: {device}"
            );
        }
    }
}

/// Every GPU's and MIG device's layers are those the scenario implies at `poll`.
fn assert_implied(
    snapshot: &Value,
    scenario: &Value,
    poll: usize,
    visible: &dyn Fn(u64) -> bool,
    name: &str,
) {
    let expected = oracle::expected(scenario, poll, visible);
    let gpus = snapshot["gpus"].as_array().expect("gpus");
    assert_eq!(gpus.len(), expected.len(), "{name}: GPUs");
    for (i, (gpu, expect)) in gpus.iter().zip(&expected).enumerate() {
        let at = format!("{name} poll {poll} GPU {i}");
        assert_device(gpu, &expect.layers, &at);
        let mig = gpu["mig"].as_array().expect("mig");
        assert_eq!(mig.len(), expect.mig.len(), "{at}: MIG devices");
        for (j, (m, e)) in mig.iter().zip(&expect.mig).enumerate() {
            assert_device(m, e, &format!("{at} MIG {j}"));
        }
    }
}

/// Live processes standing in for a scenario's pids, killed on drop, and the scenario that
/// lists them (`file`, in a scratch directory of its own).
struct Live {
    children: Vec<Running>,
    file: PathBuf,
    _scratch: Scratch,
}

/// Every `"pid"` in `value` found in `map`, replaced.
fn replace_pids(value: &mut Value, map: &BTreeMap<u64, u64>) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields.iter_mut() {
                match (key.as_str(), field.as_u64().and_then(|pid| map.get(&pid))) {
                    ("pid", Some(live)) => *field = Value::from(*live),
                    _ => replace_pids(field, map),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| replace_pids(item, map)),
        _ => {}
    }
}

fn listed_pids(value: &Value, out: &mut Vec<u64>) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                match (key.as_str(), field.as_u64()) {
                    ("pid", Some(pid)) => out.push(pid),
                    _ => listed_pids(field, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| listed_pids(item, out)),
        _ => {}
    }
}

/// The scenario with each of its pids replaced by a live process's (a `sleep`), so that
/// `/proc` shows them: all but the pids no process can have (0, 0xFFFFFFFF, and those of
/// `missing_pid.json`, at or above 4000000). Returns the rewritten scenario, and the live
/// processes with the file.
fn with_live_pids(name: &str) -> (Value, Live) {
    let mut scenario = scenario_json(&scenario(name));
    let mut pids = Vec::new();
    listed_pids(&scenario, &mut pids);
    pids.sort_unstable();
    pids.dedup();
    let mut children = Vec::new();
    let mut map = BTreeMap::new();
    for pid in pids.into_iter().filter(|p| (1..4_000_000).contains(p)) {
        let child = Running::spawn(std::process::Command::new("sleep").arg("600"));
        map.insert(pid, u64::from(child.pid()));
        children.push(child);
    }
    replace_pids(&mut scenario, &map);
    let scratch = Scratch::new(&format!("live-{name}"));
    let file = scratch.write("scenario.json", scenario.to_string(), 0o644);
    let live = Live {
        children,
        file,
        _scratch: scratch,
    };
    (scenario, live)
}

fn process(snapshot: &Value, pid: u64) -> &Value {
    snapshot["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} missing: {snapshot}"))
}

#[test]
fn plain_two_gpu_node() {
    let s = one("two_gpus");
    assert_eq!(s["driver_version"], "550.54.15");
    assert_eq!(s["cuda_driver_version"], "12.4");
    let gpus = s["gpus"].as_array().expect("gpus");
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[0]["memory"]["total"], 85_520_809_984u64);
    assert_eq!(gpus[0]["memory"]["driver_reserved"], 617_611_264u64);
    assert_eq!(gpus[0]["utilization_gpu"], 97);
    assert_eq!(gpus[0]["temperature"], 64);
    // Not supported: unknown, and not a problem.
    assert!(gpus[1]["temperature"].is_null(), "{}", gpus[1]);
    assert!(gpus[1]["problems"].get("temperature").is_none());
    // The scenario's first poll: power in milliwatts, the SM clock in MHz.
    assert_eq!(gpus[0]["power_mw"], 412_345);
    assert_eq!(gpus[0]["power_limit_mw"], 700_000);
    assert_eq!(gpus[0]["sm_clock_mhz"], 1980);
    assert_eq!(gpus[0]["sm_clock_max_mhz"], 1980);
    for key in [
        "power_mw",
        "power_limit_mw",
        "sm_clock_mhz",
        "sm_clock_max_mhz",
    ] {
        assert!(gpus[1][key].is_null(), "{key} not supported: {}", gpus[1]);
    }
    assert!(
        gpus[1]["problems"]
            .as_object()
            .is_some_and(|p| p.is_empty()),
        "what NVML does not support is no problem: {}",
        gpus[1]
    );
    assert_eq!(gpus[0]["mig_mode"], false);
    assert_eq!(process(&s, 41237)["used"], 48_845_815_808u64);
    assert_eq!(process(&s, 41237)["sm_util"], 88);
    // A graphics context is a holder too.
    assert_eq!(process(&s, 2214)["kind"], "graphics");
}

#[test]
fn mig_instances_with_their_processes() {
    let s = one("mig");
    let gpu = &s["gpus"][0];
    assert_eq!(gpu["mig_mode"], true);
    let mig = gpu["mig"].as_array().expect("mig");
    let profiles: Vec<&str> = mig.iter().filter_map(|m| m["profile"].as_str()).collect();
    assert_eq!(
        profiles,
        ["3g.40gb", "2g.20gb", "1g.10gb"],
        "empty slots are skipped"
    );
    assert_eq!(mig[0]["gpu_instance_id"], 1);
    assert_eq!(mig[1]["gpu_instance_id"], 5);
    assert_eq!(mig[0]["compute_instance_id"], 0);
    let on_first = process(&s, 61001);
    assert_eq!(on_first["device_uuid"], mig[0]["uuid"]);
    assert_eq!(process(&s, 62001)["device_uuid"], mig[1]["uuid"]);
    // Each process once, on its instance; the parent's aggregate list is not counted again.
    let pids: Vec<u64> = s["processes"]
        .as_array()
        .expect("p")
        .iter()
        .filter_map(|p| p["pid"].as_u64())
        .collect();
    let mut unique = pids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(pids.len(), unique.len(), "{pids:?}");
    assert_eq!(s["gpus"][1]["mig_mode"], false);
}

#[test]
fn refused_fields_are_null_and_the_rest_still_shows() {
    let s = one("not_supported");
    let g = &s["gpus"];
    assert!(g[0]["utilization_gpu"].is_null());
    assert!(g[0]["mig_mode"].is_null());
    assert_eq!(
        g[0]["memory"]["total"], 25_757_220_864u64,
        "memory still read"
    );
    assert_eq!(
        g[0]["processes_known"], false,
        "a refused process list is not an empty one"
    );
    assert!(g[0]["layers"]["unattributed"].is_null());
    assert!(g[1]["name"].is_null());
    assert!(g[1]["memory"].is_null());
    assert_eq!(g[1]["layers_gap"]["reason"], "memory_unknown");
    assert_eq!(
        g[1]["utilization_gpu"], 0,
        "a refused field does not hide the others"
    );
    assert!(g[1]["temperature"].is_null());
    let refused = g[1]["problems"]["temperature"].as_str().unwrap_or_default();
    assert!(
        refused.contains("nvmlDeviceGetTemperature"),
        "a refused temperature says why: {}",
        g[1]["problems"]
    );
    // Refused power and clock: unknown, each refusal said under its own key with its call;
    // a limit NVML does not support is no problem; what was given is still shown.
    for (key, call, problem) in [
        ("power_mw", "nvmlDeviceGetPowerUsage", "power"),
        ("sm_clock_mhz", "nvmlDeviceGetClockInfo", "sm_clock"),
    ] {
        assert!(g[1][key].is_null(), "{key}: {}", g[1]);
        let said = g[1]["problems"][problem].as_str().unwrap_or_default();
        assert!(said.contains(call), "{problem}: {}", g[1]["problems"]);
    }
    assert!(g[1]["power_limit_mw"].is_null());
    assert!(g[1]["problems"].get("power_limit").is_none());
    assert_eq!(g[1]["sm_clock_max_mhz"], 1410);
    let m = &g[2]["mig"][0];
    assert!(m["gpu_instance_id"].is_null() && m["compute_instance_id"].is_null());
    assert!(m["profile"].is_null() && m["memory"].is_null());
    assert_eq!(g[2]["memory"]["total"], 25_769_803_776u64);
}

#[test]
fn unavailable_process_memory_is_null_not_zero() {
    let s = one("unavailable_process_memory");
    assert!(process(&s, 7001)["used"].is_null());
    assert!(process(&s, 1234)["used"].is_null());
    assert_eq!(process(&s, 7002)["used"], 9_678_356_480u64);
}

#[test]
fn a_pid_missing_from_proc_is_not_visible() {
    let s = one("missing_pid");
    for pid in [4_000_000u64, 4_194_305] {
        let p = process(&s, pid);
        assert_eq!(p["visible"], false);
        assert!(p["proc_state"].is_null() && p["command"].is_null() && p["user"].is_null());
    }
}

/// A scenario holder that is a real process here gets its identity from /proc.
#[test]
fn a_visible_holder_gets_user_command_state_and_start_time() {
    let child = Running::spawn(std::process::Command::new("sleep").arg("37"));
    let text = std::fs::read_to_string(scenario("two_gpus")).expect("scenario");
    let scratch = Scratch::new("visible");
    let file = scratch.write(
        "visible.json",
        text.replace("41290", &child.pid().to_string()),
        0o644,
    );
    let s = snapshots(&file, &[]).remove(0);
    let p = process(&s, u64::from(child.pid()));
    assert_eq!(p["visible"], true);
    assert_eq!(p["command"], "sleep 37");
    assert!(matches!(p["proc_state"].as_str(), Some("S" | "R")), "{p}");
    assert!(p["start_time"].as_u64().is_some());
    assert!(p["user"].as_str().is_some_and(|u| !u.is_empty()));
    // Visible without a feed: its usage is unattributed, not split.
    assert_eq!(p["layers"]["unattributed"], p["used"]);
}

#[test]
fn a_gpu_lost_at_poll_three_while_the_other_keeps_updating() {
    let samples = absent("gpu_lost", &["--count", "5"]);
    assert_eq!(samples.len(), 5);
    let used: Vec<u64> = samples
        .iter()
        .map(|s| {
            s["gpus"][0]["memory"]["used"]
                .as_u64()
                .expect("GPU 0 keeps reporting")
        })
        .collect();
    assert!(
        used.windows(2).all(|w| w[0] < w[1]),
        "GPU 0 climbs: {used:?}"
    );
    for (poll, s) in samples.iter().enumerate() {
        let lost = &s["gpus"][1];
        assert_eq!(lost["lost"], poll >= 3, "poll {poll}: {lost}");
        if poll >= 3 {
            assert!(
                lost["memory"].is_null(),
                "no stale values passed off as current"
            );
            assert_eq!(lost["layers_gap"]["reason"], "lost");
            let kinds: Vec<&str> = s["findings"]
                .as_array()
                .expect("f")
                .iter()
                .filter_map(|f| f["kind"].as_str())
                .collect();
            assert!(kinds.contains(&"gpu_lost"), "{kinds:?}");
        }
    }
    // A process that exits, and one that starts.
    let has = |s: &Value, pid: u64| {
        s["processes"]
            .as_array()
            .expect("p")
            .iter()
            .any(|p| p["pid"] == pid)
    };
    assert!(has(&samples[0], 41299) && !has(&samples[2], 41299));
    assert!(!has(&samples[0], 41300) && has(&samples[2], 41300));
}

#[test]
fn absurd_answers_never_panic() {
    let samples = absent("absurd", &["--count", "3"]);
    for s in &samples {
        let kinds: Vec<&str> = s["findings"]
            .as_array()
            .expect("f")
            .iter()
            .filter_map(|f| f["kind"].as_str())
            .collect();
        assert!(kinds.contains(&"inconsistent_counters"), "{kinds:?}");
    }
}

#[test]
fn missing_or_malformed_scenario_is_one_clear_line() {
    let scratch = Scratch::new("bad-scenario");
    let dir = &scratch.dir;
    let malformed = dir.join("malformed.json");
    std::fs::write(&malformed, "{ \"devices\": [ {").expect("write");
    for file in [dir.join("missing.json"), malformed] {
        let out = Command::new(strata())
            .args(["snapshot", "--json", "--nvml-lib"])
            .arg(fake_nvml_lib())
            .env(SCENARIO_ENV, &file)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("strata:")).collect();
        assert_eq!(ours.len(), 1, "{err}");
        assert!(ours[0].contains("NVML could not start"), "{err}");
        assert!(
            ours[0].contains("libnvidia_ml.so"),
            "names the library: {err}"
        );
        assert!(ours[0].contains("--demo"), "gives a hint: {err}");
    }
}

/// Each scenario with its holders alive here: every device's layers, at every poll, are those
/// the scenario implies (visible holders in `unattributed`, the rest of the occupied memory in
/// `other`).
#[test]
fn every_scenario_with_live_holders_has_the_layers_it_implies() {
    for (name, polls) in [
        ("two_gpus", 1),
        ("mig", 1),
        ("not_supported", 1),
        ("unavailable_process_memory", 2),
        ("gpu_lost", 5),
        ("absurd", 3),
        ("missing_pid", 1),
        ("mps", 1),
        ("mig_parent", 1),
        ("mig_multi_ci", 1),
        ("process_list_refused", 1),
        ("raw_records", 1),
        ("old_driver", 1),
    ] {
        let (written, live) = with_live_pids(name);
        let alive: Vec<u64> = live.children.iter().map(|c| u64::from(c.id())).collect();
        let visible = |pid: u64| alive.contains(&pid);
        let count = polls.to_string();
        let samples = snapshots(&live.file, &["--count", &count]);
        assert_eq!(samples.len(), polls, "{name}");
        for (poll, s) in samples.iter().enumerate() {
            assert_implied(s, &written, poll, &visible, name);
        }
    }
}

/// two_gpus.json's own numbers: GPU 0 holds 500 MiB that no process accounts for, on top of
/// the driver's reservation; GPU 1's processes account for all it uses.
#[test]
fn the_unaccounted_500_mib_of_two_gpus_is_other() {
    let (written, live) = with_live_pids("two_gpus");
    let s = snapshots(&live.file, &[]).remove(0);
    let gpu0 = &written["devices"][0];
    let number = |v: &Value| v.as_u64().expect("a number");
    let (total, reserved, free) = (
        number(&gpu0["memory"]["total"]),
        number(&gpu0["memory"]["reserved"]),
        number(&gpu0["memory"]["free"]),
    );
    let listed: u64 = gpu0["compute_processes"]
        .as_array()
        .expect("list")
        .iter()
        .map(|p| number(&p["used"]))
        .sum();
    let layers = &s["gpus"][0]["layers"];
    assert_eq!(layers["unattributed"].as_u64(), Some(listed));
    assert_eq!(layers["other"].as_u64(), Some(total - free - listed));
    assert_eq!(
        layers["other"].as_u64(),
        Some(reserved + (500 << 20)),
        "the driver's reservation and the scenario's 500 MiB"
    );
    let layers = &s["gpus"][1]["layers"];
    assert_eq!(
        layers["other"].as_u64(),
        Some(617_611_264),
        "only the reservation"
    );
}

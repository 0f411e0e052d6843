//! `strata doctor` against the fake NVML: no library at all, a healthy node, a driver older
//! than R510, a MIG parent that needs root, process lists that fail, a stuck call; its exit
//! statuses; its JSON keys against `docs/doctor.md`'s; strings from outside defused; `--demo`
//! refused.

use crate::common;

use common::doctor::{
    assert_check, check, checks, detached, doctor_command, documented, keys, ran, said, sleeper,
};
use common::fake_nvml::{fake_nvml_lib, fake_nvml_lib_with, scenario};
use common::{strata, Running, Scratch};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const GIB: u64 = 1 << 30;

/// A GPU of a scenario listing `pids`, with `extra` fields merged in.
fn gpu(n: u32, pids: &[u32], extra: Value) -> Value {
    let processes: Vec<Value> = pids
        .iter()
        .map(|p| json!({"pid": p, "used": GIB}))
        .collect();
    let mut gpu = json!({
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": format!("GPU-00000000-0000-4000-8000-00000000000{n}"),
        "memory": { "total": 80 * GIB, "reserved": 0, "used": 4 * GIB },
        "mig_mode": { "current": 0, "pending": 0 },
        "compute_processes": processes,
    });
    if let (Some(gpu), Some(extra)) = (gpu.as_object_mut(), extra.as_object()) {
        gpu.extend(extra.clone());
    }
    gpu
}

fn write(scratch: &Scratch, name: &str, scenario: &Value) -> PathBuf {
    scratch.write(name, scenario.to_string(), 0o644)
}

#[test]
fn without_nvml_the_driver_is_missing_with_a_hint_and_the_rest_still_runs() {
    let scratch = Scratch::new("doctor-none");
    let feeds = scratch.feeds();
    let r = ran(doctor_command(
        None,
        None,
        &["--feed-dir", &feeds.to_string_lossy()],
    ));
    assert_eq!(r.status, Some(1), "{:#}", r.report);
    let nvml = check(&r.report, "nvml", None);
    assert_check(
        nvml,
        "missing",
        &["/nonexistent/libnvidia-ml.so.1", "not found"],
    );
    assert!(
        nvml["fix"]
            .as_str()
            .is_some_and(|f| f.contains("--nvml-lib")),
        "{}",
        said(nvml)
    );
    // Nothing else is missing: every other group was still checked.
    let groups: BTreeSet<&str> = r.report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter_map(|c| c["group"].as_str())
        .collect();
    for group in ["processes", "feeds", "attach", "terminal", "export"] {
        assert!(groups.contains(group), "{group} in {groups:?}");
    }
    assert!(checks(&r.report, "gpu_count", None).is_empty());
    assert_eq!(r.report["counts"]["missing"], 1, "{:#}", r.report);
    // The text says the same, one line per check.
    let text = detached(strata())
        .args([
            "doctor",
            "--nvml-lib",
            "/nonexistent/libnvidia-ml.so.1",
            "--feed-dir",
        ])
        .arg(&feeds)
        .output()
        .expect("doctor runs");
    assert_eq!(text.status.code(), Some(1));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("  missing  nvml ")),
        "{text}"
    );
    assert!(text
        .lines()
        .any(|l| l.trim_start().starts_with("fix: install the NVIDIA driver")));
    assert!(text.trim_end().ends_with("exit status 1"), "{text}");
}

/// A node strata sees whole: two GPUs listing this test's own processes, a private feed dir.
fn healthy(scratch: &Scratch, holders: &[Running]) -> PathBuf {
    let pids: Vec<u32> = holders.iter().map(Running::pid).collect();
    let devices = json!([gpu(0, &pids[..1], json!({})), gpu(1, &pids[1..], json!({}))]);
    write(scratch, "healthy.json", &json!({ "devices": devices }))
}

#[test]
fn a_node_seen_whole_is_all_ok_and_exit_status_0() {
    assert_eq!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() },
        0,
        "this test runs as root (CI does)"
    );
    let scratch = Scratch::new("doctor-ok");
    let holders = [sleeper(), sleeper()];
    let file = healthy(&scratch, &holders);
    let feeds = scratch.feeds();
    let r = ran(doctor_command(
        Some(&fake_nvml_lib()),
        Some(&file),
        &["--feed-dir", &feeds.to_string_lossy()],
    ));
    let not_ok: Vec<String> = r.report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["status"] != "ok")
        .map(said)
        .collect();
    assert!(not_ok.is_empty(), "all ok: {not_ok:#?}");
    assert_eq!(r.status, Some(0));
    assert_eq!(r.report["status"], "ok");
    for name in [
        "nvml",
        "driver_version",
        "r510_calls",
        "cuda_driver_version",
        "gpu_count",
    ] {
        check(&r.report, name, None);
    }
    for subject in ["GPU 0", "GPU 1"] {
        for name in ["gpu", "mig_mode", "memory", "processes"] {
            check(&r.report, name, Some(subject));
        }
    }
    assert_check(
        check(&r.report, "processes", Some("GPU 1")),
        "ok",
        &["1 process listed"],
    );
    assert_check(
        check(&r.report, "process_roots", None),
        "ok",
        &["the 2 processes NVML lists"],
    );
    assert_check(
        check(&r.report, "python_versions", None),
        "ok",
        &["2 not Python"],
    );
    assert_check(
        check(&r.report, "feed_dir", None),
        "ok",
        &["mode 0700: trusted"],
    );
}

#[test]
fn a_feed_dir_the_monitor_would_refuse_is_missing_with_the_rules_fix() {
    let scratch = Scratch::new("doctor-feed-dir");
    let feeds = scratch.feeds();
    std::fs::set_permissions(&feeds, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let r = ran(doctor_command(
        None,
        None,
        &["--feed-dir", &feeds.to_string_lossy()],
    ));
    let dir = check(&r.report, "feed_dir", None);
    assert_check(
        dir,
        "missing",
        &["mode 0755", "every feed in it is refused"],
    );
    assert!(
        dir["fix"].as_str().is_some_and(|f| f.contains("chmod 700")),
        "{}",
        said(dir)
    );
    assert_check(
        check(&r.report, "user_feed_dirs", None),
        "ok",
        &["--feed-dir"],
    );
}

#[test]
fn a_driver_older_than_r510_is_limited_and_exit_status_3() {
    let old = ran(doctor_command(
        Some(&fake_nvml_lib_with("pre-r510")),
        Some(&scenario("old_driver")),
        &[],
    ));
    let calls = check(&old.report, "r510_calls", None);
    assert_check(
        calls,
        "limited",
        &[
            "470.82.01",
            "nvmlDeviceGetMemoryInfo_v2",
            "_v3 process calls",
            "v1 call",
        ],
    );
    assert!(calls["fix"].as_str().is_some_and(|f| f.contains("R510")));
    assert_check(
        check(&old.report, "memory", Some("GPU 0")),
        "ok",
        &["v1 call"],
    );
    assert_check(
        check(&old.report, "processes", Some("GPU 0")),
        "ok",
        &["3 processes listed"],
    );
    assert_eq!(old.status, Some(3), "{:#}", old.report);
    // The same scenario through a library that has the calls.
    let new = ran(doctor_command(
        Some(&fake_nvml_lib()),
        Some(&scenario("old_driver")),
        &[],
    ));
    assert_check(check(&new.report, "r510_calls", None), "ok", &[]);
    assert_check(
        check(&new.report, "driver_version", None),
        "ok",
        &["470.82.01"],
    );
}

#[test]
fn a_mig_parent_whose_figures_need_root_is_limited() {
    let r = ran(doctor_command(
        Some(&fake_nvml_lib()),
        Some(&scenario("mig_parent")),
        &[],
    ));
    assert_check(
        check(&r.report, "mig_mode", Some("GPU 1")),
        "ok",
        &["MIG on"],
    );
    let parent = check(&r.report, "parent_figures", Some("GPU 1"));
    assert_check(
        parent,
        "limited",
        &[
            "need root in MIG mode",
            "NVML_ERROR_NO_PERMISSION",
            "nvmlDeviceGetMemoryInfo_v2",
        ],
    );
    assert!(parent["fix"]
        .as_str()
        .is_some_and(|f| f.starts_with("run strata as root")));
    assert_check(check(&r.report, "parent_figures", Some("GPU 0")), "ok", &[]);
    assert_check(
        check(&r.report, "mig_instances", Some("GPU 0")),
        "ok",
        &["2 instances (3g.40gb, 2g.20gb)"],
    );
    assert!(
        checks(&r.report, "memory", Some("GPU 1")).is_empty(),
        "MIG: the parent's figures"
    );
    assert_eq!(r.status, Some(3), "{:#}", r.report);
}

#[test]
fn each_refused_process_list_is_limited_on_its_gpu() {
    let r = ran(doctor_command(
        Some(&fake_nvml_lib()),
        Some(&scenario("process_list_refused")),
        &[],
    ));
    let cases = [
        (
            "GPU 0",
            "NVML_ERROR_UNKNOWN (nvmlDeviceGetComputeRunningProcesses_v3)",
        ),
        (
            "GPU 1",
            "NVML_ERROR_NO_PERMISSION (nvmlDeviceGetGraphicsRunningProcesses_v3)",
        ),
        (
            "GPU 2",
            "NVML_ERROR_TIMEOUT (nvmlDeviceGetMPSComputeRunningProcesses_v3)",
        ),
    ];
    for (gpu, refusal) in cases {
        assert_check(
            check(&r.report, "processes", Some(gpu)),
            "limited",
            &[refusal, "not all known"],
        );
    }
    assert_check(
        check(&r.report, "mig_instances", Some("GPU 3")),
        "limited",
        &[
            "2g.20gb (slot 1) processes: NVML_ERROR_UNKNOWN",
            "slot 3: NVML_ERROR_NO_PERMISSION",
        ],
    );
    assert_check(
        check(&r.report, "mig_instances", Some("GPU 4")),
        "limited",
        &["nvmlDeviceGetMaxMigDeviceCount", "cannot be counted"],
    );
    assert_eq!(r.status, Some(3), "{:#}", r.report);
}

#[test]
fn a_stuck_nvml_call_times_out_and_the_rest_is_still_checked() {
    let scratch = Scratch::new("doctor-stuck");
    let stuck = json!({"call": "nvmlDeviceGetMigMode", "delay_ms": 120_000});
    let file = write(
        &scratch,
        "stuck.json",
        &json!({
            "system": { "faults": [{"call": "nvmlSystemGetCudaDriverVersion_v2", "delay_ms": 120_000}] },
            "devices": [gpu(0, &[], json!({"faults": [stuck]})), gpu(1, &[], json!({}))],
        }),
    );
    let mut command = doctor_command(Some(&fake_nvml_lib()), Some(&file), &["--timeout", "1"]);
    let started = Instant::now();
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("doctor starts");
    // A hang is a run still going long after every check's timeout: well beyond the second.
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("strata doctor hangs on a stuck NVML call");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = common::doctor::parse(child.wait_with_output().expect("output"));
    let mig = check(&r.report, "mig_mode", Some("GPU 0"));
    assert_check(
        mig,
        "missing",
        &[
            "timed out",
            "nvmlDeviceGetMigMode did not answer within 1 s",
        ],
    );
    assert_eq!(mig["timed_out"], true);
    let cuda = check(&r.report, "cuda_driver_version", None);
    assert_eq!(cuda["timed_out"], true, "{}", said(cuda));
    // The other GPU, and the GPU's checks before the stuck call, are there.
    assert_check(
        check(&r.report, "gpu", Some("GPU 0")),
        "ok",
        &["NVIDIA H100"],
    );
    for name in ["mig_mode", "memory", "processes"] {
        assert_check(check(&r.report, name, Some("GPU 1")), "ok", &[]);
    }
    assert_check(check(&r.report, "driver_version", None), "ok", &[]);
    assert!(
        checks(&r.report, "memory", Some("GPU 0")).is_empty(),
        "not reached"
    );
    assert_eq!(r.status, Some(1));
}

#[test]
fn the_json_has_exactly_the_keys_and_checks_the_readme_documents() {
    let docs = documented("doctor-keys");
    let scratch = Scratch::new("doctor-keys");
    // A 3.14 by its name (a copy of sleep): doctor's every check shows, remote_debug too.
    let stand_in = scratch.path("python3.14");
    std::fs::copy("/bin/sleep", &stand_in).expect("copy sleep");
    let python = Running(
        std::process::Command::new(&stand_in)
            .arg("300")
            .spawn()
            .expect("the stand-in runs"),
    );
    let mut mig: Value =
        serde_json::from_str(&std::fs::read_to_string(scenario("mig")).expect("mig.json"))
            .expect("a scenario");
    mig["devices"][1]["compute_processes"] = json!([{"pid": python.pid(), "used": GIB}]);
    let file = write(&scratch, "mig.json", &mig);
    let r = ran(doctor_command(Some(&fake_nvml_lib()), Some(&file), &[]));
    let expect = |kind: &str| {
        docs.get(kind)
            .unwrap_or_else(|| panic!("docs/doctor.md documents `{kind}`"))
            .clone()
    };
    assert_eq!(
        keys(&r.report),
        expect("doctor"),
        "the report's keys against docs/doctor.md's"
    );
    assert_eq!(keys(&r.report["counts"]), expect("counts"));
    for c in r.report["checks"].as_array().expect("checks") {
        assert_eq!(keys(c), expect("check"), "{c}");
    }
    // Every check docs/doctor.md lists, by group, and nothing else.
    let listed = documented("doctor-checks");
    let mut found: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for c in r.report["checks"].as_array().expect("checks") {
        let group = c["group"].as_str().unwrap_or_default().to_string();
        let name = c["check"].as_str().unwrap_or_default().to_string();
        found.entry(group).or_default().insert(name);
    }
    assert_eq!(
        found, listed,
        "the checks run against docs/doctor.md's list"
    );
    assert_check(
        check(&r.report, "remote_debug", None),
        "ok",
        &["the 1 Python 3.14+ process"],
    );
}

#[test]
fn strings_from_outside_reach_the_text_defused() {
    let scratch = Scratch::new("doctor-hostile");
    let file = write(
        &scratch,
        "hostile.json",
        &json!({
            "system": { "driver_version": "550\u{1b}[2J" },
            "devices": [gpu(0, &[], json!({"name": "NVIDIA\u{1b}]0;pwned\u{7} H100\u{202e}"}))],
        }),
    );
    let lib = fake_nvml_lib();
    let output = detached(strata())
        .args(["doctor", "--nvml-lib"])
        .arg(&lib)
        .env(common::fake_nvml::SCENARIO_ENV, &file)
        .env("TERM", "xterm\u{1b}[31m")
        .output()
        .expect("doctor runs");
    let text = String::from_utf8_lossy(&output.stdout);
    for bad in ['\u{1b}', '\u{7}', '\u{202e}'] {
        assert!(!text.contains(bad), "{bad:?} reached the text:\n{text}");
    }
    assert!(
        text.contains("NVIDIA\u{FFFD}]0;pwned\u{FFFD} H100\u{FFFD}"),
        "{text}"
    );
    assert!(text.contains("550\u{FFFD}[2J"), "{text}");
    assert!(text.contains("TERM=xterm\u{FFFD}[31m"), "{text}");
}

#[test]
fn the_demo_is_refused_in_one_line() {
    let output = detached(strata())
        .args(["doctor", "--demo"])
        .output()
        .expect("doctor runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--demo") && stderr.contains("hint:"),
        "{stderr}"
    );
}

#[test]
fn a_serve_port_in_use_is_limited() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = held.local_addr().expect("address").to_string();
    let r = ran(doctor_command(None, None, &["--listen", &address]));
    let port = check(&r.report, "serve_port", None);
    assert_check(port, "limited", &[&address, "in use"]);
    assert!(port["fix"].as_str().is_some_and(|f| f.contains("--listen")));
    drop(held);
}

//! `strata serve` as a user runs it: the endpoints of `serve --demo`; the real NVML code
//! path (the fake library) with many processes and a hostile command line; and bad
//! addresses, each one line with a hint and exit status 1, before anything starts.

use crate::common;

use common::exposition::{get, parse, Server};
use common::fake_nvml::{fake_nvml_lib, SCENARIO_ENV};
use common::{strata, Running, Scratch};
use serde_json::json;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};

#[test]
fn serve_demo_answers_metrics_an_index_and_not_found() {
    let server = Server::start(&["--demo", "--demo-at", "905"], &[]);
    let metrics = get(&server.addr, "/metrics", None).expect("GET /metrics");
    assert_eq!(metrics.status, 200);
    assert_eq!(
        metrics.headers["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let e = parse(&metrics.body);
    assert_eq!(e.select("strata_gpu_memory_total_bytes", &[]).len(), 4);
    assert_eq!(e.select("strata_mig_memory_total_bytes", &[]).len(), 3);
    let host = &e.family("strata_node_info").samples[0].0["host"];
    assert_eq!(host, "demo-node");
    // Prometheus asks for OpenMetrics first: it gets it, ended by # EOF.
    let om = get(
        &server.addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    )
    .expect("GET /metrics (OpenMetrics)");
    assert!(om.headers["content-type"].starts_with("application/openmetrics-text"));
    assert!(om.body.ends_with("# EOF\n"));
    let index = get(&server.addr, "/", None).expect("GET /");
    assert_eq!(index.status, 200);
    assert!(index.body.contains("/metrics"), "{}", index.body);
    let missing = get(&server.addr, "/nope", None).expect("GET /nope");
    assert_eq!(missing.status, 404);
    assert!(missing.body.contains("/metrics"));
    // Sampling goes on by itself, between scrapes.
    let first = e.family("strata_samples_total").samples[0].1;
    std::thread::sleep(std::time::Duration::from_millis(1600));
    let later = server.metrics().family("strata_samples_total").samples[0].1;
    assert!(later > first, "{first} then {later}");
}

#[test]
fn sigterm_stops_it_with_status_zero() {
    let mut server = Server::start(&["--demo"], &[]);
    server.metrics_text();
    let pid = server.child.id() as libc::pid_t;
    // SAFETY: a plain kill(2) of our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = server.child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

fn serve(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut command = Command::new(strata());
    command
        .arg("serve")
        .args(args)
        .env_remove("STRATA_NVML_LIB")
        .stdin(Stdio::null());
    for (k, v) in envs {
        command.env(k, v);
    }
    command.output().expect("strata serve")
}

/// Exit status 1, nothing on stdout (nothing started), one line on stderr with a hint.
fn assert_one_line_error(out: &Output, says: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("strata: "), "{stderr}");
    assert!(stderr.contains(says), "wanted {says:?}: {stderr}");
    assert!(stderr.contains("(hint: "), "{stderr}");
}

#[test]
fn a_port_in_use_is_one_line_and_exit_1_before_nvml_is_opened() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = taken.local_addr().expect("addr").to_string();
    let out = serve(&["--demo", "--listen", &addr], &[]);
    assert_one_line_error(&out, "the port is in use");
    // Without --demo, NVML would fail (no such library): the address is bound first, so
    // its error is the one shown.
    let out = serve(
        &[
            "--listen",
            &addr,
            "--nvml-lib",
            "/nonexistent/libnvidia-ml.so.1",
        ],
        &[],
    );
    assert_one_line_error(&out, "the port is in use");
    drop(taken);
}

#[test]
fn an_address_not_of_this_machine_is_one_line_and_exit_1() {
    // TEST-NET-1 (RFC 5737): never one of this machine's addresses.
    let out = serve(&["--demo", "--listen", "192.0.2.1:9842"], &[]);
    assert_one_line_error(&out, "not one of this machine's");
}

#[test]
fn an_invalid_address_is_one_line_and_exit_1() {
    for bad in [
        "nonsense",
        "127.0.0.1",
        "127.0.0.1:99999",
        "127.0.0.1:port",
        "",
    ] {
        let out = serve(&["--demo", "--listen", bad], &[]);
        assert_one_line_error(&out, "it is not an address");
    }
}

#[test]
fn nvml_without_a_library_fails_after_binding_with_its_hint() {
    let out = serve(
        &[
            "--listen",
            "127.0.0.1:0",
            "--nvml-lib",
            "/nonexistent/libnvidia-ml.so.1",
        ],
        &[],
    );
    assert_one_line_error(&out, "NVIDIA driver library");
}

const HOSTILE_ARGV0: &str = "evil\x1b]0;pwned\x07\"q\"\\\nnext";

#[test]
fn the_nvml_path_bounds_processes_and_cleans_command_lines() {
    let mut holders = vec![Running::spawn(
        Command::new("sleep").arg0(HOSTILE_ARGV0).arg("600"),
    )];
    for _ in 0..23 {
        holders.push(Running::spawn(Command::new("sleep").arg("600")));
    }
    let gib = 1u64 << 30;
    // The hostile one is the largest; 24 processes on 2 GPUs.
    let devices: Vec<_> = (0..2u64)
        .map(|g| {
            let procs: Vec<_> = holders
                .iter()
                .enumerate()
                .filter(|(i, _)| *i as u64 % 2 == g)
                .map(|(i, h)| json!({ "pid": h.pid(), "used": (30 - i as u64) * gib / 10 }))
                .collect();
            let used: u64 = procs.iter().map(|p| p["used"].as_u64().unwrap_or(0)).sum();
            json!({
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": format!("GPU-5f3c2a1e-8b7d-4c6e-9a10-00000000000{g}"),
                "memory": { "total": 80 * gib, "reserved": 0, "used": used, "free": 80 * gib - used },
                "compute_processes": procs
            })
        })
        .collect();
    let scratch = Scratch::new("serve-cli");
    let path = scratch.path("many.json");
    std::fs::write(&path, json!({ "devices": devices }).to_string()).expect("scenario");
    let lib = fake_nvml_lib();
    let server = Server::start(
        &[
            "--max-processes",
            "5",
            "--nvml-lib",
            lib.to_str().expect("utf-8"),
        ],
        &[(SCENARIO_ENV, path.as_os_str())],
    );
    let text = server.metrics_text();
    assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'));
    let e = parse(&text);
    let used = e.select("strata_process_used_bytes", &[]);
    let named: Vec<_> = used.iter().filter(|s| s.0["pid"] != "other").collect();
    assert_eq!(named.len(), 5, "{used:?}");
    assert_eq!(used.len() - named.len(), 2, "one other per GPU");
    let hostile = used
        .iter()
        .find(|s| s.0["pid"] == holders[0].pid().to_string())
        .expect("the largest process is named");
    let command = &hostile.0["command"];
    assert!(
        command.starts_with("evil\u{fffd}]0;pwned\u{fffd}\"q\"\\\u{fffd}next"),
        "{command:?}"
    );
    let sum: f64 = used.iter().map(|s| s.1).sum();
    let want: u64 = (0..24u64).map(|i| (30 - i) * gib / 10).sum();
    assert_eq!(sum as u64, want, "sums over processes hold");
}

/// NVML stalls (every poll from the fourth on takes 3 s): scrapes are still answered at once
/// from the last complete sample, whose age grows past the interval.
#[test]
fn a_stalled_nvml_never_holds_a_scrape() {
    let lib = fake_nvml_lib();
    let scenario = common::fake_nvml::scenario("stall");
    let server = Server::start(
        &[
            "--interval",
            "0.2",
            "--nvml-lib",
            lib.to_str().expect("utf-8"),
        ],
        &[(SCENARIO_ENV, scenario.as_os_str())],
    );
    server.metrics_text();
    let start = std::time::Instant::now();
    let mut oldest: f64 = 0.0;
    while start.elapsed() < std::time::Duration::from_secs(5) {
        let asked = std::time::Instant::now();
        let e = parse(&server.metrics_text());
        let took = asked.elapsed();
        // Far below the 3 s a poll takes: the scrape did not wait for one.
        assert!(
            took < std::time::Duration::from_millis(1500),
            "a scrape took {took:?}"
        );
        let age = e.family("strata_sample_age_seconds").samples[0].1;
        oldest = oldest.max(age);
        assert_eq!(
            e.select("strata_gpu_layer_bytes", &[]).len(),
            3,
            "layers served throughout"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        oldest > 2.0,
        "the stall shows in the sample's age: {oldest}"
    );
}

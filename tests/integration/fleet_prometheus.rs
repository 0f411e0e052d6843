//! `strata fleet --prometheus`: a real Prometheus (Debian's package; tests/all installs it)
//! scraping four `strata serve --demo` targets with different seeds every second. The fleet
//! read through it: every node up with its devices, the demo's job across the four; a target
//! killed and said down (never with its old figures), in `--json` and on the screen; and a
//! Prometheus that is not there, or a URL that is not Prometheus, said in one line; and with
//! the fleet rules loaded, the jobs (pods among them) from the recorded spread.

use crate::common;

use common::exposition::Server;
use common::page::Page;
use common::prometheus::{free_port, start_prometheus_scraping, Prometheus};
use common::tmux::Pane;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Patience for what Prometheus must first do (start, scrape every target, mark one down):
/// each is an event waited for, this only bounds a test that would otherwise hang.
const PATIENCE: Duration = Duration::from_secs(90);

fn fleet(url: &str) -> (Value, std::process::Output) {
    let out = common::strata_output(&[
        "fleet",
        "--prometheus",
        url,
        "--json",
        "--scrape-interval",
        "1",
        "--timeout",
        "10",
    ]);
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (json, out)
}

/// A Prometheus scraping `targets` every second with `rules`, ready, and its URL.
fn scraping(targets: &[&str], rules: &[&std::path::Path]) -> (Prometheus, String) {
    let prometheus = start_prometheus_scraping(targets, rules);
    prometheus.wait_ready(PATIENCE);
    let url = format!("http://{}", prometheus.addr);
    (prometheus, url)
}

/// `strata fleet --json ARGS` (a scrape interval of 1 s, 10 s a query), its JSON.
fn fleet_json(args: &[&str]) -> Value {
    let mut all = vec![
        "fleet",
        "--json",
        "--scrape-interval",
        "1",
        "--timeout",
        "10",
    ];
    all.extend(args);
    let out = common::strata_output(&all);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

/// `assets/prometheus/strata-fleet-rules.yml`.
fn fleet_rules() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/prometheus/strata-fleet-rules.yml")
}

/// Reads the fleet until `done` holds for it, or panics with the last one read.
fn fleet_until(url: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let (f, _) = fleet(url);
        if done(&f) {
            return f;
        }
        assert!(start.elapsed() < PATIENCE, "{what}: {f}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn node<'a>(f: &'a Value, instance: &str) -> Option<&'a Value> {
    f["nodes"]
        .as_array()?
        .iter()
        .find(|n| n["instance"] == instance)
}

#[test]
fn the_fleet_through_a_real_prometheus() {
    let mut servers: Vec<Option<Server>> = (0..4).map(|seed| Some(Server::demo(seed))).collect();
    let addrs: Vec<String> = servers.iter().flatten().map(|s| s.addr.clone()).collect();
    let targets: Vec<&str> = addrs.iter().map(String::as_str).collect();
    let (_prometheus, url) = scraping(&targets, &[]);

    let f = fleet_until(&url, "every target scraped", |f| {
        addrs
            .iter()
            .all(|a| node(f, a).is_some_and(|n| n["state"] == "up"))
    });
    assert_eq!(f["schema"], "strata.fleet/1");
    assert_eq!(f["source"], format!("prometheus {url}"));
    assert_eq!(f["problems"], serde_json::json!([]), "{f}");
    let mut names: Vec<&str> = addrs
        .iter()
        .filter_map(|a| node(&f, a)?["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["demo-node", "demo-node-1", "demo-node-2", "demo-node-3"]
    );
    for a in &addrs {
        let n = node(&f, a).expect("the node");
        let devices = n["devices"].as_array().expect("devices");
        assert_eq!(devices.len(), 7, "4 GPUs and 3 MIG instances: {n}");
        for d in devices {
            let total = d["total"].as_u64().expect("a total");
            let sum: u64 = d["layers"]
                .as_object()
                .expect("layers")
                .values()
                .filter_map(Value::as_u64)
                .sum();
            assert_eq!(sum, total, "the layers add up: {d}");
        }
        // The demo's zombie context, on GPU 2 of every node.
        assert!(
            devices.iter().any(|d| d["gpu"] == "2"
                && d["findings"][0]["kind"] == "zombie_context"
                && d["findings"][0]["severity"] == "critical"),
            "{n}"
        );
    }
    let job = &f["jobs"][0];
    assert_eq!(job["key"], "slurm 81234", "{f}");
    assert_eq!(
        (job["processes"].as_u64(), job["nodes"].as_u64()),
        (Some(8), Some(4))
    );
    // A process that names no Slurm job or run has its pod for a job (the demo's nodes run
    // the same pods, one process each).
    let pod = f["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|j| j["key"] == "pod serving/t5-3b-0")
        .unwrap_or_else(|| panic!("no pod job: {}", f["jobs"]));
    assert_eq!(pod["processes"].as_u64(), Some(4), "{pod}");

    // A filter by a process's owner: Prometheus matches the devices by their processes'
    // labels (the read brings no process series); the endpoints, read whole, are filtered by
    // the client. The two pick the same devices.
    let devices_of = |args: &[&str]| -> Vec<(String, String)> {
        let out = common::strata_output(args);
        let f: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let mut out: Vec<(String, String)> = f["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .flat_map(|n| {
                n["devices"].as_array().into_iter().flatten().map(move |d| {
                    (
                        n["instance"].as_str().unwrap_or_default().to_string(),
                        d["uuid"].as_str().unwrap_or_default().to_string(),
                    )
                })
            })
            .collect();
        out.sort();
        out
    };
    let endpoints = addrs.join(",");
    for filter in ["slurm 81234", "rm 8123", "LLM", "serving/t5", "d infer"] {
        let by_prometheus = devices_of(&[
            "fleet",
            "--prometheus",
            &url,
            "--json",
            "--scrape-interval",
            "1",
            "--filter",
            filter,
        ]);
        let by_client = devices_of(&[
            "fleet",
            "--endpoints",
            &endpoints,
            "--json",
            "--filter",
            filter,
        ]);
        assert_eq!(by_prometheus, by_client, "--filter {filter:?}");
        if filter != "LLM" {
            assert!(
                !by_client.is_empty() && by_client.len() < 28,
                "--filter {filter:?}: the job's devices: {by_client:?}"
            );
        }
    }

    // The screen: every node up; then one target killed, said down, first in the ranking.
    let command = format!(
        "{} fleet --prometheus {url} --refresh 1 --scrape-interval 1",
        common::strata()
    );
    let pane = Pane::start("fleet-prom", &command, 120, 40);
    pane.must_show(&["4 nodes: 4 up", "critical zombie context"], "the fleet");
    // Enter: the node's processes now and each device's used memory over the hour, from a
    // range query.
    pane.keys(&["Enter"]);
    pane.must_show(
        &[
            "live view: ssh -t demo-node",
            "used, last hour:",
            "slurm 81234 rank",
        ],
        "the node's processes and history",
    );
    pane.keys(&["Escape"]);
    pane.must_show(&["USED / TOTAL"], "back to the devices");
    // `g`: a row per job, the demo's pods among them (a job of one pod each, the same pods
    // on every demo node).
    pane.keys(&["g"]);
    pane.must_show(
        &["slurm 81234", "pod serving/t5-3b-0", "pod serving/triton-0"],
        "the jobs, pods among them",
    );
    pane.keys(&["g"]);
    pane.must_show(&["USED / TOTAL"], "back to the devices");

    // A window of 10 rows: Prometheus picks them, by urgency, then by node (whole nodes);
    // the cursor near the end reads more; a filter kept is asked of Prometheus.
    let windowed = Pane::start("fleet-window", &format!("{command} --rows 10"), 120, 40);
    windowed.must_show(
        &[
            "10 of 28 devices read (the first by urgency)",
            "critical zombie context",
        ],
        "the most urgent 10",
    );
    windowed.keys(&["s"]);
    windowed.must_show(
        &["14 of 28 devices read (the first by node)"],
        "two whole nodes",
    );
    windowed.keys(&["End"]);
    windowed.must_show(
        &["21 of 28 devices read (the first by node)"],
        "a third node, read as the cursor nears the end",
    );
    windowed.keys(&["/", "demo-node-3", "Enter"]);
    let screen = windowed.must_show(&["· 7 devices ·"], "the filter, asked of Prometheus");
    assert!(!screen.contains("of 28"), "{screen}");
    windowed.quit();

    let killed = addrs[2].clone();
    servers[2] = None;
    let f = fleet_until(&url, "the killed target said down", |f| {
        node(f, &killed).is_some_and(|n| n["state"] == "down")
    });
    let down = node(&f, &killed).expect("the killed node");
    assert_eq!(down["why"], "target down (Prometheus's up is 0)", "{down}");
    assert_eq!(
        down["name"], "demo-node-2",
        "named by what it last said: {down}"
    );
    assert_eq!(
        down["devices"],
        serde_json::json!([]),
        "no old figures: {down}"
    );
    assert_eq!(f["jobs"][0]["processes"].as_u64(), Some(6), "{f}");
    let screen = pane.must_show(&["3 up, 1 down", "DOWN: target down"], "the node down");
    let first_row = screen.lines().nth(2).unwrap_or_default();
    assert!(first_row.starts_with("demo-node-2"), "{screen}");
    pane.quit();
}

/// With the fleet rules loaded, a windowed read takes its jobs from the recorded spread:
/// a process of no Slurm job and no run has its pod for a job there too, and a filter over
/// a pod key's `/` picks the same jobs from Prometheus as the client keeps of the endpoints.
#[test]
fn the_recorded_jobs_hold_the_pods_and_a_filter_picks_them() {
    let mut servers: Vec<Server> = (1..3).map(Server::demo).collect();
    let addrs: Vec<String> = servers.iter().map(|s| s.addr.clone()).collect();
    let targets: Vec<&str> = addrs.iter().map(String::as_str).collect();
    let rules = fleet_rules();
    let (_prometheus, url) = scraping(&targets, &[rules.as_path()]);
    let read = fleet_json;
    let keys = |f: &Value| -> Vec<String> {
        let mut keys: Vec<String> = f["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .map(|j| j["key"].as_str().expect("key").to_string())
            .collect();
        keys.sort();
        keys
    };
    // Once the rules have evaluated over both targets: the jobs counted, so recorded.
    let start = Instant::now();
    let windowed = loop {
        let f = read(&["--prometheus", &url, "--rows", "50"]);
        let recorded = f["part"]["jobs"].as_u64() == Some(4);
        let pod = f["jobs"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|j| j["key"] == "pod serving/t5-3b-0");
        if recorded && pod.is_some_and(|p| p["processes"] == 2) {
            break f;
        }
        assert!(start.elapsed() < PATIENCE, "the recorded jobs: {f}");
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(
        keys(&windowed),
        [
            "pod inference/mistral-7b-6d4f9c-x2x7q",
            "pod serving/t5-3b-0",
            "pod serving/triton-0",
            "slurm 81234"
        ]
    );
    let endpoints = addrs.join(",");
    for (filter, expected) in [
        (
            "d serving/",
            &["pod serving/t5-3b-0", "pod serving/triton-0"][..],
        ),
        ("serving/t5", &["pod serving/t5-3b-0"][..]),
        ("INFERENCE/", &["pod inference/mistral-7b-6d4f9c-x2x7q"][..]),
        ("slurm 8", &["slurm 81234"][..]),
        ("/nothing", &[][..]),
    ] {
        let by_prometheus = read(&["--prometheus", &url, "--rows", "50", "--filter", filter]);
        assert!(
            by_prometheus["part"]["jobs"].is_u64(),
            "{filter}: recorded: {}",
            by_prometheus["part"]
        );
        let by_client = read(&["--endpoints", &endpoints, "--filter", filter]);
        assert_eq!(keys(&by_prometheus), expected, "--filter {filter:?}");
        assert_eq!(keys(&by_client), expected, "--filter {filter:?}");
    }
    // A window lists the nodes it needs and counts them all: with one target killed, a
    // window of 3 rows lists that node, down, named by what it last said, and the node of
    // the rows read, of 2.
    let killed = addrs[1].clone();
    drop(servers.remove(1));
    let start = Instant::now();
    let f = loop {
        let f = read(&["--prometheus", &url, "--rows", "3"]);
        // (And the urgency rule evaluated since: until then it still ranks the dead node's
        // devices, whose rows are gone.)
        if node(&f, &killed).is_some_and(|n| n["state"] == "down") && f["part"]["devices_read"] == 3
        {
            break f;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "the killed target said down: {f}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(f["part"]["nodes"], 2, "{}", f["part"]);
    assert!(f["part"]["jobs"].is_u64(), "recorded: {}", f["part"]);
    let down = node(&f, &killed).expect("the node down");
    assert_eq!(down["name"], "demo-node-2", "{down}");
    assert_eq!(down["devices"], serde_json::json!([]), "{down}");
    let up = node(&f, &addrs[0]).expect("the node of the rows read");
    assert_eq!(up["state"], "up", "{up}");
    assert_eq!(up["devices"].as_array().map(Vec::len), Some(3), "{up}");
    drop(servers);
}

/// A node that came after the rules' last evaluation: the node and device rules know it not
/// yet (the rule file here leaves its instance out of them, as an evaluation made before it
/// came would), but its devices are there now. A windowed read must not list it as a node
/// with no devices (a row that says NVML found none), and counts it and its devices: from
/// the fleet-wide rules, and from a rule file older than them (the rules asked themselves).
#[test]
fn a_node_the_rules_know_not_yet_is_not_said_to_have_no_devices() {
    let servers: Vec<Server> = (1..3).map(Server::demo).collect();
    let addrs: Vec<String> = servers.iter().map(|s| s.addr.clone()).collect();
    let targets: Vec<&str> = addrs.iter().map(String::as_str).collect();
    let scratch = common::Scratch::new("fleet-rules-behind");
    let rules = fleet_rules();
    let text = std::fs::read_to_string(rules).expect("the rule file");
    let late = &addrs[1];
    for fleet_wide in [true, false] {
        let mut file: serde_norway::Value = serde_norway::from_str(&text).expect("YAML");
        let group = file["groups"][0]["rules"]
            .as_sequence_mut()
            .expect("the rules");
        let mut behind = 0;
        for rule in group.iter_mut() {
            let record = rule["record"].as_str().unwrap_or_default();
            if strata::fleet::window::NODE_RULES
                .iter()
                .any(|(name, _)| *name == record)
            {
                let expr = rule["expr"].as_str().expect("an expression");
                rule["expr"] =
                    format!("({expr}) unless on(instance) up{{instance=\"{late}\"}}").into();
                behind += 1;
            }
        }
        assert_eq!(behind, 4, "the node and device rules");
        let before = group.len();
        if !fleet_wide {
            group.retain(|r| {
                !r["record"].as_str().is_some_and(|r| {
                    r.starts_with("strata_fleet:")
                        || r.ends_with(":topk")
                        || r.ends_with(":bottomk")
                })
            });
            assert_eq!(
                before - group.len(),
                11,
                "the fleet-wide rules, the tops and the bottoms"
            );
        }
        let behind_file = scratch.path(&format!("rules-behind-{fleet_wide}.yml"));
        std::fs::write(
            &behind_file,
            serde_norway::to_string(&file).expect("the YAML"),
        )
        .expect("the rule file");
        let (_prometheus, url) = scraping(&targets, &[behind_file.as_path()]);
        let read = || fleet_json(&["--prometheus", &url, "--rows", "50"]);
        // Once both targets are scraped and the rules have evaluated (the jobs recorded, the
        // first node's devices ranked and read).
        let start = Instant::now();
        let f = loop {
            let f = read();
            let ready = f["part"]["jobs"].is_u64()
                && f["part"]["devices_read"] == 7
                && f["jobs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|j| j["key"] == "slurm 81234" && j["nodes"] == 2);
            if ready {
                break f;
            }
            assert!(start.elapsed() < PATIENCE, "the rules evaluated: {f}");
            std::thread::sleep(Duration::from_millis(250));
        };
        let how = if fleet_wide {
            "the fleet-wide rules"
        } else {
            "an older rule file"
        };
        assert_eq!(f["problems"], serde_json::json!([]), "{how}: {f}");
        assert!(
            node(&f, late).is_none(),
            "{how}: a node whose devices no rule ranks yet is not a row: {}",
            f["nodes"]
        );
        let first = node(&f, &addrs[0]).expect("the node of the rows read");
        assert_eq!(first["devices"].as_array().map(Vec::len), Some(7), "{how}");
        assert_eq!(f["part"]["nodes"], 2, "{how}: {}", f["part"]);
        assert_eq!(f["part"]["devices"], 14, "{how}: {}", f["part"]);
        assert_eq!(f["part"]["jobs"], 4, "{how}: {}", f["part"]);
    }
    drop(servers);
}

/// A windowed read with a stale node among those of the jobs it reads: each such job is
/// joined by the client from its processes on the nodes up (the stale node's left out, as
/// a whole read leaves them out), and the read stays windowed: its nodes listed and
/// counted, its jobs counted (it was made whole before, every process of the fleet read).
#[test]
fn a_windowed_read_leaves_a_stale_nodes_ranks_out_of_its_jobs() {
    let servers: Vec<Server> = (1..3).map(Server::demo).collect();
    // A made-up node: seed 3's metrics, its sample 10,000 s old (stale at any interval).
    let stale_text: String = {
        let third = Server::demo(3);
        let text = third.metrics_text();
        drop(third);
        text.lines()
            .map(|l| {
                if l.starts_with("strata_sample_age_seconds") {
                    let name = l.rsplit_once(' ').map_or(l, |(name, _)| name);
                    format!("{name} 10000\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect()
    };
    assert!(stale_text.contains(" 10000\n"), "{stale_text}");
    let page = Page::serve(stale_text);
    let mut addrs: Vec<String> = servers.iter().map(|s| s.addr.clone()).collect();
    addrs.push(page.addr.clone());
    let targets: Vec<&str> = addrs.iter().map(String::as_str).collect();
    let rules = fleet_rules();
    let (prometheus, url) = scraping(&targets, &[rules.as_path()]);
    let read = fleet_json;
    // Once the rules have evaluated over the three (the stale node's ranks in the recorded
    // spread: the rules cannot leave them out).
    let start = Instant::now();
    let f = loop {
        let recorded = common::prometheus::query(
            &prometheus,
            "strata_job:figures:spread{slurm_job=\"81234\",stat=\"nodes\"} == 3",
        );
        let f = read(&["--prometheus", &url, "--rows", "50"]);
        if !recorded.is_empty() && node(&f, &page.addr).is_some_and(|n| n["state"] == "stale") {
            break f;
        }
        assert!(start.elapsed() < PATIENCE, "the stale node recorded: {f}");
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(f["problems"], serde_json::json!([]), "{f}");
    assert_eq!(f["part"]["nodes"], 3, "listed, not whole: {}", f["part"]);
    assert_eq!(
        f["part"]["jobs"], 4,
        "counted from the rules: {}",
        f["part"]
    );
    assert_eq!(
        f["part"]["devices"], 14,
        "the stale node's 7 not counted: {}",
        f["part"]
    );
    let jobs = |f: &Value| -> Vec<(String, u64, u64)> {
        let mut out: Vec<(String, u64, u64)> = f["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .map(|j| {
                (
                    j["key"].as_str().expect("key").to_string(),
                    j["processes"].as_u64().expect("processes"),
                    j["nodes"].as_u64().expect("nodes"),
                )
            })
            .collect();
        out.sort();
        out
    };
    let windowed = jobs(&f);
    assert!(
        windowed.contains(&("slurm 81234".to_string(), 4, 2)),
        "the stale node's two ranks left out: {windowed:?}"
    );
    // As the client joins them from the endpoints themselves.
    let by_client = read(&["--endpoints", &addrs.join(","), "--rows", "50"]);
    assert!(
        node(&by_client, &page.addr).is_some_and(|n| n["state"] == "stale"),
        "{by_client}"
    );
    assert_eq!(windowed, jobs(&by_client));
    drop(servers);
}

#[test]
fn no_prometheus_or_not_prometheus_is_one_line() {
    let nothing = format!("http://127.0.0.1:{}", free_port());
    let (f, out) = fleet(&nothing);
    assert_eq!(out.status.code(), Some(1));
    let error = f["error"].as_str().expect("an error");
    assert!(error.contains("connection refused"), "{error}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    // A strata serve is not Prometheus: its `/api/v1/query` is not found.
    let server = Server::start(&["--demo"], &[]);
    server.metrics_text();
    let (f, out) = fleet(&format!("http://{}", server.addr));
    assert_eq!(out.status.code(), Some(1));
    let error = f["error"].as_str().expect("an error");
    assert!(error.contains("HTTP 404"), "{error}");

    // Not a URL at all.
    let out = common::strata_output(&["fleet", "--prometheus", "prometheus:9090", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("hint: http://prometheus:9090"), "{stderr}");
}

/// A Prometheus that refuses the query (over its limits), one that answers in part (its
/// warnings), and one that never answers: each said, and nothing drawn from them as if whole.
#[test]
fn a_refused_a_partial_and_a_silent_prometheus() {
    let refused = Page::serve_as(
        r#"{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory in query execution"}"#.into(),
        "application/json",
    );
    let (f, out) = fleet(&format!("http://{}", refused.addr));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        f["error"],
        format!(
            "Prometheus at http://{}: query nodes: query processing would load too many samples into memory in query execution (execution)",
            refused.addr
        )
    );

    let partial = Page::serve_as(
        r#"{"status":"success","warnings":["partial result: store 3 unreachable"],"data":{"resultType":"vector","result":[]}}"#.into(),
        "application/json",
    );
    let (f, out) = fleet(&format!("http://{}", partial.addr));
    assert!(out.status.success());
    let problems = f["problems"].as_array().expect("problems");
    assert!(
        problems
            .iter()
            .any(|p| p == "query nodes: partial result: store 3 unreachable"),
        "{f}"
    );
    assert_eq!(f["nodes"], serde_json::json!([]));

    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = silent.local_addr().expect("addr");
    let out = common::strata_output(&[
        "fleet",
        "--prometheus",
        &format!("http://{addr}"),
        "--json",
        "--timeout",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let f: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        f["error"].as_str().expect("error").ends_with("timed out"),
        "{f}"
    );
    drop(silent);
}

/// A Prometheus behind TLS and basic auth (a Python server with a certificate signed by a
/// CA made here with `openssl`): read with `--ca` and `--basic-auth-file`; without the CA,
/// the certificate is refused with a hint; without the credentials, Prometheus's 401 is said
/// with a hint. The password is never on the command line, and never printed.
#[test]
fn https_with_a_ca_file_and_basic_auth_from_a_file() {
    let scratch = common::Scratch::new("fleet-tls");
    let dir = &scratch.dir;
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl (hint: apt-get install -y openssl, as tests/all does)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=strata-test-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(
        dir.join("ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .expect("ext");
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext",
    ]);
    std::fs::write(dir.join("server.py"), TLS_PROMETHEUS).expect("server.py");
    let mut server = common::Running::spawn(
        std::process::Command::new("python3")
            .arg(dir.join("server.py"))
            .arg(dir.join("server.pem"))
            .arg(dir.join("server.key"))
            .arg("ops:s3cret")
            .stdout(std::process::Stdio::piped()),
    );
    let mut port = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().expect("stdout")),
        &mut port,
    )
    .expect("its port");
    let url = format!("https://127.0.0.1:{}", port.trim());
    let auth = dir.join("auth");
    std::fs::write(&auth, "ops:s3cret\n").expect("auth");
    let ca = dir.join("ca.pem");
    let run = |extra: &[&str]| {
        let mut args = vec!["fleet", "--prometheus", &url, "--json", "--timeout", "10"];
        args.extend_from_slice(extra);
        let out = common::strata_output(&args);
        let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        (
            out.status.code(),
            json,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ca_s, auth_s) = (ca.to_str().expect("utf-8"), auth.to_str().expect("utf-8"));
    let (code, f, _) = run(&["--ca", ca_s, "--basic-auth-file", auth_s]);
    assert_eq!(code, Some(0), "{f}");
    assert_eq!(f["problems"], serde_json::json!([]), "{f}");

    let (code, f, stderr) = run(&["--basic-auth-file", auth_s]);
    assert_eq!(code, Some(1));
    let error = f["error"].as_str().expect("error");
    assert!(
        error.contains("UnknownIssuer") && error.contains("hint: --ca FILE"),
        "{error}"
    );
    assert!(!stderr.contains("s3cret") && !error.contains("s3cret"));

    let (code, f, _) = run(&["--ca", ca_s]);
    assert_eq!(code, Some(1));
    let error = f["error"].as_str().expect("error");
    assert!(
        error.contains("credentials wanted (unauthorized; hint: --basic-auth-file"),
        "{error}"
    );
    let _ = server.kill();
}

/// A Prometheus that answers every query with an empty vector, over TLS, to the user and
/// password given, and with a 401 to anyone else.
const TLS_PROMETHEUS: &str = r#"
import base64, http.server, json, ssl, sys
cert, key, user = sys.argv[1], sys.argv[2], sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.headers.get("Authorization") != "Basic " + base64.b64encode(user.encode()).decode():
            body = b'{"status":"error","errorType":"unauthorized","error":"credentials wanted"}'
            self.send_response(401)
        else:
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"#;

/// A windowed read judges each node's state in its query (`window::NodeQueries`) and lists
/// the nodes not up: on the same figures, promtool evaluates the query, and the client's own
/// judgement (`build::build`) says the same nodes are not up. Each node, at 10 minutes,
/// with a scrape interval of 15 s (a limit of 45 s for a node whose own interval is 1 s):
/// - `a`: its sample 2 s old, scraped now: up;
/// - `b`: 100 s old: stale;
/// - `c`: its target down for the last 5 minutes, its info gone: down;
/// - `d`: no sample age at all: stale;
/// - `e`: 50 s old, its own interval 40 s (a limit of 120 s): up;
/// - `f`: 0 s old when scraped, but last scraped 3 minutes ago: stale;
/// - `g`: 42 s old, inside the limit but within the query's slack: listed, and the client
///   finds it up (a node listed is only read).
#[test]
fn the_nodes_not_up_are_judged_in_the_query_as_the_client_judges_them() {
    use strata::fleet::build::{build, Target};
    use strata::fleet::model::NodeState;
    use strata::fleet::Series;
    let scratch = common::Scratch::new("node-state");
    let queries = strata::fleet::window::NodeQueries::new(
        &strata::fleet::window::Recorded::default(),
        15.0,
        600.0,
    );
    // (instance, up, info, sample age, its interval), a minute apart for 11 minutes.
    let nodes: [(&str, &str, &str, &str, &str); 7] = [
        ("a", "1x10", "1x10", "2x10", "1x10"),
        ("b", "1x10", "1x10", "100x10", "1x10"),
        ("c", "1x5 0x5", "1x5 _x5", "2x5 _x5", "1x5 _x5"),
        ("d", "1x10", "1x10", "_x10", "1x10"),
        ("e", "1x10", "1x10", "50x10", "40x10"),
        ("f", "1x10", "1x10", "0x7 _x3", "1x10"),
        ("g", "1x10", "1x10", "42x10", "1x10"),
    ];
    let mut input = String::new();
    for (i, up, info, age, interval) in nodes {
        for (name, values) in [
            ("up", up),
            ("strata_node_info", info),
            ("strata_sample_age_seconds", age),
            ("strata_sample_interval_seconds", interval),
        ] {
            let host = if name == "strata_node_info" {
                format!(",host=\"node-{i}\"")
            } else {
                String::new()
            };
            input.push_str(&format!(
                "      - series: '{name}{{instance=\"{i}\",job=\"strata\"{host}}}'\n        values: '{values}'\n"
            ));
        }
    }
    let listed = ["b", "c", "d", "f", "g"];
    let expected: String = listed
        .iter()
        .map(|i| format!("          - labels: '{{instance=\"{i}\"}}'\n            value: 1\n"))
        .collect();
    let test = format!(
        "rule_files: []\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{input}    promql_expr_test:\n      - expr: 'group by (instance) ({})'\n        eval_time: 10m\n        exp_samples:\n{expected}",
        queries.not_up().replace('\'', "''")
    );
    let file = scratch.path("node-state.test.yml");
    std::fs::write(&file, &test).expect("the test file");
    let out = std::process::Command::new(common::prometheus::tool("promtool"))
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .expect("promtool runs");
    assert!(
        out.status.success(),
        "{}{}\n{test}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The client, on the same figures at 10 minutes (c is down: its target's up is 0).
    let series = |name: &str, i: &str, value: f64| Series {
        name: name.into(),
        labels: [("instance".to_string(), i.to_string())].into(),
        value,
    };
    let mut all = Vec::new();
    let mut targets = Vec::new();
    for (i, age, interval, since) in [
        ("a", Some(2.0), 1.0, 0.0),
        ("b", Some(100.0), 1.0, 0.0),
        ("d", None, 1.0, 0.0),
        ("e", Some(50.0), 40.0, 0.0),
        ("f", Some(0.0), 1.0, 180.0),
        ("g", Some(42.0), 1.0, 0.0),
    ] {
        all.push(series("strata_node_info", i, 1.0));
        all.push(series("strata_sample_interval_seconds", i, interval));
        if let Some(age) = age {
            all.push(series("strata_sample_age_seconds", i, age));
        }
        targets.push(Target {
            instance: i.into(),
            up: true,
            why: None,
            since_scrape: since,
        });
    }
    let built = build(&targets, &all, 15.0);
    let not_up: Vec<&str> = built
        .nodes
        .iter()
        .filter(|n| n.state != NodeState::Up)
        .map(|n| n.instance.as_str())
        .collect();
    assert_eq!(not_up, ["b", "d", "f"], "the client: c is down by its up");
}

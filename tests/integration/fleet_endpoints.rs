//! `strata fleet --endpoints`: real `strata serve --demo` targets with different seeds beside
//! one that hangs and one that refuses; a fleet of made-up nodes (static `/metrics` pages
//! served here) whose one rank climbs alone; the view under tmux: the ranking, the job row
//! and its outlier, Enter into a node, a target killed and shown down.

use crate::common;

use common::exposition::Server;
use common::page::Page;
use common::tmux::Pane;
use serde_json::Value;
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// A made-up node's `/metrics`, in strata serve's shape: one GPU, one rank of job 4242 of
/// `world` ranks, its live tensors climbing at `climb` bytes a second where its node said so.
fn node_page(host: &str, rank: u32, world: u32, climb: Option<f64>) -> String {
    let uuid = format!("GPU-{rank:04}");
    let p = format!(
        "gpu=\"0\",uuid=\"{uuid}\",pid=\"{}\",user=\"ml\",command=\"python train.py\",namespace=\"\",pod=\"\",container=\"\",slurm_job=\"4242\",rank=\"{rank}\",local_rank=\"0\",world_size=\"{world}\",run=\"\"",
        1000 + rank
    );
    let mut page = format!(
        "# TYPE strata_node_info gauge\nstrata_node_info{{host=\"{host}\",version=\"0.1.0\",exports=\"device_findings\"}} 1\n\
         # TYPE strata_sample_age_seconds gauge\nstrata_sample_age_seconds 0.2\n\
         # TYPE strata_sample_interval_seconds gauge\nstrata_sample_interval_seconds 1.0\n\
         # TYPE strata_gpu_memory_total_bytes gauge\nstrata_gpu_memory_total_bytes{{gpu=\"0\",uuid=\"{uuid}\",name=\"H100\"}} 85899345920\n\
         # TYPE strata_gpu_layer_bytes gauge\n\
         strata_gpu_layer_bytes{{gpu=\"0\",uuid=\"{uuid}\",name=\"H100\",layer=\"live\"}} 21474836480\n\
         strata_gpu_layer_bytes{{gpu=\"0\",uuid=\"{uuid}\",name=\"H100\",layer=\"free\"}} 64424509440\n\
         # TYPE strata_process_used_bytes gauge\nstrata_process_used_bytes{{{p}}} 21474836480\n\
         # TYPE strata_process_layer_bytes gauge\nstrata_process_layer_bytes{{{p},layer=\"live\"}} 21474836480\n"
    );
    if let Some(rate) = climb {
        page.push_str(&format!(
            "# TYPE strata_device_findings gauge\nstrata_device_findings{{gpu=\"0\",uuid=\"{uuid}\",kind=\"climb\",severity=\"warning\"}} 1\n\
             # TYPE strata_climb_rate_bytes_per_second gauge\nstrata_climb_rate_bytes_per_second{{gpu=\"0\",uuid=\"{uuid}\",pid=\"{}\",user=\"ml\",command=\"python train.py\",series=\"allocated\",cause=\"live\"}} {rate}\n",
            1000 + rank
        ));
    }
    page.push_str("# EOF\n");
    page
}

fn fleet_json(endpoints: &[String], extra: &[&str]) -> (Value, std::process::Output) {
    let list = endpoints.join(",");
    let mut args = vec!["fleet", "--endpoints", &list, "--json"];
    args.extend_from_slice(extra);
    let out = common::strata_output(&args);
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (json, out)
}

/// Four demo nodes read for real, one endpoint that accepts and never answers, one that
/// refuses: the four are up with their devices, the other two down with why, and the
/// hung one costs one timeout, not the run.
#[test]
fn demo_targets_beside_a_hung_and_a_refused_endpoint() {
    let servers: Vec<Server> = (0..4).map(Server::demo).collect();
    for s in &servers {
        s.metrics_text();
    }
    let hung = TcpListener::bind("127.0.0.1:0").expect("bind");
    let hung_addr = hung.local_addr().expect("addr").to_string();
    let refused = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").to_string()
    };
    let mut endpoints: Vec<String> = servers.iter().map(|s| s.addr.clone()).collect();
    endpoints.push(hung_addr.clone());
    endpoints.push(refused.clone());
    let started = Instant::now();
    let (f, out) = fleet_json(&endpoints, &["--timeout", "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The hung endpoint is one timeout, read beside the others.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(f["schema"], "strata.fleet/1");
    let nodes = f["nodes"].as_array().expect("nodes");
    let state = |addr: &str| {
        nodes
            .iter()
            .find(|n| n["instance"] == addr)
            .unwrap_or_else(|| panic!("{addr} in {f}"))
    };
    let mut names: Vec<&str> = servers
        .iter()
        .map(|s| state(&s.addr)["name"].as_str().expect("a name"))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["demo-node", "demo-node-1", "demo-node-2", "demo-node-3"]
    );
    for s in &servers {
        let n = state(&s.addr);
        assert_eq!(n["state"], "up", "{n}");
        let devices = n["devices"].as_array().expect("devices");
        assert!(devices.len() >= 4, "{n}");
        // Each device's layers add up to its total.
        for d in devices {
            if let Some(total) = d["total"].as_u64() {
                let sum: u64 = d["layers"]
                    .as_object()
                    .expect("layers")
                    .values()
                    .filter_map(Value::as_u64)
                    .sum();
                if sum > 0 {
                    assert_eq!(sum, total, "{d}");
                }
            }
        }
    }
    assert_eq!(state(&hung_addr)["state"], "down");
    assert_eq!(state(&hung_addr)["why"], "timed out");
    assert!(state(&hung_addr)["devices"]
        .as_array()
        .expect("[]")
        .is_empty());
    assert_eq!(state(&refused)["state"], "down");
    assert_eq!(state(&refused)["why"], "connection refused");
    // The demo's Slurm job spans the four nodes: two ranks each.
    let job = &f["jobs"][0];
    assert_eq!(job["key"], "slurm 81234", "{f}");
    assert_eq!(
        (job["processes"].as_u64(), job["nodes"].as_u64()),
        (Some(8), Some(4))
    );
    drop(hung);
}

/// Sixteen ranks of one job on sixteen made-up nodes; the node of rank 11 says its live
/// tensors climb, the others do not: the fleet names that rank, its node and GPU, once.
/// Then the same job with half its ranks climbing: no rank stands apart.
#[test]
fn the_one_rank_that_climbs_is_named() {
    let pages: Vec<Page> = (0..16)
        .map(|r| {
            let climb = (r == 11).then_some(80.0 * 1048576.0 / 60.0);
            Page::serve(node_page(&format!("node-{r:02}"), r, 16, climb))
        })
        .collect();
    let endpoints: Vec<String> = pages.iter().map(|p| p.addr.clone()).collect();
    let (f, out) = fleet_json(&endpoints, &[]);
    assert!(out.status.success());
    let findings = f["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 1, "{f}");
    assert_eq!(findings[0]["kind"], "rank_outlier");
    assert_eq!(
        findings[0]["message"],
        "slurm 4242: rank 11 on node-11 GPU 0: live +80.0 MiB/min, the other 15 flat"
    );
    assert_eq!(findings[0]["evidence"]["pid"], "1011");
    let job = &f["jobs"][0];
    assert_eq!(
        (job["processes"].as_u64(), job["world_size"].as_u64()),
        (Some(16), Some(16))
    );

    let half: Vec<Page> = (0..8)
        .map(|r| {
            Page::serve(node_page(
                &format!("node-{r:02}"),
                r,
                8,
                (r % 2 == 0).then_some(1e6),
            ))
        })
        .collect();
    let endpoints: Vec<String> = half.iter().map(|p| p.addr.clone()).collect();
    let (f, _) = fleet_json(&endpoints, &[]);
    assert_eq!(f["findings"], serde_json::json!([]), "{f}");
    assert_eq!(f["jobs"][0]["climbing"].as_array().map(Vec::len), Some(4));
}

/// Hostile strings from a target (an escape in its host name, a 10 KB label, a name that
/// is an IP) reach neither the JSON nor the screen as control characters; a page that is
/// not metrics is said as such.
#[test]
fn hostile_and_foreign_pages() {
    let evil = Page::serve(node_page("evil\u{1b}]0;owned\u{7}\u{1b}[2J", 0, 3, None));
    let wide = Page::serve(node_page(&"w".repeat(10_000), 1, 3, None));
    let ip = Page::serve(node_page("10.1.2.3", 2, 3, None));
    let html = Page::serve("<html><body>hello</body></html>\n".into());
    let endpoints = vec![
        evil.addr.clone(),
        wide.addr.clone(),
        ip.addr.clone(),
        html.addr.clone(),
    ];
    let (f, out) = fleet_json(&endpoints, &[]);
    assert!(out.status.success());
    let text = f.to_string();
    assert!(
        !text.contains("\\u001b") && !text.contains("\\u0007"),
        "{text}"
    );
    let nodes = f["nodes"].as_array().expect("nodes");
    assert_eq!(nodes[2]["name"], "10.1.2.3");
    assert_eq!(nodes[3]["state"], "down");
    assert!(
        nodes[3]["why"]
            .as_str()
            .expect("why")
            .starts_with("not a metrics page: line 1"),
        "{}",
        nodes[3]
    );
}

/// The view under tmux at 120x40: the down node first, then the critical device; the job
/// row with its outlier (`g`); Enter on a node shows its devices and the line to its live
/// view; a target killed is shown down at the next refresh.
#[test]
fn the_fleet_view_under_tmux() {
    let mut pages: Vec<Option<Page>> = (0..6)
        .map(|r| {
            let climb = (r == 4).then_some(2.0 * 1048576.0 / 60.0);
            Some(Page::serve(node_page(&format!("node-{r:02}"), r, 6, climb)))
        })
        .collect();
    let list: Vec<String> = pages.iter().flatten().map(|p| p.addr.clone()).collect();
    let command = format!(
        "{} fleet --endpoints {} --refresh 1 --timeout 1",
        common::strata(),
        list.join(",")
    );
    let pane = Pane::start("fleet", &command, 120, 40);
    let screen = pane.must_show(
        &["6 nodes: 6 up", "rank_outlier · slurm 4242: rank 4 on node-04 GPU 0: live +2.00 MiB/min, the other 5 flat"],
        "the fleet and its outlier",
    );
    // The climbing device ranks first among the up ones.
    let first_row = screen.lines().nth(3).unwrap_or_default();
    assert!(first_row.starts_with("node-04"), "{screen}");
    pane.keys(&["g"]);
    pane.must_show(&["JOB", "slurm 4242", "1 (outlier)"], "the job row");
    pane.keys(&["g"]);
    pane.keys(&["Enter"]);
    pane.must_show(
        &[
            "live view: ssh -t node-04 strata",
            "GPU 0 H100",
            "climb · pid 1004 (ml · python train.py): live +2.00 MiB/min (allocated)",
        ],
        "the node's detail",
    );
    pane.keys(&["Escape"]);
    pane.must_show(&["NODE", "USED / TOTAL"], "back to the devices");
    // A target killed: down at the next refresh, first in the ranking.
    pages[2] = None;
    let screen = pane.must_show(&["5 up, 1 down", "DOWN: "], "the killed target shown down");
    assert!(
        screen.lines().nth(3).unwrap_or_default().contains("DOWN"),
        "{screen}"
    );
    pane.quit();
}

//! A real Prometheus server for the tests (Debian's `prometheus` package; tests/all installs
//! it), with its `promtool`: found on PATH or in `$STRATA_PROMETHEUS_DIR`, and a missing
//! binary fails the test with a hint, never skips it.

use super::exposition::get;
use super::{Running, Scratch};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `prometheus` and `promtool`: `$STRATA_PROMETHEUS_DIR/NAME`, else on PATH.
pub fn tool(name: &str) -> PathBuf {
    let found = match std::env::var_os("STRATA_PROMETHEUS_DIR") {
        Some(dir) => Some(PathBuf::from(dir).join(name)).filter(|p| p.is_file()),
        None => std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        }),
    };
    found.unwrap_or_else(|| {
        panic!(
            "`{name}` not found (hint: install Debian's prometheus package, `apt-get install -y prometheus`, as .ci/run does, or point STRATA_PROMETHEUS_DIR at its binaries)"
        )
    })
}

/// A Prometheus server, killed on drop; its log is printed when the test fails.
pub struct Prometheus {
    child: Running,
    pub addr: String,
    scratch: Scratch,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // Stopped first, so that its log is whole.
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log =
                std::fs::read_to_string(self.scratch.path("prometheus.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            eprintln!(
                "prometheus's log (last lines, newest first):\n{}",
                tail.join("\n")
            );
        }
    }
}

impl Prometheus {
    /// Waits until it answers `/-/ready` (it starts in a moment, longer on a busy machine).
    pub fn wait_ready(&self, within: std::time::Duration) {
        let deadline = std::time::Instant::now() + within;
        while !get(&self.addr, "/-/ready", None).is_ok_and(|r| r.status == 200) {
            assert!(
                std::time::Instant::now() < deadline,
                "Prometheus not ready in {within:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A Prometheus scraping `target` every second, evaluating `rules` (rule files) every second.
pub fn start_prometheus(target: &str, rules: &[&Path]) -> Prometheus {
    start_prometheus_scraping(&[target], rules)
}

/// A Prometheus scraping each of `targets` every second (one job, `strata`), evaluating
/// `rules` every second.
pub fn start_prometheus_scraping(targets: &[&str], rules: &[&Path]) -> Prometheus {
    let binary = tool("prometheus");
    let scratch = Scratch::new("prometheus");
    let dir = &scratch.dir;
    std::fs::create_dir_all(dir.join("data")).expect("temp dir");
    let config = dir.join("prometheus.yml");
    let mut file = std::fs::File::create(&config).expect("config");
    write!(
        file,
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
         scrape_configs:\n  - job_name: strata\n    static_configs:\n      - targets: [{}]\n",
        targets
            .iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(", ")
    )
    .expect("config");
    if !rules.is_empty() {
        writeln!(file, "rule_files:").expect("config");
        for rule_file in rules {
            writeln!(file, "  - '{}'", rule_file.display()).expect("config");
        }
    }
    let addr = format!("127.0.0.1:{}", free_port());
    let log = std::fs::File::create(dir.join("prometheus.log")).expect("log");
    let child = Running::spawn(
        Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log),
    );
    Prometheus {
        child,
        addr,
        scratch,
    }
}

pub fn encode_query(query: &str) -> String {
    query
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The instant vector a query returns: each result's labels and value.
pub fn query(prometheus: &Prometheus, promql: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    let path = format!("/api/v1/query?query={}", encode_query(promql));
    let response = get(&prometheus.addr, &path, None).expect("Prometheus's HTTP API");
    assert_eq!(response.status, 200, "{promql}: {}", response.body);
    let body: Value = serde_json::from_str(&response.body).expect("JSON");
    assert_eq!(body["status"], "success", "{body}");
    body["data"]["result"]
        .as_array()
        .expect("a vector")
        .iter()
        .map(|r| {
            let labels = r["metric"]
                .as_object()
                .expect("labels")
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect();
            let value = r["value"][1]
                .as_str()
                .and_then(|v| v.parse().ok())
                .expect("a value");
            (labels, value)
        })
        .collect()
}

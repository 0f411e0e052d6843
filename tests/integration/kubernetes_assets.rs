//! The Kubernetes manifests of `assets/kubernetes/`: they parse, the DaemonSet holds what its
//! comments promise (host PID namespace, the NVIDIA runtime and no GPU taken, a read-only
//! root, only SYS_PTRACE and DAC_READ_SEARCH, resources, probes, scrape annotations), the
//! container's `strata serve` command runs as written (only `--demo` added) and serves
//! `/metrics`, its probes' paths answer 200, and the Service, the annotations and the
//! ServiceMonitor all point at the port it listens on.

use crate::common;

use common::exposition::{get, parse};
use common::{strata_command, Running};
use serde::Deserialize;
use serde_norway::Value;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The documents of `assets/kubernetes/NAME`.
fn documents(name: &str) -> Vec<Value> {
    let path = format!("{}/assets/kubernetes/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{path}: {e}")))
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind}");
    found[0]
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

/// The DaemonSet's strata container.
fn container(docs: &[Value]) -> &Value {
    let containers = of_kind(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .expect("containers");
    assert_eq!(containers.len(), 1);
    &containers[0]
}

/// The container's command, each argument.
fn command(docs: &[Value]) -> Vec<String> {
    container(docs)["command"]
        .as_sequence()
        .expect("a command")
        .iter()
        .map(|a| text(a).to_string())
        .collect()
}

/// The port `--listen HOST:PORT` of the command binds.
fn listen_port(command: &[String]) -> u64 {
    let at = command
        .iter()
        .position(|a| a == "--listen")
        .expect("--listen");
    let addr = &command[at + 1];
    let (_, port) = addr.rsplit_once(':').expect("HOST:PORT");
    port.parse().expect("a port")
}

#[test]
fn the_manifests_parse_and_the_daemonset_holds_what_it_promises() {
    let docs = documents("strata-serve.yaml");
    assert_eq!(docs.len(), 2, "a DaemonSet and a Service");
    let pod = &of_kind(&docs, "DaemonSet")["spec"]["template"];
    let spec = &pod["spec"];
    assert_eq!(spec["hostPID"], Value::Bool(true));
    assert_eq!(text(&spec["runtimeClassName"]), "nvidia");
    // No host path: /proc is the host's through hostPID, /dev/nvidia* come with the runtime.
    assert!(spec.get("volumes").is_none(), "{:?}", spec["volumes"]);
    let c = container(&docs);
    let security = &c["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], Value::Bool(true));
    assert_eq!(security["allowPrivilegeEscalation"], Value::Bool(false));
    assert_eq!(security["privileged"], Value::Bool(false));
    let caps = &security["capabilities"];
    let listed = |v: &Value| -> Vec<String> {
        v.as_sequence()
            .expect("a list")
            .iter()
            .map(|c| text(c).to_string())
            .collect()
    };
    assert_eq!(listed(&caps["drop"]), ["ALL"]);
    assert_eq!(listed(&caps["add"]), ["SYS_PTRACE", "DAC_READ_SEARCH"]);
    // Requests and limits of both, and no GPU taken from the scheduler.
    for kind in ["requests", "limits"] {
        let r = &c["resources"][kind];
        assert!(
            r.get("cpu").is_some() && r.get("memory").is_some(),
            "{kind}"
        );
        assert!(r.get("nvidia.com/gpu").is_none(), "{kind} takes a GPU");
    }
    let env: Vec<(String, String)> = c["env"]
        .as_sequence()
        .expect("env")
        .iter()
        .map(|e| (text(&e["name"]).to_string(), text(&e["value"]).to_string()))
        .collect();
    assert!(env.contains(&("NVIDIA_VISIBLE_DEVICES".into(), "all".into())));
    // The port: the command's --listen, the container's port, the annotations, the Service.
    let port = listen_port(&command(&docs));
    let ports = c["ports"].as_sequence().expect("ports");
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0]["containerPort"].as_u64(), Some(port));
    let port_name = text(&ports[0]["name"]);
    let annotations = &pod["metadata"]["annotations"];
    assert_eq!(text(&annotations["prometheus.io/scrape"]), "true");
    assert_eq!(text(&annotations["prometheus.io/port"]), port.to_string());
    let service = of_kind(&docs, "Service");
    let service_ports = service["spec"]["ports"].as_sequence().expect("ports");
    assert_eq!(service_ports.len(), 1);
    let target = &service_ports[0]["targetPort"];
    assert!(
        target.as_u64() == Some(port) || target.as_str() == Some(port_name),
        "the Service's targetPort {target:?} is not the container's {port}"
    );
    assert_eq!(service_ports[0]["port"].as_u64(), Some(port));
    // The Service selects the DaemonSet's pods.
    let pod_labels = pod["metadata"]["labels"].as_mapping().expect("labels");
    for (k, v) in service["spec"]["selector"]
        .as_mapping()
        .expect("a selector")
    {
        assert_eq!(
            pod_labels.get(k),
            Some(v),
            "the Service selects {k:?}={v:?}"
        );
    }

    // The ServiceMonitor scrapes the Service's named port at /metrics.
    let monitors = documents("servicemonitor.yaml");
    let monitor = of_kind(&monitors, "ServiceMonitor");
    let service_labels = service["metadata"]["labels"].as_mapping().expect("labels");
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .expect("matchLabels")
    {
        assert_eq!(service_labels.get(k), Some(v), "it selects {k:?}={v:?}");
    }
    let endpoints = monitor["spec"]["endpoints"]
        .as_sequence()
        .expect("endpoints");
    assert_eq!(endpoints.len(), 1);
    assert_eq!(text(&endpoints[0]["port"]), text(&service_ports[0]["name"]));
    assert_eq!(text(&endpoints[0]["path"]), "/metrics");
    assert_eq!(
        text(&monitor["metadata"]["namespace"]),
        text(&service["metadata"]["namespace"])
    );
}

#[test]
fn the_containers_command_serves_metrics_and_its_probes_answer() {
    let docs = documents("strata-serve.yaml");
    let args = command(&docs);
    assert!(args[0].ends_with("/strata"), "{args:?}");
    assert_eq!(args[1], "serve");
    let port = listen_port(&args);
    // Exactly the container's arguments, the demo added: this build's binary parses them
    // all and listens where the manifest says.
    let mut child = Running::spawn(
        strata_command()
            .args(&args[1..])
            .arg("--demo")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its first line");
    if !line.contains("http://") {
        let _ = child.kill();
        let said = child.wait_with_output().expect("its output");
        panic!(
            "strata {} --demo did not start: {line}{} (hint: is port {port} in use on this machine?)",
            args[1..].join(" "),
            String::from_utf8_lossy(&said.stderr)
        );
    }
    let addr = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let metrics = loop {
        match get(&addr, "/metrics", None) {
            Ok(r) if r.status == 200 => break r.body,
            other => assert!(
                Instant::now() < deadline,
                "no /metrics on {addr}: {:?}",
                other.map(|r| r.status)
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let exposition = parse(&metrics);
    assert!(!exposition
        .select("strata_gpu_memory_total_bytes", &[])
        .is_empty());
    // Each probe's path answers 200 on the probe's port.
    let c = container(&docs);
    for probe in ["livenessProbe", "readinessProbe"] {
        let http = &c[probe]["httpGet"];
        let port_ref = &http["port"];
        let named = c["ports"]
            .as_sequence()
            .expect("ports")
            .iter()
            .find(|p| Some(&p["name"]) == Some(port_ref) || &p["containerPort"] == port_ref)
            .unwrap_or_else(|| panic!("{probe}'s port {port_ref:?} is no container port"));
        assert_eq!(named["containerPort"].as_u64(), Some(port), "{probe}");
        let path = text(&http["path"]);
        let answer = get(&addr, path, None).expect("an answer");
        assert_eq!(answer.status, 200, "{probe} {path}: {}", answer.body);
    }
}

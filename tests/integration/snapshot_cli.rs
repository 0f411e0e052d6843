//! `strata snapshot --demo --json`: the public contract scripts and later views rely on.

use crate::common;

use assert_cmd::Command;
use common::snapshot::assert_layers_add_up;
use common::strata;
use serde_json::Value;

fn snapshot(args: &[&str]) -> Vec<Value> {
    let out = Command::new(strata())
        .args(["snapshot", "--demo", "--json"])
        .args(args)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
        .collect()
}

/// The keys `docs/command-line.md` documents for each kind of object (its `snapshot-keys`
/// block).
fn documented() -> std::collections::BTreeMap<String, Vec<String>> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/command-line.md"))
            .expect("docs/command-line.md");
    let start = readme
        .find("<!-- snapshot-keys -->")
        .expect("docs/command-line.md documents the snapshot's keys");
    let end = readme.find("<!-- /snapshot-keys -->").expect("end marker");
    readme[start..end]
        .lines()
        .filter(|l| !l.starts_with("<!--") && !l.starts_with("```") && !l.trim().is_empty())
        .map(|l| {
            let mut words = l.split_whitespace().map(str::to_string);
            let kind = words.next().unwrap_or_default();
            (kind, words.collect())
        })
        .collect()
}

/// `object` has exactly the keys the docs document for `kind`: none missing, none
/// undocumented.
fn exactly(object: &Value, kind: &str, docs: &std::collections::BTreeMap<String, Vec<String>>) {
    let mut expected: Vec<&str> = docs
        .get(kind)
        .unwrap_or_else(|| panic!("docs/command-line.md documents no `{kind}`"))
        .iter()
        .map(String::as_str)
        .collect();
    let mut found: Vec<&str> = object
        .as_object()
        .unwrap_or_else(|| panic!("{kind} is not an object: {object}"))
        .keys()
        .map(String::as_str)
        .collect();
    expected.sort_unstable();
    found.sort_unstable();
    assert_eq!(
        found, expected,
        "{kind}: the output's keys against docs/command-line.md's"
    );
}

#[test]
fn snapshot_has_exactly_the_documented_fields() {
    let docs = documented();
    let snap = &snapshot(&[])[0];
    exactly(snap, "snapshot", &docs);
    assert_eq!(snap["schema"], "strata.snapshot/1");
    assert!(snap["time"].is_number());
    let gpus = snap["gpus"].as_array().expect("gpus");
    assert_eq!(gpus.len(), 4);
    let mut migs = 0;
    for g in gpus {
        exactly(g, "gpu", &docs);
        exactly(&g["memory"], "memory", &docs);
        exactly(&g["layers"], "layers", &docs);
        for m in g["mig"].as_array().expect("mig list") {
            exactly(m, "mig", &docs);
            exactly(&m["layers"], "layers", &docs);
            migs += 1;
        }
    }
    assert_eq!(migs, 3);
    let processes = snap["processes"].as_array().expect("processes");
    assert!(!processes.is_empty());
    let mut fed = 0;
    let mut owned = 0;
    for p in processes {
        exactly(p, "process", &docs);
        if !p["feed"].is_null() {
            exactly(&p["feed"], "process.feed", &docs);
            fed += 1;
        }
        if !p["owner"].is_null() {
            exactly(&p["owner"], "owner", &docs);
            owned += 1;
        }
    }
    assert!(fed > 0);
    assert!(owned > 0);
    let feeds = snap["feeds"].as_array().expect("feeds");
    assert!(!feeds.is_empty());
    for f in feeds {
        exactly(f, "feed", &docs);
        exactly(&f["counters"], "counters", &docs);
    }
    let findings = snap["findings"].as_array().expect("findings");
    assert!(!findings.is_empty());
    for f in findings {
        exactly(f, "finding", &docs);
    }
    exactly(&snap["host_memory"], "host_memory", &docs);
    exactly(&snap["device_files"], "device_files", &docs);
    let holders = snap["device_files"]["holders"].as_array().expect("holders");
    assert!(!holders.is_empty());
    for h in holders {
        exactly(h, "holder", &docs);
    }
}

/// The host's figures, per process and for the node, with their types: numbers where `/proc`
/// shows the process, `null` (never 0) where it does not.
#[test]
fn host_figures_are_in_the_json_typed() {
    let snap = &snapshot(&[])[0];
    let cpu = snap["host_cpu_percent"].as_f64().expect("host_cpu_percent");
    assert!((0.0..=100.0).contains(&cpu), "{cpu}");
    let total = snap["host_memory"]["total"].as_u64().expect("total bytes");
    let used = snap["host_memory"]["used"].as_u64().expect("used bytes");
    assert!(0 < used && used <= total, "{used} of {total}");
    let processes = snap["processes"].as_array().expect("processes");
    let mut seen = 0;
    for p in processes {
        if p["visible"] == true {
            let cpu = p["cpu_percent"].as_f64().expect("cpu_percent is a number");
            assert!(cpu >= 0.0, "{p}");
            assert!(p["host_memory"].as_u64().is_some_and(|b| b > 0), "{p}");
            let elapsed = p["elapsed"].as_u64().expect("elapsed is whole seconds");
            // The start time says the same, in clock ticks (the demo's are 100 a second).
            assert!(elapsed <= 3600, "{p}");
            seen += 1;
        } else {
            for key in ["cpu_percent", "host_memory", "elapsed"] {
                assert!(p[key].is_null(), "{key} of an invisible pid: {p}");
            }
        }
    }
    assert!(seen >= 5);
    for g in snap["gpus"].as_array().expect("gpus") {
        assert_eq!(g["minor_number"], g["index"], "{g}");
    }
    let zombie = snap["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["kind"] == "zombie_context")
        .expect("the demo's zombie context");
    assert_eq!(zombie["evidence"]["device_file"], "/dev/nvidia2");
    let holder = &zombie["evidence"]["holders"][0];
    assert_eq!(holder["pid"], 31342, "{zombie}");
    assert_eq!(holder["listed"], false);
    assert_eq!(holder["ppid"], 1);
    assert!(holder["command"].is_string() && holder["parent_command"].is_string());
    assert!(holder["user"].is_string() && holder["start_time"].is_u64());
}

#[test]
fn every_gpu_and_mig_instance_adds_up_to_its_total() {
    for snap in snapshot(&["--count", "5", "--demo-at", "0"])
        .iter()
        .chain(&snapshot(&[]))
    {
        assert_layers_add_up(snap, false);
    }
}

#[test]
fn demo_shows_the_situations_the_product_is_for() {
    let snap = &snapshot(&[])[0];
    let processes = snap["processes"].as_array().expect("processes");
    let async_backend = processes
        .iter()
        .find(|p| p["feed"]["backend"] == "cudaMallocAsync")
        .expect("a cudaMallocAsync process");
    assert!(
        async_backend["layers"]["fragmented"].is_null(),
        "unknown is null, not 0"
    );
    assert!(processes
        .iter()
        .any(|p| p["feed"].is_null() && p["visible"] == true));
    let kinds: Vec<&str> = snap["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"zombie_context"), "{kinds:?}");
    assert!(kinds.contains(&"unexplained_usage"), "{kinds:?}");
    let mig: Vec<&str> = snap["gpus"][3]["mig"]
        .as_array()
        .expect("mig")
        .iter()
        .filter_map(|m| m["profile"].as_str())
        .collect();
    assert_eq!(mig, ["3g.40gb", "2g.20gb", "1g.10gb"]);
}

#[test]
fn the_same_demo_instant_is_the_same_snapshot() {
    assert_eq!(
        snapshot(&["--demo-at", "333"]),
        snapshot(&["--demo-at", "333"])
    );
}

#[test]
fn unknown_flags_are_usage_errors() {
    let out = Command::new(strata())
        .arg("--frobnicate")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage"));
}

#[test]
fn without_the_driver_library_one_line_and_a_hint() {
    for args in [vec!["snapshot", "--json"], vec![]] {
        let out = Command::new(strata())
            .args(&args)
            .env("STRATA_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        assert!(err.contains("NVIDIA driver library was not found"), "{err}");
        assert!(err.contains("--demo"), "{err}");
        assert!(out.stdout.is_empty(), "nothing half-drawn on stdout");
    }
}

/// The demo's story, diagnosed in `snapshot --demo --json` when a user would expect: nothing
/// of it at the start; by 700 s the eval loop's leak (from 70 s), the fine-tune's
/// fragmentation and retries; its OOM at 900 s is fragmentation; the eval loop's at 1010 s,
/// against its cap, capacity; and the fine-tune's climb ends with the fine-tune (960 s).
#[test]
fn the_demo_story_is_diagnosed_in_the_snapshot_on_time() {
    let at = |t: &str| -> Vec<String> {
        snapshot(&["--demo-at", t])[0]["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .map(|f| {
                let detail = f["evidence"]["cause"]
                    .as_str()
                    .or(f["evidence"]["class"].as_str())
                    .unwrap_or("");
                format!(
                    "{} {} {detail}",
                    f["kind"].as_str().unwrap_or("?"),
                    f["pid"]
                )
                .trim_end()
                .to_string()
            })
            .collect()
    };
    let story = [
        "climb 52010 live",
        "fragmentation 60112",
        "alloc_retries 60112",
        "oom 60112 fragmentation",
        "oom 52010 capacity",
    ];
    let start = at("60");
    assert!(
        story.iter().all(|s| !start.contains(&s.to_string())),
        "{start:?}"
    );
    let mid = at("700");
    for s in &story[..3] {
        assert!(mid.contains(&s.to_string()), "{s} at 700 s: {mid:?}");
    }
    assert!(at("905").contains(&"oom 60112 fragmentation".to_string()));
    let late = at("1015");
    assert!(late.contains(&"oom 52010 capacity".to_string()), "{late:?}");
    assert!(
        !late.iter().any(|f| f.starts_with("climb 60112")),
        "the fine-tune is gone: {late:?}"
    );
}

/// No float noise in the JSON: every number with a fraction has at most six decimals
/// (`0.4`, not `0.40000009536743164`).
#[test]
fn the_json_has_no_float_noise() {
    for at in ["333", "700", "1015"] {
        let line = snapshot(&["--demo-at", at])[0].to_string();
        let noisy: Vec<&str> = line
            .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
            .filter(|n| n.split_once('.').is_some_and(|(_, f)| f.len() > 6))
            .collect();
        assert!(noisy.is_empty(), "at {at}: {noisy:?}");
    }
}

/// `snapshot` without `--json` lists the processes in a table: header, each process's user,
/// device, every layer with its unit, its state and command.
#[test]
fn the_text_snapshot_lists_processes_in_a_table() {
    let out = Command::new(strata())
        .args(["snapshot", "--demo"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let header = text
        .lines()
        .find(|l| l.trim_start().starts_with("PID"))
        .unwrap_or_else(|| panic!("no table header:\n{text}"));
    for column in [
        "USER", "GPU", "USED", "LIVE", "CACHED", "FRAG", "CTX", "OUTSIDE", "STATE", "COMMAND",
    ] {
        assert!(header.contains(column), "{column} missing: {header}");
    }
    // The demo's instant is story time, never a UTC clock.
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("demo-node at story 15m05s ·") && !first.contains("UTC"),
        "{first}"
    );
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("52077 "))
        .unwrap_or_else(|| panic!("no row for 52077:\n{text}"));
    for cell in [
        "svc-infer",
        "GPU 2",
        "17.3 GiB",
        "~1.14 GiB",
        "R fed",
        "python infer_async.py",
    ] {
        assert!(row.contains(cell), "{cell} missing: {row}");
    }
}

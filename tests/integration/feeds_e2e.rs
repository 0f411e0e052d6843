//! The allocator feed end to end: real Python processes run the agent against stub torch, JAX
//! and CuPy; the fake NVML lists their pids; `strata snapshot --json` splits each process into
//! its layers.

use crate::common;

use common::feeds::*;
use common::snapshot::assert_layers_add_up;
use common::{strata, Scratch};
use serde_json::{json, Value};
use std::io::BufRead;
use std::process::Stdio;

const CONTEXT: u64 = 500 * MIB;
const OUTSIDE: u64 = 300 * MIB;

/// A torch job with a context, four 256 MiB tensors and one freed 512 MiB tensor: returns
/// (allocated, reserved) as the stub reports them.
fn warm_torch_job(job: &mut Job) -> (u64, u64) {
    job.run("import torch");
    job.run("torch.cuda.init(); torch._stub.touch(0)");
    job.run("live = [torch._stub.allocate(0, 256 << 20) for _ in range(4)]");
    job.run("torch._stub.free(torch._stub.allocate(0, 512 << 20))");
    let allocated = job.torch_stat("allocated_bytes.all.current");
    let reserved = job.torch_stat("reserved_bytes.all.current");
    assert_eq!(allocated, GIB, "the stub holds what the job allocated");
    job.steady();
    (allocated, reserved)
}

/// The wait for a paired snapshot waits for the pairing, not only for a fresh feed: a feed
/// whose latest sample came before NVML's reading is fresh and leaves the context unsplit.
#[test]
fn a_fresh_feed_whose_context_is_unsplit_is_not_yet_paired() {
    let process = |state: &str, source: Value| json!({ "feed_status": { "state": state }, "context_source": source });
    // The feed's latest sample came before NVML's reading: fresh, and nothing learned yet.
    assert!(!paired(&process("fresh", json!("unsplit"))));
    assert!(!paired(&process("stale", json!("estimated"))));
    for source in ["estimated", "observed", "reported", "fixed"] {
        assert!(paired(&process("fresh", json!(source))), "{source}");
    }
    // No pool figure (XLA's cuda_async): nothing to split, paired once fresh.
    assert!(paired(&process("fresh", Value::Null)));
}

#[test]
fn a_torch_job_is_split_into_its_layers_at_one_instant() {
    let scratch = Scratch::new("torch");
    // The agent ticks slower than a snapshot waits for it (as a loaded machine makes it): a
    // snapshot whose reading its tick misses has a fresh feed and an unsplit context, and
    // the wait goes on to the one it pairs with.
    let slow = [("STRATA_TEST_INTERVAL", "2.5".to_string())];
    let mut job = Job::start(&scratch.feeds(), &slow, false);
    let (allocated, reserved) = warm_torch_job(&mut job);
    job.wait_for_socket(&scratch.feeds());
    let used = CONTEXT + OUTSIDE + reserved;
    let scenario = one_gpu(vec![holder(job.pid, json!(used))], json!(used));
    let snap = &snapshot_fed(&scratch, &scenario, &[], &[job.pid]);
    assert_layers_add_up(snap, false);
    let p = process_of(snap, job.pid);
    assert_eq!(p["feed_status"]["state"], "fresh", "{p}");
    assert_eq!(p["feed"]["framework"], "torch");
    assert_eq!(p["feed"]["backend"], "native");
    let layers = &p["layers"];
    assert_eq!(layers["live"], allocated);
    assert_eq!(
        layers["cached"].as_u64().unwrap_or(0) + layers["fragmented"].as_u64().unwrap_or(0),
        reserved - allocated
    );
    // One reading, paired with the agent's samples around it: context and outside together,
    // an estimate (an upper bound), never a made-up split.
    assert_eq!(p["context_source"], "estimated", "{p}");
    assert_eq!(layers["context"], CONTEXT + OUTSIDE);
    assert_eq!(layers["outside_pool"], 0);
    // The feed is who the kernel says it is.
    let feed = feed_of(snap, job.pid);
    assert_eq!(feed["state"]["state"], "connected");
    assert_eq!(feed["nspid"], job.pid);
    assert_eq!(feed["hello"]["devices"][0]["uuid"], STUB_UUID, "bare hex");
    assert_eq!(feed["counters"]["malformed"], 0);

    // A fixed context size splits the rest into memory outside the pool.
    let snap = &snapshot_fed(&scratch, &scenario, &["--context-mib", "500"], &[job.pid]);
    let p = process_of(snap, job.pid);
    assert_eq!(p["context_source"], "fixed");
    assert_eq!(p["layers"]["context"], CONTEXT);
    assert_eq!(p["layers"]["outside_pool"], OUTSIDE);
}

/// Under `strata run` the agent is there before the first allocation: NVML's reading while
/// the pool is empty is the context, observed; memory outside the pool that comes later is
/// split out exactly.
#[test]
fn under_strata_run_the_context_is_observed_before_the_first_allocation() {
    let scratch = Scratch::new("observed");
    let mut job = Job::start(&scratch.feeds(), &[], true);
    job.run("import torch");
    job.run("torch.cuda.init(); torch._stub.touch(0)");
    job.steady();
    job.wait_for_socket(&scratch.feeds());
    let reserved = GIB; // four 256 MiB tensors, each its own segment in the stub
    let later = CONTEXT + OUTSIDE + reserved;
    // Polls 0-2 see the context alone; from poll 3 the pool and NCCL-like memory.
    let used = json!([CONTEXT, CONTEXT, CONTEXT, later]);
    let scenario = one_gpu(vec![holder(job.pid, used.clone())], used);
    let path = scenario_file(&scratch, &scenario);
    let mut monitor = snapshot_command(
        &path,
        &scratch.feeds(),
        &["--count", "6", "--interval", "0.3"],
    )
    .stdout(Stdio::piped())
    .spawn()
    .expect("strata");
    let mut lines = std::io::BufReader::new(monitor.stdout.take().expect("stdout")).lines();
    let mut samples: Vec<Value> = Vec::new();
    for _ in 0..2 {
        let line = lines.next().expect("a sample").expect("read");
        samples.push(serde_json::from_str(&line).expect("json"));
    }
    job.run("live = [torch._stub.allocate(0, 256 << 20) for _ in range(4)]");
    assert_eq!(job.torch_stat("reserved_bytes.all.current"), reserved);
    for line in lines {
        samples.push(serde_json::from_str(&line.expect("read")).expect("json"));
    }
    assert!(monitor.wait().expect("exit").success());
    assert_eq!(samples.len(), 6);
    let first = process_of(&samples[0], job.pid);
    assert_eq!(first["context_source"], "observed", "{first}");
    assert_eq!(first["layers"]["context"], CONTEXT);
    let last = process_of(&samples[5], job.pid);
    assert_eq!(last["feed_status"]["state"], "fresh", "{last}");
    assert_eq!(last["context_source"], "observed");
    assert_eq!(last["layers"]["context"], CONTEXT);
    assert_eq!(last["layers"]["outside_pool"], OUTSIDE);
    assert_eq!(last["layers"]["live"], GIB);
    assert_layers_add_up(&samples[5], false);
}

#[test]
fn a_feed_on_a_mig_instance_is_matched_by_uuid_or_by_the_parents_pci_id() {
    let mig_uuid = "MIG-2f9a6c1d-4e8b-5a7f-b3c2-9d0e1f4a6b85";
    for (name, stub_uuid) in [
        ("mig-uuid", Some(mig_uuid.trim_start_matches("MIG-"))),
        ("parent-uuid", Some(STUB_UUID)),
        ("pci-only", None),
    ] {
        let scratch = Scratch::new(name);
        let device = json!([{ "uuid": stub_uuid, "pci_bus_id": STUB_PCI,
                              "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb", "total": 42144366592u64 }]);
        let mut job = Job::start(
            &scratch.feeds(),
            &[("STRATA_STUB_DEVICES", device.to_string())],
            false,
        );
        let (allocated, reserved) = warm_torch_job(&mut job);
        job.wait_for_socket(&scratch.feeds());
        let used = CONTEXT + reserved;
        let scenario = json!({"devices": [{
            "name": "NVIDIA A100-SXM4-80GB",
            "uuid": format!("GPU-{STUB_UUID}"),
            "pci_bus_id": STUB_PCI,
            "memory": { "total": 85899345920u64, "reserved": 1219493888u64, "used": used },
            "mig_mode": { "current": 1, "pending": 1 },
            "max_mig_devices": 7,
            "mig": [{
                "slot": 0, "uuid": mig_uuid, "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
                "gpu_instance_id": 1, "compute_instance_id": 0,
                "memory": { "total": 42144366592u64, "reserved": 0, "used": used },
                "compute_processes": [ { "pid": job.pid, "used": used } ]
            }]
        }]});
        let snap = &snapshot_fed(&scratch, &scenario, &[], &[job.pid]);
        let p = process_of(snap, job.pid);
        assert_eq!(p["device_uuid"], mig_uuid, "{name}");
        assert_eq!(p["feed_status"]["state"], "fresh", "{name}: {p}");
        assert_eq!(p["layers"]["live"], allocated, "{name}");
        let instance = &snap["gpus"][0]["mig"][0]["layers"];
        assert_eq!(
            instance["live"], allocated,
            "{name}: the instance's own layers"
        );
        assert!(
            !finding_kinds(snap).contains(&"feed_device_unlisted".to_string()),
            "{name}"
        );
        assert_layers_add_up(snap, false);
    }
}

#[test]
fn a_feed_for_a_device_its_pid_is_not_listed_on_is_a_finding() {
    let scratch = Scratch::new("unlisted");
    let devices = json!([
        { "uuid": STUB_UUID, "pci_bus_id": STUB_PCI, "name": "H100", "total": H100_TOTAL },
        { "uuid": "0b6e9d3c-71a4-4f08-8e25-c3d94a1b7f12", "pci_bus_id": "00000000:28:00.0", "name": "H100", "total": H100_TOTAL }
    ]);
    let mut job = Job::start(
        &scratch.feeds(),
        &[("STRATA_STUB_DEVICES", devices.to_string())],
        false,
    );
    warm_torch_job(&mut job);
    job.run("x = torch._stub.allocate(1, 64 << 20)");
    job.wait_for_socket(&scratch.feeds());
    let reserved = job.torch_stat("reserved_bytes.all.current");
    let mut scenario = one_gpu(
        vec![holder(job.pid, json!(CONTEXT + reserved))],
        json!(CONTEXT + reserved),
    );
    // NVML knows the second GPU, and lists the job only on the first.
    let mut second = scenario["devices"][0].clone();
    second["uuid"] = json!("GPU-0b6e9d3c-71a4-4f08-8e25-c3d94a1b7f12");
    second["pci_bus_id"] = json!("00000000:28:00.0");
    second["compute_processes"] = json!([]);
    second["memory"]["used"] = json!(0);
    scenario["devices"]
        .as_array_mut()
        .expect("devices")
        .push(second);
    // The finding needs the feed's reading of the second device paired with NVML's, which
    // comes a tick after its reading of the first on a loaded machine: snapshots are taken
    // until it is raised (60 s at most), and it must then say the right process and device.
    let unlisted = |snap: &Value| {
        snap["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .find(|f| f["kind"] == "feed_device_unlisted")
            .cloned()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let finding = loop {
        let last = snapshot_fed(&scratch, &scenario, &[], &[job.pid]);
        if let Some(f) = unlisted(&last) {
            break f;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no finding in {}",
            last["findings"]
        );
    };
    assert_eq!(finding["pid"], job.pid, "{finding}");
    assert_eq!(
        finding["device_uuid"], "GPU-0b6e9d3c-71a4-4f08-8e25-c3d94a1b7f12",
        "{finding}"
    );
}

#[test]
fn jax_and_cupy_jobs_are_matched_by_pci_id_and_split() {
    let scratch = Scratch::new("jax-cupy");
    let libcuda = fake_libcuda_dir();
    let fake_cuda = format!("{},0000:18:00.0,active", STUB_UUID.replace('-', ""));
    let env = |extra: &[(&str, String)]| -> Vec<(&'static str, String)> {
        let mut v = vec![
            ("LD_LIBRARY_PATH", libcuda.display().to_string()),
            ("STRATA_FAKE_CUDA", fake_cuda.clone()),
        ];
        for (k, val) in extra {
            let k: &'static str = Box::leak(k.to_string().into_boxed_str());
            v.push((k, val.clone()));
        }
        v
    };
    let mut jax = Job::start(&scratch.feeds(), &env(&[]), false);
    jax.run("import jax");
    jax.run("jax._stub.init()");
    jax.run("h = jax._stub.allocate(0, 3 << 30)");
    let mut cupy = Job::start(&scratch.feeds(), &env(&[]), false);
    cupy.run("import cupy");
    cupy.run("cupy._stub.init()");
    cupy.run("p = cupy._stub.allocate(0, 1 << 30)");
    jax.wait_for_socket(&scratch.feeds());
    cupy.wait_for_socket(&scratch.feeds());
    let jax_pool = jax
        .eval("jax.local_devices()[0].memory_stats()['pool_bytes']")
        .as_u64()
        .expect("pool_bytes");
    let cupy_pool = cupy
        .eval("cupy.get_default_memory_pool().total_bytes()")
        .as_u64()
        .expect("total_bytes");
    let jax_used = CONTEXT + jax_pool;
    let cupy_used = CONTEXT + cupy_pool;
    let scenario = one_gpu(
        vec![
            holder(jax.pid, json!(jax_used)),
            holder(cupy.pid, json!(cupy_used)),
        ],
        json!(jax_used + cupy_used),
    );
    let snap = &snapshot_fed(&scratch, &scenario, &[], &[jax.pid, cupy.pid]);
    let j = process_of(snap, jax.pid);
    assert_eq!(j["feed"]["framework"], "jax", "{j}");
    assert_eq!(j["feed_status"]["state"], "fresh", "{j}");
    assert_eq!(
        j["feed"]["reserved"], jax_pool,
        "reserved is pool_bytes (BFC)"
    );
    assert_eq!(j["layers"]["live"], 3 * GIB);
    assert!(j["layers"]["fragmented"].is_null(), "JAX reports no splits");
    let c = process_of(snap, cupy.pid);
    assert_eq!(c["feed"]["framework"], "cupy", "{c}");
    assert_eq!(c["feed_status"]["state"], "fresh", "{c}");
    assert_eq!(c["layers"]["live"], GIB);
    assert_layers_add_up(snap, false);
}

/// XLA's cuda_async allocator reports no pool (`reserved` null): the monitor keeps the device,
/// splits the live tensors out of NVML's figure and leaves the pool's layers unknown.
#[test]
fn a_jax_job_under_cuda_async_shows_live_with_the_rest_unknown() {
    let scratch = Scratch::new("cuda-async");
    let env = vec![
        ("LD_LIBRARY_PATH", fake_libcuda_dir().display().to_string()),
        (
            "STRATA_FAKE_CUDA",
            format!("{},0000:18:00.0,active", STUB_UUID.replace('-', "")),
        ),
        ("XLA_PYTHON_CLIENT_ALLOCATOR", "cuda_async".into()),
        ("STRATA_STUB_JAX_STATS", "async".into()),
    ];
    let mut jax = Job::start(&scratch.feeds(), &env, false);
    jax.run("import jax");
    jax.run("jax._stub.init()");
    jax.run("h = jax._stub.allocate(0, 3 << 30)");
    jax.steady();
    jax.wait_for_socket(&scratch.feeds());
    // The pool's cache and the context are in NVML's figure, and nobody reports them.
    let used = CONTEXT + 3 * GIB + 512 * MIB;
    let scenario = one_gpu(vec![holder(jax.pid, json!(used))], json!(used));
    let snap = &snapshot_fed(&scratch, &scenario, &[], &[jax.pid]);
    let p = process_of(snap, jax.pid);
    assert_eq!(p["feed_status"]["state"], "fresh", "{p}");
    assert_eq!(p["feed"]["backend"], "cuda_async");
    assert!(p["feed"]["reserved"].is_null(), "{p}");
    assert!(p["feed"]["unreported"]["reserved"]
        .as_str()
        .is_some_and(|r| r.contains("cuda_async")));
    let layers = &p["layers"];
    assert_eq!(layers["live"], 3 * GIB, "{p}");
    for unknown in ["cached", "fragmented", "context", "outside_pool"] {
        assert!(
            layers[unknown].is_null(),
            "{unknown} is unknown, never 0: {p}"
        );
    }
    assert_eq!(layers["unattributed"], used - 3 * GIB, "held, not split");
    assert!(p["context_source"].is_null());
    let gpu = &snap["gpus"][0];
    assert_eq!(gpu["layers"]["live"], 3 * GIB, "{gpu}");
    assert!(gpu["layers"]["cached"].is_null(), "{gpu}");
    assert_layers_add_up(snap, false);
    // The report says the same: reserved n/a with its reason, the rest not split.
    let report = std::process::Command::new(strata())
        .args(["snapshot", "--report", "--nvml-lib"])
        .arg(common::fake_nvml::fake_nvml_lib())
        .arg("--feed-dir")
        .arg(scratch.feeds())
        .env(
            common::fake_nvml::SCENARIO_ENV,
            scenario_file(&scratch, &scenario),
        )
        .output()
        .expect("strata runs");
    let report = String::from_utf8_lossy(&report.stdout);
    let row = |name: &str| {
        report
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no {name} row in {report}"))
            .to_string()
    };
    assert!(row("reserved").contains("| n/a |"), "{}", row("reserved"));
    assert!(
        row("not split").contains(&format!("({} B)", group(used - 3 * GIB))),
        "{}",
        row("not split")
    );
    assert!(
        report.contains("- reserved: not reported by XLA's cuda\\_async allocator"),
        "{report}"
    );
}

/// `1234567` as `1,234,567`, as the report writes exact bytes.
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A monitor that connects after warm-up still sees the warm-up, from the agent's backlog;
/// two monitors at once both get everything.
#[test]
fn a_late_monitor_receives_the_backlog_and_two_monitors_both_work() {
    let scratch = Scratch::new("late");
    let mut job = Job::start(&scratch.feeds(), &[], false);
    job.run("import torch");
    job.run("torch.cuda.init(); torch._stub.touch(0)");
    job.steady();
    // Warm-up: the pool grows in steps, one every few agent samples.
    job.run("warm = []");
    for _ in 0..5 {
        job.run("warm.append(torch._stub.allocate(0, 128 << 20)); time.sleep(0.25)");
    }
    job.wait_for_socket(&scratch.feeds());
    let reserved = job.torch_stat("reserved_bytes.all.current");
    let used = CONTEXT + reserved;
    let scenario = one_gpu(vec![holder(job.pid, json!(used))], json!(used));
    let path = scenario_file(&scratch, &scenario);
    let monitors: Vec<std::process::Child> = (0..2)
        .map(|_| {
            snapshot_command(&path, &scratch.feeds(), &[])
                .stdout(Stdio::piped())
                .spawn()
                .expect("strata")
        })
        .collect();
    for monitor in monitors {
        let output = monitor.wait_with_output().expect("monitor");
        assert!(output.status.success());
        let snap: Value = serde_json::from_slice(&output.stdout).expect("json");
        let feed = feed_of(&snap, job.pid);
        let earlier = feed["devices"][0]["earlier"].as_array().expect("earlier");
        let pools: Vec<u64> = earlier
            .iter()
            .filter_map(|s| s["reserved"].as_u64())
            .collect();
        assert!(
            pools.windows(2).all(|w| w[0] <= w[1]),
            "in order: {pools:?}"
        );
        assert!(
            pools.first() < pools.last(),
            "the warm-up is there: {pools:?}"
        );
        assert!(pools.contains(&0), "from before the first allocation");
        assert_eq!(process_of(&snap, job.pid)["feed_status"]["state"], "fresh");
    }
}

#[test]
fn cuda_malloc_async_and_expandable_segments_report_null_with_reasons() {
    let scratch = Scratch::new("backends");
    let mut asynchronous = Job::start(
        &scratch.feeds(),
        &[("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync".into())],
        false,
    );
    let mut expandable = Job::start(
        &scratch.feeds(),
        &[("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True".into())],
        false,
    );
    let mut processes = Vec::new();
    let mut total = 0;
    for job in [&mut asynchronous, &mut expandable] {
        let (_, reserved) = warm_torch_job(job);
        job.wait_for_socket(&scratch.feeds());
        processes.push(holder(job.pid, json!(CONTEXT + reserved)));
        total += CONTEXT + reserved;
    }
    let snap = &snapshot(&scratch, &one_gpu(processes, json!(total)), &[])[0];
    let a = process_of(snap, asynchronous.pid);
    assert_eq!(a["feed"]["backend"], "cudaMallocAsync", "{a}");
    assert!(a["feed"]["inactive_split"].is_null());
    assert!(a["feed"]["alloc_retries"].is_null());
    assert!(a["feed"]["unreported"]["inactive_split"]
        .as_str()
        .is_some_and(|r| r.contains("cudaMallocAsync")));
    assert!(
        a["layers"]["fragmented"].is_null(),
        "unknown is null, not 0"
    );
    let e = process_of(snap, expandable.pid);
    let hello = &feed_of(snap, expandable.pid)["hello"];
    assert_eq!(hello["settings"]["expandable_segments"], true, "{hello}");
    assert!(e["feed"]["inactive_split"].is_null(), "{e}");
    assert!(e["feed"]["unreported"]["inactive_split"]
        .as_str()
        .is_some_and(|r| r.contains("expandable")));
    assert_layers_add_up(snap, false);
}

#[test]
fn an_oom_reaches_the_monitor_with_its_numbers() {
    let scratch = Scratch::new("oom");
    let mut job = Job::start(&scratch.feeds(), &[], false);
    let (_, reserved) = warm_torch_job(&mut job);
    job.wait_for_socket(&scratch.feeds());
    job.run(
        r#"exec("import contextlib\nwith contextlib.suppress(torch.cuda.OutOfMemoryError): torch._stub.oom(0, 8 << 30)")"#,
    );
    job.steady();
    let used = CONTEXT + reserved;
    let snap = &snapshot(
        &scratch,
        &one_gpu(vec![holder(job.pid, json!(used))], json!(used)),
        &[],
    )[0];
    let feed = feed_of(snap, job.pid);
    let oom = feed["ooms"]
        .as_array()
        .and_then(|o| o.last().cloned())
        .unwrap_or_else(|| panic!("no oom in {feed}"));
    assert_eq!(oom["requested"], 8 * GIB);
    assert_eq!(oom["device_total"], H100_TOTAL);
    assert!(oom["device_free"].is_u64());
    assert_eq!(oom["stats"]["reserved"], reserved);
    assert_eq!(process_of(snap, job.pid)["feed"]["ooms"], 1);
}

use super::*;
use crate::fixtures::*;
use crate::pipeline::Pipeline;
use crate::sample::NodeSample;

fn owned(cells: &[Cell]) -> Vec<Cell<'static>> {
    cells
        .iter()
        .map(|c| match c {
            Cell::Text(t) => Cell::Text(t.as_ref().map(|t| Cow::Owned(t.to_string()))),
            Cell::Float(v) => Cell::Float(*v),
            Cell::Int(v) => Cell::Int(*v),
            Cell::Bool(v) => Cell::Bool(*v),
        })
        .collect()
}

fn devices(observed: &Observed) -> Vec<Vec<Cell<'static>>> {
    let mut rows = Vec::new();
    device_rows::<()>(observed, &mut |cells| {
        assert_eq!(cells.len(), DEVICES.columns.len());
        rows.push(owned(cells));
        Ok(())
    })
    .expect("rows");
    rows
}

fn processes(table: &mut ProcessRows, observed: &Observed) -> Vec<Vec<Cell<'static>>> {
    let mut rows = Vec::new();
    table
        .rows::<()>(observed, &mut |cells| {
            assert_eq!(cells.len(), PROCESSES.columns.len());
            rows.push(owned(cells));
            Ok(())
        })
        .expect("rows");
    rows
}

/// The cell of column `name` of `table` in `row`.
fn at<'r>(table: &Table, row: &'r [Cell<'static>], name: &str) -> &'r Cell<'static> {
    let i = table
        .columns
        .iter()
        .position(|c| c.name == name)
        .unwrap_or_else(|| panic!("no column {name}"));
    &row[i]
}

fn text_of(cell: &Cell) -> Option<String> {
    match cell {
        Cell::Text(t) => t.as_ref().map(|t| t.to_string()),
        other => panic!("not text: {other:?}"),
    }
}

fn int_of(cell: &Cell) -> Option<i64> {
    match cell {
        Cell::Int(v) => *v,
        other => panic!("not an integer: {other:?}"),
    }
}

fn float_of(cell: &Cell) -> f64 {
    match cell {
        Cell::Float(Some(v)) => *v,
        other => panic!("not a float: {other:?}"),
    }
}

#[test]
fn every_layer_of_every_device_is_a_row_and_unknown_is_null() {
    let mut sample = node();
    // GPU 0: 30 GiB used, 20 of them by a process without a feed: unattributed is that
    // process, other the 10 GiB no process holds, free the rest. Nothing is known of the
    // allocator's layers.
    sample.gpus.push(gpu(0, memory(80 * GIB, 30 * GIB)));
    sample
        .processes
        .push(process(7, "GPU-test-0", Some(20 * GIB)));
    // GPU 1 in MIG mode, one instance; GPU 2 lost.
    let mut mig_gpu = gpu(1, memory(80 * GIB, 5 * GIB));
    mig_gpu.mig_mode = Some(true);
    mig_gpu
        .mig
        .push(mig("MIG-test-1-0", "3g.40gb", memory(40 * GIB, 2 * GIB)));
    sample.gpus.push(mig_gpu);
    let mut lost = gpu(2, memory(80 * GIB, 0));
    lost.lost = true;
    lost.memory = None;
    sample.gpus.push(lost);
    let observed = Pipeline::new(None).ingest(sample);
    let rows = devices(&observed);
    assert_eq!(
        rows.len(),
        4 * Layer::ALL.len(),
        "3 GPUs and a MIG instance"
    );
    let bytes = |device: &str, layer: &str| {
        let row = rows
            .iter()
            .find(|r| {
                text_of(at(&DEVICES, r, "device_uuid")).as_deref() == Some(device)
                    && text_of(at(&DEVICES, r, "layer")).as_deref() == Some(layer)
            })
            .unwrap_or_else(|| panic!("no row of {device} {layer}"));
        int_of(at(&DEVICES, row, "bytes"))
    };
    let gib = |n: u64| Some((n * GIB) as i64);
    assert_eq!(bytes("GPU-test-0", "unattributed"), gib(20));
    assert_eq!(bytes("GPU-test-0", "other"), gib(10));
    assert_eq!(bytes("GPU-test-0", "free"), gib(50));
    for unknown in ["live", "fragmented", "cached", "outside_pool", "context"] {
        assert_eq!(bytes("GPU-test-0", unknown), None, "{unknown}: null, not 0");
    }
    // The MIG instance: its own rows, naming its GPU.
    assert_eq!(bytes("MIG-test-1-0", "free"), gib(38));
    let mig_row = rows
        .iter()
        .find(|r| text_of(at(&DEVICES, r, "device_uuid")).as_deref() == Some("MIG-test-1-0"))
        .expect("a MIG row");
    assert_eq!(
        text_of(at(&DEVICES, mig_row, "mig_uuid")).as_deref(),
        Some("MIG-test-1-0")
    );
    assert_eq!(
        text_of(at(&DEVICES, mig_row, "gpu_uuid")).as_deref(),
        Some("GPU-test-1")
    );
    assert_eq!(int_of(at(&DEVICES, mig_row, "gpu_index")), Some(1));
    // The lost GPU: every layer null, and why.
    for layer in Layer::ALL {
        assert_eq!(bytes("GPU-test-2", layer.name()), None);
    }
    let lost_row = rows
        .iter()
        .find(|r| text_of(at(&DEVICES, r, "device_uuid")).as_deref() == Some("GPU-test-2"))
        .expect("a lost GPU's row");
    assert!(
        text_of(at(&DEVICES, lost_row, "layers_gap")).is_some_and(|g| g.contains("lost")),
        "{lost_row:?}"
    );
    assert_eq!(text_of(at(&DEVICES, &rows[0], "layers_gap")), None);
    assert!(rows
        .iter()
        .all(|r| float_of(at(&DEVICES, r, "time_unix_s")) == 1000.0));
}

fn fed_sample(time: f64, latest: AllocatorStats, earlier: Vec<AllocatorStats>) -> NodeSample {
    let mut sample = node();
    sample.time = time;
    sample.gpus.push(gpu(0, memory(80 * GIB, 12 * GIB)));
    sample
        .processes
        .push(process(7, "GPU-test-0", Some(10 * GIB)));
    let mut quiet = process(8, "GPU-test-0", None);
    quiet.sm_util = None;
    sample.processes.push(quiet);
    sample.feeds.push(feed_on_gpu_0(7, latest, earlier));
    sample
}

fn reading(allocated_gib: u64, time: f64, step: Option<u64>) -> AllocatorStats {
    AllocatorStats {
        step,
        at_step_end: step.is_some(),
        ..stats(allocated_gib * GIB, 8 * GIB, time, time)
    }
}

#[test]
fn each_allocator_reading_is_a_row_once_at_the_time_the_agent_read_it() {
    let mut pipeline = Pipeline::new(None);
    let mut table = ProcessRows::default();
    let mut all = Vec::new();
    // The first sample brings a backlog; the second carries the same latest again (nothing
    // newer had come); the third a newer one.
    let backlog = vec![reading(1, 998.5, Some(10)), reading(2, 999.0, Some(11))];
    for sample in [
        fed_sample(1000.0, reading(3, 999.5, Some(12)), backlog),
        fed_sample(1001.0, reading(3, 999.5, Some(12)), Vec::new()),
        fed_sample(1002.0, reading(4, 1001.5, None), Vec::new()),
    ] {
        all.extend(processes(&mut table, &pipeline.ingest(sample)));
    }
    let series = |pid: i64, metric: &str| -> Vec<(f64, Option<i64>, Option<i64>)> {
        all.iter()
            .filter(|r| {
                int_of(at(&PROCESSES, r, "pid")) == Some(pid)
                    && text_of(at(&PROCESSES, r, "metric")).as_deref() == Some(metric)
            })
            .map(|r| {
                (
                    float_of(at(&PROCESSES, r, "time_unix_s")),
                    int_of(at(&PROCESSES, r, "value")),
                    int_of(at(&PROCESSES, r, "step")),
                )
            })
            .collect()
    };
    let gib = |n: i64| Some(n << 30);
    assert_eq!(
        series(7, "allocated"),
        vec![
            (998.5, gib(1), Some(10)),
            (999.0, gib(2), Some(11)),
            (999.5, gib(3), Some(12)),
            (1001.5, gib(4), None),
        ]
    );
    assert_eq!(series(7, "reserved").len(), 4);
    assert_eq!(
        series(7, "used"),
        vec![
            (1000.0, gib(10), None),
            (1001.0, gib(10), None),
            (1002.0, gib(10), None)
        ]
    );
    assert_eq!(series(7, "sm").len(), 3);
    // NVML's figures of a process without a feed: used is a row each sample, null where
    // NVML does not give it; SM utilisation never given has no rows; no allocator rows.
    assert_eq!(
        series(8, "used"),
        vec![
            (1000.0, None, None),
            (1001.0, None, None),
            (1002.0, None, None)
        ]
    );
    assert!(series(8, "sm").is_empty());
    assert!(series(8, "allocated").is_empty());
    for r in &all {
        let metric = text_of(at(&PROCESSES, r, "metric")).unwrap_or_default();
        let unit = text_of(at(&PROCESSES, r, "unit")).unwrap_or_default();
        let (_, want, _) = METRICS
            .iter()
            .find(|m| m.0 == metric)
            .expect("a metric of the list");
        assert_eq!(&unit, want, "{metric}");
        assert_eq!(
            int_of(at(&PROCESSES, r, "start_time_ticks")),
            Some(int_of(at(&PROCESSES, r, "pid")).unwrap_or(0) * 10)
        );
        let step_end = match at(&PROCESSES, r, "at_step_end") {
            Cell::Bool(b) => *b,
            other => panic!("{other:?}"),
        };
        let from_feed = !["used", "sm", "outside_pool"].contains(&metric.as_str());
        assert_eq!(step_end.is_some(), from_feed, "{metric}");
    }
}

#[test]
fn a_metric_once_known_and_then_unknown_is_a_null_row() {
    let mut pipeline = Pipeline::new(None);
    let mut table = ProcessRows::default();
    let mut sms = Vec::new();
    for (t, sm) in [(1000.0, None), (1001.0, Some(30)), (1002.0, None)] {
        let mut sample = node();
        sample.time = t;
        sample.gpus.push(gpu(0, memory(80 * GIB, 10 * GIB)));
        let mut p = process(9, "GPU-test-0", Some(10 * GIB));
        p.sm_util = sm;
        sample.processes.push(p);
        for row in processes(&mut table, &pipeline.ingest(sample)) {
            if text_of(at(&PROCESSES, &row, "metric")).as_deref() == Some("sm") {
                sms.push((
                    float_of(at(&PROCESSES, &row, "time_unix_s")),
                    int_of(at(&PROCESSES, &row, "value")),
                ));
            }
        }
    }
    assert_eq!(sms, vec![(1001.0, Some(30)), (1002.0, None)]);
}

#[test]
fn strings_from_the_recording_are_made_safe_and_evidence_stays_json() {
    let mut sample = node();
    let mut g = gpu(0, memory(80 * GIB, 10 * GIB));
    g.uuid = "GPU-\x1b[2Jevil".into();
    sample.gpus.push(g);
    let observed = Pipeline::new(None).ingest(sample);
    let rows = devices(&observed);
    let uuid = text_of(at(&DEVICES, &rows[0], "gpu_uuid")).unwrap_or_default();
    assert_eq!(uuid, "GPU-\u{FFFD}[2Jevil");

    let episode = Episode {
        kind: crate::detect::FindingKind::Climb,
        severity: crate::detect::Severity::Warning,
        device_uuid: Some("GPU-test-0".into()),
        pid: None,
        since: 100.0,
        until: 250.5,
        open: true,
        message: "python \u{202E}gpj.exe climbs".into(),
        evidence: crate::detect::Evidence::Untyped(
            serde_json::json!({"command": "a\u{202E}b\u{9b}c", "rate": 1.5}),
        ),
        first_message: "first".into(),
        first_evidence: crate::detect::Evidence::Untyped(serde_json::json!({"rate": 0.5})),
    };
    let row = owned(&finding_row(&episode));
    assert_eq!(row.len(), FINDINGS.columns.len());
    assert_eq!(
        text_of(at(&FINDINGS, &row, "kind")).as_deref(),
        Some("climb")
    );
    assert_eq!(
        text_of(at(&FINDINGS, &row, "severity")).as_deref(),
        Some("warning")
    );
    assert_eq!(int_of(at(&FINDINGS, &row, "pid")), None);
    assert_eq!(float_of(at(&FINDINGS, &row, "until_unix_s")), 250.5);
    assert_eq!(
        text_of(at(&FINDINGS, &row, "message")).as_deref(),
        Some("python \u{FFFD}gpj.exe climbs")
    );
    let evidence: serde_json::Value =
        serde_json::from_str(&text_of(at(&FINDINGS, &row, "evidence_json")).unwrap_or_default())
            .expect("evidence is JSON");
    assert_eq!(
        evidence,
        serde_json::json!({"command": "a\u{FFFD}b\u{FFFD}c", "rate": 1.5})
    );
    let first: serde_json::Value = serde_json::from_str(
        &text_of(at(&FINDINGS, &row, "first_evidence_json")).unwrap_or_default(),
    )
    .expect("JSON");
    assert_eq!(first, episode.first_evidence.to_json());
}

#[test]
fn a_figure_past_what_a_signed_64_bit_integer_holds_is_null_not_wrapped() {
    assert_eq!(int(Some(u64::MAX)), Cell::Int(None));
    assert_eq!(int(Some(1 << 62)), Cell::Int(Some(1 << 62)));
    assert_eq!(int(Some(0)), Cell::Int(Some(0)));
}

#[test]
fn every_metric_and_column_is_named_once() {
    for table in [&DEVICES, &PROCESSES, &FINDINGS] {
        let mut names: Vec<_> = table.columns.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), table.columns.len(), "{}", table.name);
    }
    let mut metrics: Vec<_> = METRICS.iter().map(|m| m.0).collect();
    metrics.sort_unstable();
    metrics.dedup();
    assert_eq!(metrics.len(), METRICS.len());
}

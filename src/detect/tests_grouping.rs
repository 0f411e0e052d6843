//! Findings that differ only in their device are one: unexplained usage on many devices, a
//! feed's many devices NVML does not list it on; and their `since` holds as devices come and
//! go.

use super::*;
use crate::fixtures::*;
use crate::pipeline::Pipeline;
use crate::sample::feed::{DeviceFeed, FeedDevice, FeedRecord, Hello};
use crate::sample::DeviceMemory;

/// `gpus` GPUs at `time`, each with `unheld` bytes in use that no process holds (NVML's
/// driver reservation reported).
fn unheld_on(gpus: &[u32], unheld: u64, time: f64) -> NodeSample {
    let mut s = node();
    s.time = time;
    for &g in gpus {
        s.gpus.push(gpu(
            g,
            DeviceMemory {
                total: 80 * GIB,
                used: unheld,
                free: 80 * GIB - 512 * MIB - unheld,
                driver_reserved: Some(512 * MIB),
            },
        ));
    }
    s
}

fn of(findings: &[Finding], kind: FindingKind) -> Vec<&Finding> {
    findings.iter().filter(|f| f.kind == kind).collect()
}

#[test]
fn the_same_unheld_memory_on_eight_gpus_is_one_finding_naming_them() {
    let all: Vec<u32> = (0..8).collect();
    let observed = Pipeline::new(None).ingest(unheld_on(&all, 512 * MIB, 1000.0));
    let unexplained = of(&observed.findings, FindingKind::UnexplainedUsage);
    assert_eq!(unexplained.len(), 1, "{unexplained:#?}");
    let f = unexplained[0];
    assert_eq!((f.device_uuid.as_deref(), f.pid), (None, None));
    assert!(
        f.message
            .starts_with("4.00 GiB in use on 8 devices is held by no listed process (512 MiB each on GPU 0, GPU 1,"),
        "{}",
        f.message
    );
    let json = f.evidence.to_json();
    let devices = json["devices"].as_array().expect("the devices");
    let uuids: Vec<&str> = devices.iter().filter_map(|d| d["uuid"].as_str()).collect();
    let want: Vec<String> = all.iter().map(|g| format!("GPU-test-{g}")).collect();
    assert_eq!(uuids, want);
    assert_eq!(f.evidence.to_json()["bytes"], 4 * GIB);
    assert_eq!(devices[3]["bytes"], 512 * MIB);
    // Different amounts: each named with its own.
    let mut s = unheld_on(&[0, 1], 512 * MIB, 1000.0);
    s.gpus[1].memory = Some(DeviceMemory {
        total: 80 * GIB,
        used: 2 * GIB,
        free: 78 * GIB - 512 * MIB,
        driver_reserved: Some(512 * MIB),
    });
    let observed = Pipeline::new(None).ingest(s);
    let f = of(&observed.findings, FindingKind::UnexplainedUsage)[0];
    assert!(
        f.message.contains("(GPU 0 512 MiB, GPU 1 2.00 GiB)"),
        "{}",
        f.message
    );
    // One device alone: its own finding, as ever.
    let observed = Pipeline::new(None).ingest(unheld_on(&[4], 512 * MIB, 1000.0));
    let f = of(&observed.findings, FindingKind::UnexplainedUsage)[0];
    assert_eq!(f.device_uuid.as_deref(), Some("GPU-test-4"));
}

/// Devices joining and leaving the group do not start it afresh: it is as old as the oldest
/// of its devices' own findings, down to a single one.
#[test]
fn a_group_keeps_its_since_as_devices_join_and_leave() {
    let mut pipeline = Pipeline::new(None);
    let mut at = |gpus: &[u32], t: f64| {
        let observed = pipeline.ingest(unheld_on(gpus, 512 * MIB, t));
        let found = of(&observed.findings, FindingKind::UnexplainedUsage);
        assert_eq!(found.len(), 1, "{found:#?}");
        (found[0].since, found[0].message.clone())
    };
    for t in 0..30 {
        at(&[0, 1, 2, 3, 4, 5, 6, 7], 1000.0 + f64::from(t));
    }
    // A ninth device: the group is as old as before.
    let (since, message) = at(&[0, 1, 2, 3, 4, 5, 6, 7, 8], 1030.0);
    assert_eq!(since, 1000.0);
    assert!(message.contains("on 9 devices"), "{message}");
    // One leaves, then another: still the same.
    assert_eq!(at(&[0, 1, 2, 3, 4, 6, 7, 8], 1031.0).0, 1000.0);
    assert_eq!(at(&[0, 1, 2, 3, 4, 6, 8], 1032.0).0, 1000.0);
    // Down to one device: its own finding, raised since it was.
    assert_eq!(at(&[3], 1033.0).0, 1000.0);
    // The newest alone is as old as it is.
    assert_eq!(at(&[8], 1034.0).0, 1030.0);
}

/// A feed whose hello names `devices` devices, the first of them GPU 0, where NVML lists its
/// process; NVML lists no other.
fn feed_of_many(devices: u32) -> NodeSample {
    let mut s = unheld_on(&[0], 0, 1000.0);
    s.processes.push(process(7, "GPU-test-0", Some(10 * GIB)));
    let uuid = |i: u32| {
        if i == 0 {
            "GPU-test-0".to_string()
        } else {
            format!("GPU-elsewhere-{i}")
        }
    };
    s.feeds.push(FeedRecord {
        hello: Some(
            Hello {
                pid: 7,
                devices: (0..devices)
                    .map(|i| FeedDevice {
                        index: i,
                        uuid: Some(uuid(i)),
                        ..FeedDevice::default()
                    })
                    .collect(),
                ..Hello::default()
            }
            .into(),
        ),
        devices: (0..devices)
            .map(|i| {
                let mut stats = stats(GIB, 8 * GIB, 990.0, 999.8);
                stats.index = i;
                DeviceFeed {
                    latest: stats,
                    earlier: Vec::new(),
                }
            })
            .collect(),
        ..feed_record(7, 0)
    });
    s
}

#[test]
fn a_hello_naming_64_devices_nvml_does_not_list_is_one_finding() {
    let observed = Pipeline::new(None).ingest(feed_of_many(64));
    assert_eq!(observed.attachment.unlisted.len(), 63);
    let unlisted = of(&observed.findings, FindingKind::FeedDeviceUnlisted);
    assert_eq!(unlisted.len(), 1, "{unlisted:#?}");
    let f = unlisted[0];
    assert_eq!((f.pid, f.device_uuid.as_deref()), (Some(7), None));
    assert!(
        f.message.starts_with(
            "feed of PID 7: 63 devices it reports are not where NVML lists the process (cuda:1, cuda:2,"
        ) && f.message.contains("and 55 more); the first: cuda:1 ("),
        "{}",
        f.message
    );
    let json = f.evidence.to_json();
    let devices = json["devices"].as_array().expect("the devices");
    assert_eq!(devices.len(), 63);
    assert_eq!(devices[62]["index"], 63);
    assert!(
        devices[62]["reason"].as_str().is_some_and(
            |r| r.contains("GPU-elsewhere-63") && r.contains("none of this node's GPUs")
        ),
        "{}",
        devices[62]
    );
    // One such device: its own finding, as ever.
    let observed = Pipeline::new(None).ingest(feed_of_many(2));
    let unlisted = of(&observed.findings, FindingKind::FeedDeviceUnlisted);
    assert_eq!(unlisted.len(), 1);
    assert_eq!(unlisted[0].evidence.to_json()["index"], 1);
}

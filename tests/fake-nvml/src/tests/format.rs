//! The scenario format: parsing, defaults, per-poll scripts and the checks on mistakes.

use super::{minimal, scenarios_dir};
use crate::codes::*;
use crate::scenario::{parse, Answer, Scripted};

#[test]
fn every_example_scenario_parses() {
    let mut seen = 0;
    for entry in std::fs::read_dir(scenarios_dir()).expect("tests/scenarios exists") {
        let path = entry.expect("readable dir entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let loaded = crate::scenario::load(&path);
            assert!(loaded.is_ok(), "{}: {:?}", path.display(), loaded.err());
            seen += 1;
        }
    }
    assert!(seen >= 7, "expected the 7 example scenarios, found {seen}");
}

#[test]
fn example_memory_adds_up_except_in_absurd() {
    for name in [
        "two_gpus",
        "mig",
        "not_supported",
        "unavailable_process_memory",
        "gpu_lost",
        "missing_pid",
    ] {
        let path = scenarios_dir().join(format!("{name}.json"));
        let scenario = crate::scenario::load(&path).expect("example scenario loads");
        for device in &scenario.devices {
            let memories =
                std::iter::once(&device.memory).chain(device.mig.iter().map(|m| &m.memory));
            for memory in memories {
                if let Answer::Value(memory) = memory {
                    for poll in 0..8 {
                        let at = memory.at(poll);
                        assert_eq!(
                            at.reserved + at.used + at.free,
                            at.total,
                            "{name} poll {poll}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn scripted_values_index_by_poll_and_clamp() {
    let script: Scripted<u64> = serde_json::from_str("[5, 6, 7]").expect("valid script");
    assert_eq!(
        (0..5).map(|p| script.at(p)).collect::<Vec<_>>(),
        [5, 6, 7, 7, 7]
    );
    let fixed: Scripted<u64> = serde_json::from_str("9").expect("valid value");
    assert_eq!(fixed.at(1000), 9);
    let with_null: Scripted<Option<u64>> = serde_json::from_str("[1, null]").expect("valid");
    assert_eq!((with_null.at(0), with_null.at(3)), (Some(1), None));
    let empty = serde_json::from_str::<Scripted<u64>>("[]");
    assert!(empty
        .err()
        .is_some_and(|e| e.to_string().contains("empty array")));
}

#[test]
fn error_names_replace_values() {
    let scenario = parse(&minimal(
        r#", "utilization": "NoPermission", "max_mig_devices": "NotSupported""#,
    ))
    .expect("valid scenario");
    let device = &scenario.devices[0];
    assert_eq!(device.utilization.get().err(), Some(ERROR_NO_PERMISSION));
    assert_eq!(device.max_mig_devices, Answer::Error(ERROR_NOT_SUPPORTED));
    // Omitted fields take the documented defaults.
    assert_eq!(device.mig_mode.get().err(), Some(ERROR_NOT_SUPPORTED));
    assert_eq!(device.memory.get().map(|m| m.at(0).free), Ok(90));
}

#[test]
fn mistakes_in_a_scenario_are_reported() {
    let cases = [
        (
            minimal(r#", "utilisation": {"gpu": 1, "memory": 1}"#),
            "unknown field `utilisation`",
        ),
        (minimal(r#", "utilization": "Sometimes""#), "invalid type"),
        (
            minimal(
                r#", "max_mig_devices": 2, "mig": [{"slot": 2, "uuid": "MIG-1", "name": "m",
            "gpu_instance_id": 1, "compute_instance_id": 0, "memory": {"total": 1, "used": 0}}]"#,
            ),
            "slot must be below",
        ),
        (
            minimal(r#", "compute_processes": [{"pid": 1, "used": 1, "polls": [3, 1]}]"#),
            "ends before it starts",
        ),
        (minimal(r#", "pci_bus_id": "18:00.0""#), "pci_bus_id"),
        (
            r#"{"devices": [{"name": "a", "uuid": "GPU-1", "memory": {"total": 1, "used": 0}},
            {"name": "b", "uuid": "GPU-1", "memory": {"total": 1, "used": 0}}]}"#
                .to_owned(),
            "used twice",
        ),
    ];
    for (text, expected) in cases {
        let error = parse(&text).err().unwrap_or_default();
        assert!(error.contains(expected), "{expected:?} not in {error:?}");
    }
}

#[test]
fn process_windows_are_half_open() {
    let scenario = parse(&minimal(
        r#", "compute_processes": [{"pid": 1, "used": null, "polls": [1, 3]},
        {"pid": 2, "used": 5, "gpu_instance_id": 3}]"#,
    ))
    .expect("valid scenario");
    let list = scenario.devices[0].compute_processes.get().expect("a list");
    let pids = |poll| {
        crate::scenario::processes_at(list, poll, NO_INSTANCE_ID, 0)
            .iter()
            .map(|p| p.pid)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        (pids(0), pids(1), pids(2), pids(3)),
        (vec![2], vec![1, 2], vec![1, 2], vec![2])
    );
    let at1 = crate::scenario::processes_at(list, 1, NO_INSTANCE_ID, 0);
    assert_eq!(at1[0].used_bytes, VALUE_NOT_AVAILABLE_U64);
    assert_eq!((at1[1].gpu_instance_id, at1[1].compute_instance_id), (3, 0));
}

//! Every kind's evidence: written as the JSON has always been (keys by name), each field with
//! a row and a unit, read back as itself; evidence of another strata kept whole.

use super::examples::{examples, NOW};
use super::units::*;
use super::*;
use crate::accounting::Gap;
use serde_json::json;

/// Which shape a piece of evidence is: a match with no wildcard, so that a shape added fails
/// to compile here until [`examples`] has it.
fn shape(e: &Evidence) -> usize {
    use Evidence as E;
    match e {
        E::ZombieContext(_) => 0,
        E::ZombieContexts(_) => 1,
        E::NotVisibleHolder(_) => 2,
        E::NotVisibleHolders(_) => 3,
        E::UnattributedMemory(_) => 4,
        E::UnexplainedUsage(_) => 5,
        E::UnexplainedUsages(_) => 6,
        E::StaleFeed(_) => 7,
        E::InconsistentFeed(_) => 8,
        E::GpuLost(_) => 9,
        E::InconsistentCounters(_) => 10,
        E::RefusedFeed(_) => 11,
        E::FeedBadInput(_) => 12,
        E::FeedDeviceUnlisted(_) => 13,
        E::FeedDevicesUnlisted(_) => 14,
        E::FeedDirCutShort(_) => 15,
        E::FeedDirsCutShort(_) => 16,
        E::SuspiciousFeedEntry(_) => 17,
        E::SuspiciousFeedEntries(_) => 18,
        E::NvmlProblem(_) => 19,
        E::Climb(_) => 20,
        E::Fragmentation(_) => 21,
        E::AllocRetries(_) => 22,
        E::Oom(_) => 23,
        E::Capacity(_) => 24,
        E::IdleHolder(_) => 25,
        E::OomForecast(_) => 26,
        E::WarmUp(_) => 27,
        E::WarmUpForecast(_) => 28,
        E::WarmingUp(_) => 29,
        E::Untyped(_) => 30,
    }
}

#[test]
fn the_examples_cover_every_shape_and_kind() {
    let mut shapes: Vec<usize> = examples().iter().map(shape).collect();
    shapes.sort_unstable();
    shapes.dedup();
    assert_eq!(shapes, (0..30).collect::<Vec<_>>(), "every typed shape");
    let mut kinds: Vec<usize> = examples()
        .iter()
        .filter_map(Evidence::kind)
        .map(kind_index)
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    assert_eq!(kinds, (0..23).collect::<Vec<_>>(), "every kind");
}

/// Which kind a finding is: a match with no wildcard, so that a kind added fails to compile
/// here until it has evidence.
fn kind_index(kind: FindingKind) -> usize {
    use FindingKind as K;
    match kind {
        K::ZombieContext => 0,
        K::NotVisibleHolder => 1,
        K::UnattributedMemory => 2,
        K::UnexplainedUsage => 3,
        K::StaleFeed => 4,
        K::InconsistentFeed => 5,
        K::GpuLost => 6,
        K::InconsistentCounters => 7,
        K::RefusedFeed => 8,
        K::FeedBadInput => 9,
        K::FeedDeviceUnlisted => 10,
        K::FeedDirCutShort => 11,
        K::SuspiciousFeedEntry => 12,
        K::NvmlProblem => 13,
        K::Climb => 14,
        K::Fragmentation => 15,
        K::AllocRetries => 16,
        K::Oom => 17,
        K::Capacity => 18,
        K::IdleHolder => 19,
        K::OomForecast => 20,
        K::WarmUp => 21,
        K::WarmingUp => 22,
    }
}

/// The JSON as it has always been written: each object's keys in the order of their names
/// (serde_json's map), which a struct writes in the order its fields are declared.
#[test]
fn evidence_is_written_with_its_keys_in_order() {
    for e in examples() {
        let direct = serde_json::to_string(&e).expect("written");
        let through_map = serde_json::to_string(&e.to_json()).expect("written");
        assert_eq!(direct, through_map, "{:?}: keys out of order", e.kind());
    }
}

/// The names of a JSON object's keys, and of the objects in its lists, nested.
fn keys(json: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for (key, value) in json.as_object().into_iter().flatten() {
        out.push(key.clone());
        for item in value.as_array().into_iter().flatten() {
            out.extend(keys(item).into_iter().map(|k| format!("{key}[].{k}")));
        }
    }
    out
}

/// The names of the rows, and of the fields of records in lists, nested.
fn names(fields: &Fields) -> Vec<String> {
    let mut out = Vec::new();
    for (name, figure) in fields {
        out.push(name.to_string());
        let records: Vec<Fields> = match figure {
            Figure::Records(items) => items.clone(),
            Figure::Holders(items) => items.iter().map(Holder::fields).collect(),
            _ => Vec::new(),
        };
        for record in &records {
            out.extend(names(record).into_iter().map(|n| format!("{name}[].{n}")));
        }
    }
    out
}

/// The point of typed evidence: every field written is a row with a unit of its own type,
/// none left for a view to guess, in every shape of every kind.
#[test]
fn every_field_written_is_a_row_with_its_unit() {
    for e in examples() {
        let json = e.to_json();
        assert_eq!(names(&e.fields()), keys(&json), "{json}");
        fn untyped(fields: &Fields) -> bool {
            fields.iter().any(|(_, f)| match f {
                Figure::Json(_) => true,
                Figure::Records(items) => items.iter().any(untyped),
                Figure::Holders(items) => items.iter().any(|h| untyped(&h.fields())),
                _ => false,
            })
        }
        assert!(!untyped(&e.fields()), "{json}");
    }
}

/// A unit that a field's name promises (the JSON's naming rules) is the unit its type has: a
/// byte field typed as a bare count would be shown raw.
#[test]
fn a_fields_name_and_its_unit_agree() {
    fn check(name: &str, figure: &Figure) {
        let unit = |ok: bool, what: &str| assert!(ok, "{name} is {what}, typed {figure:?}");
        let figure = match figure {
            Figure::List(items) => match items.first() {
                Some(first) => first,
                None => return,
            },
            other => other,
        };
        if name.ends_with("bytes_per_sec") {
            unit(matches!(figure, Figure::BytesPerSec(_)), "bytes a second");
        } else if name.ends_with("bytes_per_step") {
            unit(matches!(figure, Figure::BytesPerStep(_)), "bytes a step");
        } else if name.ends_with("_bytes") || name == "bytes" {
            let bytes = matches!(figure, Figure::Bytes(_) | Figure::SignedBytes(_));
            unit(bytes || *figure == Figure::Unknown, "bytes");
        } else if name.ends_with("_secs") || name == "age" {
            unit(matches!(figure, Figure::Secs(_)), "seconds");
        } else if name.ends_with("_pct") {
            unit(matches!(figure, Figure::Pct(_)), "a percentage");
        } else if name == "share" || name.starts_with("share_") {
            unit(
                matches!(figure, Figure::Share(_) | Figure::Unknown),
                "a share",
            );
        } else if name.ends_with("_step") || name.ends_with("steps") {
            unit(
                matches!(figure, Figure::Steps(_) | Figure::Unknown),
                "steps",
            );
        } else if name.ends_with("_per_min") {
            unit(
                matches!(figure, Figure::MibPerMin(_) | Figure::PerMin(_)),
                "a rate",
            );
        } else if ["start", "time", "oom_at", "warm_up_end_time"].contains(&name) {
            unit(
                matches!(figure, Figure::Time(_) | Figure::Unknown),
                "an instant",
            );
        } else if ["pid", "pids", "ppid", "owner", "owners", "index"].contains(&name) {
            unit(
                matches!(figure, Figure::Id(_) | Figure::Unknown),
                "an identifier",
            );
        }
        let bytes_named = crate::layers::Layer::ALL.iter().any(|l| l.name() == name)
            || [
                "used",
                "total",
                "reserved",
                "allocated",
                "requested",
                "holdable",
            ]
            .contains(&name)
            || name.starts_with("device_free")
            || name.starts_with("device_total")
            || name.starts_with("peak_live")
            || name.starts_with("largest_free_block")
            || name.starts_with("inactive_split");
        if bytes_named {
            let bytes = matches!(figure, Figure::Bytes(_) | Figure::Unknown);
            unit(bytes, "bytes");
        }
    }
    fn walk(fields: &Fields) {
        for (name, figure) in fields {
            check(name, figure);
            match figure {
                Figure::Records(items) => items.iter().for_each(walk),
                Figure::Holders(items) => items.iter().for_each(|h| walk(&h.fields())),
                _ => {}
            }
        }
    }
    for e in examples() {
        walk(&e.fields());
    }
}

#[test]
fn every_example_reads_back_as_itself() {
    for e in examples() {
        let kind = e.kind().expect("typed");
        let json = e.to_json();
        assert_eq!(Evidence::read(kind, json.clone()), e, "{json}");
        let text = serde_json::to_string(&e).expect("written");
        let again: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(Evidence::read(kind, again), e, "{text}");
    }
}

/// Evidence of another strata (a field added, one renamed, a number of another type) is kept
/// whole, written back as it was read and shown field by field.
#[test]
fn evidence_of_another_version_is_kept_whole() {
    for (kind, json) in [
        (FindingKind::StaleFeed, json!({ "age": 12.5, "since": 3 })),
        (FindingKind::StaleFeed, json!({ "age_secs": 12.5 })),
        (FindingKind::StaleFeed, json!({ "age": 12 })),
        (FindingKind::GpuLost, json!(null)),
        (FindingKind::Climb, json!({ "cause": "live" })),
    ] {
        let e = Evidence::read(kind, json.clone());
        assert_eq!(e, Evidence::Untyped(json.clone()));
        assert_eq!(e.to_json(), json);
        let rows: Vec<&str> = e.fields().iter().map(|(name, _)| *name).collect();
        let expect: Vec<&str> = json
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(rows, expect);
        assert_eq!(e.kind(), None);
    }
}

/// A finding read back takes its evidence's type from its kind.
#[test]
fn a_finding_reads_back_with_typed_evidence() {
    let e = examples().remove(0);
    let finding = crate::detect::Finding {
        kind: FindingKind::ZombieContext,
        severity: crate::detect::Severity::Critical,
        device_uuid: Some("GPU-a".into()),
        pid: Some(4021),
        since: NOW,
        message: "PID 4021 is defunct".into(),
        evidence: e,
    };
    let text = serde_json::to_string(&finding).expect("written");
    let back: crate::detect::Finding = serde_json::from_str(&text).expect("read");
    assert_eq!(back, finding);
    let without: crate::detect::Finding = serde_json::from_str(
        r#"{"kind":"gpu_lost","severity":"critical","device_uuid":null,"pid":null,"since":1.0,"message":"m"}"#,
    )
    .expect("read");
    assert_eq!(without.evidence, Evidence::Untyped(serde_json::Value::Null));
}

/// An inconsistency's figures are the gap's own, as its JSON names them.
#[test]
fn a_contradiction_is_written_as_its_gap() {
    for gap in [
        Gap::FreeExceedsTotal { total: 8, free: 9 },
        Gap::UsedExceedsTotal { total: 8, used: 9 },
        Gap::ReservedExceedsTotal {
            total: 8,
            reserved: 9,
        },
        Gap::MemoryDoesNotAddUp {
            total: 8,
            reserved: 1,
            used: 2,
            free: 3,
        },
        Gap::ImplausibleProcess {
            pid: u32::MAX,
            used: Some(7),
        },
        Gap::ImplausibleProcess { pid: 0, used: None },
        Gap::ProcessesExceedOccupied {
            attributed: 9,
            occupied: 8,
        },
        Gap::Lost,
        Gap::MemoryUnknown,
    ] {
        let e = Evidence::InconsistentCounters(Contradiction::from(&gap));
        assert_eq!(e.to_json(), json!(gap), "{gap:?}");
        assert_eq!(
            Evidence::read(FindingKind::InconsistentCounters, json!(gap)),
            e
        );
    }
}

/// A float that is not finite is written `null`, as it always was, and compares as `null`.
#[test]
fn a_figure_that_is_not_finite_is_null() {
    let stale = Evidence::StaleFeed(Stale {
        age: Secs(f64::NAN),
    });
    assert_eq!(stale.to_json(), json!({ "age": null }));
    assert_eq!(
        stale,
        Evidence::StaleFeed(Stale {
            age: Secs(f64::INFINITY)
        })
    );
}

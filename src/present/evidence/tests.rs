use super::*;
use crate::detect::evidence::examples::examples;
use crate::detect::evidence::units::*;
use crate::detect::evidence::{Climb, Holding, Oom, Refused, UnexplainedDevice, UnexplainedGroup};
use serde_json::json;

const NOW: f64 = 1_767_258_905.0;

fn find(rows: &[(usize, String, String)], name: &str) -> String {
    rows.iter()
        .find(|r| r.1 == name)
        .map(|r| r.2.clone())
        .unwrap_or_else(|| panic!("{name} missing: {rows:?}"))
}

#[test]
fn every_unit_is_named_beside_its_value() {
    let climb = Evidence::Climb(Climb {
        bytes_per_step: IfKnown(Some(BytesPerStep(12_582_912))),
        cause: "live".into(),
        duration_secs: Secs(800.0),
        from_bytes: Bytes(7_091_363_840),
        grew_most_at: IfKnown(Some("train.py:118 in evaluate".into())),
        grew_most_bytes: IfKnown(Some(Bytes(639_631_360))),
        grew_most_window_secs: IfKnown(Some(Secs(60.0))),
        rate_mib_per_min: MibPerMin(635.8),
        series: "allocated".into(),
        start: Time(1_767_258_105.0),
        steps: IfKnown(Some(Steps(340))),
        to_bytes: Bytes(7_591_363_840),
        warm_up_end: IfKnown(None),
        warm_up_end_step: IfKnown(Some(Steps(40))),
        warm_up_end_time: IfKnown(None),
        window_secs: Secs(f64::NAN),
    });
    let shown = rows(&climb, NOW);
    assert_eq!(find(&shown, "cause"), "live");
    assert_eq!(find(&shown, "rate_mib_per_min"), "+635.8 MiB/min");
    assert_eq!(find(&shown, "start"), "09:01:45 UTC (13m20s ago)");
    assert_eq!(find(&shown, "duration_secs"), "13m20s (800 s)");
    assert_eq!(find(&shown, "from_bytes"), "6.60 GiB (7,091,363,840 B)");
    assert_eq!(find(&shown, "bytes_per_step"), "12.0 MiB/step (12582912 B)");
    assert_eq!(find(&shown, "steps"), "340 steps");
    assert_eq!(find(&shown, "warm_up_end_step"), "40 steps");
    assert_eq!(find(&shown, "window_secs"), "n/a", "not a number: null");
    assert!(shown.iter().all(|r| r.1 != "warm_up_end"), "absent: no row");
    assert_eq!(find(&shown, "grew_most_at"), "train.py:118 in evaluate");
    assert_eq!(find(&shown, "grew_most_bytes"), "610 MiB (639,631,360 B)");

    let oom = Evidence::Oom(Oom {
        allocated: Bytes(2048),
        class: "capacity".into(),
        could_have_bytes: None,
        device_free: None,
        device_total: None,
        expandable_segments: IfKnown(None),
        framework: IfKnown(None),
        inactive_split: None,
        largest_free_block: None,
        needed_bytes: None,
        ooms_in_window: None,
        ooms_total: Some(Count(3)),
        pinned_live: IfKnown(None),
        pinned_reserved: IfKnown(None),
        pinned_segments: IfKnown(None),
        requested: Some(Bytes(2_684_354_560)),
        reserved: None,
        segment_map_time: IfKnown(None),
        time: None,
    });
    let shown = rows(&oom, NOW);
    assert_eq!(find(&shown, "requested"), "2.50 GiB (2,684,354,560 B)");
    assert_eq!(find(&shown, "ooms_total"), "3");
    assert_eq!(find(&shown, "time"), "n/a");

    let figure = |f: Figure| value(&f, NOW);
    assert_eq!(figure(Figure::Share(0.254)), "25.4%");
    assert_eq!(figure(Figure::PerMin(394.2)), "394.2 a minute");
    assert_eq!(figure(Figure::Pct(0.5)), "0.5%");
    assert_eq!(
        figure(Figure::BytesPerSec(1_048_576.0)),
        "1.00 MiB/s (1048576 B/s)"
    );
    assert_eq!(
        figure(Figure::BytesPerStep(-4096)),
        "-4.00 KiB/step (-4096 B)"
    );
    assert_eq!(figure(Figure::SignedBytes(2048)), "2.00 KiB (2,048 B)");
    assert_eq!(figure(Figure::SignedBytes(-2048)), "-2048");
    assert_eq!(figure(Figure::Time(NOW + 60.0)), "09:16:05 UTC (in 1m00s)");
    assert_eq!(
        figure(Figure::List(vec![Figure::Id(38811), Figure::Id(4021)])),
        "38811, 4021"
    );
    assert_eq!(figure(Figure::List(Vec::new())), "none");
}

#[test]
fn a_device_files_holders_read_one_a_line() {
    let holder = |pid: u32, user: &str, command: &str, parent: Option<&str>, state: &str| {
        crate::detect::evidence::Holder {
            command: Some(command.into()),
            listed: state == "Z",
            parent_command: parent.map(str::to_string),
            pid: Pid(pid),
            ppid: Some(Pid(1)),
            start_time: Some(Ticks(25_380_000)),
            state: Some(state.into()),
            user: Some(user.into()),
        }
    };
    let zombie = Evidence::ZombieContext(Holding {
        device_file: IfKnown(Some("/dev/nvidia2".into())),
        holders: IfKnown(Some(vec![
            holder(31342, "dave", "python pretrain.py", Some("/sbin/init"), "S"),
            holder(52010, "bob", "python eval.py", None, "Z"),
        ])),
        used: Some(Bytes(2048)),
    });
    let shown = rows(&zombie, NOW);
    let at = |name: &str| shown.iter().position(|r| r.1 == name).unwrap_or(usize::MAX);
    assert_eq!(shown[at("holders")].2, "2");
    assert_eq!(
        shown[at("holders") + 1],
        (
            1,
            "PID 31342".to_string(),
            "dave · python pretrain.py · no context of its own · child of 1 /sbin/init".to_string()
        )
    );
    assert_eq!(
        shown[at("holders") + 2].2,
        "bob · python eval.py · defunct · has a context of its own · child of 1"
    );

    let group = Evidence::UnexplainedUsages(UnexplainedGroup {
        bytes: Bytes(2048),
        devices: vec![UnexplainedDevice {
            bytes: Bytes(2048),
            device: "GPU 0".into(),
            other: None,
            uuid: Some("GPU-a".into()),
        }],
    });
    let shown = rows(&group, NOW);
    assert_eq!(
        shown[2],
        (
            1,
            String::new(),
            "bytes 2.00 KiB (2,048 B) · device GPU 0 · uuid GPU-a".to_string()
        )
    );
}

#[test]
fn strings_from_outside_are_defused() {
    let refused = Evidence::RefusedFeed(Refused {
        socket: "/tmp/\u{1b}[2Jx.sock".into(),
    });
    assert_eq!(rows(&refused, NOW)[0].2, "/tmp/\u{fffd}[2Jx.sock");
    let untyped = Evidence::Untyped(json!({ "\u{1b}[2J": "\u{1b}[2J" }));
    assert_eq!(
        rows(&untyped, NOW)[0],
        (0, "\u{fffd}[2J".to_string(), "\u{fffd}[2J".to_string())
    );
}

/// Evidence read back in no typed shape: every field as it was read, nested objects indented,
/// numbers without a unit (none is guessed from a name).
#[test]
fn untyped_evidence_is_shown_as_read() {
    let e = Evidence::Untyped(json!({
        "bytes": 2048,
        "gap": { "total": 1024 },
        "holders": [ { "pid": 7, "used": 2048 } ],
        "note": null,
    }));
    assert_eq!(
        rows(&e, NOW),
        vec![
            (0, "bytes".to_string(), "2048".to_string()),
            (0, "gap".to_string(), String::new()),
            (1, "total".to_string(), "1024".to_string()),
            (0, "holders".to_string(), "1".to_string()),
            (1, "PID 7".to_string(), "used 2048".to_string()),
            (0, "note".to_string(), "n/a".to_string()),
        ]
    );
}

/// Every shape of every kind as the evidence view shows it, field by field.
#[test]
fn every_kinds_evidence_as_shown() {
    let mut text = String::new();
    for e in examples() {
        let kind = e.kind().map_or_else(String::new, |k| k.name());
        text.push_str(&format!("{kind}\n"));
        for (depth, name, value) in rows(&e, NOW) {
            text.push_str(&format!("{}{name}: {value}\n", "  ".repeat(depth + 1)));
        }
    }
    insta::assert_snapshot!("every_kinds_evidence", text);
}

/// The findings list's line: the advice's first sentence beside the message where the whole of
/// both fits, the message alone (cut) where not; never half a sentence of advice.
#[test]
fn a_finding_line_adds_the_first_sentence_of_advice_where_it_fits() {
    use crate::detect::{Finding, FindingKind, Severity};
    use unicode_width::UnicodeWidthStr;
    let e = Evidence::StaleFeed(crate::detect::evidence::Stale { age: Secs(12.0) });
    let finding = Finding {
        kind: FindingKind::StaleFeed,
        severity: Severity::Warning,
        device_uuid: None,
        pid: Some(4021),
        since: NOW,
        message: "feed of PID 4021 is 12s old".into(),
        evidence: e,
    };
    let first = finding.advice()[0].clone();
    let whole = format!("feed of PID 4021 is 12s old → {first}");
    assert_eq!(finding_line(&finding, 200), whole);
    assert_eq!(finding_line(&finding, whole.width()), whole);
    let short = finding_line(&finding, whole.width() - 1);
    assert_eq!(
        short, "feed of PID 4021 is 12s old",
        "no advice cut in half"
    );
    assert_eq!(finding_line(&finding, 10), "feed of P…");
    // A message from outside is made safe, with or without the advice.
    let hostile = Finding {
        message: "feed \u{1b}[2J of PID 4021".into(),
        ..finding
    };
    assert!(!finding_line(&hostile, 200).contains('\u{1b}'));
    assert!(!finding_line(&hostile, 12).contains('\u{1b}'));
}

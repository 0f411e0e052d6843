//! The scoring itself (`tests/common/corpus`), on hand-written findings: a module of
//! `tests/corpus.rs`.

use crate::common::corpus::*;

const T0: f64 = 1_767_258_000.0;
const GPU: &str = "GPU-aaaa";

fn labels(normal: bool, expect: Vec<Expected>) -> Labels {
    Labels {
        description: String::new(),
        minutes: 40.0,
        expect,
        normal,
        layers: None,
        never: Vec::new(),
    }
}

fn climb(cause: &str, pid: Option<u32>, start_min: f64, rate: f64) -> Expected {
    Expected {
        kind: "climb".into(),
        cause: Some(cause.into()),
        class: None,
        pid,
        device_uuid: Some(GPU.into()),
        start: T0 + 60.0 * start_min,
        rate_mib_per_min: Some(rate),
        bytes_per_step: None,
        step_secs: None,
        oom_at: None,
        evidence: None,
    }
}

fn event(kind: &str, pid: Option<u32>, start_min: f64) -> Expected {
    Expected {
        kind: kind.into(),
        cause: None,
        class: None,
        pid,
        device_uuid: Some(GPU.into()),
        start: T0 + 60.0 * start_min,
        rate_mib_per_min: None,
        bytes_per_step: None,
        step_secs: None,
        oom_at: None,
        evidence: None,
    }
}

/// A finding as `strata analyze --json` would print it.
fn finding(kind: &str, pid: Option<u32>, since_min: f64, evidence: &str) -> String {
    let pid = pid.map_or("null".to_string(), |p| p.to_string());
    format!(
        r#"{{"kind":"{kind}","severity":"warning","device_uuid":"{GPU}","pid":{pid},"since":{},"until":null,"message":"m","evidence":{evidence}}}"#,
        T0 + 60.0 * since_min
    )
}

fn findings(list: &[String]) -> Vec<Flagged> {
    parse_findings(&format!(r#"{{"findings":[{}]}}"#, list.join(","))).expect("parses")
}

#[test]
fn a_climb_with_its_cause_within_the_deadline_is_on_time() {
    let l = labels(false, vec![climb("live", Some(7), 10.0, 85.0)]);
    let f = findings(&[finding(
        "climb",
        Some(7),
        13.5,
        r#"{"cause":"live","rate_mib_per_min":83.0}"#,
    )]);
    let s = score("t", T0, &l, &f);
    assert!(s.outcomes[0].on_time());
    assert_eq!(s.outcomes[0].time_to_flag(), Some(210.0));
    assert!(failures(&s).is_empty());
    let t = totals(&[s]);
    assert_eq!(
        (t.climbs_true, t.climbs_raised, t.climbs_on_time),
        (1, 1, 1)
    );
    assert_eq!(t.mean_time_to_flag, Some(210.0));
}

#[test]
fn a_climb_with_another_cause_is_a_false_flag_and_a_miss() {
    let l = labels(false, vec![climb("live", Some(7), 10.0, 85.0)]);
    let f = findings(&[finding("climb", Some(7), 12.0, r#"{"cause":"cached"}"#)]);
    let s = score("t", T0, &l, &f);
    assert!(s.outcomes[0].flagged.is_none());
    assert_eq!(s.climbs, vec![(f[0].clone(), false)]);
    assert_eq!(failures(&s).len(), 1);
    assert_eq!(totals(&[s]).precision(), Some(0.0));
}

#[test]
fn deadlines_are_10_minutes_from_50_mib_per_min_and_20_below() {
    let fast = labels(false, vec![climb("live", Some(7), 10.0, 50.0)]);
    let slow = labels(false, vec![climb("live", Some(7), 10.0, 49.0)]);
    let at_15 = findings(&[finding("climb", Some(7), 25.0, r#"{"cause":"live"}"#)]);
    let fast = score("fast", T0, &fast, &at_15);
    let slow = score("slow", T0, &slow, &at_15);
    assert!(!fast.outcomes[0].on_time(), "15 min is past 10");
    assert!(slow.outcomes[0].on_time(), "15 min is within 20");
    let late = failures(&fast);
    assert_eq!(late.len(), 1);
    assert!(late[0].contains("past its 10m00s deadline"), "{late:?}");
    let t = totals(&[fast, slow]);
    assert_eq!(
        (t.climbs_on_time, t.climbs_flagged, t.climbs_expected),
        (1, 2, 2)
    );
    assert_eq!(t.climb_recall(), Some(0.5));
}

#[test]
fn a_flag_raised_well_before_the_start_is_not_the_event() {
    let l = labels(false, vec![climb("live", Some(7), 10.0, 85.0)]);
    let early = findings(&[finding("climb", Some(7), 8.9, r#"{"cause":"live"}"#)]);
    assert!(score("t", T0, &l, &early).outcomes[0].flagged.is_none());
    let close = findings(&[finding("climb", Some(7), 9.5, r#"{"cause":"live"}"#)]);
    assert!(score("t", T0, &l, &close).outcomes[0].on_time());
}

#[test]
fn pid_and_device_must_agree_and_a_label_without_a_device_takes_any() {
    let mut e = climb("no_process", None, 5.0, 100.0);
    let with_pid = findings(&[finding("climb", Some(3), 7.0, r#"{"cause":"no_process"}"#)]);
    let l = labels(false, vec![e.clone()]);
    assert!(score("t", T0, &l, &with_pid).outcomes[0].flagged.is_none());
    let other_gpu = findings(&[
        finding("climb", None, 7.0, r#"{"cause":"no_process"}"#).replace(GPU, "GPU-bbbb")
    ]);
    assert!(score("t", T0, &l, &other_gpu).outcomes[0].flagged.is_none());
    e.device_uuid = None;
    let l = labels(false, vec![e]);
    assert!(score("t", T0, &l, &other_gpu).outcomes[0].on_time());
}

#[test]
fn an_oom_must_carry_its_class_and_other_kinds_need_only_be_flagged() {
    let mut oom = event("oom", Some(9), 20.0);
    oom.class = Some("fragmentation".into());
    let l = labels(true, vec![oom, event("zombie_context", Some(4), 10.0)]);
    let f = findings(&[
        finding("oom", Some(9), 20.1, r#"{"class":"capacity"}"#),
        finding("zombie_context", Some(4), 39.0, "{}"),
    ]);
    let s = score("t", T0, &l, &f);
    assert!(s.outcomes[0].flagged.is_none());
    assert!(s.outcomes[1].on_time(), "no deadline but the trace's end");
    assert_eq!(failures(&s).len(), 1);
    let t = totals(&[s]);
    assert_eq!(t.recall["oom"], (0, 1));
    assert_eq!(t.recall["zombie_context"], (1, 1));
    assert_eq!(t.climbs_expected, 0);
}

#[test]
fn any_climb_on_a_normal_trace_fails_it() {
    let l = labels(true, vec![]);
    let f = findings(&[
        finding("climb", Some(7), 12.0, r#"{"cause":"live"}"#),
        finding("unexplained_usage", None, 12.0, "{}"),
        finding("stale_feed", Some(7), 12.0, "{}"),
    ]);
    let s = score("t", T0, &l, &f);
    let why = failures(&s);
    assert_eq!(why.len(), 1);
    assert!(
        why[0].contains("a normal trace, yet climb/live pid 7"),
        "{why:?}"
    );
    assert_eq!(s.raised.len(), 2, "only the scored kinds are counted");
    let t = totals(&[s]);
    assert_eq!((t.normal_traces, t.normal_with_climb), (1, 1));
    assert_eq!(t.precision(), Some(0.0));
}

#[test]
fn the_earliest_matching_flag_counts_and_repeats_are_true_positives() {
    let l = labels(false, vec![climb("cached", Some(2), 8.0, 120.0)]);
    let f = findings(&[
        finding("climb", Some(2), 30.0, r#"{"cause":"cached"}"#),
        finding("climb", Some(2), 14.0, r#"{"cause":"cached"}"#),
    ]);
    let s = score("t", T0, &l, &f);
    assert_eq!(s.outcomes[0].time_to_flag(), Some(360.0));
    assert_eq!(totals(&[s]).precision(), Some(1.0));
}

#[test]
fn a_failed_analysis_misses_everything_and_says_why() {
    let l = labels(false, vec![climb("live", Some(7), 10.0, 85.0)]);
    let s = failed("t", T0, &l, "strata analyze exited with 2".into());
    let why = failures(&s);
    assert_eq!(why.len(), 2);
    assert!(why[0].contains("exited with 2"));
    assert!(report(&[s]).contains("MISS"));
}

#[test]
fn output_that_is_not_findings_is_an_error() {
    assert!(parse_findings("").is_err());
    assert!(parse_findings(r#"{"findings": [{"kind": "climb"}]}"#).is_err());
    assert!(parse_findings(r#"{"findings": [{"kind":"climb","since":1.0,"pid":-1}]}"#).is_err());
    let ok = parse_findings(
        r#"{"findings":[{"kind":"oom","since":5.5,"pid":null,"device_uuid":null}]}"#,
    )
    .expect("minimal");
    assert_eq!(ok[0].since, 5.5);
    assert_eq!(ok[0].cause, None);
}

#[test]
fn the_report_has_a_row_per_expected_event_and_the_totals() {
    let l = labels(
        false,
        vec![
            climb("live", Some(7), 10.0, 85.0),
            event("idle_holder", Some(8), 4.0),
        ],
    );
    let f = findings(&[
        finding("climb", Some(7), 13.0, r#"{"cause":"live"}"#),
        finding("climb", Some(8), 13.0, r#"{"cause":"cached"}"#),
    ]);
    let text = report(&[score("leak", T0, &l, &f)]);
    assert!(
        text.contains(
            "ok    climb/live pid 7 on GPU-aaaa from +10m00s at 85 MiB/min: flagged after 3m00s"
        ),
        "{text}"
    );
    assert!(text.contains("MISS  idle_holder pid 8"), "{text}");
    assert!(text.contains("FALSE climb/cached pid 8"), "{text}");
    assert!(
        text.contains("climb: precision 1/2 (50.0%), recall 1/1"),
        "{text}"
    );
    assert!(
        text.contains("idle_holder: recall 0/1 (0.0%), precision 0/0 (n/a)"),
        "{text}"
    );
}

#[test]
fn durations_read_as_minutes_and_seconds() {
    assert_eq!(duration(0.4), "0s");
    assert_eq!(duration(185.0), "3m05s");
    assert_eq!(duration(-40.0), "-40s");
}

#[test]
fn a_kind_the_labels_say_never_fails_the_trace_wherever_it_is_raised() {
    let mut l = labels(true, vec![]);
    l.never = vec!["feed_device_unlisted".into()];
    let f = findings(&[
        finding("feed_device_unlisted", Some(7), 8.1, "{}"),
        finding("stale_feed", Some(7), 8.1, "{}"),
    ]);
    let s = score("t", T0, &l, &f);
    let failed = failures(&s);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].contains("never to be raised, yet feed_device_unlisted"),
        "{failed:?}"
    );
    assert!(failures(&score("t", T0, &labels(true, vec![]), &f)).is_empty());
}

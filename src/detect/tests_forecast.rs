//! Time to OOM, headroom, climbs per training step and the warm-up verdict, through the
//! pipeline as a monitor meets them.

use super::tests_defects::{fed_node, pool};
use super::*;
use crate::fixtures::*;
use crate::pipeline::{Observed, Pipeline};
use crate::sample::AllocatorStats;

fn of_kind(findings: &[Finding], kind: FindingKind) -> Option<&Finding> {
    findings.iter().find(|f| f.kind == kind)
}

/// A job on an 80 GiB GPU with 1 GiB beyond its pool, sampled every 5 s for `minutes`: its
/// live bytes `live(t)` (a 2 GiB saw-tooth on top, period 40 s), its pool the live peak plus
/// 1 GiB, the allocator's peak counter the live bytes of each reading. Calls `each` with
/// every observed instant and its second.
fn run(minutes: u32, live: impl Fn(f64) -> f64, each: impl FnMut(f64, &Observed)) {
    run_with_peak(minutes, live, |_, allocated| allocated, each);
}

#[test]
fn a_climb_toward_capacity_is_forecast_with_its_eta() {
    // 40 GiB from minute 2 at 600 MiB/min: its peak (floor + 2 GiB) meets what the pool can
    // have (80 GiB less 0.5 GiB for the driver, 1 GiB beyond the pool, 256 MiB of splits)
    // when the floor reaches 76.25 GiB.
    let rate = 600.0 * MIB as f64 / 60.0;
    let live = |t: f64| 40.0 * GIB as f64 + rate * (t - 120.0).max(0.0);
    let capacity = (80.0 - 0.5 - 1.0 - 0.25) * GIB as f64 - 2.0 * GIB as f64;
    let oom_at = 120.0 + (capacity - 40.0 * GIB as f64) / rate;
    let mut first: Option<(f64, f64)> = None;
    run(55, live, |t, o| {
        if t >= oom_at - 60.0 {
            return;
        }
        if let Some(f) = of_kind(&o.findings, FindingKind::OomForecast) {
            let eta = f.evidence.to_json()["eta_secs"].as_f64().expect("eta");
            first.get_or_insert((t, eta));
            assert_eq!(f.evidence.to_json()["cause"], "live");
            let truth = oom_at - t;
            assert!(
                (eta - truth).abs() <= 0.3 * truth,
                "at {t}: eta {eta}, truth {truth}"
            );
            if eta < 600.0 {
                assert_eq!(f.severity, Severity::Critical);
            }
        }
    });
    let (t, _) = first.expect("forecast raised");
    assert!(
        oom_at - t >= 300.0,
        "raised {} s before the OOM",
        oom_at - t
    );
}

/// [`run`], the feed's `peak_allocated` given by `peak(t, allocated)`: the job's readings
/// are built here alone.
fn run_with_peak(
    minutes: u32,
    live: impl Fn(f64) -> f64,
    peak: impl Fn(f64, u64) -> u64,
    mut each: impl FnMut(f64, &Observed),
) {
    let mut pipeline = Pipeline::new(None);
    for k in 0..=(minutes * 12) {
        let t = 5.0 * f64::from(k);
        let floor = live(t);
        let saw = 2.0 * GIB as f64 * ((t % 40.0) / 40.0);
        let allocated = (floor + saw) as u64;
        let reserved = ((floor + 2.0 * GIB as f64) as u64 + GIB).next_multiple_of(2 * MIB);
        let stats = AllocatorStats {
            peak_allocated: Some(peak(t, allocated)),
            ..pool(allocated, reserved, 256 * MIB)
        };
        let mut s = fed_node(1000.0 + t, 80 * GIB, GIB, stats);
        s.interval = 5.0;
        each(t, &pipeline.ingest(s));
    }
}

#[test]
fn a_forecast_reads_the_allocator_peak_where_it_rose_and_paces_from_it() {
    // 600 MiB/min from minute 2; the counter holds the true peak (floor + 2 GiB), which
    // the samples (every 5 s on a 40 s saw-tooth) reach only now and then.
    let rate = 600.0 * MIB as f64 / 60.0;
    let live = |t: f64| 40.0 * GIB as f64 + rate * (t - 120.0).max(0.0);
    let capacity = (80.0 - 0.5 - 1.0 - 0.25) * GIB as f64 - 2.0 * GIB as f64;
    let oom_at = 120.0 + (capacity - 40.0 * GIB as f64) / rate;
    let true_peak = |t: f64| (live(t) + 2.0 * GIB as f64) as u64;
    let mut seen = 0;
    run_with_peak(
        55,
        live,
        |t, _| true_peak(t),
        |t, o| {
            let Some(f) = of_kind(&o.findings, FindingKind::OomForecast) else {
                return;
            };
            if t >= oom_at - 30.0 {
                return;
            }
            seen += 1;
            let truth = oom_at - t;
            let eta = f.evidence.to_json()["eta_secs"].as_f64().expect("eta");
            assert_eq!(f.evidence.to_json()["level_source"], "allocator", "at {t}");
            assert_eq!(f.evidence.to_json()["level_bytes"], true_peak(t), "at {t}");
            assert!(
                (eta - truth).abs() <= (0.1 * truth).max(15.0),
                "at {t}: {eta} for {truth}"
            );
            if t - 120.0 >= 600.0 {
                // Ten minutes of climb: the counter's own pace, to the byte a second.
                let pace = f.evidence.to_json()["rate_bytes_per_sec"]
                    .as_f64()
                    .expect("rate");
                assert!((pace / rate - 1.0).abs() < 0.01, "at {t}: {pace}");
            }
        },
    );
    assert!(seen > 100, "{seen} forecasts");
}

#[test]
fn an_allocator_peak_set_before_the_window_is_not_the_level() {
    // The counter holds a spike of 76 GiB from before the window (an evaluation pass long
    // ago) and never rises: the level is the highest reading, not the old spike, which
    // would say the device is all but full.
    let rate = 600.0 * MIB as f64 / 60.0;
    let live = |t: f64| 40.0 * GIB as f64 + rate * (t - 120.0).max(0.0);
    let mut seen = 0;
    run_with_peak(
        20,
        live,
        |_, _| 76 * GIB,
        |t, o| {
            if let Some(f) = of_kind(&o.findings, FindingKind::OomForecast) {
                seen += 1;
                assert_eq!(f.evidence.to_json()["level_source"], "sampled", "at {t}");
                assert!(
                    f.evidence.to_json()["level_bytes"].as_u64() < Some(60 * GIB),
                    "at {t}"
                );
            }
        },
    );
    assert!(seen > 0);
}

#[test]
fn plateaus_and_saw_tooths_near_capacity_are_never_forecast() {
    let plateau = |_t: f64| 70.0 * GIB as f64;
    let warm_up = |t: f64| 70.0 * GIB as f64 * (t / 300.0).min(1.0);
    let step = |t: f64| if t > 900.0 { 72.0 } else { 60.0 } * GIB as f64;
    for (name, f) in [
        ("plateau", &plateau as &dyn Fn(f64) -> f64),
        ("warm-up", &warm_up),
        ("step", &step),
    ] {
        run(40, f, |t, o| {
            assert!(
                of_kind(&o.findings, FindingKind::OomForecast).is_none(),
                "{name} forecast at {t}"
            );
        });
    }
}

#[test]
fn headroom_is_what_the_pool_can_have_less_the_peak_over_a_stated_window() {
    let mut last = None;
    run(3, |_| 30.0 * GIB as f64, |_, o| last = Some(o.headroom[0]));
    let room = last.flatten().expect("headroom of a fed process");
    // Free: 80 − 0.5 − 1 − reserved; usable: free + reserved − 256 MiB splits.
    assert_eq!(room.usable_bytes, 80 * GIB - 512 * MIB - GIB - 256 * MIB);
    assert!(room.peak_live_bytes > 31 * GIB && room.peak_live_bytes <= 32 * GIB);
    assert_eq!(room.peak_source, "sampled");
    assert_eq!(
        room.bytes,
        room.usable_bytes as i64 - room.peak_live_bytes as i64
    );
    assert_eq!(room.peak_window_secs, 180.0);
}

/// A job whose agent reports steps: `secs` per step, step-end readings as the agent takes
/// them (at most one every 0.2 s), live bytes at a step's end `end(step)`, a 6 GiB saw-tooth
/// within each step. Sampled every second for `seconds`; `each` sees every instant.
fn stepped(
    seconds: u32,
    secs: f64,
    end: impl Fn(u64) -> f64,
    each: impl FnMut(f64, u64, &Observed),
) {
    stepped_keeping(true, seconds, secs, end, each);
}

/// [`stepped`], through a pipeline that works out each sample's headrooms or (`headrooms`
/// false, as an offline analysis) none.
fn stepped_keeping(
    headrooms: bool,
    seconds: u32,
    secs: f64,
    end: impl Fn(u64) -> f64,
    mut each: impl FnMut(f64, u64, &Observed),
) {
    let mut pipeline = Pipeline::new(None);
    pipeline.headrooms = headrooms;
    // The pool holds the step's peak and a GiB more.
    let reserved = |s: u64| (end(s) as u64 + 7 * GIB).next_multiple_of(2 * MIB);
    let mut last_reading = f64::NEG_INFINITY;
    let mut step_done = 0u64;
    for k in 1..=seconds {
        let t = f64::from(k);
        let mut earlier: Vec<AllocatorStats> = Vec::new();
        // Every step that ends in this second; a reading at most every 0.2 s.
        while (step_done + 1) as f64 * secs <= t - 0.2 {
            step_done += 1;
            let at = step_done as f64 * secs;
            if at - last_reading >= 0.2 {
                last_reading = at;
                let mut r = pool(end(step_done) as u64, reserved(step_done), 128 * MIB);
                r.time = 1000.0 + at;
                r.step = Some(step_done);
                r.at_step_end = true;
                r.peak_allocated = Some(end(step_done) as u64 + 6 * GIB);
                earlier.push(r);
            }
        }
        let within = (t * 0.37).fract();
        let mut latest = pool(
            (end(step_done) + 6.0 * GIB as f64 * within) as u64,
            reserved(step_done),
            128 * MIB,
        );
        latest.step = Some(step_done);
        latest.peak_allocated = Some(end(step_done) as u64 + 6 * GIB);
        let mut s = fed_node(1000.0 + t, 80 * GIB, GIB, latest);
        s.feeds[0].devices[0].earlier = earlier;
        let observed = pipeline.ingest(s);
        each(t, step_done, &observed);
    }
}

#[test]
fn a_leak_per_step_is_flagged_within_300_steps_with_its_bytes_per_step() {
    for secs in [0.05, 1.0] {
        // 2 MiB a step from step 200, under a 6 GiB saw-tooth within each step.
        let end = |s: u64| 20.0 * GIB as f64 + 2.0 * MIB as f64 * s.saturating_sub(200) as f64;
        let mut flagged = None;
        let seconds = (1200.0f64 * secs).max(60.0) as u32;
        stepped(seconds, secs, end, |_, step, o| {
            if flagged.is_none() {
                if let Some(c) = of_kind(&o.findings, FindingKind::Climb) {
                    flagged = Some((step, c.evidence.to_json()));
                }
            }
        });
        let (step, evidence) = flagged.unwrap_or_else(|| panic!("{secs} s a step: not flagged"));
        assert!(step <= 500, "{secs} s a step: flagged at step {step}");
        let per = evidence["bytes_per_step"].as_f64().expect("bytes_per_step");
        assert!((per / (2.0 * MIB as f64) - 1.0).abs() <= 0.25, "{per}");
        assert!(evidence["steps"].as_u64().is_some());
        assert_eq!(evidence["cause"], "live");
    }
}

#[test]
fn a_job_whose_steps_hold_fits_said_once_and_never_climbs() {
    let end = |s: u64| if s < 5 { 8.0 } else { 20.0 } * GIB as f64;
    let mut verdicts = Vec::new();
    stepped(400, 1.0, end, |t, _, o| {
        assert!(
            of_kind(&o.findings, FindingKind::Climb).is_none(),
            "a climb at {t}"
        );
        if let Some(f) = of_kind(&o.findings, FindingKind::WarmUp) {
            verdicts.push((f.since, f.message.clone(), f.evidence.to_json()));
        }
    });
    let (since, message, evidence) = verdicts.first().cloned().expect("a verdict");
    assert!(verdicts.iter().all(|v| v.0 == since), "said once");
    assert_eq!(evidence["verdict"], "fits", "{message}");
    assert!(message.contains("fits: peak live 26.0 GiB of"), "{message}");
    assert!(message.contains("headroom"), "{message}");
    assert!(
        evidence["steps"]
            .as_u64()
            .is_some_and(|s| (50..=120).contains(&s)),
        "{evidence}"
    );
}

#[test]
fn a_pipeline_that_keeps_no_headrooms_says_the_same_warm_up_verdicts() {
    let end = |s: u64| if s < 5 { 8.0 } else { 20.0 } * GIB as f64;
    let verdicts = |headrooms: bool| {
        let mut said = Vec::new();
        stepped_keeping(headrooms, 400, 1.0, end, |t, _, o| {
            assert_eq!(o.headroom.is_empty(), !headrooms, "at {t}");
            said.extend(
                o.findings
                    .iter()
                    .filter(|f| f.kind == FindingKind::WarmUp)
                    .map(|f| (t, f.since, f.message.clone(), f.evidence.to_json())),
            );
        });
        said
    };
    let kept = verdicts(true);
    assert!(!kept.is_empty(), "a verdict");
    assert_eq!(verdicts(false), kept);
}

#[test]
fn a_warm_up_that_will_not_fit_says_so_with_its_forecast() {
    // 20 MiB a step from the first steps, a step a second: out of memory within the hour.
    let end = |s: u64| 40.0 * GIB as f64 + 20.0 * MIB as f64 * s as f64;
    let mut verdict = None;
    stepped(900, 1.0, end, |_, _, o| {
        if verdict.is_none() {
            verdict = of_kind(&o.findings, FindingKind::WarmUp).cloned();
        }
    });
    let verdict = verdict.expect("a verdict");
    assert_eq!(
        verdict.evidence.to_json()["verdict"],
        "will_not_fit",
        "{}",
        verdict.message
    );
    assert!(
        verdict.message.contains("will not fit"),
        "{}",
        verdict.message
    );
    assert!(verdict.evidence.to_json()["eta_step"].as_u64().is_some());
}

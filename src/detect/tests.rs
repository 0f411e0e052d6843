//! Every kind of finding, raised when the sample says so and only then, in the host's PID
//! namespace and in a container's.

use super::*;
use crate::fixtures::*;
use crate::pipeline::Pipeline;
use crate::sample::feed::{FeedCounters, FeedRecord, FeedState};

fn kinds(findings: &[Finding]) -> Vec<FindingKind> {
    findings.iter().map(|f| f.kind).collect()
}

/// One GPU with these processes, `unlisted` bytes in use beyond them, NVML's driver
/// reservation reported.
fn node_with(processes: Vec<ProcessSample>, unlisted: u64) -> NodeSample {
    let mut s = node();
    let held: u64 = processes.iter().filter_map(|p| p.used).sum();
    s.gpus.push(gpu(
        0,
        DeviceMemory {
            total: 80 * GIB,
            used: held + unlisted,
            free: 80 * GIB - 512 * MIB - held - unlisted,
            driver_reserved: Some(512 * MIB),
        },
    ));
    s.processes = processes;
    s
}

use crate::sample::{DeviceMemory, ProcessSample};

fn gone(pid: u32) -> ProcessSample {
    let mut p = process(pid, "GPU-test-0", Some(GIB));
    p.visible = false;
    p.proc_state = None;
    p.command = None;
    p
}

/// Findings of a run of samples one second apart, as the pipeline settles them.
fn over(seconds: u32, sample: &NodeSample) -> Vec<Finding> {
    let mut pipeline = Pipeline::new(None);
    let mut last = Vec::new();
    for i in 0..=seconds {
        let mut s = sample.clone();
        s.time += f64::from(i);
        last = pipeline.ingest(s).findings;
    }
    last
}

#[test]
fn a_gone_holder_is_a_zombie_only_after_a_few_seconds_and_only_in_the_host_namespace() {
    let s = node_with(vec![gone(4242)], 0);
    assert!(
        !kinds(&over(1, &s)).contains(&FindingKind::ZombieContext),
        "one or two samples are not enough"
    );
    let late = over(6, &s);
    let zombie = late
        .iter()
        .find(|f| f.kind == FindingKind::ZombieContext)
        .expect("confirmed after 5 s");
    assert_eq!(zombie.severity, Severity::Critical);
    assert_eq!(zombie.pid, Some(4242));
    assert_eq!(zombie.since, 1000.0, "since it was first seen gone");
    // In a container the same PID is in another namespace: not gone, not critical.
    let mut contained = s.clone();
    contained.host_pid_namespace = Some(false);
    let findings = over(6, &contained);
    assert!(!kinds(&findings).contains(&FindingKind::ZombieContext));
    assert!(kinds(&findings).contains(&FindingKind::NotVisibleHolder));
}

#[test]
fn a_defunct_holder_is_a_zombie_and_a_hidden_one_is_not() {
    let mut defunct = process(10, "GPU-test-0", Some(GIB));
    defunct.proc_state = Some("Z".into());
    let findings = over(6, &node_with(vec![defunct], 0));
    assert!(findings
        .iter()
        .any(|f| f.kind == FindingKind::ZombieContext && f.message.contains("defunct")));
    // hidepid: the PID exists, /proc will not show it.
    let mut hidden = gone(11);
    hidden.hidden = true;
    assert!(over(6, &node_with(vec![hidden], 0)).is_empty());
    // PID 0 holding nothing: a driver quirk.
    let mut quirk = gone(0);
    quirk.used = Some(0);
    assert!(!kinds(&over(6, &node_with(vec![quirk], 0))).contains(&FindingKind::ZombieContext));
}

#[test]
fn many_zombies_are_one_finding() {
    let small = |pid| ProcessSample {
        used: Some(64 * MIB),
        ..gone(pid)
    };
    let s = node_with((5000..6000).map(small).collect(), 0);
    let findings = over(6, &s);
    let zombies: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.kind == FindingKind::ZombieContext)
        .collect();
    assert_eq!(zombies.len(), 1, "{:?}", kinds(&findings));
    assert!(
        zombies[0].message.starts_with("1000 PIDs"),
        "{}",
        zombies[0].message
    );
    assert!(
        zombies[0].message.contains("62.5 GiB"),
        "{}",
        zombies[0].message
    );
    let mut contained = s.clone();
    contained.host_pid_namespace = Some(false);
    let findings = over(0, &contained);
    assert_eq!(
        kinds(&findings)
            .iter()
            .filter(|k| **k == FindingKind::NotVisibleHolder)
            .count(),
        1
    );
}

#[test]
fn python_processes_without_a_feed_make_one_hint_for_the_node() {
    let mut triton = process(3, "GPU-test-0", Some(4 * GIB));
    triton.executable = Some("/opt/tritonserver/bin/tritonserver".into());
    let s = node_with(
        vec![
            process(1, "GPU-test-0", Some(4 * GIB)),
            process(2, "GPU-test-0", Some(4 * GIB)),
            triton,
        ],
        0,
    );
    let findings = over(0, &s);
    let hints: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.kind == FindingKind::UnattributedMemory)
        .collect();
    assert_eq!(hints.len(), 1);
    assert!(hints[0]
        .message
        .starts_with("2 Python processes hold 8.00 GiB"));
    assert_eq!(hints[0].pid, None);
}

#[test]
fn usage_no_listed_process_holds_is_unexplained_unless_it_cannot_be_known() {
    let s = node_with(vec![process(1, "GPU-test-0", Some(4 * GIB))], 2 * GIB);
    let findings = over(0, &s);
    let unexplained = findings
        .iter()
        .find(|f| f.kind == FindingKind::UnexplainedUsage)
        .expect("2 GiB beyond the listed process and the driver's reservation");
    assert!(
        unexplained.message.starts_with("2.00 GiB"),
        "{}",
        unexplained.message
    );
    // A process list NVML could not read: nothing is unexplained, and it says why.
    let mut unread = s.clone();
    unread.gpus[0].processes_known = false;
    unread.gpus[0].problems.insert(
        "processes".into(),
        "NVML_ERROR_NO_PERMISSION: needs root".into(),
    );
    unread.processes.clear();
    let findings = over(0, &unread);
    assert!(!kinds(&findings).contains(&FindingKind::UnexplainedUsage));
    let problem = findings
        .iter()
        .find(|f| f.kind == FindingKind::NvmlProblem)
        .expect("the refusal is a finding");
    assert!(
        problem.message.contains("process list could not be read")
            && problem.message.contains("needs root"),
        "{}",
        problem.message
    );
    // A listed process whose usage NVML does not report: its bytes are in `other` too.
    let mut unreported = s.clone();
    unreported.processes.push(process(2, "GPU-test-0", None));
    assert!(!kinds(&over(0, &unreported)).contains(&FindingKind::UnexplainedUsage));
}

#[test]
fn feeds_that_cannot_be_combined_are_findings() {
    let mut stale = process(1, "GPU-test-0", Some(10 * GIB));
    stale.feed = Some(Box::new(feed(GIB, 8 * GIB, Some(0), 990.0)));
    let mut inconsistent = process(2, "GPU-test-0", Some(GIB));
    inconsistent.feed = Some(Box::new(feed(GIB, 8 * GIB, Some(0), 1000.0)));
    let s = node_with(vec![stale, inconsistent], 0);
    let attachment = judged(&s);
    let account = crate::accounting::account(
        &s,
        &attachment,
        &crate::context::ContextEstimator::learning(),
    );
    let found = kinds(&detect_instant(&s, &attachment, &account));
    assert!(found.contains(&FindingKind::StaleFeed), "{found:?}");
    assert!(found.contains(&FindingKind::InconsistentFeed), "{found:?}");
}

fn record(state: FeedState, counters: FeedCounters) -> FeedRecord {
    FeedRecord {
        state,
        hello: None,
        counters,
        ..feed_record(1, 0)
    }
}

#[test]
fn refused_dropped_and_noisy_feeds_are_findings() {
    let mut s = node_with(vec![process(1, "GPU-test-0", Some(GIB))], 0);
    s.feeds.push(record(
        FeedState::Refused {
            reason: "peer uid 65534 is not the feed dir owner 0".into(),
        },
        FeedCounters::default(),
    ));
    s.feeds.push(record(
        FeedState::Dropped {
            reason: "flooding".into(),
        },
        FeedCounters::default(),
    ));
    s.feeds.push(record(
        FeedState::Connected,
        FeedCounters {
            malformed: 3,
            ..FeedCounters::default()
        },
    ));
    let found = kinds(&over(0, &s));
    assert_eq!(
        found
            .iter()
            .filter(|k| **k == FindingKind::RefusedFeed)
            .count(),
        2
    );
    assert!(found.contains(&FindingKind::FeedBadInput));
}

#[test]
fn a_lost_gpu_and_contradictory_counters_are_findings() {
    let mut s = node_with(vec![], 0);
    s.gpus.push(gpu(1, memory(80 * GIB, 0)));
    s.gpus[1].uuid = "GPU-test-1".into();
    s.gpus[1].lost = true;
    if let Some(m) = s.gpus[0].memory.as_mut() {
        m.used = 90 * GIB;
    }
    let findings = over(0, &s);
    let found = kinds(&findings);
    assert!(found.contains(&FindingKind::GpuLost));
    let contradiction = findings
        .iter()
        .find(|f| f.kind == FindingKind::InconsistentCounters)
        .expect("used above total");
    assert!(contradiction.message.contains("above total"));
    // A handle NVML refused is not "fell off the bus".
    let mut refused = node_with(vec![], 0);
    refused.gpus[0].memory = None;
    refused.gpus[0].problems.insert(
        "handle".into(),
        "NVML_ERROR_RESET_REQUIRED: the GPU needs a reset".into(),
    );
    let findings = over(0, &refused);
    assert!(!kinds(&findings).contains(&FindingKind::GpuLost));
    assert!(findings
        .iter()
        .any(|f| f.kind == FindingKind::NvmlProblem && f.message.contains("reset")));
}

#[test]
fn a_feed_device_its_pid_is_not_listed_on_is_a_finding() {
    use crate::accounting::attach::{Attachment, Unlisted};
    let s = node_with(vec![process(1, "GPU-test-0", Some(GIB))], 0);
    let attachment = Attachment {
        statuses: vec![crate::accounting::FeedStatus::Absent],
        unlisted: vec![Unlisted {
            feed: 0,
            pid: 1,
            index: 1,
            device_uuid: Some("GPU-test-1".into()),
            reason: "the feed reports cuda:1 but NVML does not list PID 1 on that device".into(),
        }],
    };
    let account = crate::accounting::account(
        &s,
        &attachment,
        &crate::context::ContextEstimator::learning(),
    );
    let findings = detect_instant(&s, &attachment, &account);
    assert!(kinds(&findings).contains(&FindingKind::FeedDeviceUnlisted));
}

/// A climb missed by one reading is held while its series stays where the climb had reached,
/// and no longer than the hold: then it is over.
#[test]
fn a_climb_is_held_through_a_missed_reading_only_while_its_level_holds() {
    use crate::history::{History, Metric, SeriesKey};
    let key = SeriesKey::process(7, Some(70), "GPU-test-0", Metric::Allocated);
    let mut history = History::default();
    let level = |history: &mut History, t: f64, v: u64| {
        history.begin(t, 1.0);
        history.record(key.clone(), t, Some(v));
    };
    let climb = Finding {
        kind: FindingKind::Climb,
        severity: Severity::Warning,
        device_uuid: Some("GPU-test-0".into()),
        pid: Some(7),
        since: 100.0,
        message: "PID 7 on GPU 0: live tensors climbing".into(),
        evidence: Evidence::Climb(evidence::Climb {
            bytes_per_step: evidence::units::IfKnown(None),
            cause: "live".into(),
            duration_secs: evidence::units::Secs(0.0),
            from_bytes: evidence::units::Bytes(GIB),
            grew_most_at: evidence::units::IfKnown(None),
            grew_most_bytes: evidence::units::IfKnown(None),
            grew_most_window_secs: evidence::units::IfKnown(None),
            rate_mib_per_min: evidence::units::MibPerMin(100.0),
            series: "allocated".into(),
            start: evidence::units::Time(100.0),
            steps: evidence::units::IfKnown(None),
            to_bytes: evidence::units::Bytes(10 * GIB),
            warm_up_end: evidence::units::IfKnown(None),
            warm_up_end_step: evidence::units::IfKnown(None),
            warm_up_end_time: evidence::units::IfKnown(None),
            window_secs: evidence::units::Secs(300.0),
        }),
    };
    let mut hold = ClimbHold::default();
    level(&mut history, 100.0, 10 * GIB);
    let mut now = vec![climb.clone()];
    hold.apply(&mut now, vec![(0, key.clone())], &history, 100.0);
    assert_eq!(now.len(), 1, "seen now: not doubled");
    // Missed a minute later, its level as high: held.
    level(&mut history, 160.0, 10 * GIB + MIB);
    let mut now = Vec::new();
    hold.apply(&mut now, Vec::new(), &history, 160.0);
    assert_eq!(kinds(&now), vec![FindingKind::Climb]);
    // Fallen below where it had reached: over, though within the hold.
    level(&mut history, 170.0, 9 * GIB);
    let mut now = Vec::new();
    hold.apply(&mut now, Vec::new(), &history, 170.0);
    assert!(now.is_empty());
    // Back up, but past the hold: over.
    level(&mut history, 221.0, 11 * GIB);
    let mut now = Vec::new();
    hold.apply(&mut now, Vec::new(), &history, 221.0);
    assert!(now.is_empty());
    // Seen again, then its process gone: its series no longer recorded, nothing is held.
    level(&mut history, 230.0, 12 * GIB);
    let mut now = vec![climb.clone()];
    hold.apply(&mut now, vec![(0, key.clone())], &history, 230.0);
    history.begin(240.0, 1.0);
    let mut now = Vec::new();
    hold.apply(&mut now, Vec::new(), &history, 240.0);
    assert!(now.is_empty(), "a gone process's climb is over");
}

fn holder(pid: u32, ppid: u32, minors: Vec<u32>, uvm: bool) -> crate::sample::DeviceHolder {
    crate::sample::DeviceHolder {
        pid,
        start_time: Some(u64::from(pid) * 7),
        state: Some("S".into()),
        ppid: Some(ppid),
        uid: Some(1000),
        user: Some("alice".into()),
        command: Some(format!("python worker.py --id {pid}")),
        parent_command: Some("/sbin/init".into()),
        minors,
        uvm,
    }
}

fn zombie_of(findings: &[Finding]) -> &Finding {
    findings
        .iter()
        .find(|f| f.kind == FindingKind::ZombieContext)
        .expect("a zombie context")
}

/// The holders of the zombie's GPU file are named, those without a context of their own first;
/// a holder of another GPU's file is not one of them.
#[test]
fn a_zombie_context_names_who_holds_its_device_file() {
    let mut s = node_with(vec![gone(4242), process(77, "GPU-test-0", Some(GIB))], 0);
    s.gpus[0].minor_number = Some(3);
    s.device_files = Some(crate::sample::DeviceFileScan {
        holders: vec![
            holder(77, 1, vec![3], true),
            holder(4300, 1, vec![3], true),
            holder(5000, 1, vec![0], true),
        ],
        unreadable: 0,
    });
    let zombie = zombie_of(&over(6, &s)).clone();
    assert!(
        zombie.message.ends_with(
            "; /dev/nvidia3 is still held open by PID 4300 (python worker.py --id 4300)"
        ),
        "{}",
        zombie.message
    );
    let Evidence::ZombieContext(e) = &zombie.evidence else {
        panic!("a zombie's evidence: {:?}", zombie.evidence);
    };
    assert_eq!(e.device_file.0.as_deref(), Some("/dev/nvidia3"));
    let holders = e.holders.0.as_deref().expect("holders");
    let pids: Vec<u32> = holders.iter().map(|h| h.pid.0).collect();
    assert_eq!(
        pids,
        [4300, 77],
        "no context of its own first; GPU 0's holder left out"
    );
    assert!(!holders[0].listed);
    assert!(holders[1].listed);
    assert_eq!(holders[0].ppid, Some(evidence::units::Pid(1)));
    assert_eq!(holders[0].parent_command.as_deref(), Some("/sbin/init"));
    assert_eq!(holders[0].user.as_deref(), Some("alice"));
    assert_eq!(
        holders[0].start_time,
        Some(evidence::units::Ticks(4300 * 7))
    );
}

#[test]
fn what_the_search_found_or_could_not_search_is_said() {
    let base = node_with(vec![gone(4242)], 0);
    let with = |holders, unreadable| {
        let mut s = base.clone();
        s.device_files = Some(crate::sample::DeviceFileScan {
            holders,
            unreadable,
        });
        zombie_of(&over(6, &s)).clone()
    };
    let nobody = with(Vec::new(), 0);
    assert!(
        nobody
            .message
            .ends_with("; no process holds /dev/nvidia0 open"),
        "{}",
        nobody.message
    );
    assert_eq!(nobody.evidence.to_json()["holders"], serde_json::json!([]));
    let unsearched = with(Vec::new(), 12);
    assert!(
        unsearched.message.ends_with(
            "; 12 processes could not be searched for /dev/nvidia0 (run strata as root)"
        ),
        "{}",
        unsearched.message
    );
    let many = with(
        vec![
            holder(6001, 1, vec![0], true),
            holder(6002, 6001, vec![0], false),
        ],
        0,
    );
    assert!(
        many.message.ends_with(
            "; /dev/nvidia0 is still held open by 2 processes without a context of their own (PIDs 6001, 6002)"
        ),
        "{}",
        many.message
    );
    // Without the GPU's minor number, the holders of the UVM file.
    let mut s = base.clone();
    s.gpus[0].minor_number = None;
    s.device_files = Some(crate::sample::DeviceFileScan {
        holders: vec![
            holder(6001, 1, vec![5], true),
            holder(6002, 1, vec![5], false),
        ],
        unreadable: 0,
    });
    let zombie = zombie_of(&over(6, &s)).clone();
    assert_eq!(zombie.evidence.to_json()["device_file"], "/dev/nvidia-uvm");
    assert_eq!(zombie.evidence.to_json()["holders"][0]["pid"], 6001);
    assert_eq!(
        zombie.evidence.to_json()["holders"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    // Not searched (an old recording): nothing claimed.
    let zombie = zombie_of(&over(6, &base)).clone();
    assert!(zombie.evidence.to_json().get("holders").is_none());
    assert!(zombie.message.ends_with("on GPU 0"), "{}", zombie.message);
}

#[test]
fn many_zombies_keep_their_holders_in_one_finding() {
    let mut s = node_with((5000..5005).map(gone).collect(), 0);
    s.device_files = Some(crate::sample::DeviceFileScan {
        holders: vec![holder(7001, 1, vec![0], true)],
        unreadable: 0,
    });
    let findings = over(6, &s);
    let zombie = zombie_of(&findings);
    assert!(zombie.pid.is_none(), "grouped");
    let holders = zombie.evidence.holders().expect("holders");
    assert_eq!(holders.len(), 1, "each holder once: {holders:?}");
    assert_eq!(holders[0].pid.0, 7001);
}

/// `FindingKind::ALL` lists every kind once, in the enum's order.
#[test]
fn every_kind_is_listed_once_in_its_place() {
    for (at, kind) in FindingKind::ALL.into_iter().enumerate() {
        assert_eq!(kind.index(), at, "{kind:?}");
    }
}

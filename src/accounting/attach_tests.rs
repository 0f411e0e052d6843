use super::*;
use crate::fixtures::*;
use crate::sample::feed::{DeviceFeed, Hello, PeerCred};

fn record(pid: u32, devices: Vec<(FeedDevice, AllocatorStats)>) -> FeedRecord {
    FeedRecord {
        hello: Some(
            Hello {
                pid,
                time: 990.0,
                interval: Some(0.5),
                framework: Some("torch".into()),
                framework_version: Some("2.5.1".into()),
                backend: Some("native".into()),
                devices: devices.iter().map(|(d, _)| d.clone()).collect(),
                ..Hello::default()
            }
            .into(),
        ),
        devices: devices
            .into_iter()
            .map(|(d, s)| DeviceFeed {
                latest: AllocatorStats {
                    index: d.index,
                    ..s
                },
                earlier: Vec::new(),
            })
            .collect(),
        connected_at: Some(990.0),
        last_heard: Some(999.9),
        ..feed_record(pid, 1000)
    }
}

fn device(index: u32, uuid: Option<&str>, pci: Option<&str>) -> FeedDevice {
    FeedDevice {
        index,
        uuid: uuid.map(str::to_string),
        pci_bus_id: pci.map(str::to_string),
        ..FeedDevice::default()
    }
}

fn one_gpu(pid: u32) -> NodeSample {
    let mut s = node();
    s.gpus.push(gpu(0, memory(80 * GIB, 30 * GIB)));
    s.gpus.push(gpu(1, memory(80 * GIB, 0)));
    s.processes.push(process(pid, "GPU-test-0", Some(30 * GIB)));
    s
}

#[test]
fn uuids_compare_without_prefix_dashes_or_case() {
    assert_eq!(
        normalize_uuid("GPU-5F3C2A1E-8b7d-4c6e-9a10-2d4f6b8e0c31"),
        normalize_uuid("5f3c2a1e-8b7d-4c6e-9a10-2d4f6b8e0c31")
    );
    assert_eq!(normalize_uuid("MIG-ab-CD"), "abcd");
    let named = normalize_uuid("5f3c2a1e-8b7d-4c6e-9a10-2d4f6b8e0c31");
    assert!(names(" GPU-5F3C2A1E-8b7d-4c6e-9a10-2d4f6b8e0c31", &named));
    assert!(!names("GPU-5F3C2A1E-8b7d-4c6e-9a10-2d4f6b8e0c3", &named));
    assert!(!names("GPU-5F3C2A1E-8b7d-4c6e-9a10-2d4f6b8e0c310", &named));
    assert!(!names("MIG-5F3C2A1E-8b7d-4c6e-9a10-2d4f6b8e0c32", &named));
    assert_eq!(
        normalize_pci("0000:18:00.0").as_deref(),
        Some("00000000:18:00")
    );
    assert_eq!(
        normalize_pci("00000000:af:00.0").as_deref(),
        Some("00000000:AF:00")
    );
    assert_eq!(normalize_pci("nonsense"), None);
}

#[test]
fn a_torch_feed_matches_by_bare_uuid() {
    let mut s = one_gpu(7);
    // gpu() names its GPU `GPU-test-0`: torch gives UUIDs without the prefix.
    s.feeds.push(record(
        7,
        vec![(
            device(0, Some("TEST-0"), None),
            stats(8 * GIB, 20 * GIB, 990.0, 999.8),
        )],
    ));
    let a = attach(&mut s);
    let feed = s.processes[0].feed.as_ref().expect("attached");
    assert_eq!(feed.stats.allocated, 8 * GIB);
    assert_eq!(feed.framework, "torch");
    assert!(matches!(a.statuses[0], FeedStatus::Fresh { .. }), "{a:?}");
    assert!(a.unlisted.is_empty());
}

#[test]
fn without_a_uuid_the_pci_id_matches() {
    let mut s = one_gpu(7);
    s.feeds.push(record(
        7,
        vec![(
            device(3, None, Some("0000:18:00.0")),
            stats(GIB, 2 * GIB, 990.0, 999.8),
        )],
    ));
    attach(&mut s);
    assert!(s.processes[0].feed.is_some());
}

#[test]
fn on_a_mig_gpu_the_pci_id_finds_the_instance_the_pid_is_on() {
    let mut s = node();
    let mut g = gpu(0, memory(80 * GIB, 30 * GIB));
    g.mig = vec![
        mig("MIG-a", "3g.40gb", memory(40 * GIB, 20 * GIB)),
        mig("MIG-b", "2g.20gb", memory(20 * GIB, 5 * GIB)),
    ];
    s.gpus.push(g);
    s.processes.push(process(7, "MIG-b", Some(4 * GIB)));
    s.feeds.push(record(
        7,
        vec![(
            device(0, None, Some("00000000:18:00.0")),
            stats(GIB, 2 * GIB, 990.0, 999.8),
        )],
    ));
    attach(&mut s);
    assert_eq!(
        s.processes[0].feed.as_ref().and_then(|f| f.stats.reserved),
        Some(2 * GIB)
    );
}

#[test]
fn a_feed_device_its_pid_is_not_listed_on_is_reported() {
    let mut s = one_gpu(7);
    // The feed says cuda:1 is GPU 1 (matched by UUID) but NVML lists PID 7 only on GPU 0.
    s.feeds.push(record(
        7,
        vec![
            (
                device(0, Some("GPU-test-0"), None),
                stats(GIB, 2 * GIB, 990.0, 999.8),
            ),
            (
                device(1, Some("GPU-test-1"), None),
                stats(GIB, 2 * GIB, 990.0, 999.8),
            ),
            (
                device(2, Some("GPU-elsewhere"), None),
                stats(GIB, 2 * GIB, 990.0, 999.8),
            ),
        ],
    ));
    let a = attach(&mut s);
    assert_eq!(a.unlisted.len(), 2, "{a:?}");
    assert_eq!(a.unlisted[0].device_uuid.as_deref(), Some("GPU-test-1"));
    assert!(a.unlisted[1].reason.contains("none of this node's GPUs"));
}

/// A process that exited is no longer listed by NVML while the monitor keeps its closed feed
/// for a while: that feed speaks for a process that is gone, not for one NVML misses.
#[test]
fn the_closed_feed_of_an_exited_process_is_not_unlisted() {
    let mut s = one_gpu(7);
    s.processes.clear();
    s.feeds.push(record(
        7,
        vec![(
            device(0, Some("GPU-test-0"), None),
            stats(GIB, 2 * GIB, 990.0, 999.8),
        )],
    ));
    let mut live = s.clone();
    assert_eq!(
        attach(&mut live).unlisted.len(),
        1,
        "a connected feed is said"
    );
    s.feeds[0].state = FeedState::Closed {
        reason: "the agent said bye".into(),
    };
    let a = attach(&mut s);
    assert!(a.unlisted.is_empty(), "{a:?}");
}

#[test]
fn a_refused_feed_is_shown_on_its_process_and_never_used() {
    let mut s = one_gpu(7);
    let mut r = record(
        7,
        vec![(
            device(0, Some("GPU-test-0"), None),
            stats(GIB, 2 * GIB, 990.0, 999.8),
        )],
    );
    r.state = FeedState::Refused {
        reason: "peer uid 65534 is not the feed dir owner 1000".into(),
    };
    s.feeds.push(r);
    let a = attach(&mut s);
    assert!(s.processes[0].feed.is_none());
    match &a.statuses[0] {
        FeedStatus::Refused { reason } => assert!(reason.contains("65534"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_feed_waiting_for_cuda_is_pending_with_its_note() {
    let mut s = one_gpu(7);
    let mut r = record(7, vec![]);
    if let Some(h) = r.hello.as_mut().map(std::sync::Arc::make_mut) {
        h.note = Some("waiting for torch to initialise CUDA".into());
    }
    s.feeds.push(r);
    let a = attach(&mut s);
    assert_eq!(
        a.statuses[0],
        FeedStatus::Pending {
            reason: "waiting for torch to initialise CUDA".into(),
            kind: PendingKind::Waiting,
        }
    );
    assert_eq!(a.statuses[0].label(), "waiting");
}

#[test]
fn an_agent_error_is_shown_as_an_error_with_its_text_and_no_framework_as_such() {
    let cases = [
        (
            Some("error"),
            Some("agent error: AttributeError: module 'torch' has no attribute '_C'"),
            Some("waiting for torch to initialise CUDA"),
            "agent error: AttributeError: module 'torch' has no attribute '_C'",
            PendingKind::AgentError,
            "agent error",
        ),
        (
            Some("no_framework"),
            None,
            Some("torch launcher (torch.distributed.run): CUDA not used here"),
            "torch launcher (torch.distributed.run): CUDA not used here",
            PendingKind::NoFramework,
            "no framework",
        ),
        (
            None,
            None,
            Some("waiting for jax"),
            "waiting for jax",
            PendingKind::Waiting,
            "waiting",
        ),
    ];
    for (state, error, note, reason, kind, label) in cases {
        let mut s = one_gpu(7);
        let mut r = record(7, vec![]);
        if let Some(h) = r.hello.as_mut().map(std::sync::Arc::make_mut) {
            h.state = state.map(Into::into);
            h.error = error.map(Into::into);
            h.note = note.map(Into::into);
        }
        s.feeds.push(r);
        let a = attach(&mut s);
        assert_eq!(
            a.statuses[0],
            FeedStatus::Pending {
                reason: reason.into(),
                kind
            },
            "{state:?}"
        );
        assert_eq!(a.statuses[0].label(), label);
    }
}

#[test]
fn an_old_feed_is_stale_and_a_contradictory_one_inconsistent() {
    let mut s = one_gpu(7);
    s.feeds.push(record(
        7,
        vec![(
            device(0, Some("GPU-test-0"), None),
            stats(GIB, 2 * GIB, 900.0, 990.0),
        )],
    ));
    let a = attach(&mut s);
    assert_eq!(a.statuses[0], FeedStatus::Stale { age: 10.0 });
    let mut s = one_gpu(7);
    s.feeds.push(record(
        7,
        vec![(
            device(0, Some("GPU-test-0"), None),
            stats(GIB, 40 * GIB, 990.0, 999.9),
        )],
    ));
    let a = attach(&mut s);
    assert!(matches!(a.statuses[0], FeedStatus::Inconsistent { .. }));
}

#[test]
fn a_feed_without_reserved_is_judged_on_what_it_reports() {
    // XLA's cuda_async: allocated alone, checked against NVML's figure.
    let judged = |allocated: u64, used: Option<u64>| {
        let f = unpooled_feed(allocated, 999.9);
        judge(1000.0, 1.5, &f.stats, used)
    };
    assert_eq!(
        judged(20 * GIB, Some(30 * GIB)),
        FeedStatus::Fresh { age: 0.1 }
    );
    assert_eq!(judged(20 * GIB, None), FeedStatus::Fresh { age: 0.1 });
    let FeedStatus::Inconsistent { reason } = judged(31 * GIB, Some(30 * GIB)) else {
        panic!("more allocated than NVML sees is a contradiction");
    };
    assert!(reason.contains("exceeds NVML used"), "{reason}");
    // Matched and attached like any other feed, its device kept.
    let mut s = one_gpu(7);
    s.feeds.push(record(
        7,
        vec![(
            device(0, Some("GPU-test-0"), None),
            unpooled_feed(20 * GIB, 999.8).stats,
        )],
    ));
    let a = attach(&mut s);
    assert!(matches!(a.statuses[0], FeedStatus::Fresh { .. }), "{a:?}");
    let stats = &s.processes[0].feed.as_ref().expect("attached").stats;
    assert_eq!((stats.allocated, stats.reserved), (20 * GIB, None));
}

#[test]
fn a_slow_agent_is_judged_against_its_own_interval() {
    let mut s = one_gpu(7);
    let mut r = record(
        7,
        vec![(
            device(0, Some("GPU-test-0"), None),
            stats(GIB, 2 * GIB, 900.0, 995.0),
        )],
    );
    if let Some(h) = r.hello.as_mut().map(std::sync::Arc::make_mut) {
        h.interval = Some(2.0);
    }
    s.feeds.push(r);
    let a = attach(&mut s);
    assert!(matches!(a.statuses[0], FeedStatus::Fresh { .. }), "{a:?}");
}

#[test]
fn a_feed_without_a_kernel_pid_speaks_for_nobody() {
    let mut s = one_gpu(7);
    let mut r = record(
        7,
        vec![(
            device(0, Some("GPU-test-0"), None),
            stats(GIB, 2 * GIB, 990.0, 999.8),
        )],
    );
    r.peer = Some(PeerCred {
        pid: 0,
        uid: 1000,
        gid: 1000,
    });
    s.feeds.push(r);
    let a = attach(&mut s);
    assert!(s.processes[0].feed.is_none());
    assert_eq!(a.statuses[0], FeedStatus::Absent);
}

#[test]
fn a_parent_gpu_uuid_under_mig_finds_the_instance_the_pid_is_on() {
    let mut s = node();
    let mut g = gpu(0, memory(80 * GIB, 30 * GIB));
    g.mig = vec![
        mig("MIG-a", "3g.40gb", memory(40 * GIB, 20 * GIB)),
        mig("MIG-b", "2g.20gb", memory(20 * GIB, 5 * GIB)),
    ];
    s.gpus.push(g);
    s.processes.push(process(7, "MIG-a", Some(4 * GIB)));
    s.feeds.push(record(
        7,
        vec![(
            device(0, Some("test-0"), None),
            stats(GIB, 2 * GIB, 990.0, 999.8),
        )],
    ));
    let a = attach(&mut s);
    assert!(a.unlisted.is_empty(), "{a:?}");
    assert!(s.processes[0].feed.is_some());
}

proptest::proptest! {
    /// Comparing in place says what comparing the normalised strings says, for any text
    /// (ASCII UUIDs in any case and dashing, and text that is not ASCII at all).
    #[test]
    fn names_agrees_with_comparing_normalised_uuids(
        a in "(GPU-|MIG-|gpu-| )?[0-9a-fA-F-]{0,12}",
        b in "(GPU-|mig-)?[0-9a-fA-F-]{0,12}",
        other in "\\PC{0,8}",
        same in proptest::bool::ANY,
    ) {
        let b = if same { a.to_uppercase() } else { b };
        for (x, y) in [(&a, &b), (&other, &b), (&a, &other), (&other, &other)] {
            let named = normalize_uuid(y);
            proptest::prop_assert_eq!(names(x, &named), normalize_uuid(x) == named, "{:?} {:?}", x, y);
        }
    }
}

/// Feeds made from those of other samples (another framework, another device, a version
/// where there was none) are the feeds made new, and a process no feed speaks for any more
/// loses the one it had.
#[test]
fn feeds_reused_from_other_samples_are_the_feeds_made_new() {
    let mut s = one_gpu(7);
    s.processes.push(process(8, "GPU-test-1", Some(GIB)));
    s.feeds.push(record(
        7,
        vec![(
            device(0, Some("GPU-test-0"), None),
            stats(8 * GIB, 20 * GIB, 990.0, 999.8),
        )],
    ));
    let mut jax = record(
        8,
        vec![(
            device(1, Some("test-1"), None),
            stats(GIB / 2, GIB / 2, 990.0, 999.7),
        )],
    );
    if let Some(hello) = jax.hello.as_mut().map(std::sync::Arc::make_mut) {
        hello.framework = Some("jax".into());
        hello.framework_version = None;
        hello.backend = None;
    }
    s.feeds.push(jax);
    let mut other = s.clone();
    other.feeds.swap(0, 1);
    attach(&mut other);
    let mut spare: Vec<Box<FeedSample>> = other
        .processes
        .iter_mut()
        .filter_map(|p| p.feed.take())
        .collect();
    spare.push(Box::new(FeedSample {
        framework: "cupy-with-a-long-name".into(),
        framework_version: Some("13".into()),
        backend: "pool".into(),
        feed: 9,
        stats: stats(3 * GIB, 4 * GIB, 1.0, 2.0),
    }));
    let mut fresh = s.clone();
    let expected = attach(&mut fresh);
    let mut reused = s.clone();
    let got = attach_reusing(&mut reused, &mut spare);
    assert_eq!(got, expected);
    assert_eq!(reused.processes, fresh.processes);
    assert_eq!(reused.processes[1].feed.as_ref().unwrap().backend, "n/a");
    // The same sample attached again, its second feed gone: its process has none.
    reused.feeds.pop();
    let again = attach_reusing(&mut reused, &mut spare);
    assert!(reused.processes[1].feed.is_none());
    assert_eq!(again.statuses[1], FeedStatus::Absent);
    assert!(matches!(again.statuses[0], FeedStatus::Fresh { .. }));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Each pid's places found in the sorted index are its places in the list, in order:
    /// pids listed once, several times (one a device), or not at all.
    #[test]
    fn a_pid_s_positions_are_where_the_list_has_it(
        pids in proptest::collection::vec(0u32..12, 0..50),
        asked in proptest::collection::vec(0u32..14, 1..10),
    ) {
        let processes: Vec<ProcessSample> = pids
            .iter()
            .map(|&pid| process(pid, "GPU-test-0", Some(GIB)))
            .collect();
        let index = Positions::of(&processes);
        for pid in asked {
            let plainly: Vec<usize> = (0..processes.len()).filter(|&i| processes[i].pid == pid).collect();
            proptest::prop_assert_eq!(index.of_pid(pid).collect::<Vec<_>>(), plainly);
        }
    }
}

//! A hub whose thread starts when a socket is found ([`FeedHub::start_when_found`]): the
//! caller's scans until then, and the thread once there is something to read.

use super::tests::{
    config, hello, me, only, sample, wait_for, FakeAgent, TempDir, PATIENCE, RESCAN,
};
use super::*;
use crate::sample::feed::FoundVia;
use std::path::Path;

fn started(hub: &FeedHub) -> bool {
    lock(&hub.thread).is_some()
}

fn scans_run(hub: &FeedHub) -> u64 {
    hub.connects().1
}

/// With no socket anywhere, `watch_pids` scans on the caller's thread: at its first call, at
/// once for a pid new to the list, and not again before the rescan interval; no thread starts.
#[test]
fn with_nothing_found_the_caller_scans_and_no_thread_starts() {
    let tmp = TempDir::new();
    let dir = tmp.dir("strata-0", 0o700);
    let hub = FeedHub::start_when_found(FeedConfig {
        rescan: Duration::from_secs(3600),
        ..config(Some(&dir), Path::new("/nonexistent"), Path::new("/proc"))
    })
    .expect("hub");
    hub.watch_pids(&[(me(), None)]);
    assert_eq!(scans_run(&hub), 1, "the first call scans");
    hub.watch_pids(&[(me(), None)]);
    assert_eq!(scans_run(&hub), 1, "not again within the interval");
    hub.watch_pids(&[(me(), None), (1, None)]);
    assert_eq!(scans_run(&hub), 2, "a new pid is looked up at once");
    assert!(!started(&hub), "nothing found, no thread");
    assert!(hub.collect().is_empty());
}

/// An agent that starts after the first scan is found by a later one (the rescan interval
/// passed), which starts the thread: it connects, reads the hello and the samples.
#[test]
fn a_socket_found_by_the_callers_scan_starts_the_thread_which_reads_it() {
    let tmp = TempDir::new();
    let dir = tmp.dir("strata-0", 0o700);
    let hub = FeedHub::start_when_found(config(
        Some(&dir),
        Path::new("/nonexistent"),
        Path::new("/proc"),
    ))
    .expect("hub");
    hub.watch_pids(&[(me(), None)]);
    assert!(!started(&hub));
    let _agent = FakeAgent::serve(
        dir.join(format!("{}.sock", me())),
        vec![hello(me()), sample(1, false)],
    );
    // The collector's calls, one a sample: here faster than the interval, which the scans
    // keep to.
    let deadline = Instant::now() + PATIENCE;
    while !started(&hub) {
        assert!(Instant::now() < deadline, "no scan found the socket");
        hub.watch_pids(&[(me(), None)]);
        std::thread::sleep(RESCAN / 4);
    }
    let records = wait_for(&hub, "the feed's sample", |r| {
        r.len() == 1 && !r[0].devices.is_empty()
    });
    let feed = only(&records);
    assert_eq!(feed.state, FeedState::Connected);
    assert_eq!(feed.found_via, FoundVia::FeedDir);
    assert_eq!(feed.hello.as_ref().map(|h| h.pid), Some(me()));
    assert_eq!(feed.devices[0].latest.seq, 1);
}

/// `settle` (a snapshot's wait for every feed) starts the thread and waits for it as before.
#[test]
fn settle_starts_the_thread_and_waits_for_the_feeds() {
    let tmp = TempDir::new();
    let dir = tmp.dir("strata-0", 0o700);
    let _agent = FakeAgent::serve(
        dir.join(format!("{}.sock", me())),
        vec![hello(me()), sample(1, true), sample(2, false)],
    );
    let hub = FeedHub::start_when_found(FeedConfig {
        rescan: Duration::from_secs(3600),
        ..config(Some(&dir), Path::new("/nonexistent"), Path::new("/proc"))
    })
    .expect("hub");
    hub.settle(PATIENCE);
    assert!(started(&hub));
    let records = hub.collect();
    let feed = only(&records);
    assert_eq!(feed.state, FeedState::Connected);
    assert_eq!(feed.devices[0].latest.seq, 2);
}

/// More new pids than a caller's scan looks up start the thread at once, which looks them up
/// itself (each one's status and environment): the caller's sample is not held up by them.
/// As many as that are still looked up on the caller's thread.
#[test]
fn many_new_pids_at_once_are_left_to_the_thread() {
    let tmp = TempDir::new();
    let dir = tmp.dir("strata-0", 0o700);
    let hub = |_| {
        FeedHub::start_when_found(FeedConfig {
            rescan: Duration::from_secs(3600),
            ..config(Some(&dir), Path::new("/nonexistent"), Path::new("/proc"))
        })
        .expect("hub")
    };
    // Pids past the kernel's limit (2^22): never a process, looked up and not found.
    let pids =
        |n: usize| -> Vec<Watched> { (0..n).map(|i| (5_000_000 + i as u32, None)).collect() };
    let few = hub(());
    few.watch_pids(&pids(CALLER_SCAN_FRESH));
    assert!(!started(&few), "as many as a caller looks up: scanned here");
    assert_eq!(scans_run(&few), 1);
    let many = hub(());
    many.watch_pids(&pids(CALLER_SCAN_FRESH + 1));
    assert!(started(&many), "more: the thread's");
}

//! The hub's scan against real directories: a link is never followed and is noted once, a
//! dead socket is connected to twice and never again, a directory past its budget is said.
//! Other users' dirs are made with `chown` (the tests run as root).

use super::probe::{DIR_ATTEMPTS, PENDING_PER_DIR};
use super::tests::{config, hello, me, sample, FakeAgent, TempDir, PATIENCE};
use super::*;
use crate::feed::discover::DIR_ENTRIES;
use crate::sample::feed::SuspiciousEntry;
use std::fs;
use std::os::unix::fs::symlink;
use std::os::unix::net::UnixListener;
use std::path::Path;

/// `count` sockets nobody listens on in `dir`, owned by `uid`.
fn dead_sockets(dir: &Path, uid: u32, count: u32) {
    for n in 0..count {
        let path = dir.join(format!("{}.sock", 100_000 + n));
        drop(UnixListener::bind(&path).expect("bind"));
        std::os::unix::fs::lchown(&path, Some(uid), Some(uid)).expect("lchown");
    }
}

fn hub_in(tmp_root: &Path) -> FeedHub {
    FeedHub::start(FeedConfig {
        rescan: Duration::from_secs(3600), // scans only when asked
        ..config(None, tmp_root, Path::new("/proc"))
    })
    .expect("hub")
}

/// What the last scan noted, with no feed reached: one suspicious entry, at `link`.
fn the_link_alone_is_noted(hub: &FeedHub, link: &Path) -> SuspiciousEntry {
    assert!(
        hub.collect().is_empty(),
        "a link is never the way to a socket"
    );
    let notes = hub.scan_notes();
    assert_eq!(notes.suspicious.len(), 1, "{notes:?}");
    let noted = notes.suspicious[0].clone();
    assert_eq!(noted.path, link.display().to_string());
    noted
}

#[test]
fn a_linked_feed_dir_is_not_followed_and_is_noted_once() {
    let tmp = TempDir::new();
    let real = tmp.dir("real", 0o700);
    symlink(&real, tmp.0.join("strata-0")).expect("symlink");
    let _agent = FakeAgent::serve(
        real.join(format!("{}.sock", me())),
        vec![hello(me()), sample(1, false)],
    );
    let hub = hub_in(&tmp.0);
    for _ in 0..3 {
        hub.settle(PATIENCE);
        let link = the_link_alone_is_noted(&hub, &tmp.0.join("strata-0"));
        assert_eq!(
            (link.kind.as_str(), link.owner, link.in_place_of.as_str()),
            ("symbolic link", 0, "feed_dir")
        );
        assert_eq!(link.target.as_deref(), Some(real.to_str().expect("utf-8")));
    }
    assert_eq!(hub.connects().0, 0);
}

/// A watched process's feed dir is kept open from scan to scan (`kept.rs`) and let go when
/// its path changes: renamed away and a link put in its place, the next scan notes the link
/// and reaches no socket through it.
#[test]
fn a_feed_dir_replaced_by_a_link_between_scans_is_noted_not_followed() {
    let tmp = TempDir::new();
    let own = tmp.dir("strata-0", 0o700);
    let hub = hub_in(&tmp.0);
    hub.watch_pids(&[(me(), None)]);
    hub.settle(PATIENCE);
    assert!(hub.scan_notes().suspicious.is_empty());
    let real = tmp.dir("real", 0o700);
    let _agent = FakeAgent::serve(
        real.join(format!("{}.sock", me())),
        vec![hello(me()), sample(1, false)],
    );
    fs::rename(&own, tmp.0.join("old")).expect("rename");
    symlink(&real, &own).expect("symlink");
    hub.settle(PATIENCE);
    the_link_alone_is_noted(&hub, &own);
    assert_eq!(hub.connects().0, 0);
}

/// A feed dir looked for and not found is not looked for again while `/tmp` is unchanged;
/// made since, it is looked in at the next scan.
#[test]
fn a_feed_dir_made_after_a_scan_found_none_is_looked_in_at_the_next() {
    let tmp = TempDir::new();
    let hub = hub_in(&tmp.0);
    hub.watch_pids(&[(me(), None)]);
    hub.settle(PATIENCE);
    assert!(hub.collect().is_empty());
    let own = tmp.dir("strata-0", 0o700);
    let _agent = FakeAgent::serve(
        own.join(format!("{}.sock", me())),
        vec![hello(me()), sample(1, false)],
    );
    hub.settle(PATIENCE);
    super::tests::wait_for(&hub, "the feed of the dir made since", |r| {
        r.iter()
            .any(|f| f.pid() == Some(me()) && f.state == FeedState::Connected)
    });
}

#[test]
fn a_dead_socket_of_another_user_is_connected_to_twice_then_never_again() {
    let tmp = TempDir::new();
    let dir = tmp.dir("strata-1000", 0o700);
    std::os::unix::fs::chown(&dir, Some(1000), Some(1000)).expect("chown");
    let dead = 300u32;
    dead_sockets(&dir, 1000, dead);
    let hub = hub_in(&tmp.0);
    hub.settle(PATIENCE);
    let (connects, scans) = hub.connects();
    assert!(
        connects <= scans * DIR_ATTEMPTS as u64 && connects < 2 * u64::from(dead),
        "a scan tries at most {DIR_ATTEMPTS} sockets of one dir: {connects} in {scans} scans"
    );
    let deadline = Instant::now() + PATIENCE;
    while hub.connects().0 < 2 * u64::from(dead) {
        assert!(Instant::now() < deadline, "{:?} connects", hub.connects());
        hub.settle(PATIENCE);
        std::thread::sleep(Duration::from_millis(50));
    }
    let (confirmed, scans) = hub.connects();
    for _ in 0..10 {
        hub.settle(PATIENCE);
    }
    let (connects, later) = hub.connects();
    assert!(later >= scans + 10);
    assert_eq!(
        connects, confirmed,
        "a confirmed dead socket is not tried again"
    );
    assert_eq!(confirmed, 2 * u64::from(dead));
    assert!(hub.collect().is_empty());
    let left = fs::read_dir(&dir).expect("dir").count();
    assert_eq!(left, dead as usize, "another user's files are left alone");
}

#[test]
fn a_dir_past_its_budget_is_said_with_its_count() {
    let tmp = TempDir::new();
    let dir = tmp.dir("strata-0", 0o700);
    let extra = 10;
    for n in 0..DIR_ENTRIES + extra {
        fs::write(dir.join(format!("junk-{n}")), b"").expect("file");
    }
    let hub = hub_in(&tmp.0);
    hub.settle(PATIENCE);
    let notes = hub.scan_notes();
    assert_eq!(notes.cut_short.len(), 1, "{notes:?}");
    let cut = &notes.cut_short[0];
    assert_eq!(cut.dir, dir.display().to_string());
    assert_eq!(cut.read, DIR_ENTRIES as u64);
    assert_eq!(cut.entries, (DIR_ENTRIES + extra) as u64);
    assert!(!cut.entries_capped);
    for n in 0..extra + 1 {
        fs::remove_file(dir.join(format!("junk-{n}"))).expect("rm");
    }
    hub.settle(PATIENCE);
    assert!(
        hub.scan_notes().cut_short.is_empty(),
        "read again once it changed"
    );
}

/// Thousands of live sockets that other users' dirs refuse (the peer is not the dir's
/// owner) fill the hub's records; a watched process's own socket, looked up directly, is
/// still taken.
#[test]
fn a_full_hub_still_takes_a_watched_processs_own_socket() {
    let tmp = TempDir::new();
    let mut refused: Vec<UnixListener> = Vec::new();
    let per_dir = crate::feed::discover::MAX_FEEDS as u32 / 2 + 32;
    for uid in [1u32, 2] {
        let dir = tmp.dir(&format!("strata-{uid}"), 0o700);
        refused.extend(
            (0..per_dir).map(|n| {
                UnixListener::bind(dir.join(format!("{}.sock", 200_000 + n))).expect("bind")
            }),
        );
        std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).expect("chown");
    }
    let own = tmp.dir("strata-0", 0o700);
    let hub = FeedHub::start(config(None, &tmp.0, Path::new("/proc"))).expect("hub");
    let deadline = Instant::now() + Duration::from_secs(20);
    while hub.inner.lock().feeds.map.len() < crate::feed::discover::MAX_FEEDS {
        assert!(
            Instant::now() < deadline,
            "{} records",
            hub.inner.lock().feeds.map.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _agent = FakeAgent::serve(
        own.join(format!("{}.sock", me())),
        vec![hello(me()), sample(1, false)],
    );
    hub.watch_pids(&[(me(), None)]);
    let records = super::tests::wait_for(&hub, "the watched process's feed", |r| {
        r.iter().any(|f| f.pid() == Some(me()) && f.hello.is_some())
    });
    assert!(records
        .iter()
        .any(|f| f.pid() == Some(me()) && f.state == FeedState::Connected));
    drop(refused);
}

/// Hundreds of live sockets in one dir that accept and say nothing: at most
/// [`PENDING_PER_DIR`] of them hold a connection (a descriptor) at once while their hello is
/// awaited, and a watched process's own socket is read meanwhile.
#[test]
fn silent_peers_of_one_dir_hold_few_descriptors() {
    let tmp = TempDir::new();
    let dir = tmp.dir("strata-0", 0o700);
    let silent: Vec<UnixListener> = (0..300u32)
        .map(|n| UnixListener::bind(dir.join(format!("{}.sock", 300_000 + n))).expect("bind"))
        .collect();
    let _agent = FakeAgent::serve(
        dir.join(format!("{}.sock", me())),
        vec![hello(me()), sample(1, false)],
    );
    let hub = FeedHub::start(config(None, &tmp.0, Path::new("/proc"))).expect("hub");
    hub.watch_pids(&[(me(), None)]);
    let mut most = 0;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(50));
        most = most.max(hub.inner.lock().unsettled);
    }
    assert!(
        most <= PENDING_PER_DIR + 1,
        "{most} connections awaiting a hello at once"
    );
    let records = super::tests::wait_for(&hub, "the watched process's feed", |r| {
        r.iter().any(|f| f.pid() == Some(me()) && f.hello.is_some())
    });
    assert!(!records.is_empty());
    drop(silent);
}

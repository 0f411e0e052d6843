//! What a connected peer's bytes cost it: a line without its end is counted as oversized as
//! soon as it passes the limit, and one that runs on is dropped as a flood.

use super::tests::{hello, hub_on, me, only, sample, wait_for, FakeAgent, Step, TempDir};
use super::*;

#[test]
fn bytes_streamed_without_a_newline_are_oversized_then_a_flood() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let script = vec![
        hello(me()),
        sample(1, false),
        Step::Raw(vec![b'x'; 16 << 20]),
    ];
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), script);
    let hub = hub_on(&dir);
    let records = wait_for(&hub, "a dropped feed", |r| {
        r.len() == 1 && matches!(r[0].state, FeedState::Dropped { .. })
    });
    let feed = only(&records);
    assert_eq!(feed.counters.oversized, 1, "{:?}", feed.counters);
    assert_eq!(feed.counters.floods, 1, "{:?}", feed.counters);
    let FeedState::Dropped { reason } = &feed.state else {
        unreachable!()
    };
    assert!(reason.contains("without its end"), "{reason}");
}

#[test]
fn a_slow_line_without_its_end_is_counted_at_once() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let script = vec![
        hello(me()),
        sample(1, false),
        Step::Raw(vec![b'y'; 100 * 1024]),
    ];
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), script);
    let hub = hub_on(&dir);
    let records = wait_for(&hub, "the line counted", |r| {
        r.len() == 1 && r[0].counters.oversized == 1
    });
    assert_eq!(
        only(&records).state,
        FeedState::Connected,
        "within the byte rate"
    );
}

//! Requests to agents (PROTOCOL.md, "Inside the pool"): the line the monitor writes, the
//! answers it keeps, and the requests it will not send.

use super::tests::{hub_on, me, sample, wait_for, FakeAgent, Step, TempDir, PATIENCE};
use super::*;
use crate::sample::pool::SitesState;

fn hello_answering(pid: u32, requests: &str) -> Step {
    Step::Line(format!(
        r#"{{"v":1,"type":"hello","time":1000.0,"pid":{pid},"agent_version":"0.9.0","framework":"torch","settings":{{}},"devices":[{{"index":0}}],"requests":{requests}}}"#
    ))
}

/// An agent that answers a sites request the way PROTOCOL.md says: running, then done with
/// one site, both naming the request's id; what it read is kept for the test.
fn answering_agent(dir: &std::path::Path, asked: Arc<Mutex<Vec<String>>>) -> FakeAgent {
    let reply = Step::Reply(Arc::new(move |line: &str| {
        asked.lock().unwrap().push(line.to_string());
        let request: serde_json::Value = serde_json::from_str(line).expect("a JSON request");
        let id = request["id"].as_u64().expect("an id");
        vec![
            format!(
                r#"{{"v":1,"type":"sites","time":1001.0,"id":{id},"state":"running","started":1001.0,"seconds":2,"history":"agent"}}"#
            ),
            format!(
                r#"{{"v":1,"type":"sites","time":1003.0,"id":{id},"state":"done","started":1001.0,"seconds":2,"window":2.0,"history":"agent","entries":40,"dropped":0,"cost":{{"cpu":0.004,"gil_max":0.001,"snapshot":0.002}},"devices":[{{"index":0,"live":[{{"site":"train.py:118 in evaluate","via":["train.py:40 in main"],"bytes":4096,"count":2}}],"live_bytes":6144,"live_blocks":3,"live_unattributed":2048,"growth":[{{"site":"train.py:118 in evaluate","bytes":4096,"allocs":10,"frees":8}}],"growth_bytes":4096}}]}}"#
            ),
        ]
    }));
    FakeAgent::serve(
        dir.join(format!("{}.sock", me())),
        vec![
            hello_answering(me(), r#"["sites"]"#),
            sample(1, false),
            reply,
        ],
    )
}

#[test]
fn a_sites_request_is_one_line_and_its_answer_is_kept_by_id() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let _agent = answering_agent(&dir, Arc::clone(&asked));
    let hub = hub_on(&dir);
    wait_for(&hub, "the hello", |r| r.iter().any(|f| f.hello.is_some()));

    let id = hub.ask_sites(me(), 2, 20).expect("asked");
    let mut running = None;
    let done = hub
        .wait_sites(me(), id, PATIENCE, |r| running = Some(r.state))
        .expect("the window's summary");
    // Both lines may arrive in one read, so the running word may be seen or not; never
    // anything else.
    assert!(
        matches!(running, None | Some(SitesState::Running)),
        "{running:?}"
    );
    assert_eq!((done.id, done.state), (id, SitesState::Done));
    let grew = done.grew_most().expect("a site that grew");
    assert_eq!(
        (grew.0, grew.1.site.as_str(), grew.1.bytes),
        (0, "train.py:118 in evaluate", 4096)
    );

    let lines = asked.lock().unwrap().clone();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let request: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(request["type"], "sites_request");
    assert_eq!(request["v"], 1);
    assert_eq!(
        (
            request["id"].as_u64(),
            request["seconds"].as_u64(),
            request["top"].as_u64()
        ),
        (Some(id), Some(2), Some(20))
    );

    // The record a sample carries holds it, for the views and for recordings.
    let records = hub.collect();
    assert_eq!(records[0].sites.as_deref(), Some(&*done));
}

#[test]
fn a_request_the_agent_cannot_take_is_refused_here_in_one_line() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    // An agent of an earlier version: no `requests` in its hello.
    let _agent = FakeAgent::serve(
        dir.join(format!("{}.sock", me())),
        vec![hello_answering(me(), "[]"), sample(1, false)],
    );
    let hub = hub_on(&dir);
    wait_for(&hub, "the hello", |r| r.iter().any(|f| f.hello.is_some()));
    let err = hub.ask_sites(me(), 60, 20).expect_err("not asked");
    assert!(
        err.contains("takes no requests") && err.contains("0.9.0"),
        "{err}"
    );
    assert!(!err.contains('\n'));

    let err = hub
        .ask_sites(me() + 1_000_000, 60, 20)
        .expect_err("no such feed");
    assert!(err.contains("has no allocator feed"), "{err}");
}

#[test]
fn a_second_window_is_not_asked_while_one_runs() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let now = wall_clock();
    // It says a window runs, started now for a minute, and never ends it.
    let _agent = FakeAgent::serve(
        dir.join(format!("{}.sock", me())),
        vec![
            hello_answering(me(), r#"["sites"]"#),
            Step::Line(format!(
                r#"{{"v":1,"type":"sites","time":{now},"id":5,"state":"running","started":{now},"seconds":60,"history":"job"}}"#
            )),
        ],
    );
    let hub = hub_on(&dir);
    wait_for(&hub, "the running window", |r| {
        r.iter().any(|f| f.sites.is_some())
    });
    let err = hub.ask_sites(me(), 10, 20).expect_err("one at a time");
    assert!(
        err.contains("already running") && err.contains("ends in"),
        "{err}"
    );
}

#[test]
fn a_request_that_cannot_be_written_is_said_as_a_failed_window() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let gate = super::tests::Gate::default();
    let agent = FakeAgent::serve(
        dir.join(format!("{}.sock", me())),
        vec![
            hello_answering(me(), r#"["sites"]"#),
            sample(1, false),
            Step::Await(gate.clone()),
        ],
    );
    let hub = hub_on(&dir);
    wait_for(&hub, "the hello", |r| r.iter().any(|f| f.hello.is_some()));
    // The agent goes; its connection with it. Asked after the hub has seen it close, the
    // request is refused here; asked before, it fails on the write. Either way: one line.
    drop(agent);
    gate.open();
    match hub.ask_sites(me(), 10, 20) {
        Err(err) => assert!(
            err.contains("not connected") || err.contains("no allocator feed"),
            "{err}"
        ),
        Ok(id) => {
            let r = hub.wait_sites(me(), id, PATIENCE, |_| {});
            let err = match r {
                Ok(report) => report.reason.clone().unwrap_or_default(),
                Err(err) => err,
            };
            assert!(!err.is_empty() && !err.contains('\n'), "{err}");
        }
    }
}

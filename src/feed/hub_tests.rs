//! The hub against real Unix sockets in temporary directories, with fake agents: listeners
//! in threads of this test process, so the kernel names this process as the peer.

use super::probe::STALE_CONFIRM;
use super::*;
use crate::sample::feed::{FeedCounters, FoundVia};
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub(super) const RESCAN: Duration = Duration::from_millis(40);
/// How long a wait for what must come gives it: only a hang reaches it on a loaded machine.
pub(super) const PATIENCE: Duration = Duration::from_secs(30);

/// A directory under the system temp dir, removed on drop.
pub(super) struct TempDir(pub(super) PathBuf);

impl TempDir {
    pub(super) fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("strata-test-hub-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir(&path).expect("temp dir");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
        TempDir(path)
    }

    /// A subdirectory with `mode`, as an agent would make its feed dir.
    pub(super) fn dir(&self, rel: &str, mode: u32) -> PathBuf {
        let path = self.0.join(rel);
        fs::create_dir_all(&path).expect("mkdir");
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[derive(Clone)]
pub(super) enum Step {
    Line(String),
    /// Bytes as they are, with no newline added.
    Raw(Vec<u8>),
    Sleep(u64),
    /// Waits until the test opens the gate: what comes after it is sent when the test says,
    /// not after a time the test would have to outrun.
    Await(Gate),
    /// Reads one line the monitor wrote and answers it with the lines the function makes.
    Reply(Answer),
    Close,
}

/// How a fake agent answers a line the monitor wrote.
pub(super) type Answer = Arc<dyn Fn(&str) -> Vec<String> + Send + Sync>;

/// A gate a fake agent's script waits at ([`Step::Await`]) until the test opens it.
#[derive(Clone, Default)]
pub(super) struct Gate(Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    pub(super) fn open(&self) {
        let (open, changed) = &*self.0;
        *open.lock().unwrap_or_else(|e| e.into_inner()) = true;
        changed.notify_all();
    }

    /// Waits until the gate is open or `stop` is set.
    fn pass(&self, stop: &AtomicBool) {
        let (open, changed) = &*self.0;
        let mut is_open = open.lock().unwrap_or_else(|e| e.into_inner());
        while !*is_open && !stop.load(Ordering::Relaxed) {
            is_open = match changed.wait_timeout(is_open, Duration::from_millis(20)) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

/// An agent: a listener that plays `script` to every monitor that connects, then holds
/// the connection open until dropped.
pub(super) struct FakeAgent {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeAgent {
    pub(super) fn serve(path: PathBuf, script: Vec<Step>) -> Self {
        let listener = UnixListener::bind(&path).expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut handlers = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (script, flag) = (script.clone(), Arc::clone(&flag));
                        handlers.push(std::thread::spawn(move || play(stream, &script, &flag)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            for handler in handlers {
                let _ = handler.join();
            }
        });
        FakeAgent {
            path,
            stop,
            thread: Some(thread),
        }
    }
}

fn play(mut stream: UnixStream, script: &[Step], stop: &AtomicBool) {
    let _ = stream.set_nonblocking(false);
    for step in script {
        match step {
            Step::Line(line) => {
                if stream.write_all(format!("{line}\n").as_bytes()).is_err() {
                    return;
                }
            }
            Step::Raw(bytes) => {
                if stream.write_all(bytes).is_err() {
                    return;
                }
            }
            Step::Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
            Step::Await(gate) => gate.pass(stop),
            Step::Reply(answer) => {
                let mut line = String::new();
                let Ok(reader) = stream.try_clone() else {
                    return;
                };
                if BufReader::new(reader).read_line(&mut line).is_err() {
                    return;
                }
                for out in answer(line.trim_end()) {
                    if stream.write_all(format!("{out}\n").as_bytes()).is_err() {
                        return;
                    }
                }
            }
            Step::Close => return,
        }
    }
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl Drop for FakeAgent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = fs::remove_file(&self.path);
    }
}

pub(super) fn me() -> u32 {
    std::process::id()
}

pub(super) fn hello(pid: u32) -> Step {
    Step::Line(format!(
        r#"{{"v":1,"type":"hello","time":1000.0,"pid":{pid},"agent_version":"0.1.0","framework":"torch","settings":{{}},"devices":[{{"index":0,"uuid":null,"pci_bus_id":"00000000:18:00.0","name":"GPU"}}],"note":null}}"#
    ))
}

pub(super) fn sample(seq: u64, backlog: bool) -> Step {
    Step::Line(format!(
        r#"{{"v":1,"type":"sample","seq":{seq},"time":{}.5,"backlog":{backlog},"devices":[{{"index":0,"allocated":{},"reserved":{}}}]}}"#,
        1000 + seq,
        seq * 10,
        seq * 20
    ))
}

pub(super) fn config(feed_dir: Option<&Path>, tmp_root: &Path, proc_root: &Path) -> FeedConfig {
    FeedConfig {
        feed_dir: feed_dir.map(Path::to_path_buf),
        proc_root: proc_root.to_path_buf(),
        tmp_root: tmp_root.to_path_buf(),
        rescan: RESCAN,
    }
}

pub(super) fn hub_on(feed_dir: &Path) -> FeedHub {
    FeedHub::start(config(
        Some(feed_dir),
        Path::new("/nonexistent"),
        Path::new("/proc"),
    ))
    .expect("hub")
}

/// Collects until `pred` holds for the records, or fails after [`PATIENCE`].
pub(super) fn wait_for(
    hub: &FeedHub,
    what: &str,
    pred: impl Fn(&[FeedRecord]) -> bool,
) -> Vec<FeedRecord> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let records = hub.collect();
        if pred(&records) {
            return records;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {records:#?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub(super) fn only(records: &[FeedRecord]) -> &FeedRecord {
    assert_eq!(records.len(), 1, "{records:#?}");
    &records[0]
}

fn refusal(records: &[FeedRecord]) -> Option<&str> {
    match &only(records).state {
        FeedState::Refused { reason } => Some(reason),
        _ => None,
    }
}

fn wait_refused(hub: &FeedHub) -> String {
    let records = wait_for(hub, "a refusal", |r| r.len() == 1 && refusal(r).is_some());
    assert_eq!(
        only(&records).hello,
        None,
        "nothing a refused feed sent is used"
    );
    refusal(&records).unwrap_or_default().to_string()
}

fn seqs(d: &crate::sample::feed::DeviceFeed) -> (Vec<u64>, u64) {
    (d.earlier.iter().map(|s| s.seq).collect(), d.latest.seq)
}

#[test]
fn trusted_agent_hands_out_hello_then_backlog_once_in_order_then_latest() {
    let tmp = TempDir::new();
    let dir = tmp.dir("strata-0", 0o700);
    let script = vec![
        hello(me()),
        sample(1, true),
        sample(2, true),
        sample(3, true),
        sample(4, false),
    ];
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), script);
    // The default discovery as root: every <tmp_root>/strata-<N>.
    let hub = FeedHub::start(config(None, &tmp.0, Path::new("/proc"))).expect("hub");
    hub.settle(PATIENCE);
    let records = hub.collect();
    let feed = only(&records);
    assert_eq!(feed.state, FeedState::Connected);
    assert_eq!(feed.found_via, FoundVia::FeedDir);
    assert_eq!(
        feed.socket,
        dir.join(format!("{}.sock", me())).display().to_string()
    );
    assert_eq!(feed.pid(), Some(me()));
    assert_eq!(feed.nspid, Some(me()));
    assert_eq!(feed.hello.as_ref().map(|h| h.pid), Some(me()));
    assert!(feed.is_trusted());
    assert_eq!(feed.devices.len(), 1);
    assert_eq!(seqs(&feed.devices[0]), (vec![1, 2, 3], 4));
    assert_eq!(feed.devices[0].latest.time, 1004.5);
    assert_eq!(
        (
            feed.devices[0].latest.allocated,
            feed.devices[0].latest.reserved
        ),
        (40, Some(80))
    );
    assert_eq!(
        feed.counters,
        FeedCounters {
            lines: 5,
            samples: 4,
            ..Default::default()
        }
    );
    assert!(feed.connected_at.is_some() && feed.last_heard >= feed.connected_at);

    let again = hub.collect();
    assert_eq!(
        seqs(&only(&again).devices[0]),
        (vec![], 4),
        "the backlog goes out once"
    );
}

#[test]
fn settle_waits_for_a_backlog_that_arrives_in_pieces() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let mut script = vec![hello(me())];
    for seq in 1..=4 {
        script.push(Step::Sleep(10));
        script.push(sample(seq, true));
    }
    script.push(Step::Sleep(10));
    script.push(sample(5, false));
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), script);
    let hub = hub_on(&dir);
    hub.settle(PATIENCE);
    assert_eq!(
        seqs(&only(&hub.collect()).devices[0]),
        (vec![1, 2, 3, 4], 5)
    );
}

#[test]
fn a_large_backlog_written_line_by_line_arrives_whole_and_in_order() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let mut script = vec![hello(me())];
    script.extend((1..=2000).map(|seq| sample(seq, true)));
    script.push(sample(2001, false));
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), script);
    let hub = hub_on(&dir);
    hub.settle(PATIENCE);
    let records = hub.collect();
    let (earlier, latest) = seqs(&only(&records).devices[0]);
    assert_eq!(latest, 2001);
    assert_eq!(earlier, (1..=2000).collect::<Vec<u64>>());
    assert_eq!(only(&records).counters.rate_limited, 0);
}

#[test]
fn dir_with_group_or_other_bits_is_refused() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o755);
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), vec![hello(me())]);
    let hub = hub_on(&dir);
    let reason = wait_refused(&hub);
    assert_eq!(
        reason,
        format!(
            "feed dir {} has mode 0755, not 0700: the agent's owner should chmod 700 it",
            dir.display()
        )
    );
}

#[test]
fn dir_owned_by_another_uid_is_refused() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), vec![hello(me())]);
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).expect("chown");
    let hub = hub_on(&dir);
    let reason = wait_refused(&hub);
    assert!(reason.contains("is owned by uid 65534, not 0"), "{reason}");
}

/// A listener run as uid 65534, in a dir then given to root: the dir passes, the peer does not.
#[test]
fn peer_of_another_uid_is_refused() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).expect("chown");
    let socket = dir.join("4242.sock");
    let listener = "import socket,sys,time\ns=socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\ns.listen()\nprint('ready',flush=True)\ntime.sleep(30)";
    // A python3 that uid 65534 may run (not a shim under /root).
    let python = ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("python3 in /usr/bin, /usr/local/bin or /bin");
    let child = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            python,
            "-c",
            listener,
        ])
        .arg(&socket)
        .stdout(Stdio::piped())
        .spawn()
        .expect("setpriv python3");
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Kill(child);
    let mut ready = String::new();
    let stdout = child.0.stdout.take().expect("stdout");
    BufReader::new(stdout)
        .read_line(&mut ready)
        .expect("ready line");
    assert_eq!(ready.trim(), "ready");
    std::os::unix::fs::chown(&dir, Some(0), Some(0)).expect("chown");

    let hub = hub_on(&dir);
    let records = wait_for(&hub, "a refusal", |r| r.len() == 1 && refusal(r).is_some());
    let reason = refusal(&records).unwrap_or_default();
    assert!(
        reason.starts_with("peer uid 65534 is not the feed dir owner 0"),
        "{reason}"
    );
    assert_eq!(only(&records).peer.map(|p| p.uid), Some(65534));
    assert_eq!(
        only(&records).pid(),
        Some(child.0.id()),
        "the kernel's pid is shown"
    );
}

#[test]
fn hello_claiming_another_pid_is_refused() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let _agent = FakeAgent::serve(
        dir.join(format!("{}.sock", me())),
        vec![hello(1), sample(1, false)],
    );
    let hub = hub_on(&dir);
    let reason = wait_refused(&hub);
    assert_eq!(
        reason,
        format!(
            "hello claims pid 1 but the kernel says {}: not trusted",
            me()
        )
    );
}

#[test]
fn socket_not_named_after_the_agent_is_refused() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let _agent = FakeAgent::serve(dir.join("1.sock"), vec![hello(me())]);
    let hub = hub_on(&dir);
    let reason = wait_refused(&hub);
    assert!(reason.contains("socket is named 1.sock"), "{reason}");
}

#[test]
fn later_hello_with_another_pid_is_refused() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let script = vec![
        hello(me()),
        sample(1, false),
        Step::Sleep(100),
        hello(me() + 1),
    ];
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), script);
    let hub = hub_on(&dir);
    let reason = wait_refused(&hub);
    assert!(
        reason.starts_with(&format!("a later hello claims pid {}", me() + 1)),
        "{reason}"
    );
    assert!(only(&hub.collect()).devices.is_empty());
}

/// A hello past the line limit (an agent that cannot cut it): refused at once with its size,
/// not left waiting for a hello that never reads (before, the process then looked unfed, and
/// the user was told to run it under `strata run`, which they had).
#[test]
fn a_hello_over_the_line_limit_is_refused_with_its_size() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let long = Step::Line(format!(
        r#"{{"v":1,"type":"hello","time":1000.0,"pid":{},"agent_version":"0.1.0","framework":"torch","settings":{{"x":"{}"}},"devices":[]}}"#,
        me(),
        "a".repeat(70_000)
    ));
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), vec![long]);
    let hub = hub_on(&dir);
    let reason = wait_refused(&hub);
    assert!(
        reason.starts_with("its hello is 64 KiB or more, over the 64 KiB a line may hold"),
        "{reason}"
    );
}

#[test]
fn peer_closing_before_hello_is_refused() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), vec![Step::Close]);
    let hub = hub_on(&dir);
    assert!(wait_refused(&hub).starts_with("closed the connection before sending hello"));
}

#[test]
fn stale_socket_of_ours_in_a_feed_dir_is_skipped_and_removed() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let stale = dir.join("4242.sock");
    drop(UnixListener::bind(&stale).expect("bind"));
    let not_a_socket = dir.join("4243.sock");
    fs::write(&not_a_socket, b"").expect("file");
    let hub = hub_on(&dir);
    let deadline = Instant::now() + PATIENCE;
    while stale.exists() {
        assert!(Instant::now() < deadline, "stale socket was not removed");
        assert!(hub.collect().is_empty(), "a stale socket is not a feed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(not_a_socket.exists(), "only sockets are touched");
    assert!(hub.collect().is_empty());
}

#[test]
fn malformed_oversized_unknown_and_invalid_lines_are_counted_and_skipped() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let line = |s: &str| Step::Line(s.to_string());
    let script = vec![
        hello(me()),
        line("not json at all"),
        line("[1,2,3]"),
        Step::Line(format!(
            r#"{{"v":1,"type":"note","text":"{}"}}"#,
            "x".repeat(70_000)
        )),
        line(r#"{"v":2,"type":"sample","seq":1,"time":1,"devices":[]}"#),
        line(r#"{"v":1,"type":"heartbeat"}"#),
        line(
            r#"{"v":1,"type":"sample","seq":1,"time":1,"devices":[{"index":0,"allocated":-5,"reserved":1}]}"#,
        ),
        line(r#"{"v":1,"type":"sample","seq":1,"time":1,"devices":[{"index":0,"reserved":1}]}"#),
        Step::Line("\u{0}\u{1}\u{fffd}".into()),
        sample(9, false),
    ];
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), script);
    let hub = hub_on(&dir);
    hub.settle(PATIENCE);
    let records = wait_for(&hub, "the last sample", |r| {
        r.len() == 1 && r[0].devices.len() == 1
    });
    let feed = only(&records);
    assert_eq!(feed.state, FeedState::Connected);
    let want = FeedCounters {
        lines: 2,
        samples: 1,
        oversized: 1,
        malformed: 3,
        unknown_version: 1,
        unknown_type: 1,
        invalid: 2,
        ..Default::default()
    };
    assert_eq!(feed.counters, want);
    assert_eq!(seqs(&feed.devices[0]), (vec![], 9));
}

#[test]
fn a_flood_is_rate_limited_then_dropped() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let mut script = vec![hello(me())];
    let tiny = Step::Line("{}".into());
    // A burst past the allowance, then bursts again after short pauses: three episodes.
    script.extend(std::iter::repeat_n(tiny.clone(), 9000));
    for _ in 0..3 {
        script.push(Step::Sleep(120));
        script.extend(std::iter::repeat_n(tiny.clone(), 50));
    }
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), script);
    let hub = hub_on(&dir);
    let records = wait_for(&hub, "a drop", |r| {
        r.len() == 1 && matches!(r[0].state, FeedState::Dropped { .. })
    });
    let feed = only(&records);
    assert_eq!(feed.counters.floods, 3);
    assert!(
        feed.counters.rate_limited >= 3 && feed.counters.invalid >= 8000,
        "{:?}",
        feed.counters
    );
    assert!(
        matches!(&feed.state, FeedState::Dropped { reason } if reason.contains("retried in 60 s"))
    );
    assert_eq!(feed.hello.as_ref().map(|h| h.pid), Some(me()));
    // Not retried while its socket stays: the record stays dropped.
    std::thread::sleep(RESCAN * 4);
    assert!(matches!(
        only(&hub.collect()).state,
        FeedState::Dropped { .. }
    ));
}

#[test]
fn bye_and_eof_close_the_feed() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let bye = Step::Line(r#"{"v":1,"type":"bye","time":1005.0,"reason":"exit"}"#.into());
    let _bye = FakeAgent::serve(
        dir.join(format!("{}.sock", me())),
        vec![hello(me()), sample(1, false), bye],
    );
    let hub = hub_on(&dir);
    let records = wait_for(&hub, "bye", |r| {
        r.len() == 1 && matches!(r[0].state, FeedState::Closed { .. })
    });
    let feed = only(&records);
    assert_eq!(
        feed.state,
        FeedState::Closed {
            reason: "bye: exit".into()
        }
    );
    assert!(feed.is_trusted(), "what a closed feed said stays usable");
    assert_eq!(feed.devices[0].latest.seq, 1);

    let other = TempDir::new();
    let dir = other.dir("feeds", 0o700);
    let _eof = FakeAgent::serve(
        dir.join(format!("{}.sock", me())),
        vec![hello(me()), Step::Close],
    );
    let hub = hub_on(&dir);
    let records = wait_for(&hub, "eof", |r| {
        r.len() == 1 && matches!(r[0].state, FeedState::Closed { .. })
    });
    assert_eq!(
        only(&records).state,
        FeedState::Closed {
            reason: "connection closed".into()
        }
    );
}

#[test]
fn an_oom_is_handed_out_then_kept_as_the_latest() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let oom = Step::Line(
        r#"{"v":1,"type":"oom","time":1001.2,"seq":8,"index":0,"requested":1024,"device_free":0,"device_total":4096,"stats":null,"backlog":true}"#.into(),
    );
    let _agent = FakeAgent::serve(
        dir.join(format!("{}.sock", me())),
        vec![hello(me()), oom, sample(9, false)],
    );
    let hub = hub_on(&dir);
    hub.settle(PATIENCE);
    let first = hub.collect();
    assert_eq!(
        only(&first)
            .ooms
            .iter()
            .map(|o| (o.seq, o.requested))
            .collect::<Vec<_>>(),
        vec![(8, Some(1024))]
    );
    assert_eq!(only(&hub.collect()).ooms.len(), 1);
}

#[test]
fn two_monitors_read_one_agent_at_once() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let script = vec![hello(me()), sample(1, true), sample(2, false)];
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), script);
    let (one, two) = (hub_on(&dir), hub_on(&dir));
    one.settle(PATIENCE);
    two.settle(PATIENCE);
    for hub in [&one, &two] {
        let records = hub.collect();
        assert_eq!(only(&records).state, FeedState::Connected);
        assert_eq!(seqs(&only(&records).devices[0]), (vec![1], 2));
    }
}

/// A fake `/proc/<pid>` for this process whose innermost pid is 7, as in a container.
fn fake_proc(tmp: &TempDir, root: &Path, environ: &[u8]) -> PathBuf {
    let proc_root = tmp.dir("proc", 0o755);
    let pid_dir = proc_root.join(me().to_string());
    fs::create_dir(&pid_dir).expect("mkdir");
    let status = format!(
        "Name:\tpython\nPid:\t{}\nUid:\t0\t0\t0\t0\nNSpid:\t{}\t7\n",
        me(),
        me()
    );
    fs::write(pid_dir.join("status"), status).expect("status");
    fs::write(pid_dir.join("environ"), environ).expect("environ");
    symlink(root, pid_dir.join("root")).expect("root link");
    proc_root
}

#[test]
fn a_job_in_a_container_is_found_through_its_root() {
    let tmp = TempDir::new();
    let root = tmp.dir("container", 0o755);
    let feeds = tmp.dir("container/tmp/strata-0", 0o700);
    let custom = tmp.dir("container/scratch/feeds", 0o700);
    let _default = FakeAgent::serve(feeds.join("7.sock"), vec![hello(7), sample(1, false)]);
    let _custom = FakeAgent::serve(custom.join("7.sock"), vec![hello(7), sample(2, false)]);
    let proc_root = fake_proc(&tmp, &root, b"PATH=/bin\0STRATA_FEED_DIR=/scratch/feeds\0");
    let host_tmp = tmp.dir("host-tmp", 0o755);
    let hub = FeedHub::start(config(None, &host_tmp, &proc_root)).expect("hub");
    hub.settle(PATIENCE);
    assert!(
        hub.collect().is_empty(),
        "nothing before the pid is watched"
    );
    hub.watch_pids(&[(me(), None), (me(), None)]);
    hub.settle(PATIENCE);
    let records = hub.collect();
    assert_eq!(records.len(), 2, "{records:#?}");
    let mut latest: Vec<u64> = records.iter().map(|r| r.devices[0].latest.seq).collect();
    latest.sort();
    assert_eq!(latest, vec![1, 2]);
    for feed in &records {
        assert_eq!(feed.state, FeedState::Connected);
        assert_eq!(feed.found_via, FoundVia::ProcessRoot);
        assert_eq!((feed.pid(), feed.nspid), (Some(me()), Some(7)));
        let through_root = proc_root.join(me().to_string()).join("root");
        assert!(
            feed.socket.starts_with(&through_root.display().to_string()),
            "{}",
            feed.socket
        );
    }
}

/// A pid that is now another process (another start time) is looked up by what the new one's
/// `/proc` says, at once: not by what was read of the old one, until that grew old.
#[test]
fn a_pid_taken_by_another_process_is_looked_up_anew_at_once() {
    let tmp = TempDir::new();
    let root = tmp.dir("container", 0o755);
    let feeds = tmp.dir("container/tmp/strata-0", 0o700);
    let _agent = FakeAgent::serve(feeds.join("8.sock"), vec![hello(8), sample(1, false)]);
    let proc_root = fake_proc(&tmp, &root, b"");
    let hub = FeedHub::start(FeedConfig {
        rescan: Duration::from_secs(3600), // scans only when asked
        ..config(None, &tmp.dir("host-tmp", 0o755), &proc_root)
    })
    .expect("hub");
    hub.watch_pids(&[(me(), Some(100))]);
    hub.settle(PATIENCE);
    assert!(
        hub.collect().is_empty(),
        "the first process is 7 in its namespace"
    );
    // The pid now names a process that is 8 in its namespace.
    let status = format!(
        "Name:\tpython\nPid:\t{}\nUid:\t0\t0\t0\t0\nNSpid:\t{}\t8\n",
        me(),
        me()
    );
    fs::write(proc_root.join(me().to_string()).join("status"), status).expect("status");
    hub.watch_pids(&[(me(), Some(200))]);
    hub.settle(PATIENCE);
    let records = hub.collect();
    let feed = only(&records);
    assert_eq!((feed.pid(), feed.nspid), (Some(me()), Some(8)));
}

#[test]
fn a_stale_socket_seen_through_a_process_root_is_not_removed() {
    let tmp = TempDir::new();
    let root = tmp.dir("container", 0o755);
    let feeds = tmp.dir("container/tmp/strata-0", 0o700);
    drop(UnixListener::bind(feeds.join("7.sock")).expect("bind"));
    let proc_root = fake_proc(&tmp, &root, b"");
    let hub = FeedHub::start(config(None, &tmp.dir("host-tmp", 0o755), &proc_root)).expect("hub");
    hub.watch_pids(&[(me(), None)]);
    for _ in 0..3 {
        hub.settle(PATIENCE);
        std::thread::sleep(STALE_CONFIRM);
    }
    assert!(hub.collect().is_empty());
    assert!(
        feeds.join("7.sock").exists(),
        "another namespace's file is left alone"
    );
}

#[test]
fn the_same_socket_found_twice_is_one_feed_shown_by_its_feed_dir() {
    let tmp = TempDir::new();
    let root = tmp.dir("container", 0o755);
    let feeds = tmp.dir("container/tmp/strata-0", 0o700);
    let _agent = FakeAgent::serve(feeds.join("7.sock"), vec![hello(7), sample(1, false)]);
    let proc_root = fake_proc(&tmp, &root, b"");
    let hub = FeedHub::start(config(Some(&feeds), &tmp.0, &proc_root)).expect("hub");
    hub.watch_pids(&[(me(), None)]);
    hub.settle(PATIENCE);
    let records = hub.collect();
    let feed = only(&records);
    assert_eq!(feed.found_via, FoundVia::FeedDir);
    assert_eq!(feed.socket, feeds.join("7.sock").display().to_string());
    assert_eq!(feed.state, FeedState::Connected);
}

#[test]
fn settle_and_wait_newer_return_promptly_and_respect_their_timeout() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let empty = hub_on(&dir);
    let start = Instant::now();
    empty.settle(PATIENCE);
    empty.wait_newer(f64::MAX, PATIENCE);
    assert!(
        start.elapsed() < PATIENCE,
        "nothing to wait for: both return at once"
    );

    let gate = Gate::default();
    let script = vec![
        hello(me()),
        sample(1, false),
        Step::Await(gate.clone()),
        sample(2, false),
    ];
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), script);
    let hub = hub_on(&dir);
    hub.settle(PATIENCE);
    assert_eq!(only(&hub.collect()).devices[0].latest.seq, 1);
    let start = Instant::now();
    gate.open();
    hub.wait_newer(1002.0, PATIENCE);
    assert!(start.elapsed() < PATIENCE, "the next sample ends the wait");
    assert_eq!(only(&hub.collect()).devices[0].latest.seq, 2);

    let start = Instant::now();
    hub.wait_newer(5000.0, Duration::from_millis(100));
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(100) && waited < PATIENCE,
        "{waited:?}"
    );
}

#[test]
fn dropping_the_hub_stops_its_thread() {
    let tmp = TempDir::new();
    let dir = tmp.dir("feeds", 0o700);
    let _agent = FakeAgent::serve(dir.join(format!("{}.sock", me())), vec![hello(me())]);
    let hub = FeedHub::start(FeedConfig {
        rescan: Duration::from_secs(3600),
        ..config(Some(&dir), &tmp.0, Path::new("/proc"))
    })
    .expect("hub");
    hub.settle(PATIENCE);
    let inner = Arc::clone(&hub.inner);
    let start = Instant::now();
    drop(hub);
    assert!(start.elapsed() < PATIENCE);
    assert_eq!(Arc::strong_count(&inner), 1, "the thread has ended");
}

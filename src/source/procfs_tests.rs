//! `/proc` read as the collector reads it: identities, the descriptors kept open, the spare
//! and the lean reads, against real child processes and stand-in `/proc` trees.

use super::*;

/// Waits for `child`'s `exec`: between fork and exec a child has no command line and no
/// memory of its own yet. An event, waited for within a cap, not a time.
fn wait_exec(child: &std::process::Child) {
    let cmdline = format!("/proc/{}/cmdline", child.id());
    for _ in 0..10_000 {
        if fs::read(&cmdline).is_ok_and(|c| !c.is_empty()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// `sleep ARG`, once it runs as `sleep`.
fn sleeping(arg: &str) -> std::process::Child {
    let child = std::process::Command::new("sleep")
        .arg(arg)
        .spawn()
        .expect("sleep");
    wait_exec(&child);
    child
}

/// Starts samples until one whose rotation falls on `pid` (`due`), or does not.
fn sample_until(procfs: &mut ProcFs, pid: u32, due: bool) {
    loop {
        procfs.next_sample();
        if (procfs.round + u64::from(pid)).is_multiple_of(READ_EVERY) == due {
            break;
        }
    }
}

/// The descriptor table holds, once reserved, every descriptor the sampler may keep (the
/// kernel's `FDSize:`), within the soft limit.
#[test]
fn the_descriptor_table_is_grown_for_the_budget() {
    let fd_size = || {
        read_lossy(Path::new("/proc/self/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("FDSize:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
            })
            .expect("FDSize")
    };
    let soft = soft_descriptor_limit().expect("the soft descriptor limit");
    reserve_descriptors();
    let want = (open_budget() * 2 + 256).min(soft);
    assert!(fd_size() >= want, "{} < {want}", fd_size());
}

#[test]
fn a_process_off_the_screen_is_read_only_when_due_or_exited() {
    let mut child = sleeping("300");
    let pid = child.id();
    let mut procfs = ProcFs::default();
    // A sample whose rotation does not fall on `pid`.
    let next = |procfs: &mut ProcFs| sample_until(procfs, pid, false);
    next(&mut procfs);
    // Read whole once (wanted here; off the screen, at a sample with spare).
    let first = procfs.identity_lean(pid, true);
    assert!(
        first.visible && first.cpu_ticks.is_some() && first.command.is_some(),
        "a first look reads: {first:?}"
    );
    next(&mut procfs);
    let lean = procfs.identity_lean(pid, false);
    let shown = procfs.identity_lean(pid, true);
    assert!(
        shown.cpu_ticks.is_some() && shown.state.is_some(),
        "{shown:?}"
    );
    if procfs.liveness.is_none() {
        // Another PID namespace than the host's: nothing says the process still runs,
        // so it is read at every sample.
        assert!(lean.cpu_ticks.is_some(), "{lean:?}");
    } else {
        assert!(lean.visible, "{lean:?}");
        assert_eq!(
            (lean.cpu_ticks, lean.resident, &lean.state),
            (None, None, &None)
        );
        assert_eq!(lean.start_time, first.start_time);
        assert_eq!(lean.command, first.command);
        // Due in the rotation: read though off the screen.
        sample_until(&mut procfs, pid, true);
        assert!(procfs.identity_lean(pid, false).cpu_ticks.is_some());
    }
    child.kill().expect("kill");
    // Defunct until waited for: its exit is the event waited on.
    crate::source::liveness::tests::wait_defunct(pid);
    next(&mut procfs);
    let defunct = procfs.identity_lean(pid, false);
    assert_eq!(defunct.state.as_deref(), Some("Z"), "{defunct:?}");
    child.wait().expect("reaped");
    next(&mut procfs);
    assert!(
        !procfs.identity_lean(pid, false).visible,
        "an exited, reaped pid is gone"
    );
}

/// A sample whose processes are all on the screen reads each and asks nothing of their
/// descriptors; one off the screen asks, once a sample. One that exited while on the screen
/// is read again, not vouched for, once it leaves it.
#[test]
fn processes_on_the_screen_ask_nothing_of_their_descriptors() {
    let mut child = sleeping("300");
    let pid = child.id();
    let mut procfs = ProcFs::default();
    for _ in 0..3 {
        procfs.next_sample();
        assert!(procfs.identity_lean(pid, true).cpu_ticks.is_some());
    }
    let Some(polls) = procfs.liveness.as_ref().map(|l| l.polls) else {
        // Another PID namespace than the host's: no descriptors, every process read.
        child.kill().expect("kill");
        child.wait().expect("reaped");
        return;
    };
    assert_eq!(polls, 0);
    procfs.next_sample();
    let _ = procfs.identity_lean(pid, false);
    let _ = procfs.identity_lean(pid, false);
    assert_eq!(procfs.liveness.as_ref().map(|l| l.polls), Some(1));
    procfs.next_sample();
    assert!(procfs.identity_lean(pid, true).visible);
    child.kill().expect("kill");
    child.wait().expect("reaped");
    procfs.next_sample();
    let gone = procfs.identity_lean(pid, false);
    assert!(
        !gone.visible,
        "exited on the screen, read again off it: {gone:?}"
    );
}

/// The first sample reads a process off the screen through `stat` and the executable,
/// not its user and command line; the next sample reads it whole, within its spare, and
/// it stays so. With no spare left, neither a first look nor the rotation reads it whole;
/// wanted, or at a sample with spare, it is.
#[test]
fn a_first_look_off_the_screen_leaves_user_and_command_for_later() {
    let child = sleeping("300");
    let pid = child.id();
    let mut procfs = ProcFs::default();
    procfs.next_sample();
    let first = procfs.identity_lean(pid, false);
    assert!(first.visible && first.start_time.is_some(), "{first:?}");
    assert!(
        first.cpu_ticks.is_some() && first.state.is_some(),
        "{first:?}"
    );
    assert_eq!(
        (&first.uid, &first.user, &first.command),
        (&None, &None, &None)
    );
    assert!(
        first
            .executable
            .as_deref()
            .is_some_and(|e| e.ends_with("sleep")),
        "the executable is read at the first look: {first:?}"
    );
    procfs.next_sample();
    let second = procfs.identity_lean(pid, false);
    assert!(
        second.uid.is_some() && second.user.is_some(),
        "the second sample reads it whole: {second:?}"
    );
    assert_eq!(second.command.as_deref(), Some("sleep 300"));
    assert_eq!(procfs.whole_spare, WHOLE_SPARE - 1);
    procfs.next_sample();
    let again = procfs.identity_lean(pid, false);
    assert_eq!(again.command.as_deref(), Some("sleep 300"), "{again:?}");
    assert_eq!(again.user, second.user);
    assert_eq!(procfs.whole_spare, WHOLE_SPARE, "read whole once");
    // Another process, first looked at with no spare left, then due with none: its
    // `stat` is read, its user and command not; at a sample with spare, or wanted, they
    // are.
    let other = sleeping("301");
    let other_pid = other.id();
    sample_until(&mut procfs, other_pid, false);
    procfs.whole_spare = 0;
    assert_eq!(procfs.identity_lean(other_pid, false).command, None);
    sample_until(&mut procfs, other_pid, true);
    procfs.whole_spare = 0;
    let due = procfs.identity_lean(other_pid, false);
    assert!(due.cpu_ticks.is_some(), "{due:?}");
    if procfs.liveness.is_some() {
        assert_eq!((&due.user, &due.command), (&None, &None), "{due:?}");
    }
    sample_until(&mut procfs, other_pid, false);
    assert_eq!(
        procfs.identity_lean(other_pid, false).command.as_deref(),
        Some("sleep 301")
    );
    let third = sleeping("302");
    let third_pid = third.id();
    sample_until(&mut procfs, third_pid, false);
    procfs.whole_spare = 0;
    assert_eq!(
        procfs.identity_lean(third_pid, true).command.as_deref(),
        Some("sleep 302"),
        "wanted, it is read whole with no spare"
    );
    for mut c in [child, other, third] {
        c.kill().expect("kill");
        c.wait().expect("reaped");
    }
}

#[test]
fn stat_with_parentheses_and_spaces_in_the_name() {
    let stat = "4242 (python (rank 0)) S 1 4242 4242 0 -1 4194560 9 0 0 0 3 1 0 0 20 0 8 0 987654 1000 100";
    let (comm, state, start) = parse_stat(stat);
    assert_eq!(comm.as_deref(), Some("python (rank 0)"));
    assert_eq!(state.as_deref(), Some("S"));
    assert_eq!(start, Some(987_654));
    assert_eq!(Stat::parse(stat).ppid, Some(1));
    assert_eq!(Stat::parse("nonsense").ppid, None);
}

/// A wrapper that `exec`s its job keeps its PID and start time: what it runs is read
/// again, not kept from before (a shell script turned Python must be seen as Python).
#[test]
fn an_exec_is_seen_though_pid_and_start_time_stay() {
    use std::io::Write;
    let mut child = std::process::Command::new("bash")
        .args(["-c", "read line; exec -a 'python3 train.py' sleep 300"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("bash");
    let pid = child.id();
    let mut procfs = ProcFs::default();
    let before = procfs.identity(pid);
    assert!(
        before
            .executable
            .as_deref()
            .is_some_and(|e| e.ends_with("bash")),
        "{before:?}"
    );
    let _ = child.stdin.take().expect("stdin").write_all(b"go\n");
    let comm = format!("/proc/{pid}/comm");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_to_string(&comm).unwrap_or_default().trim() != "sleep" {
        assert!(std::time::Instant::now() < deadline, "no exec");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let after = procfs.identity(pid);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(after.start_time, before.start_time);
    assert!(
        after
            .executable
            .as_deref()
            .is_some_and(|e| e.ends_with("sleep")),
        "{after:?}"
    );
    assert_eq!(after.command.as_deref(), Some("python3 train.py 300"));
}

/// A process name is any bytes but `/` and NUL: one that is not UTF-8 (a hostile or a
/// Latin-1 name) is still a live process with its CPU time and memory, not an invisible one.
#[test]
fn a_name_that_is_not_utf8_is_still_a_process() {
    use std::os::unix::ffi::OsStrExt;
    let dir = crate::fixtures::TempDir::new("procfs-utf8");
    let name = std::ffi::OsStr::from_bytes(b"train\xff\xfe");
    let link = dir.join(name);
    std::os::unix::fs::symlink("/bin/sleep", &link).expect("link");
    let mut child = std::process::Command::new(&link)
        .arg("30")
        .spawn()
        .expect("sleep runs");
    wait_exec(&child);
    let mut procfs = ProcFs::default();
    let who = procfs.identity(child.id());
    let _ = child.kill();
    let _ = child.wait();
    assert!(who.visible && !who.hidden, "{who:?}");
    assert!(
        who.start_time.is_some() && who.cpu_ticks.is_some(),
        "{who:?}"
    );
    assert!(who.resident.is_some_and(|r| r > 0), "{who:?}");
}

/// A `stat` kept open is read anew at each look: a busy process's CPU time grows through
/// it, and once the process has exited and been reaped the pid reads as gone, not as
/// the last line read.
#[test]
fn a_kept_stat_reads_the_present_and_an_exit() {
    let mut busy = std::process::Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .expect("sh runs");
    let pid = busy.id();
    let mut procfs = ProcFs::default();
    let first = procfs.identity(pid);
    assert!(procfs.open_stats.contains_key(&pid), "kept open");
    let before = first.cpu_ticks.expect("CPU time");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let later = loop {
        let now = procfs.identity(pid);
        if now.cpu_ticks.expect("CPU time") > before {
            break now;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no CPU time in a minute"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(later.start_time, first.start_time);
    let _ = busy.kill();
    let _ = busy.wait();
    let gone = procfs.identity(pid);
    assert!(!gone.visible, "{gone:?}");
    assert!(!procfs.open_stats.contains_key(&pid), "dropped once gone");
}

#[test]
fn every_field_read_is_the_one_proc5_numbers() {
    // Fields 3.. after the name: 14, 15 (utime, stime) = 30, 12; 22 (start) = 987654;
    // 24 (rss) = 2500.
    let stat = "7 (a) b) R 3 7 7 0 -1 4194560 9 0 0 0 30 12 0 0 20 0 8 0 987654 1000 2500 18446744073709551615\n";
    let got = Stat::parse(stat);
    assert_eq!(
        got,
        Stat {
            comm: Some("a) b"),
            state: Some("R".into()),
            ppid: Some(3),
            cpu_ticks: Some(42),
            start_time: Some(987_654),
            rss_pages: Some(2500),
        }
    );
    // Cut short: what is there is read, the rest is unknown, not 0.
    let short = Stat::parse("7 (a) S 1 7 7 0 -1 0 0 0 0 0 5");
    assert_eq!(
        (short.ppid, short.cpu_ticks, short.rss_pages),
        (Some(1), None, None)
    );
}

#[test]
fn garbage_stat_gives_nothing() {
    assert_eq!(parse_stat("nonsense"), (None, None, None));
    assert_eq!(parse_stat(") x ("), (None, None, None));
}

#[test]
fn this_process_is_visible_and_a_huge_pid_is_not() {
    let mut procfs = ProcFs::default();
    let me = procfs.identity(std::process::id());
    assert!(me.visible);
    assert!(me.start_time.is_some());
    assert!(me.command.is_some());
    assert_eq!(me.ppid, Some(std::os::unix::process::parent_id()));
    // SAFETY: getuid has no preconditions.
    assert_eq!(me.uid, Some(unsafe { libc::getuid() }));
    assert!(!procfs.identity(4_000_000_000).visible);
}

#[test]
fn a_refused_or_hidden_pid_is_hidden_and_a_gone_one_is_not() {
    let hidden = absent(ErrorKind::PermissionDenied, || {
        unreachable!("no probe needed")
    });
    assert!(hidden.hidden && !hidden.visible);
    assert!(
        absent(ErrorKind::NotFound, || true).hidden,
        "hidepid=2: exists"
    );
    assert!(!absent(ErrorKind::NotFound, || false).hidden, "gone");
    assert!(!absent(ErrorKind::InvalidData, || true).hidden);
}

#[test]
fn exists_asks_the_kernel_and_never_signals_a_group() {
    assert!(exists(std::process::id()));
    assert!(exists(1), "init exists (EPERM counts as existing)");
    // kill(0, ..) is this process group and kill(-1, ..) every process: never asked.
    assert!(!exists(0));
    assert!(!exists(u32::MAX));
    assert!(!exists(4_194_305), "above PID_MAX_LIMIT");
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("true runs");
    let pid = child.id();
    child.wait().expect("reaped");
    assert!(!exists(pid), "an exited, reaped pid is gone");
}

#[test]
fn nvml_pids_are_looked_up_only_in_the_initial_namespace() {
    let init = || Some(INITIAL_PID_NAMESPACE.to_string());
    let other = || Some("pid:[4026532999]".to_string());
    assert_eq!(pids_are_host(init(), false, None, false), Some(true));
    let own_init = Some(INITIAL_PID_NAMESPACE);
    assert_eq!(pids_are_host(other(), false, own_init, true), Some(false));
    // /proc/1 unreadable: the host's /proc in a container shows kthreadd.
    let elsewhere = Some("pid:[4026532999]");
    assert_eq!(pids_are_host(None, true, elsewhere, false), Some(true));
    // Neither (not root, hidepid): this process's own namespace decides.
    assert_eq!(pids_are_host(None, false, own_init, true), Some(true));
    assert_eq!(pids_are_host(None, false, own_init, false), Some(false));
    assert_eq!(pids_are_host(None, false, elsewhere, true), Some(false));
    assert_eq!(pids_are_host(None, false, None, true), None);
    assert!(is_kthreadd(
        "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 1"
    ));
    assert!(!is_kthreadd(
        "2 (kthreadd) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1"
    ));
    assert!(!is_kthreadd("2 (sh) S 0 0 0"));
}

#[test]
fn another_namespaces_proc_is_not_searched() {
    let mut procfs = ProcFs {
        host_pids: Some(false),
        ..ProcFs::default()
    };
    let me = procfs.identity(std::process::id());
    assert_eq!(me, Identity::default(), "no identity by number");
}

#[test]
fn users_come_from_passwd() {
    let passwd = "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n";
    assert_eq!(user_from_passwd(passwd, 1000).as_deref(), Some("alice"));
    assert_eq!(user_from_passwd(passwd, 7), None);
    assert_eq!(
        parse_uid("Name:\tx\nUid:\t1000\t1000\t1000\t1000\n"),
        Some(1000)
    );
}

/// A state letter and an executable are each held once, not copied into every identity read
/// of every sample: a node of thousands of processes lists them all at every sample.
#[test]
fn states_and_executables_are_shared_not_copied() {
    let line = |pid: u32, state: &str| {
        format!("{pid} (python) {state} 1 {pid} {pid} 0 -1 4194560 9 0 0 0 3 1 0 0 20 0 8 0 987654 1000 100")
    };
    let (one, two) = (line(1, "S"), line(2, "S"));
    let (a, b) = (Stat::parse(&one), Stat::parse(&two));
    let (Some(a), Some(b)) = (a.state, b.state) else {
        panic!("no state read");
    };
    assert!(Arc::ptr_eq(&a, &b));
    // A state proc(5) does not name is read as it is.
    assert_eq!(Stat::parse(&line(3, "Q")).state.as_deref(), Some("Q"));

    let child = sleeping("600");
    let mut procfs = ProcFs::new("/proc");
    let first = procfs.identity(child.id());
    let again = procfs.identity(child.id());
    let mut child = child;
    let _ = child.kill();
    let _ = child.wait();
    let (Some(first), Some(again)) = (first.executable, again.executable) else {
        panic!("no executable read");
    };
    assert!(first.ends_with("sleep"), "{first}");
    assert!(Arc::ptr_eq(&first, &again));
}

proptest::proptest! {
    /// `stat` split by hand reads what splitting it at ASCII whitespace read: any mix of
    /// words, numbers, runs of spaces, tabs and newlines, parentheses in the command name
    /// and after it, and characters of several bytes, cut anywhere.
    #[test]
    fn stat_is_read_as_split_at_ascii_whitespace(
        words in proptest::collection::vec(
            proptest::sample::select(vec![
                "1", "42", "18446744073709551615", "18446744073709551616", "-1", "S", "Z",
                "(", ")", "(py thon)", "é", "日本", " ", "  ", "\t", "\n", "\r", "\u{b}",
                "\u{c}", "\u{a0}", "x)y", "",
            ]),
            0..40,
        ),
    ) {
        let stat: String = words.concat();
        fn reference(stat: &str) -> Stat<'_> {
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                return Stat::default();
            };
            if close < open {
                return Stat::default();
            }
            let mut fields = [None::<&str>; 22];
            for (slot, value) in fields
                .iter_mut()
                .zip(stat[close + 1..].split_ascii_whitespace())
            {
                *slot = Some(value);
            }
            let number = |field: usize| fields[field - 3].and_then(|v| v.parse::<u64>().ok());
            Stat {
                comm: Some(&stat[open + 1..close]),
                state: fields[0].map(state_text),
                ppid: fields[1].and_then(|v| v.parse().ok()),
                cpu_ticks: match (number(14), number(15)) {
                    (Some(user), Some(system)) => Some(user.saturating_add(system)),
                    _ => None,
                },
                start_time: number(22),
                rss_pages: number(24),
            }
        }
        proptest::prop_assert_eq!(Stat::parse(&stat), reference(&stat));
    }
}

/// A one-line file is read whole whatever its length: within the first kilobyte read onto the
/// stack, at its edge, and past it (read on into a growing buffer); with its newline or
/// without one, and with bytes that are not UTF-8 kept as text.
#[test]
fn a_line_is_read_whole_at_every_length() {
    let dir = crate::fixtures::TempDir::new("procfs-line");
    for len in [0usize, 1, 300, 1023, 1024, 1025, 2047, 2048, 5000] {
        for newline in [true, false] {
            let mut text: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            if newline && len > 0 {
                text[len - 1] = b'\n';
            }
            let path = dir.join(format!("stat-{len}-{newline}"));
            std::fs::write(&path, &text).expect("write");
            let read = read_line_file(&path).expect("read");
            assert_eq!(read.as_bytes(), &text[..], "{len} bytes, newline {newline}");
        }
    }
    let path = dir.join("stat-latin1");
    std::fs::write(&path, b"1 (train\xff) S 1\n").expect("write");
    assert_eq!(
        read_line_file(&path).expect("read"),
        "1 (train\u{fffd}) S 1\n"
    );
}

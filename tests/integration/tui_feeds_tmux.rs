//! The monitor, in a real pseudo-terminal, on a node where a real Python job runs the agent:
//! the process row says it is fed and splits it, the reconciliation view shows the feed's
//! identity and the checks it passed, and a hostile peer's bytes never reach the terminal.

use crate::common;

use common::feeds::*;
use common::tmux::Pane;
use common::Scratch;
use serde_json::json;
use std::time::Duration;

#[test]
fn a_fed_process_is_split_and_its_feed_shown_with_its_checks() {
    let scratch = Scratch::new("tui-feed");
    let mut job = Job::start(&scratch.feeds(), &[], false);
    job.run("import torch");
    job.run("torch.cuda.init(); torch._stub.touch(0)");
    job.run("live = [torch._stub.allocate(0, 256 << 20) for _ in range(4)]");
    job.steady();
    job.wait_for_socket(&scratch.feeds());
    let used = 500 * MIB + GIB;
    let scenario = one_gpu(vec![holder(job.pid, json!(used))], json!(used));
    let command = monitor_command_line(&scenario_file(&scratch, &scenario), &scratch.feeds());
    let pane = Pane::start("tui-feed", &command, 120, 40);
    let pid = job.pid.to_string();
    let screen = pane
        .wait_for(&[&pid, "S fed", "~500M"], Duration::from_secs(15))
        .unwrap_or_else(|s| panic!("the fed row is missing:\n{s}"));
    assert!(screen.contains("1.00G"), "live shown:\n{screen}");
    pane.keys(&["Enter"]);
    pane.wait_for(
        &[
            "allocator feed",
            "(SO_PEERCRED)",
            "✓ hello pid = NSpid",
            "torch reserved_bytes.all.current",
            "~ estimated",
        ],
        Duration::from_secs(10),
    )
    .unwrap_or_else(|s| panic!("the feed section is missing:\n{s}"));
    pane.keys(&["q"]);
    let (exit, cooked) = pane
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|s| panic!("did not quit:\n{s}"));
    assert_eq!(exit, "EXIT=0");
    assert!(cooked, "terminal left raw");
}

#[test]
fn a_refused_feed_is_marked_on_its_row_at_80_columns() {
    let scratch = Scratch::new("tui-refused");
    let mut job = Job::start(&scratch.feeds(), &[], false);
    job.wait_for_socket(&scratch.feeds());
    std::os::unix::fs::chown(scratch.feeds(), Some(65534), Some(65534)).expect("chown");
    let scenario = one_gpu(vec![holder(job.pid, json!(GIB))], json!(GIB));
    let command = monitor_command_line(&scenario_file(&scratch, &scenario), &scratch.feeds());
    let pane = Pane::start("tui-refused", &command, 80, 24);
    pane.wait_for(&["refused", "feed of PID"], Duration::from_secs(15))
        .unwrap_or_else(|s| panic!("the refusal is not shown:\n{s}"));
    pane.keys(&["q"]);
    assert!(pane.wait_exit(Duration::from_secs(5)).is_ok());
    job.run("pass");
}

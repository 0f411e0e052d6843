//! The monitor on the real NVML path (the fake library) in a real pseudo-terminal: MIG
//! instances nested under their GPU, a lost GPU marked while the other goes on, a poll stuck
//! in the driver shown as such, the monitor in its own PID namespace, `q` restores.

use crate::common;

use common::fake_nvml::{fake_nvml_lib, scenario, SCENARIO_ENV};
use common::tmux::Pane;
use common::{strata, Running, Scratch};
use std::path::Path;
use std::time::{Duration, Instant};

fn monitor(name: &str, scenario_name: &str, interval: &str) -> Pane {
    monitor_of(name, &scenario(scenario_name), interval, "", (160, 48))
}

/// The monitor on the scenario at `path`, its command line behind `wrapper` (`unshare ...`).
fn monitor_of(
    name: &str,
    path: &Path,
    interval: &str,
    wrapper: &str,
    (width, height): (u16, u16),
) -> Pane {
    let command = format!(
        "{SCENARIO_ENV}='{}' {wrapper} {} --interval {interval} --nvml-lib '{}'",
        path.display(),
        strata(),
        fake_nvml_lib().display()
    );
    Pane::start(name, &command, width, height)
}

#[test]
fn mig_instances_appear_nested_under_their_gpu() {
    let pane = monitor("nvml-mig", "mig", "1");
    let screen = pane
        .wait_for(
            &[
                "GPU 0 · NVIDIA A100-SXM4-80GB",
                "└ 3g.40gb GI1/CI0",
                "└ 2g.20gb GI5/CI0",
                "└ 1g.10gb GI13/CI0",
            ],
            Duration::from_secs(15),
        )
        .unwrap_or_else(|s| panic!("MIG rows missing:\n{s}"));
    // Nested: the instances come after their GPU's title and before the next GPU's.
    let at = |needle: &str| screen.find(needle).unwrap_or(usize::MAX);
    assert!(at("GPU 0 ·") < at("└ 3g.40gb"), "{screen}");
    pane.quit();
}

#[test]
fn a_lost_gpu_is_marked_and_the_other_goes_on() {
    let pane = monitor("nvml-lost", "gpu_lost", "0.2");
    let screen = pane
        .wait_for(
            &[
                "GPU 1 · H100 · LOST since",
                "fell off the bus (GPU_IS_LOST)",
            ],
            Duration::from_secs(15),
        )
        .unwrap_or_else(|s| panic!("lost GPU not marked:\n{s}"));
    assert!(screen.contains("GPU 0 · NVIDIA H100"), "{screen}");
    pane.quit();
}

/// two_gpus.json, whose poll 3 takes 5 s: NVML's memory read of GPU 0 sleeps (the fake's
/// `delay_ms` fault), as a driver stuck on a busy or failing GPU does.
fn stalling_scenario(dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(scenario("two_gpus")).expect("two_gpus.json");
    let mut value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    value["devices"][0]["faults"] = serde_json::json!([
        { "call": "nvmlDeviceGetMemoryInfo_v2", "delay_ms": 5000, "polls": [3, 4] }
    ]);
    let path = dir.join("stall.json");
    std::fs::write(&path, value.to_string()).expect("scenario");
    path
}

/// A stalled header's two counters: `◌ stale 2s · NVML poll running 3s` is (2, 3).
fn stall_counters(header: &str) -> Option<(u64, u64)> {
    let rest = header.split("◌ stale ").nth(1)?;
    let (age, rest) = rest.split_once("s · NVML poll running ")?;
    let running = rest.split('s').next()?;
    Some((age.trim().parse().ok()?, running.trim().parse().ok()?))
}

/// The header's clock (`15:02:45`): the instant of the sample shown.
fn header_clock(header: &str) -> Option<&str> {
    // `07:17:41 UTC`: the clock, named.
    header
        .split(" │ ")
        .map(|f| f.trim().trim_end_matches(" UTC"))
        .find(|field| {
            field.len() == 8
                && field.bytes().enumerate().all(|(i, b)| {
                    if i % 3 == 2 {
                        b == b':'
                    } else {
                        b.is_ascii_digit()
                    }
                })
        })
}

/// While a poll is overdue the header says the data is stale, how old it is and how long the
/// poll has been running, counting up each second with no input; then it is live again, and
/// stays live as new samples come. Every header is watched as it comes (the counts are not
/// caught at given seconds, which a loaded machine can miss): the counts seen only go up,
/// and go up at least once.
#[test]
fn a_stalled_poll_is_shown_stale_and_counted_then_live_again() {
    let scratch = Scratch::new("stall");
    let dir = &scratch.dir;
    let pane = monitor_of("nvml-stall", &stalling_scenario(dir), "0.5", "", (160, 48));
    pane.wait_for(&["● live", "GPU 0 · NVIDIA H100"], Duration::from_secs(30))
        .unwrap_or_else(|s| panic!("the monitor did not start:\n{s}"));
    let header = |screen: &str| screen.lines().next().unwrap_or_default().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut counted: Vec<(u64, u64)> = Vec::new();
    // No key is pressed: the header counts on by itself while poll 3 hangs.
    let live_again = loop {
        let line = header(&pane.capture());
        match stall_counters(&line) {
            Some(counts) if counted.last() != Some(&counts) => counted.push(counts),
            Some(_) => {}
            None if !counted.is_empty() && line.contains("● live") => break line,
            None => {}
        }
        assert!(
            Instant::now() < deadline,
            "no stall seen and ended; counts seen {counted:?}; now:\n{line}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        counted
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1),
        "the counts only go up: {counted:?}"
    );
    let (first, last) = (counted[0], counted[counted.len() - 1]);
    assert!(
        last.0 > first.0 && last.1 > first.1,
        "the counts went up by themselves: {counted:?}"
    );
    assert!(
        last.1 >= 2,
        "the poll was seen hanging for seconds: {counted:?}"
    );
    // The driver answers in time again: samples newer than the first live one are shown
    // live.
    let resumed = header_clock(&live_again)
        .unwrap_or_else(|| panic!("no clock in {live_again}"))
        .to_string();
    let mut clocks = vec![resumed];
    while clocks.len() < 3 {
        let line = header(&pane.capture());
        if let Some(clock) = header_clock(&line) {
            if clocks.last().map(String::as_str) != Some(clock) {
                assert!(
                    line.contains("● live"),
                    "live again, and it stays live: {line}"
                );
                clocks.push(clock.to_string());
            }
        }
        assert!(Instant::now() < deadline, "no newer sample: {line}");
        std::thread::sleep(Duration::from_millis(50));
    }
    pane.quit();
}

/// Inside a PID namespace of its own (a container without --pid=host), the header says so
/// once, with what it costs and what to do, at 80 columns.
#[test]
fn in_its_own_pid_namespace_the_header_says_so() {
    assert_eq!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() },
        0,
        "unshare needs root (CI runs as root)"
    );
    let pane = monitor_of(
        "nvml-pidns",
        &scenario("two_gpus"),
        "1",
        "unshare --pid --fork --mount-proc",
        (80, 24),
    );
    let screen = pane
        .wait_for(
            &["● live", "own PID namespace", "--pid=host"],
            Duration::from_secs(15),
        )
        .unwrap_or_else(|s| panic!("no note on the PID namespace:\n{s}"));
    let header = screen.lines().next().unwrap_or_default();
    assert!(
        header.contains("own PID namespace"),
        "in the header: {screen}"
    );
    assert_eq!(
        screen.matches("own PID namespace").count(),
        1,
        "once: {screen}"
    );
    pane.quit();
}

/// A seven-digit PID (Linux allows up to 4194304) is shown in full at 100 columns, never cut
/// next to a kill key.
#[test]
fn a_seven_digit_pid_is_shown_whole_at_100_columns() {
    let scratch = Scratch::new("tui-pid7");
    let dir = &scratch.dir;
    let text = std::fs::read_to_string(scenario("two_gpus")).expect("two_gpus.json");
    let mut value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    value["devices"][0]["compute_processes"][0]["pid"] = serde_json::json!(4_194_304);
    let path = dir.join("pid7.json");
    std::fs::write(&path, value.to_string()).expect("scenario");
    let pane = monitor_of("nvml-pid7", &path, "1", "", (100, 30));
    let screen = pane
        .wait_for(&["Processes ("], Duration::from_secs(10))
        .unwrap_or_else(|s| panic!("no table:\n{s}"));
    let row = screen
        .lines()
        .find(|l| l.contains("4194304"))
        .unwrap_or_else(|| panic!("the PID is cut:\n{screen}"));
    assert!(row.starts_with("4194304 "), "{row}");
    pane.quit();
}

/// On a node where no process has a feed, the hint to get one is a single finding for the
/// whole node, naming only the Python processes (a `sleep` cannot be fed): not a line per
/// process.
#[test]
fn one_hint_for_the_node_names_only_its_python_processes() {
    let scratch = Scratch::new("tui-hint");
    let dir = &scratch.dir;
    // Real processes the fake NVML lists.
    let spawn = |program: &str, args: &[&str]| {
        Running::spawn(std::process::Command::new(program).args(args))
    };
    let mut children = Vec::new();
    for _ in 0..3 {
        children.push(spawn("python3", &["-c", "import time; time.sleep(300)"]));
    }
    for _ in 0..2 {
        children.push(spawn("sleep", &["300"]));
    }
    let gib: u64 = 1 << 30;
    let devices: Vec<serde_json::Value> = (0..2)
        .map(|g| {
            let mine: Vec<u32> = children.iter().skip(g).step_by(2).map(|c| c.id()).collect();
            let used = mine.len() as u64 * gib;
            let total = 80 * gib;
            serde_json::json!({
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": format!("GPU-00000000-0000-0000-0000-00000000000{g}"),
                "pci_bus_id": format!("00000000:{:02X}:00.0", 0x18 + g),
                "memory": {"total": total, "reserved": 0, "used": used, "free": total - used},
                "compute_processes": mine.iter().map(|p| serde_json::json!({"pid": p, "used": gib})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let path = dir.join("hint.json");
    std::fs::write(&path, serde_json::json!({ "devices": devices }).to_string()).expect("scenario");
    let pane = monitor_of("nvml-hint", &path, "0.5", "", (160, 48));
    let screen = pane
        .wait_for(
            &["3 Python processes hold 3.00 GiB without an allocator feed"],
            Duration::from_secs(15),
        )
        .unwrap_or_else(|s| panic!("no hint for the node:\n{s}"));
    let hints = screen
        .lines()
        .filter(|l| l.contains("without an allocator feed"))
        .count();
    assert_eq!(hints, 1, "{screen}");
    assert!(screen.contains("Findings (1)"), "{screen}");
    pane.quit();
}

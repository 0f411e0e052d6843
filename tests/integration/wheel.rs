//! The release wheel as a user installs it: built by `assets/packaging/build-wheel` into
//! `$STRATA_WHEEL_DIR` (the project's test command builds it first), installed into a fresh
//! venv with `--no-index`, then used. Without `STRATA_WHEEL_DIR` these tests say so and
//! pass, unless `STRATA_REQUIRE_WHEEL=1` (set by the test command) makes that a failure.

use crate::common;

use common::fake_nvml::workspace_root;
use common::feeds::*;
use common::tmux::{Pane, PATIENCE};
use common::{wait_until, Running, Scratch};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Output, Stdio};
use std::sync::OnceLock;

/// The newest glibc symbol version the shipped binary may need (manylinux2014).
const GLIBC_CEILING: (u32, u32) = (2, 17);

fn wheel_dir() -> Option<PathBuf> {
    match std::env::var_os("STRATA_WHEEL_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => {
            common::skip(
                "STRATA_REQUIRE_WHEEL",
                "set STRATA_WHEEL_DIR to a directory built by assets/packaging/build-wheel",
            );
            None
        }
    }
}

fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    found.sort();
    found
}

/// The one release wheel in the directory.
fn the_wheel(dir: &Path) -> PathBuf {
    let wheels = files_ending(dir, ".whl");
    assert_eq!(
        wheels.len(),
        1,
        "one wheel in {}: {wheels:?}",
        dir.display()
    );
    wheels[0].clone()
}

fn run(command: &mut Command) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A fresh venv (`target/wheel-venv`, made anew by each run of these tests) with the wheel
/// installed from the directory alone (`--no-index`).
fn venv(dir: &Path) -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        let venv = workspace_root().join("target").join("wheel-venv");
        let _ = std::fs::remove_dir_all(&venv);
        let python = std::env::var_os("STRATA_TEST_PYTHON").unwrap_or_else(|| "python3".into());
        run(Command::new(python).args(["-m", "venv"]).arg(&venv));
        run(Command::new(venv.join("bin/pip"))
            .args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-index",
                "--find-links",
            ])
            .arg(dir)
            .arg("strata-gpu"));
        venv
    })
}

/// The highest `GLIBC_x.y` version a binary's dynamic symbols name (`objdump -T`).
fn highest_glibc(binary: &Path) -> (u32, u32) {
    let output = run(Command::new("objdump").arg("-T").arg(binary));
    let text = String::from_utf8_lossy(&output.stdout);
    text.split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter_map(|word| word.strip_prefix("GLIBC_"))
        .filter_map(|v| {
            let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
            Some((parts.next()??, parts.next().flatten().unwrap_or(0)))
        })
        .max()
        .expect("the binary names glibc versions")
}

#[test]
fn the_wheel_is_manylinux2014_and_its_binary_needs_glibc_2_17_at_most() {
    let Some(dir) = wheel_dir() else { return };
    let wheel = the_wheel(&dir);
    let name = wheel.file_name().map(|n| n.to_string_lossy().into_owned());
    let name = name.unwrap_or_default();
    assert!(
        name.starts_with(&format!(
            "strata_gpu-{}-py3-none-",
            env!("CARGO_PKG_VERSION")
        )),
        "{name}"
    );
    assert!(name.contains("manylinux_2_17_x86_64"), "{name}");
    let auditwheel = std::env::var_os("STRATA_PACKAGING_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/packaging-venv"))
        .join("bin/auditwheel");
    let shown = run(Command::new(&auditwheel).arg("show").arg(&wheel));
    let shown = String::from_utf8_lossy(&shown.stdout).replace('\n', " ");
    assert!(
        shown.contains("consistent with the following platform tag: \"manylinux_2_17_x86_64\""),
        "auditwheel show: {shown}"
    );

    let venv = venv(&dir);
    let binary = venv.join("bin/strata");
    let glibc = highest_glibc(&binary);
    assert!(
        glibc <= GLIBC_CEILING,
        "the shipped binary needs GLIBC_{}.{}",
        glibc.0,
        glibc.1
    );
    // A size a training node is happy to download.
    let size = std::fs::metadata(&wheel).expect("wheel").len();
    assert!(size < 8 << 20, "the wheel is {size} bytes");
}

#[test]
fn the_installed_binary_runs_and_the_agent_imports() {
    let Some(dir) = wheel_dir() else { return };
    let venv = venv(&dir);
    let version = run(Command::new(venv.join("bin/strata")).arg("--version"));
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    assert!(
        version.starts_with(&format!("strata {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    assert!(version.contains("feed protocol 1"), "{version}");

    let snapshot =
        run(Command::new(venv.join("bin/strata")).args(["snapshot", "--demo", "--json"]));
    let snapshot: Value = serde_json::from_slice(&snapshot.stdout).expect("one JSON sample");
    assert_eq!(snapshot["schema"], "strata.snapshot/1");
    assert!(!snapshot["gpus"].as_array().expect("gpus").is_empty());

    let imported = run(Command::new(venv.join("bin/python")).args([
        "-c",
        "import strata_feed, os; print(strata_feed.__version__); print(os.path.realpath(strata_feed.__file__))",
    ])
    .env_remove("PYTHONPATH"));
    let imported = String::from_utf8_lossy(&imported.stdout).into_owned();
    let mut lines = imported.lines();
    assert_eq!(lines.next(), Some(env!("CARGO_PKG_VERSION")));
    let file = lines.next().unwrap_or_default();
    let venv_real = std::fs::canonicalize(venv).expect("venv");
    assert!(
        Path::new(file).starts_with(&venv_real),
        "strata_feed comes from the venv, not {file}"
    );

    // The man pages and completions land in the environment's share/.
    for relative in [
        "share/man/man1/strata.1",
        "share/man/man1/strata-record.1",
        "share/bash-completion/completions/strata",
        "share/zsh/site-functions/_strata",
        "share/fish/vendor_completions.d/strata.fish",
    ] {
        assert!(venv.join(relative).is_file(), "{relative} is not installed");
    }
}

/// The resident and the whole size, in kB, of the executable mappings of process `pid`'s
/// own binary (`/proc/PID/smaps`).
fn resident_code(pid: u32) -> (u64, u64) {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("the process's binary");
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).expect("smaps");
    let (mut resident, mut size) = (0, 0);
    let mut code = false;
    for line in smaps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [range, perms, _, _, _, path, ..] if range.contains('-') => {
                code = perms.starts_with("r-x") && Path::new(path) == exe;
                if code {
                    let (start, end) = range.split_once('-').expect("a range");
                    let at = |hex| u64::from_str_radix(hex, 16).expect("hex");
                    size += (at(end) - at(start)) / 1024;
                }
            }
            ["Rss:", kb, "kB"] if code => resident += kb.parse::<u64>().expect("kB"),
            _ => {}
        }
    }
    (resident, size)
}

/// The functions the monitor runs lie together at the head of the shipped binary's code
/// (`assets/packaging/strata-order.ld`, linked by zig's linker in the wheel): the kernel maps
/// code in blocks of 64 KiB around each page run, and with those functions scattered over
/// 11 MB of code, 48 % of it stayed in the monitor's memory (36 % while the script named
/// only the functions whose names hold no hash); placed together, 16 %. Fails if the
/// wheel's build stops honouring the script or the script stops naming the build's
/// functions.
#[test]
fn the_shipped_monitor_keeps_a_small_part_of_its_code_in_memory() {
    let Some(dir) = wheel_dir() else { return };
    let binary = venv(&dir).join("bin/strata");
    let command = format!("{} --demo --interval 1", binary.display());
    let pane = Pane::start("wheel-resident", &command, 120, 40);
    let mut screen = pane.must_show(&["demo-node"], "the demo's first frame");
    // Two samples more: the header's clock moves at each.
    for _ in 0..2 {
        let before = screen.clone();
        wait_until(PATIENCE, "the demo's next sample", || {
            screen = pane.capture();
            screen != before
        });
    }
    let (resident, size) = resident_code(pane.program_pid());
    assert!(size > 0, "no executable mapping of {}", binary.display());
    assert!(
        resident * 100 < size * 30,
        "{resident} of {size} kB of the binary's code in memory"
    );
    pane.quit();
}

/// The constants the monitor reads at every frame lie together at the head of the shipped
/// binary's `.rodata` (`assets/packaging/strata-order.ld`): the kernel maps a file in blocks
/// of 64 KiB around each page read, and scattered over its 1 MB they kept 552 kB of it in
/// memory at 8 × 64, 256 placed. Where the layer names and the process table's words first
/// lie says whether the script names the build's constants: 30 to 38 kB into `.rodata`
/// placed, 68 to 125 kB while the script named them by a hash the build no longer had
/// (LLVM's, over the names the strata library exports). Their median is held under 64 kB: a
/// word the screen stops using moves one of seven. Their residency itself is no test: it
/// moves with the kernel's readahead and with how the file came into the page cache (284 to
/// 384 kB of the same binary on `--demo`).
#[test]
fn the_shipped_binary_keeps_the_constants_the_monitor_reads_together() {
    use object::{Object, ObjectSection};
    let Some(dir) = wheel_dir() else { return };
    let binary = venv(&dir).join("bin/strata");
    let bytes = std::fs::read(&binary).expect("the binary");
    let file = object::File::parse(&*bytes).expect("an ELF file");
    let rodata = file
        .section_by_name(".rodata")
        .and_then(|s| s.data().ok())
        .expect("a .rodata section");
    let words = [
        "cached",
        "fragmented",
        "outside",
        "tensors",
        "COMMAND",
        "zombie",
        "stale",
    ];
    let mut at: Vec<usize> = words
        .iter()
        .map(|w| {
            memchr::memmem::find(rodata, w.as_bytes())
                .unwrap_or_else(|| panic!("{w:?} is not in .rodata"))
                / 1024
        })
        .collect();
    let said = format!("{words:?} first at {at:?} kB into .rodata");
    at.sort_unstable();
    assert!(
        at[at.len() / 2] < 64,
        "{said}: run assets/packaging/order-code"
    );
}

/// A job driven over stdin (`tests/python/jobs/driven.py`), started by the venv's
/// `strata run` with the venv's interpreter: the stub torch on its path, nothing else.
struct VenvJob {
    _child: Running,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pid: u32,
}

impl VenvJob {
    fn start(venv: &Path, feed_dir: &Path) -> VenvJob {
        let root = workspace_root();
        let mut child = Running::spawn(
            Command::new(venv.join("bin/strata"))
                .args(["run", "--feed-interval", "0.1", "--"])
                .arg(venv.join("bin/python"))
                .arg(root.join("tests/python/jobs/driven.py"))
                .env("STRATA_TEST_START", "no")
                .env("PYTHONPATH", root.join("tests/python/stubs"))
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .env("STRATA_FEED_DIR", feed_dir)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit()),
        );
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("the job says ready");
        let pid = line
            .strip_prefix("ready ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("the job did not start: {line:?}"));
        VenvJob {
            _child: child,
            stdin,
            stdout,
            pid,
        }
    }

    fn ask(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").expect("job stdin");
        self.stdin.flush().expect("flush");
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).expect("the job answers");
        answer.trim_end().to_string()
    }

    fn run(&mut self, statement: &str) {
        let answer = self.ask(statement);
        assert_eq!(answer, "ok", "{statement}: {answer}");
    }
}

#[test]
fn strata_run_from_the_venv_feeds_a_job_through_the_installed_agent() {
    let Some(dir) = wheel_dir() else { return };
    let venv = venv(&dir);
    let scratch = Scratch::new("wheel-run");
    let mut job = VenvJob::start(venv, &scratch.feeds());
    job.run("import strata_feed, os, torch");
    let file = job.ask("=os.path.realpath(strata_feed.__file__)");
    let venv_real = std::fs::canonicalize(venv).expect("venv");
    assert!(
        file.contains(&venv_real.display().to_string()),
        "the job runs the installed agent of the same version, not the embedded copy: {file}"
    );
    job.run("torch.cuda.init(); torch._stub.touch(0)");
    job.run("live = [torch._stub.allocate(0, 256 << 20) for _ in range(2)]");
    job.run("import time; time.sleep(0.4)");
    let socket = scratch.feeds().join(format!("{}.sock", job.pid));
    wait_until(
        std::time::Duration::from_secs(10),
        "the agent's socket",
        || socket.exists(),
    );

    let reserved = 512 * MIB;
    let used = 500 * MIB + reserved;
    let scenario = one_gpu(vec![holder(job.pid, json!(used))], json!(used));
    let path = scenario_file(&scratch, &scenario);
    let mut monitor = snapshot_command(&path, &scratch.feeds(), &[]);
    // The venv's own binary is the monitor.
    let args: Vec<_> = monitor.get_args().map(|a| a.to_owned()).collect();
    let envs: Vec<_> = monitor
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
        .collect();
    monitor = Command::new(venv.join("bin/strata"));
    monitor.args(args).envs(envs);
    let output = run(&mut monitor);
    let snap: Value = serde_json::from_slice(&output.stdout).expect("one JSON sample");
    let process = process_of(&snap, job.pid);
    assert_eq!(process["feed_status"]["state"], "fresh", "{process}");
    assert_eq!(process["layers"]["live"], 2 * 256 * MIB, "{process}");
    let feed = feed_of(&snap, job.pid);
    assert_eq!(
        feed["hello"]["agent_version"],
        env!("CARGO_PKG_VERSION"),
        "{feed}"
    );
    // The feed says which copy runs, and where it is.
    assert_eq!(feed["hello"]["agent_copy"], "environment", "{feed}");
    let path = feed["hello"]["agent_path"].as_str().unwrap_or_default();
    assert!(path.contains(&venv_real.display().to_string()), "{feed}");
}

/// The shipped binary on an older userland than this machine's: a Debian bullseye root
/// (glibc 2.31, as on Ubuntu 20.04), `$STRATA_OLD_ROOT`, entered with chroot (root only).
#[test]
fn the_shipped_binary_runs_on_an_older_glibc() {
    let Some(dir) = wheel_dir() else { return };
    let Some(old_root) = std::env::var_os("STRATA_OLD_ROOT").map(PathBuf::from) else {
        common::skip(
            "STRATA_REQUIRE_WHEEL",
            "set STRATA_OLD_ROOT to a Debian bullseye root",
        );
        return;
    };
    let venv = venv(&dir);
    let inside = format!("/tmp/strata-wheel-{}", std::process::id());
    let copy = old_root.join(inside.trim_start_matches('/'));
    std::fs::copy(venv.join("bin/strata"), &copy).expect("copy into the old root");
    let chrooted = |args: &[&str]| {
        Command::new("chroot")
            .arg(&old_root)
            .arg(&inside)
            .args(args)
            .output()
            .expect("chroot runs")
    };
    let version = chrooted(&["--version"]);
    let snapshot = chrooted(&["snapshot", "--demo", "--json"]);
    let _ = std::fs::remove_file(&copy);
    for output in [&version, &snapshot] {
        assert!(
            output.status.success(),
            "in {}: {}",
            old_root.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let sample: Value = serde_json::from_slice(&snapshot.stdout).expect("one JSON sample");
    assert_eq!(sample["schema"], "strata.snapshot/1");
}

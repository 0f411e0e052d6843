//! `strata doctor` where `/proc` does not show everything: in a PID namespace of its own
//! (`unshare --pid --fork --mount-proc`), under a `/proc` mounted with `hidepid=2`, and as
//! `nobody` (`setpriv`); and the Python versions and remote debugging of the processes NVML
//! lists, read from their `/proc`.
//!
//! Needs root (CI runs as root) for `unshare`, `mount` and `setpriv`.

use crate::common;

use common::doctor::{assert_check, check, checks, detached, doctor_command, ran, said, sleeper};
use common::fake_nvml::{fake_nvml_lib, SCENARIO_ENV};
use common::{strata, Running, Scratch};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NOBODY: &str = "65534";
const GIB: u64 = 1 << 30;

fn assert_root() {
    assert_eq!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() },
        0,
        "these tests need root for unshare, mount and setpriv (CI runs as root)"
    );
}

/// One GPU whose compute list names `pids`, as a scenario everyone may read in `shared`.
fn scenario_in(shared: &Scratch, pids: &[u32]) -> PathBuf {
    let processes: Vec<Value> = pids
        .iter()
        .map(|p| json!({"pid": p, "used": GIB}))
        .collect();
    let scenario = json!({"devices": [{
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-dddddddd-0000-4000-8000-000000000000",
        "memory": { "total": 80 * GIB, "reserved": 0, "used": 4 * GIB },
        "mig_mode": { "current": 0, "pending": 0 },
        "compute_processes": processes,
    }]});
    shared.write("scenario.json", scenario.to_string(), 0o644)
}

/// `strata doctor --json` from `shared`, in a private mount namespace whose `/proc` is
/// mounted again with `hidepid` (if given), run as `nobody` (if asked).
fn doctor_under(
    shared: &Scratch,
    scenario: &Path,
    hidepid: Option<u32>,
    as_nobody: bool,
) -> common::doctor::Ran {
    let strata = shared.copy(Path::new(strata()), "strata");
    let lib = shared.copy(&fake_nvml_lib(), "libnvidia_ml.so");
    let mount = hidepid.map_or(String::new(), |mode| {
        format!("mount -t proc -o hidepid={mode} proc /proc && ")
    });
    let user = match as_nobody {
        true => format!("setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups "),
        false => String::new(),
    };
    let listen = common::doctor::free_listen();
    let script =
        format!("{mount}exec {user}\"$0\" doctor --json --nvml-lib \"$1\" --listen {listen}");
    let mut command = detached("unshare");
    command
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .arg(&strata)
        .arg(&lib)
        .env(SCENARIO_ENV, scenario);
    ran(command)
}

#[test]
fn in_a_pid_namespace_of_its_own_doctor_gives_the_pid_host_advice() {
    assert_root();
    let holder = sleeper();
    let shared = Scratch::shared("doctor-pidns");
    let file = scenario_in(&shared, &[holder.pid()]);
    let mut command = detached("unshare");
    command
        .args([
            "--pid",
            "--fork",
            "--mount-proc",
            strata(),
            "doctor",
            "--json",
        ])
        .arg("--nvml-lib")
        .arg(fake_nvml_lib())
        .args(["--listen", &common::doctor::free_listen()])
        .env(SCENARIO_ENV, &file);
    let r = ran(command);
    let namespace = check(&r.report, "pid_namespace", None);
    assert_check(
        namespace,
        "limited",
        &["PID namespace of its own", "foreign"],
    );
    assert!(
        namespace["fix"]
            .as_str()
            .is_some_and(|f| f.contains("--pid=host")),
        "{}",
        said(namespace)
    );
    for name in ["process_roots", "python_versions"] {
        let c = check(&r.report, name, None);
        assert_check(c, "limited", &["PID namespace of its own"]);
        assert!(
            c["fix"].as_str().is_some_and(|f| f.contains("--pid=host")),
            "{}",
            said(c)
        );
    }
    assert_ne!(r.status, Some(0));
    // The same, with the host's /proc: the host's namespace, its process looked through.
    let r = ran(doctor_command(Some(&fake_nvml_lib()), Some(&file), &[]));
    assert_check(
        check(&r.report, "pid_namespace", None),
        "ok",
        &["host's PID namespace"],
    );
    assert_check(
        check(&r.report, "python_versions", None),
        "ok",
        &["1 not Python"],
    );
}

#[test]
fn under_hidepid_2_other_users_are_hidden_from_nobody_and_not_from_root() {
    assert_root();
    let shared = Scratch::shared("doctor-hidepid");
    let root_owned = sleeper();
    let file = scenario_in(&shared, &[root_owned.pid()]);
    let nobody = doctor_under(&shared, &file, Some(2), true);
    assert_check(
        check(&nobody.report, "hidepid", None),
        "limited",
        &["hidepid=2", "not in /proc at all"],
    );
    assert_check(
        check(&nobody.report, "other_users_proc", None),
        "limited",
        &["cannot be read", "stat hidden", "fd hidden"],
    );
    assert_check(
        check(&nobody.report, "python_versions", None),
        "limited",
        &["1 hidden by /proc"],
    );
    assert_check(
        check(&nobody.report, "process_roots", None),
        "limited",
        &[&format!("PID {}: hidden by /proc", root_owned.pid())],
    );
    assert_eq!(nobody.report["euid"], 65534);
    assert_eq!(nobody.status, Some(3), "{:#}", nobody.report);
    // Root is not hidden from.
    let root = doctor_under(&shared, &file, Some(2), false);
    assert_check(
        check(&root.report, "hidepid", None),
        "ok",
        &["hidepid=2", "nothing from root"],
    );
    assert_check(
        check(&root.report, "python_versions", None),
        "ok",
        &["1 not Python"],
    );
}

#[test]
fn as_nobody_other_users_open_files_feed_dirs_and_roots_are_out_of_reach() {
    assert_root();
    let shared = Scratch::shared("doctor-nobody");
    let root_owned = sleeper();
    let file = scenario_in(&shared, &[root_owned.pid()]);
    let r = doctor_under(&shared, &file, None, true);
    assert_check(
        check(&r.report, "hidepid", None),
        "ok",
        &["without hidepid"],
    );
    let others = check(&r.report, "other_users_proc", None);
    assert_check(
        others,
        "limited",
        &["open files cannot be read", "stat readable", "fd denied"],
    );
    assert_eq!(others["fix"], "run strata as root");
    assert_check(
        check(&r.report, "feed_dir", None),
        "ok",
        &["/tmp/strata-65534"],
    );
    assert_check(
        check(&r.report, "user_feed_dirs", None),
        "limited",
        &["not root"],
    );
    assert_check(
        check(&r.report, "process_roots", None),
        "limited",
        &[&format!("PID {}: permission denied", root_owned.pid())],
    );
    assert_check(
        check(&r.report, "python_versions", None),
        "limited",
        &[&format!(
            "executable unreadable (another user's): PID {}",
            root_owned.pid()
        )],
    );
    assert_eq!(r.status, Some(3), "{:#}", r.report);
}

/// A process that runs a copy of `sleep` named `name` (`python3.14`: a Python by its name).
fn stand_in(shared: &Scratch, name: &str, env: &[(&str, &str)]) -> Running {
    let exe = shared.copy(Path::new("/bin/sleep"), name);
    Running(
        Command::new(exe)
            .arg("300")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .spawn()
            .expect("the stand-in runs"),
    )
}

/// `python3` running, once its interpreter has replaced any launcher (pyenv's shim), and
/// its version.
fn real_python() -> (Running, String) {
    let version = Command::new("python3")
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .expect("python3 runs");
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let child = Running(
        Command::new("python3")
            .args(["-c", "import time; time.sleep(300)"])
            .stdin(Stdio::null())
            .spawn()
            .expect("python3 runs"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let exe = std::fs::read_link(format!("/proc/{}/exe", child.pid())).unwrap_or_default();
        let maps =
            std::fs::read_to_string(format!("/proc/{}/maps", child.pid())).unwrap_or_default();
        let name = exe
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with("python") && (maps.contains("libpython") || name.contains('.')) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "python3 never ran ({})",
            exe.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, version)
}

#[test]
fn the_python_version_and_remote_debugging_of_each_listed_process() {
    assert_root();
    let shared = Scratch::shared("doctor-python");
    let (old, version) = real_python();
    let disabled = stand_in(
        &shared,
        "python3.14",
        &[("PYTHON_DISABLE_REMOTE_DEBUG", "1")],
    );
    let enabled = stand_in(&shared, "python3.14t", &[]);
    let other = sleeper();
    let file = scenario_in(
        &shared,
        &[old.pid(), disabled.pid(), enabled.pid(), other.pid()],
    );
    let r = ran(doctor_command(Some(&fake_nvml_lib()), Some(&file), &[]));
    let versions = check(&r.report, "python_versions", None);
    assert_check(
        versions,
        "limited",
        &[
            &format!(
                "3.14 or later (attach works): PID {} 3.14, PID {} 3.14",
                disabled.pid(),
                enabled.pid()
            ),
            &format!(
                "older than 3.14 (no sys.remote_exec): PID {} {version}",
                old.pid()
            ),
            "1 not Python",
        ],
    );
    assert!(versions["fix"]
        .as_str()
        .is_some_and(|f| f.contains("strata run")));
    let remote = check(&r.report, "remote_debug", None);
    assert_check(
        remote,
        "limited",
        &[&format!(
            "PID {}: PYTHON_DISABLE_REMOTE_DEBUG is set",
            disabled.pid()
        )],
    );
    let detail = remote["detail"].as_str().unwrap_or_default();
    assert!(
        !detail.contains(&format!("PID {}", enabled.pid())),
        "{detail}"
    );
    assert!(
        !detail.contains(&format!("PID {}", old.pid())),
        "only 3.14+: {detail}"
    );
    // As nobody, root's processes' environments cannot be read.
    drop(disabled);
    let file = scenario_in(&shared, &[enabled.pid()]);
    let nobody = doctor_under(&shared, &file, None, true);
    assert_check(
        check(&nobody.report, "python_versions", None),
        "limited",
        &[&format!(
            "executable unreadable (another user's): PID {}",
            enabled.pid()
        )],
    );
    assert!(
        checks(&nobody.report, "remote_debug", None).is_empty(),
        "its version is unknown"
    );
}

/// The Debian root with python3.14 (`.ci/run` builds it), when there is one.
fn py314_root() -> Option<PathBuf> {
    let root = std::env::var_os("STRATA_PY314_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/py314-root"));
    if root.join("usr/bin/python3.14").exists() {
        return Some(root);
    }
    common::skip(
        "STRATA_REQUIRE_PY314",
        &format!(
            "no python3.14 under {} (tests/all makes it with debootstrap)",
            root.display()
        ),
    );
    None
}

#[test]
fn a_real_python_3_14_started_with_the_option_off_is_named() {
    assert_root();
    let Some(root) = py314_root() else { return };
    let shared = Scratch::shared("doctor-py314");
    let start = |args: &[&str]| {
        Running(
            Command::new("chroot")
                .arg(&root)
                .arg("python3.14")
                .args(args)
                .args(["-c", "import time; time.sleep(300)"])
                .stdin(Stdio::null())
                .spawn()
                .expect("chroot python3.14"),
        )
    };
    let off = start(&["-X", "disable-remote-debug"]);
    let ignored = start(&["-X", "disable_remote_debug"]);
    std::thread::sleep(Duration::from_millis(500));
    let file = scenario_in(&shared, &[off.pid(), ignored.pid()]);
    let r = ran(doctor_command(Some(&fake_nvml_lib()), Some(&file), &[]));
    assert_check(
        check(&r.report, "python_versions", None),
        "ok",
        &[&format!("PID {} 3.14", off.pid())],
    );
    assert_check(
        check(&r.report, "remote_debug", None),
        "limited",
        &[
            &format!("PID {}: started with -X disable-remote-debug", off.pid()),
            &format!(
                "PID {} has -X disable_remote_debug, which CPython ignores",
                ignored.pid()
            ),
        ],
    );
}

/// `/tmp/strata-<uid>` for a uid no one has, removed on drop.
struct UserDir(PathBuf);

impl UserDir {
    fn new(uid: u32, owner: u32, mode: u32) -> UserDir {
        let dir = PathBuf::from(format!("/tmp/strata-{uid}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).expect("chmod");
        std::os::unix::fs::chown(&dir, Some(owner), None).expect("chown");
        UserDir(dir)
    }
}

impl Drop for UserDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn as_root_every_users_feed_dir_is_judged_by_the_monitors_rule() {
    assert_root();
    // Uids no account has, unlikely to meet another test's.
    let base = 3_000_000_000 + 2 * (std::process::id() % 1_000_000);
    let trusted = UserDir::new(base, base, 0o700);
    let stolen = UserDir::new(base + 1, 0, 0o700);
    let r = ran(doctor_command(None, None, &[]));
    let dirs = check(&r.report, "user_feed_dirs", None);
    let detail = dirs["detail"].as_str().unwrap_or_default();
    assert_eq!(dirs["status"], "limited", "{}", said(dirs));
    assert!(
        detail.contains(&format!(
            "feed dir {} is owned by uid 0, not {}",
            stolen.0.display(),
            base + 1
        )),
        "{}",
        said(dirs)
    );
    assert!(
        !detail.contains(&format!("{}:", trusted.0.display())),
        "trusted: {detail}"
    );
    drop(stolen);
    let r = ran(doctor_command(None, None, &[]));
    let detail = check(&r.report, "user_feed_dirs", None)["detail"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!detail.contains(&format!("strata-{base}")), "{detail}");
}

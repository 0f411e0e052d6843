//! The Python allocator-feed agent (`assets/python/strata_feed`) and its `sitecustomize`,
//! tested by the standard-library suite in `tests/python` against stub frameworks and a
//! fake `libcuda.so.1` built from `tests/python/fake_libcuda.c` with the system C compiler.
//!
//! Also: the same suite under the oldest Python the agent supports, in a Debian root.
//!
//! Run alone: `python3 -m unittest discover -s tests/python -t tests/python`.

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

/// One run of the suite at a time: its tests time their jobs, and two runs side by side on a
/// small machine would be judged on each other's load.
static SUITE: Mutex<()> = Mutex::new(());

/// Skips no test as root, as CI runs it. As another user these skip: they need root to
/// enter a PID namespace of their own and to chown a feed directory to another user.
const SKIPS_ALLOWED_AS_ANOTHER_USER: [&str; 2] = [
    "unshare --pid needs root (CI runs as root)",
    "needs root to chown",
];

/// The suite with the host's `python3`: it passes, and skips no test for a reason this user
/// does not explain (a test that stopped running is no green). The skips are printed.
#[test]
fn python_agent_suite() {
    let _one_at_a_time = SUITE.lock().unwrap_or_else(|e| e.into_inner());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var("STRATA_TEST_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let output = Command::new(&python)
        .args([
            "-m",
            "unittest",
            "discover",
            "-v",
            "-s",
            "tests/python",
            "-t",
            "tests/python",
        ])
        .current_dir(root)
        // No __pycache__ in the work tree; no inherited settings that change the stubs.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONPATH")
        .env_remove("STRATA_FEED_DIR")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "the Python agent suite failed ({}):\n{text}",
        output.status
    );
    // unittest -v ends a skipped test's line with: ... skipped 'REASON'
    let skipped: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|line| {
            let (test, reason) = line.split_once(" ... skipped '")?;
            Some((test, reason.strip_suffix('\'')?))
        })
        .collect();
    for (test, reason) in &skipped {
        crate::common::say(&format!("python agent suite: skipped {test}: {reason}"));
    }
    crate::common::say(&format!("python agent suite: {} skipped", skipped.len()));
    // A skip line cut by other output would go unseen: the lines must add up to unittest's count.
    let counted: usize = text
        .lines()
        .filter_map(|line| line.strip_prefix("OK ("))
        .find_map(|counts| {
            counts
                .split([',', ')'])
                .find_map(|count| count.trim().strip_prefix("skipped=")?.parse().ok())
        })
        .unwrap_or(0);
    assert_eq!(
        counted,
        skipped.len(),
        "unittest counts {counted} skipped tests, its lines name {}:\n{text}",
        skipped.len()
    );
    // SAFETY: geteuid has no preconditions.
    let as_root = unsafe { libc::geteuid() } == 0;
    let (allowed, user): (&[&str], &str) = if as_root {
        (&[], "as root")
    } else {
        (&SKIPS_ALLOWED_AS_ANOTHER_USER, "as another user")
    };
    let unexpected: Vec<&(&str, &str)> = skipped
        .iter()
        .filter(|(_, reason)| !allowed.contains(reason))
        .collect();
    assert!(
        unexpected.is_empty(),
        "tests skipped for a reason a run {user} does not expect:\n{unexpected:#?}"
    );
}

/// The oldest Python the agent supports: what `pyproject.toml`, `PROTOCOL.md` and `docs/feeds.md`
/// state, and the interpreter of the Debian bullseye root the suite runs under below.
const MINIMUM_PYTHON: &str = "3.9";

/// Skips no test for these reasons alone: the fake NVML library is built with cargo, which a
/// Debian root has not, and the one the host builds needs a newer glibc than bullseye's.
const SKIPS_ALLOWED_IN_THE_OLD_ROOT: [&str; 1] =
    ["no cargo to build the fake NVML library (tests/fake-nvml)"];

#[test]
fn the_stated_minimum_python_is_the_one_tested() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |path: &str| std::fs::read_to_string(root.join(path)).expect(path);
    let stated = [
        (
            "pyproject.toml",
            format!("requires-python = \">={MINIMUM_PYTHON}\""),
        ),
        (
            "assets/python/PROTOCOL.md",
            format!("- Python {MINIMUM_PYTHON} and later for the agent"),
        ),
        ("docs/feeds.md", format!("(Python {MINIMUM_PYTHON}+,")),
    ];
    for (path, words) in stated {
        assert!(
            read(path).contains(&words),
            "{path} does not state the minimum Python as `{words}`"
        );
    }
}

/// The agent's suite under the oldest Python it supports: the Debian bullseye root
/// (`$STRATA_OLD_ROOT`, made by tests/all), entered with chroot in a mount namespace of its
/// own (root only) with a private `/tmp`, this checkout read-only inside it and the fake
/// `libcuda` built here (the root has no C compiler). Without `STRATA_OLD_ROOT` it says so
/// and passes, as the quick loop has no root to enter, unless `STRATA_REQUIRE_OLD_ROOT=1`
/// (set by the test command) makes that a failure.
#[test]
fn python_agent_suite_on_the_oldest_supported_python() {
    let Some(old_root) = std::env::var_os("STRATA_OLD_ROOT").map(std::path::PathBuf::from) else {
        crate::common::skip(
            "STRATA_REQUIRE_OLD_ROOT",
            "set STRATA_OLD_ROOT to a Debian bullseye root (tests/all makes one)",
        );
        return;
    };
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid,
        0,
        "entering {} needs root (chroot, mount)",
        old_root.display()
    );
    let version = Command::new("chroot")
        .arg(&old_root)
        .args([
            "python3",
            "-c",
            "import sys; print('%d.%d' % sys.version_info[:2])",
        ])
        .output()
        .expect("chroot runs");
    assert!(
        version.status.success(),
        "no python3 in {}: {}",
        old_root.display(),
        String::from_utf8_lossy(&version.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        MINIMUM_PYTHON,
        "the Python of {} is not the stated minimum",
        old_root.display()
    );

    let _one_at_a_time = SUITE.lock().unwrap_or_else(|e| e.into_inner());
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cuda = std::env::temp_dir().join(format!("strata-oldpy-cuda-{}", std::process::id()));
    std::fs::create_dir_all(&cuda).expect("a scratch dir");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o"])
        .arg(cuda.join("libcuda.so.1"))
        .arg(repo.join("tests/python/fake_libcuda.c"))
        .status()
        .expect("cc runs");
    assert!(built.success(), "cc could not build fake_libcuda.c");

    // Everything mounted here goes with the namespace: the shared root is left as it was.
    let inside = r#"
        root=$1 repo=$2 cuda=$3
        mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
        mkdir "$root/tmp/repo" "$root/tmp/fake-cuda"
        mount --bind "$repo" "$root/tmp/repo"
        mount -o remount,bind,ro "$root/tmp/repo"
        mount --bind "$cuda" "$root/tmp/fake-cuda"
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        cd /
        exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
            LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 STRATA_TEST_FAKE_CUDA_DIR=/tmp/fake-cuda \
            sh -c 'cd /tmp/repo && exec python3 -m unittest discover -v -s tests/python -t tests/python'
    "#;
    let output = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-ec",
            inside,
            "sh",
        ])
        .arg(&old_root)
        .arg(repo)
        .arg(&cuda)
        .output()
        .expect("unshare runs");
    let _ = std::fs::remove_dir_all(&cuda);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "the Python agent suite failed on Python {MINIMUM_PYTHON} ({}):\n{text}",
        output.status
    );
    let skipped: Vec<&str> = text
        .lines()
        .filter(|line| line.contains(" ... skipped "))
        .collect();
    for line in &skipped {
        crate::common::say(&format!(
            "python agent suite on Python {MINIMUM_PYTHON}: {}",
            line.trim()
        ));
    }
    crate::common::say(&format!(
        "python agent suite on Python {MINIMUM_PYTHON}: {} skipped",
        skipped.len()
    ));
    let unexpected: Vec<&&str> = skipped
        .iter()
        .filter(|line| {
            !SKIPS_ALLOWED_IN_THE_OLD_ROOT
                .iter()
                .any(|reason| line.ends_with(&format!("skipped '{reason}'")))
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "tests skipped on Python {MINIMUM_PYTHON} for another reason:\n{unexpected:#?}"
    );
    let ran: usize = text
        .lines()
        .find_map(|line| line.strip_prefix("Ran ")?.split(' ').next()?.parse().ok())
        .expect("unittest says how many tests ran");
    assert!(
        ran > 2 * skipped.len(),
        "{ran} tests, {} skipped: the suite hardly ran",
        skipped.len()
    );
}

//! `build.rs` as cargo runs it: a second build with nothing changed compiles nothing, also in
//! a checkout whose `.git` has no `packed-refs` (cargo reruns a build script at every build
//! while a path it was told to watch is missing), and a new commit still changes the stamp,
//! before and after `git pack-refs`.
//!
//! The script is this repository's own, run in a crate of its own made in a scratch git
//! repository (its only dependency, `time`, is already in cargo's cache for strata's build):
//! building strata itself twice would take minutes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PROBE: &str = "stamp-probe";

/// Runs `git ARGS` in `dir`, which must succeed; its trimmed stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let mut command = Command::new("git");
    for setting in [
        "user.name=strata",
        "user.email=strata@localhost",
        "commit.gpgsign=false",
        "init.defaultBranch=main",
    ] {
        command.args(["-c", setting]);
    }
    let out = command
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

struct Probe {
    dir: PathBuf,
    target: PathBuf,
}

impl Probe {
    /// The probe crate, with this repository's `build.rs` and an agent file, committed in a
    /// new repository (whose refs are loose: `git init` and `git commit` write no
    /// `packed-refs`). Its target directory is kept from run to run, for `time`.
    fn new() -> Probe {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("build-script-probe");
        let dir = base.join("crate");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src")).expect("probe dir");
        std::fs::create_dir_all(dir.join("assets/python/strata_feed")).expect("agent dir");
        std::fs::write(
            dir.join("Cargo.toml"),
            format!(
                "[package]\nname = \"{PROBE}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                 [build-dependencies]\ntime = \"0.3\"\n\n[workspace]\n"
            ),
        )
        .expect("Cargo.toml");
        // strata's lock: the same `time` as strata's build, already fetched (the build runs
        // offline); cargo drops what the probe does not use.
        std::fs::copy(repo.join("Cargo.lock"), dir.join("Cargo.lock")).expect("Cargo.lock");
        std::fs::copy(repo.join("build.rs"), dir.join("build.rs")).expect("build.rs");
        std::fs::write(
            dir.join("src/main.rs"),
            "include!(concat!(env!(\"OUT_DIR\"), \"/agent_files.rs\"));\n\
             fn main() {\n    println!(\"{} {}\", env!(\"STRATA_GIT_COMMIT\"), AGENT_FILES.len());\n}\n",
        )
        .expect("main.rs");
        std::fs::write(
            dir.join("assets/python/strata_feed/__init__.py"),
            "VERSION = 1\n",
        )
        .expect("agent file");
        std::fs::write(dir.join(".gitignore"), "/target\n").expect(".gitignore");
        git(&dir, &["init", "-q"]);
        git(&dir, &["add", "."]);
        git(&dir, &["commit", "-q", "-m", "first"]);
        Probe {
            dir,
            target: base.join("target"),
        }
    }

    fn packed_refs(&self) -> PathBuf {
        self.dir.join(".git/packed-refs")
    }

    /// `cargo build -v --offline`, which must succeed; its stderr (where cargo says what
    /// it compiles and what it finds fresh).
    fn build(&self) -> String {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out: Output = Command::new(cargo)
            .args(["build", "-v", "--offline"])
            .current_dir(&self.dir)
            .env("CARGO_TARGET_DIR", &self.target)
            .env_remove("STRATA_GIT_COMMIT")
            .env_remove("SOURCE_DATE_EPOCH")
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .output()
            .expect("cargo runs");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "the probe did not build:\n{stderr}");
        stderr
    }

    /// The commit the built binary is stamped with.
    fn stamp(&self) -> String {
        let out = Command::new(self.target.join("debug").join(PROBE))
            .output()
            .expect("the probe runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let (commit, files) = text.trim().split_once(' ').expect("commit and file count");
        assert_eq!(files, "1", "the agent's file is embedded");
        commit.to_string()
    }

    fn head(&self) -> String {
        git(&self.dir, &["rev-parse", "--short=12", "HEAD"])
    }

    fn commit(&self, message: &str) {
        std::fs::write(self.dir.join("NOTES"), message).expect("a change");
        git(&self.dir, &["add", "NOTES"]);
        git(&self.dir, &["commit", "-q", "-m", message]);
    }
}

/// Whether cargo compiled the probe (or ran its build script) in a build's output.
fn rebuilt(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .map(str::trim)
        .filter(|line| {
            (line.starts_with("Compiling ") && line.contains(PROBE))
                || (line.starts_with("Running ") && line.contains("build-script-build"))
                || (line.starts_with("Dirty ") && line.contains(PROBE))
        })
        .collect()
}

fn assert_fresh(probe: &Probe, when: &str) {
    let second = probe.build();
    assert!(
        rebuilt(&second).is_empty(),
        "{when}: a build with nothing changed did work:\n{second}"
    );
    assert!(
        second.contains(&format!("Fresh {PROBE}")),
        "{when}: cargo did not find the probe fresh:\n{second}"
    );
}

#[test]
fn a_build_with_nothing_changed_builds_nothing_and_a_commit_changes_the_stamp() {
    let probe = Probe::new();
    assert!(
        !probe.packed_refs().exists(),
        "the probe's refs are to be loose"
    );
    probe.build();
    assert_eq!(probe.stamp(), probe.head());
    assert_fresh(&probe, "without packed-refs");

    probe.commit("second");
    let after_commit = probe.build();
    assert!(
        !rebuilt(&after_commit).is_empty(),
        "a new commit did not rerun the build script:\n{after_commit}"
    );
    assert_eq!(probe.stamp(), probe.head(), "the stamp follows a commit");
    assert_fresh(&probe, "after a commit");

    // Packed: the branch's loose ref is gone and packed-refs appears; the commit is the same.
    git(&probe.dir, &["pack-refs", "--all"]);
    assert!(probe.packed_refs().exists());
    probe.build();
    assert_eq!(probe.stamp(), probe.head());
    assert_fresh(&probe, "with packed-refs");
    probe.commit("third");
    probe.build();
    assert_eq!(
        probe.stamp(),
        probe.head(),
        "the stamp follows a commit on a packed branch"
    );

    // Another branch: HEAD itself changes.
    git(&probe.dir, &["checkout", "-q", "-b", "other"]);
    probe.commit("fourth");
    probe.build();
    assert_eq!(probe.stamp(), probe.head(), "the stamp follows a checkout");
    assert_fresh(&probe, "on another branch");
}

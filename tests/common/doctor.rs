//! `strata doctor` run as a user would, and its JSON report read back.
//!
//! Every run is detached from any controlling terminal (its own session), so the terminal
//! checks see the same thing wherever the tests run, with `TERM` set and `NO_COLOR` unset.

use super::{strata, Running};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// `sleep 300`, as this user.
pub fn sleeper() -> Running {
    Running::spawn(Command::new("sleep").arg("300").stdin(Stdio::null()))
}

/// An address whose port nothing listens on (the port is free when this returns).
pub fn free_listen() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").to_string()
}

/// `program ARGS` in a session of its own (no controlling terminal), stdin closed, with a
/// terminal-like `TERM` and no `NO_COLOR` or `COLORTERM`.
pub fn detached(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new(program);
    command
        .stdin(Stdio::null())
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .env_remove("COLORTERM")
        .env_remove("STRATA_NVML_LIB")
        .env_remove("STRATA_FEED_DIR");
    // SAFETY: setsid is async-signal-safe, and nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    command
}

/// `strata doctor --json` on the fake NVML at `lib` with `scenario` (or no NVML at all when
/// `lib` is `None`: a library that does not exist), the serve port checked a free one unless
/// `extra` names `--listen`, and more arguments.
pub fn doctor_command(lib: Option<&Path>, scenario: Option<&Path>, extra: &[&str]) -> Command {
    let mut command = detached(strata());
    let lib = lib.map_or_else(
        || PathBuf::from("/nonexistent/libnvidia-ml.so.1"),
        Path::to_path_buf,
    );
    command.args(["doctor", "--json", "--nvml-lib"]).arg(lib);
    if !extra.contains(&"--listen") {
        command.args(["--listen", &free_listen()]);
    }
    command.args(extra);
    if let Some(scenario) = scenario {
        command.env(super::fake_nvml::SCENARIO_ENV, scenario);
    }
    command
}

/// What a run of doctor gave.
#[derive(Debug)]
pub struct Ran {
    /// The exit status (`None`: killed by a signal).
    pub status: Option<i32>,
    pub report: Value,
    pub stderr: String,
}

/// Runs `command` (a doctor with `--json`) and parses its report.
pub fn ran(mut command: Command) -> Ran {
    let output = command.output().expect("strata doctor runs");
    parse(output)
}

pub fn parse(output: Output) -> Ran {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "doctor's JSON ({e}), status {:?}:\n{stdout}\n{stderr}",
            output.status.code()
        )
    });
    let status = output.status.code();
    assert_eq!(
        report["exit_status"].as_i64().map(|s| s as i32),
        status,
        "the exit status is the report's: {report}"
    );
    Ran {
        status,
        report,
        stderr,
    }
}

/// Every check named `name` (about `subject`, if given).
pub fn checks<'a>(report: &'a Value, name: &str, subject: Option<&str>) -> Vec<&'a Value> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["check"] == name && subject.is_none_or(|s| c["subject"] == s))
        .collect()
}

/// The one check named `name` (about `subject`, if given).
pub fn check<'a>(report: &'a Value, name: &str, subject: Option<&str>) -> &'a Value {
    let found = checks(report, name, subject);
    assert_eq!(
        found.len(),
        1,
        "one {name} ({subject:?}) check in {:#}",
        report["checks"]
    );
    found[0]
}

/// `check`'s status, `detail` and `fix` in one line, for messages.
pub fn said(check: &Value) -> String {
    format!(
        "{} {}: {} | fix: {}",
        check["status"], check["check"], check["detail"], check["fix"]
    )
}

/// Asserts `check` has `status` and its detail holds every one of `words`.
pub fn assert_check(check: &Value, status: &str, words: &[&str]) {
    assert_eq!(check["status"], status, "{}", said(check));
    let detail = check["detail"].as_str().unwrap_or_default();
    for word in words {
        assert!(detail.contains(word), "{word:?} in {}", said(check));
    }
}

/// `docs/doctor.md`'s documented keys of each JSON object, between `<!-- MARK -->` and its
/// end.
pub fn documented(
    mark: &str,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/doctor.md"))
        .expect("docs/doctor.md");
    let start = readme
        .find(&format!("<!-- {mark} -->"))
        .unwrap_or_else(|| panic!("docs/doctor.md has a {mark} block"));
    let end = readme[start..]
        .find(&format!("<!-- /{mark} -->"))
        .map(|e| start + e)
        .expect("its end marker");
    readme[start..end]
        .lines()
        .filter(|l| !l.starts_with("<!--") && !l.starts_with("```") && !l.trim().is_empty())
        .map(|l| {
            let mut words = l.split_whitespace().map(str::to_string);
            (words.next().unwrap_or_default(), words.collect())
        })
        .collect()
}

pub fn keys(object: &Value) -> std::collections::BTreeSet<String> {
    object
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {object}"))
        .keys()
        .cloned()
        .collect()
}

//! `strata run -- CMD ARGS`: runs CMD with the agent in every Python process it starts.
//!
//! The agent is installed once per version; `PYTHONPATH` carries only its `strata_run/`
//! directory, whose `sitecustomize` imports the job environment's own `strata_feed` when it
//! is this very version (strata installed with pip into the job's environment), else the
//! installed copy beside it, starts it, and then chains any `sitecustomize` of the
//! environment. The job's `sys.path` is otherwise its own. strata then
//! `exec`s CMD: CMD takes strata's place, so it keeps the pid, the terminal and its process
//! group, receives every signal sent to it directly, and its exit status is the status.

use super::{default_base, install_agent, LaunchError};
use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// What `strata run` needs besides the command.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// `--feed-dir`: where the agents put their sockets (else theirs: `/tmp/strata-<uid>`).
    pub feed_dir: Option<PathBuf>,
    /// Seconds between the agents' samples.
    pub interval: f64,
}

/// The environment CMD runs with: the agent's `strata_run/` first on `PYTHONPATH`.
pub(crate) fn environment(
    agent_dir: &Path,
    options: &RunOptions,
    inherited_pythonpath: Option<&OsStr>,
) -> Vec<(OsString, OsString)> {
    let mut pythonpath = OsString::new();
    pythonpath.push(agent_dir.join("strata_run"));
    if let Some(old) = inherited_pythonpath.filter(|p| !p.is_empty()) {
        pythonpath.push(":");
        pythonpath.push(old);
    }
    let mut env = vec![
        (OsString::from("PYTHONPATH"), pythonpath),
        (
            OsString::from("STRATA_FEED_INTERVAL"),
            OsString::from(options.interval.to_string()),
        ),
    ];
    if let Some(dir) = &options.feed_dir {
        env.push((
            OsString::from("STRATA_FEED_DIR"),
            dir.clone().into_os_string(),
        ));
    }
    env
}

/// A warning when CMD is a Python interpreter started so that it ignores `PYTHONPATH` or
/// `sitecustomize` (`-E`, `-I`, `-S`): the agent cannot start there.
pub(crate) fn ignored_by(command: &[OsString]) -> Option<String> {
    let program = Path::new(command.first()?);
    let name = program.file_name()?.to_string_lossy();
    if !name.starts_with("python") {
        return None;
    }
    for arg in command.iter().skip(1).map(|a| a.to_string_lossy()) {
        if arg == "-c" || arg == "-m" || !arg.starts_with('-') || arg.starts_with("--") {
            break;
        }
        if let Some(flag) = arg.chars().skip(1).find(|c| matches!(c, 'E' | 'I' | 'S')) {
            return Some(format!(
                "strata run: `{name} -{flag}` ignores PYTHONPATH or sitecustomize, so the agent will not start; call `import strata_feed; strata_feed.start()` in the job instead"
            ));
        }
    }
    None
}

/// Why CMD could not be run, and the exit status to give: 127 when it is not found and 126
/// when it cannot be run, as a shell would; 1 when the agent could not be installed.
#[derive(Debug)]
pub struct RunFailure {
    pub error: LaunchError,
    pub status: u8,
}

/// Replaces this process with CMD, the agent installed and on its path. Returns only on
/// failure.
pub fn exec(command: &[OsString], options: &RunOptions) -> RunFailure {
    let Some(program) = command.first() else {
        return RunFailure {
            error: LaunchError::Refused("no command given: strata run -- CMD ARGS".into()),
            status: 2,
        };
    };
    // SAFETY: geteuid/getegid cannot fail and have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let agent = match install_agent(&default_base(uid), uid, gid) {
        Ok(agent) => agent,
        Err(error) => return RunFailure { error, status: 1 },
    };
    if let Some(warning) = ignored_by(command) {
        eprintln!("{warning}");
    }
    let inherited = std::env::var_os("PYTHONPATH");
    let error = std::process::Command::new(program)
        .args(&command[1..])
        .envs(environment(&agent, options, inherited.as_deref()))
        .exec();
    let status = match error.kind() {
        std::io::ErrorKind::NotFound => 127,
        _ => 126,
    };
    RunFailure {
        error: LaunchError::Refused(format!(
            "cannot run {}: {error}",
            Path::new(program).display()
        )),
        status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_agent_comes_first_on_the_path_and_the_job_keeps_its_own() {
        let options = RunOptions {
            feed_dir: Some(PathBuf::from("/srv/feeds")),
            interval: 0.5,
        };
        let env = environment(Path::new("/tmp/a"), &options, Some(OsStr::new("/opt/lib")));
        let get = |k: &str| {
            env.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.to_string_lossy().into_owned())
        };
        assert_eq!(
            get("PYTHONPATH").as_deref(),
            Some("/tmp/a/strata_run:/opt/lib")
        );
        assert_eq!(get("STRATA_FEED_DIR").as_deref(), Some("/srv/feeds"));
        assert_eq!(get("STRATA_FEED_INTERVAL").as_deref(), Some("0.5"));
    }

    #[test]
    fn isolated_pythons_are_warned_about() {
        assert!(ignored_by(&args(&["python3", "-I", "train.py"])).is_some());
        assert!(ignored_by(&args(&["/usr/bin/python3.11", "-uS", "x.py"])).is_some());
        assert!(ignored_by(&args(&["python", "train.py", "-I"])).is_none());
        assert!(ignored_by(&args(&["python", "-m", "torch.distributed.run", "-E"])).is_none());
        assert!(ignored_by(&args(&["torchrun", "-I"])).is_none());
    }
}

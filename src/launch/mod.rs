//! Putting the Python agent into jobs: `strata run` (a `sitecustomize` on `PYTHONPATH`) and
//! `strata attach` (`sys.remote_exec`, Python 3.14+). The agent's files are embedded in the
//! binary and installed, once per version, in a private directory.

pub mod attach;
pub mod offer;
pub(crate) mod python;
pub mod run;

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/agent_files.rs"));

/// Why the agent could not be put in place.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{0}")]
    Refused(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LaunchError {
    let what = what.into();
    move |source| LaunchError::Io { what, source }
}

/// A short name for this build of the agent: FNV-1a over its files, so a new strata never
/// runs an old agent left in place.
pub(crate) fn agent_digest() -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (path, contents) in AGENT_FILES {
        for byte in path.bytes().chain([0]).chain(contents.bytes()).chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// Checks (or creates) `dir` as a private directory of `uid`: a real directory, not a link,
/// owned by `uid`, mode 0700 — the rule the agent applies to its feed dir.
pub(crate) fn private_dir(dir: &Path, uid: u32, gid: u32) -> Result<(), LaunchError> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                .map_err(io(format!("cannot chmod {}", dir.display())))?;
            if nix_geteuid() != uid {
                chown(dir, uid, gid)?;
            }
            Ok(())
        }
        Err(e) => Err(io(format!("cannot read {}", dir.display()))(e)),
        Ok(meta) if !meta.is_dir() || meta.file_type().is_symlink() => Err(LaunchError::Refused(
            format!("{} is not a directory (a link?): remove it", dir.display()),
        )),
        Ok(meta) if meta.uid() != uid => Err(LaunchError::Refused(format!(
            "{} belongs to uid {}, not {uid}: remove it or choose another --feed-dir",
            dir.display(),
            meta.uid()
        ))),
        Ok(meta) if meta.mode() & 0o077 != 0 => Err(LaunchError::Refused(format!(
            "{} has mode {:04o}, not 0700: chmod 700 it",
            dir.display(),
            meta.mode() & 0o7777
        ))),
        Ok(_) => Ok(()),
    }
}

fn nix_geteuid() -> u32 {
    // SAFETY: geteuid cannot fail and has no preconditions.
    unsafe { libc::geteuid() }
}

fn chown(path: &Path, uid: u32, gid: u32) -> Result<(), LaunchError> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .map_err(io(format!("cannot chown {}", path.display())))
}

/// Installs the agent under `base` (a private directory of `uid`) as `agent-<digest>/`,
/// writing each file atomically unless it is already there with the same contents. Returns
/// the agent directory: it holds the `strata_feed` package and `strata_run/sitecustomize.py`.
pub(crate) fn install_agent(base: &Path, uid: u32, gid: u32) -> Result<PathBuf, LaunchError> {
    private_dir(base, uid, gid)?;
    let dir = base.join(format!("agent-{}", agent_digest()));
    private_dir(&dir, uid, gid)?;
    for (relative, contents) in AGENT_FILES {
        let path = dir.join(relative);
        if fs::read(&path).is_ok_and(|old| old == contents.as_bytes()) {
            continue;
        }
        let parent = path.parent().unwrap_or(&dir);
        if !parent.exists() {
            fs::create_dir_all(parent)
                .map_err(io(format!("cannot create {}", parent.display())))?;
            if nix_geteuid() != uid {
                chown(parent, uid, gid)?;
            }
        }
        let temporary = path.with_extension(format!("tmp{}", std::process::id()));
        let mut file = fs::File::create(&temporary)
            .map_err(io(format!("cannot write {}", temporary.display())))?;
        file.write_all(contents.as_bytes())
            .map_err(io(format!("cannot write {}", temporary.display())))?;
        drop(file);
        if nix_geteuid() != uid {
            chown(&temporary, uid, gid)?;
        }
        fs::rename(&temporary, &path).map_err(io(format!("cannot install {}", path.display())))?;
    }
    Ok(dir)
}

/// `/tmp/strata-<uid>`: where the agent's feed dir and its installed code live by default.
pub(crate) fn default_base(uid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/strata-{uid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_is_embedded_and_installs_once_per_version() {
        assert!(
            AGENT_FILES
                .iter()
                .any(|(p, _)| p.ends_with("strata_feed/__init__.py")),
            "{:?}",
            AGENT_FILES.iter().map(|f| f.0).collect::<Vec<_>>()
        );
        assert!(AGENT_FILES
            .iter()
            .any(|(p, _)| p.ends_with("strata_run/sitecustomize.py")));
        let base = std::env::temp_dir().join(format!("strata-install-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let uid = nix_geteuid();
        // SAFETY: getegid has no preconditions.
        let gid = unsafe { libc::getegid() };
        let dir = install_agent(&base, uid, gid).expect("installs");
        let again = install_agent(&base, uid, gid).expect("installs again");
        assert_eq!(dir, again);
        let mode = fs::metadata(&base).expect("base").mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert!(dir.join("strata_feed").join("__init__.py").is_file());
        // A directory with other permissions is refused, not used.
        fs::set_permissions(&base, fs::Permissions::from_mode(0o755)).expect("chmod");
        let err = install_agent(&base, uid, gid).expect_err("refused");
        assert!(err.to_string().contains("chmod 700"), "{err}");
        let _ = fs::remove_dir_all(&base);
    }
}

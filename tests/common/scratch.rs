//! A test's own directory under the system's temporary directory, removed on drop (a test
//! that fails cleans up too).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `strata-<name>-<pid>-<n>` in the temporary directory, made afresh and removed on drop.
/// The pid and a count in the process keep it apart from every other test's, in this
/// process and in any other.
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    /// This user's alone (0700).
    pub fn new(name: &str) -> Scratch {
        Scratch::with_mode(name, 0o700)
    }

    /// Readable by everyone (0755): a monitor or a job run as another user (`setpriv`,
    /// `nobody`) reads what the test puts here.
    pub fn shared(name: &str) -> Scratch {
        Scratch::with_mode(name, 0o755)
    }

    fn with_mode(name: &str, mode: u32) -> Scratch {
        static MADE: AtomicUsize = AtomicUsize::new(0);
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("strata-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot make {}: {e}", dir.display()));
        chmod(&dir, mode);
        Scratch { dir }
    }

    /// `name` in the directory (not made).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The feed dir the jobs and the monitor share (0700, this user's), made on first use.
    pub fn feeds(&self) -> PathBuf {
        let dir = self.dir.join("feeds");
        if !dir.exists() {
            std::fs::create_dir(&dir)
                .unwrap_or_else(|e| panic!("cannot make {}: {e}", dir.display()));
            chmod(&dir, 0o700);
        }
        dir
    }

    /// Writes `contents` to `name` in the directory with `mode`; returns its path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>, mode: u32) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, contents)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        chmod(&path, mode);
        path
    }

    /// `from` in as `name`, readable and runnable by everyone (0755): a hard link where the
    /// file system allows one, else a copy. A link is never open for writing, so running it
    /// cannot fail with ETXTBSY, as a fresh copy can while another test thread's child,
    /// forked before the copy's descriptor closed, has not yet exec'd.
    pub fn copy(&self, from: &Path, name: &str) -> PathBuf {
        let path = self.dir.join(name);
        // A name given before is replaced, never written through (it may be a link).
        let _ = std::fs::remove_file(&path);
        if std::fs::hard_link(from, &path).is_ok() {
            let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o7777);
            if mode.is_ok_and(|m| m & 0o755 == 0o755) {
                return path;
            }
            std::fs::remove_file(&path)
                .unwrap_or_else(|e| panic!("cannot remove {}: {e}", path.display()));
        }
        let bytes =
            std::fs::read(from).unwrap_or_else(|e| panic!("cannot read {}: {e}", from.display()));
        self.write(name, bytes, 0o755)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", path.display()));
}

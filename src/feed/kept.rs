//! Feed dirs in this mount namespace kept open from one scan to the next. A dir is opened
//! (`O_PATH`, no final link followed) when first looked for and again only when its parent
//! changed: a dir removed, renamed, made or replaced by a link changes its parent's mtime.
//! At each scan the kept descriptor is `fstat`ed again, so that its mode, owner and mtime
//! are this scan's. Where the parent cannot be stat'ed, the dir is opened at each scan, as
//! before; and every [`RELIST_SCANS`] scans it is opened anew whatever its parent says (two
//! changes within one timestamp tick, on a kernel without fine-grained timestamps), as a
//! kept listing is read again.
//!
//! At one sample a second on a node of one GPU, the `open` and `close` of the dir at each
//! scan were two of the collector's ten system calls, each a path looked up cold.

use super::listing::{open, DirId, Opened, RELIST_SCANS};
use hashbrown::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The most dirs kept open (a monitor running as root lists every user's): beyond these, a
/// dir is opened and closed at each scan.
const MAX_KEPT: usize = 64;

/// A dir as last opened: its descriptor (`None`: nothing was there), its parent as it was
/// then, the scan that opened it, and the last scan that used it.
struct Kept {
    fd: Option<Arc<std::os::fd::OwnedFd>>,
    parent: DirId,
    opened_at: u64,
    used_at: u64,
}

#[derive(Default)]
pub(crate) struct KeptDirs {
    dirs: HashMap<PathBuf, Kept>,
    /// Parents stat'ed this scan (`None`: could not be).
    parents: HashMap<PathBuf, Option<DirId>>,
    scan: u64,
    /// Paths opened, for the tests: what is kept is not opened again.
    #[cfg(test)]
    pub(crate) opens: u64,
}

impl KeptDirs {
    /// Starts scan number `scan`: every parent is stat'ed again, once.
    pub(crate) fn begin_scan(&mut self, scan: u64) {
        self.scan = scan;
        self.parents.clear();
    }

    /// Forgets the dirs this scan did not look for, closing them.
    pub(crate) fn end_scan(&mut self) {
        let scan = self.scan;
        self.dirs.retain(|_, kept| kept.used_at == scan);
    }

    /// `path`'s identity and last change, stat'ed once a scan (following links, as the
    /// opening of a path below it does).
    pub(crate) fn stat(&mut self, path: &Path) -> Option<DirId> {
        if let Some(id) = self.parents.get(path) {
            return *id;
        }
        let id = std::fs::metadata(path).ok().map(|m| {
            (
                m.dev(),
                m.ino(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
            )
        });
        self.parents.insert(path.to_path_buf(), id);
        id
    }

    /// `path` opened without following a final link, with what `fstat` says of it now:
    /// the descriptor kept from an earlier scan where its parent has not changed since, else
    /// a fresh one. `None` where nothing can be opened there.
    pub(crate) fn open(&mut self, path: &Path) -> Option<Opened> {
        let scan = self.scan;
        let parent = path.parent().and_then(|parent| self.stat(parent));
        if let (Some(parent), Some(kept)) = (parent, self.dirs.get_mut(path)) {
            if kept.parent == parent && scan - kept.opened_at < RELIST_SCANS {
                kept.used_at = scan;
                let Some(fd) = &kept.fd else {
                    return None;
                };
                // Unlinked since (a change its parent's timestamp missed): opened again.
                if let Some(st) = super::fd::fstat(fd).filter(|st| st.st_nlink > 0) {
                    return Some(Opened {
                        fd: Arc::clone(fd),
                        st,
                    });
                }
            }
        }
        #[cfg(test)]
        {
            self.opens += 1;
        }
        let opened = open(path);
        match parent {
            Some(parent) if self.dirs.len() < MAX_KEPT || self.dirs.contains_key(path) => {
                let kept = Kept {
                    fd: opened.as_ref().map(|o| Arc::clone(&o.fd)),
                    parent,
                    opened_at: scan,
                    used_at: scan,
                };
                self.dirs.insert(path.to_path_buf(), kept);
            }
            _ => {
                self.dirs.remove(path);
            }
        }
        opened
    }
}

#[cfg(test)]
#[path = "kept_tests.rs"]
mod tests;

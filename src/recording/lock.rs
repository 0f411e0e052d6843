//! A recording written by one writer at a time, and one that notices when what it writes is
//! taken from under it.
//!
//! Two recorders on one file interleave their frames into garbage: the file (or a flight
//! record's directory) is locked exclusively (`flock`) for as long as it is written, and a
//! second writer is refused with the holder named, read from `/proc/locks`. A file or a
//! directory removed while it is written takes every sample written since with it, silently
//! (the writes go to an inode no name leads to): its link count is read before each sample.

use std::fs::File;
use std::os::fd::AsRawFd;

/// Takes `file`'s exclusive lock, without waiting; where another open file holds it, who:
/// `pid 4242, strata`, or `another process` where `/proc/locks` does not say.
pub(crate) fn take(file: &File) -> Result<(), String> {
    // SAFETY: flock on a descriptor this File owns; no memory is passed.
    let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if taken == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    if error.raw_os_error() != Some(libc::EWOULDBLOCK) {
        // A filesystem without locks (some network ones): written unlocked, as before.
        return Ok(());
    }
    Err(holder(file).unwrap_or_else(|| "another process".into()))
}

/// Who holds a lock on `file`'s inode, from `/proc/locks` (`1: FLOCK ADVISORY WRITE 4242
/// 08:01:1234567 0 EOF`: the pid, then the device's major and minor in hex and the inode).
fn holder(file: &File) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let dev = meta.dev();
    let want = format!(
        "{:02x}:{:02x}:{}",
        libc::major(dev),
        libc::minor(dev),
        meta.ino()
    );
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let pid: u32 = locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // `1:`, kind, advisory, mode, pid, dev:ino, ... (a `->` marks a waiter).
        let fields: Vec<&str> = fields.into_iter().filter(|f| *f != "->").collect();
        (fields.get(1) == Some(&"FLOCK") && fields.get(5) == Some(&want.as_str()))
            .then(|| fields.get(4)?.parse().ok())
            .flatten()
    })?;
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|c| crate::text::clean(c.trim()).into_owned())
        .filter(|c| !c.is_empty());
    Some(match name {
        Some(name) => format!("pid {pid}, {name}"),
        None => format!("pid {pid}"),
    })
}

/// Whether no name leads to `file` any more (removed while open): its link count is 0.
pub(crate) fn removed(file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    file.metadata().is_ok_and(|m| m.nlink() == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_and_a_removed_file_is_seen() {
        let dir = crate::fixtures::TempDir::new("lock");
        let path = dir.path().join("r.strata");
        let first = File::create(&path).expect("create");
        take(&first).expect("the first takes it");
        let second = File::options().append(true).open(&path).expect("open");
        let held = take(&second).expect_err("the second is refused");
        let me = std::process::id();
        assert!(held.starts_with(&format!("pid {me}, ")), "{held}");
        drop(first);
        take(&second).expect("free again once the first is closed");
        assert!(!removed(&second));
        std::fs::remove_file(&path).expect("remove");
        assert!(removed(&second));
    }
}

//! Directories by descriptor: opened without following a final link, or inside a process's
//! root, then examined and used through the descriptor (no path is resolved twice).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// `open(path, O_PATH | extra)`.
pub(crate) fn open_path(path: &Path, extra: libc::c_int) -> io::Result<OwnedFd> {
    let c = cstring(path)?;
    // SAFETY: `c` is a valid NUL-terminated string; the result is checked.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC | extra) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens `rel` (no final symlink followed) with `root` as `/`: an absolute symlink inside a
/// container's tree stays in the container's tree.
pub(crate) fn open_in_root(root: &OwnedFd, rel: &Path) -> io::Result<OwnedFd> {
    openat_in_root(root, rel, libc::O_NOFOLLOW)
}

pub(crate) fn open_in_root_following(root: &OwnedFd, rel: &Path) -> io::Result<OwnedFd> {
    openat_in_root(root, rel, libc::O_DIRECTORY)
}

fn openat_in_root(root: &OwnedFd, rel: &Path, extra: libc::c_int) -> io::Result<OwnedFd> {
    let c = cstring(rel)?;
    let flags = libc::O_PATH | libc::O_CLOEXEC | extra;
    // SAFETY: `open_how` is plain data; zero is a valid value for every field.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: valid dirfd, NUL-terminated path, and a correctly sized `open_how`.
    let mut fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    } as libc::c_int;
    if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
        // Kernels before 5.6: resolve relative to the root, without the containment.
        // SAFETY: as above.
        fd = unsafe { libc::openat(root.as_raw_fd(), c.as_ptr(), flags) };
    }
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn fstat(fd: &OwnedFd) -> Option<libc::stat> {
    // SAFETY: `stat` is plain data, filled by the kernel on success.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor and pointer.
    (unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0).then_some(st)
}

pub(crate) fn fstatat(dir: &OwnedFd, name: &str) -> Option<libc::stat> {
    let c = CString::new(name).ok()?;
    // SAFETY: as in `fstat`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, NUL-terminated name, valid pointer.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    (rc == 0).then_some(st)
}

/// Where the link `name` in `dir` points (never followed); `None` if it is not a link.
pub(crate) fn readlink_in(dir: &OwnedFd, name: &str) -> Option<String> {
    let c = CString::new(name).ok()?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: valid descriptor, NUL-terminated name, and a buffer of the length given.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast::<libc::c_char>(),
            buf.len(),
        )
    };
    let n = usize::try_from(n).ok()?;
    buf.truncate(n);
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// Removes `name` from `dir` (a stale socket of ours).
pub(crate) fn unlink_in(dir: &OwnedFd, name: &str) -> io::Result<()> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: valid descriptor and NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt};

    fn is_link(st: &libc::stat) -> bool {
        st.st_mode & libc::S_IFMT == libc::S_IFLNK
    }

    #[test]
    fn an_absolute_link_inside_a_root_stays_inside_it() {
        struct Cleanup(std::path::PathBuf);
        impl Drop for Cleanup {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let base = std::env::temp_dir().join(format!("strata-test-fd-{}", std::process::id()));
        let _cleanup = Cleanup(base.clone());
        let target = format!("strata-test-only-inside-{}", std::process::id());
        std::fs::create_dir_all(base.join(&target)).expect("mkdir");
        symlink(format!("/{target}"), base.join("link")).expect("symlink");
        let root = open_path(&base, libc::O_DIRECTORY).expect("root");

        let inside = open_in_root_following(&root, Path::new("link")).expect("resolved in root");
        let st = fstat(&inside).expect("fstat");
        let want = std::fs::metadata(base.join(&target)).expect("metadata");
        assert_eq!((st.st_dev, st.st_ino), (want.dev(), want.ino()));

        let link = open_in_root(&root, Path::new("link")).expect("the link itself");
        assert!(fstat(&link).is_some_and(|st| is_link(&st)));
        assert!(fstatat(&root, "link").is_some_and(|st| is_link(&st)));
    }
}

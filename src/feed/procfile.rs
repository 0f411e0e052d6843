//! A `/proc` file read whole, in as few calls as the kernel allows. Both halves of collect
//! read `/proc` through it (`source::procfs` re-exports it); it lives in `feed` because
//! `source` may import `feed` and not the other way.

use std::fs;
use std::io::{ErrorKind, Read};
use std::path::Path;

/// A `/proc` file, read whole: into a page-sized buffer, in one `read` and the one that finds
/// its end. `fs::read` and `read_to_end` ask the file's size first (`statx`, then `lseek`:
/// two calls for a `/proc` file, which says 0) and then read in steps growing from 32 bytes.
/// A longer file (a large environment) is read on to its end, the buffer doubling.
pub(crate) fn read_proc(path: &Path) -> std::io::Result<Vec<u8>> {
    read_proc_up_to(path, usize::MAX)
}

/// [`read_proc`], of at most `max` bytes (the rest is not read).
pub(crate) fn read_proc_up_to(path: &Path, max: usize) -> std::io::Result<Vec<u8>> {
    let mut file = fs::File::open(path)?;
    let mut raw = vec![0u8; 4096.min(max)];
    let mut len = 0;
    while len < max {
        if len == raw.len() {
            raw.resize(len.saturating_mul(2).min(max), 0);
        }
        match file.read(&mut raw[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    raw.truncate(len);
    Ok(raw)
}

/// A `/proc` text file, read whole. Its process name may hold bytes that are not UTF-8 (any
/// but `/` and NUL): they become U+FFFD, and the rest of the file is read, not refused.
pub(crate) fn read_lossy(path: &Path) -> std::io::Result<String> {
    let raw = read_proc(path)?;
    Ok(String::from_utf8(raw)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file read through one page-sized buffer is read whole, shorter or longer than it,
    /// and no further than asked.
    #[test]
    fn a_proc_file_is_read_whole_whatever_its_length() {
        let dir = std::env::temp_dir().join(format!("strata-procfile-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("mkdir");
        for len in [0, 1, 4095, 4096, 4097, 70_000] {
            let path = dir.join(format!("f{len}"));
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            fs::write(&path, &bytes).expect("write");
            assert_eq!(read_proc(&path).expect("read"), bytes, "{len} bytes");
            for max in [0, 1, 4096, 5000] {
                let head = read_proc_up_to(&path, max).expect("read");
                assert_eq!(head, bytes[..len.min(max)], "{len} bytes, {max} at most");
            }
        }
        let status = read_lossy(Path::new("/proc/self/status")).expect("status");
        assert!(status.contains("\nUid:"), "{status}");
        let _ = fs::remove_dir_all(&dir);
    }
}

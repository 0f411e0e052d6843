use super::*;
use crate::fixtures::TempDir;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::time::{Duration, SystemTime};

/// Sets `dir`'s mtime to `secs` after the epoch: a change its parent's timestamp shows,
/// whatever the kernel's timestamp granularity.
fn touch(dir: &Path, secs: u64) {
    fs::File::open(dir)
        .expect("open dir")
        .set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
        .expect("set mtime");
}

/// One scan that looks for `path` alone.
fn scan(kept: &mut KeptDirs, n: u64, path: &Path) -> Option<Opened> {
    kept.begin_scan(n);
    let opened = kept.open(path);
    kept.end_scan();
    opened
}

#[test]
fn a_dir_is_opened_once_while_its_parent_is_unchanged() {
    let tmp = TempDir::new("kept");
    let dir = tmp.join("strata-0");
    fs::create_dir(&dir).expect("mkdir");
    let mut kept = KeptDirs::default();
    let first = scan(&mut kept, 1, &dir).expect("opened");
    for n in 2..=RELIST_SCANS {
        let again = scan(&mut kept, n, &dir).expect("kept");
        assert!(Arc::ptr_eq(&first.fd, &again.fd), "scan {n}");
    }
    assert_eq!(kept.opens, 1);
    // Then opened anew, changed or not.
    let fresh = scan(&mut kept, RELIST_SCANS + 1, &dir).expect("opened");
    assert!(!Arc::ptr_eq(&first.fd, &fresh.fd));
    assert_eq!(kept.opens, 2);
}

#[test]
fn what_the_kept_dir_says_is_this_scans() {
    let tmp = TempDir::new("kept");
    let dir = tmp.join("strata-0");
    fs::create_dir(&dir).expect("mkdir");
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).expect("chmod");
    let mut kept = KeptDirs::default();
    let first = scan(&mut kept, 1, &dir).expect("opened");
    assert_eq!(first.st.st_mode & 0o777, 0o700);
    // A chmod and a new entry change the dir, not its parent.
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod");
    touch(&dir, 1_000);
    let second = scan(&mut kept, 2, &dir).expect("kept");
    assert!(Arc::ptr_eq(&first.fd, &second.fd));
    assert_eq!(second.st.st_mode & 0o777, 0o755);
    assert_eq!(second.st.st_mtime, 1_000);
}

#[test]
fn a_dir_renamed_away_and_made_again_is_opened_again() {
    let tmp = TempDir::new("kept");
    let dir = tmp.join("strata-0");
    fs::create_dir(&dir).expect("mkdir");
    let mut kept = KeptDirs::default();
    let first = scan(&mut kept, 1, &dir).expect("opened");
    fs::rename(&dir, tmp.join("old")).expect("rename");
    fs::create_dir(&dir).expect("mkdir");
    touch(&tmp, 2_000);
    let second = scan(&mut kept, 2, &dir).expect("opened");
    let made = fs::metadata(&dir).expect("stat");
    assert_eq!(second.st.st_ino, std::os::unix::fs::MetadataExt::ino(&made));
    assert_ne!(second.st.st_ino, first.st.st_ino);
    assert_eq!(kept.opens, 2);
}

#[test]
fn a_dir_replaced_by_a_link_is_opened_again_and_the_link_not_followed() {
    let tmp = TempDir::new("kept");
    let dir = tmp.join("strata-0");
    fs::create_dir(&dir).expect("mkdir");
    let elsewhere = tmp.join("elsewhere");
    fs::create_dir(&elsewhere).expect("mkdir");
    let mut kept = KeptDirs::default();
    assert!(scan(&mut kept, 1, &dir).expect("opened").is_dir());
    fs::remove_dir(&dir).expect("rmdir");
    symlink(&elsewhere, &dir).expect("symlink");
    touch(&tmp, 3_000);
    let link = scan(&mut kept, 2, &dir).expect("the link itself");
    assert!(!link.is_dir());
    assert_eq!(link.st.st_mode & libc::S_IFMT, libc::S_IFLNK);
}

#[test]
fn an_absent_dir_is_looked_for_once_while_its_parent_is_unchanged() {
    let tmp = TempDir::new("kept");
    let dir = tmp.join("strata-0");
    let mut kept = KeptDirs::default();
    assert!(scan(&mut kept, 1, &dir).is_none());
    assert!(scan(&mut kept, 2, &dir).is_none());
    assert_eq!(kept.opens, 1);
    fs::create_dir(&dir).expect("mkdir");
    touch(&tmp, 4_000);
    assert!(scan(&mut kept, 3, &dir).expect("made since").is_dir());
    assert_eq!(kept.opens, 2);
}

#[test]
fn a_dir_removed_where_its_parent_seems_unchanged_is_opened_again() {
    let tmp = TempDir::new("kept");
    let dir = tmp.join("strata-0");
    fs::create_dir(&dir).expect("mkdir");
    let mut kept = KeptDirs::default();
    scan(&mut kept, 1, &dir).expect("opened");
    fs::remove_dir(&dir).expect("rmdir");
    // As if the parent's timestamp had not moved (two changes within one tick).
    kept.begin_scan(2);
    let parent = kept.stat(tmp.path()).expect("parent");
    kept.dirs.get_mut(&dir).expect("kept").parent = parent;
    assert!(kept.open(&dir).is_none(), "the unlinked dir is not listed");
    kept.end_scan();
    assert_eq!(kept.opens, 2);
}

#[test]
fn a_dir_no_scan_looks_for_is_closed() {
    let tmp = TempDir::new("kept");
    let dir = tmp.join("strata-0");
    fs::create_dir(&dir).expect("mkdir");
    let mut kept = KeptDirs::default();
    let first = scan(&mut kept, 1, &dir).expect("opened");
    kept.begin_scan(2);
    kept.end_scan();
    assert_eq!(
        Arc::strong_count(&first.fd),
        1,
        "the kept descriptor is dropped"
    );
    scan(&mut kept, 3, &dir).expect("opened");
    assert_eq!(kept.opens, 2);
}

#[test]
fn past_the_most_kept_dirs_are_opened_at_each_scan() {
    let tmp = TempDir::new("kept");
    let dirs: Vec<PathBuf> = (0..MAX_KEPT + 6)
        .map(|n| {
            let dir = tmp.join(format!("strata-{n}"));
            fs::create_dir(&dir).expect("mkdir");
            dir
        })
        .collect();
    let mut kept = KeptDirs::default();
    for n in 1..=2 {
        kept.begin_scan(n);
        for dir in &dirs {
            assert!(kept.open(dir).expect("opened").is_dir());
        }
        kept.end_scan();
    }
    assert_eq!(kept.dirs.len(), MAX_KEPT);
    assert_eq!(kept.opens, (MAX_KEPT + 6 + 6) as u64);
}

#[test]
fn a_parent_that_cannot_be_stated_keeps_nothing() {
    let mut kept = KeptDirs::default();
    let dir = Path::new("relative-feed-dir-that-is-not-there");
    assert!(scan(&mut kept, 1, dir).is_none());
    assert!(scan(&mut kept, 2, dir).is_none());
    assert_eq!(kept.opens, 2);
    assert!(kept.dirs.is_empty());
}

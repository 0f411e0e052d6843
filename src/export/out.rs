//! The directory OUT the tables go into: refused when it holds anything (unless forced), made
//! when missing, and each table written whole: into a hidden file beside its name, renamed
//! into place only once every table is finished. A failed export leaves no table, and no
//! directory it made.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// Why OUT cannot take the tables.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OutError {
    #[error("{0} is not a directory")]
    NotADirectory(String),
    #[error("{0} is not empty: the tables would land among other files")]
    NotEmpty(String),
    #[error("cannot use {0}: {1}")]
    Io(String, io::Error),
}

impl OutError {
    pub(crate) fn hint(&self) -> &'static str {
        match self {
            OutError::NotADirectory(_) => "name a new directory for the tables",
            OutError::NotEmpty(_) => {
                "name a new directory, or add --force to replace the tables of this format in it"
            }
            OutError::Io(..) => "check the path and its permissions",
        }
    }
}

/// The directory the tables go into.
#[derive(Debug)]
pub(crate) struct Out {
    dir: PathBuf,
    /// Whether it was made by this export (and so is removed again if the export fails).
    made: bool,
    /// The tables being written: (hidden file, final name).
    pending: Vec<(PathBuf, PathBuf)>,
}

fn shown(path: &Path) -> String {
    crate::text::clean(&path.display().to_string()).into_owned()
}

/// Checks that `dir` can take the tables: missing, an empty directory, or (with `force`) any
/// directory. Nothing is made yet.
pub(crate) fn check(dir: &Path, force: bool) -> Result<(), OutError> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(OutError::Io(shown(dir), e)),
        Ok(meta) if !meta.is_dir() => Err(OutError::NotADirectory(shown(dir))),
        Ok(_) if force => Ok(()),
        Ok(_) => {
            let mut entries = std::fs::read_dir(dir).map_err(|e| OutError::Io(shown(dir), e))?;
            match entries.next() {
                None => Ok(()),
                Some(_) => Err(OutError::NotEmpty(shown(dir))),
            }
        }
    }
}

impl Out {
    /// Makes `dir` if it is missing (with its parents).
    pub(crate) fn open(dir: &Path) -> Result<Out, OutError> {
        let made = !dir.exists();
        std::fs::create_dir_all(dir).map_err(|e| OutError::Io(shown(dir), e))?;
        Ok(Out {
            dir: dir.to_path_buf(),
            made,
            pending: Vec::new(),
        })
    }

    /// A new file for the table `name` (`devices.parquet`), hidden until [`Out::commit`].
    pub(crate) fn create(&mut self, name: &str) -> Result<File, OutError> {
        let hidden = self
            .dir
            .join(format!(".{name}.strata-{}.partial", std::process::id()));
        let file = File::create(&hidden).map_err(|e| OutError::Io(shown(&hidden), e))?;
        self.pending.push((hidden, self.dir.join(name)));
        Ok(file)
    }

    /// Every table into its place, replacing a file of its name.
    pub(crate) fn commit(mut self) -> Result<(), OutError> {
        // A rename that fails leaves this and the rest pending: dropping cleans them up.
        while let Some((hidden, name)) = self.pending.first() {
            std::fs::rename(hidden, name).map_err(|e| OutError::Io(shown(name), e))?;
            self.pending.remove(0);
        }
        // The renames themselves made durable.
        if let Ok(dir) = File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        // Its tables are in it now: the directory stays.
        self.made = false;
        Ok(())
    }

    fn clean_up(&mut self) {
        for (hidden, _) in std::mem::take(&mut self.pending) {
            let _ = std::fs::remove_file(hidden);
        }
        if self.made {
            // Only if empty: never anything that was not this export's.
            let _ = std::fs::remove_dir(&self.dir);
            self.made = false;
        }
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        self.clean_up();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("strata-export-out-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_directory_with_anything_in_it_is_refused_unless_forced() {
        let dir = scratch("refused");
        assert!(check(&dir, false).is_ok(), "missing: made later");
        std::fs::create_dir_all(&dir).expect("mkdir");
        assert!(check(&dir, false).is_ok(), "empty");
        std::fs::write(dir.join("notes.txt"), "mine").expect("write");
        let err = check(&dir, false).expect_err("not empty");
        assert!(matches!(err, OutError::NotEmpty(_)), "{err}");
        assert!(err.hint().contains("--force"));
        assert!(check(&dir, true).is_ok());
        let file = dir.join("notes.txt");
        assert!(matches!(
            check(&file, true),
            Err(OutError::NotADirectory(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tables_appear_only_when_committed_and_an_abandoned_export_leaves_nothing() {
        let dir = scratch("commit");
        let mut out = Out::open(&dir).expect("open");
        std::io::Write::write_all(&mut out.create("devices.csv").expect("create"), b"a\n")
            .expect("write");
        assert!(!dir.join("devices.csv").exists(), "not before commit");
        out.commit().expect("commit");
        assert_eq!(
            std::fs::read_to_string(dir.join("devices.csv")).ok(),
            Some("a\n".into())
        );
        let names = |d: &Path| {
            let mut n: Vec<String> = std::fs::read_dir(d)
                .map(|r| {
                    r.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            n.sort();
            n
        };
        assert_eq!(names(&dir), ["devices.csv"], "no hidden file left");
        // Into a directory it found: the hidden files go, the directory and its files stay.
        let mut again = Out::open(&dir).expect("open");
        let _ = again.create("findings.csv").expect("create");
        drop(again);
        assert_eq!(names(&dir), ["devices.csv"]);
        let _ = std::fs::remove_dir_all(&dir);
        // A directory it made is removed with its hidden files.
        let mut made = Out::open(&dir).expect("open");
        let _ = made.create("devices.csv").expect("create");
        drop(made);
        assert!(!dir.exists());
    }
}

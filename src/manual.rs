//! Shell completions and man pages, generated from the command line's own definition
//! (`cli::Cli`), so they can never disagree with `--help`. The wheel and the tarball carry
//! what `strata completions SHELL` and `strata man --dir DIR` write: a copy is kept in
//! `assets/packaging/wheel-data/data/share/` (`assets/packaging/regenerate` writes it), and a test
//! fails when that copy is not what this build generates.

/// The command line as the pages describe it: versioned by release only, so that a page
/// changes when the interface does, not at every commit.
fn documented() -> clap::Command {
    Cli::command().version(VERSION).long_version(VERSION)
}

use crate::cli::Cli;
use crate::version::VERSION;
use clap::CommandFactory;
use clap_complete::Shell;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The completion script for `shell` (made in memory: clap_complete panics on a failed
/// write, and stdout may be a closed pipe).
pub fn completions(shell: Shell) -> Vec<u8> {
    let mut command = documented();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "strata", &mut out);
    out
}

/// The man page of `strata` (section 1, roff), with every subcommand listed.
pub fn man_page(out: &mut dyn Write) -> std::io::Result<()> {
    clap_mangen::Man::new(documented()).render(out)
}

/// Writes `strata.1` and one `strata-COMMAND.1` per subcommand into `dir` (made if
/// missing); returns the pages written, sorted.
pub fn man_pages(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    clap_mangen::generate_to(documented(), dir)?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "1")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("strata"))
        })
        .collect();
    pages.sort();
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subcommands() -> Vec<String> {
        Cli::command()
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name().to_string())
            .collect()
    }

    #[test]
    fn completions_generate_for_three_shells_and_name_every_subcommand() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let text = String::from_utf8(completions(shell)).expect("utf-8");
            for name in subcommands() {
                assert!(text.contains(&name), "{shell}: no {name}");
            }
            assert!(text.contains("--interval"), "{shell}: no global option");
        }
    }

    #[test]
    fn the_man_page_lists_every_subcommand() {
        let mut out = Vec::new();
        man_page(&mut out).expect("renders");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(
            text.starts_with(".ie") || text.contains(".TH strata 1"),
            "{text}"
        );
        let listed = text
            .split(".SH SUBCOMMANDS")
            .nth(1)
            .expect("a SUBCOMMANDS section");
        let names = subcommands();
        assert!(names.iter().any(|n| n == "record"), "{names:?}");
        for name in names {
            assert!(
                listed.contains(&format!("strata\\-{name}")) || listed.contains(&name),
                "the man page does not list {name}"
            );
        }
    }

    #[test]
    fn man_pages_are_one_per_command() {
        let dir = std::env::temp_dir().join(format!("strata-man-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let pages = man_pages(&dir).expect("written");
        let _ = std::fs::remove_dir_all(&dir);
        let names: Vec<String> = pages
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        assert!(names.contains(&"strata.1".to_string()), "{names:?}");
        for sub in subcommands() {
            assert!(names.contains(&format!("strata-{sub}.1")), "{names:?}");
        }
    }
}

#[cfg(test)]
mod packaged {
    use super::*;

    /// Where each shell looks for a completion script, under a prefix's `share/`.
    const COMPLETION_PATHS: [(Shell, &str); 3] = [
        (Shell::Bash, "bash-completion/completions/strata"),
        (Shell::Zsh, "zsh/site-functions/_strata"),
        (Shell::Fish, "fish/vendor_completions.d/strata.fish"),
    ];

    /// The copy the wheel and the tarball carry (`assets/packaging/wheel-data/data/share`).
    fn share() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/packaging/wheel-data/data/share")
    }

    fn stale(path: &Path, generated: &[u8]) -> Option<String> {
        match std::fs::read(path) {
            Ok(kept) if kept == generated => None,
            Ok(_) => Some(format!("{} differs", path.display())),
            Err(e) => Some(format!("{}: {e}", path.display())),
        }
    }

    #[test]
    fn the_packaged_pages_and_completions_are_what_this_build_generates() {
        let mut problems = Vec::new();
        for (shell, relative) in COMPLETION_PATHS {
            problems.extend(stale(&share().join(relative), &completions(shell)));
        }
        let fresh = std::env::temp_dir().join(format!("strata-pages-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&fresh);
        let pages = man_pages(&fresh).expect("generated");
        let kept = share().join("man/man1");
        let mut kept_names: Vec<String> = std::fs::read_dir(&kept)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        kept_names.sort();
        let mut fresh_names = Vec::new();
        for page in &pages {
            let name = page.file_name().map(|n| n.to_string_lossy().into_owned());
            let name = name.unwrap_or_default();
            let bytes = std::fs::read(page).expect("just written");
            problems.extend(stale(&kept.join(&name), &bytes));
            fresh_names.push(name);
        }
        let _ = std::fs::remove_dir_all(&fresh);
        if kept_names != fresh_names {
            problems.push(format!(
                "pages kept {kept_names:?}, generated {fresh_names:?}"
            ));
        }
        assert!(
            problems.is_empty(),
            "the packaged copy is stale; run assets/packaging/regenerate:\n  {}",
            problems.join("\n  ")
        );
    }
}

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

/// The command line as the man pages describe it: without clap's `help` subcommand, which
/// has no page of its own (`strata help CMD` is `strata CMD --help`), built so that each
/// subcommand knows its full name (`strata snapshot`, page `strata-snapshot`).
fn paged() -> clap::Command {
    let mut command = documented().disable_help_subcommand(true);
    command.build();
    command
}

use crate::cli::Cli;
use crate::version::VERSION;
use clap::CommandFactory;
use clap_complete::Shell;
use std::io::Write;
use std::path::{Path, PathBuf};

mod sections;

/// The completion script for `shell` (made in memory: clap_complete panics on a failed
/// write, and stdout may be a closed pipe).
pub fn completions(shell: Shell) -> Vec<u8> {
    let mut command = documented();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "strata", &mut out);
    out
}

/// One page: clap's sections (name, synopsis, description, options, subcommands), then
/// strata's own (`sections`), then the version.
fn render(
    command: &clap::Command,
    root: &clap::Command,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(command.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    if command.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(out)?;
    }
    if command.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(out)?;
    }
    out.write_all(sections::extra(command, root).as_bytes())?;
    man.render_version_section(out)
}

/// The man page of `strata` (section 1, roff), with every subcommand listed.
pub fn man_page(out: &mut dyn Write) -> std::io::Result<()> {
    let root = paged();
    render(&root, &root, out)
}

/// Writes `strata.1` and one `strata-COMMAND.1` per subcommand into `dir` (made if
/// missing); returns the pages written, sorted.
pub fn man_pages(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let root = paged();
    let mut pages = Vec::new();
    for command in std::iter::once(&root).chain(root.get_subcommands().filter(|s| !s.is_hide_set()))
    {
        let name = command
            .get_display_name()
            .unwrap_or_else(|| command.get_name());
        let path = dir.join(format!("{name}.1"));
        let mut page = Vec::new();
        render(command, &root, &mut page)?;
        std::fs::write(&path, page)?;
        pages.push(path);
    }
    pages.sort();
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

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

    fn page() -> String {
        let mut out = Vec::new();
        man_page(&mut out).expect("renders");
        String::from_utf8(out).expect("utf-8")
    }

    /// The text of the section `title` of a page, to the next section.
    fn section<'a>(page: &'a str, title: &str) -> &'a str {
        let from = page
            .split(&format!(".SH {title}\n"))
            .nth(1)
            .unwrap_or_else(|| panic!("no {title} section"));
        from.split("\n.SH ").next().unwrap_or(from)
    }

    /// A key as the page names it.
    fn key_name(code: KeyCode, ctrl: bool) -> String {
        match code {
            KeyCode::Char(c) if ctrl => format!("Ctrl-{}", c.to_ascii_uppercase()),
            KeyCode::Char(' ') => "Space".into(),
            KeyCode::Char(c) => c.to_string(),
            KeyCode::F(n) => format!("F{n}"),
            KeyCode::Up => "↑".into(),
            KeyCode::Down => "↓".into(),
            KeyCode::Left => "←".into(),
            KeyCode::Right => "→".into(),
            KeyCode::PageUp => "PgUp".into(),
            KeyCode::PageDown => "PgDn".into(),
            KeyCode::BackTab => "Shift-Tab".into(),
            other => format!("{other:?}"),
        }
    }

    /// Every key the monitor acts on, read from its key map: each printable character, with
    /// and without Ctrl, the function keys and the named keys.
    fn mapped_keys() -> Vec<String> {
        let mut codes: Vec<KeyCode> = (' '..='~').map(KeyCode::Char).collect();
        codes.extend((1..=12).map(KeyCode::F));
        codes.extend([
            KeyCode::Up,
            KeyCode::Down,
            KeyCode::Left,
            KeyCode::Right,
            KeyCode::PageUp,
            KeyCode::PageDown,
            KeyCode::Home,
            KeyCode::End,
            KeyCode::Enter,
            KeyCode::Tab,
            KeyCode::BackTab,
            KeyCode::Esc,
            KeyCode::Backspace,
            KeyCode::Delete,
            KeyCode::Insert,
        ]);
        let mut names = Vec::new();
        for code in codes {
            for ctrl in [false, true] {
                let modifiers = if ctrl {
                    KeyModifiers::CONTROL
                } else {
                    KeyModifiers::NONE
                };
                let plain = crate::app::key_action(KeyEvent::new(code, KeyModifiers::NONE));
                let action = crate::app::key_action(KeyEvent::new(code, modifiers));
                // Ctrl with a key that means the same without it is that key.
                if action.is_some() && (!ctrl || action != plain) {
                    names.push(key_name(code, ctrl));
                }
            }
        }
        names
    }

    #[test]
    fn the_man_page_names_every_key_the_monitor_acts_on() {
        let page = page();
        let keys = section(&page, "KEYS");
        let mapped = mapped_keys();
        assert!(mapped.len() > 30, "{mapped:?}");
        for name in mapped {
            let bold = format!("\\fB{}\\fR", name.replace('-', "\\-"));
            assert!(
                keys.contains(&bold),
                "the man page's KEYS do not name {name}"
            );
        }
    }

    /// The finding kinds as the JSON names them, from the type itself: serde lists every
    /// variant when it meets an unknown one.
    fn finding_kinds() -> Vec<String> {
        let err =
            serde_json::from_str::<crate::detect::FindingKind>("\"?\"").expect_err("not a kind");
        let text = err.to_string();
        let listed = text
            .split("expected one of ")
            .nth(1)
            .unwrap_or_else(|| panic!("{text}"));
        listed
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn the_man_page_names_every_finding_kind_and_layer() {
        let page = page();
        let kinds = finding_kinds();
        assert!(kinds.contains(&"zombie_context".to_string()), "{kinds:?}");
        let findings = section(&page, "FINDINGS");
        for kind in &kinds {
            assert!(
                findings.contains(&format!("\\fB{kind}\\fR")),
                "the man page's FINDINGS do not name {kind}"
            );
        }
        assert_eq!(sections::FINDINGS.len(), kinds.len(), "each kind once");
        let layers = section(&page, "LAYERS");
        for layer in crate::layers::Layer::ALL {
            let name = layer.name();
            assert!(layers.contains(&format!("\\fB{name}\\fR")), "no {name}");
        }
    }

    /// The environment variables the code reads (`env::var_os("X")`, clap's `env = "X"`, a
    /// `const ..._ENV: &str = "X"`), found in the source itself.
    fn variables_read() -> Vec<String> {
        fn walk(dir: &Path, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).expect("src").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, found);
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                for marker in ["var_os(\"", "env::var(\"", "env = \"", "_ENV: &str = \""] {
                    for rest in text.split(marker).skip(1) {
                        let name: String = rest
                            .chars()
                            .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                            .collect();
                        if rest[name.len()..].starts_with('"') && !name.is_empty() {
                            found.push(name);
                        }
                    }
                }
            }
        }
        let mut found = Vec::new();
        walk(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut found,
        );
        found.sort();
        found.dedup();
        found
    }

    #[test]
    fn the_man_page_names_every_environment_variable_strata_reads() {
        let page = page();
        let environment = section(&page, "ENVIRONMENT");
        let read = variables_read();
        for expected in [
            "STRATA_NVML_LIB",
            "STRATA_FEED_DIR",
            "STRATA_DEV_DIR",
            "NO_COLOR",
        ] {
            assert!(read.iter().any(|v| v == expected), "{read:?}");
        }
        for variable in read {
            assert!(
                environment.contains(&variable),
                "the man page's ENVIRONMENT does not name {variable}"
            );
        }
    }

    /// Every page a page names (`strata-snapshot(1)`, in bold or not), from `pages`.
    fn named_pages(pages: &[String]) -> Vec<String> {
        let mut named = Vec::new();
        for text in pages {
            let plain = text
                .replace("\\fB", "")
                .replace("\\fR", "")
                .replace("\\-", "-");
            for (at, _) in plain.match_indices("(1)") {
                let name: String = plain[..at]
                    .chars()
                    .rev()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                named.push(name);
            }
        }
        named.sort();
        named.dedup();
        named
    }

    #[test]
    fn every_page_named_is_generated_and_every_page_has_its_exit_status() {
        let dir = std::env::temp_dir().join(format!("strata-see-also-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let written = man_pages(&dir).expect("written");
        let texts: Vec<String> = written
            .iter()
            .map(|p| std::fs::read_to_string(p).expect("page"))
            .collect();
        let _ = std::fs::remove_dir_all(&dir);
        let generated: Vec<String> = written
            .iter()
            .filter_map(|p| p.file_stem().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        let mut all = texts.clone();
        all.push(page());
        let named = named_pages(&all);
        assert!(named.contains(&"strata-record".to_string()), "{named:?}");
        for name in &named {
            assert!(
                generated.contains(name),
                "{name}(1) is named but not generated: {generated:?}"
            );
        }
        for (path, text) in written.iter().zip(&texts) {
            assert!(
                text.contains(".SH EXIT STATUS") && text.contains(".SH SEE ALSO"),
                "{}",
                path.display()
            );
        }
        let record = texts
            .iter()
            .find(|t| t.contains(".TH strata-record"))
            .expect("record's page");
        assert!(
            section(record, "EXIT STATUS").contains("\\fB3\\fR"),
            "{record}"
        );
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

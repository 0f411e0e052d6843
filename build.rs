//! Embeds the Python agent (`assets/python/`) into the binary, so `strata run` and
//! `strata attach` work from an installed `strata` alone, and stamps the build with its git
//! commit and date for `strata --version`.
//!
//! Cargo runs a build script again at every build while a path it was told to watch does
//! not exist, so only paths that exist are watched; and what the script writes is written
//! only when it changes, so that a rerun with nothing new compiles nothing.

use std::path::{Path, PathBuf};

fn collect(dir: &Path, base: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') || name == "__pycache__" {
            continue;
        }
        if path.is_dir() {
            collect(&path, base, out);
        } else if name.ends_with(".py") {
            if let Ok(relative) = path.strip_prefix(base) {
                out.push((relative.to_string_lossy().into_owned(), path.clone()));
            }
        }
    }
}

/// `git ARGS` in the source tree, its trimmed output when it succeeds.
fn git(manifest: &Path, args: &[&str]) -> Option<String> {
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(manifest)
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

/// Where git keeps `name` (`HEAD`, `packed-refs`, `refs/heads/main`), as a path.
fn git_path(manifest: &Path, name: &str) -> Option<PathBuf> {
    git(manifest, &["rev-parse", "--git-path", name]).map(|path| manifest.join(path))
}

/// The branch's ref file where it exists; else, for a ref that is only in `packed-refs`,
/// the nearest directory above it that exists (cargo watches a directory whole, so the
/// ref's file is seen when a commit writes it there).
fn ref_watch(file: &Path) -> Option<&Path> {
    file.ancestors().find(|p| p.exists())
}

/// The paths whose change can mean another commit: `HEAD`, the branch's ref (or where it
/// would be written), `packed-refs` and the reftable where they exist. None that does not
/// exist: cargo would run this script again at every build. A ref file that a `git
/// pack-refs` removes later is missed once: that build runs the script, which then watches
/// what exists.
fn commit_watch(manifest: &Path) -> Vec<PathBuf> {
    let mut watched = Vec::new();
    let mut watch = |path: Option<PathBuf>| {
        if let Some(path) = path.filter(|p| p.exists()) {
            if !watched.contains(&path) {
                watched.push(path);
            }
        }
    };
    watch(git_path(manifest, "HEAD"));
    if let Some(reference) = git(manifest, &["symbolic-ref", "-q", "HEAD"]) {
        if let Some(file) = git_path(manifest, &reference) {
            watch(ref_watch(&file).map(Path::to_path_buf));
        }
    }
    watch(git_path(manifest, "packed-refs"));
    watch(git_path(manifest, "reftable"));
    watched
}

/// The commit (`STRATA_GIT_COMMIT` overrides it, for builds from an sdist), and the files
/// whose change means a new commit, so that the stamp follows the checkout.
fn stamp_commit(manifest: &Path) {
    println!("cargo:rerun-if-env-changed=STRATA_GIT_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let commit = std::env::var("STRATA_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(manifest, &["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    for path in commit_watch(manifest) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    println!("cargo:rustc-env=STRATA_GIT_COMMIT={commit}");
    // The build date: SOURCE_DATE_EPOCH for a reproducible build, else today (UTC).
    let epoch = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0)
        });
    println!("cargo:rustc-env=STRATA_BUILD_DATE={}", civil_date(epoch));
}

/// `YYYY-MM-DD` of a unix time, UTC.
fn civil_date(epoch: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(epoch)
        .map(|t| t.date().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Writes `contents` to `path` unless it holds them already: a file written anew is newer
/// than the crate's last build, and cargo would compile the crate again for it.
fn write_if_changed(path: &Path, contents: &str) {
    if std::fs::read(path).is_ok_and(|old| old == contents.as_bytes()) {
        return;
    }
    if let Err(e) = std::fs::write(path, contents) {
        panic!("cannot write {}: {e}", path.display());
    }
}

/// The release build's layout of its code. `assets/packaging/strata-order.ld` (made by
/// `assets/packaging/order-code`) places the functions the monitor runs side by side at the
/// head of `.text`: the kernel maps a program's code in blocks around each page it runs, and
/// the monitor's thousand or so functions, scattered over 11 MB of code, held about half of
/// it in memory. It places the read-only data the monitor reads at the head of `.rodata`
/// too, for the same reason. A function or data section the script names that the build
/// lacks is passed over, so an old script orders less and breaks nothing.
/// `STRATA_LINK_MAP=FILE` has the linker write its map (where each function went) to FILE,
/// for `order-code` to read.
fn link_layout(manifest: &Path) {
    println!("cargo:rerun-if-env-changed=STRATA_LINK_MAP");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if let Some(map) = std::env::var_os("STRATA_LINK_MAP").filter(|m| !m.is_empty()) {
        println!(
            "cargo:rustc-link-arg-bin=strata=-Wl,-Map={}",
            Path::new(&map).display()
        );
    }
    let packaging = manifest.join("assets").join("packaging");
    let script = packaging.join("strata-order.ld");
    // The script where it exists, else its directory, so that the build that follows its
    // making links by it; neither where neither exists (a path that does not exist would
    // rerun this at every build).
    if let Some(watched) = [&script, &packaging].into_iter().find(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", watched.display());
    }
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    if linux && release && script.exists() {
        println!(
            "cargo:rustc-link-arg-bin=strata=-Wl,-T,{}",
            script.display()
        );
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let base = manifest.join("assets").join("python");
    // Files only, not the directory: cargo scans a directory recursively, and Python's
    // `__pycache__` beside the sources would rebuild strata at every test run. A new agent
    // file is picked up when build.rs or any listed file changes.
    println!("cargo:rerun-if-changed=build.rs");
    stamp_commit(&manifest);
    link_layout(&manifest);
    let mut files = Vec::new();
    collect(&base, &base, &mut files);
    for (_, path) in &files {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    let mut code = String::from("/// The agent's files: (path under assets/python, contents).\npub const AGENT_FILES: &[(&str, &str)] = &[\n");
    for (relative, path) in &files {
        code.push_str(&format!(
            "    ({relative:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("agent_files.rs");
    write_if_changed(&out, &code);
}

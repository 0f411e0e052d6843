//! Embeds the Python agent (`assets/python/`) into the binary, so `strata run` and
//! `strata attach` work from an installed `strata` alone.

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

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let base = manifest.join("assets").join("python");
    // Files only, not the directory: cargo scans a directory recursively, and Python's
    // `__pycache__` beside the sources would rebuild strata at every test run. A new agent
    // file is picked up when build.rs or any listed file changes.
    println!("cargo:rerun-if-changed=build.rs");
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
    if let Err(e) = std::fs::write(&out, code) {
        panic!("cannot write {}: {e}", out.display());
    }
}

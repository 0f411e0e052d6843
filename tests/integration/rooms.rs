//! "Who may import whom" (ARCHITECTURE.md, "Rooms") held against the code: every path into
//! the crate (`crate::room::...`, in a `use` line or inline) of every file of `src/`, outside
//! test code, must be one its room's rule allows, or a back-edge named below with its
//! reason. A new edge fails here with the rule it breaks, so the map cannot drift from the
//! code.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Each rule: the files it governs (paths under `src/` with this prefix, the longest prefix
/// deciding), what they may import (paths into the crate with a prefix in one of these
/// groups, besides their own top-level module), and the rule's words as ARCHITECTURE.md
/// says them.
type Rule = (
    &'static str,
    &'static [&'static [&'static str]],
    &'static str,
);

/// The words of the rules several rooms share.
const MODEL_RULE: &str = "the model imports `sample`, `layers`, `units` and itself";
const WORDS_RULE: &str = "words and figures import the model and `sample`";
const SHARE_DEMO: &str = "the exports import the model, `sample` and the words; `snapshot` and `report` share each other's pieces; the demo's story clock";

const RULES: &[Rule] = &[
    ("sample", &[], "`sample` imports nothing of the crate"),
    ("accounting", &[MODEL], MODEL_RULE),
    ("context", &[MODEL], MODEL_RULE),
    ("layers", &[MODEL], MODEL_RULE),
    ("history", &[MODEL], MODEL_RULE),
    ("detect", &[MODEL], MODEL_RULE),
    ("pipeline", &[MODEL], MODEL_RULE),
    (
        "feed",
        &[COLLECT],
        "collect imports `sample`, `text`, `units` and `version`",
    ),
    (
        "source",
        &[COLLECT, &["feed"]],
        "collect imports `sample`, `text`, `units` and `version`; `source` also `feed`",
    ),
    ("present", &[MODEL, WORDS], WORDS_RULE),
    ("units", &[MODEL, WORDS], WORDS_RULE),
    ("text", &[MODEL, WORDS], WORDS_RULE),
    (
        "recording",
        &[&["sample", "text", "units"]],
        "`recording` keeps the formats, reading and writing: it imports `sample`, `text` and `units`",
    ),
    (
        "snapshot",
        &[MODEL, WORDS, &["report", "source::demo"]],
        SHARE_DEMO,
    ),
    (
        "report",
        &[MODEL, WORDS, &["snapshot", "source::demo"]],
        SHARE_DEMO,
    ),
    (
        "record",
        &[MODEL, WORDS, &["recording", "source", "report", "footprint"]],
        "`record` drives a recording's writer: it runs a `Source` on a thread of its own, the flight recorder through the pipeline (the report's clock names its segments), and lets go of what starting read (`footprint`)",
    ),
    (
        "serve",
        &[MODEL, WORDS, &["source", "record", "footprint"]],
        "`serve` runs a `Source` on a thread of its own (its flight recorder beside it), and lets go of what starting read (`footprint`)",
    ),
    (
        "analyze",
        &[MODEL, WORDS, &["recording", "report"]],
        "`analyze` reads a recording and judges it as the model does; `--report-at` writes the report",
    ),
    (
        "torchsnap",
        &[MODEL, WORDS],
        "`torchsnap` reads a PyTorch snapshot file and reduces it to `sample::pool`'s shapes: it imports `sample`, the model (an OOM classed as the detector classes it) and the words",
    ),
    (
        "export",
        &[MODEL, WORDS, &["version", "recording", "analyze"]],
        "`export` tables a recording in `analyze`'s pass",
    ),
    (
        "replay",
        &[MODEL, WORDS, &["recording", "source"]],
        "`replay` plays a recording through the model; its source is a `Source` (`source::Source`, `SourceError`)",
    ),
    (
        "app",
        &[
            MODEL,
            WORDS,
            &["replay", "report", "process_signal", "launch::offer", "config"],
        ],
        "`app` imports the model, `present` (what is kept of what was shown), `replay` and `report`, the settings of `config` (the palette), and reaches processes only through traits (`process_signal::Signaller`, `launch::offer::Attacher`)",
    ),
    (
        "ui",
        &[
            MODEL,
            WORDS,
            &["app", "process_signal", "replay", "version", "source::demo", "config"],
        ],
        "`ui` imports `app`, the model and `present`, the palette of `config`, and the words of what it shows from where they are defined (a signal's name, the replay clock, the build's version, the demo's clock)",
    ),
    (
        "tui",
        &[&["sample", "app", "ui", "terminal", "source", "record::live", "replay", "footprint"]],
        "`tui.rs` runs the event loop: the source (a replay's on its own driver), the monitor's state, the live recorder, drawing, and when what starting read is let go (`footprint`); only it imports `ui`",
    ),
    ("terminal", &[], "`terminal.rs` owns the terminal and imports nothing of the crate"),
    (
        "process_signal",
        &[&["source::procfs", "text"]],
        "`process_signal` reads `/proc` through `source::procfs`",
    ),
    ("launch", &[&["text"]], "`launch` imports only `text`"),
    (
        "sites",
        &[&["feed", "sample", "present", "text", "units"]],
        "`sites.rs` asks an agent through `feed` and prints its answer in the words of `present`",
    ),
    (
        "fleet",
        &[&["cli", "terminal", "text", "units", "layers"]],
        "`fleet` reads many nodes' `strata serve` (through Prometheus or their endpoints) and draws them: it imports `cli.rs`'s options, `terminal.rs`, `text`, `units` and the layers' names and glyphs, nothing else of the node's model",
    ),
    (
        "doctor",
        &[&["sample", "text", "cli", "version", "source", "feed", "launch", "serve"]],
        "`doctor` checks through the monitor's own code (`source::nvml::probe` and the source's errors, `source::procfs`, the feed dir rules of `feed`, `launch`, `serve`'s address), for the options `cli.rs` parses",
    ),
    (
        "cli",
        &[&["accounting", "analyze", "export", "record", "serve", "version"]],
        "`cli.rs` names the types its options parse into",
    ),
    (
        "manual",
        &[&["cli", "version", "layers", "detect"]],
        "`manual.rs` writes the pages of `cli.rs`, with the layers, the finding kinds and the keys from where they are defined",
    ),
    (
        "config",
        &[&["layers", "present::sort", "text"]],
        "`config.rs` reads the config file into settings: the sort keys of `present::sort` by their column's name; what it quotes of the file is made safe by `text`",
    ),
    ("version", &[], "`version.rs` imports nothing of the crate"),
    (
        "footprint",
        &[&["source"]],
        "`footprint.rs` takes the page size from `source::procfs`",
    ),
    (
        "oom",
        &[&["terminal"]],
        "`oom.rs` restores the terminal before it says what ran out",
    ),
    (
        "fixtures",
        &[&["sample", "accounting"]],
        "`fixtures.rs` builds raw samples (and feeds attached as the model attaches them)",
    ),
];

/// What the model may import.
const MODEL: &[&str] = &[
    "sample",
    "layers",
    "units",
    "accounting",
    "context",
    "history",
    "detect",
    "pipeline",
];
/// The words and figures, which the model's readers may import beside it.
const WORDS: &[&str] = &["present", "units", "text"];
/// What collect may import.
const COLLECT: &[&str] = &["sample", "text", "units", "version"];

/// The edges that run against the flow on purpose (ARCHITECTURE.md, "Back-edges"): the file
/// prefix, the path it imports, why. None is left: an edge that must run back up is named
/// here, with its reason, and in ARCHITECTURE.md.
const BACK_EDGES: &[(&str, &str, &str)] = &[];

/// Every `.rs` file under `dir`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file of tests only (`tests.rs`, `tests_*.rs`, `*_tests.rs`).
fn test_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let stem = name.trim_end_matches(".rs");
    stem == "tests" || stem.starts_with("tests_") || stem.ends_with("_tests")
}

/// Code without its test items: each `#[cfg(test)]` item, a declaration (`mod tests;`) or a
/// block up to the `}` at the item's own indentation (as rustfmt writes it), is left out.
fn without_tests(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        for item in lines.by_ref() {
            let at = item.len() - item.trim_start().len();
            let item = item.trim();
            if at == indent && (item.ends_with(';') || item == "}" || item == "};") {
                break;
            }
        }
    }
    out
}

/// Every file of `src/` that is not a file of tests: its path under `src/` and its text
/// without its test items, in order of path.
pub(super) fn sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    all.sort();
    all.iter()
        .filter_map(|path| {
            let rel = path
                .strip_prefix(&src)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            if test_file(&rel) {
                return None;
            }
            let text = std::fs::read_to_string(path).expect("read a source file");
            Some((rel, without_tests(&text)))
        })
        .collect()
}

/// Code without its comments.
fn code(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths into the crate a piece of code names, `crate::a::b::Item` as `a::b`: its
/// lowercase parts (modules, or a function at the end), two at most.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let path: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_' || *c == ':')
            .collect();
        let parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
        if !parts.is_empty() {
            out.insert(parts[..parts.len().min(2)].join("::"));
        }
    }
    out
}

/// The rule governing a file (the longest prefix).
fn rule(rel: &str) -> Option<&'static Rule> {
    RULES
        .iter()
        .filter(|(prefix, _, _)| {
            rel == format!("{prefix}.rs") || rel.starts_with(&format!("{prefix}/"))
        })
        .max_by_key(|(prefix, _, _)| prefix.len())
}

/// Whether `target` is one of the prefixes of `groups` or inside one.
fn allowed(target: &str, groups: &[&[&str]]) -> bool {
    groups
        .iter()
        .flat_map(|g| g.iter())
        .any(|p| target == *p || target.starts_with(&format!("{p}::")))
}

#[test]
fn every_import_of_every_room_is_one_its_rule_allows() {
    let mut broken = Vec::new();
    let mut back_edges_used = BTreeSet::new();
    for (rel, text) in sources() {
        if rel == "main.rs" || rel == "lib.rs" {
            continue;
        }
        let own = rel
            .split('/')
            .next()
            .unwrap_or("")
            .trim_end_matches(".rs")
            .to_string();
        let Some((prefix, may, words)) = rule(&rel) else {
            broken.push(format!("{rel}: no rule names this file's room"));
            continue;
        };
        for target in crate_paths(&code(&text)) {
            let top = target.split("::").next().unwrap_or("");
            if top == own || allowed(&target, may) {
                continue;
            }
            if let Some(edge) = BACK_EDGES.iter().find(|(from, to, _)| {
                (rel.starts_with(from)) && (target == *to || target.starts_with(&format!("{to}::")))
            }) {
                back_edges_used.insert(edge.0.to_string() + " → " + edge.1);
                continue;
            }
            broken.push(format!(
                "{rel} imports crate::{target}: the rule for `{prefix}` is \"{words}\""
            ));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    // Every back-edge named is still in the code: one that went away is struck from the list
    // (and from ARCHITECTURE.md).
    for (from, to, why) in BACK_EDGES {
        assert!(
            back_edges_used.contains(&format!("{from} → {to}")),
            "the back-edge {from} → {to} ({why}) is no longer in the code"
        );
    }
}

#[test]
fn the_rules_hold_a_forbidden_edge_and_let_an_allowed_one_pass() {
    let model = rule("detect/diagnosis/forecast.rs").expect("a rule");
    assert_eq!(model.0, "detect");
    assert!(allowed("history", model.1));
    assert!(
        !allowed("ui", model.1),
        "the model may not import the monitor"
    );
    assert!(!allowed("source", model.1));
    let writer = rule("record/ring.rs").expect("a rule");
    assert_eq!(writer.0, "record");
    assert!(allowed("source", writer.1));
    let sources = rule("source/mod.rs").expect("a rule");
    for above in ["replay", "recording", "pipeline"] {
        assert!(
            !allowed(above, sources.1),
            "a source hands out samples only: it may not import {above}"
        );
    }
    let format = rule("recording/writer.rs").expect("a rule");
    assert_eq!(format.0, "recording");
    for above in [
        "source", "pipeline", "detect", "report", "snapshot", "record",
    ] {
        assert!(
            !allowed(above, format.1),
            "the formats may not import {above}"
        );
    }
    let with_tests = "use crate::a::X;\n#[cfg(test)]\n#[path = \"t.rs\"]\nmod tests;\n\
        #[cfg(test)]\nfn only_in_tests() {\n    crate::b::y();\n}\nfn f() {\n    crate::c::z();\n}\n\
        #[cfg(test)]\nmod more {\n    use crate::d::W;\n}\n";
    assert_eq!(
        crate_paths(&without_tests(with_tests)),
        BTreeSet::from(["a".to_string(), "c::z".to_string()]),
        "code after a test item is read; the test items are not"
    );
    assert_eq!(
        crate_paths(&code(
            "use crate::history::{Series, Span}; // crate::ui::x\nlet x = crate::units::bytes(1);"
        )),
        BTreeSet::from(["history".to_string(), "units::bytes".to_string()])
    );
}

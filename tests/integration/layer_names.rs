//! The layer set has one source: `src/layers.rs` (the `Layer` enum and its one table of
//! spellings). Every other file names a layer through it (`Layer::Live.name()`,
//! `.head()`...), never by a string of its own: a string literal anywhere else in `src/`
//! (outside tests) spelled as a layer is spelled (its name, short name or column heads)
//! fails here, unless it is listed below as meaning something else.

use super::rooms::sources;
use strata::layers::Layer;

/// Literals spelled as a layer that mean something else: the file, the literal, why.
const NOT_LAYERS: &[(&str, &str, &str)] = &[
    (
        "serve/labels.rs",
        "other",
        "the `pid` label of the processes summed per device, not the layer",
    ),
    (
        "fleet/build.rs",
        "other",
        "the `pid` label of the processes strata serve sums per device, not the layer",
    ),
    (
        "present/pool_text.rs",
        "live",
        "a segment map's column: the bytes of live blocks in a pool's segments, not the layer",
    ),
    (
        "present/pool_text.rs",
        "free",
        "a segment map's column: the bytes of free blocks in a pool's segments, not the layer",
    ),
];

/// The string literals of Rust code (their text between the quotes, escapes as written),
/// with their line, outside comments; a raw string's text whole.
fn literals(code: &str) -> Vec<(usize, String)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        match b[i] {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    line += usize::from(b[i] == b'\n');
                    i += 1;
                }
                i += 2;
            }
            b'r' if (i == 0 || !ident(b[i - 1]))
                && matches!(b.get(i + 1), Some(b'"') | Some(b'#')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                let open = i + 1 + hashes;
                if b.get(open) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let start = open + 1;
                let end = code[start..].find(&close).map_or(b.len(), |e| start + e);
                out.push((line, code[start..end].to_string()));
                line += code[start..end].matches('\n').count();
                i = end + close.len();
            }
            b'\'' => {
                // A char literal ('x', '\n', '\'', '"'), or a lifetime.
                if b.get(i + 1) == Some(&b'\\') {
                    i += 2;
                    while i < b.len() && b[i] != b'\'' {
                        i += 1;
                    }
                    i += 1;
                } else if b.get(i + 2) == Some(&b'\'') {
                    i += 3;
                } else {
                    let width = code[i + 1..].chars().next().map_or(1, char::len_utf8);
                    i += if b.get(i + 1 + width) == Some(&b'\'') {
                        width + 2
                    } else {
                        1
                    };
                }
            }
            b'"' => {
                let start = i + 1;
                i = start;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                out.push((line, code[start..i.min(b.len())].to_string()));
                line += code[start..i.min(b.len())].matches('\n').count();
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// Every way a layer is spelled.
fn spellings() -> Vec<&'static str> {
    Layer::ALL
        .into_iter()
        .flat_map(|l| [l.name(), l.short(), l.head()])
        .collect()
}

#[test]
fn no_layer_is_named_by_a_string_outside_its_table() {
    let spelled = spellings();
    let mut named = Vec::new();
    let mut excused = Vec::new();
    for (rel, code) in sources() {
        if rel == "layers.rs" {
            continue;
        }
        for (line, literal) in literals(&code) {
            if !spelled.contains(&literal.as_str()) {
                continue;
            }
            match NOT_LAYERS
                .iter()
                .find(|(file, what, _)| *file == rel && *what == literal)
            {
                Some(excuse) => excused.push(excuse),
                None => named.push(format!(
                    "src/{rel}:{line}: \"{literal}\" names a layer by a string: use `Layer` (src/layers.rs)"
                )),
            }
        }
    }
    assert!(named.is_empty(), "{}", named.join("\n"));
    for excuse in NOT_LAYERS {
        assert!(
            excused.contains(&excuse),
            "{}: \"{}\" is no longer there: strike it from NOT_LAYERS",
            excuse.0,
            excuse.1
        );
    }
}

#[test]
fn literals_are_read_past_comments_chars_and_raw_strings() {
    let code = "let a = \"live\"; // \"cached\"\nlet b = '\"'; let c = r#\"x \"other\" y\"#;\n/* \"free\" */ let d: &'static str = \"FRAG\";";
    assert_eq!(
        literals(code),
        vec![
            (1, "live".to_string()),
            (2, "x \"other\" y".to_string()),
            (3, "FRAG".to_string())
        ]
    );
}

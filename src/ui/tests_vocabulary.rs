//! One name per layer: every word a user reads of the demo (the main screen at four sizes, the
//! help, the strata view, each process's reconciliation, each finding's evidence with its
//! message and advice in full, the grouped table, the report) names a layer by its name or its
//! one short form (`src/layers.rs`), and a column head is exactly the layer's head. A word
//! spelled as a shortened layer name (`cache`, `fragment`, `unattrib`) or as an older
//! spelling fails here, unless it is listed below as meaning something else.

use super::tests::{demo_state, render, text};
use crate::app::{Action, State};
use crate::layers::Layer;

/// Words spelled as a layer's that mean something else: a phrase they stand in, and why.
const NOT_LAYERS: &[(&str, &str)] = &[(
    "a cache that grows",
    "a cache in the job's own code keeping tensors (advice on a climb of live), not the layer",
)];

/// The least length of a name's prefix taken for a shortened spelling of it (`cach`, `outs`):
/// shorter ones are English words (`out`, `con`).
const PREFIX_LEAST: usize = 4;

/// Every spelling that names a layer otherwise: a prefix of its name other than the name and
/// the short form, and what older strata wrote.
fn misspellings() -> Vec<(String, Layer)> {
    let mut out = Vec::new();
    for layer in Layer::ALL {
        let name = layer.name();
        for end in PREFIX_LEAST..name.len() {
            let prefix = &name[..end];
            if prefix != layer.short() && !prefix.ends_with('_') {
                out.push((prefix.to_string(), layer));
            }
        }
        for former in layer.former() {
            out.push((former.to_string(), layer));
        }
    }
    out
}

/// The words of a text: runs of letters, digits and `_`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// What a text names otherwise, one line per word: `where: "word" (a layer's name or short
/// form is meant: ...)`; the excuses used go into `excused`.
fn misnamed(place: &str, text: &str, excused: &mut Vec<&'static str>) -> Vec<String> {
    let wrong = misspellings();
    let mut found = Vec::new();
    for line in text.lines() {
        for word in words(line) {
            let lower = word.to_lowercase();
            let layer_of = Layer::ALL
                .into_iter()
                .find(|l| l.name() == lower || l.short() == lower);
            // A head in capitals is the layer's one head: `CONTEXT` beside `CTX` is two.
            if let Some(layer) = layer_of {
                if word.len() > 1 && word == word.to_uppercase() && word != layer.head() {
                    found.push(format!(
                        "{place}: \"{word}\" heads {} as {} does not: its head is {}\n  {line}",
                        layer.name(),
                        word,
                        layer.head()
                    ));
                }
                continue;
            }
            let Some((_, layer)) = wrong.iter().find(|(w, _)| *w == lower) else {
                continue;
            };
            match NOT_LAYERS
                .iter()
                .find(|(phrase, _)| excuses(phrase, word, line))
            {
                Some((phrase, _)) => excused.push(phrase),
                None => found.push(format!(
                    "{place}: \"{word}\": name {} as `{}`{}\n  {line}",
                    layer.name(),
                    layer.name(),
                    layer
                        .short_form()
                        .map_or_else(String::new, |s| format!(" or `{s}`"))
                )),
            }
        }
    }
    found
}

/// Whether `phrase` excuses `word` on `line`: the line holds the phrase, or ends with it up to
/// the word (the rest wrapped onto the next line).
fn excuses(phrase: &str, word: &str, line: &str) -> bool {
    let Some(at) = phrase.find(word) else {
        return false;
    };
    let end = line.trim_end_matches([' ', '│']);
    line.contains(phrase) || end.ends_with(&phrase[..at + word.len()])
}

/// Every page of a scrolling view at `width`×`height`.
fn pages(state: &mut State, width: u16, height: u16, most: usize) -> String {
    let mut all = String::new();
    for _ in 0..most {
        all.push_str(&text(&render(state, width, height)));
        state.apply_action(Action::PageDown);
    }
    all
}

/// Every text of the demo a user reads, by where it is.
fn everything_shown() -> Vec<(String, String)> {
    let mut state = demo_state(false);
    let mut shown = Vec::new();
    for (w, h) in [(80, 24), (120, 40), (160, 48), (200, 60)] {
        shown.push((format!("main {w}x{h}"), text(&render(&state, w, h))));
    }
    state.apply_action(Action::ToggleHelp);
    for (w, h) in [(80, 24), (200, 60)] {
        shown.push((format!("help {w}x{h}"), pages(&mut state, w, h, 20)));
    }
    state.apply_action(Action::Back);
    state.apply_action(Action::ToggleStrata);
    for (w, h) in [(80, 24), (160, 48)] {
        shown.push((format!("strata view {w}x{h}"), text(&render(&state, w, h))));
    }
    state.apply_action(Action::Back);
    let observed = state.current.clone().expect("a sample");
    // The focused list's row `i` opened, its view's pages read, and back.
    let open = |state: &mut State, i: usize| {
        state.apply_action(Action::Top);
        for _ in 0..i {
            state.apply_action(Action::Down);
        }
        state.apply_action(Action::Open);
        let read = pages(state, 160, 60, 3);
        state.apply_action(Action::Back);
        read
    };
    for i in 0..observed.sample.processes.len() {
        shown.push((format!("reconciliation of row {i}"), open(&mut state, i)));
    }
    state.apply_action(Action::FocusNext);
    for (i, finding) in observed.findings.iter().enumerate() {
        shown.push((format!("evidence of finding {i}"), open(&mut state, i)));
        let said = [finding.message.clone()]
            .into_iter()
            .chain(finding.advice())
            .collect::<Vec<_>>()
            .join("\n");
        shown.push((format!("{} message and advice", finding.kind.name()), said));
    }
    state.apply_action(Action::FocusNext);
    state.apply_action(Action::GoFirst);
    shown.push(("grouped table".into(), text(&render(&state, 160, 48))));
    state.apply_action(Action::Open);
    shown.push(("a group".into(), text(&render(&state, 160, 48))));
    shown.push((
        "report".into(),
        crate::report::markdown(&observed, &state.pipeline.history, true),
    ));
    shown
}

#[test]
fn every_screen_names_a_layer_by_its_name_or_its_short_form() {
    let mut excused = Vec::new();
    let mut found = Vec::new();
    let shown = everything_shown();
    for (place, text) in &shown {
        found.extend(misnamed(place, text, &mut excused));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
    for (phrase, _) in NOT_LAYERS {
        assert!(
            excused.contains(phrase),
            "\"{phrase}\" is no longer shown: strike it from NOT_LAYERS"
        );
    }
    // What was read: the views this test means to read are there.
    for wanted in [
        "main 80x24",
        "help 200x60",
        "reconciliation of row 0",
        "report",
    ] {
        assert!(shown.iter().any(|(p, _)| p == wanted), "{wanted}");
    }
    let all: String = shown.iter().map(|(_, t)| t.as_str()).collect();
    // The process table's layer columns were read, each under its head.
    for layer in [
        Layer::Live,
        Layer::Cached,
        Layer::Fragmented,
        Layer::Context,
        Layer::OutsidePool,
    ] {
        assert!(all.contains(layer.head()), "{} shown", layer.head());
    }
}

#[test]
fn a_layer_named_otherwise_is_found() {
    let mut excused = Vec::new();
    let bad = misnamed("t", "PID CACHE FRAG\n▒cache 31.6G  ▓ctx 532M", &mut excused);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad[0].contains("\"CACHE\""), "{bad:?}");
    assert!(bad[1].contains("\"cache\""), "{bad:?}");
    let heads = misnamed("t", "USED LIVE CACHED FRAG CONTEXT OUTSIDE", &mut excused);
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(heads[0].contains("\"CONTEXT\""), "{heads:?}");
    assert!(misnamed("t", "Look for a cache that grows.", &mut excused).is_empty());
    assert!(misnamed("t", "│ kept: a cache  │\n│that grows │", &mut excused).is_empty());
    assert_eq!(excused, vec!["a cache that grows"; 2]);
    assert_eq!(misnamed("t", "a cache of tensors", &mut excused).len(), 1);
    assert_eq!(
        misnamed(
            "t",
            "fragmented fragmentation outside_pool outs",
            &mut excused
        )
        .len(),
        1,
        "outs"
    );
}

/// Every mark the screens put before or in place of a figure is explained in the help, each
/// as an entry of its own.
#[test]
fn the_help_explains_every_mark() {
    let mut state = demo_state(false);
    state.apply_action(Action::ToggleHelp);
    let help = pages(&mut state, 200, 60, 20);
    for (mark, says) in [
        ("~", "an estimate"),
        ("≥", "a lower bound, at least"),
        ("≤", "an upper bound, at most"),
        ("n/a", "unknown"),
        ("…", "cut to fit"),
        ("USED:", "used: the memory NVML says"),
        ("HEADROOM:", "headroom: how far"),
    ] {
        assert!(
            help.lines().any(|l| l.contains(&format!("{mark} {says}"))),
            "{mark}: {help}"
        );
    }
}

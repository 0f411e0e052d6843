//! Replays the kept fuzz corpus of the feed and serve targets (`fuzz/corpus/feed_line`,
//! `hello_trust`, `http`: seeds, and every input a fuzzer found a crash with, once fixed)
//! through the same harnesses `fuzz/` runs under AFL++ (`benches/fuzz.sh TARGET SECONDS`).

use std::path::PathBuf;

fn replay(target: &str, harness: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "no corpus in {}", dir.display());
    for input in inputs {
        let bytes = std::fs::read(&input).expect("corpus file");
        let outcome = std::panic::catch_unwind(|| harness(&bytes));
        assert!(outcome.is_ok(), "{target}: {} fails", input.display());
    }
}

#[test]
fn the_feed_line_corpus_replays() {
    replay("feed_line", strata::feed::fuzz::feed_line);
}

#[test]
fn the_hello_and_trust_corpus_replays() {
    replay("hello_trust", strata::feed::fuzz::hello_trust);
}

#[test]
fn the_http_corpus_replays() {
    replay("http", strata::serve::fuzz::http);
}

/// The harnesses reach what they check: a seed is trusted, another refused; a scrape is
/// answered with the metrics, a request cut short with nothing or an error status.
#[test]
fn the_seeds_reach_what_the_harnesses_check() {
    let seed = |path: &str| {
        std::fs::read(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("fuzz/corpus")
                .join(path),
        )
        .expect("seed")
    };
    use strata::feed::fuzz::hello_trust_outcome;
    assert_eq!(
        hello_trust_outcome(&seed("hello_trust/trusted")),
        Some(true)
    );
    assert_eq!(
        hello_trust_outcome(&seed("hello_trust/claims_other")),
        Some(false)
    );
    let answer = strata::serve::fuzz::one_connection(&seed("http/metrics"));
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.contains("text/plain; version=0.0.4"), "{answer}");
    let piped = strata::serve::fuzz::one_connection(&seed("http/openmetrics_pipelined"));
    let piped = String::from_utf8_lossy(&piped);
    assert_eq!(piped.matches("HTTP/1.1 ").count(), 3, "{piped}");
    assert!(piped.contains("HTTP/1.1 404"), "{piped}");
}

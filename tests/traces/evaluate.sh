#!/usr/bin/env bash
# Runs `strata analyze --json` over the labelled corpus and prints the table: per trace what
# was expected, what was raised and what matched, then precision, recall and mean
# time-to-flag (tests/corpus.rs). Extra arguments go to cargo, e.g. --release.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo test "$@" --test corpus -- --exact corpus_meets_the_targets --nocapture

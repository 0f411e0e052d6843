#!/usr/bin/env bash
# `strata analyze` of a long recording of a large node: 8 GPUs and 64 processes with allocator
# feeds, one `strata snapshot --json` line a second (the node of benches/diagnosis.rs, its
# lines written through strata's own snapshot view). Prints the recording's size, then the
# wall time, CPU time and peak resident memory of the analysis, and the analysis's last line.
# Usage: benches/analyze.sh [HOURS]   (default 24; the recording is about 600 MiB an hour)
# Needs a release build: cargo build --release
set -euo pipefail
cd "$(dirname "$0")/.."
hours=${1:-24}
bin=${STRATA_BIN:-target/release/strata}
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 1; }
cargo bench --bench diagnosis --no-run -q 2>/dev/null
bench=$(ls -t target/release/deps/diagnosis-* | grep -v '\.d$' | head -1)
rec=$(mktemp /tmp/strata-bench-analyze.XXXXXX.jsonl)
trap 'rm -f "$rec" "$rec.out"' EXIT
"$bench" --write "$rec" --hours "$hours" | head -1
echo "recording: $(wc -l <"$rec") lines, $(du -m "$rec" | cut -f1) MiB"
/usr/bin/time -f 'strata analyze: %e s wall, %U s user, %S s system, %M KiB peak RSS' \
  "$bin" analyze "$rec" >"$rec.out"
head -1 "$rec.out"

#!/usr/bin/env bash
# `strata analyze` of a long recording of a large node: 8 GPUs and 64 processes with allocator
# feeds, one sample a second (the node of benches/diagnosis.rs, written through strata's own
# recorder). Prints the recording's size, then the wall time, CPU time (user + system) and
# peak resident memory of the analysis, and the analysis's first line; the recording is
# deleted at the end.
# Usage: benches/analyze.sh [HOURS] [EXT]   (default 24 and zst: format 2, about 5 MiB an
#        hour; jsonl.zst for format 1, about 25 MiB an hour)
# Needs a build: cargo build --release (or STRATA_BIN=target/profiling/strata, with
# PROFILE=profiling for the bench's own build)
set -euo pipefail
cd "$(dirname "$0")/.."
hours=${1:-24}
ext=${2:-zst}
profile=${PROFILE:-release}
bin=${STRATA_BIN:-target/$profile/strata}
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 1; }
cargo bench --profile "$profile" --bench diagnosis --no-run -q 2>/dev/null
bench=$(ls -t target/"$profile"/deps/diagnosis-* | grep -v '\.d$' | head -1)
rec=$(mktemp -u /tmp/strata-bench-analyze.XXXXXX).$ext
trap 'rm -f "$rec" "$rec.out"' EXIT
"$bench" --write "$rec" --hours "$hours" >"$rec.out"
head -1 "$rec.out"
echo "recording: $(du -m "$rec" | cut -f1) MiB ($ext)"
/usr/bin/time -f 'strata analyze: %e s wall, %U s user, %S s system, %M KiB peak RSS' \
  "$bin" analyze "$rec" >"$rec.out"
head -1 "$rec.out"

#!/usr/bin/env bash
# `strata export` of a long recording of a large node (benches/analyze.sh's: 8 GPUs and 64
# processes with allocator feeds, one sample a second, written through strata's own
# recorder, format 2) into each format asked for. Prints the recording's size, then per
# format the wall time, CPU time (user + system) and peak resident memory of the export,
# its summary line, and each table's size, beside `strata analyze` of the same recording
# (the same pass without the tables); everything is deleted at the end.
# Usage: benches/export.sh [HOURS] [FORMATS]   (default 24 and "parquet"; "parquet csv"
#        for both: the CSV of a day is several GB, so check the free space first)
# Needs a build: cargo build --release (or STRATA_BIN=target/profiling/strata, with
# PROFILE=profiling for the bench's own build)
set -euo pipefail
cd "$(dirname "$0")/.."
hours=${1:-24}
formats=${2:-parquet}
profile=${PROFILE:-release}
bin=${STRATA_BIN:-target/$profile/strata}
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 1; }
cargo bench --profile "$profile" --bench diagnosis --no-run -q 2>/dev/null
bench=$(ls -t target/"$profile"/deps/diagnosis-* | grep -v '\.d$' | head -1)
scratch=$(mktemp -d /tmp/strata-bench-export.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
rec=$scratch/node.zst
"$bench" --write "$rec" --hours "$hours" >"$scratch/out"
head -1 "$scratch/out"
echo "recording: $(du -m "$rec" | cut -f1) MiB (format 2)"
# The same pass without the tables, for what they cost.
/usr/bin/time -f 'strata analyze (the same pass, no tables): %e s wall, %U s user, %S s system, %M KiB peak RSS' \
  "$bin" analyze "$rec" >/dev/null
for format in $formats; do
  out=$scratch/tables-$format
  /usr/bin/time -f "strata export --to $format: %e s wall, %U s user, %S s system, %M KiB peak RSS" \
    "$bin" export "$rec" --to "$format" "$out" >"$scratch/out"
  cat "$scratch/out"
  for table in "$out"/*; do
    echo "  $(basename "$table"): $(du -k "$table" | cut -f1) KiB"
  done
  rm -rf "$out"
done

#!/usr/bin/env bash
# Seeks in `strata replay` of a long demo recording at a 1 s interval (4 GPUs, MIG, 9
# processes, 7 with feeds: about 24 KiB a line): writes the recording with
# `strata snapshot --json --count`, then times seeks to the end, back a minute, to the
# middle, on a minute, to the start and to the end again (benches/replay_seek.rs).
# Usage: benches/replay_seek.sh [HOURS]   (default 1)
# Needs a release build: cargo build --release
set -euo pipefail
cd "$(dirname "$0")/.."
hours=${1:-1}
bin=${STRATA_BIN:-target/release/strata}
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 1; }
rec=$(mktemp /tmp/strata-bench-replay.XXXXXX.jsonl)
trap 'rm -f "$rec"' EXIT
"$bin" snapshot --demo --demo-at 0 --demo-speed 1 --interval 1 --json \
  --count $((hours * 3600)) >"$rec"
echo "recording: $(wc -l <"$rec") samples, $(du -m "$rec" | cut -f1) MiB"
cargo bench --bench replay_seek -q -- "$rec"

#!/usr/bin/env bash
# What recording costs: sizes and CPU.
# 1. `cargo bench --bench record`: bytes and CPU per sample by encoding and level, and a whole
#    day at 1 s of 8 GPUs x 8 fed processes each (64 feeds), synthetic samples that move as a
#    training job's do (see the header of benches/record.rs), written to real files and read
#    back. Extra arguments go to it (`--hours H`, `--day-hours H`, `--per-gpu N`).
# 2. Whole-process CPU on a fake NVML node of 8 H100s x 8 processes (real `sleep` processes,
#    every figure moving at each poll, as benches/bandwidth.sh BUSY=1), 1 s interval, SECS
#    seconds each (default 60): `strata record` headless; the monitor (in tmux) without
#    recording; the monitor recording (`r`). The last two differ by what recording adds.
# Usage: benches/record.sh [SECS] [-- bench args]
# Build first: cargo build --release && CARGO_TARGET_DIR=target/fake-nvml cargo build --release -p strata-fake-nvml
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift $(( $# < 1 ? $# : 1 ))
[ "${1:-}" = "--" ] && shift
bin=${STRATA_BIN:-target/release/strata}
lib=target/fake-nvml/release/libnvidia_ml.so
[ -x "$bin" ] && [ -f "$lib" ] || { echo "build first (see the header of $0)" >&2; exit 1; }

echo "== sizes and CPU per sample (cargo bench --bench record $*)"
cargo bench -q --bench record -- "$@"

work=$(mktemp -d /tmp/strata-bench-record.XXXXXX)
sock="strata-bench-record-$$"
pids=()
cleanup() {
  tmux -L "$sock" kill-server 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 64); do sleep 100000 & pids+=($!); done
python3 benches/fake_node.py "$work/scenario.json" --busy "${pids[@]}"
export STRATA_FAKE_NVML_SCENARIO="$work/scenario.json"
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
report() { # label pid seconds-to-measure
  local t0 t1 start end
  t0=$(ticks "$2"); start=$(date +%s.%N)
  sleep "$3"
  t1=$(ticks "$2"); end=$(date +%s.%N)
  awk -v l="$1" -v a="$t0" -v c="$t1" -v s="$start" -v e="$end" -v hz="$hz" 'BEGIN {
    printf "%-34s cpu %.3f%% of one core over %.0f s\n", l, 100 * (c - a) / hz / (e - s), e - s }'
}

echo "== whole process, fake NVML node of 8 H100 x 8 processes, 1 s interval"
"$bin" record --interval 1 --nvml-lib "$lib" "$work/headless.jsonl.zst" 2>"$work/headless.err" &
rec=$!
sleep 3
report "strata record (headless)" "$rec" "$secs"
kill -TERM "$rec"; wait "$rec" || true
cat "$work/headless.err"

monitor() { # label record?
  tmux -L "$sock" kill-server 2>/dev/null || true
  tmux -L "$sock" new-session -d -x 120 -y 40 -c "$work" \
    "STRATA_FAKE_NVML_SCENARIO=$work/scenario.json $PWD/$bin --interval 1 --nvml-lib $PWD/$lib"
  sleep 3
  local shell pid
  shell=$(tmux -L "$sock" display-message -p '#{pane_pid}')
  pid=$(pgrep -P "$shell" || echo "$shell")
  if [ "$2" = 1 ]; then
    tmux -L "$sock" send-keys r C-u "$work/monitor.jsonl.zst" Enter
    sleep 1
  fi
  report "$1" "$pid" "$secs"
  if [ "$2" = 1 ]; then
    tmux -L "$sock" send-keys r
    sleep 1
    tmux -L "$sock" capture-pane -p | tail -1
  fi
  tmux -L "$sock" send-keys q
  sleep 1
}
monitor "monitor, not recording" 0
monitor "monitor, recording (r)" 1

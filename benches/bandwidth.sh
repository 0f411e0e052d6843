#!/usr/bin/env bash
# Bytes a second the monitor sends to its terminal, what a slow or metered SSH link carries:
# `strata` (release) in a real pseudo-terminal (tmux, 120x40 by default, 1 s interval) on a
# fake node of 8 H100s x 8 processes (real `sleep` processes, so /proc names them), recorded
# with tmux's `pipe-pane` for SECONDS after a warm-up. Also prints CPU share and peak RSS.
# The node is still (NVML's figures constant, as when the monitor's output was compared with
# nvitop's and gpustat's) unless BUSY=1: then every process's memory saw-tooths by 1-2 GiB and SM and GPU
# utilisation move at every poll.
# Usage: [BUSY=1] benches/bandwidth.sh [SECONDS] [COLUMNS] [ROWS] [-- strata args]   (default 30 120 40)
# Build first: cargo build --release && CARGO_TARGET_DIR=target/fake-nvml cargo build --release -p strata-fake-nvml
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
cols=${2:-120}
rows=${3:-40}
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
bin=${STRATA_BIN:-target/release/strata}
lib=target/fake-nvml/release/libnvidia_ml.so
[ -x "$bin" ] && [ -f "$lib" ] || { echo "build first (see the header of $0)" >&2; exit 1; }
work=$(mktemp -d /tmp/strata-bench-bandwidth.XXXXXX)
sock="strata-bandwidth-$$"
pids=()
cleanup() {
  tmux -L "$sock" kill-server 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 64); do sleep 100000 & pids+=($!); done
python3 benches/fake_node.py "$work/scenario.json" $([ "${BUSY:-0}" = 1 ] && echo --busy) "${pids[@]}"
tmux -L "$sock" new-session -d -x "$cols" -y "$rows" \
  "STRATA_FAKE_NVML_SCENARIO=$work/scenario.json $bin --interval 1 --nvml-lib $lib $*"
sleep 5
shell=$(tmux -L "$sock" display-message -p '#{pane_pid}')
pid=$(pgrep -P "$shell" || echo "$shell")
tmux -L "$sock" pipe-pane -o "cat >> $work/out"
t0=$(awk '{print $14 + $15}' "/proc/$pid/stat"); start=$(date +%s.%N)
sleep "$secs"
t1=$(awk '{print $14 + $15}' "/proc/$pid/stat"); end=$(date +%s.%N)
tmux -L "$sock" pipe-pane
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
bytes=$(wc -c <"$work/out")
awk -v b="$bytes" -v s="$start" -v e="$end" -v a="$t0" -v c="$t1" -v hz="$(getconf CLK_TCK)" \
  -v h="$hwm" -v w="${cols}x${rows}" -v busy="${BUSY:-0}" 'BEGIN {
  printf "strata %s%s: %.0f bytes/s to the terminal over %.0f s, cpu %.2f%% of one core, peak RSS %.1f MiB\n",
    w, busy ? ", busy node" : ", still node", b / (e - s), e - s, 100 * (c - a) / hz / (e - s), h / 1024 }'

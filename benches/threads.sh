#!/usr/bin/env bash
# strata and nvtop in turn on one stand-in node, each thread's time on CPU: the measure
# behind the README's "measured apart", finer than benches/peers.sh's one run a size (at
# 1 x 1 a run's noise is as large as the gap between the two).
#
# The node is benches/peers.sh's (benches/fake_node.py --vitals, the fake libnvidia-ml of
# tests/fake-nvml, GPUS x PER real `sleep` processes). Each round runs every build in BINS,
# then nvtop, one after another, each in a fresh tmux server at 120x40 with a 1 s interval:
# after WARM seconds (default 3), each thread's time on CPU is read from
# /proc/PID/task/TID/schedstat (nanoseconds), again SECS seconds later; printed in µs a
# second, per thread and in total.
#
# Usage: benches/threads.sh [SECS] [GPUS] [PER] [ROUNDS]   (default 20 1 1 3)
#   BINS="target/release/strata /tmp/other/strata" compares builds (default the release
#   build); NVTOP=/path/to/nvtop picks another nvtop, NVTOP=none leaves it out.
# Needs: tmux, python3, nvtop (see benches/peers.sh to install it). Build first:
#   cargo build --release && CARGO_TARGET_DIR=target/fake-nvml cargo build --release -p strata-fake-nvml
# A benchmark, not a test: its numbers depend on the machine and on what else runs on it.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
gpus=${2:-1}
per=${3:-1}
rounds=${4:-3}
warm=${WARM:-3}
read -r -a bins <<<"${BINS:-target/release/strata}"
lib=target/fake-nvml/release/libnvidia_ml.so
nvtop=${NVTOP:-$(command -v nvtop || echo none)}
[ -f "$lib" ] || { echo "build first (see the header of $0)" >&2; exit 1; }
for i in "${!bins[@]}"; do
  [ -x "${bins[$i]}" ] || { echo "${bins[$i]}: no such build (see the header of $0)" >&2; exit 1; }
  bins[$i]=$(realpath "${bins[$i]}")
done
command -v tmux >/dev/null || { echo "tmux is missing: apt-get install tmux" >&2; exit 1; }
[[ $secs =~ ^[0-9]+$ && $secs -gt 0 && $gpus =~ ^[0-9]+$ && $per =~ ^[0-9]+$ ]] ||
  { echo "usage: $0 [SECS] [GPUS] [PER] [ROUNDS]" >&2; exit 2; }

work=$(mktemp -d /tmp/strata-bench-threads.XXXXXX)
export TMUX_TMPDIR="$work" # the servers' sockets go with the rest
# A tmux server of its own for each run: a new session on the socket of a server still
# exiting after the last run's kill-server fails ("server exited unexpectedly").
sock="strata-threads-$$"
runs=0
sleepers=()
cleanup() {
  tmux -L "$sock-$runs" kill-server 2>/dev/null || true
  [ ${#sleepers[@]} -eq 0 ] || kill "${sleepers[@]}" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/lib"
ln -s "$PWD/$lib" "$work/lib/libnvidia-ml.so.1"
ln -s "$PWD/$lib" "$work/lib/libnvidia-ml.so"
for _ in $(seq $(( gpus * per ))); do sleep 100000 & sleepers+=($!); done
echo "${sleepers[@]}" >"$work/pids"
python3 benches/fake_node.py "$work/node.json" --vitals --gpus "$gpus" --per-gpu "$per" --pids "$work/pids"

# Each thread's name and its time on CPU so far, in ns, a line each.
times() {
  local task
  for task in /proc/"$1"/task/*; do
    printf '%s\t%s\t%s\n' "${task##*/}" "$(cat "$task/comm")" "$(cut -d' ' -f1 "$task/schedstat")"
  done 2>/dev/null
}

# run NAME CMD...: one tool's threads, in µs a second, on one line.
run() {
  local name=$1; shift
  runs=$((runs + 1))
  local sock="$sock-$runs"
  tmux -L "$sock" new-session -d -x 120 -y 40 \
    env STRATA_FAKE_NVML_SCENARIO="$work/node.json" LD_LIBRARY_PATH="$work/lib" "$@"
  sleep "$warm"
  local pid
  pid=$(tmux -L "$sock" list-panes -F '#{pane_pid}' 2>/dev/null) ||
    { echo "$name: did not start"; return; }
  times "$pid" >"$work/before"
  sleep "$secs"
  times "$pid" >"$work/after"
  tmux -L "$sock" kill-server 2>/dev/null || { echo "$name: ended early"; return; }
  awk -F'\t' -v name="$name" -v secs="$secs" '
    NR == FNR { before[$1] = $3; next }
    { us = ($3 - before[$1]) / 1000 / secs; total += us
      if (us >= 1) line = line sprintf(" %s %.0f", $2, us) }
    END { printf "%s:%s · total %.0f µs/s\n", name, line, total }' "$work/before" "$work/after"
}

echo "$gpus GPU(s) x $per process(es), $secs s each, load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
  echo "round $round"
  for bin in "${bins[@]}"; do
    run "  $bin" "$bin" --interval 1 --nvml-lib "$PWD/$lib"
  done
  [ "$nvtop" = none ] || run "  nvtop" "$nvtop" -d 10 -c "$work/nvtop.ini"
done

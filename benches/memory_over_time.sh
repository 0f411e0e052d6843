#!/usr/bin/env bash
# The monitor's resident memory as it runs, side by side with nvtop on one fake NVML node:
# VmRSS of each at fixed times after launch, as its history fills (the README's table takes
# 30 s; the raw rings fill in 15 minutes, the first tier in 2 hours).
#
# The node is benches/fake_node.py --vitals (the fake libnvidia-ml of tests/fake-nvml): 8 H100s
# with PER_GPU real `sleep` processes on each, every figure still. Each monitor runs in its own
# tmux session of one server at 120x40 with a 1 s interval, all at once:
#   strata   BIN --interval 1 --nvml-lib FAKE      (each BIN given; default target/release/strata)
#   nvtop    nvtop -d 10 -c WORK/nvtop.ini
# Prints a line at each time: `t=SECONDS` then each monitor's VmRSS in kB. Give two builds to
# compare them in one run (the same node, the same machine's moment).
#
# Usage: benches/memory_over_time.sh [PER_GPU] [BIN...]   (default 64 and target/release/strata)
#        TIMES="30 120 300 600 900 1200" (seconds) picks the readings.
# Needs: tmux; nvtop (Debian's, `contrib`; see benches/peers.sh) or NVTOP=PATH, else its column
# is left out. Build first:
#   cargo build --release && CARGO_TARGET_DIR=target/fake-nvml cargo build --release -p strata-fake-nvml
# A benchmark, not a test: it takes as long as its last time.
set -euo pipefail
cd "$(dirname "$0")/.."
per_gpu=${1:-64}
shift $(( $# < 1 ? $# : 1 ))
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(target/release/strata)
times=${TIMES:-30 120 300 600 900 1200}
lib=target/fake-nvml/release/libnvidia_ml.so
nvtop=${NVTOP:-$(command -v nvtop || true)}
[ -f "$lib" ] || { echo "build first (see the header of $0)" >&2; exit 1; }
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "$b: not a built monitor (see the header of $0)" >&2; exit 1; }
done
command -v tmux >/dev/null || { echo "tmux is missing: apt-get install tmux" >&2; exit 1; }
[ -n "$nvtop" ] || echo "nvtop not found: left out (see benches/peers.sh to install it)" >&2

work=$(mktemp -d /tmp/strata-bench-memory.XXXXXX)
sock="strata-memory-$$"
sleepers=()
cleanup() {
  tmux -L "$sock" kill-server 2>/dev/null || true
  [ ${#sleepers[@]} -eq 0 ] || kill "${sleepers[@]}" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq $((8 * per_gpu))); do sleep 100000 & sleepers+=($!); done
echo "${sleepers[@]}" >"$work/pids"
python3 benches/fake_node.py "$work/node.json" --vitals --gpus 8 --per-gpu "$per_gpu" --pids "$work/pids"
mkdir -p "$work/lib"
ln -s "$PWD/$lib" "$work/lib/libnvidia-ml.so.1"
printf '[GeneralOption]\n' >"$work/nvtop.ini"
env_for="env STRATA_FAKE_NVML_SCENARIO=$work/node.json LD_LIBRARY_PATH=$work/lib"

# Each monitor is started by a small script that writes its own PID first, so that the PID
# read is the monitor's, whatever else runs on the machine.
names=() pidfiles=()
start() {
  local name=$1; shift
  local i=${#names[@]}
  printf 'echo $$ > %q\nexec %s %s\n' "$work/pid.$i" "$env_for" "$*" >"$work/run.$i"
  tmux -L "$sock" new-session -d -s "m$i" -x 120 -y 40 "sh $work/run.$i"
  names+=("$name") pidfiles+=("$work/pid.$i")
}
for b in "${bins[@]}"; do
  start "$b" "$(realpath "$b")" --interval 1 --nvml-lib "$work/lib/libnvidia-ml.so.1"
done
[ -z "$nvtop" ] || start nvtop "$nvtop" -d 10 -c "$work/nvtop.ini"
began=$(date +%s)
for f in "${pidfiles[@]}"; do
  until [ -s "$f" ]; do sleep 0.1; done
done

echo "node: 8 GPUs x $per_gpu processes (fake NVML); monitors: ${names[*]}"
rss() { awk '/^VmRSS/{print $2}' "/proc/$1/status" 2>/dev/null || echo gone; }
for t in $times; do
  while [ $(( $(date +%s) - began )) -lt "$t" ]; do sleep 1; done
  line="t=${t}s"
  for i in "${!names[@]}"; do
    line+=" ${names[$i]} $(rss "$(cat "${pidfiles[$i]}")")"
  done
  echo "$line kB"
done

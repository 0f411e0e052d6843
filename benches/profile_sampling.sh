#!/usr/bin/env bash
# Where the monitor's sampling thread spends its time: strata (the `profiling` build: release
# code with line tables, not stripped) on the fake NVML node of 8 GPUs x 64 processes
# (benches/fake_node.py --vitals, 512 real `sleep` processes), in tmux at 120x40 with a 1 s
# interval, under `perf record -g` (frame pointers are not kept, so DWARF unwinding) for SECS
# seconds (default 20). Prints the top entries by inclusive time (`perf report --children`)
# of the collector thread alone (its name, `strata-collector`, is cut by the kernel to 15
# characters: `strata-collecto`), then its top entries by self time (`--no-children`), and
# what share of the process's samples each thread took.
# Usage: benches/profile_sampling.sh [SECS] [TOP]   (default 20 10)
# Needs: perf (linux-perf), tmux; perf_event_paranoid <= 1 or root. Build first:
#   cargo build --profile profiling && CARGO_TARGET_DIR=target/fake-nvml cargo build --release -p strata-fake-nvml
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
top=${2:-10}
bin=${STRATA_BIN:-target/profiling/strata}
lib=target/fake-nvml/release/libnvidia_ml.so
[ -x "$bin" ] && [ -f "$lib" ] || { echo "build first (see the header of $0)" >&2; exit 1; }
command -v perf >/dev/null || { echo "perf is missing: apt-get install linux-perf" >&2; exit 1; }
work=$(mktemp -d /tmp/strata-bench-profile.XXXXXX)
sock="strata-profile-$$"
pids=()
cleanup() {
  tmux -L "$sock" kill-server 2>/dev/null || true
  [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 512); do sleep 100000 & pids+=($!); done
echo "${pids[@]}" >"$work/pids"
python3 benches/fake_node.py "$work/node.json" --vitals --gpus 8 --per-gpu 64 --pids "$work/pids"
tmux -L "$sock" new-session -d -x 120 -y 40 \
  "exec env STRATA_FAKE_NVML_SCENARIO=$work/node.json $PWD/$bin --interval 1 --nvml-lib $PWD/$lib"
pid=$(tmux -L "$sock" display-message -p '#{pane_pid}')
# The collector thread exists once the monitor has started: wait for it (an event, bounded).
collector=
for _ in $(seq 200); do
  collector=$(grep -lx 'strata-collecto' /proc/"$pid"/task/*/comm 2>/dev/null | head -1 || true)
  [ -n "$collector" ] && break
  sleep 0.05
done
[ -n "$collector" ] || { echo "no strata-collector thread in pid $pid" >&2; exit 1; }
echo "== strata $("$bin" --version | head -1), 8 GPUs x 64 processes, perf record -g for ${secs} s"
echo "   load before: $(cut -d' ' -f1-3 /proc/loadavg)"
perf record -q -g --call-graph dwarf,16384 -F 499 -p "$pid" -o "$work/perf.data" -- sleep "$secs" 2>"$work/record.err" \
  || { cat "$work/record.err" >&2; exit 1; }
echo "   load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
report() { perf report -i "$work/perf.data" --stdio --percentage relative 2>/dev/null "$@"; }
echo
echo "== samples by thread"
report --no-children --sort comm -g none --percent-limit 0.5 | grep -E '^ +[0-9]'
echo
echo "== collector thread, top $top by inclusive time (--children)"
# Inlined frames and the thread's own plumbing (its start, the closure that runs the loop)
# hold every sample: left out, so the list starts at the work.
report --children --comm strata-collecto --sort symbol -g none --percent-limit 0 \
  | grep -E '^ +[0-9]' | grep -v '(inlined)' \
  | grep -vE 'clone3|start_thread|thread_start|call_once|catch_unwind|begin_short_backtrace|spawn_collector' \
  | head -n "$top"
echo
echo "== collector thread, top $top by self time (--no-children)"
report --no-children --comm strata-collecto --sort symbol -g none --percent-limit 0 \
  | grep -E '^ +[0-9]' | head -n "$top"

#!/usr/bin/env bash
# Where the monitor's sampling thread spends its time: strata (the `profiling` build: release
# code with line tables, not stripped) on the fake NVML node of 8 GPUs x PER_GPU processes
# (benches/fake_node.py --vitals, 8 x PER_GPU real `sleep` processes), in tmux at 120x40 with a 1 s
# interval, under `perf record -g` (frame pointers are not kept, so DWARF unwinding) for SECS
# seconds (default 20), recording the collector thread alone (`perf record -t`; its name,
# `strata-collector`, is cut by the kernel to 15 characters: `strata-collecto`). Prints its
# top user-space entries by inclusive time (`perf report --children`, inline frames folded,
# the thread's own start-up frames left out: every sample passes through them), then by self
# time (`--no-children`), each in % of the thread's samples, and the share spent in the
# kernel; then, from a second, process-wide recording of SECS/4 seconds, each thread's share.
# Samples at FREQ a second (default 4999: the collector now spends about a millisecond a second,
# which 499 a second caught in some 14 samples over 20 s at 8 x 64).
# Usage: benches/profile_sampling.sh [SECS] [TOP] [PER_GPU]   (default 20 10 64: PER_GPU processes
#        on each of the 8 GPUs; 512 for the big inference node)
# Needs: perf (linux-perf), tmux; perf_event_paranoid <= 1 or root. Build first:
#   cargo build --profile profiling && CARGO_TARGET_DIR=target/fake-nvml cargo build --release -p strata-fake-nvml
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
top=${2:-10}
per_gpu=${3:-64}
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
  [ -n "${KEEP:-}" ] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq $((8 * per_gpu))); do sleep 100000 & pids+=($!); done
echo "${pids[@]}" >"$work/pids"
python3 benches/fake_node.py "$work/node.json" --vitals --gpus 8 --per-gpu "$per_gpu" --pids "$work/pids"
tmux -L "$sock" new-session -d -x 120 -y 40 \
  "exec env STRATA_FAKE_NVML_SCENARIO=$work/node.json $PWD/$bin --interval 1 --nvml-lib $PWD/$lib"
pid=$(tmux -L "$sock" display-message -p '#{pane_pid}')
# The collector thread exists once the monitor has started: wait for it (an event, bounded).
collector=
# (a path /proc/PID/task/TID/comm: TID is the thread perf records)
for _ in $(seq 200); do
  collector=$(grep -lx 'strata-collecto' /proc/"$pid"/task/*/comm 2>/dev/null | head -1 || true)
  [ -n "$collector" ] && break
  sleep 0.05
done
[ -n "$collector" ] || { echo "no strata-collector thread in pid $pid" >&2; exit 1; }
echo "== strata $("$bin" --version | head -1), 8 GPUs x $per_gpu processes, perf record -g for ${secs} s"
echo "   load before: $(cut -d' ' -f1-3 /proc/loadavg)"
tid=$(basename "$(dirname "$collector")")
# The steady state: the first sample's first looks at every process (status, cmdline, exe)
# are a start-up cost, left out of the recording.
sleep "${WARM:-5}"
record() { # OUT SECONDS perf-target...
  local out=$1 for=$2
  shift 2
  perf record -q -g --call-graph dwarf,16384 -F "${FREQ:-4999}" "$@" -o "$out" -- sleep "$for" 2>"$work/record.err" \
    || { cat "$work/record.err" >&2; exit 1; }
}
record "$work/collector.data" "$secs" -t "$tid"
echo "   load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
# The rows of a report: "children% self% [.] symbol", trailing columns trimmed.
rows() { perf report --stdio --no-inline -g none --percent-limit 0 "$@" 2>/dev/null \
  | grep -E '^ +[0-9]' | sed -E 's/[ -]+$//'; }
start_frames='thread_start|clone3|start_thread|__rust_begin_short_backtrace|call_once\{\{vtable\.shim\}\}'
echo
echo "== collector thread (tid $tid), top $top by inclusive time (--children), % of its samples"
rows -i "$work/collector.data" --children --sort symbol | grep -F '[.]' | grep -vE "$start_frames" \
  | head -n "$top" || true   # head closes the pipe early: not a failure
echo
echo "== collector thread, top $top by self time (--no-children)"
rows -i "$work/collector.data" --no-children --sort symbol | head -n "$top" || true
echo
echo "== collector thread, in the kernel (self time of [k] entries)"
rows -i "$work/collector.data" --no-children --sort symbol | grep -F '[k]' \
  | awk '{ s += $1 } END { printf "   %.1f%%\n", s }'
echo
echo "== every thread, share of the process's samples over $(( (secs + 3) / 4 )) s"
record "$work/process.data" $(( (secs + 3) / 4 )) -p "$pid"
rows -i "$work/process.data" --no-children --sort comm

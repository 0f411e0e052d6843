#!/usr/bin/env bash
# The monitor with many allocator feeds: CPU share of one core and resident memory of
# `strata` (release) in a real pseudo-terminal (tmux, 120x40, 1 s interval) on a fake node of
# 8 GPUs x 8 processes, each process a real Python job running the agent (stub torch,
# 2 samples/s). Run once with the agents and once with the same processes without agents: the
# difference is what the feeds cost.
# Usage: benches/feeds.sh [SECONDS] [PROCESSES]   (default 60 s, 64 processes)
# Build first: cargo build --release && CARGO_TARGET_DIR=target/fake-nvml cargo build --release -p strata-fake-nvml
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
n=${2:-64}
bin=${STRATA_BIN:-target/release/strata}
lib=target/fake-nvml/release/libnvidia_ml.so
[ -x "$bin" ] && [ -f "$lib" ] || { echo "build first (see the header of $0)" >&2; exit 1; }
work=$(mktemp -d /tmp/strata-bench-feeds.XXXXXX)
chmod 700 "$work"; mkdir -m 700 "$work/feeds"
jobs_pids=()
cleanup() {
  tmux -L "strata-feeds-$$" kill-server 2>/dev/null || true
  for p in "${jobs_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

uuid() { printf '5f3c2a1e-8b7d-4c6e-9a10-%012x' "$1"; }

# measure LABEL START_AGENTS: starts n jobs, writes the scenario, runs the monitor, prints.
measure() {
  local label=$1 agents=$2
  jobs_pids=()
  for i in $(seq 0 $((n - 1))); do
    g=$((i % 8))
    STRATA_STUB_DEVICES="[{\"uuid\": \"$(uuid $g)\", \"pci_bus_id\": \"00000000:$(printf '%02X' $((0x18 + 16 * g))):00.0\", \"name\": \"NVIDIA H100 80GB HBM3\", \"total\": 85520809984}]" \
    STRATA_FEED_DIR="$work/feeds" PYTHONPATH=tests/python/stubs:assets/python PYTHONDONTWRITEBYTECODE=1 \
      python3 -c "
import sys, time
if $agents:
    import strata_feed; strata_feed.start(interval=0.5)
import torch
torch.cuda.init(); torch._stub.touch(0)
live = [torch._stub.allocate(0, (64 + $i) << 20) for _ in range(8)]
print('up', flush=True)
time.sleep(100000)
" > "$work/job-$i.out" 2>&1 &
    jobs_pids+=($!)
  done
  for i in $(seq 0 $((n - 1))); do
    for _ in $(seq 1 200); do grep -q up "$work/job-$i.out" 2>/dev/null && break; sleep 0.05; done
  done
  python3 - "$work/scenario.json" "$n" "${jobs_pids[@]}" <<'PY'
import json, sys
path, n, pids = sys.argv[1], int(sys.argv[2]), [int(p) for p in sys.argv[3:]]
MiB = 1 << 20
devices = []
for g in range(8):
    mine = [(i, p) for i, p in enumerate(pids) if i % 8 == g]
    procs = [{"pid": p, "used": 512 * MiB + 8 * (64 + i) * MiB} for i, p in mine]
    used = sum(x["used"] for x in procs)
    devices.append({"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5f3c2a1e-8b7d-4c6e-9a10-%012x" % g,
                    "pci_bus_id": "00000000:%02X:00.0" % (0x18 + 16 * g),
                    "memory": {"total": 85520809984, "reserved": 536870912, "used": used},
                    "utilization": {"gpu": 90, "memory": 40}, "mig_mode": "NotSupported",
                    "compute_processes": procs,
                    "process_utilization": [{"pid": x["pid"], "sm": 80, "mem": 30, "enc": 0, "dec": 0} for x in procs]})
json.dump({"devices": devices}, open(path, "w"))
PY
  local sock="strata-feeds-$$"
  tmux -L "$sock" new-session -d -x 120 -y 40 \
    "STRATA_FAKE_NVML_SCENARIO=$work/scenario.json $bin --interval 1 --nvml-lib $lib --feed-dir $work/feeds"
  sleep 5
  local shell pid
  shell=$(tmux -L "$sock" display-message -p '#{pane_pid}')
  pid=$(pgrep -P "$shell" || echo "$shell")
  local fed
  fed=$(tmux -L "$sock" capture-pane -p | grep -c " fed " || true)
  local t0 r0 start t1 r1 end
  t0=$(awk '{print $14 + $15}' "/proc/$pid/stat"); r0=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status"); start=$(date +%s.%N)
  if [ -n "${PERF:-}" ]; then perf record -e cpu-clock -F 999 -g -t "$(ls /proc/$pid/task | sed -n 2p)" -o /tmp/strata-feeds.perf -- sleep "$secs" >/dev/null 2>&1; else sleep "$secs"; fi
  t1=$(awk '{print $14 + $15}' "/proc/$pid/stat"); r1=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status"); end=$(date +%s.%N)
  awk -v l="$label" -v a="$t0" -v b="$t1" -v s="$start" -v e="$end" -v hz="$(getconf CLK_TCK)" -v r0="$r0" -v r1="$r1" -v f="$fed" 'BEGIN {
    printf "%-22s cpu %.2f%% of one core over %.0fs, rss %.1f -> %.1f MiB (%d rows fed on screen)\n", l, 100 * (b - a) / hz / (e - s), e - s, r0 / 1024, r1 / 1024, f }'
  echo "$r1" > "$work/rss-$label"
  [ -n "${THREADS:-}" ] && for t in /proc/$pid/task/*; do echo "  thread $(cat $t/comm): $(awk "{print \$14 + \$15}" $t/stat) ticks"; done
  tmux -L "$sock" kill-server 2>/dev/null || true
  for p in "${jobs_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -f "$work"/feeds/*.sock
}

[ -z "${ONLY_FEEDS:-}" ] && measure "no-agents" 0
measure "$n-feeds" 1
awk -v a="$(cat "$work/rss-no-agents")" -v b="$(cat "$work/rss-$n-feeds")" -v n="$n" \
  'BEGIN { printf "rss added per feed: %.1f KiB\n", (b - a) / n }'

#!/usr/bin/env bash
# Whole-process measurement of a pause on a busy node: the fake NVML (tests/fake-nvml) lists
# PROCS real processes (sleeps with long command lines) over 8 GPUs; strata polls them every
# INTERVAL seconds in a real pseudo-terminal (tmux, 160x48), is paused for SECS seconds, then
# resumed. Prints the header while paused, the resident memory before and after the pause
# (VmRSS, and the peak VmHWM), how long after `p` a key (`?`, help) is answered, and how
# long until the monitor is live again.
# Usage: benches/pause.sh [PROCS] [SECS] [INTERVAL]   (default 1000 60 0.05)
# Build first: cargo build --release (or STRATA_BIN=path). Needs tmux and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
procs=${1:-1000}
secs=${2:-60}
interval=${3:-0.05}
bin=${STRATA_BIN:-target/release/strata}
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 1; }
CARGO_TARGET_DIR=target/fake-nvml cargo build -q -p strata-fake-nvml
lib=$PWD/target/fake-nvml/debug/libnvidia_ml.so
work=$(mktemp -d /tmp/strata-bench-pause.XXXXXX)
sock="strata-pause-$$"
pids=()
cleanup() {
  tmux -L "$sock" kill-server 2>/dev/null || true
  [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for i in $(seq 1 "$procs"); do
  bash -c "exec -a '/usr/bin/python3.11 -m torch.distributed.run --nproc-per-node 8 train.py --config configs/llama-70b.yaml --rank $i --data /datasets/pile/shard-$i' sleep 100000" &
  pids+=($!)
done
python3 - "$work/node.json" "${pids[@]}" <<'EOF'
import json, sys
out, pids = sys.argv[1], [int(p) for p in sys.argv[2:]]
gib = 1 << 30
devices = []
for g in range(8):
    mine = pids[g::8]
    used = [((i % 7) + 1) * 64 * (1 << 20) for i in range(len(mine))]
    total, reserved = 80 * gib, 512 * (1 << 20)
    devices.append({
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": f"GPU-00000000-0000-0000-0000-00000000000{g}",
        "pci_bus_id": f"00000000:{0x18 + g:02X}:00.0",
        "memory": {"total": total, "reserved": reserved, "used": sum(used),
                   "free": total - reserved - sum(used)},
        "compute_processes": [{"pid": p, "used": u} for p, u in zip(mine, used)],
    })
json.dump({"devices": devices}, open(out, "w"))
EOF
tmux -L "$sock" new-session -d -x 160 -y 48 \
  "STRATA_FAKE_NVML_SCENARIO=$work/node.json $bin --interval $interval --nvml-lib $lib"
shell=$(tmux -L "$sock" display-message -p '#{pane_pid}')
screen() { tmux -L "$sock" capture-pane -p; }
until screen | grep -q 'Processes ('; do sleep 0.2; done
pid=$(pgrep -P "$shell" || echo "$shell")
sleep 5
status() { awk -v k="$1:" '$1 == k {printf "%.1f MiB", $2 / 1024}' "/proc/$pid/status"; }
echo "$procs processes, every $interval s: rss $(status VmRSS) before the pause"
tmux -L "$sock" send-keys p
sleep "$secs"
echo "paused ${secs}s: rss $(status VmRSS), peak $(status VmHWM)"
echo "header: $(screen | head -1 | grep -o '‖ paused[^│]*')"
start=$(date +%s.%N)
tmux -L "$sock" send-keys p '?'
until screen | grep -q '┌ Help'; do sleep 0.01; done
key=$(date +%s.%N)
tmux -L "$sock" send-keys '?'
until screen | head -1 | grep -q '● live'; do sleep 0.05; done
live=$(date +%s.%N)
awk -v s="$start" -v k="$key" -v l="$live" 'BEGIN {
  printf "resumed: a key answered after %.2f s, live again after %.2f s\n", k - s, l - s }'
echo "rss $(status VmRSS), peak $(status VmHWM) after resuming"

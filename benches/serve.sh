#!/usr/bin/env bash
# What a Prometheus scrape of `strata serve` costs: the HTTP round trip of /metrics on a fake
# node of 8 H100s x 8 processes (64 real `sleep` processes, so /proc names them; the fake NVML
# library answers for the GPUs), measured by curl's time_total, N times each way:
#   - reused: one curl fetching /metrics N times over one kept-alive connection (as Prometheus
#     scrapes);
#   - fresh: one curl fetching it N times with `Connection: close`, so each is a new connection;
#   - spawned: N curls, each its own process and connection (the busiest for the machine).
# Prints median and p99 in milliseconds, the body's size and series count, and the server's CPU
# share (its sampler runs every second throughout).
# Usage: [INTERVAL=SECS] benches/serve.sh [N] [-- strata serve args]   (default N = 1000, INTERVAL 1)
# Build first: cargo build --release && CARGO_TARGET_DIR=target/fake-nvml cargo build --release -p strata-fake-nvml
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
shift $(( $# < 1 ? $# : 1 ))
[ "${1:-}" = "--" ] && shift
bin=${STRATA_BIN:-target/release/strata}
lib=target/fake-nvml/release/libnvidia_ml.so
[ -x "$bin" ] && [ -f "$lib" ] || { echo "build first (see the header of $0)" >&2; exit 1; }
command -v curl >/dev/null || { echo "benches/serve.sh needs curl" >&2; exit 1; }
work=$(mktemp -d /tmp/strata-bench-serve.XXXXXX)
pids=()
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 64); do sleep 100000 & pids+=($!); done
python3 - "$work/scenario.json" "${pids[@]}" <<'PY'
import json, sys
path, pids = sys.argv[1], [int(p) for p in sys.argv[2:]]
GiB, MiB = 1 << 30, 1 << 20
devices = []
for g in range(8):
    procs = [{"pid": pids[g * 8 + k], "used": (3 + k % 4) * GiB + k * 64 * MiB} for k in range(8)]
    used = sum(p["used"] for p in procs)
    devices.append({"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5f3c2a1e-8b7d-4c6e-9a10-%012x" % g,
                    "pci_bus_id": "00000000:%02X:00.0" % (0x18 + 16 * g),
                    "memory": {"total": 85520809984, "reserved": 536870912, "used": used},
                    "utilization": {"gpu": 90, "memory": 40},
                    "mig_mode": "NotSupported", "compute_processes": procs})
json.dump({"devices": devices}, open(path, "w"))
PY
STRATA_FAKE_NVML_SCENARIO=$work/scenario.json "$bin" serve --listen 127.0.0.1:0 --interval "${INTERVAL:-1}" \
  --nvml-lib "$lib" "$@" >"$work/out" 2>"$work/err" &
server=$!
for _ in $(seq 100); do grep -q http "$work/out" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*' "$work/out") || { cat "$work/err" >&2; exit 1; }
sleep 3   # a few samples in, the /proc reads warm
curl -s "$url" >"$work/body"
series=$(grep -vc '^#' "$work/body")
named=$(grep '^strata_process_used_bytes{' "$work/body" | grep -vc 'pid="other"' || true)
t0=$(awk '{print $14 + $15}' "/proc/$server/stat"); start=$(date +%s.%N)
args=()
for _ in $(seq "$n"); do args+=(-o /dev/null "$url"); done
curl -s -w '%{time_total}\n' "${args[@]}" >"$work/reused"
curl -s -H 'Connection: close' -w '%{time_total}\n' "${args[@]}" >"$work/fresh"
for _ in $(seq "$n"); do curl -s -o /dev/null -w '%{time_total}\n' "$url"; done >"$work/spawned"
t1=$(awk '{print $14 + $15}' "/proc/$server/stat"); end=$(date +%s.%N)
stats() {
  sort -n "$1" | awk -v what="$2" '{ v[NR] = $1 * 1000 } END {
    p99 = int(NR * 0.99); if (p99 < 1) p99 = 1
    printf "%-7s %d scrapes: median %.3f ms, p99 %.3f ms, max %.3f ms\n", what, NR, v[int((NR + 1) / 2)], v[p99], v[NR] }'
}
echo "strata serve, 8 GPUs x 8 processes ($named processes named): /metrics is $(wc -c <"$work/body") bytes, $series series"
stats "$work/reused" reused
stats "$work/fresh" fresh
stats "$work/spawned" spawned
awk -v s="$start" -v e="$end" -v a="$t0" -v c="$t1" -v hz="$(getconf CLK_TCK)" -v i="${INTERVAL:-1}" 'BEGIN {
  printf "server cpu while scraped: %.1f%% of one core over %.1f s (sampling every %s s included)\n", 100 * (c - a) / hz / (e - s), e - s, i }'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"

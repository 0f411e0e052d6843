#!/usr/bin/env bash
# /metrics of `strata serve --demo` while IDLE clients hold connections open and send nothing
# (loopback): the scrape round trip (curl's time_total, a new connection each) N times before
# the idle clients connect and N times while they are connected, median, p99 and max in ms,
# and how many scrapes got no answer within 5 s. The server runs with a descriptor limit of
# FDS (soft and hard; default 1024, as many systems give a process), the clients in one
# Python process.
# Usage: [FDS=1024] benches/serve_idle.sh [IDLE] [N]   (default 5000 idle clients, N = 200)
# Build first: cargo build --release
set -euo pipefail
cd "$(dirname "$0")/.."
idle=${1:-5000}
n=${2:-200}
fds=${FDS:-1024}
bin=${STRATA_BIN:-target/release/strata}
[ -x "$bin" ] || { echo "build first (see the header of $0)" >&2; exit 1; }
command -v curl >/dev/null || { echo "benches/serve_idle.sh needs curl" >&2; exit 1; }
work=$(mktemp -d /tmp/strata-bench-serve-idle.XXXXXX)
server=""
holder=""
cleanup() {
  [ -n "$holder" ] && kill "$holder" 2>/dev/null || true
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
prlimit --nofile="$fds:$fds" "$bin" serve --demo --listen 127.0.0.1:0 >"$work/out" 2>"$work/err" &
server=$!
for _ in $(seq 100); do grep -q http "$work/out" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*' "$work/out") || { cat "$work/err" >&2; exit 1; }
addr=${url#http://}; addr=${addr%%/*}
scrapes() {
  for _ in $(seq "$n"); do
    curl -s -o /dev/null -m 5 -w '%{time_total} %{http_code}\n' "$url" || true
  done >"$1"
}
stats() {
  awk '{ print $1 }' "$1" | sort -n | awk -v what="$2" -v lost="$(awk '$2 != 200' "$1" | wc -l)" '{ v[NR] = $1 * 1000 } END {
    p99 = int(NR * 0.99); if (p99 < 1) p99 = 1
    printf "%-34s %d scrapes: median %.2f ms, p99 %.2f ms, max %.2f ms, %d unanswered\n", what, NR, v[int((NR + 1) / 2)], v[p99], v[NR], lost }'
}
sleep 1
scrapes "$work/before"
ulimit -n $((idle + 64)) 2>/dev/null || true
python3 - "$addr" "$idle" "$work/held" <<'PY' &
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
held, failed = [], 0
# A server that stopped accepting: give up after 20 connections in a row time out.
while len(held) < int(sys.argv[2]) and failed < 20:
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect((host, int(port)))
        held.append(s)
        failed = 0
    except OSError:
        s.close()
        failed += 1
open(sys.argv[3], "w").write("%d\n" % len(held))
time.sleep(3600)
PY
holder=$!
for _ in $(seq 600); do [ -s "$work/held" ] && break; sleep 0.1; done
scrapes "$work/during"
open=$(ls "/proc/$server/fd" | wc -l)
echo "strata serve --demo, descriptor limit $fds; $(cat "$work/held") of $idle idle clients connected; the server holds $open descriptors"
stats "$work/before" "before the idle clients"
stats "$work/during" "with them connected"
echo "stderr: $(grep -c 'the cap' "$work/err" || true) line(s) about the cap, e.g.: $(grep -m1 'the cap' "$work/err" | cut -c1-120 || true)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"

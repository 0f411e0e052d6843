#!/usr/bin/env bash
# The monitor's CPU with thousands of dead sockets in other users' feed dirs, as root, under a
# private /tmp (tests/feeds/isolated_tmp.py: a tmpfs in its own mount namespace, so nothing
# is seen outside): the full-screen monitor (tmux, 120x40, 1 s interval) on a fake node whose
# one process has a live agent (uid 65534), for SECONDS, in each case:
#   clean       the live agent alone;
#   cross-user  and uid 1000's /tmp/strata-1000 holding DEAD (5000) dead sockets;
#   own-dir     the agent is uid 1000's, in /tmp/strata-1000 with DEAD (10000) dead sockets.
# Prints its CPU share of one core per case (measured after WARMUP seconds, default 5: the
# monitor's first scans connect to each dead socket twice, a few hundred a scan), and
# whether the agent's feed was found.
# Usage: [WARMUP=SECS] benches/dead_sockets.sh [SECONDS] [STRATA_BIN...]   (default 30 s, target/release/strata;
# binaries outside /tmp, which the private /tmp hides)
# Build first: cargo build --release && CARGO_TARGET_DIR=target/fake-nvml cargo build --release -p strata-fake-nvml
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
shift $(( $# < 1 ? $# : 1 ))
bins=("$@")
[ ${#bins[@]} -eq 0 ] && bins=(target/release/strata)
lib=target/fake-nvml/release/libnvidia_ml.so
[ -f "$lib" ] || { echo "build first (see the header of $0)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "benches/dead_sockets.sh runs as root (unshare, mount, setpriv)" >&2; exit 1; }
for bin in "${bins[@]}"; do
  [ -x "$bin" ] || { echo "no $bin" >&2; exit 1; }
  for case in clean cross-user own-dir; do
    unshare -m --propagation private python3 tests/feeds/isolated_tmp.py "$case" "$(realpath "$bin")" \
      "$(realpath "$lib")" "$PWD/tests/python/stubs:$PWD/assets/python" --monitor "$secs" --warmup "${WARMUP:-5}" |
      python3 -c 'import json, sys; r = json.load(sys.stdin); c = r["cpu"]
print("%-28s %-11s cpu %5.2f%% of one core over %.0f s, the feed %s" % (sys.argv[1], sys.argv[2], c["percent"], c["seconds"], "shown (waiting)" if c["screen_says_waiting"] else "NOT shown"))' "$bin" "$case"
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"

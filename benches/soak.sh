#!/usr/bin/env bash
# Resident memory of the monitor over a long run, in a real pseudo-terminal (tmux).
# Usage: benches/soak.sh SECONDS [strata args...]
#   benches/soak.sh 3600 --demo
#   STRATA_FAKE_NVML_SCENARIO=target/bench/large_node.json \
#     benches/soak.sh 3600 --nvml-lib target/fake-nvml/release/libnvidia_ml.so
# (the scenario and the release fake are made by `cargo bench --bench nvml_poll`).
# Prints RSS every 10 minutes and at the end. Build first: cargo build --release.
set -euo pipefail
secs=$1; shift
bin=${STRATA_BIN:-target/release/strata}
sock="strata-soak-$$"
tmux -L "$sock" new-session -d -x 160 -y 48 \
  "STRATA_FAKE_NVML_SCENARIO='${STRATA_FAKE_NVML_SCENARIO:-}' $bin --interval 1 $*"
trap 'tmux -L "$sock" kill-server 2>/dev/null || true' EXIT
sleep 5
shell=$(tmux -L "$sock" display-message -p '#{pane_pid}')
pid=$(pgrep -P "$shell" || echo "$shell")
rss() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status"; }
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
echo "start: rss $(rss) MiB ($*)"
t0=$(ticks); elapsed=0
while [ "$elapsed" -lt "$secs" ]; do
  step=$(( secs - elapsed < 600 ? secs - elapsed : 600 ))
  sleep "$step"; elapsed=$(( elapsed + step ))
  echo "after ${elapsed}s: rss $(rss) MiB"
done
t1=$(ticks)
awk -v a="$t0" -v b="$t1" -v s="$secs" -v hz="$(getconf CLK_TCK)" \
  'BEGIN { printf "cpu over the run: %.2f%% of one core\n", 100 * (b - a) / hz / s }'

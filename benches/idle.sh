#!/usr/bin/env bash
# Whole-process measurement of the monitor left idle: CPU share of one core and resident
# memory of `strata --demo` at a 1 s interval, in a real pseudo-terminal (tmux), 160x48.
# Usage: benches/idle.sh [SECONDS]   (default 60). Build first: cargo build --release.
set -euo pipefail
secs=${1:-60}
bin=${STRATA_BIN:-target/release/strata}
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 1; }
sock="strata-idle-$$"
tmux -L "$sock" new-session -d -x 160 -y 48 "$bin --demo --interval 1"
trap 'tmux -L "$sock" kill-server 2>/dev/null || true' EXIT
sleep 3
shell=$(tmux -L "$sock" display-message -p '#{pane_pid}')
pid=$(pgrep -P "$shell" || echo "$shell")
tck=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
t0=$(ticks); r0=$(rss); start=$(date +%s.%N)
sleep "$secs"
t1=$(ticks); r1=$(rss); end=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v s="$start" -v e="$end" -v hz="$tck" -v r0="$r0" -v r1="$r1" 'BEGIN {
  cpu = (b - a) / hz; wall = e - s;
  printf "idle %.0fs: cpu %.2f%% of one core, rss start %.1f MiB end %.1f MiB\n", wall, 100 * cpu / wall, r0 / 1024, r1 / 1024 }'

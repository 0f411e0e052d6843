#!/usr/bin/env bash
# strata beside nvtop, nvitop and gpustat on the same fake NVML node: CPU, peak RSS, bytes a
# second to the terminal, and time to the first frame that shows a real PID. Prints the
# README's performance table (Markdown) and the versions measured.
#
# The node (benches/fake_node.py --vitals, the fake libnvidia-ml of tests/fake-nvml) is H100s
# with real processes: "N GPUs x M processes" means M processes on EACH GPU, each a distinct
# real `sleep` (so /proc names it): 8 x 64 is 512 PIDs, 8 x 512 is 4096. "8 x 7 MIG, 64
# processes": each of the 8 GPUs in MIG mode with 7 GPU instances (1g.10gb), its 64 processes
# spread over them. The figures stand still (the node is not busy), but in "8 x 64, busy"
# (fake_node.py --busy): every process's memory saw-tooths and utilisation moves at every
# poll, as on a node at work, so the bytes to the terminal are those of a moving screen.
#
# Each size is one node; its tools run one after another on it (strata, nvtop, nvitop,
# gpustat; not interleaved), each once, in a fresh tmux server at COLSxROWS (120x40), 1 s
# interval, SECS seconds (default 30):
#   strata   target/release/strata --interval 1 --nvml-lib FAKE
#   nvtop    nvtop -d 10 -c WORK/nvtop.ini          (-d is in tenths of a second)
#   nvitop   nvitop --monitor auto --interval 1
#   gpustat  gpustat --interval 1 --show-pid        (its own watch mode; PIDs shown)
# The peers load the fake as `libnvidia-ml.so.1` from a directory on LD_LIBRARY_PATH. What is
# measured, and how, is in the header of benches/peers_run.py: CPU and bytes over the steady
# window (2 s after launch to the end), VmHWM, and the first PID seen by polling
# `capture-pane` every 5 ms for the first second, every 50 ms after. A cell reads
# `CPU % · RSS MiB · B/s · first-frame s` (CPU to two decimals and RSS to one: on the small
# nodes the tools differ below a whole one); a tool that cannot run a row says why instead.
#
# Usage: benches/peers.sh [SECS] [SIZE...]   SIZE: 1x1 8x8 8x64 8x64busy 8x7mig 8x512
#        (the default: all)
# Needs: tmux, python3 with venv; build first:
#   cargo build --release && CARGO_TARGET_DIR=target/fake-nvml cargo build --release -p strata-fake-nvml
# nvtop 3.0.1 is Debian's (bookworm), in its `contrib` section: add `contrib` to the
# Components of an apt sources file (/etc/apt/sources.list.d/debian.sources), then
# `apt-get update && apt-get install nvtop`. NVTOP=/path/to/nvtop picks another build.
# nvitop and gpustat are pinned in benches/peers-requirements.txt, installed into
# target/peers-venv (made on the first run, reused while the pins import).
# A benchmark, not a test: its numbers depend on the machine and on what else runs on it.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
shift $(( $# < 1 ? $# : 1 ))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1x1 8x8 8x64 8x64busy 8x7mig 8x512)
bin=${STRATA_BIN:-target/release/strata}
lib=target/fake-nvml/release/libnvidia_ml.so
nvtop=${NVTOP:-$(command -v nvtop || true)}
venv=target/peers-venv
[ -x "$bin" ] && [ -f "$lib" ] || { echo "build first (see the header of $0)" >&2; exit 1; }
command -v tmux >/dev/null || { echo "tmux is missing: apt-get install tmux" >&2; exit 1; }
[ -n "$nvtop" ] || echo "nvtop not found: its column says so (see the header of $0 to install it)" >&2

pinned() { grep -E "^$1==" benches/peers-requirements.txt | cut -d= -f3; }
venv_ok() {
  [ -x "$venv/bin/python" ] && "$venv/bin/python" - "$(pinned nvitop)" "$(pinned gpustat)" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(not (version("nvitop") == sys.argv[1] and version("gpustat") == sys.argv[2]))
EOF
}
if ! venv_ok; then
  echo "making $venv (benches/peers-requirements.txt)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -r benches/peers-requirements.txt
  venv_ok || { echo "$venv does not import the pinned nvitop and gpustat" >&2; exit 1; }
fi

work=$(mktemp -d /tmp/strata-bench-peers.XXXXXX)
# A tmux server of its own for each run (named by the node and the tool), its socket in the
# work dir: a new session on the socket of a server still exiting after the last run's
# kill-server fails ("server exited unexpectedly"; benches/threads.sh met it).
export TMUX_TMPDIR="$work"
sleepers=()
stop_sleepers() {
  [ ${#sleepers[@]} -eq 0 ] || kill "${sleepers[@]}" 2>/dev/null || true
  sleepers=()
}
cleanup() {
  local server
  for server in "$work"/tmux-*/strata-peers-*; do
    [ -S "$server" ] && tmux -S "$server" kill-server 2>/dev/null || true
  done
  stop_sleepers
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/lib"
ln -s "$PWD/$lib" "$work/lib/libnvidia-ml.so.1"
ln -s "$PWD/$lib" "$work/lib/libnvidia-ml.so"

# cell TOOL: one run of TOOL on the current node, as a table cell.
cell() {
  local tool=$1 cmd
  case $tool in
    strata) cmd=("$PWD/$bin" --interval 1 --nvml-lib "$PWD/$lib") ;;
    nvtop)
      [ -n "$nvtop" ] || { echo "(not installed)"; return; }
      cmd=("$nvtop" -d 10 -c "$work/nvtop.ini") ;;
    nvitop) cmd=("$PWD/$venv/bin/nvitop" --monitor auto --interval 1) ;;
    gpustat) cmd=("$PWD/$venv/bin/gpustat" --interval 1 --show-pid) ;;
  esac
  mkdir -p "$work/run"
  python3 benches/peers_run.py "strata-peers-$$-$size-$tool" "$secs" 120 40 "$work/pids" "$work/run" -- \
    env STRATA_FAKE_NVML_SCENARIO="$work/node.json" LD_LIBRARY_PATH="$work/lib" \
    "${cmd[@]}" >"$work/run/result.json"
  python3 - "$work/run/result.json" "$tool" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
if "error" in r:
    print(f"({r['error']}: {' / '.join(r['pane'])[:60]})")
    sys.stderr.write(f"{sys.argv[2]}: {r}\n")
else:
    first = "no PID" if r["first_s"] is None else f"{r['first_s']:.2f}"
    if r.get("cpu_source") == "ticks":
        sys.stderr.write(f"{sys.argv[2]}: CPU from clock ticks (a thread ended, or no schedstat)\n")
    print(f"{r['cpu_pct']:.2f} · {r['rss_mib']:.1f} · {r['bytes_per_s']:.0f} · {first}")
EOF
}

label() {
  case $1 in
    *mig) echo "${1%%x*} GPUs × 7 MIG, ${per} processes" ;;
    *busy) echo "${1%%x*} GPUs × ${per} processes, busy" ;;
    1x1) echo "1 GPU × 1 process" ;;
    *) echo "${1%%x*} GPUs × ${1#*x} processes" ;;
  esac
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
rows=()
for size in "${sizes[@]}"; do
  gpus=${size%%x*}
  case $size in
    *mig) per=64; mig=--mig; busy= ;;
    *busy) per=${size#*x}; per=${per%busy}; mig=; busy=--busy ;;
    *) per=${size#*x}; mig=; busy= ;;
  esac
  [[ $gpus =~ ^[0-9]+$ && $per =~ ^[0-9]+$ ]] || { echo "bad size $size (e.g. 8x64, 8x7mig)" >&2; exit 2; }
  for _ in $(seq $(( gpus * per ))); do sleep 100000 & sleepers+=($!); done
  echo "${sleepers[@]}" >"$work/pids"
  python3 benches/fake_node.py "$work/node.json" --vitals $mig $busy --gpus "$gpus" --per-gpu "$per" --pids "$work/pids"
  row="| $(label "$size") |"
  for tool in strata nvtop nvitop gpustat; do
    echo "$size: $tool ($secs s)" >&2
    row+=" $(cell "$tool") |"
  done
  rows+=("$row")
  stop_sleepers
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo "| node | strata | nvtop | nvitop | gpustat |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "Cells: CPU % of one core · peak RSS MiB · bytes/s to the terminal · seconds to the first"
echo "frame showing a real PID; ${secs} s each at 120x40, 1 s interval ($(nproc) cores, load"
echo "$(cut -d' ' -f1-3 /proc/loadavg) at the end)."
echo
"$bin" --version | head -1
[ -z "$nvtop" ] || "$nvtop" --version | head -1
"$venv/bin/nvitop" --version | head -1
"$venv/bin/gpustat" --version | head -1
echo "nvidia-ml-py $("$venv/bin/python" -c 'from importlib.metadata import version; print(version("nvidia-ml-py"))')"

#!/usr/bin/env bash
# Process churn, whole process: the monitor (TUI, in tmux, 1 s interval) on a fake node of
# 8 GPUs whose NVML lists RATE new real processes a second, each for LIFE seconds, with 16
# that stay. It runs in a PID namespace of its own (unshare, as root), where each process is
# given the PID the scenario names (ns_last_pid), so /proc agrees with NVML. Prints the
# monitor's resident memory every minute and its peak at the end.
# Usage: benches/churn.sh [SECONDS] [RATE] [LIFE]   (default 600 s, 10 a second, 2 s)
#   CHURN_SHOW=1 prints the monitor's screen once, after the first minute.
#   STRATA_BIN=target/release/strata benches/churn.sh 3600
# Build first: cargo build --bin strata && CARGO_TARGET_DIR=target/fake-nvml cargo build -p strata-fake-nvml
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
rate=${2:-10}
life=${3:-2}
bin=$(realpath "${STRATA_BIN:-target/debug/strata}")
lib=$(realpath "${STRATA_FAKE_NVML:-target/fake-nvml/debug/libnvidia_ml.so}")
[ -x "$bin" ] && [ -f "$lib" ] || { echo "build first (see the header of $0)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (a PID namespace of its own: unshare)" >&2; exit 1; }
work=$(mktemp -d /tmp/strata-bench-churn.XXXXXX)
trap 'rm -rf "$work"' EXIT
unshare --pid --fork --mount-proc python3 - "$bin" "$lib" "$work" "$secs" "$rate" "$life" "$$" <<'PY'
import json, math, os, subprocess, sys, time

bin, lib, work, secs, rate, life, tag = sys.argv[1:8]
secs, rate, life = int(secs), float(rate), int(life)
GiB, MiB = 1 << 30, 1 << 20
GPUS, STAYING, OFFSET, BASE = 8, 16, 10, 20000
total = int(secs * rate)

# Process n starts OFFSET + n / rate seconds after the monitor and is listed for `life`
# polls from the poll after that; it lives 3 s longer, so that a late first poll still finds
# it alive.
def first_poll(n):
    return math.ceil(OFFSET + n / rate) + 1

polls = OFFSET + secs + life + 5
used = [[0] * polls for _ in range(GPUS)]
lists = [[] for _ in range(GPUS)]
utils = [[] for _ in range(GPUS)]
for n in range(total):
    g, pid, start = n % GPUS, BASE + 100 + n, first_poll(n)
    size = 300 * MiB + (n % 64) * MiB
    lists[g].append({"pid": pid, "used": size, "polls": [start, start + life]})
    utils[g].append({"pid": pid, "sm": n % 100, "mem": 10, "enc": 0, "dec": 0,
                     "polls": [start, start + life]})
    for p in range(start, min(start + life, polls)):
        used[g][p] += size
staying = []
for i in range(STAYING):
    staying.append(subprocess.Popen(["sleep", str(secs + 600)]))
for i, p in enumerate(staying):
    g = i % GPUS
    lists[g].append({"pid": p.pid, "used": 2 * GiB})
    utils[g].append({"pid": p.pid, "sm": 50, "mem": 10, "enc": 0, "dec": 0})
    for q in range(polls):
        used[g][q] += 2 * GiB
devices = []
for g in range(GPUS):
    total_bytes, reserved = 85520809984, 617611264
    u = [x + 600 * MiB for x in used[g]]
    devices.append({
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-5f3c2a1e-8b7d-4c6e-9a10-%012x" % g,
        "memory": {"total": total_bytes, "reserved": reserved, "used": u,
                   "free": [total_bytes - reserved - x for x in u]},
        "utilization": {"gpu": 60, "memory": 30},
        "mig_mode": {"current": 0, "pending": 0},
        "compute_processes": lists[g],
        "process_utilization": utils[g],
    })
scenario = os.path.join(work, "scenario.json")
with open(scenario, "w") as f:
    json.dump({"devices": devices}, f)

sock = "strata-churn-%s" % tag
env = "STRATA_FAKE_NVML_SCENARIO=%s" % scenario
t0 = time.monotonic()
subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-x", "160", "-y", "48",
                "%s %s --nvml-lib %s --interval 1 --feed-dir %s/feeds" % (env, bin, lib, work)],
               check=True)
time.sleep(1.0)
shell = subprocess.run(["tmux", "-L", sock, "display-message", "-p", "#{pane_pid}"],
                       capture_output=True, text=True, check=True).stdout.strip()
children = subprocess.run(["pgrep", "-P", shell], capture_output=True, text=True).stdout.split()
monitor = int(children[0]) if children else int(shell)

def status(field):
    with open("/proc/%d/status" % monitor) as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return float("nan")

print("churn: %g new PIDs a second for %d s, each listed %d s; monitor %s" % (rate, secs, life, bin))
print("  start: rss %.1f MiB" % status("VmRSS:"), flush=True)
running, n, next_report = [], 0, 60
while True:
    now = time.monotonic() - t0
    while n < total and OFFSET + n / rate <= now:
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(BASE + 100 + n - 1))
        running.append(subprocess.Popen(["sleep", str(life + 3)]))
        n += 1
    running = [p for p in running if p.poll() is None]
    if now - OFFSET >= next_report:
        print("  after %4d s: rss %.1f MiB, %d processes started" % (next_report, status("VmRSS:"), n),
              flush=True)
        if os.environ.get("CHURN_SHOW") and next_report == 60:
            subprocess.run(["tmux", "-L", sock, "capture-pane", "-p"])
        next_report += 60
    if now >= OFFSET + secs:
        break
    time.sleep(0.02)
print("  end: rss %.1f MiB, peak %.1f MiB" % (status("VmRSS:"), status("VmHWM:")), flush=True)
subprocess.run(["tmux", "-L", sock, "kill-server"])
PY

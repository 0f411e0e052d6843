"""One monitor's run for benches/peers.sh: launch COMMAND in a fresh tmux pane of COLSxROWS and
measure it for SECS seconds. Standard library only. Prints one JSON object:

  cpu_pct      CPU of the process over the steady window, from 2 s after launch to the end,
               in % of one core: the time on CPU of each of its threads, in nanoseconds
               (the first field of /proc/PID/task/TID/schedstat). utime + stime of
               /proc/PID/stat count whole clock ticks (10 ms: 0.06 % of a core over 18 s,
               which made 0.04 % read 0.00); they are used where they say more (threads
               that ended within the window, whose time schedstat no longer shows) or where
               the kernel has no schedstat;
  cpu_source   "schedstat" or "ticks": which of the two cpu_pct is;
  rss_mib      peak resident set (VmHWM of /proc/PID/status) at the end, MiB;
  bytes_per_s  bytes the pane received (tmux `pipe-pane`, from launch) in the same window;
  first_s      seconds from launch (just before `tmux new-session`) to the first capture of
               the pane (`capture-pane`, polled every FAST_POLL_S = 5 ms for the first
               FAST_FOR_S = 1 s, then every POLL_S = 50 ms; each poll also asks tmux whether
               the pane is dead, so about 10 ms resolution in the first second) that shows
               a whole number equal to one of the node's PIDs, as a number of its own (not
               a part of `6400MiB`, `2.5` or `CI:10`; gpustat's `sleep/4242(8M)` is one);
               null if none did before the end;
  error        why there is no measurement (the command exited: the pane's last lines).

Polling stops once a PID was seen, so it does not weigh on the steady window of a monitor
that shows one within 2 s.

Usage: python3 benches/peers_run.py SOCKET SECS COLS ROWS PIDS_FILE WORKDIR -- COMMAND...
"""
import json
import os
import re
import subprocess
import sys
import time

POLL_S = 0.05
# The target for the first frame is "within 50 ms of nvtop's": polled every 50 ms,
# a frame drawn 22 ms after launch read 0.07 s where nvtop's, drawn at 19 ms, read 0.02.
FAST_POLL_S = 0.005
FAST_FOR_S = 1.0
STEADY_FROM_S = 2.0
# A whole number standing alone: not inside a figure with its unit (`6400MiB`, which a pid
# of 6400 would match), a decimal, a word or a label (`CI:10`); a pid in a table cell, after
# `└`, between spaces and box lines, or in gpustat's `sleep/4242(8M)` is one.
NUMBER = re.compile(r"(?<![\w.:])\d+(?![\w.])")

sock, secs, cols, rows, pids_file, work = sys.argv[1:7]
secs = float(secs)
assert sys.argv[7] == "--", "usage: see the header"
command = sys.argv[8:]
pids = set(open(pids_file).read().split())
hz = os.sysconf("SC_CLK_TCK")
out = os.path.join(work, "pane.out")


conf = os.path.join(work, "tmux.conf")


def tmux(*args, check=True):
    return subprocess.run(["tmux", "-L", sock, "-f", conf, *args],
                          capture_output=True, text=True, check=check).stdout


def ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)


def thread_ns(pid):
    """Nanoseconds on CPU of each of the process's threads, or None without schedstat."""
    ns = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns[tid] = int(f.read().split()[0])
        except FileNotFoundError:
            continue  # ended since the listing
        except (OSError, ValueError, IndexError):
            return None
    return ns


def cpu_seconds(start, end):
    """CPU seconds between two marks of (ticks, thread_ns), and the measure used."""
    by_ticks = (end[0] - start[0]) / hz
    if start[1] is None or end[1] is None:
        return by_ticks, "ticks"
    # A thread started within the window counts from 0; one that ended is lost to schedstat.
    by_threads = sum(ns - start[1].get(tid, 0) for tid, ns in end[1].items()) / 1e9
    if by_ticks > by_threads + 2 / hz:
        return by_ticks, "ticks"
    return by_threads, "schedstat"


def hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def size():
    try:
        return os.path.getsize(out)
    except OSError:
        return 0


def fail(why):
    tail = tmux("capture-pane", "-p", check=False).strip().splitlines()[-3:]
    print(json.dumps({"error": why, "pane": tail}))
    tmux("kill-server", check=False)
    sys.exit(0)


open(out, "w").close()
with open(conf, "w") as f:
    # Keep a pane whose command exits, so that its last words can be read.
    f.write("set-option -g remain-on-exit on\n")
quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in command)
t0 = time.monotonic()
tmux("new-session", "-d", "-x", cols, "-y", rows, f"exec {quoted}")
tmux("pipe-pane", "-o", f"cat >> {out}", check=False)
pid = tmux("display-message", "-p", "#{pane_pid}").strip()
first = None
steady = None
while True:
    now = time.monotonic() - t0
    if now >= secs:
        break
    if tmux("display-message", "-p", "#{pane_dead}", check=False).strip() == "1":
        fail(f"exited after {now:.1f} s")
    if steady is None and now >= STEADY_FROM_S:
        steady = (time.monotonic(), (ticks(pid), thread_ns(pid)), size())
    if first is None:
        screen = tmux("capture-pane", "-p", check=False)
        if any(n in pids for n in NUMBER.findall(screen)):
            first = time.monotonic() - t0
            continue
        time.sleep(FAST_POLL_S if now < FAST_FOR_S else POLL_S)
    else:
        # Nothing left to watch but the clock: wake for the steady mark and the end.
        time.sleep(max(0.0, min(secs, STEADY_FROM_S if steady is None else secs) - now))
if steady is None:
    fail(f"the run ({secs} s) is shorter than the {STEADY_FROM_S} s warm-up")
end = (time.monotonic(), (ticks(pid), thread_ns(pid)), size())
rss = hwm_kib(pid)
elapsed = end[0] - steady[0]
cpu_s, cpu_source = cpu_seconds(steady[1], end[1])
result = {
    "cpu_pct": 100.0 * cpu_s / elapsed,
    "cpu_source": cpu_source,
    "rss_mib": None if rss is None else rss / 1024,
    "bytes_per_s": (end[2] - steady[2]) / elapsed,
    "first_s": first,
    "pid": int(pid),
}
tmux("pipe-pane", check=False)
tmux("kill-server", check=False)
# Wait for the monitor to be gone (an event, bounded) so the next one starts on a quiet node.
deadline = time.monotonic() + 30
while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
    time.sleep(0.05)
print(json.dumps(result))

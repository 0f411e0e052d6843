"""The agent's CPU while no framework is ready: a share of one core per framework.

    python benches/agent_waiting.py [--assets DIR] [--seconds 60]   (run with a venv's python)

Each case is a job that imports a framework and then sleeps (nothing, torch without CUDA,
jax on the CPU, cupy without libcuda). The agent's threads' CPU time (utime+stime from
/proc/PID/task/TID/stat) is read after a 20 s settle and again --seconds later."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = [("nothing", ""), ("torch", "import torch"),
         ("jax cpu", "import jax, jax.numpy as jnp; jnp.zeros(3).block_until_ready()"),
         ("cupy", "import cupy")]
JOB = """
import json, sys, threading, time
{imports}
time.sleep(0.5)
print(json.dumps([t.native_id for t in threading.enumerate() if t.name.startswith("strata-feed")]), flush=True)
sys.stdin.readline()
"""
TICK = os.sysconf("SC_CLK_TCK")


def cpu(pid, tids):
    total = 0
    for tid in tids:
        try:
            with open("/proc/%d/task/%d/stat" % (pid, tid)) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / TICK


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--assets", default=os.path.join(os.path.dirname(HERE), "assets", "python"))
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args()
    feed = tempfile.mkdtemp(prefix="strata-bench-")
    env = dict(os.environ, STRATA_FEED_DIR=feed, JAX_PLATFORMS="cpu",
               PYTHONPATH=os.path.join(args.assets, "strata_run") + os.pathsep + args.assets)
    jobs = []
    for name, imports in CASES:
        p = subprocess.Popen([sys.executable, "-c", JOB.format(imports=imports)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, env=env, text=True)
        jobs.append((name, p, json.loads(p.stdout.readline())))
    time.sleep(20)
    before = [cpu(p.pid, tids) for _, p, tids in jobs]
    time.sleep(args.seconds)
    for (name, p, tids), b in zip(jobs, before):
        # Threads started later (the sampler) are found again by name.
        used = cpu(p.pid, tids) - b
        print("%-8s %.3f %% of a core (agent threads %s)" % (name, 100 * used / args.seconds, len(tids)))
        p.stdin.write("\n")
        p.stdin.flush()
        p.wait()


main()

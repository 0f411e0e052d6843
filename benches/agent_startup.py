"""Start-up cost of a Python process under strata run (the agent's sitecustomize), before
any framework is imported.

    python benches/agent_startup.py [--assets DIR] [--runs 60]

Median wall time of `python -c pass` with and without the agent, alternated. The agent runs
from a copy of --assets in a temporary directory with its bytecode written (as strata run's
installed copy is), after one warm-up run."""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--assets", default=os.path.join(os.path.dirname(HERE), "assets", "python"))
    ap.add_argument("--runs", type=int, default=60)
    args = ap.parse_args()
    feed = tempfile.mkdtemp(prefix="strata-bench-")
    agent = os.path.join(tempfile.mkdtemp(prefix="strata-bench-agent-"), "agent")
    shutil.copytree(args.assets, agent, ignore=shutil.ignore_patterns("__pycache__"))
    plain = dict(os.environ)
    for k in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE"):
        plain.pop(k, None)
    fed = dict(plain, STRATA_FEED_DIR=feed,
               PYTHONPATH=os.path.join(agent, "strata_run") + os.pathsep + agent)
    for env in (plain, fed):
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    times = {"plain": [], "agent": []}
    for _ in range(args.runs):
        for name, env in (("plain", plain), ("agent", fed)):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
            times[name].append(time.perf_counter() - t0)
    med = dict((k, sorted(v)[len(v) // 2] * 1000) for k, v in times.items())
    print("%s: plain %.1f ms, with the agent %.1f ms: +%.1f ms" % (sys.executable, med["plain"], med["agent"], med["agent"] - med["plain"]))


main()

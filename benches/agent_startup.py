"""Start-up cost of a Python process under strata run (the agent's sitecustomize), before
any framework is imported.

    python benches/agent_startup.py [--assets DIR] [--runs 60] [--rounds 3]
                                    [--python PY ...] [--no-bytecode] [--importtime]

For each interpreter (default: the one running this), the wall time and the CPU time
(user + system, from wait4) of `python -c pass` with and without the agent, alternated;
each round prints the medians, and the last line the median over rounds of the added wall
time. The agent runs from a copy of --assets in a temporary directory, installed the way
strata run installs it (no bytecode: the first process writes it), after one warm-up run.

--no-bytecode runs both sides with PYTHONDONTWRITEBYTECODE=1 (a common container setting).
--fifo runs each process under `chrt -f 10` (root): real-time, so that other work on a
loaded machine does not sit between the process's threads (its wall time is then its own).
--importtime prints, from `-X importtime` (medians over the runs), the modules the agent
adds to start-up and their cumulative microseconds.

The machine's own load moves these numbers: compare medians of rounds taken together."""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


PREFIX = []  # --fifo: ["chrt", "-f", "10"]


def run_once(py, env, code="pass"):
    """(wall seconds, CPU seconds) of one `py -c code`."""
    t0 = time.perf_counter()
    p = subprocess.Popen(PREFIX + [py, "-c", code], env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit("%s -c %s failed (%d)" % (py, code, p.returncode))
    return wall, ru.ru_utime + ru.ru_stime


def importtime(py, env, runs):
    """{module: median cumulative us} from -X importtime."""
    seen = {}
    for _ in range(runs):
        err = subprocess.run([py, "-X", "importtime", "-c", "pass"], env=env,
                             capture_output=True, text=True).stderr
        for line in err.splitlines()[1:]:
            parts = line.split("|")
            if len(parts) == 3:
                seen.setdefault(parts[2].strip(), []).append(int(parts[1]))
    return dict((k, statistics.median(v)) for k, v in seen.items())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--assets", default=os.path.join(os.path.dirname(HERE), "assets", "python"))
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--python", action="append", default=None)
    ap.add_argument("--no-bytecode", action="store_true")
    ap.add_argument("--importtime", action="store_true")
    ap.add_argument("--fifo", action="store_true")
    args = ap.parse_args()
    if args.fifo:
        PREFIX[:] = ["chrt", "-f", "10"]
    scratch = tempfile.mkdtemp(prefix="strata-bench-startup-")
    try:
        for py in args.python or [sys.executable]:
            bench(py, args, scratch)
    finally:
        shutil.rmtree(scratch, True)


def bench(py, args, scratch):
    feed = os.path.join(scratch, "feed")
    agent = os.path.join(scratch, "agent-bench")  # as strata run installs it: agent-<digest>, 0700
    shutil.rmtree(agent, True)
    shutil.copytree(args.assets, agent, ignore=shutil.ignore_patterns("__pycache__"))
    os.chmod(agent, 0o700)
    plain = dict(os.environ)
    for k in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "STRATA_FEED_DIR"):
        plain.pop(k, None)
    if args.no_bytecode:
        plain["PYTHONDONTWRITEBYTECODE"] = "1"
    fed = dict(plain, STRATA_FEED_DIR=feed,
               PYTHONPATH=os.path.join(agent, "strata_run"))
    for env in (plain, fed):
        run_once(py, env)
    label = "%s%s%s" % (py, " (PYTHONDONTWRITEBYTECODE=1)" if args.no_bytecode else "", " (SCHED_FIFO)" if args.fifo else "")
    added = []
    for r in range(args.rounds):
        wall = {"plain": [], "agent": []}
        cpu = {"plain": [], "agent": []}
        for _ in range(args.runs):
            for name, env in (("plain", plain), ("agent", fed)):
                w, c = run_once(py, env)
                wall[name].append(w * 1000)
                cpu[name].append(c * 1000)
        mw = dict((k, statistics.median(v)) for k, v in wall.items())
        mc = dict((k, statistics.median(v)) for k, v in cpu.items())
        added.append(mw["agent"] - mw["plain"])
        print("%s round %d: wall plain %.1f ms, agent %.1f ms (+%.1f); cpu plain %.1f ms, agent %.1f ms (+%.1f)"
              % (label, r + 1, mw["plain"], mw["agent"], mw["agent"] - mw["plain"],
                 mc["plain"], mc["agent"], mc["agent"] - mc["plain"]))
    print("%s: the agent adds %.1f ms of wall time (median of %d rounds of %d runs)"
          % (label, statistics.median(added), args.rounds, args.runs))
    if args.importtime:
        base = importtime(py, plain, args.runs)
        withagent = importtime(py, fed, args.runs)
        extra = sorted(((v, k) for k, v in withagent.items() if k not in base), reverse=True)
        print("modules the agent adds (cumulative us, median):")
        for v, k in extra:
            print("  %8d  %s" % (v, k))


main()

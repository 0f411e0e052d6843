"""Support for the real-package tier: jobs in a venv with the real torch, JAX or CuPy.

The job runs as `strata run` starts it (strata_run's sitecustomize on PYTHONPATH), with the
venv's interpreter; monitors are tests/python's. Which venv runs is STRATA_FW_VENV: "new"
(torch 2.15, jax 0.10.2 CPU, cupy-cuda12x 14.2) or "old" (torch 2.0.1 only).
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# STRATA_FW_ASSETS: another copy of assets/python (to run the tier against an older agent).
ASSETS = os.environ.get("STRATA_FW_ASSETS") or os.path.join(REPO, "assets", "python")
STRATA_RUN = os.path.join(ASSETS, "strata_run")
sys.path.insert(0, os.path.join(REPO, "tests", "python"))

from support import Monitor, wait_until  # noqa: E402

VENV = os.environ.get("STRATA_FW_VENV", "new")
PY = sys.executable
DEADLINE = 20.0


def has(module):
    return importlib.util.find_spec(module) is not None


def needs(*modules):
    missing = [m for m in modules if not has(m)]
    return unittest.skipIf(missing, "not in venv %s: %s" % (VENV, ", ".join(missing)))


def agent_threads(pid):
    """{tid: name} of the agent's threads in process pid (the names the agent gives them in
    /proc, at most 15 characters: 'strata-feed', 'strata-feed-sam')."""
    out = {}
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                name = f.read().strip()
            if name.startswith("strata-feed"):
                out[int(tid)] = name
    except OSError:
        pass
    return out


def wakeups(pid, tid):
    """Context switches of a thread so far: each wake-up of a sleeping thread is one."""
    try:
        with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
            text = f.read()
    except OSError:
        return None
    n = 0
    for line in text.splitlines():
        if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
            n += int(line.split()[1])
    return n


class Case(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="strata-fw-")
        self.feed = os.path.join(self.tmp, "feed")
        self.procs = []
        self.monitors = []

    def tearDown(self):
        for m in self.monitors:
            m.close()
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            for s in (p.stdin, p.stdout, p.stderr):
                if s is not None:
                    s.close()
        shutil.rmtree(self.tmp, True)

    def env(self, agent=True, **extra):
        env = dict((k, v) for k, v in os.environ.items()
                   if not k.startswith(("PYTORCH_", "XLA_", "STRATA_", "CUPY_", "JAX_", "PYTHONPATH")))
        env.update(STRATA_FEED_DIR=self.feed, PYTHONDONTWRITEBYTECODE="1", STRATA_FEED_INTERVAL="0.5",
                   JAX_PLATFORMS="cpu")
        if agent:
            # As strata run sets it (an older agent also needs its package dir there).
            env["PYTHONPATH"] = STRATA_RUN + (os.pathsep + ASSETS if "STRATA_FW_ASSETS" in os.environ else "")
        env.update((k, str(v)) for k, v in extra.items())
        return env

    def script(self, body, name="job.py"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(body))
        return path

    def start(self, body, env=None, args=(), python=PY):
        # A file of its own per job: an interpreter reads its script after Popen returns, and
        # a second job's script written to the same path would replace the first one's.
        script = self.script(body, "job-%d.py" % len(self.procs))
        p = subprocess.Popen([python, script] + list(args), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env or self.env(), text=True)
        self.procs.append(p)
        return p

    def line(self, p, what="a line"):
        line = p.stdout.readline()
        if not line:
            raise AssertionError("job ended before %s (rc %s): %s" % (what, p.wait(), p.stderr.read()))
        return line.strip()

    def send(self, p, text="go"):
        p.stdin.write(text + "\n")
        p.stdin.flush()

    def sock(self, pid):
        return os.path.join(self.feed, "%d.sock" % pid)

    def monitor(self, pid, timeout=DEADLINE):
        m = Monitor(self.sock(pid), timeout=timeout)
        self.monitors.append(m)
        return m

    def finish(self, p, timeout=60):
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err

    def hello(self, m, pred=lambda h: True, timeout=DEADLINE):
        return m.wait(lambda x: x.get("type") == "hello" and pred(x), timeout=timeout, what="a hello")


def dumps(obj):
    return json.dumps(obj, sort_keys=True)


def now():
    return time.monotonic()


__all__ = ["Case", "needs", "wait_until", "agent_threads", "wakeups", "VENV", "PY", "now", "dumps",
           "ASSETS", "STRATA_RUN", "REPO"]

"""On Python 3.12+, os.fork() in a process with more than one thread warns. The agent's
threads must not be the cause: a job that forks gets no warning with the agent, and one that
has its own thread gets the warning it gets without the agent.

Runs python3.14 from a Debian sid root ($STRATA_PY314_ROOT, default /opt/py314-root, built
by .ci/run), chrooted in a private mount namespace with /proc bound (CPython counts the
threads in /proc/self/stat)."""

import os
import shutil
import subprocess
import tempfile
import unittest

from fwsupport import ASSETS

ROOT = os.environ.get("STRATA_PY314_ROOT", "/opt/py314-root")
HAVE = os.path.exists(os.path.join(ROOT, "usr/bin/python3.14")) and os.geteuid() == 0
REQUIRED = os.environ.get("STRATA_REQUIRE_PY314") == "1"

FORK = r"""
import os, sys, threading, time
if sys.argv[1] == "thread":
    threading.Thread(target=time.sleep, args=(3,), daemon=True).start()
time.sleep(0.3)
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
if sys.argv[1] == "mp":
    import multiprocessing as mp
    p = mp.get_context("fork").Process(target=time.sleep, args=(0,))
    p.start(); p.join()
print("forked", flush=True)
"""


@unittest.skipUnless(HAVE or REQUIRED, "no Python 3.14 root at %s (or not root)" % ROOT)
class ForkWarningTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(HAVE, "STRATA_REQUIRE_PY314=1 but no python3.14 at %s" % ROOT)
        self.inside = tempfile.mkdtemp(prefix="strata-fork-", dir=os.path.join(ROOT, "tmp"))
        shutil.copytree(ASSETS, os.path.join(self.inside, "agent"), ignore=shutil.ignore_patterns("__pycache__"))
        with open(os.path.join(self.inside, "fork.py"), "w") as f:
            f.write(FORK)
        self.rel = "/" + os.path.relpath(self.inside, ROOT)

    def tearDown(self):
        shutil.rmtree(self.inside, True)

    def run_job(self, mode, agent):
        env = "PYTHONDONTWRITEBYTECODE=1 STRATA_FEED_DIR=%s/feed" % self.rel
        if agent:
            env += " PYTHONPATH=%s/agent/strata_run:%s/agent" % (self.rel, self.rel)
        cmd = ("mount --bind /proc %s/proc && exec chroot %s env -i %s python3.14 -W default %s/fork.py %s"
               % (ROOT, ROOT, env, self.rel, mode))
        r = subprocess.run(["unshare", "-m", "sh", "-c", cmd], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "forked\n")
        return r.stderr

    def test_no_warning_caused_by_the_agent(self):
        for mode in ("fork", "mp"):
            self.assertEqual(self.run_job(mode, agent=False), "", mode)
            self.assertEqual(self.run_job(mode, agent=True), "", mode)

    def test_a_jobs_own_thread_warns_as_without_the_agent(self):
        plain = self.run_job("thread", agent=False)
        self.assertIn("DeprecationWarning", plain)
        self.assertIn("is multi-threaded", plain)
        fed = self.run_job("thread", agent=True)
        strip = lambda s: [line.split("(pid=")[0] for line in s.splitlines()]
        self.assertEqual(strip(fed), strip(plain))

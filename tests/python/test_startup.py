"""What the agent costs a Python process at start-up: the modules it imports, the bytecode of
strata's installed copy. (The time itself is measured by benches/agent_startup.py.)"""

import importlib.util
import json
import os
import shutil
import stat
import subprocess

from support import ASSETS, PY, STRATA_RUN, Case, agent_threads, settled_agent_threads, task_count, wait_until

# What the agent may add to a process's modules before any framework is imported: its own
# modules, and built-in or small extension modules. Never threading, collections, json,
# socket, selectors, math, ctypes or importlib.
ALLOWED = {
    "sitecustomize",
    "strata_feed",
    "strata_feed._core",
    "strata_feed._feeddir",
    "strata_feed._server",
    "strata_feed._sweep",
    "strata_feed._threads",
    "strata_feed._wire",
    "_socket",
    "select",
    "errno",
    "atexit",
    "itertools",
    "_collections",
}
SHOW = (
    "import json, os, sys, time\n"
    "time.sleep(1.3)\n"  # past the first sweep of stale sockets
    "f = sys.modules.get('strata_feed')\n"
    "print(json.dumps({'modules': sorted(sys.modules), 'running': bool(f and f.info()['running'])}))\n"
)


class ImportsTest(Case):
    def modules(self, env, args=(), before=""):
        r = subprocess.run([PY] + list(args) + ["-c", before + SHOW], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.stderr, "")
        return json.loads(r.stdout)

    def plain_env(self):
        env = self.env()
        env.pop("PYTHONPATH")
        return env

    def test_under_strata_run_only_small_modules_are_imported(self):
        plain = self.modules(self.plain_env())
        self.assertFalse(plain["running"])
        env = self.plain_env()
        env["PYTHONPATH"] = STRATA_RUN
        fed = self.modules(env)
        self.assertTrue(fed["running"])
        self.assertEqual(sorted(set(fed["modules"]) - set(plain["modules"]) - ALLOWED), [])

    def test_start_alone_imports_only_small_modules(self):
        code = "import sys; sys.path.insert(0, %r); import strata_feed; strata_feed.start(0.05)\n" % ASSETS
        plain = self.modules(self.env(), ["-S"])
        fed = self.modules(self.env(), ["-S"], code)
        self.assertTrue(fed["running"])
        self.assertEqual(sorted(set(fed["modules"]) - set(plain["modules"]) - ALLOWED), [])

    def test_the_threads_are_named_and_not_in_threading(self):
        j = self.job()
        self.assertEqual(settled_agent_threads(j.pid), ["strata-feed"])
        self.assertEqual(task_count(j.pid), 2)
        self.assertEqual(j.eval("[t.name for t in __import__('threading').enumerate()]"), ["MainThread"])
        j.do("import torch")
        wait_until(lambda: agent_threads(j.pid) == ["strata-feed", "strata-feed-sam"], what="the sampler")


class BytecodeTest(Case):
    """strata run's installed copy is compiled once per Python version, in strata's own
    private directory, also under PYTHONDONTWRITEBYTECODE; the job's own files never are."""

    def install(self, mode=0o700):
        base = os.path.join(self.tmp, "agent-0123456789abcdef")
        shutil.copytree(ASSETS, base, ignore=shutil.ignore_patterns("__pycache__"))
        os.chmod(base, mode)
        return base

    def sources(self, base):
        out = []
        for sub in ("strata_feed", "strata_run"):
            d = os.path.join(base, sub)
            out.extend(os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith(".py"))
        return out

    def run_job(self, base):
        job = os.path.join(self.tmp, "job")
        os.makedirs(job, exist_ok=True)
        with open(os.path.join(job, "jobmod.py"), "w") as f:
            f.write("X = 1\n")
        env = self.env()
        env["PYTHONPATH"] = os.pathsep.join([os.path.join(base, "strata_run"), job])
        code = "import jobmod, json, sys; print(json.dumps(['py_compile' in sys.modules, sys.modules['strata_feed'].info()['running']]))"
        r = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.stderr, "")
        self.assertFalse(os.path.exists(os.path.join(job, "__pycache__")), "the job's own bytecode was written")
        return json.loads(r.stdout)

    def test_compiled_once_under_pythondontwritebytecode(self):
        base = self.install()
        compiled, running = self.run_job(base)
        self.assertTrue(running)
        self.assertTrue(compiled)
        caches = [importlib.util.cache_from_source(p) for p in self.sources(base)]
        self.assertEqual([c for c in caches if not os.path.isfile(c)], [])
        before = [os.stat(c).st_mtime_ns for c in caches]
        compiled, running = self.run_job(base)
        self.assertEqual((compiled, running), (False, True))
        self.assertEqual([os.stat(c).st_mtime_ns for c in caches], before)

    def test_a_directory_not_private_is_left_alone(self):
        base = self.install(0o755)
        self.assertEqual(stat.S_IMODE(os.stat(base).st_mode), 0o755)
        compiled, running = self.run_job(base)
        self.assertEqual((compiled, running), (False, True))
        self.assertFalse(os.path.exists(os.path.join(base, "strata_feed", "__pycache__")))

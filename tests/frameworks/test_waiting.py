"""While no framework is ready the agent backs off: after 20 s of waiting its threads wake
at most about once a second (the old agent looked 10 to 20 times a second, forever).

Counted as the threads' context switches (each wake-up of a sleeping thread is one), not
timed: the cost of a look is measured by benches/agent_waiting.py."""

import time

from fwsupport import Case, agent_threads, needs, wakeups

JOB = """
    import sys, time
    {imports}
    time.sleep(0.5)
    print("ready", *sorted(m for m in ("torch", "jax", "cupy") if m in sys.modules), flush=True)
    sys.stdin.readline()
    print("counting", flush=True)
    sys.stdin.readline()
"""
SETTLE = 20.0  # seconds of waiting before counting
WINDOW = 4.0


class WaitingCostTest(Case):
    def count(self, jobs):
        """{what: wake-ups} of each job's agent threads; jobs: (imports, what, the frameworks
        the job then holds, as it says when ready)."""
        procs = [(self.start(JOB.format(imports=imports)), what) for imports, what, _ in jobs]
        for (p, what), (_, _, imported) in zip(procs, jobs):
            self.assertEqual(self.line(p), " ".join(["ready"] + imported), what)
        time.sleep(SETTLE)
        before = {}
        for p, what in procs:
            self.send(p)
            self.assertEqual(self.line(p), "counting")
            threads = sorted(agent_threads(p.pid))  # named by the agent in /proc
            self.assertTrue(threads, "no agent thread in %s" % what)
            before[p.pid] = dict((tid, wakeups(p.pid, tid)) for tid in threads)
        time.sleep(WINDOW)
        out = {}
        for p, what in procs:
            n = 0
            for tid, b in before[p.pid].items():
                a = wakeups(p.pid, tid)
                if a is not None and b is not None:
                    n += a - b
            out[what] = n
            self.send(p)
            rc, _, err = self.finish(p)
            self.assertEqual((rc, err), (0, ""), what)
        return out

    @needs("torch", "jax", "cupy")
    def test_backs_off_per_framework(self):
        got = self.count([
            ("", "nothing", []),
            ("import torch", "torch", ["torch"]),
            ("import jax, jax.numpy as jnp\n    jnp.zeros(3).block_until_ready()", "jax on the CPU", ["jax"]),
            ("import cupy", "cupy without libcuda", ["cupy"]),
        ])
        for what, n in got.items():
            self.assertLessEqual(n, 3 * WINDOW, "%s: %d wake-ups in %.0f s" % (what, n, WINDOW))

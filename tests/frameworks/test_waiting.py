"""While no framework is ready the agent backs off: after 20 s of waiting its threads wake
at most about once a second (the old agent looked 10 to 20 times a second, forever).

Counted as the threads' context switches (each wake-up of a sleeping thread is one, as is
each preemption), not timed: the cost of a look is measured by benches/agent_waiting.py.
What is bounded is the rate over each job's window as measured, with a factor of 3, not a
count over the window the test meant: on a loaded machine the test is late to read a job
(with 12 busy loops on 2 cores, jobs read after another one's exit had windows of 16 and
21 s for a sleep of 4, and 11 wake-ups in the 21 s against a bound of 12), so every job is
also read before any ends. Preemptions stayed at 0 or 1 under that load (the agent's
threads run for microseconds at a time), so load does not raise the count; a thread that
spun would raise it wherever it competes for a core."""

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
WINDOW = 4.0  # seconds asked for; each job's window is measured
RATE = 3.0  # wake-ups a second at most: 3 times the once a second the back-off reaches


def reading(pid, tids):
    """(when, {tid: context switches so far}) of the agent's threads in pid."""
    return time.monotonic(), dict((tid, wakeups(pid, tid)) for tid in tids)


class WaitingCostTest(Case):
    def count(self, jobs):
        """{what: (wake-ups, seconds measured)} of each job's agent threads; jobs: (imports,
        what, the frameworks the job then holds, as it says when ready)."""
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
            before[p.pid] = reading(p.pid, threads)
        time.sleep(WINDOW)
        out = {}
        for p, what in procs:  # every job read before any ends
            t0, b = before[p.pid]
            t1, a = reading(p.pid, b)
            n = sum(a[tid] - b[tid] for tid in b if a[tid] is not None and b[tid] is not None)
            out[what] = (n, t1 - t0)
        for p, what in procs:
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
        for what, (n, seconds) in got.items():
            self.assertLessEqual(n, RATE * seconds, "%s: %d wake-ups in %.1f s" % (what, n, seconds))

"""Sockets of processes that ended without atexit are removed by the next agent in that
directory; a live agent's socket and another user's are never removed."""

import os
import socket
import time

from fwsupport import Case, needs, wait_until

FORK_CHILDREN = """
    import multiprocessing as mp, os, sys
    import strata_feed

    def child():
        strata_feed.start()       # a child that starts its own feed...
        print(os.getpid(), flush=True)
        os._exit(0)               # ...and ends as multiprocessing's fork children do

    if __name__ == "__main__":
        ctx = mp.get_context("fork")
        for _ in range(2):
            p = ctx.Process(target=child)
            p.start(); p.join()
        print("parent", os.getpid(), flush=True)
        sys.stdin.readline()
"""
SPAWN_POOL = """
    import multiprocessing as mp, os, sys, time

    def work(_):
        time.sleep(0.5)
        return os.getpid()

    if __name__ == "__main__":
        with mp.get_context("spawn").Pool(2) as pool:   # __exit__ ends the workers with SIGTERM
            pids = sorted(set(pool.map(work, range(4))))
        print(" ".join(map(str, pids)), flush=True)
"""


class StaleSocketTest(Case):
    def later_agent(self):
        p = self.start("import sys\nprint('ready', flush=True)\nsys.stdin.readline()\n")
        self.assertEqual(self.line(p), "ready")
        return p

    def test_fork_children_that_end_with_os_exit(self):
        p = self.start(FORK_CHILDREN)
        children = [int(self.line(p)) for _ in range(2)]
        parent = int(self.line(p).split()[1])
        # A child that lives less than a second never sweeps (the first sweep waits a
        # second, so short processes pay nothing for it): both sockets are left behind.
        for c in children:
            self.assertTrue(os.path.exists(self.sock(c)), "the child's socket is left behind")
        # Another user's socket of a dead pid, and a plain file: never removed.
        foreign = self.sock(999999)
        s = socket.socket(socket.AF_UNIX)
        s.bind(foreign)
        s.close()
        if os.geteuid() == 0:
            os.chown(foreign, 12345, 12345)
        later = self.later_agent()
        wait_until(lambda: not any(os.path.exists(self.sock(c)) for c in children), timeout=10,
                   what="the dead children's sockets removed")
        self.assertTrue(os.path.exists(self.sock(parent)), "a live agent's socket was removed")
        self.assertTrue(os.path.exists(self.sock(later.pid)))
        if os.geteuid() == 0:
            time.sleep(0.3)
            self.assertTrue(os.path.exists(foreign), "another user's socket was removed")
        self.monitor(parent)  # the parent's feed still serves
        for q in (p, later):
            self.send(q)
            self.assertEqual(self.finish(q)[0], 0)

    def test_spawn_pool_workers_ended_by_sigterm(self):
        p = self.start(SPAWN_POOL)
        workers = [int(x) for x in self.line(p).split()]
        rc, _, err = self.finish(p)
        self.assertEqual((rc, err), (0, ""))
        left = [w for w in workers if os.path.exists(self.sock(w))]
        later = self.later_agent()
        wait_until(lambda: not any(os.path.exists(self.sock(w)) for w in workers), timeout=10,
                   what="the pool workers' sockets removed")
        self.send(later)
        self.finish(later)
        # Whether SIGTERM left them depends on timing; at least the sweep ran on them all.
        self.assertLessEqual(len(left), len(workers))

"""`strata run` around torch.distributed.run with two gloo workers: each worker is fed, the
launcher says it uses no framework, and the job's exit status and output are unchanged."""

import os
import queue
import signal
import socket
import subprocess
import threading
import time

from fwsupport import PY, Case, needs, wait_until

TRAIN = """
    import os, sys, time
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(4) * (rank + 1)
    dist.all_reduce(t)
    # One write(2) of the whole line: print's text and its newline are two writes when
    # stdout is unbuffered, and the two workers' lines then interleave on the shared pipe.
    os.write(1, b"rank %d pid %d sum %d\\n" % (rank, os.getpid(), int(t.sum())))
    go = os.environ["GO_FILE"]
    while not os.path.exists(go):        # until the test has looked at every feed
        time.sleep(0.05)
    dist.destroy_process_group()
    sys.exit(3 if rank == 0 else 0)
"""


def free_port():
    """A TCP port no one listens on now: each run its own rendezvous, even beside another
    run of these tests on the same machine."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lines_of(stream):
    """The stream's lines on a queue, read by a thread of their own (None at its end), so
    that the test waits for one with a timeout rather than blocks on a worker that hangs."""
    q = queue.Queue()

    def pump():
        for line in stream:
            q.put(line)
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return q


@needs("torch")
class TorchrunTest(Case):
    def run_torchrun(self, strata):
        port = free_port()
        train = self.script(TRAIN, "train.py")
        go = os.path.join(self.tmp, "go-%d" % port)
        cmd = [PY, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
               "--max_restarts", "0", train]
        if strata:
            cmd = [os.environ["STRATA_BIN"], "run", "--feed-dir", self.feed, "--"] + cmd
        env = self.env(agent=False, GO_FILE=go, OMP_NUM_THREADS="1")
        # Its own process group: a test that gives up kills the workers with the launcher.
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                             start_new_session=True)
        self.procs.append(p)
        self.addCleanup(lambda: p.poll() is None and os.killpg(p.pid, signal.SIGKILL))
        stdout, stderr = lines_of(p.stdout), lines_of(p.stderr)

        def rest(q):  # what is left of a stream once the job has ended (10 s at most a line)
            got = []
            try:
                while (line := q.get(timeout=10)) is not None:
                    got.append(line)
            except queue.Empty:
                got.append("[strata test: the stream stayed open]\n")
            return "".join(got)

        lines, other = [], []
        deadline = time.monotonic() + 120
        while len(lines) < 2:
            try:
                line = stdout.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                self.fail("no worker said its rank within 120 s (stdout: %r): %s"
                          % (lines + other, rest(stderr)[-6000:]))
            if line is None:
                p.wait()
                self.fail("torchrun ended early: %s" % rest(stderr))
            (lines if line.startswith("rank ") else other).append(line.strip())
        pids = [int(x.split()[3]) for x in lines]
        hellos = {}
        if strata:
            for pid in pids + [p.pid]:
                wait_until(lambda: os.path.exists(self.sock(pid)), timeout=20, what="feed of %d" % pid)
                # A worker has imported torch; the launcher may be seen mid-import first
                # (torch before its own modules), and is told apart at a later look.
                hellos[pid] = self.hello(self.monitor(pid), (lambda h: h.get("state") == "no_framework") if pid == p.pid
                                         else (lambda h: h.get("note") != "no framework imported yet"))
        open(go, "w").close()
        p.wait(timeout=120)
        out, err = rest(stdout), rest(stderr)
        ranks = sorted(" ".join(x.split()[:2] + x.split()[4:]) for x in lines)  # without the pid
        return p.returncode, ranks, other + out.splitlines(), err, pids, hellos

    def test_each_worker_is_fed_and_the_job_unchanged(self):
        if "STRATA_BIN" not in os.environ:
            self.skipTest("STRATA_BIN not set (tests/frameworks/run sets it)")
        plain = self.run_torchrun(False)
        fed = self.run_torchrun(True)
        self.assertNotEqual(plain[0], 0)
        self.assertEqual(fed[0], plain[0], "exit status changed")
        self.assertEqual(fed[1], plain[1], "worker output changed")
        self.assertEqual(fed[2], plain[2], "remaining stdout changed")
        pids, hellos = fed[4], fed[5]
        for pid in pids:
            self.assertEqual(hellos[pid]["pid"], pid)
            self.assertEqual(hellos[pid]["state"], "waiting")  # torch imported, CUDA never used
        launcher = [h for pid, h in hellos.items() if pid not in pids][0]
        self.assertEqual(launcher["state"], "no_framework", launcher)
        self.assertIn("torch launcher", launcher["note"])
        wait_until(lambda: not os.listdir(self.feed), timeout=10, what="every socket removed")

"""`strata run` around torch.distributed.run with two gloo workers: each worker is fed, the
launcher says it uses no framework, and the job's exit status and output are unchanged."""

import os
import subprocess
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
    print("rank %d pid %d sum %d" % (rank, os.getpid(), int(t.sum())), flush=True)
    go = os.environ["GO_FILE"]
    while not os.path.exists(go):        # until the test has looked at every feed
        time.sleep(0.05)
    dist.destroy_process_group()
    sys.exit(3 if rank == 0 else 0)
"""


@needs("torch")
class TorchrunTest(Case):
    def run_torchrun(self, strata, port):
        train = self.script(TRAIN, "train.py")
        go = os.path.join(self.tmp, "go-%d" % port)
        cmd = [PY, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
               "--max_restarts", "0", train]
        if strata:
            cmd = [os.environ["STRATA_BIN"], "run", "--feed-dir", self.feed, "--"] + cmd
        env = self.env(agent=False, GO_FILE=go, OMP_NUM_THREADS="1")
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        self.procs.append(p)
        lines, other = [], []
        while len(lines) < 2:
            line = p.stdout.readline()
            if not line:
                self.fail("torchrun ended early: %s" % p.stderr.read())
            (lines if line.startswith("rank ") else other).append(line.strip())
        pids = [int(x.split()[3]) for x in lines]
        hellos = {}
        if strata:
            for pid in pids + [p.pid]:
                wait_until(lambda: os.path.exists(self.sock(pid)), timeout=20, what="feed of %d" % pid)
                hellos[pid] = self.hello(self.monitor(pid), lambda h: h.get("note") != "no framework imported yet")
        open(go, "w").close()
        out, err = p.communicate(timeout=120)
        ranks = sorted(" ".join(x.split()[:2] + x.split()[4:]) for x in lines)  # without the pid
        return p.returncode, ranks, other + out.splitlines(), err, pids, hellos

    def test_each_worker_is_fed_and_the_job_unchanged(self):
        if "STRATA_BIN" not in os.environ:
            self.skipTest("STRATA_BIN not set (tests/frameworks/run sets it)")
        plain = self.run_torchrun(False, 29631)
        fed = self.run_torchrun(True, 29632)
        self.assertNotEqual(plain[0], 0)
        self.assertEqual(fed[0], plain[0], "exit status changed")
        self.assertEqual(fed[1], plain[1], "worker output changed")
        self.assertEqual(fed[2], plain[2], "remaining stdout changed")
        pids, hellos = fed[4], fed[5]
        for pid in pids:
            self.assertEqual(hellos[pid]["pid"], pid)
            self.assertEqual(hellos[pid]["state"], "waiting")  # torch imported, CUDA never used
        launcher = [h for pid, h in hellos.items() if pid not in pids][0]
        self.assertEqual(launcher["state"], "no_framework")
        self.assertIn("torch launcher", launcher["note"])
        wait_until(lambda: not os.listdir(self.feed), timeout=10, what="every socket removed")

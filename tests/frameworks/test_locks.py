"""A monitor gets its hello while the job holds its framework's init lock (the real lock)."""

from fwsupport import Case, needs, now

HOLD = """
    import sys, time
    {imports}
    lock = {lock}
    lock.acquire()              # the job's init holds this lock for as long as it runs
    print("holding", flush=True)
    sys.stdin.readline()        # until the test says so
    lock.release()
    print("released", flush=True)
"""


class InitLockTest(Case):
    def held(self, imports, lock, note):
        p = self.start(HOLD.format(imports=imports, lock=lock))
        self.assertEqual(self.line(p, "holding"), "holding")
        # Let the agent see the framework (it looks every 50 ms at first), then connect.
        m = self.monitor(p.pid)
        t0 = now()
        h = self.hello(m, timeout=3.0)
        latency = now() - t0
        # Later hellos follow as the sampler looks: the one for the held lock says so.
        self.hello(m, lambda x: x.get("note") == note, timeout=3.0)
        self.assertIsNone(p.poll(), "the job ended early")
        self.send(p)
        self.assertEqual(self.line(p, "released"), "released")
        rc, out, err = self.finish(p)
        self.assertEqual((rc, err), (0, ""))
        return h, latency

    @needs("torch")
    def test_torch_initialization_lock(self):
        h, latency = self.held("import torch", "torch.cuda._initialization_lock", "torch is initialising CUDA")
        self.assertEqual(h["pid"], self.procs[0].pid)

    @needs("jax")
    def test_jax_backend_lock(self):
        self.held("import jax\n    from jax._src import xla_bridge", "xla_bridge._backend_lock",
                  "jax is initialising its backends")

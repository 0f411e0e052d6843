"""The agent's own reading of its CUDA context, through the fake NVML library.

Right after the job's CUDA init and before its allocator holds anything, the agent reads its
own process's NVML usage once per device and sends it in every hello (PROTOCOL.md, "Context
at CUDA init"). The scenario written here is what NVML answers the job's process.
"""

import json
import os
import subprocess
import time

from support import Case, device_specs, fake_nvml_dir, live_sample, nvml_scenario

MIB = 1 << 20
CONTEXT = 530 * MIB


def hello_with(pred):
    return lambda m: m["type"] == "hello" and pred(m)


def contexts(hello):
    return dict((d["index"], d.get("context")) for d in hello["devices"])


class ContextTest(Case):
    def nvml_env(self, specs, libcuda=False, **extra):
        env = self.env(devices=specs, libcuda=libcuda, **extra)
        dirs = [fake_nvml_dir()] + ([env["LD_LIBRARY_PATH"]] if env.get("LD_LIBRARY_PATH") else [])
        env["LD_LIBRARY_PATH"] = os.pathsep.join(dirs)
        env["STRATA_FAKE_NVML_SCENARIO"] = os.path.join(self.tmp, "nvml.json")
        return env

    def scenario(self, specs, processes):
        path = os.path.join(self.tmp, "nvml.json")
        with open(path + ".tmp", "w") as f:
            json.dump(nvml_scenario(specs, processes), f)
        os.replace(path + ".tmp", path)

    def settle(self, m, seconds=0.4):
        """Lets the agent (sampling every 50 ms) take a few samples of the state now."""
        time.sleep(seconds)
        return [x for x in m.snapshot() if x["type"] == "hello"][-1]

    def test_read_once_after_cuda_init_before_the_first_allocation(self):
        specs = device_specs(2)
        j = self.job(self.nvml_env(specs))
        self.scenario(specs, [[{"pid": j.pid, "used": CONTEXT}], [{"pid": j.pid, "used": CONTEXT + MIB}]])
        m = self.monitor(j.pid)
        j.do("import torch; torch.cuda.init(); torch._stub.touch(0)")
        t0 = time.time()
        h = m.wait(hello_with(lambda h: (contexts(h).get(0) or {}).get("bytes")))
        c = contexts(h)[0]
        self.assertEqual(c, {"bytes": CONTEXT, "time": c["time"], "reserved": 0, "method": "nvml_process_used"})
        self.assertLess(abs(c["time"] - t0), 5.0)
        # The job allocates; NVML now says more: the context stays what was read, once.
        j.do("live = torch._stub.allocate(0, 256 << 20)")
        self.scenario(specs, [[{"pid": j.pid, "used": [CONTEXT + 300 * MIB]}], []])
        h = self.settle(m)
        self.assertEqual(contexts(h)[0], c)
        # A device touched later, its pool empty: read then, by its own identity.
        j.do("torch._stub.touch(1)")
        self.scenario(specs, [[], [{"pid": j.pid, "used": CONTEXT + MIB}]])
        h = m.wait(hello_with(lambda h: (contexts(h).get(1) or {}).get("bytes")))
        self.assertEqual(contexts(h)[1]["bytes"], CONTEXT + MIB)
        self.assertEqual(contexts(h)[0], c)
        # A monitor that connects at any later time gets it in its first hello.
        late = self.monitor(j.pid)
        first = late.wait(lambda x: True)
        self.assertEqual(first["type"], "hello")
        self.assertEqual(contexts(first), {0: c, 1: contexts(h)[1]})
        self.assertNoViolation()
        self.assertEqual(j.finish(), 0)
        self.assertEqual(j.stderr(), "")

    def test_a_pool_that_held_memory_before_the_agent_looked_gives_none(self):
        specs = device_specs(1)
        j = self.job(self.nvml_env(specs, STRATA_TEST_START="no"))
        self.scenario(specs, [[{"pid": j.pid, "used": CONTEXT + 2 * MIB}]])
        # Allocated and freed again before the agent starts: reserved is 0 once more, but
        # the allocator has held memory (its device allocation counter says so).
        j.do("import torch; torch.cuda.init(); h = torch._stub.allocate(0, 1 << 20)")
        j.do("torch._stub.free(h); torch._stub.empty_cache()")
        j.do("import strata_feed; strata_feed.start(interval=0.05)")
        m = self.monitor(j.pid)
        m.wait(lambda x: live_sample(x) and x["devices"][0]["reserved"] == 0)
        h = self.settle(m)
        self.assertEqual(h["framework"], "torch")
        self.assertEqual(contexts(h), {0: None})

    def test_its_own_pid_listed_twice_or_without_a_figure_gives_none(self):
        for processes in (
            [{"pid": 0, "used": 0}],  # placeholder, replaced by the job's pid twice below
            [{"pid": 0, "used": None}],
        ):
            specs = device_specs(1)
            j = self.job(self.nvml_env(specs))
            procs = [dict(p, pid=j.pid) for p in processes]
            if processes[0]["used"] == 0:
                procs = [{"pid": j.pid, "used": CONTEXT}, {"pid": j.pid, "used": 2 * MIB}]
            self.scenario(specs, [procs])
            m = self.monitor(j.pid)
            j.do("import torch; torch.cuda.init(); torch._stub.touch(0)")
            m.wait(live_sample)
            h = self.settle(m)
            self.assertEqual(contexts(h), {0: None}, procs)
            self.assertEqual(j.finish(), 0)
            self.assertEqual(j.stderr(), "")

    def test_nvml_failing_gives_none_and_nothing_on_stderr(self):
        specs = device_specs(1)
        j = self.job(self.nvml_env(specs))
        sc = nvml_scenario(specs, [[{"pid": j.pid, "used": CONTEXT}]])
        sc["devices"][0]["faults"] = [{"call": "nvmlDeviceGetComputeRunningProcesses_v3", "error": "NoPermission"}]
        with open(os.path.join(self.tmp, "nvml.json"), "w") as f:
            json.dump(sc, f)
        m = self.monitor(j.pid)
        j.do("import torch; torch.cuda.init(); torch._stub.touch(0)")
        m.wait(live_sample)
        self.assertEqual(contexts(self.settle(m)), {0: None})
        self.assertEqual(j.finish(), 0)
        self.assertEqual(j.stderr(), "")

    def test_a_pool_that_moves_while_nvml_is_read_gives_none(self):
        specs = device_specs(1)
        j = self.job(self.nvml_env(specs))
        sc = nvml_scenario(specs, [[{"pid": j.pid, "used": CONTEXT}]])
        # The process list takes 0.8 s to answer; the job allocates meanwhile.
        sc["devices"][0]["faults"] = [{"call": "nvmlDeviceGetComputeRunningProcesses_v3", "delay_ms": 800}]
        with open(os.path.join(self.tmp, "nvml.json"), "w") as f:
            json.dump(sc, f)
        m = self.monitor(j.pid)
        j.do("import torch, time; torch.cuda.init(); torch._stub.touch(0)")
        j.do("time.sleep(0.3); live = torch._stub.allocate(0, 1 << 20)")
        # Under load the agent may list the device late: wait for it, then past the reading.
        m.wait(hello_with(lambda h: 0 in contexts(h)))
        time.sleep(1.0)
        self.assertEqual(contexts(self.settle(m)), {0: None}, "the pool moved during the reading")
        self.assertEqual(j.finish(), 0)

    def test_without_nvml_nothing_is_sent_and_nothing_said(self):
        # No fake on the library path: no libnvidia-ml here (or a real one that does not list
        # this stub job): nothing read.
        specs = device_specs(1)
        j = self.job(self.env(devices=specs))
        m = self.monitor(j.pid)
        j.do("import torch; torch.cuda.init(); torch._stub.touch(0)")
        m.wait(live_sample)
        h = self.settle(m)
        self.assertEqual(contexts(h), {0: None})
        self.assertEqual(j.finish(), 0)
        self.assertEqual(j.stderr(), "")

    def test_in_its_own_pid_namespace_nothing_is_sent(self):
        if os.geteuid() != 0:
            self.skipTest("unshare --pid needs root (CI runs as root)")
        specs = device_specs(1)
        j = self.job(self.nvml_env(specs), prefix=("unshare", "--pid", "--fork", "--kill-child"))
        self.assertEqual(j.pid, 1, "pid 1 of its own namespace")
        with open("/proc/%d/task/%d/children" % (j.p.pid, j.p.pid)) as f:
            child = f.read().split()
        self.assertEqual(len(child), 1, child)
        host_pid = int(child[0])
        # NVML speaks host pids: the job's, and the host's pid 1, which is the job's own
        # pid as it sees it. Nothing tells them apart from inside: nothing is read.
        self.scenario(specs, [[{"pid": 1, "used": 300 * MIB}, {"pid": host_pid, "used": CONTEXT}]])
        m = self.monitor(1)
        j.do("import torch; torch.cuda.init(); torch._stub.touch(0)")
        m.wait(live_sample)
        h = self.settle(m)
        self.assertEqual(h["pid"], 1)
        self.assertEqual(contexts(h), {0: None})
        self.assertEqual(j.finish(), 0)
        self.assertEqual(j.stderr(), "")

    def test_jax_and_cupy_read_theirs_while_their_pools_are_empty(self):
        specs = device_specs(1)
        for framework, init, env in (
            ("jax", "jax._stub.init()", {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),
            ("cupy", "cupy.cuda.Device(0).use()", {}),
        ):
            j = self.job(self.nvml_env(specs, libcuda=True, **env))
            self.scenario(specs, [[{"pid": j.pid, "used": CONTEXT}]])
            m = self.monitor(j.pid)
            j.do("import %s; %s" % (framework, init))
            h = m.wait(hello_with(lambda h: h["framework"] == framework and (contexts(h).get(0) or {}).get("bytes")))
            self.assertEqual(contexts(h)[0]["bytes"], CONTEXT, framework)
            self.assertEqual(j.finish(), 0)
            self.assertEqual(j.stderr(), "")
        # JAX under cuda_async reports no pool: nothing says it is empty, nothing is read.
        j = self.job(self.nvml_env(specs, libcuda=True, XLA_PYTHON_CLIENT_ALLOCATOR="cuda_async", STRATA_STUB_JAX_STATS="async"))
        self.scenario(specs, [[{"pid": j.pid, "used": CONTEXT}]])
        m = self.monitor(j.pid)
        j.do("import jax; jax._stub.init()")
        m.wait(live_sample)
        self.assertEqual(contexts(self.settle(m)), {0: None})

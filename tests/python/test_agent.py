"""The agent's own behaviour: its hello, errors, busy, start-up, which copy runs, versions."""

import json
import os
import shutil
import socket
import time

from support import ASSETS, STRATA_RUN, STUBS, Case, device_specs, is_sample, live_sample


def hello_with(pred):
    return lambda m: m["type"] == "hello" and pred(m)


class HelloTest(Case):
    def test_hello_names_versions_state_and_copy(self):
        j = self.job()
        h = self.monitor(j.pid).wait(hello_with(lambda h: True))
        import strata_feed_version  # noqa: F401  (tests/python/strata_feed_version.py)

        self.assertEqual(h["agent_version"], strata_feed_version.VERSION)
        self.assertEqual(h["protocol"], 1)
        self.assertEqual(h["v"], 1)
        self.assertEqual(h["state"], "no_framework")
        self.assertIsNone(h["error"])
        self.assertEqual(h["agent_copy"], "imported")
        self.assertEqual(os.path.realpath(h["agent_path"]), os.path.realpath(ASSETS))

    def test_a_hello_past_the_line_limit_is_cut_to_fit(self):
        # A path of 70 KB in the hello: the monitor reads a hello within 64 KiB, with the
        # long text cut and the note saying so (before, a hello too long for the monitor's
        # line limit was never read, and the process looked unfed).
        j = self.job()
        m = self.monitor(j.pid)
        m.wait(hello_with(lambda h: True))
        j.do(
            "import strata_feed; a = strata_feed._agent; a._static['executable'] = '/x' * 35000; "
            "a.set_hello(a.idle_hello('after a long path'))"
        )
        h = m.wait(hello_with(lambda h: h["note"] != "after a long path" and "cut" in (h["note"] or "")))
        self.assertEqual(h["note"], "hello too long: devices and long texts cut")
        self.assertTrue(h["executable"].endswith("..."), h["executable"][:40])
        self.assertLessEqual(len(json.dumps(h)), 65536)

    def test_an_agent_error_is_an_error_with_its_text(self):
        j = self.job()
        j.do("import torch; torch.cuda.init(); a = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        m.wait(is_sample)
        j.do("del torch._C")  # a torch without the private API
        h = m.wait(hello_with(lambda h: h["state"] == "error"))
        self.assertEqual(h["error"], "agent error: AttributeError: module 'torch' has no attribute '_C'")

    def test_busy_is_said_before_closing(self):
        j = self.job()
        path = self.sock_path(j.pid)
        self.monitor(j.pid).wait(hello_with(lambda h: True))
        held = []
        try:
            for _ in range(255):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(path)
                held.append(s)
            time.sleep(0.3)
            extra = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            extra.settimeout(5)
            extra.connect(path)
            data = b""
            while True:
                chunk = extra.recv(4096)
                if not chunk:
                    break
                data += chunk
            extra.close()
            msg = json.loads(data.decode())
            self.assertEqual((msg["v"], msg["type"], msg["reason"]), (1, "busy", "busy: 256 monitors connected"))
        finally:
            for s in held:
                s.close()


class DevicesTest(Case):
    def test_mig_instance_uuid_is_prefixed_mig(self):
        specs = device_specs(1)
        j = self.job(self.env(devices=specs, libcuda=True, STRATA_FAKE_CUDA_MIG=1))
        j.do("import jax; jax._stub.init(); a = jax._stub.allocate(0, 1 << 20)")
        h = self.monitor(j.pid).wait(hello_with(lambda h: h["devices"]))
        u = h["devices"][0]["uuid"]
        self.assertTrue(u.startswith("MIG-"), u)
        self.assertNotEqual(u[4:], specs[0]["uuid"])
        self.assertEqual(u[4:-2], specs[0]["uuid"][:-2])

    def test_jax_settings_name_the_current_fraction_variable(self):
        j = self.job(self.env(libcuda=True, XLA_CLIENT_MEM_FRACTION="0.5"))
        j.do("import jax; jax._stub.init(); a = jax._stub.allocate(0, 1 << 20)")
        h = self.monitor(j.pid).wait(hello_with(lambda h: h["devices"]))
        self.assertEqual(h["settings"]["XLA_CLIENT_MEM_FRACTION"], "0.5")

    def test_jax_cuda_async_reserved_unknown_allocated_kept(self):
        j = self.job(self.env(libcuda=True, XLA_PYTHON_CLIENT_ALLOCATOR="cuda_async", STRATA_STUB_JAX_STATS="async"))
        j.do("import jax; jax._stub.init(); a = jax._stub.allocate(0, 3 << 20)")
        m = self.monitor(j.pid)
        d = m.wait(lambda x: is_sample(x) and x["devices"][0]["allocated"] == 3 << 20)["devices"][0]
        reason = "not reported by XLA's cuda_async allocator"
        for f in ("reserved", "peak_reserved", "largest_free_block"):
            self.assertIsNone(d[f], f)
            self.assertEqual(d["unreported"][f], reason)
        self.assertIn("cuda_async", m.wait(hello_with(lambda h: h["devices"]))["note"])

    def test_old_jax_says_why_it_is_not_read(self):
        j = self.job(self.env(libcuda=True))
        j.do("import jax; del jax._src.xla_bridge.backends_are_initialized; jax.__version__ = '0.4.20'")
        h = self.monitor(j.pid).wait(hello_with(lambda h: "0.4.21" in (h["note"] or "")))
        self.assertEqual(h["state"], "no_framework")
        self.assertIn("jax 0.4.20 is older than 0.4.21", h["note"])

    def test_a_torch_launcher_says_no_framework(self):
        j = self.job()
        j.do("import torch, sys, types; sys.modules['torch.distributed.run'] = types.ModuleType('torch.distributed.run')")
        h = self.monitor(j.pid).wait(hello_with(lambda h: h["state"] == "no_framework" and "launcher" in (h["note"] or "")))
        self.assertIn("torch.distributed.run", h["note"])

    def test_a_launcher_run_as_main_says_no_framework(self):
        # `python -m torch.distributed.run`: the module is __main__, named only by its spec.
        j = self.job()
        j.do("import torch, sys, importlib.machinery; "
             "sys.modules['__main__'].__spec__ = importlib.machinery.ModuleSpec('torch.distributed.run', None)")
        h = self.monitor(j.pid).wait(hello_with(lambda h: h["state"] == "no_framework" and "launcher" in (h["note"] or "")))
        self.assertIn("torch launcher (torch.distributed.run)", h["note"])


class TorchVersionTest(Case):
    def test_no_oom_observer_before_torch_2_1(self):
        j = self.job(self.env(STRATA_STUB_TORCH_VERSION="2.0.1"))
        j.do("import torch; a = torch._stub.allocate(0, 1 << 20)")
        h = self.monitor(j.pid).wait(hello_with(lambda h: h["devices"] and h["note"]))
        self.assertIn("OOM observer not attached: torch 2.0.1 calls it with the allocator locked", h["note"])
        time.sleep(0.2)
        self.assertNotIn("strata-feed attach_out_of_memory_observer", self.trace_lines())
        # And no snapshot: torch 2.0 cannot tell whether the job records its history.
        self.assertNotIn("strata-feed memory_snapshot", self.trace_lines())

    def test_settings_before_init_in_a_torch_that_ignores_the_generic_variable(self):
        # torch before 2.9 reads no PYTORCH_ALLOC_CONF: the waiting hello still says which
        # settings apply (the defaults), not nothing.
        j = self.job(self.env(STRATA_STUB_TORCH_VERSION="2.0.1", PYTORCH_ALLOC_CONF="expandable_segments:True"))
        j.do("import torch")
        h = self.monitor(j.pid).wait(hello_with(lambda h: h["state"] == "waiting" and h["settings"]))
        self.assertEqual(h["settings"], {"expandable_segments": False, "alloc_conf": None, "alloc_conf_source": None})

    def test_snapshot_without_traces_and_none_while_history_is_recorded(self):
        j = self.job()
        j.do("import torch; torch.cuda.init(); torch.cuda.memory._record_memory_history()")
        j.do("keep = torch._stub.fragment(0)")
        m = self.monitor(j.pid)
        s = m.wait(lambda x: is_sample(x) and "history" in x["devices"][0]["unreported"].get("largest_free_block", ""))
        h = m.wait(hello_with(lambda h: "history" in (h["note"] or "")))
        self.assertIn("largest free block: not measured while the job records its memory history", h["note"])
        time.sleep(0.3)
        self.assertNotIn("strata-feed memory_snapshot", self.trace_lines())
        self.assertNotIn("snapshot", j.eval("torch._stub.trace_actions(0)"), "the agent left a mark in the job's trace")
        j.do("torch.cuda.memory._record_memory_history(None)")
        # The history check runs every 10 s: then one snapshot, without traces.

    def test_settings_follow_the_getter_after_init(self):
        j = self.job()
        j.do("import torch; a = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        m.wait(hello_with(lambda h: h["devices"]))
        j.do("torch._C._accelerator_setAllocatorSettings('expandable_segments:True')")
        h = m.wait(hello_with(lambda h: h["settings"].get("expandable_segments") is True))
        self.assertEqual(h["settings"]["alloc_conf_source"], "torch._C._accelerator_getAllocatorSettings()")
        j.do("torch._C._accelerator_setAllocatorSettings('max_split_size_mb:100')")
        h = m.wait(hello_with(lambda h: h["settings"].get("alloc_conf") == "max_split_size_mb:100"))
        self.assertIs(h["settings"]["expandable_segments"], True)


class CopyTest(Case):
    def copy_of(self, version):
        site = os.path.join(self.tmp, "site-%s" % version)
        shutil.copytree(os.path.join(ASSETS, "strata_feed"), os.path.join(site, "strata_feed"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        init = os.path.join(site, "strata_feed", "__init__.py")
        with open(init) as f:
            text = f.read()
        import strata_feed_version

        with open(init, "w") as f:
            f.write(text.replace('__version__ = "%s"' % strata_feed_version.VERSION, '__version__ = "%s"' % version))
        return site

    def hello_for(self, site):
        env = self.env(STRATA_TEST_START="no", STRATA_FEED_INTERVAL="0.05")
        env["PYTHONPATH"] = os.pathsep.join([STRATA_RUN, STUBS, site])
        j = self.job(env)
        return self.monitor(j.pid).wait(hello_with(lambda h: True)), j

    def test_the_environments_copy_of_the_same_version_is_used(self):
        import strata_feed_version

        site = self.copy_of(strata_feed_version.VERSION)
        h, j = self.hello_for(site)
        self.assertEqual(h["agent_copy"], "environment")
        self.assertEqual(os.path.realpath(h["agent_path"]), os.path.realpath(site))
        self.assertNotIn(ASSETS, j.eval("__import__('sys').path"))

    def test_another_version_is_not_used(self):
        site = self.copy_of("9.9.9")
        h, j = self.hello_for(site)
        self.assertEqual(h["agent_copy"], "embedded")
        self.assertEqual(os.path.realpath(h["agent_path"]), os.path.realpath(ASSETS))
        self.assertNotIn(ASSETS, j.eval("__import__('sys').path"))

"""What the agent assumes of each real package, and that it initialises nothing."""

import json

from fwsupport import Case, VENV, needs

CHECK = """
    import json, os, sys, time
    {imports}
    time.sleep(2.0)  # the agent looks at the framework many times meanwhile
    maps = open("/proc/self/maps").read()
    out = {{"libcuda_mapped": "libcuda.so" in maps}}
    {checks}
    print(json.dumps(out), flush=True)
"""


class NothingInitialisedTest(Case):
    def run_check(self, imports, checks):
        p = self.start(CHECK.format(imports=imports, checks=checks))
        m = self.monitor(p.pid)
        self.hello(m, lambda h: h.get("state") in ("waiting", "no_framework") and h.get("note") != "no framework imported yet")
        got = json.loads(self.line(p, "the state"))
        rc, _, err = self.finish(p)
        self.assertEqual((rc, err), (0, ""))
        return got, m

    @needs("torch")
    def test_torch(self):
        got, m = self.run_check("import torch", 'out["initialized"] = torch.cuda._initialized or torch.cuda.is_initialized()')
        self.assertEqual(got, {"libcuda_mapped": False, "initialized": False})

    @needs("jax")
    def test_jax(self):
        got, _ = self.run_check("import jax\n    from jax._src import xla_bridge as xb", 'out["backends"] = len(xb._backends)')
        self.assertEqual(got, {"libcuda_mapped": False, "backends": 0})

    @needs("cupy")
    def test_cupy(self):
        got, m = self.run_check("import cupy", "")
        self.assertEqual(got, {"libcuda_mapped": False})
        notes = [x.get("note") for x in m.snapshot() if x.get("type") == "hello"]
        self.assertIn("waiting for cupy to use a GPU (libcuda not loaded yet)", notes)


class AssumptionsTest(Case):
    """Every private name the agent uses exists in the real package, as assumed."""

    @needs("torch")
    def test_torch_names(self):
        import torch

        cuda = torch.cuda
        for name in ("is_initialized", "_lazy_call", "_initialization_lock", "memory_stats", "memory_snapshot",
                     "get_allocator_backend", "device_count", "get_device_properties"):
            self.assertTrue(hasattr(cuda, name), name)
        self.assertTrue(hasattr(cuda._initialization_lock, "acquire"))
        for name in ("_cuda_hasPrimaryContext", "_cuda_attach_out_of_memory_observer", "_cuda_isInBadFork"):
            self.assertTrue(hasattr(torch._C, name), name)
        version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
        code = cuda.memory_snapshot.__code__
        args = code.co_varnames[: code.co_argcount]
        # As the agent reads them: include_traces (2.9+ at the latest), the history check
        # (from 2.1), the settings getter (in the newest).
        self.assertEqual(hasattr(torch._C, "_cuda_isHistoryEnabled"), version >= (2, 1))
        if VENV == "new":
            self.assertIn("include_traces", args)
            self.assertTrue(hasattr(torch._C, "_accelerator_getAllocatorSettings"))
            props = torch._C._CudaDeviceProperties
            for name in ("uuid", "pci_bus_id", "pci_domain_id", "pci_device_id", "name"):
                self.assertTrue(hasattr(props, name), name)
        else:
            self.assertNotIn("include_traces", args)
            self.assertFalse(hasattr(torch._C, "_accelerator_getAllocatorSettings"))

    @needs("jax")
    def test_jax_names(self):
        from jax._src import xla_bridge as xb

        self.assertTrue(callable(xb.backends_are_initialized))
        self.assertIsInstance(xb._backends, dict)
        self.assertTrue(hasattr(xb._backend_lock, "acquire"))
        # The lock is a plain Lock: a probe that takes it must release it.
        self.assertTrue(xb._backend_lock.acquire(False))
        xb._backend_lock.release()

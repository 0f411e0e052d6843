"""JAX and CuPy, with identity and context state read through the fake libcuda."""

import time

from support import Case, device_specs, is_sample, live_sample, pci_nvml


def hello_with(pred):
    return lambda m: m["type"] == "hello" and pred(m)


def gpu_uuid(spec):
    return "GPU-" + spec["uuid"]


class JaxTest(Case):
    def jax_job(self, specs=None, **env):
        j = self.job(self.env(devices=specs, libcuda=True, **env))
        j.do("import jax")
        return j

    def cuinit_count(self):
        return self.read_file(self.cuda_log).count("cuInit")

    def test_pool_bytes_identity_and_never_initialising(self):
        specs = device_specs(2, total=16 << 30)
        j = self.jax_job(specs)
        m = self.monitor(j.pid)
        m.wait(hello_with(lambda h: h["note"] == "waiting for jax to initialise its backends"))
        time.sleep(0.2)
        self.assertEqual(self.cuinit_count(), 0, "the agent ran cuInit")
        j.do("jax._stub.init(); a = jax._stub.allocate(1, 5 << 20)")
        h = m.wait(hello_with(lambda h: h["framework"] == "jax" and len(h["devices"]) == 2))
        self.assertEqual(self.cuinit_count(), 1)
        self.assertEqual(h["backend"], "bfc")
        self.assertEqual(h["framework_version"], "0.4.35+stub")
        for d in h["devices"]:
            spec = specs[d["index"]]
            self.assertEqual(d["uuid"], gpu_uuid(spec))
            self.assertEqual(d["pci_bus_id"], spec["pci_bus_id"])
            self.assertEqual(d["name"], spec["name"])
        s = m.wait(lambda x: is_sample(x) and x["devices"][1]["allocated"] == 5 << 20)
        d = s["devices"][1]
        limit = int((16 << 30) * 0.75)
        self.assertEqual(d["reserved"], limit)  # pool_bytes: preallocated
        self.assertEqual(d["limit"], limit)
        self.assertEqual(d["peak_reserved"], limit)
        self.assertEqual(d["largest_free_block"], limit - (5 << 20))
        self.assertEqual(d["largest_free_block_time"], s["time"])
        self.assertIsNone(d["device_allocs"])
        self.assertEqual(d["unreported"]["device_allocs"], "not reported by jax")
        self.assertNoViolation()

    def test_bytes_reserved_without_pool_bytes(self):
        j = self.jax_job(STRATA_STUB_JAX_STATS="reserved", XLA_PYTHON_CLIENT_PREALLOCATE="false")
        j.do("jax._stub.init(); a = jax._stub.allocate(0, 3 << 20)")
        m = self.monitor(j.pid)
        h = m.wait(hello_with(lambda h: h["devices"]))
        self.assertEqual(h["settings"]["XLA_PYTHON_CLIENT_PREALLOCATE"], "false")
        d = m.wait(live_sample)["devices"][0]
        self.assertEqual(d["reserved"], 4 << 20)
        self.assertEqual(d["allocated"], 3 << 20)

    def test_minus_one_is_null(self):
        j = self.jax_job(STRATA_STUB_JAX_STATS="pjrt", XLA_PYTHON_CLIENT_PREALLOCATE="false")
        j.do("jax._stub.init(); a = jax._stub.allocate(0, 3 << 20)")
        d = self.monitor(j.pid).wait(live_sample)["devices"][0]
        self.assertEqual(d["reserved"], 4 << 20)  # pool_bytes -1: bytes_reserved
        self.assertIsNone(d["limit"])
        self.assertIsNone(d["largest_free_block"])
        self.assertIn("largest_free_block", d["unreported"])

    def test_platform_allocator_has_no_stats(self):
        j = self.jax_job(XLA_PYTHON_CLIENT_ALLOCATOR="platform")
        j.do("jax._stub.init()")
        m = self.monitor(j.pid)
        h = m.wait(hello_with(lambda h: h["framework"] == "jax" and h["note"]))
        self.assertEqual(h["backend"], "platform")
        self.assertIn("returned None", h["note"])
        time.sleep(0.2)
        self.assertFalse([x for x in m.snapshot() if is_sample(x)])

    def test_vmm_allocator_has_no_stats(self):
        j = self.jax_job(XLA_PYTHON_CLIENT_ALLOCATOR="vmm")
        j.do("jax._stub.init()")
        m = self.monitor(j.pid)
        h = m.wait(hello_with(lambda h: h["framework"] == "jax" and h["note"]))
        self.assertEqual(h["backend"], "vmm")
        self.assertIn("memory_stats() of device 0 returned None: XLA's vmm allocator keeps no statistics", h["note"])
        time.sleep(0.2)
        self.assertFalse([x for x in m.snapshot() if is_sample(x)])

    def test_an_allocator_jaxlib_refuses_is_named(self):
        j = self.jax_job(XLA_PYTHON_CLIENT_ALLOCATOR="address")
        j.do("jax._stub.init()")
        h = self.monitor(j.pid).wait(hello_with(lambda h: "no GPU backend" in (h["note"] or "")))
        self.assertEqual(h["state"], "no_framework")
        self.assertIn("XLA_PYTHON_CLIENT_ALLOCATOR=address is not an allocator jaxlib accepts", h["note"])

    def test_no_pool_allocator_with_statistics_keeps_allocated_only(self):
        # platform and vmm return None in XLA today; should one return statistics, its
        # bytes_reserved (an unset 0) must not read as a pool.
        j = self.jax_job(XLA_PYTHON_CLIENT_ALLOCATOR="platform", STRATA_STUB_JAX_PLATFORM_STATS=1,
                         STRATA_STUB_JAX_STATS="async")
        j.do("jax._stub.init(); a = jax._stub.allocate(0, 3 << 20)")
        d = self.monitor(j.pid).wait(live_sample)["devices"][0]
        self.assertEqual(d["allocated"], 3 << 20)
        self.assertIsNone(d["reserved"])
        self.assertIsNone(d["largest_free_block"])
        self.assertEqual(d["unreported"]["reserved"], "not reported by XLA's platform allocator (it keeps no pool)")

    def test_expensive_memory_stats_stretches_the_interval(self):
        # Here the stub's memory_stats runs gc.collect(); with a large heap that costs a few
        # ms per call: the agent keeps its share of a core near 1 % by sampling less often.
        j = self.jax_job(STRATA_STUB_JAX_STATS_GC=1)
        j.do("junk = [[i] for i in range(400000)]")
        j.do("jax._stub.init(); a = jax._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        # The interval is stretched as the agent measures its cost, perhaps in steps: wait
        # for it to reach 0.2 s (a hello says each step), not for the first step.
        h = m.wait(hello_with(lambda h: h["framework"] == "jax" and h["interval"] >= 0.2))
        self.assertGreaterEqual(h["interval"], 0.2)
        # Samples still go out: a monitor that connects late gets this hello first, its
        # backlog of samples after it.
        m.wait(is_sample, what="a sample")


    def test_cpu_only_jax_is_not_the_framework_read(self):
        j = self.job(self.env(libcuda=True))
        j.do("import jax, torch; jax._src.xla_bridge._backends['cpu'] = jax._stub.Backend('cpu', [])")
        m = self.monitor(j.pid)
        m.wait(hello_with(lambda h: h["note"] == "waiting for torch to initialise CUDA"))
        j.do("a = torch._stub.allocate(0, 1 << 20)")
        h = m.wait(hello_with(lambda h: h["framework"] is not None))
        self.assertEqual(h["framework"], "torch")


class CupyTest(Case):
    def test_per_device_pool_by_pci_bus_id(self):
        specs = device_specs(3)
        j = self.job(self.env(devices=specs, libcuda=True))
        j.do("import cupy")
        m = self.monitor(j.pid)
        m.wait(hello_with(lambda h: h["note"] and h["note"].startswith("waiting for cupy")))
        time.sleep(0.15)
        self.assertEqual(self.read_file(self.cuda_log), "", "the agent ran cuInit")
        j.do("cupy.cuda.Device(1).use(); a = cupy._stub.allocate(1, 3 << 20); b = cupy._stub.allocate(2, 5 << 20)")
        j.do("cupy._stub.free(cupy._stub.allocate(2, 1 << 20))")
        h = m.wait(hello_with(lambda h: h["framework"] == "cupy" and len(h["devices"]) == 2))
        self.assertEqual(h["backend"], "pool")
        self.assertEqual([d["index"] for d in h["devices"]], [1, 2])
        for d in h["devices"]:
            self.assertEqual(d["pci_bus_id"], pci_nvml(specs[d["index"]]["pci_bus_id"]))
            self.assertIsNone(d["uuid"])
        s = m.wait(lambda x: is_sample(x) and len(x["devices"]) == 2 and x["devices"][1]["reserved"] == 6 << 20)
        got = dict((d["index"], (d["allocated"], d["reserved"])) for d in s["devices"])
        self.assertEqual(got, {1: (3 << 20, 3 << 20), 2: (5 << 20, 6 << 20)})
        # No context on device 0: neither the job nor the agent made one.
        self.assertEqual(j.eval("cupy.cuda.runtime.getDevice()"), 1)
        self.assertEqual(j.eval("__import__('_strata_stub').cu_active(0)"), False)
        self.assertNoViolation()

    def test_async_pool_and_custom_allocator(self):
        j = self.job(self.env(libcuda=True))
        j.do("import cupy; p = cupy.cuda.MemoryAsyncPool(); cupy.cuda.set_allocator(p.malloc)")
        j.do("a = cupy._stub.allocate(0, 2 << 20)")
        m = self.monitor(j.pid)
        h = m.wait(hello_with(lambda h: h["devices"]))
        self.assertEqual(h["backend"], "async_pool")
        self.assertEqual(m.wait(live_sample)["devices"][0]["allocated"], 2 << 20)
        j.do("cupy.cuda.set_allocator(lambda n: None)")
        h = m.wait(hello_with(lambda h: h["backend"] == "custom"))
        self.assertIn("custom", h["note"])

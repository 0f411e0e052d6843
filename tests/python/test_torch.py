"""PyTorch: never initialising CUDA, devices and identity, backends, snapshots, OOMs."""

import json
import os
import socket
import time

from support import Case, device_specs, is_sample, live_sample, wait_until


def pid_max():
    with open("/proc/sys/kernel/pid_max") as f:
        return int(f.read())


def hello_with(pred):
    return lambda m: m["type"] == "hello" and pred(m)


class TorchTest(Case):
    def test_never_initialises_cuda(self):
        # Agent first; torch imported (and half-imported for a while: the stub sleeps in
        # its __init__), not initialised for several intervals; then initialised.
        j = self.job(self.env(STRATA_STUB_IMPORT_DELAY=0.2))
        m = self.monitor(j.pid)
        m.wait(hello_with(lambda h: h["note"] == "no framework imported yet"))
        j.do("import torch, time")
        m.wait(hello_with(lambda h: h["note"] == "waiting for torch to initialise CUDA"))
        j.do("time.sleep(0.3)")
        self.assertFalse([x for x in m.snapshot() if is_sample(x)])
        j.do("torch.cuda.init()")
        j.do("h = torch._stub.allocate(0, 1 << 20)")
        h = m.wait(hello_with(lambda h: h["framework"] == "torch" and h["devices"]))
        self.assertIsNone(h["note"])
        m.wait(lambda x: is_sample(x) and x["devices"][0]["allocated"] == 1 << 20)
        notes = [x["note"] for x in m.snapshot() if x["type"] == "hello"]
        self.assertIn("waiting for torch to finish importing", notes)
        self.assertNoViolation()
        self.assertEqual(j.finish(), 0)
        self.assertNoViolation()

    def test_lazy_init_callback_never_fails_the_jobs_init(self):
        j = self.job()
        j.do("import torch, strata_feed")
        wait_until(lambda: j.eval("len(torch.cuda._queued_calls)") == 1, what="the agent's hook queued")
        j.do("strata_feed._core.Agent.framework_init_hint = lambda self: 1 / 0")
        j.do("torch.cuda.init()")
        self.assertEqual(j.eval("torch.cuda.is_initialized()"), True)
        self.assertEqual(j.eval("len(torch.cuda._queued_calls)"), 1)

    def test_a_device_is_named_in_the_hello_before_any_reading_of_it(self):
        # A monitor that connects between a reading of a new device and the hello naming it
        # would hold a reading it cannot place: the hello goes first.
        specs = device_specs(2)
        j = self.job(self.env(devices=specs))
        j.do("import torch; torch.cuda.init(); a = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        m.wait(hello_with(lambda h: [d["index"] for d in h["devices"]] == [0]))
        j.do("b = torch._stub.allocate(1, 1 << 20)")

        def of_device_1(x):
            return any(d.get("index") == 1 for d in x.get("devices") or ())

        m.wait(of_device_1, what="device 1")
        msgs = m.snapshot()
        first = next(x for x in msgs if of_device_1(x))
        self.assertEqual(first["type"], "hello", [x.get("type") for x in msgs][-6:])

    def test_only_devices_with_a_context_index_explicit(self):
        specs = device_specs(4)
        j = self.job(self.env(devices=specs))
        j.do("import torch; torch.cuda.init()")
        j.do("a = torch._stub.allocate(1, 1 << 20); b = torch._stub.allocate(3, 3 << 20)")
        m = self.monitor(j.pid)
        h = m.wait(hello_with(lambda h: len(h["devices"]) == 2))
        self.assertEqual([d["index"] for d in h["devices"]], [1, 3])
        for d in h["devices"]:
            spec = specs[d["index"]]
            self.assertEqual(d["uuid"], spec["uuid"])  # bare hex, as torch gives it
            self.assertEqual(d["pci_bus_id"], spec["pci_bus_id"])
            self.assertEqual(d["name"], spec["name"])
        s = m.wait(live_sample)
        self.assertEqual([(d["index"], d["allocated"]) for d in s["devices"]], [(1, 1 << 20), (3, 3 << 20)])
        calls = self.trace_lines()
        self.assertIn("strata-feed memory_stats 1", calls)
        self.assertNotIn("strata-feed memory_stats 0", calls)
        self.assertNoViolation()

    def test_pci_id_is_nvml_style(self):
        specs = device_specs(1)
        specs[0]["pci_bus_id"] = "00000001:c1:1f.0"
        j = self.job(self.env(devices=specs))
        j.do("import torch; a = torch._stub.allocate(0, 1 << 20)")
        h = self.monitor(j.pid).wait(hello_with(lambda h: h["devices"]))
        self.assertEqual(h["devices"][0]["pci_bus_id"], "00000001:C1:1F.0")

    def test_old_torch_without_uuid(self):
        j = self.job(self.env(STRATA_STUB_TORCH_NO_UUID=1))
        j.do("import torch; a = torch._stub.allocate(0, 1 << 20)")
        h = self.monitor(j.pid).wait(hello_with(lambda h: h["devices"]))
        self.assertIsNone(h["devices"][0]["uuid"])
        self.assertEqual(h["devices"][0]["pci_bus_id"], "00000000:18:00.0")

    def test_cuda_malloc_async_nulls_with_reasons(self):
        j = self.job(self.env(PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync"))
        j.do("import torch; a = torch._stub.allocate(0, 3 << 20)")
        m = self.monitor(j.pid)
        h = m.wait(hello_with(lambda h: h["devices"]))
        self.assertEqual(h["backend"], "cudaMallocAsync")
        self.assertEqual(h["settings"]["alloc_conf"], "backend:cudaMallocAsync")
        s = m.wait(live_sample)
        d = s["devices"][0]
        for f in ("allocated", "reserved", "active", "peak_allocated", "peak_reserved", "peak_active"):
            self.assertIsInstance(d[f], int, f)
            self.assertNotIn(f, d["unreported"])
        for f in ("inactive_split", "requested", "peak_inactive_split", "peak_requested",
                  "alloc_retries", "ooms", "device_allocs", "device_frees", "largest_free_block"):
            self.assertIsNone(d[f], f)
            self.assertEqual(d["unreported"][f], "not reported by cudaMallocAsync")
        time.sleep(0.2)
        calls = self.trace_lines()
        self.assertNotIn("strata-feed memory_snapshot", calls)
        self.assertNotIn("strata-feed attach_out_of_memory_observer", calls)
        self.assertNoViolation()

    def test_expandable_segments(self):
        j = self.job(self.env(PYTORCH_ALLOC_CONF="expandable_segments:True,roundup_power2_divisions:[256:1,512:2]"))
        j.do("import torch; a = torch._stub.allocate(0, 3 << 20)")
        m = self.monitor(j.pid)
        h = m.wait(hello_with(lambda h: h["devices"]))
        self.assertIs(h["settings"]["expandable_segments"], True)
        d = m.wait(live_sample)["devices"][0]
        reason = "expandable segments: inactive_split does not measure fragmentation"
        for f in ("inactive_split", "peak_inactive_split"):
            self.assertIsNone(d[f])
            self.assertEqual(d["unreported"][f], reason)
        self.assertIsInstance(d["requested"], int)

    def test_memory_snapshot_taken_rarely(self):
        j = self.job()
        j.do("import torch; keep = torch._stub.fragment(0, pieces=8, size=1 << 20)")
        m = self.monitor(j.pid)
        first = m.wait(is_sample)
        # The warm-up ends at once (every device holds memory); then one snapshot.
        s = m.wait(lambda x: is_sample(x) and x["devices"][0]["largest_free_block"] is not None)
        expect = j.eval("torch._stub.largest_inactive(0)")
        self.assertEqual(s["devices"][0]["largest_free_block"], expect)
        self.assertLessEqual(s["devices"][0]["largest_free_block_time"], s["time"])
        if first["seq"] < s["seq"] and first["devices"][0]["largest_free_block"] is None:
            self.assertEqual(first["devices"][0]["unreported"]["largest_free_block"], "not measured yet")
        time.sleep(0.5)  # ten more intervals
        later = m.wait(live_sample, start=len(m.snapshot()))
        self.assertEqual(later["devices"][0]["largest_free_block_time"], s["devices"][0]["largest_free_block_time"])
        self.assertEqual(self.trace_lines().count("strata-feed memory_snapshot"), 1)

    def test_slow_memory_snapshot_is_not_taken_again(self):
        j = self.job(self.env(STRATA_STUB_SNAPSHOT_DELAY=0.035))
        j.do("import torch; keep = torch._stub.fragment(0)")
        m = self.monitor(j.pid)
        s = m.wait(lambda x: is_sample(x) and "took" in x["devices"][0]["unreported"].get("largest_free_block", ""))
        reason = s["devices"][0]["unreported"]["largest_free_block"]
        self.assertRegex(reason, r"^memory_snapshot took \d+ ms: not taken again$")
        self.assertIsNone(s["devices"][0]["largest_free_block"])
        time.sleep(0.3)
        self.assertEqual(self.trace_lines().count("strata-feed memory_snapshot"), 1)

    def test_oom_sent_at_once(self):
        # An oom wakes the agent: it goes out when it happens, not at the agent's next
        # wake-up for something else. Once the warm-up is over (the first sample that shows
        # memory on every device) the next sample is an hour away, and once the first sweep
        # of stale sockets has removed the one planted here the next sweep is a minute away:
        # an oom that waited for either would miss the deadline, however loaded the machine.
        os.makedirs(self.feed, 0o700)
        stale = os.path.join(self.feed, "%d.sock" % (pid_max() + 1))  # a pid no process has
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(stale)  # never listened on: connecting is refused, as to a dead agent's
        sock.close()
        j = self.job(self.env(STRATA_TEST_INTERVAL=3600))
        j.do("import torch; a = torch._stub.allocate(0, 6 << 20)")
        m = self.monitor(j.pid)
        warm_over = m.wait(lambda x: is_sample(x) and x["devices"][0]["reserved"] > 0, what="a sample with memory")
        wait_until(lambda: not os.path.exists(stale), what="the first sweep")
        reply = j.do("torch._stub.oom(0, 1 << 40)", ok=False)
        self.assertTrue(reply.startswith("err OutOfMemoryError"), reply)
        o = m.wait(lambda x: x["type"] == "oom", what="the oom")
        since = [x["type"] for x in m.snapshot() if x.get("seq", 0) > warm_over["seq"]]
        self.assertEqual(since[:1], ["oom"], "no sample before the oom")
        self.assertEqual(o["seq"], warm_over["seq"] + 1)
        self.assertEqual(o["index"], 0)
        self.assertEqual(o["requested"], 1 << 40)
        total = json.loads(self.env()["STRATA_STUB_DEVICES"])[0]["total"]
        self.assertEqual(o["device_total"], total)
        self.assertEqual(o["device_free"], total - (6 << 20))
        self.assertEqual(o["stats"]["allocated"], 6 << 20)
        self.assertEqual(o["stats"]["ooms"], 1)
        self.assertIsInstance(o["seq"], int)
        # and into the backlog
        late = self.monitor(j.pid)
        b = late.wait(lambda x: x["type"] == "oom")
        self.assertIs(b["backlog"], True)
        self.assertEqual(b["seq"], o["seq"])

    def test_oom_observer_never_raises_even_when_the_agent_is_broken(self):
        j = self.job()
        j.do("import torch, strata_feed; a = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        m.wait(is_sample)
        j.do("strata_feed._torch.TorchReader.on_oom = lambda *a: 1 / 0")
        reply = j.do("torch._stub.oom(0, 1 << 40)", ok=False)
        self.assertTrue(reply.startswith("err OutOfMemoryError"), reply)
        j.do("strata_feed._core.Agent.post_oom = lambda *a: [][1]")
        reply = j.do("torch._stub.oom(0, 1 << 40)", ok=False)
        self.assertTrue(reply.startswith("err OutOfMemoryError"), reply)
        j.do("strata_feed.stop()")
        reply = j.do("torch._stub.oom(0, 1 << 40)", ok=False)
        self.assertTrue(reply.startswith("err OutOfMemoryError"), reply)
        self.assertEqual(j.eval("len(torch._stub.observers)"), 1)

    def test_pluggable_allocator_reports_nothing_with_a_note(self):
        j = self.job(self.env(STRATA_STUB_BACKEND="pluggable"))
        j.do("import torch; a = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        h = m.wait(hello_with(lambda h: h["devices"]))
        self.assertEqual(h["backend"], "pluggable")
        self.assertIn("pluggable", h["note"])
        time.sleep(0.3)
        self.assertFalse([x for x in m.snapshot() if is_sample(x)])

    def test_reserved_since_follows_the_pool(self):
        j = self.job()
        j.do("import torch, time; a = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        s1 = m.wait(live_sample)
        s2 = m.wait(live_sample, start=len(m.snapshot()))
        self.assertEqual(s2["devices"][0]["reserved_since"], s1["devices"][0]["reserved_since"])
        # A new segment changes reserved; a block reused within the pool changes nothing.
        j.do("b = torch._stub.allocate(0, 4 << 20); t = time.time()")
        t = j.eval("t")
        s3 = m.wait(lambda x: live_sample(x) and x["devices"][0]["reserved"] == 6 << 20)
        self.assertGreaterEqual(s3["devices"][0]["reserved_since"], t)
        self.assertEqual(s3["devices"][0]["reserved_since"], min(
            x["time"] for x in m.snapshot() if is_sample(x) and x["devices"][0]["reserved"] == 6 << 20))

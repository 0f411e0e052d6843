"""Allocation sites on demand and the segment map (PROTOCOL.md, "Requests", "sites",
"segments"): windows against the torch stub's recording allocator, history put back as the
job had it, the refusals, the reduction's slices and budget, bounded texts and lines, and
the segment map against an oracle that walks the segments' addresses."""

import json
import os
import re
import sys

from support import ASSETS, STUBS, Case, device_specs, live_sample, wait_until

MiB = 1 << 20

# The job's own code: each allocating line is found by its marker.
JOBCODE = '''\
import torch

held = []


def leak(n, size, device=0):
    for _ in range(n):
        held.append(torch._stub.allocate(device, size))  # LEAK


def churn(n, size):
    for _ in range(n):
        h = torch._stub.allocate(0, size)  # CHURN
        torch._stub.free(h)


def keep(size):
    held.append(torch._stub.allocate(0, size))  # KEEP


def outer(n, size):
    leak(n, size)  # OUTER
'''

# Run in the job: a ring of n entries made by the stub's recording allocator, reduced in
# slices while a second thread counts; what each slice held and whether that thread ran.
GIL_CHECK = '''
def gil_check(n, budget=None):
    import gc, threading, time, torch, jobcode
    from strata_feed import _sites, _slices
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=n)
    hs = []
    i = 0
    while len(torch._stub.DEVICES[0].ring) < n:
        h = torch._stub.allocate(0, 4096 + (i % 13) * 512)
        if i % 8 == 0:
            hs.append(h)
        else:
            torch._stub.free(h)
        i += 1
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(None)
    # The snapshot's objects are collected once here: a collection is the snapshot's cost
    # (torch builds as many), the slicing is what is measured.
    gc.collect()
    st = {"n": 0, "stop": False}

    def spin():
        while not st["stop"]:
            st["n"] += 1

    t = threading.Thread(target=spin)
    t.start()
    while st["n"] == 0:
        time.sleep(0.001)
    red = _sites.Reduction(snap)
    clock = _slices.Clock()
    run = _slices.Run(red.run(clock), clock, budget=budget, record=True)
    marks = []
    while True:
        marks.append(st["n"])
        if not run.step():
            break
        _slices.give_up_gil()
    st["stop"] = True
    t.join()
    return {
        "entries": len(snap["device_traces"][0]), "walked": red.walked(), "slices": run.slices,
        "cpu": [c for _, c in run.record], "hold": [h for h, _ in run.record],
        "ran_between": sum(1 for a, b in zip(marks, marks[1:]) if b > a),
        "over_budget": run.over_budget, "phase": red.phase,
        "growth": red.devices(50)[0]["growth"], "live": red.devices(50)[0]["live"],
    }
'''


def sites_msgs(m, rid):
    return [x for x in m.snapshot() if x.get("type") == "sites" and x.get("id") == rid]


class SitesCase(Case):
    def setUp(self):
        super().setUp()
        self.code = os.path.join(self.tmp, "jobcode.py")
        with open(self.code, "w") as f:
            f.write(JOBCODE)

    def site(self, marker, func):
        n = next(i for i, line in enumerate(JOBCODE.splitlines(), 1) if line.endswith("# " + marker))
        return "%s:%d in %s" % (self.code, n, func)

    def sites_job(self, init=True, **env):
        j = self.job(self.env(pythonpath=[STUBS, ASSETS, self.tmp], **env))
        # The tests call the agent's reduction from the job's own thread; its modules are
        # imported here, before torch, so that this thread never imports one the agent's
        # sampler is importing for torch's reader (_reading): Python 3.9 can hand a thread a
        # module another thread has half made ("cannot import name 'count' from partially
        # initialized module"). In a job only the sampler imports them.
        j.do("import strata_feed, strata_feed._sites, strata_feed._slices")
        j.do("import torch, jobcode")
        if init:
            j.do("torch.cuda.init()")
        return j

    def start_window(self, m, rid, seconds=2, top=20):
        m.wait(lambda x: x["type"] == "hello" and x.get("requests") == ["sites"])
        m.sites(rid, seconds=seconds, top=top)
        run = m.sites_state(rid, "running", "refused", "failed")
        self.assertEqual(run["state"], "running", run)
        return run

    def within_window(self, m, rid):
        # The window is a fixed length: what the test did must have happened inside it.
        self.assertFalse([x for x in sites_msgs(m, rid) if x["state"] != "running"],
                         "the window ended before the test's work was done (a very slow machine)")

    def agent_calls(self):
        """The history calls the agent made, in order."""
        calls = [x.split(" ", 1)[1] for x in self.trace_lines()]
        return [c for c in calls if c.startswith("_record_memory_history") or c == "_snapshot"]


class WindowTest(SitesCase):
    def test_a_leak_is_the_top_growth_site_and_history_is_off_after(self):
        j = self.sites_job()
        j.do("jobcode.keep(5 << 20)")  # live before the window: no frames, unattributed
        m = self.monitor(j.pid)
        run = self.start_window(m, 1, seconds=2)
        self.assertEqual(run["history"], "agent")
        self.assertEqual(run["seconds"], 2)
        self.assertEqual(j.eval("torch._C._cuda_isHistoryEnabled()"), True)
        j.do("jobcode.churn(200, 1 << 16); jobcode.outer(10, 3 << 20)")
        self.within_window(m, 1)
        done = m.sites_state(1, "done", "failed")
        self.assertEqual(done["state"], "done", done)
        self.assertGreaterEqual(done["window"], 2.0)
        self.assertIsNone(done["stopped"])
        self.assertEqual(done["dropped"], 0)
        self.assertGreaterEqual(done["entries"], 200 * 3 + 10)
        for k in ("cpu", "gil_max", "snapshot"):
            self.assertGreater(done["cost"][k], 0)
        d, = done["devices"]
        top = d["growth"][0]
        self.assertEqual(top["site"], self.site("LEAK", "leak"))
        self.assertEqual(top["via"][0], self.site("OUTER", "outer"))
        self.assertEqual((top["bytes"], top["allocs"], top["frees"]), (10 * (3 << 20), 10, 0))
        self.assertEqual(d["growth_bytes"], 10 * (3 << 20))
        self.assertNotIn(self.site("CHURN", "churn"), [g["site"] for g in d["growth"]])
        self.assertEqual(d["live"][0]["site"], self.site("LEAK", "leak"))
        self.assertEqual((d["live"][0]["bytes"], d["live"][0]["count"]), (10 * (3 << 20), 10))
        self.assertEqual(d["live_unattributed"], 5 << 20)
        self.assertEqual((d["live_bytes"], d["live_blocks"]), (35 << 20, 11))
        # Put back as the job had it: off, and the ring emptied.
        self.assertEqual(j.eval("torch._C._cuda_isHistoryEnabled()"), False)
        self.assertEqual(j.eval("torch._stub.trace_actions(0)"), [])
        self.assertEqual(j.eval("torch._stub.HISTORY.calls"),
                         [["all", "all", "python", 100000], [None, "all", "all", sys.maxsize]])
        self.assertEqual(self.agent_calls(), ["_record_memory_history all", "_snapshot", "_record_memory_history None"])
        # The same snapshot's segment map follows.
        seg = m.wait(lambda x: x["type"] == "segments" and x["time"] == done["time"])
        self.assertEqual(seg["devices"][0]["pools"][0]["live"], 35 << 20)
        self.assertNoViolation()

    def test_the_jobs_own_history_is_left_as_it_was(self):
        j = self.sites_job()
        j.do("torch.cuda.memory._record_memory_history(context='alloc', max_entries=5000)")
        j.do("jobcode.leak(3, 1 << 20)")  # in the job's trace, before the window
        m = self.monitor(j.pid)
        run = self.start_window(m, 2, seconds=2)
        self.assertEqual(run["history"], "job")
        j.do("jobcode.churn(20, 4096); jobcode.outer(4, 2 << 20)")
        self.within_window(m, 2)
        done = m.sites_state(2, "done", "failed")
        self.assertEqual(done["state"], "done", done)
        self.assertEqual(done["history"], "job")
        d, = done["devices"]
        # Growth is the window's alone (by time_us); live holds both, with the job's frames.
        self.assertEqual([(g["site"], g["bytes"], g["allocs"]) for g in d["growth"]],
                         [(self.site("LEAK", "leak"), 4 * (2 << 20), 4)])
        self.assertEqual((d["live"][0]["site"], d["live"][0]["bytes"], d["live"][0]["count"]),
                         (self.site("LEAK", "leak"), 3 * MiB + 4 * (2 << 20), 7))
        self.assertEqual(done["dropped"], 0)
        # Not one call of the agent's: the job's settings stand.
        self.assertEqual(j.eval("torch._stub.HISTORY.calls"), [["all", "alloc", "all", 5000]])
        self.assertEqual(j.eval("[torch._stub.HISTORY.enabled, torch._stub.HISTORY.context, torch._stub.HISTORY.max_entries]"),
                         [True, 2, 5000])
        self.assertEqual(self.agent_calls(), ["_snapshot"])

    def test_dropped_counts_what_the_ring_lost(self):
        j = self.sites_job()
        j.do("import strata_feed._sites; strata_feed._sites.MAX_ENTRIES = 64")
        m = self.monitor(j.pid)
        self.start_window(m, 3, seconds=2)
        j.do("jobcode.churn(300, 4096)")
        self.within_window(m, 3)
        done = m.sites_state(3, "done", "failed")
        self.assertEqual(done["state"], "done", done)
        self.assertEqual(done["entries"], 64)
        # 300 allocations and 300 frees counted; the ring of 64 held the snapshot's own
        # entry and the last 21 alloc/free_requested/free_completed triples: 42 of them.
        self.assertEqual(done["devices"][0]["growth"], [])
        self.assertEqual(done["dropped"], 600 - 42)

    def test_dropped_counts_only_the_window_on_a_device_the_last_sample_missed(self):
        # The device gets its context after the agent's last sample: its allocations before
        # the window are not the window's (its counts are read then, not taken as 0).
        j = self.sites_job()
        wait_until(lambda: j.eval("(lambda s: s is not None and s.frameworks.reader is not None)"
                                  "(strata_feed._current().sampler)"), what="the reader")
        j.do("import time; s = strata_feed._current().sampler; s.warm_until = None; s.base_interval = s.interval = 3600.0;"
             " s.next_tick = time.monotonic() + 3600")
        j.do("jobcode.keep(1 << 20)")
        m = self.monitor(j.pid)
        self.start_window(m, 10, seconds=1)
        done = m.sites_state(10, "done", "failed")
        self.assertEqual(done["dropped"], 0)
        self.assertEqual(done["devices"][0]["live_unattributed"], 1 << 20)

    def test_a_request_right_after_the_jobs_init_is_not_refused_for_it(self):
        # The agent has not looked since the job initialised CUDA: it looks at the request.
        j = self.sites_job(init=False)
        wait_until(lambda: j.eval("strata_feed._current().sampler is not None"), what="the sampler")
        j.do("import time; strata_feed._core.Agent.framework_init_hint = lambda self: None;"
             " s = strata_feed._current().sampler; s.base_interval = s.interval = 3600.0;"
             " s.next_tick = time.monotonic() + 3600")
        j.do("torch.cuda.init(); jobcode.keep(1 << 20)")
        m = self.monitor(j.pid)
        self.start_window(m, 11, seconds=1)
        self.assertEqual(m.sites_state(11, "done", "failed")["state"], "done")

    def test_a_second_window_is_refused_and_exit_puts_history_back(self):
        j = self.sites_job()
        j.do("jobcode.keep(1 << 20)")
        m = self.monitor(j.pid)
        self.start_window(m, 4, seconds=600)
        m.sites(5, seconds=5)
        r = m.sites_state(5, "refused", "running")
        self.assertEqual(r["state"], "refused")
        n = re.fullmatch(r"a sites window is already running \(ends in (\d+) s\)", r["reason"])
        self.assertIsNotNone(n, r["reason"])
        self.assertTrue(590 <= int(n.group(1)) <= 600, r["reason"])
        self.assertEqual(j.finish(), 0)
        failed = m.sites_state(4, "failed", "done")
        self.assertEqual(failed["state"], "failed")
        self.assertRegex(failed["reason"], r"^the job exited [0-9.]+ s into the window; history turned off$")
        m.wait_eof()
        types = [x["type"] for x in m.snapshot()]
        self.assertEqual(types[-1], "bye")
        self.assertLess(m.snapshot().index(failed), len(types) - 1)
        self.assertEqual(self.agent_calls(), ["_record_memory_history all", "_record_memory_history None"])

    def test_the_window_ends_before_bye_when_the_serving_thread_sees_the_stop_first(self):
        # At exit the serving thread may wake (any event) and see the stop before the
        # sampler has put history back and said so: it must wait for the sampler's last
        # words. Here the sampler wakes it itself, then waits until the feed is closed
        # (or half a second).
        j = self.sites_job()
        j.do("exec(%r)" % (
            "import strata_feed._sites as S, time\n"
            "A = strata_feed._current()\n"
            "orig = S.SitesWindow.halt\n"
            "def halt(self, why):\n"
            "    A.wake()\n"
            "    end = time.monotonic() + 0.5\n"
            "    while not A.done and time.monotonic() < end:\n"
            "        time.sleep(0.005)\n"
            "    orig(self, why)\n"
            "S.SitesWindow.halt = halt\n"))
        m = self.monitor(j.pid)
        self.start_window(m, 9, seconds=600)
        self.assertEqual(j.finish(), 0)
        failed = m.sites_state(9, "failed", "done")
        self.assertRegex(failed["reason"], r"^the job exited [0-9.]+ s into the window; history turned off$")
        m.wait_eof()
        self.assertEqual(m.snapshot()[-1]["type"], "bye")

    def test_a_window_after_a_window(self):
        j = self.sites_job()
        m = self.monitor(j.pid)
        self.start_window(m, 6, seconds=1)
        self.assertEqual(m.sites_state(6, "done", "failed")["state"], "done")
        self.start_window(m, 7, seconds=1)
        self.assertEqual(m.sites_state(7, "done", "failed")["state"], "done")
        # A monitor that comes later reads both outcomes (kept), not the running ones.
        late = self.monitor(j.pid)
        late.wait(lambda x: x["type"] == "segments")  # kept after the sites outcomes
        kept = [(x["id"], x["state"], x.get("backlog")) for x in late.snapshot() if x["type"] == "sites"]
        self.assertEqual(kept, [(6, "done", True), (7, "done", True)])

    def test_pending_frees_and_a_reused_address(self):
        j = self.sites_job()
        j.do("a = torch._stub.allocate(0, 3 << 20); torch._stub.free(a, pending=True)")
        m = self.monitor(j.pid)
        self.start_window(m, 8, seconds=2)
        # The earlier block completes its free in the window (free_completed, no request
        # seen), its address is handed out again and kept: that is growth.
        j.do("torch._stub.complete(a); jobcode.keep(3 << 20)")
        # Freed in the window, still waiting on a stream: not growth, and pending in the map.
        j.do("b = torch._stub.allocate(0, 5 << 20); torch._stub.free(b, pending=True)")
        # An out-of-memory entry (a size, no address) is no allocation.
        self.assertRegex(j.do("torch._stub.oom(0, 1 << 40)", ok=False), "^err OutOfMemoryError")
        self.within_window(m, 8)
        self.assertEqual(j.eval("jobcode.held[-1][3].addr == a[3].addr"), True)
        done = m.sites_state(8, "done", "failed")
        d, = done["devices"]
        grew = dict((g["site"], (g["bytes"], g["allocs"], g["frees"])) for g in d["growth"])
        self.assertEqual(grew, {self.site("KEEP", "keep"): (3 << 20, 1, 0)})
        seg = m.wait(lambda x: x["type"] == "segments" and x["time"] == done["time"])
        self.assertEqual(sum(p["pending_free"] for p in seg["devices"][0]["pools"]), 5 << 20)


class RefusalTest(SitesCase):
    def refused(self, j, rid=1):
        m = self.monitor(j.pid)
        m.wait(lambda x: x["type"] == "hello")
        m.sites(rid)
        r = m.sites_state(rid, "refused", "running")
        self.assertEqual(r["state"], "refused")
        return r["reason"]

    def test_no_framework(self):
        j = self.job()
        self.assertEqual(self.refused(j), "sites: needs torch (no framework imported yet)")

    def test_cuda_not_initialised(self):
        j = self.sites_job(init=False)
        self.assertEqual(self.refused(j), "sites: CUDA not initialised by the job yet (the agent never initialises it)")
        self.assertEqual(j.eval("torch.cuda.is_initialized()"), False)
        self.assertNoViolation()

    def test_torch_without_the_calls(self):
        j = self.sites_job(STRATA_STUB_TORCH_VERSION="2.0.1")
        j.do("a = torch._stub.allocate(0, 1 << 20)")
        self.assertEqual(self.refused(j), "sites: not available in torch 2.0")

    def test_cuda_malloc_async(self):
        j = self.sites_job(PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync")
        j.do("a = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        m.wait(lambda x: x["type"] == "hello" and x.get("backend") == "cudaMallocAsync")
        m.sites(1)
        self.assertEqual(m.sites_state(1, "refused")["reason"],
                         "sites: not available with the cudaMallocAsync allocator (it records no allocation history)")

    def test_invalid_and_oversized_requests(self):
        j = self.sites_job()
        j.do("a = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        m.wait(lambda x: x["type"] == "hello" and x["devices"])
        m.sites(1, seconds=0)
        self.assertEqual(m.sites_state(1, "refused")["reason"], "invalid request: seconds must be a number from 1 to 600")
        m.sites(2, top=51)
        self.assertEqual(m.sites_state(2, "refused")["reason"], "invalid request: top must be an integer from 1 to 50")
        # No id to answer to; a line past 4096 bytes, dropped to its newline; another type.
        m.sites(-1)
        m.send(b'{"v":1,"type":"sites_request","id":3,"seconds":1,"pad":"' + b"x" * 5000 + b'"}\n')
        m.send({"v": 1, "type": "something_else", "id": 4})
        m.sites(5, seconds=1)
        m.sites_state(5, "done", "failed")
        self.assertEqual(sorted(set(x["id"] for x in m.snapshot() if x["type"] == "sites")), [1, 2, 5])
        self.assertEqual(j.eval("strata_feed._current().hub.requests"), 4)

    def test_another_users_request_is_not_answered(self):
        j = self.sites_job()
        j.do("a = torch._stub.allocate(0, 1 << 20)")
        j.do("strata_feed._server.peer_trusted = lambda sock: False")  # as SO_PEERCRED would say
        m = self.monitor(j.pid)
        m.wait(live_sample)
        m.sites(1)
        wait_until(lambda: j.eval("strata_feed._current().hub.untrusted") == 1, what="the request read")
        n = len(m.snapshot())
        m.wait(live_sample, start=n + 1)
        self.assertEqual(sites_msgs(m, 1), [])
        self.assertEqual(j.eval("torch._C._cuda_isHistoryEnabled()"), False)

    def test_snapshot_raising(self):
        j = self.sites_job()
        m = self.monitor(j.pid)
        self.start_window(m, 1, seconds=1)
        j.do("torch._stub.fail_snapshot = 'CUDA error: an illegal memory access was encountered'")
        f = m.sites_state(1, "failed", "done")
        self.assertEqual(f["reason"], "snapshot failed: CUDA error: an illegal memory access was encountered")
        self.assertEqual(j.eval("torch._C._cuda_isHistoryEnabled()"), False)

    def test_the_job_turns_history_off_in_the_window(self):
        j = self.sites_job()
        m = self.monitor(j.pid)
        self.start_window(m, 1, seconds=1)
        j.do("torch.cuda.memory._record_memory_history(None)")
        f = m.sites_state(1, "failed", "done")
        self.assertEqual(f["reason"], "the job turned memory history off during the window")


class ReductionTest(SitesCase):
    def test_slices_hold_the_gil_briefly_over_a_100000_entry_ring(self):
        j = self.sites_job()
        j.do("exec(%r)" % GIL_CHECK)
        r = j.eval("gil_check(100000)")
        self.assertEqual(r["entries"], 100000)
        self.assertEqual(r["walked"], 100000)
        # Each slice's own work stays under 5 ms of CPU (its wall time can be longer when
        # the machine takes the CPU away: that is not the reduction's hold); there are many.
        self.assertLess(max(r["cpu"]), 5e6, sorted(r["cpu"])[-5:])
        self.assertGreaterEqual(r["slices"], sum(r["cpu"]) / 3e6)
        # The GIL was given up between slices: the other thread ran between most of them.
        self.assertGreaterEqual(r["ran_between"], (r["slices"] - 1) // 2, r)
        self.assertEqual([g["site"] for g in r["growth"]][:1], [r["live"][0]["site"]])

    def test_the_jobs_older_entries_cost_no_long_slice(self):
        # A job's own ring holds mostly entries from before the window: they are passed
        # over in slices too, and the walk ends at those well before the window.
        j = self.sites_job()
        j.do("exec(%r)" % (
            "def older_entries():\n"
            "    import time\n"
            "    from strata_feed import _sites, _slices\n"
            "    torch.cuda.memory._record_memory_history(max_entries=200000)\n"
            "    jobcode.churn(30000, 4096)\n"
            "    time.sleep(1.1)\n"
            "    since = time.time() * 1e6\n"
            "    jobcode.leak(10, 8192)\n"
            "    snap = torch.cuda.memory._snapshot()\n"
            "    red = _sites.Reduction(snap, since)\n"
            "    clock = _slices.Clock()\n"
            "    run = _slices.Run(red.run(clock), clock, record=True).to_end()\n"
            "    return {'walked': red.walked(), 'trace': len(snap['device_traces'][0]),\n"
            "            'cpu': max(c for _, c in run.record), 'growth': red.devices(5)[0]['growth']}\n"))
        r = j.eval("older_entries()")
        self.assertGreater(r["trace"], 90000)
        self.assertEqual(r["walked"], 11)  # the 10 allocations and the snapshot's own entry
        self.assertLess(r["cpu"], 5e6)
        self.assertEqual([(g["site"], g["bytes"]) for g in r["growth"]], [(self.site("LEAK", "leak"), 10 * 8192)])

    def test_a_tiny_budget_stops_and_what_it_found_is_true(self):
        j = self.sites_job()
        j.do("exec(%r)" % GIL_CHECK)
        r = j.eval("gil_check(20000, budget=0.0005)")
        self.assertTrue(r["over_budget"])
        self.assertLess(r["walked"], 20000)
        # What the walk from the window's end found is growth for certain: live at the end.
        live = dict((x["site"], x["bytes"]) for x in r["live"])
        for g in r["growth"]:
            self.assertLessEqual(g["bytes"], live.get(g["site"], 0))

    def test_the_budget_in_a_window(self):
        j = self.sites_job()
        j.do("import strata_feed._sites; strata_feed._sites.CPU_BUDGET = 0.0001")
        m = self.monitor(j.pid)
        self.start_window(m, 1, seconds=2)
        j.do("jobcode.churn(3000, 4096)")
        self.within_window(m, 1)
        done = m.sites_state(1, "done", "failed")
        self.assertRegex(done["stopped"] or "", r"^CPU budget of 0\.0001 s spent")
        self.assertIsNone(done["dropped"])
        self.assertEqual(done["devices"][0]["growth"], [])

    def test_a_1_mb_site_string_is_bounded(self):
        j = self.sites_job()
        m = self.monitor(j.pid)
        self.start_window(m, 1, seconds=2)
        src = "import torch\\ndef %s(n):\\n    return [torch._stub.allocate(0, 1 << 20) for _ in range(n)]\\n" % ("f" * MiB)
        j.do("ns = {}; exec(compile(%r, '/' + 'x' * (1 << 20) + '.py', 'exec'), ns); big = ns[%r](3)"
             % (src.replace("\\n", "\n"), "f" * MiB))
        self.within_window(m, 1)
        done = m.sites_state(1, "done", "failed")
        self.assertEqual(done["state"], "done", done.get("reason"))
        g = done["devices"][0]["growth"][0]
        self.assertEqual(g["bytes"], 3 * MiB)
        path, rest = g["site"].split(":", 1)
        self.assertEqual(len(path), 256)
        self.assertTrue(path.startswith("...x") and path.endswith("x.py"), path[:20])
        self.assertRegex(rest, r"^3 in ")  # the comprehension, or the function where it is inlined
        for text in [g["site"]] + g["via"]:
            self.assertLessEqual(len(text), 256 + len(":3 in ") + 128)
        self.assertIn("f" * 128 + " ", "".join(t + " " for t in g["via"] + [g["site"]]))

    def test_many_long_sites_fit_the_line(self):
        j = self.sites_job(STRATA_STUB_DEVICES=json.dumps(device_specs(4)))
        j.do("hs = [torch._stub.allocate(i, 1 << 20) for i in range(4)]")
        m = self.monitor(j.pid)
        self.start_window(m, 1, seconds=3, top=50)
        funcs = "".join(
            "def f%d():\n    return [torch._stub.allocate(i, %d) for i in range(4)]\n" % (k, (k + 1) * 4096)
            for k in range(60))
        j.do("fs = {}; exec(compile('import torch\\n' + %r, '/%s/code.py', 'exec'), fs)" % (funcs, "d" * 240))
        j.do("kept = [fs['f%d' % k]() for k in range(60)]")
        self.within_window(m, 1)
        done = m.sites_state(1, "done", "failed")
        self.assertRegex(done["stopped"], r"^\d+ sites left out to fit the 64 KiB line$")
        for d in done["devices"]:
            for key in ("live", "growth"):
                sizes = [x["bytes"] for x in d[key]]
                # The largest are kept: 60 sites of (k + 1) * 4096 bytes, k = 59, 58, ...
                self.assertEqual(sizes, [(59 - i + 1) * 4096 for i in range(len(sizes))], key)
            self.assertEqual(d["growth_bytes"], sum((k + 1) * 4096 for k in range(60)))


class SiteRuleTest(SitesCase):
    """The site rule on its own (PROTOCOL.md, "The site of a frame")."""

    def setUp(self):
        super().setUp()
        if ASSETS not in sys.path:
            sys.path.insert(0, ASSETS)
        from strata_feed import _sites

        self.s = _sites

    def test_whose_code_a_file_is(self):
        job = ["/home/me/train.py", "train.py", "/home/me/torch/model.py", "/opt/torchvision/x.py",
               "/venv/lib/python3.11/site-packages/transformers/models/llama.py",
               "/usr/lib/python3/dist-packages/numpy/core.py", "/usr/lib/python3.11/site-packages/mylib/a.py",
               "/srv/lib/pythonic/x.py", "/usr/lib/python3.11/site-packages/torchvision/ops.py"]
        not_job = ["<frozen importlib._bootstrap>", "<string>", "??", "", "aten/src/ATen/native/Copy.cpp",
                   "c10/core/Allocator.h", "kernel.cu", "x.cc", "y.c",
                   "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py",
                   "/usr/lib/python3/dist-packages/torch/functional.py",
                   "/usr/lib/python3.11/threading.py", "/usr/local/lib/python3.13t/json/decoder.py",
                   "/opt/strata/strata_feed/_sampler.py", None, 42]
        for name in job:
            self.assertTrue(self.s.is_job_file(name), name)
        for name in not_job:
            self.assertFalse(self.s.is_job_file(name), name)

    def test_site_is_the_innermost_job_frame_with_two_callers(self):
        torch_file = "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py"
        frames = [
            {"filename": torch_file, "line": 125, "name": "forward"},
            {"filename": "/home/me/model.py", "line": 10, "name": "forward"},
            {"filename": torch_file, "line": 1, "name": "_call_impl"},
            {"filename": "/home/me/train.py", "line": 40, "name": "step"},
            {"filename": "/usr/lib/python3.11/runpy.py", "line": 88, "name": "_run_code"},
            {"filename": "/home/me/train.py", "line": 99, "name": "<module>"},
            {"filename": "/home/me/train.py", "line": 1, "name": "never"},
        ]
        site = self.s.Sites()
        self.assertEqual(site.site(frames), ("/home/me/model.py:10 in forward",
                                             ["/home/me/train.py:40 in step", "/home/me/train.py:99 in <module>"]))
        self.assertEqual(site.site(frames[:1]), ("(no frame in the job's code)", []))
        long = {"filename": "/" + "a" * 5000 + ".py", "line": True, "name": "g" * 500}
        text = site.site([long])[0]
        self.assertEqual(text, "..." + ("a" * 5000 + ".py")[-253:] + ":? in " + "g" * 128)


class SegmentMapTest(SitesCase):
    PATTERN = '''
def pattern(seed, n):
    import random
    r = random.Random(seed)
    sizes = [512, 4096, 100000, 1 << 20, (1 << 20) + 512, 3 << 20, 5 << 20, 700000]
    with torch._stub._lock:
        hs = [torch._stub.allocate(0, r.choice(sizes)) for _ in range(n)]
        for i, h in enumerate(hs):
            if i % 3 == 0:
                torch._stub.free(h)
            elif i % 7 == 1:
                torch._stub.free(h, pending=True)
    return len(hs)
'''

    def oracle(self, segments):
        """The segment map computed its own way: each segment cut into 512-byte units, each
        unit's state read from the block that covers it, then counted and run-length coded."""
        code = {"active_allocated": "l", "active_pending_free": "p", "inactive": "f"}
        devices = {}
        for seg in segments:
            total, base = seg["total_size"], seg["address"]
            units = bytearray(b"f" * (total // 512))
            for b in seg["blocks"]:
                off = (b["address"] - base) // 512
                units[off:off + b["size"] // 512] = code[b["state"]].encode() * (b["size"] // 512)
            free_blocks = [b["size"] for b in seg["blocks"] if b["state"] == "inactive"]
            live = units.count(b"l") * 512
            free = sum(free_blocks)
            runs = []
            for ch in units.decode():
                if runs and runs[-1][1] == ch:
                    runs[-1][0] += 512
                else:
                    runs.append([512, ch])
            if len(runs) > 64:
                runs = runs[:63] + [[sum(r[0] for r in runs[63:]), "m"]]
            pinned = live > 0 and 4 * free >= 3 * total
            dev = devices.setdefault(seg["device"], {"pools": {}, "segs": []})
            key = (seg["segment_type"], seg["is_expandable"])
            p = dev["pools"].setdefault(key, {"pool": key[0], "expandable": key[1], "segments": 0, "reserved": 0,
                                              "live": 0, "pending_free": 0, "free": 0, "largest_free": 0,
                                              "buckets": {}, "pinned": {"segments": 0, "reserved": 0, "live": 0}})
            p["segments"] += 1
            p["reserved"] += total
            p["live"] += live
            p["pending_free"] += units.count(b"p") * 512
            p["free"] += free
            p["largest_free"] = max([p["largest_free"]] + free_blocks)
            for size in free_blocks:
                k = 0
                while 1 << (k + 1) <= size:
                    k += 1
                bk = p["buckets"].setdefault(1 << k, [0, 0])
                bk[0] += 1
                bk[1] += size
            if pinned:
                for f, v in (("segments", 1), ("reserved", total), ("live", live)):
                    p["pinned"][f] += v
            strip = {"pool": key[0], "expandable": key[1], "size": total, "live": live, "free": free,
                     "largest_free": max(free_blocks or [0]), "pinned": pinned, "runs": runs}
            dev["segs"].append(((0, -free, base) if pinned else (1, -total, base), strip))
        out = []
        for i in sorted(devices):
            dev = devices[i]
            pools = []
            for key in sorted(dev["pools"], key=lambda k: ({"large": 0, "small": 1}[k[0]], k[1])):
                p = dev["pools"][key]
                p["free_blocks"] = [{"at_least": a, "blocks": v[0], "bytes": v[1]} for a, v in sorted(p.pop("buckets").items())]
                pools.append(p)
            strips = [s for _, s in sorted(dev["segs"], key=lambda x: x[0])][:32]
            out.append({"index": i, "pools": pools, "strips": strips, "strips_left_out": len(dev["segs"]) - len(strips)})
        return out

    def check_against_oracle(self, **env):
        j = self.sites_job(init=False, **env)
        j.do("exec(%r)" % self.PATTERN)
        m = self.monitor(j.pid)
        j.do("torch.cuda.init(); n = pattern(7, 400)")
        seg = m.wait(lambda x: x["type"] == "segments", what="the segment map")
        segments = j.eval("torch._stub.snapshot(False)[0]")
        want = self.oracle(segments)
        self.assertEqual(seg["devices"], want)
        s = m.wait(lambda x: live_sample(x) and x["devices"][0]["largest_free_block_time"] == seg["time"])
        self.assertEqual(s["devices"][0]["largest_free_block"], max(p["largest_free"] for p in want[0]["pools"]))
        return want

    def test_segment_map_against_an_oracle(self):
        want = self.check_against_oracle()
        self.assertEqual([(p["pool"], p["expandable"]) for p in want[0]["pools"]], [("large", False), ("small", False)])
        self.assertGreater(want[0]["strips_left_out"], 0)
        self.assertTrue(any(p["pinned"]["segments"] for p in want[0]["pools"]))

    def test_segment_map_of_expandable_segments(self):
        want = self.check_against_oracle(PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
        self.assertEqual([(p["pool"], p["expandable"]) for p in want[0]["pools"]], [("large", True), ("small", True)])
        self.assertGreater(max(len(s["runs"]) for s in want[0]["strips"]), 64 - 1)  # cut to 64

    def test_the_line_stays_under_64_kib_with_many_segments(self):
        j = self.sites_job(STRATA_STUB_DEVICES=json.dumps(device_specs(8)))
        # Per device 40 small segments of 128 blocks, every other one freed (128 runs, cut
        # to 64), and 8 segments pinned by one block each.
        j.do("exec(%r)" % (
            "def many(d):\n"
            "    hs = [torch._stub.allocate(d, 16384) for _ in range(40 * 128)]\n"
            "    for i, h in enumerate(hs):\n"
            "        if i % 2 or (i // 128 < 8 and i % 128):\n"
            "            torch._stub.free(h)\n"
            "    return hs\n"))
        j.do("kept = [many(d) for d in range(8)]")
        m = self.monitor(j.pid)
        self.start_window(m, 1, seconds=1)
        # The window's own snapshot, taken after the segments were made: the agent's sampler
        # may have taken one of its own while they were being made (once the 5 s after
        # torch's initialisation are past, as on a slow machine), and keeps its map for the
        # monitor that comes, with the last device's segments half made.
        done = m.sites_state(1, "done", "failed")
        self.assertEqual(done["state"], "done", done)
        seg = m.wait(lambda x: x["type"] == "segments" and x["time"] == done["time"])
        self.assertEqual(len(seg["devices"]), 8)
        line = len(json.dumps(seg, separators=(",", ":"))) + 1
        self.assertLessEqual(line, 65536)
        left = 0
        for d in seg["devices"]:
            self.assertEqual(len(d["strips"]) + d["strips_left_out"], sum(p["segments"] for p in d["pools"]))
            self.assertLessEqual(len(d["strips"]), 32)
            left += d["strips_left_out"]
            self.assertEqual([x["pinned"] for x in d["strips"][:8]], [True] * 8)
            last = d["strips"][-1]
            self.assertFalse(last["pinned"])
            self.assertEqual((len(last["runs"]), last["runs"][-1][1]), (64, "m"))
            self.assertEqual(sum(r[0] for r in last["runs"]), last["size"])
        self.assertGreater(left, 8 * (40 - 32))  # strips dropped to fit
        counts = sorted(len(d["strips"]) for d in seg["devices"])
        self.assertLessEqual(counts[-1] - counts[0], 1)  # taken from the device that had most

"""The feed itself: order of messages, backlog, several monitors, bye, limits, start/stop."""

import json
import os
import socket
import time

from support import JOBS, STRATA_RUN, Case, settled_agent_threads, device_specs, is_sample, live_sample, wait_until

HELLO_FIELDS = {
    "v": int, "type": str, "time": float, "pid": int, "agent_version": str, "python": str,
    "started": float, "interval": float, "settings": dict, "devices": list,
}
DEVICE_FIELDS = (
    "index", "allocated", "reserved", "active", "inactive_split", "requested", "peak_allocated",
    "peak_reserved", "peak_active", "peak_inactive_split", "peak_requested", "alloc_retries",
    "ooms", "device_allocs", "device_frees", "largest_free_block", "largest_free_block_time",
    "limit", "reserved_since", "step", "at_step_end", "unreported",
)


class FeedTest(Case):
    def torch_job(self, **env):
        j = self.job(self.env(**env))
        j.do("import torch")
        j.do("torch.cuda.init()")
        return j

    def test_hello_then_backlog_then_live(self):
        j = self.torch_job()
        # A first monitor shows when samples are in the backlog (a sample published goes to
        # every monitor and into the backlog at once): two at least, the last one with the
        # allocation, however long that takes on a loaded machine, before the monitor under
        # test connects.
        watcher = self.monitor(j.pid)
        j.do("h = torch._stub.allocate(0, 3 << 20)")
        seen = watcher.wait(lambda x: is_sample(x) and x["seq"] >= 2 and x["devices"][0]["allocated"] == 3 << 20,
                            what="two samples, the allocation in the last")
        m = self.monitor(j.pid)
        m.wait(live_sample, what="a live sample")
        msgs = m.snapshot()
        hello = msgs[0]
        self.assertEqual(hello["type"], "hello")
        for k, t in HELLO_FIELDS.items():
            self.assertIsInstance(hello[k], t, k)
        self.assertEqual(hello["pid"], j.pid)
        self.assertEqual(hello["framework"], "torch")
        self.assertEqual(hello["backend"], "native")
        self.assertIsNone(hello["note"])
        kinds = []
        for msg in msgs[1:]:
            if msg["type"] == "sample":
                kinds.append("backlog" if msg.get("backlog") else "live")
        self.assertGreaterEqual(kinds.count("backlog"), seen["seq"], "all the first monitor saw: %s" % kinds)
        first_live = kinds.index("live")
        self.assertTrue(all(k == "backlog" for k in kinds[:first_live]), kinds)
        self.assertTrue(all(k == "live" for k in kinds[first_live:]), kinds)
        seqs = [x["seq"] for x in msgs if is_sample(x)]
        self.assertEqual(seqs, list(range(1, len(seqs) + 1)), "every sample since the first, in order")
        s = msgs[-1] if is_sample(msgs[-1]) else [x for x in msgs if is_sample(x)][-1]
        d = s["devices"][0]
        self.assertEqual(tuple(d), DEVICE_FIELDS)
        self.assertEqual(d["allocated"], 3 << 20)
        self.assertEqual(d["reserved"], 4 << 20)
        self.assertLessEqual(d["reserved_since"], s["time"])
        self.assertIsInstance(s["cost"]["read_us"], int)
        self.assertIsInstance(s["cost"]["gil_max_us"], int)
        self.assertNoViolation()

    def test_late_monitor_sees_the_warm_up(self):
        # Started before torch is imported, interval 10 s: right after the job's CUDA init
        # the agent samples every 50 ms (the 1% duty cap stretches that when a tick costs
        # more CPU), so the moment between the context and the first allocation is in the
        # backlog of a monitor that connects later. The test waits for samples, not for a
        # time: a first monitor shows what was published (it goes into the backlog at once).
        # What tells warm-up from the interval is the samples' own times against the
        # interval, which only a tick costing 50 ms of CPU would stretch to.
        interval = 10.0
        j = self.job(self.env(STRATA_TEST_INTERVAL=interval))
        watcher = self.monitor(j.pid)
        j.do("import torch, time")
        # The agent has seen torch imported, not initialised: its lazy-init hook is queued.
        wait_until(lambda: j.eval("len(torch.cuda._queued_calls)") == 1, what="the agent's hook queued")
        t_init = j.eval("(torch.cuda.init(), time.time())[1]")
        j.do("torch.cuda.set_device(0)")
        # Long enough for samples at the interval, so that the times below say what failed.
        watcher.wait(lambda x: is_sample(x) and x["seq"] >= 3, timeout=3 * interval, what="three samples after CUDA init")
        warm = [x for x in watcher.snapshot() if is_sample(x)][:3]
        self.assertLess(warm[0]["time"] - t_init, interval / 2, "first sample at CUDA init, not at the interval")
        gaps = [b["time"] - a["time"] for a, b in zip(warm, warm[1:])]
        self.assertLess(max(gaps), interval / 2, "warm-up samples come faster than the interval")
        j.do("torch._stub.allocate(0, 1 << 20)")  # after samples 1 to 3 were read
        after = watcher.wait(lambda x: is_sample(x) and x["devices"][0]["reserved"] > 0,
                             what="a sample after the allocation")
        m = self.monitor(j.pid)
        m.wait(lambda x: is_sample(x) and x["seq"] >= after["seq"], what="the backlog up to the allocation")
        backlog = [x for x in m.snapshot() if is_sample(x) and x["seq"] <= after["seq"]]
        self.assertTrue(all(x.pop("backlog", None) is True for x in backlog), "sent as backlog")
        self.assertEqual(backlog, [x for x in watcher.snapshot() if is_sample(x) and x["seq"] <= after["seq"]],
                         "the backlog is what was published")
        self.assertEqual([(x["seq"], x["devices"][0]["reserved"]) for x in backlog[:3]], [(1, 0), (2, 0), (3, 0)],
                         "the context before the first allocation")
        self.assertNoViolation()

    def test_two_monitors_receive_everything(self):
        j = self.torch_job()
        a = self.monitor(j.pid)
        b = self.monitor(j.pid)
        handles = []
        for i in range(5):
            j.do("h%d = torch._stub.allocate(0, %d)" % (i, (i + 1) << 20))
            handles.append(i)
            time.sleep(0.06)
        j.do("torch._stub.oom(0, 1 << 40)", ok=False)
        for m in (a, b):
            m.wait(lambda x: x["type"] == "oom")
        last = a.wait(live_sample, start=len(a.snapshot()))
        b.wait(lambda x: x.get("seq") == last["seq"])

        def seqs(m):
            return [x["seq"] for x in m.snapshot() if "seq" in x and x["seq"] <= last["seq"]]

        self.assertEqual(seqs(a), seqs(b))
        self.assertEqual(sorted(seqs(a)), list(range(1, last["seq"] + 1)))

    def test_bye_on_exit_and_socket_removed(self):
        j = self.torch_job()
        m = self.monitor(j.pid)
        m.wait(lambda x: x["type"] == "hello")
        self.assertEqual(j.finish(), 0)
        m.wait_eof()
        self.assertEqual(m.msgs[-1]["type"], "bye")
        self.assertEqual(m.msgs[-1]["reason"], "exit")
        self.assertFalse(os.path.exists(self.sock_path(j.pid)))

    def test_stop_sends_bye_and_start_again(self):
        j = self.job()
        m = self.monitor(j.pid)
        m.wait(lambda x: x["type"] == "hello")
        j.do("import strata_feed; strata_feed.stop()")
        m.wait_eof()
        self.assertEqual(m.msgs[-1]["reason"], "stop")
        self.assertFalse(os.path.exists(self.sock_path(j.pid)))
        self.assertEqual(j.eval("strata_feed.start(0.05)"), True)
        m2 = self.monitor(j.pid)
        m2.wait(lambda x: x["type"] == "hello")

    def test_start_is_idempotent(self):
        j = self.job()
        self.assertEqual(j.eval("__import__('strata_feed').start(0.05)"), True)
        self.assertEqual(j.eval("__import__('strata_feed').start(1.0, '/nonexistent/x')"), True)
        self.assertEqual(settled_agent_threads(j.pid).count("strata-feed"), 1)
        self.assertEqual(os.listdir(self.feed), ["%d.sock" % j.pid])
        time.sleep(0.1)
        self.assertEqual("".join(x for x in j.err if x), "")

    def test_exit_code_and_output_unchanged(self):
        plain = os.path.join(JOBS, "plain.py")
        for args, rc in (([], 7), (["raise"], 1)):
            results = []
            for with_agent in (False, True):
                env = self.env()
                if with_agent:
                    env["PYTHONPATH"] = os.pathsep.join([STRATA_RUN, env["PYTHONPATH"]])
                j = self.job(env, script=plain, args=args, ready=False)
                out = []
                while True:
                    line = j.out.get(timeout=10)
                    if line is None:
                        break
                    out.append(line)
                code = j.p.wait(10)
                results.append((code, "".join(out), j.stderr()))
            self.assertEqual(results[0], results[1])
            self.assertEqual(results[0][0], rc)
            self.assertEqual(os.listdir(self.feed), [], "socket removed at exit")

    def test_oom_then_exit_reaches_the_monitor_before_bye(self):
        j = self.torch_job()
        j.do("import sys; a = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        m.wait(is_sample)
        code = "try: torch._stub.oom(0, 1 << 40)\nexcept torch.cuda.OutOfMemoryError: sys.exit(3)\n"
        j.p.stdin.write("exec(%r)\n" % code)
        j.p.stdin.flush()
        self.assertEqual(j.p.wait(10), 3)
        m.wait_eof()
        # A hello may come between them: the agent says a new interval when a tick ran long
        # (a loaded machine), and a hello carries nothing of the OOM. What matters is that
        # the oom is the last word before the bye.
        types = [x["type"] for x in m.snapshot() if x["type"] != "hello"]
        self.assertEqual(types[-2:], ["oom", "bye"])

    def test_slow_monitor_is_dropped_others_unharmed(self):
        j = self.torch_job(STRATA_STUB_DEVICES=json.dumps(device_specs(1)))
        j.do("h = torch._stub.allocate(0, 1 << 20)")
        slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(self.sock_path(j.pid))
        fast = self.monitor(j.pid)
        fast.wait(live_sample)
        # oom messages (about 750 bytes each) until more than 4 MiB wait for the monitor
        # that never reads and the agent drops it.
        j.do("import strata_feed, time")
        j.do("exec(%r)" % (
            "n = 0\n"
            "while strata_feed._agent.hub.dropped == 0 and n < 40000:\n"
            "    try: torch._stub.oom(0, 1 << 40)\n"
            "    except torch.cuda.OutOfMemoryError: pass\n"
            "    n += 1\n"
            "    if n % 50 == 0: time.sleep(0.001)\n"
        ))
        self.assertEqual(j.eval("strata_feed._agent.hub.dropped"), 1)
        n = len(fast.snapshot())
        fast.wait(live_sample, start=n + 1, what="live samples after the flood")
        # The slow one was closed: reading it to the end gives EOF, well before all was sent.
        slow.settimeout(5)
        got = 0
        end = time.monotonic() + 10
        while time.monotonic() < end:
            data = slow.recv(1 << 16)
            if not data:
                break
            got += len(data)
        slow.close()
        self.assertFalse(data, "the slow monitor was not dropped")
        self.assertLess(got, 4 * 1024 * 1024 + 512 * 1024)
        self.assertGreater(fast.raw_bytes, got)
        self.assertFalse(fast.eof)
        # Bounded backlog: a monitor connecting now gets at most 4 MiB of samples and ooms
        # (besides the latest segment map and sites outcomes, kept apart).
        late = self.monitor(j.pid)
        late.wait(live_sample, what="live sample on a late monitor")
        backlog = sum(len(json.dumps(x, separators=(",", ":"))) + 1
                      for x in late.snapshot() if x.get("backlog") and x["type"] in ("sample", "oom"))
        kept = [x["type"] for x in late.snapshot() if x.get("backlog") and x["type"] not in ("sample", "oom")]
        self.assertIn(kept, ([], ["segments"]))
        self.assertLessEqual(backlog, 4 * 1024 * 1024)
        self.assertGreater(backlog, 3 * 1024 * 1024)
        self.assertEqual(j.finish(), 0)

    def test_monitor_that_writes_is_ignored(self):
        j = self.torch_job()
        j.do("h = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        m.sock.sendall(b"hello agent\n" * 1000)
        m.wait(live_sample)
        n = len(m.snapshot())
        m.wait(live_sample, start=n)

    # In the job: a `segments` or `sites` message whose line is exactly n bytes, its newline
    # included (its last strip or site padded to the byte).
    MADE = (
        "def made(n, kind):\n"
        "    from strata_feed import _wire\n"
        "    if kind == 'segments':\n"
        "        item = lambda pad: {'pool': 'large' + 'x' * pad, 'expandable': False, 'size': 2097152,\n"
        "                            'live': 0, 'free': 2097152, 'largest_free': 2097152, 'pinned': False,\n"
        "                            'runs': [[2097152, 'f']]}\n"
        "        dev = {'index': 0, 'pools': [], 'strips': [], 'strips_left_out': 0}\n"
        "        msg = {'v': 1, 'type': 'segments', 'time': 1.5, 'took': 0.001, 'devices': [dev]}\n"
        "        items = dev['strips']\n"
        "    else:\n"
        "        item = lambda pad: {'site': 'job.py:7 in f' + 'x' * pad, 'via': [], 'bytes': 1048576, 'count': 1}\n"
        "        dev = {'index': 0, 'live': [], 'growth': []}\n"
        "        msg = {'v': 1, 'type': 'sites', 'time': 1.5, 'id': 1, 'state': 'done', 'stopped': None,\n"
        "               'devices': [dev]}\n"
        "        items = dev['live']\n"
        "    base, step = len(_wire.encode(msg)), len(_wire.encode(item(0)))  # an item and its comma\n"
        "    items.extend(item(0) for _ in range((n - base + 1) // step))\n"
        "    items[-1] = item(n - len(_wire.encode(msg)))\n"
        "    assert len(_wire.encode(msg)) == n\n"
        "    return msg\n"
    )

    def test_what_is_made_to_fit_still_fits_with_the_backlog_mark(self):
        # A segment map or a sites outcome cut to fit the line, of every length about the
        # limit: sent again to a monitor that comes later it carries "backlog": true, and must
        # still fit (before, one made to exactly 64 KiB went out 15 bytes over it).
        j = self.job()
        j.do("exec(%r)" % self.MADE)
        j.do("from strata_feed import _segmap, _siterule, _wire")
        longest = j.eval(
            "max((len(_wire.backlog_form(f(made(n, k)))), n, k) for n in range(65480, 65600)"
            " for k, f in (('segments', _segmap.fit), ('sites', _siterule.fit_sites)))"
        )
        self.assertLessEqual(longest[0], 65536, longest)

    def test_a_segment_map_cut_to_fit_reaches_a_monitor_that_comes_later(self):
        # The map the agent keeps for monitors to come, made from a snapshot whose map is
        # exactly 64 KiB: the monitor connected when it was made gets it, and so does one
        # that connects after (before, that one got a line 15 bytes too long, which a monitor
        # discards: no segment map until the next snapshot).
        j = self.job()
        j.do("exec(%r)" % self.MADE)
        first = self.monitor(j.pid)
        first.wait(lambda x: x["type"] == "hello", what="the hello")
        j.do("import strata_feed; from strata_feed import _segmap; msg = made(65536, 'segments')")
        strips = j.eval("len(msg['devices'][0]['strips'])")
        j.do("strata_feed._agent.post_kept(('segments',), _segmap.fit(msg))")
        live = first.wait(lambda x: x["type"] == "segments", what="the segment map")
        later = self.monitor(j.pid)
        kept = later.wait(lambda x: x["type"] == "segments", what="the kept segment map")
        self.assertIs(kept.pop("backlog"), True)
        self.assertEqual(kept, live)
        d = kept["devices"][0]
        self.assertGreater(d["strips_left_out"], 0)
        self.assertEqual(len(d["strips"]) + d["strips_left_out"], strips)

    def test_socket_of_an_earlier_process_is_replaced(self):
        # A stale socket file of this very pid (an earlier process with the same pid).
        env = self.env(STRATA_TEST_START="no")
        j = self.job(env)
        os.makedirs(self.feed, 0o700, exist_ok=True)
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(self.sock_path(j.pid))
        stale.close()
        self.assertEqual(j.eval("__import__('strata_feed').start(0.05)"), True)
        m = self.monitor(j.pid)
        self.assertEqual(m.wait(lambda x: x["type"] == "hello")["pid"], j.pid)

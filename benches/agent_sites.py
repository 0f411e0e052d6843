#!/usr/bin/env python3
"""What a sites window costs, on the torch stub (tests/python/stubs), in one process.

    python3 benches/agent_sites.py [--window 3] [--ring 100000] [--ops-seconds 2]

1. A job that allocates and frees as fast as it can (one alloc and one free a turn: three
   trace events, alloc, free_requested, free_completed): its turns a second with no window,
   while a window records (the stub's recording, a Python frame walk, stands in for torch's
   C++ one, about 2 µs an event upstream), and while the agent makes the window's summary
   (its slices share the GIL with the job). The agent's own numbers come from its `done`
   message: the reduction's CPU, its longest GIL hold, the snapshot call.
2. The summaries' size on the wire: that window's `sites` and `segments` lines, and a
   worst case (top 50, long site texts, 4 devices) cut to the 64 KiB line.
3. The reduction alone over a full ring of --ring entries, a slice at a time with the GIL
   given up between slices: its CPU, the slices, the longest hold (wall and CPU), and per
   entry; then the segment map of the same snapshot.
"""

import argparse
import gc
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests", "python", "stubs"), os.path.join(ROOT, "assets", "python")]


class Reader(object):
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.lines = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        buf = b""
        while True:
            data = self.s.recv(1 << 16)
            if not data:
                return
            buf += data
            *lines, buf = buf.split(b"\n")
            with self.cond:
                self.lines.extend(lines)
                self.cond.notify_all()

    def wait(self, pred, timeout=120):
        end = time.monotonic() + timeout
        with self.cond:
            i = 0
            while True:
                while i < len(self.lines):
                    m = json.loads(self.lines[i])
                    if pred(m):
                        return m, len(self.lines[i]) + 1
                    i += 1
                left = end - time.monotonic()
                if left <= 0:
                    raise SystemExit("timed out")
                self.cond.wait(left)


def turns(torch, seconds, stop=None):
    """Alloc/free turns a second of the job's loop for `seconds` (or until stop())."""
    n = 0
    t0 = time.perf_counter()
    end = t0 + (seconds or 0)
    alloc, free = torch._stub.allocate, torch._stub.free
    while True:
        for _ in range(64):
            free(alloc(0, 65536))
        n += 64
        t = time.perf_counter()
        if (stop is not None and stop()) or (stop is None and t >= end):
            return n / (t - t0)


def job_with_a_window(args, torch, strata_feed, feed):
    keep = [torch._stub.allocate(0, 8 << 20) for _ in range(4)]
    strata_feed.start(interval=0.5, feed_dir=feed)
    r = Reader(os.path.join(feed, "%d.sock" % os.getpid()))
    r.wait(lambda m: m["type"] == "hello" and m.get("devices"))
    base = turns(torch, args.ops_seconds)
    r.s.sendall(json.dumps({"v": 1, "type": "sites_request", "id": 1, "seconds": args.window, "top": 20}).encode() + b"\n")
    r.wait(lambda m: m.get("type") == "sites" and m.get("state") == "running")
    recording = turns(torch, args.window * 0.8)
    while torch._C._cuda_isHistoryEnabled():
        time.sleep(0.001)
    done = []

    def finished():
        with r.cond:
            done[:] = [x for x in r.lines if b'"state":"done"' in x or b'"state":"failed"' in x]
        return bool(done)

    reducing = turns(torch, None, stop=finished)
    msg, size = r.wait(lambda m: m.get("type") == "sites" and m.get("state") in ("done", "failed"))
    seg, seg_size = r.wait(lambda m: m.get("type") == "segments" and m.get("time") == msg.get("time"))
    ev = 3 * recording
    print("1. a job allocating and freeing at full rate (64 KiB blocks, one device):")
    print("   no window            %8.0f turns/s" % base)
    print("   window recording     %8.0f turns/s (%.0f trace events/s; the stub's recording: %.1f us an event)"
          % (recording, ev, (1 / recording - 1 / base) / 3 * 1e6))
    print("   summary being made   %8.0f turns/s (%.0f%% of no window)" % (reducing, 100 * reducing / base))
    if msg["state"] == "done":
        c = msg["cost"]
        print("   window %.2f s: %d entries, dropped %s; reduction %.1f ms CPU, longest GIL hold %.2f ms; "
              "_snapshot() %.1f ms (one hold)" % (msg["window"], msg["entries"], msg["dropped"], c["cpu"] * 1e3,
                                                   c["gil_max"] * 1e3, c["snapshot"] * 1e3))
    else:
        print("   window failed: %s" % msg["reason"])
    print("2. on the wire: sites %d bytes, segments %d bytes" % (size, seg_size))
    strata_feed.stop()
    del keep


def reduction_alone(args, torch):
    from strata_feed import _segmap, _sites, _slices

    n = args.ring
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=n)
    held = []
    i = 0
    while len(torch._stub.DEVICES[0].ring) < n:
        h = torch._stub.allocate(0, 4096 + (i % 13) * 512)
        if i % 8 == 0:
            held.append(h)
        else:
            torch._stub.free(h)
        i += 1
    t0 = time.perf_counter()
    snap = torch.cuda.memory._snapshot()
    snap_s = time.perf_counter() - t0
    torch.cuda.memory._record_memory_history(None)
    gc.collect()  # the snapshot's objects, once: the snapshot's cost, not the slicing's
    red = _sites.Reduction(snap)
    clock = _slices.Clock()
    run = _slices.Run(red.run(clock), clock, budget=_sites.CPU_BUDGET, record=True).to_end()
    cpu = [c for _, c in run.record]
    hold = [h for h, _ in run.record]
    blocks = sum(len(s["blocks"]) for s in snap["segments"])
    print("3. the reduction over a ring of %d entries (%d live blocks; the stub's _snapshot() %.0f ms):"
          % (len(snap["device_traces"][0]), blocks, snap_s * 1e3))
    print("   %.1f ms CPU in %d slices (%.2f us an entry), longest hold %.2f ms wall, %.2f ms CPU%s"
          % (run.cpu_ns / 1e6, run.slices, run.cpu_ns / 1e3 / max(1, red.walked()), max(hold) / 1e6, max(cpu) / 1e6,
             "; stopped at its budget" if run.over_budget else ""))
    smap = _segmap.SegmentMap(snap["segments"])
    clock = _slices.Clock()
    run = _slices.Run(smap.run(clock), clock, record=True).to_end()
    line = _segmap.fit({"v": 1, "type": "segments", "time": 0.0, "took": 0.0, "devices": smap.devices()})
    print("   segment map of the same snapshot (%d segments, %d blocks): %.2f ms CPU in %d slices, longest hold "
          "%.2f ms wall, %.2f ms CPU; line %d bytes" % (len(snap["segments"]), blocks, run.cpu_ns / 1e6, run.slices,
                                                          run.hold_max_ns / 1e6, max(c for _, c in run.record) / 1e6,
                                                          len(line)))
    for h in held:
        torch._stub.free(h)


def worst_line():
    from strata_feed import _sites

    devices = []
    for d in range(4):
        site = lambda k: "/%s/code.py:%d in f%d" % ("d" * 240, k, k)  # noqa: E731
        items = [{"site": site(k), "via": [site(k + 1000), site(k + 2000)], "bytes": (k + 1) << 20, "count": 1}
                 for k in range(50)]
        growth = [{"site": x["site"], "via": x["via"], "bytes": x["bytes"], "allocs": 1, "frees": 0} for x in items]
        devices.append({"index": d, "live": items, "live_bytes": 0, "live_blocks": 0, "live_unattributed": 0,
                        "growth": growth, "growth_bytes": 0})
    msg = {"v": 1, "type": "sites", "time": 0.0, "id": 1, "state": "done", "devices": devices, "stopped": None}
    full = len(json.dumps(msg, separators=(",", ":"))) + 1
    line = _sites.fit_sites(msg)
    print("   worst case (4 devices, top 50, 800-character sites): %d bytes uncut, %d bytes sent (%s)"
          % (full, len(line), msg["stopped"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=float, default=3.0)
    ap.add_argument("--ring", type=int, default=100000)
    ap.add_argument("--ops-seconds", type=float, default=2.0)
    args = ap.parse_args()
    feed = tempfile.mkdtemp(prefix="strata-sites-")
    import strata_feed
    import torch

    torch.cuda.init()
    try:
        job_with_a_window(args, torch, strata_feed, feed)
        worst_line()
        reduction_alone(args, torch)
    finally:
        shutil.rmtree(feed, ignore_errors=True)


main()

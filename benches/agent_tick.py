#!/usr/bin/env python3
"""The agent's own cost per sample, in process, on the torch stub: the CPU time of one tick
(read every device, build and encode the sample, publish it) against the stub's
memory_stats alone, whose cost is the stub's (Python), not the agent's.

    python3 benches/agent_tick.py [--devices 1] [--ticks 2000]
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests", "python", "stubs"), os.path.join(ROOT, "assets", "python")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--ticks", type=int, default=2000)
    args = ap.parse_args()
    os.environ["STRATA_STUB_DEVICES"] = json.dumps([
        {"uuid": "%08x-1111-4222-8333-%012x" % (0x5F3C2A10 + i, i),
         "pci_bus_id": "00000000:%02X:00.0" % (0x18 + 0x10 * i), "name": "stub", "total": 80 << 30}
        for i in range(args.devices)])
    feed_dir = tempfile.mkdtemp(prefix="strata-tick-")
    import strata_feed
    import torch

    torch.cuda.init()
    keep = [torch._stub.allocate(d, 1 << 20) for d in range(args.devices) for _ in range(10)]
    strata_feed.start(interval=3600, feed_dir=feed_dir)  # its own thread stays asleep
    time.sleep(0.3)
    agent = strata_feed._current()
    n = args.ticks
    t0 = time.thread_time()
    for _ in range(n):
        for d in range(args.devices):
            torch.cuda.memory_stats(d)
    stub = (time.thread_time() - t0) / n
    t0 = time.thread_time()
    for _ in range(n):
        agent._tick()
    tick = (time.thread_time() - t0) / n
    print("devices %d: whole tick %.0f us CPU, of which the stub's memory_stats %.0f us: the agent's own %.0f us"
          % (args.devices, tick * 1e6, stub * 1e6, (tick - stub) * 1e6))
    strata_feed.stop()
    shutil.rmtree(feed_dir, ignore_errors=True)
    del keep


main()

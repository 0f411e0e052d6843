#!/usr/bin/env python3
"""What the allocator-feed agent costs the job it runs in, on the stub frameworks.

    python3 benches/agent_cost.py [--seconds 3] [--devices 8]

For the torch stub and the JAX stub (whose memory_stats runs gc.collect(), as AGENT-FACTS
says the real one does), each in its own process with 8 devices:
  - CPU per sample: CPU time of the agent thread (its pthread CPU clock) over the run,
    divided by the samples it sent; and the wall time of one sampling call (reading every
    device and building the entries), median and max;
  - the longest GIL hold: the longest single framework call while sampling (gil_max_us,
    which the agent reports in each sample), and, from a second Python thread that spins
    while the agent samples, the longest gap in its progress (against the same thread
    without the agent);
  - the interval the agent settles on (it stretches it to keep under ~1 % of a core).
Standard library only; the fake libcuda the JAX stub needs is built with cc.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSETS = os.path.join(ROOT, "assets", "python")
STUBS = os.path.join(ROOT, "tests", "python", "stubs")
FAKE_CUDA_C = os.path.join(ROOT, "tests", "python", "fake_libcuda.c")


def specs(n):
    return [
        {
            "uuid": "%08x-1111-4222-8333-%012x" % (0x5F3C2A10 + i, i),
            "pci_bus_id": "00000000:%02X:00.0" % (0x18 + 0x10 * i),
            "name": "NVIDIA Stub %d" % i,
            "total": 80 << 30,
        }
        for i in range(n)
    ]


def max_gap(seconds):
    """Spin for `seconds`: the longest time between two turns of the loop, and how many
    turns waited more than 1 ms (only those are kept: the loop turns millions of times)."""
    longest, slow = 0.0, 0
    end = time.perf_counter() + seconds
    last = time.perf_counter()
    while last < end:
        now = time.perf_counter()
        gap = now - last
        last = now
        if gap > 0.001:
            slow += 1
            if gap > longest:
                longest = gap
    return longest, slow


def gap_in_thread(seconds):
    out = {}
    t = threading.Thread(target=lambda: out.update(r=max_gap(seconds)))
    t.start()
    t.join()
    return out["r"]


def child(framework, seconds, ndev, heap_objects):
    sys.path[:0] = [STUBS, ASSETS]
    base_gap = gap_in_thread(1.0)
    import strata_feed

    if framework == "torch":
        import torch

        keep = [torch._stub.allocate(i, (i + 1) << 20) for i in range(ndev)]
    else:
        import jax

        jax._stub.init()
        keep = [jax._stub.allocate(i, (i + 1) << 20) for i in range(ndev)]
        # A job's heap: the gc.collect() in each memory_stats call walks it.
        heap = [[i] for i in range(heap_objects)]  # noqa: F841
    walls = []
    from strata_feed import _frameworks

    real_sample = _frameworks.Frameworks.sample

    def timed(self, now, timer):
        t0 = time.perf_counter_ns()
        try:
            return real_sample(self, now, timer)
        finally:
            if self.reader is not None:
                walls.append(time.perf_counter_ns() - t0)

    _frameworks.Frameworks.sample = timed  # before start: the first sample counts too
    strata_feed.start(interval=0.05)
    agent = strata_feed._agent
    clock = time.pthread_getcpuclockid(agent.thread.ident)
    samples, hellos = [], []

    def read():
        s = socket.socket(socket.AF_UNIX)
        s.connect(agent.sock_path)
        buf = b""
        while True:
            data = s.recv(1 << 16)
            if not data:
                return
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                m = json.loads(line)
                (samples if m["type"] == "sample" else hellos).append(m)

    threading.Thread(target=read, daemon=True).start()
    # Phase 1, the cost: the agent alone, from its start (warm-up included: with a costly
    # framework the stretched interval leaves few samples after it).
    cpu0, n0, w0 = 0.0, 0, 0
    time.sleep(seconds)
    cpu1, n1, w1 = time.clock_gettime(clock), len(samples), len(walls)
    # Phase 2, the GIL: a thread spins while the agent runs; one sample is forced in the
    # middle so that even a long interval has one in the window.
    def poke():
        time.sleep(seconds / 2)
        agent.next_tick = 0.0
        agent.wake()

    threading.Thread(target=poke, daemon=True).start()
    agent_gap = gap_in_thread(seconds)
    run = samples[n0:n1]
    wall = walls[w0:w1]
    res = {
        "framework": framework + (" heap %dk" % (heap_objects // 1000) if framework == "jax" else ""),
        "devices": ndev,
        "samples": len(run),
        "interval": hellos[-1]["interval"] if hellos else None,
        "cpu_us_per_sample": (cpu1 - cpu0) * 1e6 / max(1, len(run)),
        "duty_pct": (cpu1 - cpu0) * 100 / seconds,
        "steady_duty_pct": None,
        "gil_max_us_phase2": max((s["cost"]["gil_max_us"] for s in samples[n1:]), default=None),
        "read_us_median": statistics.median(s["cost"]["read_us"] for s in run) if run else None,
        "sample_wall_us_median": statistics.median(wall) / 1000 if wall else None,
        "sample_wall_us_max": max(wall) / 1000 if wall else None,
        "gil_max_us": max(s["cost"]["gil_max_us"] for s in run) if run else None,
        "gap_ms_without": base_gap[0] * 1000,
        "gap_ms_with": agent_gap[0] * 1000,
        "gaps_over_1ms_with": agent_gap[1],
        "gaps_over_1ms_without": base_gap[1],
    }
    if res["interval"] and run:
        res["steady_duty_pct"] = res["cpu_us_per_sample"] / 1e6 / res["interval"] * 100
    strata_feed.stop()
    del keep
    print(json.dumps(res))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--child", choices=("torch", "jax"))
    ap.add_argument("--heap", type=int, default=0, help="objects in the job's heap (jax child)")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.seconds, args.devices, args.heap)
        return
    tmp = tempfile.mkdtemp(prefix="strata-bench-")
    try:
        cc = shutil.which("cc") or shutil.which("gcc")
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-Wl,-soname,libcuda.so.1", "-o",
                        os.path.join(tmp, "libcuda.so.1"), FAKE_CUDA_C], check=True)
        sp = specs(args.devices)
        env = dict(os.environ)
        env.update(
            PYTHONDONTWRITEBYTECODE="1",
            STRATA_FEED_DIR=os.path.join(tmp, "feed"),
            STRATA_STUB_DEVICES=json.dumps(sp),
            STRATA_FAKE_CUDA=";".join("%s,%s,idle" % (d["uuid"].replace("-", ""), d["pci_bus_id"][4:]) for d in sp),
            LD_LIBRARY_PATH=tmp + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else ""),
        )
        rows = []
        for fw, heap in (("torch", 0), ("jax", 0), ("jax", 200000)):
            out = subprocess.run([sys.executable, __file__, "--child", fw, "--seconds", str(args.seconds),
                                  "--devices", str(args.devices), "--heap", str(heap)], env=env, check=True,
                                 stdout=subprocess.PIPE, text=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        shutil.rmtree(tmp, True)
    cols = (
        ("framework", "framework", "%s"),
        ("devices", "devs", "%d"),
        ("interval", "interval s", "%.3g"),
        ("samples", "samples", "%d"),
        ("cpu_us_per_sample", "agent CPU us/sample", "%.0f"),
        ("duty_pct", "agent CPU % (run, warm-up incl.)", "%.2f"),
        ("steady_duty_pct", "agent CPU % (per interval)", "%.2f"),
        ("read_us_median", "read_us p50", "%.0f"),
        ("sample_wall_us_median", "sample wall us p50", "%.0f"),
        ("sample_wall_us_max", "sample wall us max", "%.0f"),
        ("gil_max_us", "longest call us", "%d"),
        ("gil_max_us_phase2", "longest call us (ph.2)", "%d"),
        ("gap_ms_without", "thread gap ms (no agent)", "%.2f"),
        ("gap_ms_with", "thread gap ms (agent)", "%.2f"),
        ("gaps_over_1ms_without", "gaps > 1 ms (no agent)", "%d"),
        ("gaps_over_1ms_with", "gaps > 1 ms (agent)", "%d"),
    )
    width = max(len(c[1]) for c in cols)
    print("%-*s  %s" % (width, "", "  ".join("%14s" % r["framework"] for r in rows)))
    for key, label, fmt in cols[1:]:
        print("%-*s  %s" % (width, label, "  ".join(
            "%14s" % (fmt % r[key] if r[key] is not None else "-") for r in rows)))


if __name__ == "__main__":
    main()

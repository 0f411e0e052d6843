"""The cost of the agent's own context reading (strata_feed._nvml, strata_feed._context).

    python benches/agent_context.py [--nvml-dir DIR]

DIR holds a libnvidia-ml.so.1: the fake NVML library (tests/fake-nvml; the Rust tests leave
links to it in target/fake-nvml/soname, the default) or, on a GPU node, the driver's own
directory. With the fake the figures are the agent's side only (ctypes, the struct reads,
the fake's own scenario parsing at each nvmlInit), not a real driver's nvmlInit. Prints:
- the first reading: loading the library, nvmlInit_v2, the handle by UUID, the process
  list, nvmlShutdown (wall and CPU time of the calling thread);
- each later reading (the agent makes at most three per device);
- Contexts.update per sampler tick once every device is read (what every later tick pays).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
UUID = "5f3c2a10-1111-4222-8333-00000000abc0"


def child():
    sys.stdin.readline()  # the scenario is written
    sys.path.insert(0, os.path.join(REPO, "assets", "python"))
    from strata_feed import _context, _nvml

    t0, c0 = time.perf_counter(), time.thread_time()
    got = _nvml.process_used(UUID, None)
    print("first reading: %.2f ms wall, %.2f ms CPU, read %s" % (
        (time.perf_counter() - t0) * 1e3, (time.thread_time() - c0) * 1e3, got))
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        _nvml.process_used(UUID, None)
    print("later readings: %.0f us each" % ((time.perf_counter() - t0) / n * 1e6))

    class Reader(object):
        ident = {0: {"uuid": UUID}}

        def pool_state(self, i):
            return (0, 0, 0)

    contexts, entries = _context.Contexts(), [{"index": 0, "reserved": 0, "device_allocs": 0, "peak_reserved": 0}]
    contexts.update(Reader(), entries, True)
    n = 100000
    t0 = time.perf_counter()
    for _ in range(n):
        contexts.update(Reader(), entries, True)
    print("Contexts.update once read: %.2f us per tick" % ((time.perf_counter() - t0) / n * 1e6))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvml-dir", default=os.path.join(REPO, "target", "fake-nvml", "soname"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "nvml.json")
        env = dict(os.environ, LD_LIBRARY_PATH=args.nvml_dir, STRATA_FAKE_NVML_SCENARIO=path)
        p = subprocess.Popen([sys.executable, __file__, "--child"], env=env, stdin=subprocess.PIPE)
        # The scenario lists the child's pid, with its context.
        with open(path, "w") as f:
            json.dump({"devices": [{
                "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-" + UUID, "pci_bus_id": "00000000:18:00.0",
                "memory": {"total": 80 << 30, "used": 530 << 20},
                "compute_processes": [{"pid": p.pid, "used": 530 << 20}],
            }]}, f)
        p.stdin.close()
        return p.wait()


if __name__ == "__main__":
    sys.exit(main())

"""The fake NVML node the shell benchmarks run on: 8 H100s x 8 processes (real PIDs given on
the command line, so /proc names them), as a scenario for tests/fake-nvml.

Still by default (NVML's figures constant, as when the monitor's output was compared with
nvitop's and gpustat's); `--busy`: every process's memory saw-tooths by 1-2 GiB on its plateau, each with
its own period, and SM and GPU utilisation move at every poll (600 polls, then again).

Usage: python3 benches/fake_node.py OUT.json [--busy] PID x 64
"""
import json
import math
import sys

args = sys.argv[1:]
busy = "--busy" in args
args = [a for a in args if a != "--busy"]
path, pids = args[0], [int(p) for p in args[1:]]
MiB, GiB = 1 << 20, 1 << 30
POLLS = 600 if busy else 1
devices = []
for g in range(8):
    procs, util = [], []
    for k in range(8):
        i = g * 8 + k
        # A training step's saw-tooth of a few GiB on a plateau, each its own period.
        base, depth, period = (3 + k % 4) * GiB, (1 + k % 2) * GiB * busy, 7 + i % 11
        used = [base + int(depth * ((t % period) / period)) // (2 * MiB) * (2 * MiB) for t in range(POLLS)]
        procs.append({"pid": pids[i], "used": used})
        util.append({"pid": pids[i], "sm": [60 + int(30 * busy * math.sin(t / (3 + k))) for t in range(POLLS)],
                     "mem": 30, "enc": 0, "dec": 0})
    total_used = [sum(p["used"][t] for p in procs) for t in range(POLLS)]
    devices.append({"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5f3c2a1e-8b7d-4c6e-9a10-%012x" % g,
                    "pci_bus_id": "00000000:%02X:00.0" % (0x18 + 16 * g),
                    "memory": {"total": 85520809984, "reserved": 536870912, "used": total_used},
                    "utilization": {"gpu": [85 + (t + g) % 10 * busy for t in range(POLLS)], "memory": 40},
                    "mig_mode": "NotSupported", "compute_processes": procs,
                    "process_utilization": util})
with open(path, "w") as out:
    json.dump({"devices": devices}, out)

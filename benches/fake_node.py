"""The fake NVML node the shell benchmarks run on, as a scenario for tests/fake-nvml: H100s,
each with its own real processes (PIDs given on the command line or in a file, so /proc
names them). By default 8 GPUs x 8 processes, as benches/bandwidth.sh and record.sh use it.

Still by default (NVML's figures constant, as when the monitor's output was compared with
nvitop's and gpustat's); `--busy`: every process's memory saw-tooths by 1-2 GiB (scaled down
with more processes a GPU) on its plateau, each with its own period, and SM and GPU
utilisation move at every poll (600 polls, then again).

`--gpus N --per-gpu M`: N GPUs with M processes each (N x M PIDs, GPU g gets PIDs
g*M .. g*M+M-1). `--mig`: each GPU in MIG mode with 7 GPU instances of the 1g.10gb profile
(GPU instance ids 7-13, compute instance 0, each with its share of BAR1), its M processes
spread over them round-robin;
as on real MIG GPUs, utilisation and per-process utilisation are not supported then.
`--vitals`: what a real board also answers (temperature, power and its limit, SM clock,
PCIe link and traffic, temperature thresholds, video engines, BAR1; no fan, as on an SXM
board),
for monitors that draw them.

Usage: python3 benches/fake_node.py OUT.json [--busy] [--vitals] [--mig] [--gpus N]
       [--per-gpu M] (PID x N*M | --pids FILE)
"""
import argparse
import json
import math

MiB, GiB = 1 << 20, 1 << 30
MIG_SLOTS = 7
MIG_TOTAL = 9984 * MiB  # an H100 80GB's 1g.10gb instance

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("out")
parser.add_argument("--busy", action="store_true")
parser.add_argument("--vitals", action="store_true")
parser.add_argument("--mig", action="store_true")
parser.add_argument("--gpus", type=int, default=8)
parser.add_argument("--per-gpu", type=int, default=8)
parser.add_argument("--pids", metavar="FILE", help="whitespace-separated PIDs")
parser.add_argument("pid", nargs="*", type=int)
opts = parser.parse_intermixed_args()
pids = opts.pid + ([int(p) for p in open(opts.pids).read().split()] if opts.pids else [])
gpus, per = opts.gpus, opts.per_gpu
if gpus < 1 or per < 0 or len(pids) != gpus * per:
    parser.error(f"{gpus} GPUs x {per} processes need {gpus * per} PIDs, got {len(pids)}")
busy = opts.busy
POLLS = 600 if busy else 1
# Process memory shrinks as processes multiply, so that a GPU's processes fit in it.
scale = 8 / max(per, 8)


def mib2(n):
    """Bytes, rounded down to the 2 MiB an allocator's segments come in."""
    return int(n) // (2 * MiB) * (2 * MiB)


def process(g, k):
    i = g * per + k
    if opts.mig:
        # 512-896 MiB: at most 10 processes share a 1g.10gb instance.
        base, depth = (512 + 128 * (k % 4)) * MiB, 64 * MiB * busy
    else:
        # A training step's saw-tooth of a few GiB on a plateau, each its own period.
        base, depth = (3 + k % 4) * GiB * scale, (1 + k % 2) * GiB * busy * scale
    period = 7 + i % 11
    used = [mib2(base + depth * ((t % period) / period)) for t in range(POLLS)]
    util = {"pid": pids[i], "sm": [60 + int(30 * busy * math.sin(t / (3 + k % 8))) for t in range(POLLS)],
            "mem": 30, "enc": 0, "dec": 0}
    return {"pid": pids[i], "used": used}, util


def vitals(g):
    return {"temperature": 41 + g, "power_usage": [310000 + 1000 * ((t + g) % 40) * busy for t in range(POLLS)],
            "power_limit": 700000, "sm_clock": 1980, "sm_clock_max": 1980,
            "pcie_link": {"generation": 5, "width": 16, "max_generation": 5, "max_width": 16},
            "pcie_throughput": {"tx": 1200, "rx": 5300},
            "temperature_thresholds": {"shutdown": 92, "slowdown": 89},
            "encoder_utilization": 0, "decoder_utilization": 0,
            "bar1_memory": {"total": 128 * GiB, "used": 8 * MiB}}


def total(procs):
    return [sum(p["used"][t] for p in procs) for t in range(POLLS)]


devices = []
for g in range(gpus):
    made = [process(g, k) for k in range(per)]
    procs, util = [p for p, _ in made], [u for _, u in made]
    device = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5f3c2a1e-8b7d-4c6e-9a10-%012x" % g,
              "pci_bus_id": "00000000:%02X:00.0" % ((0x18 + 16 * g) % 0x100),
              "memory": {"total": 85520809984, "reserved": 536870912, "used": total(procs)}}
    if opts.mig:
        mig = []
        for s in range(MIG_SLOTS):
            mine = procs[s::MIG_SLOTS]
            mig.append({"slot": s, "uuid": "MIG-%08x-8b7d-5c6e-9a10-%012x" % (g, s),
                        "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
                        "gpu_instance_id": 7 + s, "compute_instance_id": 0,
                        "memory": {"total": MIG_TOTAL, "used": total(mine) if mine else 0},
                        # A 1g slice's share of the aperture: NVML answers it on MIG devices.
                        "bar1_memory": {"total": 16 * GiB, "used": 2 * MiB},
                        "compute_processes": mine})
        device.update({"utilization": "NotSupported", "mig_mode": {"current": 1, "pending": 1},
                       "max_mig_devices": MIG_SLOTS, "mig": mig,
                       "process_utilization": "NotSupported"})
    else:
        device.update({"utilization": {"gpu": [85 + (t + g) % 10 * busy for t in range(POLLS)], "memory": 40},
                       "mig_mode": "NotSupported", "compute_processes": procs,
                       "process_utilization": util})
    if opts.vitals:
        device.update(vitals(g))
    devices.append(device)
with open(opts.out, "w") as out:
    json.dump({"devices": devices}, out)

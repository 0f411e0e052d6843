"""The cost of the agent's training-step hook to the job, per step, and its longest hold of
the GIL (the hook runs on the job's thread, holding the GIL throughout).

    python benches/agent_steps.py [--steps 200000] [--devices 1]          # stub torch
    VENV/bin/python benches/agent_steps.py --real [--steps 20000]         # real torch, CPU

On a loaded machine, `chrt -f 10 python benches/agent_steps.py` (root) keeps other work from
being counted in the longest step.

With the stub torch (tests/python/stubs: torch's step wrapper and global hooks, a stub
allocator), in one process with the agent running:
- the hook called directly: ns per call while it only counts (no reading due), median and
  p99;
- steps that take a reading (one every 0.2 s): their duration, median and longest, which is
  the hook's longest GIL hold; the stub's memory_stats_as_nested_dict is Python building
  ~150 counters, slower than torch's C++;
- optimizer.step() through torch's wrapper with and without the hook (medians);
- the mean cost per step at 20, 100, 1000 and 10000 steps a second.
With --real (a venv with torch; CPU tensors, so no CUDA and no readings): the hook's cost
to a real torch.optim.SGD step on a small model, with the agent against without it."""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
STUBS = os.path.join(REPO, "tests", "python", "stubs")
ASSETS = os.path.join(REPO, "assets", "python")

STUB_JOB = r"""
import json, statistics, sys, time
import strata_feed
strata_feed.start(0.5)
import torch
from strata_feed import _steps
pc = time.perf_counter_ns
N, DEVICES = int(sys.argv[1]), int(sys.argv[2])

def wait(cond):
    end = time.time() + 10
    while not cond() and time.time() < end:
        time.sleep(0.01)

opt = torch.optim.SGD([1])
base = []
for _ in range(N // 10):  # before the hook is registered: torch's wrapper alone
    t0 = pc(); opt.step(); base.append(pc() - t0)
wait(lambda: _steps.torch_hook is True)
torch.cuda.init()
keep = [torch._stub.allocate(i, 1 << 20) for i in range(DEVICES)]
wait(lambda: _steps.STEPS.reader is not None)
steps = _steps.STEPS

hooked = []  # through torch's wrapper, no reading due
for _ in range(N // 10):
    steps.next_read = time.monotonic() + 3600
    t0 = pc(); opt.step(); hooked.append(pc() - t0)

direct = []  # the hook alone, no reading due
steps.next_read = time.monotonic() + 3600
hook = _steps.on_optimizer_step
for _ in range(N):
    t0 = pc(); hook(opt, (), {}); direct.append(pc() - t0)

reading = []  # steps that take a reading
steps.next_read = 0.0
for _ in range(200):
    steps.next_read = 0.0
    before = len(steps.readings)
    t0 = pc(); hook(opt, (), {}); d = pc() - t0
    if len(steps.readings) > before or steps.readings.maxlen == len(steps.readings):
        reading.append(d)
    steps.readings.clear()

def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]

print(json.dumps({
    "direct_median": q(direct, 0.5), "direct_p99": q(direct, 0.99),
    "reading_median": q(reading, 0.5), "reading_p99": q(reading, 0.99), "reading_max": max(reading),
    "readings": len(reading),
    "read_max_ns": steps.read_max_ns, "off": steps.off,
    "wrapper_base": q(base, 0.5), "wrapper_hooked": q(hooked, 0.5),
}))
"""

REAL_JOB = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch
pc = time.perf_counter_ns
N = int(sys.argv[1])
if sys.argv[2] == "agent":
    import strata_feed
    strata_feed.start(0.5)
    end = time.time() + 10
    while getattr(getattr(strata_feed, "_steps", None), "torch_hook", None) is not True and time.time() < end:
        time.sleep(0.01)
    assert strata_feed._steps.torch_hook is True
torch.set_num_threads(1)
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for p in model.parameters():
    p.grad = torch.zeros_like(p)
for _ in range(1000):
    opt.step()
times = []
for _ in range(N):
    t0 = pc(); opt.step(); times.append(pc() - t0)
times.sort()
print(json.dumps({"median": times[len(times) // 2], "p99": times[int(len(times) * 0.99)]}))
"""


def run(code, args, env):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
        path = f.name
    try:
        out = subprocess.run([sys.executable, path] + [str(a) for a in args], env=env, check=True,
                             capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--real", action="store_true")
    args = ap.parse_args()
    feed = tempfile.mkdtemp(prefix="strata-bench-steps-")
    try:
        bench(args, feed)
    finally:
        shutil.rmtree(feed, True)


def bench(args, feed):
    env = dict(os.environ, STRATA_FEED_DIR=feed, PYTHONDONTWRITEBYTECODE="1")
    for k in ("STRATA_STUB_TRACE", "STRATA_STUB_LOG"):
        env.pop(k, None)
    if args.real:
        n = args.steps or 20000
        env["PYTHONPATH"] = ASSETS
        plain = run(REAL_JOB, [n, "plain"], env)
        fed = run(REAL_JOB, [n, "agent"], env)
        print("real torch %s, SGD step of a 16x4 Linear on the CPU, %d steps:" % (
            subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True).stdout.strip(), n))
        print("  without the agent: median %.2f us, p99 %.2f us" % (plain["median"] / 1e3, plain["p99"] / 1e3))
        print("  with its hook:     median %.2f us, p99 %.2f us (+%.2f us a step)" % (
            fed["median"] / 1e3, fed["p99"] / 1e3, (fed["median"] - plain["median"]) / 1e3))
        return
    n = args.steps or 200000
    env["PYTHONPATH"] = os.pathsep.join([STUBS, ASSETS])
    env["STRATA_STUB_DEVICES"] = json.dumps([
        {"uuid": "%08x-1111-4222-8333-%012x" % (0x5F3C2A10 + i, i), "pci_bus_id": "00000000:%02X:00.0" % (0x18 + i),
         "name": "NVIDIA Stub", "total": 80 << 30} for i in range(args.devices)])
    r = run(STUB_JOB, [n, args.devices], env)
    count = r["direct_median"] / 1e3
    read = r["reading_median"] / 1e3
    print("stub torch, %d device(s), %d hook calls:" % (args.devices, n))
    print("  counting only: median %.2f us, p99 %.2f us a step" % (count, r["direct_p99"] / 1e3))
    print("  a step that takes a reading: median %.1f us, p99 %.1f us, longest %.1f us (the longest GIL hold; %d readings)" % (
        read, r["reading_p99"] / 1e3, r["reading_max"] / 1e3, r["readings"]))
    print("  optimizer.step() through torch's wrapper: %.2f us without the hook, %.2f us with it" % (
        r["wrapper_base"] / 1e3, r["wrapper_hooked"] / 1e3))
    for rate in (20, 100, 1000, 10000):
        per = count + read * min(1.0, 1.0 / (rate * 0.2))
        print("  at %5d steps/s: %.2f us a step on average" % (rate, per))
    if r["off"]:
        print("  note: %s" % r["off"])


main()

"""Sites windows and the segment map against the real torch, on the CPU.

What the CPU allows: the calls the agent makes exist with the signatures the stub gives them
(2.15's, 2.0's); a snapshot in the stub's shape is one torch's own tools read
(torch.cuda._memory_viz), with the frames in the order the agent reads them, and the
agent's reduction of it agrees with theirs; a request to a real torch job is refused with
the reason of its version, and the agent initialises nothing.

What it does not allow (tests/gpu/check.sh does it on a GPU): a window itself
(_record_memory_history initialises CUDA), a real _snapshot() and its time_us, the real
GIL hold of that call, torch's own expandable-segment events, and what turning history off
frees.
"""

import ast
import inspect
import json
import os
import subprocess
import sys

from fwsupport import ASSETS, PY, REPO, VENV, Case, needs

STUB_MEMORY = os.path.join(REPO, "tests", "python", "stubs", "torch", "cuda", "memory.py")
STUBS = os.path.join(REPO, "tests", "python", "stubs")

JOBCODE = '''\
import torch

held = []


def leak(n, size):
    for _ in range(n):
        held.append(torch._stub.allocate(0, size))  # LEAK


def outer(n, size):
    leak(n, size)  # OUTER


def churn(n, size):
    for _ in range(n):
        torch._stub.free(torch._stub.allocate(0, size))
'''

# Run with the stub torch first on the path: a snapshot with history on, written as JSON.
MAKE_SNAPSHOT = '''
import json, sys
import torch
sys.path.insert(0, sys.argv[2])
import jobcode
torch.cuda.init()
torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=100000)
jobcode.outer(3, 3 << 20)
jobcode.churn(50, 4096)
small = [torch._stub.allocate(0, 4096) for _ in range(6)]
for h in small[::2]:
    torch._stub.free(h)
pending = torch._stub.allocate(0, 5 << 20)
torch._stub.free(pending, pending=True)
try:
    torch._stub.oom(0, 1 << 40)
except torch.cuda.OutOfMemoryError:
    pass
json.dump(torch.cuda.memory._snapshot(), open(sys.argv[1], "w"))
'''

JOB = """
    import json, os, sys, time
    import torch
    print("imported", flush=True)
    sys.stdin.readline()
    maps = open("/proc/self/maps").read()
    print(json.dumps({"initialized": torch.cuda.is_initialized(), "libcuda_mapped": "libcuda.so" in maps}), flush=True)
"""


def stub_params(name):
    """(name, default) of the parameters of a function in the stub's memory.py, defaults
    evaluated (sys.maxsize and the like)."""
    with open(STUB_MEMORY) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            args = node.args
            names = [a.arg for a in args.args]
            defaults = [None] * (len(names) - len(args.defaults)) + [
                eval(compile(ast.Expression(d), "<default>", "eval"), {"sys": sys}) for d in args.defaults]
            return [(n, d if i >= len(names) - len(args.defaults) else inspect.Parameter.empty)
                    for i, (n, d) in enumerate(zip(names, defaults))]
    raise AssertionError("no %s in the stub" % name)


def real_params(fn):
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]


@needs("torch")
class TorchCallsTest(Case):
    def test_the_calls_have_the_stubs_signatures(self):
        import torch

        mem = torch.cuda.memory
        version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
        if version >= (2, 15):
            self.assertEqual(real_params(mem._record_memory_history), stub_params("_record_memory_history_impl"))
            self.assertEqual(real_params(mem._record_memory_history_legacy), stub_params("_record_memory_history_legacy"))
            self.assertEqual(real_params(mem._snapshot), [("device", None), ("augment_with_fx_traces", False)])
            self.assertEqual(real_params(torch.cuda.memory_snapshot), [("mempool_id", None), ("include_traces", True)])
            self.assertTrue(callable(torch._C._cuda_isHistoryEnabled))
        elif version == (2, 0):
            # The boolean form only, no _cuda_isHistoryEnabled: sites are refused by version.
            # (torch 2.0.1's last parameter is `_enable_expensive_cpp`, as the installed package
            # has it; the agent never passes it.)
            want = [("enabled", inspect.Parameter.empty), ("record_context", True), ("trace_alloc_max_entries", 1),
                    ("trace_alloc_record_context", False), ("device", None), ("_enable_expensive_cpp", False)]
            self.assertEqual(real_params(mem._record_memory_history), want)
            self.assertEqual(real_params(mem._snapshot), [("device", None)])
            self.assertFalse(hasattr(torch._C, "_cuda_isHistoryEnabled"))
        else:
            self.fail("no expectation for torch %s" % torch.__version__)

    def test_a_request_is_refused_by_version_and_nothing_is_initialised(self):
        p = self.start(JOB)
        self.assertEqual(self.line(p), "imported")
        m = self.monitor(p.pid)
        self.hello(m, lambda h: h.get("requests") == ["sites"] and h.get("framework_version") is None)
        m.sites(1, seconds=5)
        r = m.sites_state(1, "refused", "running")
        if VENV == "new":
            self.assertEqual(r["reason"], "sites: CUDA not initialised by the job yet (the agent never initialises it)")
        else:
            self.assertEqual(r["reason"], "sites: not available in torch 2.0")
        self.send(p)
        self.assertEqual(json.loads(self.line(p, "the state")), {"initialized": False, "libcuda_mapped": False})
        rc, _, err = self.finish(p)
        self.assertEqual((rc, err), (0, ""))


@needs("torch")
class MemoryVizTest(Case):
    """A stub snapshot read by torch's own tools, and the agent's reduction beside theirs.
    The stub writes the snapshot of torch 2.1 and later; torch 2.0 (venv old) has no
    sites windows at all (the agent refuses them), which is what is checked there."""

    def setUp(self):
        super().setUp()
        import torch

        self.version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
        if self.version < (2, 1):
            self.assertEqual(self.version, (2, 0))
            self.assertFalse(hasattr(torch._C, "_cuda_isHistoryEnabled"))

    def snapshot(self):
        code = os.path.join(self.tmp, "jobcode.py")
        with open(code, "w") as f:
            f.write(JOBCODE)
        out = os.path.join(self.tmp, "snap.json")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([STUBS, ASSETS]), PYTHONDONTWRITEBYTECODE="1")
        env.pop("STRATA_STUB_DEVICES", None)
        subprocess.run([PY, "-c", MAKE_SNAPSHOT, out, self.tmp], check=True, env=env, timeout=60)
        with open(out) as f:
            return json.load(f), code

    def test_torchs_tools_read_the_stubs_snapshot(self):
        if self.version < (2, 1):
            return
        from torch.cuda import _memory_viz as viz

        snap, code = self.snapshot()
        viz.segsum(snap)  # raises on a segment whose blocks do not add up
        text = viz.trace(snap)
        self.assertIn("raise OutOfMemoryError", text)
        self.assertIn("cudaMalloc(", text)
        viz.trace_plot(snap)
        viz.segment_plot(snap)
        # The flame graph reads frames outermost first by reversing them: the stub (as
        # torch) writes them innermost first, which the site rule assumes.
        lines = viz.memory(snap, format_flamegraph=lambda x: x).splitlines()
        leak_line = next(i for i, x in enumerate(JOBCODE.splitlines(), 1) if x.endswith("# LEAK"))
        outer_line = next(i for i, x in enumerate(JOBCODE.splitlines(), 1) if x.endswith("# OUTER"))
        leaked = [x for x in lines if ";active_allocated;" in x and "jobcode.py:%d:leak" % leak_line in x]
        self.assertEqual(len(leaked), 3)
        frag = leaked[0]
        self.assertLess(frag.index("jobcode.py:%d:outer" % outer_line), frag.index("jobcode.py:%d:leak" % leak_line))

    def test_the_agents_reduction_agrees_with_torchs_tools(self):
        if self.version < (2, 1):
            return
        from torch.cuda import _memory_viz as viz

        if ASSETS not in sys.path:
            sys.path.insert(0, ASSETS)
        from strata_feed import _segmap, _sites, _slices

        snap, code = self.snapshot()
        # Bytes by state and segment as the flame graph of segments counts them.
        by = {}
        for x in viz.segments(snap, format_flamegraph=lambda x: x).splitlines():
            stack, size = x.rsplit(" ", 1)
            parts = stack.split(";")
            seg, state = parts[1], parts[2]
            by[(seg, state)] = by.get((seg, state), 0) + int(size)
        smap = _segmap.SegmentMap(snap["segments"])
        clock = _slices.Clock()
        _slices.Run(smap.run(clock), clock).to_end()
        dev, = smap.devices()
        totals = {"active_allocated": 0, "active_pending_free": 0, "inactive": 0}
        for (_, state), n in by.items():
            totals[state] += n
        self.assertEqual(sum(p["live"] for p in dev["pools"]), totals["active_allocated"])
        self.assertEqual(sum(p["pending_free"] for p in dev["pools"]), totals["active_pending_free"])
        self.assertEqual(sum(p["free"] for p in dev["pools"]), totals["inactive"])
        self.assertEqual(sum(p["reserved"] for p in dev["pools"]), sum(s["total_size"] for s in snap["segments"]))
        # Each segment's strip holds what torch's flame graph counts for it, state by state.
        self.assertEqual(len(dev["strips"]), len(snap["segments"]))
        letter = {"active_allocated": "l", "active_pending_free": "p", "inactive": "f"}
        theirs = sorted((seg["total_size"],) + tuple(by.get(("seg_%d" % seg["address"], st), 0) for st in letter)
                        for seg in snap["segments"])
        ours = sorted((strip["size"],) + tuple(sum(r[0] for r in strip["runs"] if r[1] == ch) for ch in letter.values())
                      for strip in dev["strips"])
        self.assertEqual(ours, theirs)
        red = _sites.Reduction(snap)
        clock = _slices.Clock()
        _slices.Run(red.run(clock), clock).to_end()
        d, = red.devices(20)
        leak_line = next(i for i, x in enumerate(JOBCODE.splitlines(), 1) if x.endswith("# LEAK"))
        outer_line = next(i for i, x in enumerate(JOBCODE.splitlines(), 1) if x.endswith("# OUTER"))
        g = d["growth"][0]
        self.assertEqual(g["site"], "%s:%d in leak" % (code, leak_line))
        self.assertEqual(g["via"][0], "%s:%d in outer" % (code, outer_line))
        self.assertEqual((g["bytes"], g["allocs"], g["frees"]), (3 * (3 << 20), 3, 0))
        self.assertEqual(d["live_bytes"], totals["active_allocated"])

"""`strata analyze FILE.pickle` against torch's own reading of the same snapshot.

Snapshots are built as dicts in the shape `torch.cuda.memory._snapshot()` returns
(tests/torchsnap/snapshots.py: every field torch writes, the library's own block states,
frames shared as torch shares them), pickled with the standard pickle module as
`_dump_snapshot` does, at every protocol Python 3 writes, and read by strata ($STRATA_BIN).
What strata says is compared with what `torch.cuda._memory_viz` computes on the same dict:
`segsum`'s totals (its byte figures printed exactly), `_block_extra` and `_frame_fmt` for each
live block's frames, `filter_alloc_free_pairs` for what the trace allocated and did not free,
`trace`'s OOM lines. Where torch's viz computes nothing (the largest free block, pinned
segments), the figure is worked out here from the dict.

Where the two disagree by design, a test says what and why, so that a change on either side
is seen:
- segsum counts a block `active_pending_free` as free and a live block's rounding
  (`size - requested_size`) as free "internal"; strata counts pending apart and a live
  block's whole size as live.
- filter_alloc_free_pairs keeps an allocation whose `free_requested` is missing, though its
  `free_completed` is there (it prints "free_completed without free_requested"), and keeps the
  first of two allocations at one address when only the second is freed; strata counts both
  as freed (an address holds one allocation at a time).
- `trace`'s closing "TOTAL MEM" reuses its loop counter and is not a byte total.
- torch's flame graphs name a frame by its file's base name; strata's site keeps the path.
"""

import copy
import importlib.util
import io
import json
import os
import pickle
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from fwsupport import REPO

sys.path.insert(0, os.path.join(REPO, "tests", "torchsnap"))

import snapshots  # noqa: E402
from snapshots import KiB, MiB, job, torch_frame  # noqa: E402

STRATA = os.environ.get("STRATA_BIN") or os.path.join(REPO, "target", "debug", "strata")


def viz():
    # STRATA_MEMORY_VIZ: another copy of _memory_viz.py (it imports only the standard
    # library), to run these comparisons against an older torch's.
    other = os.environ.get("STRATA_MEMORY_VIZ")
    if other:
        spec = importlib.util.spec_from_file_location("_memory_viz_other", other)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    from torch.cuda import _memory_viz

    return _memory_viz


# `trace`'s line of an OOM: "raise OutOfMemoryError # R requested, F free in CUDA" (torch 2.0
# writes "OutOfMemoryError()").
OOM_LINE = re.compile(r"^raise OutOfMemoryError(?:\(\))? # (\d+) requested, (\d+) free in CUDA$")


def has_viz(*names):
    """Whether torch's _memory_viz (or STRATA_MEMORY_VIZ's) has all of these."""
    try:
        mv = viz()
    except ImportError:
        return False
    return all(hasattr(mv, n) for n in names)


# Torch 2.0's _memory_viz has segsum, trace and _frame_fmt, not filter_alloc_free_pairs.
NEEDS_PAIRS = unittest.skipUnless(
    has_viz("filter_alloc_free_pairs"), "needs torch whose _memory_viz has filter_alloc_free_pairs"
)


def block_frames(mv, block):
    """A block's frames as torch's viz reads them (`_block_extra`, torch 2.1+; torch 2.0 read
    a block's `history`, which these dicts do not have: its frames are the block's own)."""
    if hasattr(mv, "_block_extra"):
        return mv._block_extra(block)[0]
    return block.get("frames", [])


def random_snapshot(seed):
    """Three devices (the third with expandable segments), segments of both pools split into
    blocks of every state, live blocks rounded up from what was asked, traces of allocations,
    frees, segments and an OOM on each device."""
    rng = random.Random(seed)
    b = snapshots.Builder()
    stacks = [b.stack(*frames) for frames in [
        [torch_frame(10, "linear", "nn/functional.py"), job(42, "forward", "model.py"), job(7, "step")],
        [job(55, "keep", "cache.py"), job(8, "step"), job(90, "main")],
        [("/usr/lib/python3.11/threading.py", 1, "run"), torch_frame(3, "backward"), job(12, "step")],
        [("/pytorch/c10/cuda/CUDACachingAllocator.cpp", 1, "malloc"), ("??", 0, "??")],
        [torch_frame(5, "zeros", "functional.py")],
        [job(i, "layer%d" % i, "layers/l%d.py" % i) for i in range(1, 30)],
    ]]
    addr = 0x7F00_0000_0000
    for device in range(3):
        for _ in range(rng.randint(3, 40)):
            small = rng.random() < 0.3
            unit = 512 if small else 2 * MiB
            blocks = []
            for _ in range(rng.randint(1, 20)):
                state = rng.choice(["active_allocated", "active_allocated", "inactive", "active_pending_free"])
                stack = None if rng.random() < 0.1 else rng.choice(stacks)
                blocks.append((rng.randint(1, 64) * unit, state, stack if state != "inactive" else None))
            # Every segment keeps a free block: torch 2.0's segsum divides by a segment's free
            # bytes (ZeroDivisionError on a full segment of 20 MiB or more).
            blocks.append((unit, "inactive", None))
            seg = b.segment(device, addr, blocks, pool="small" if small else "large", expandable=device == 2)
            for block in seg["blocks"]:
                if block["state"] == "active_allocated":
                    block["requested_size"] = block["size"] - rng.randint(0, min(511, block["size"] - 1))
            b.event(device, "segment_map" if device == 2 else "segment_alloc", addr, seg["total_size"])
            addr += seg["total_size"] + 2 * MiB
        live = []
        for n in range(rng.randint(50, 400)):
            if live and rng.random() < 0.45:
                a, size = live.pop(rng.randrange(len(live)))
                b.event(device, "free_requested", a, size)
                b.event(device, "free_completed", a, size)
            else:
                a = addr + n * 64 * MiB
                size = rng.randint(1, 1000) * KiB
                b.event(device, "alloc", a, size, rng.choice(stacks))
                live.append((a, size))
        b.event(device, "oom", size=rng.randint(1, 8) << 30, stack=rng.choice(stacks),
                device_free=rng.randint(0, 500) * MiB)
        addr += 1 << 40
    return b.snapshot(expandable=False)


class SnapshotOracle(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="strata-snap-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def strata(self, snap, protocol=None, name="snap.pickle"):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            if protocol is None:
                pickle.dump(snap, f)
            else:
                pickle.dump(snap, f, protocol=protocol)
        out = subprocess.run([STRATA, "analyze", "--json", path], capture_output=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr.decode(errors="replace"))
        return json.loads(out.stdout)

    def segsum(self, snap):
        """segsum's totals, its byte figures printed exactly."""
        mv = viz()
        saved = mv._format_size
        mv._format_size = lambda n: "%d" % n
        try:
            text = mv.segsum(copy.deepcopy(snap))
        finally:
            mv._format_size = saved
        out = {}
        for line in text.splitlines():
            for key in ("segments", "total_reserved", "total_allocated", "total_free"):
                if line.startswith(key + ": "):
                    out[key] = int(line.split()[1])
        return out

    def test_totals_agree_with_segsum(self):
        for seed in range(6):
            snap = random_snapshot(seed)
            got = self.strata(snap)
            torch_says = self.segsum(snap)
            pools = [p for d in got["segments"]["devices"] for p in d["pools"]]
            self.assertEqual(sum(p["segments"] for p in pools), torch_says["segments"])
            self.assertEqual(sum(p["reserved"] for p in pools), torch_says["total_reserved"])
            live = sum(p["live"] for p in pools)
            # segsum's allocated is what was asked (requested_size); strata's live is the
            # blocks' whole size; the rounding between them segsum counts as free.
            rounding = live - torch_says["total_allocated"]
            self.assertGreaterEqual(rounding, 0)
            free = sum(p["free"] + p["pending_free"] for p in pools)
            self.assertEqual(free + rounding, torch_says["total_free"], "seed %d" % seed)

    def test_largest_free_pinned_and_buckets_from_the_dict(self):
        """torch's viz computes none of these in Python: they are worked out from the dict."""
        for seed in range(6):
            snap = random_snapshot(seed)
            got = self.strata(snap)
            want = snapshots.expected(snap)
            for d, w in zip(got["segments"]["devices"], want["devices"]):
                self.assertEqual(d["index"], w["index"])
                largest = max([p["largest_free"] for p in w["pools"]] + [0])
                self.assertEqual(max([p["largest_free"] for p in d["pools"]] + [0]), largest)
                for p, wp in zip(d["pools"], w["pools"]):
                    self.assertEqual([p["pool"], p["expandable"]], [wp["pool"], wp["expandable"]])
                    self.assertEqual([[b["at_least"], b["blocks"], b["bytes"]] for b in p["free_blocks"]],
                                     wp["free_blocks"])
                    pinned = p["pinned"]
                    self.assertEqual([pinned["segments"], pinned["reserved"], pinned["live"]], wp["pinned"])

    def test_live_sites_agree_with_torchs_frames(self):
        mv = viz()
        for seed in range(6):
            snap = random_snapshot(seed)
            got = self.strata(snap)
            for d in got["sites"]["devices"]:
                by_site = {}
                unattributed = 0
                for seg in snap["segments"]:
                    if seg["device"] != d["index"]:
                        continue
                    for block in seg["blocks"]:
                        if block["state"] != "active_allocated":
                            continue
                        frames = block_frames(mv, block)
                        if not frames:
                            unattributed += block["size"]
                            continue
                        own = [f for f in frames if snapshots.job_frame(f["filename"])]
                        key = mv._frame_fmt(own[0], full_filename=True) if own else "(none)"
                        n, total = by_site.get(key, (0, 0))
                        by_site[key] = (n + 1, total + block["size"])
                self.assertEqual(d["live_unattributed"], unattributed)
                strata_sites = {}
                for s in d["live"]:
                    if s["site"] == "(no frame in the job's code)":
                        key = "(none)"
                    else:
                        where, name = s["site"].rsplit(" in ", 1)
                        key = "%s:%s" % (where, name)
                    strata_sites[key] = (s["count"], s["bytes"])
                self.assertEqual(strata_sites, by_site, "seed %d device %d" % (seed, d["index"]))

    @NEEDS_PAIRS
    def test_growth_agrees_with_filter_alloc_free_pairs(self):
        mv = viz()
        for seed in range(6):
            snap = random_snapshot(seed)
            got = self.strata(snap)
            kept = mv.filter_alloc_free_pairs(copy.deepcopy(snap))
            for d in got["sites"]["devices"]:
                grew = {}
                for e in kept["device_traces"][d["index"]]:
                    if e["action"] != "alloc" or not e.get("frames"):
                        continue
                    s = snapshots.site(e["frames"])[0]
                    grew[s] = grew.get(s, 0) + e["size"]
                self.assertEqual({g["site"]: g["bytes"] for g in d["growth"]}, grew)
                self.assertEqual(d["growth_bytes"], sum(grew.values()))

    def test_ooms_agree_with_trace(self):
        mv = viz()
        for seed in range(3):
            snap = random_snapshot(seed)
            got = self.strata(snap)
            saved = mv._format_size
            mv._format_size = lambda n: "%d" % n
            try:
                text = mv.trace(copy.deepcopy(snap))
            finally:
                mv._format_size = saved
            torch_ooms = [[int(m.group(1)), int(m.group(2))]
                          for m in map(OOM_LINE.match, text.splitlines()) if m]
            self.assertEqual(len(torch_ooms), 3, "an OOM a device")
            self.assertEqual([[o["requested"], o["device_free"]] for o in got["ooms"]], torch_ooms)
            # The snapshot is the pool at each OOM (its trace's last entry).
            for o in got["ooms"]:
                self.assertEqual(o["events_after"], 0)
                self.assertIsNotNone(o["largest_free"])

    def test_every_protocol_reads_the_same(self):
        snap = random_snapshot(7)
        first = self.strata(snap, protocol=2)
        for protocol in (3, 4, 5):
            again = self.strata(snap, protocol=protocol)
            self.assertEqual(again["segments"]["devices"], first["segments"]["devices"], protocol)
            self.assertEqual(again["sites"]["devices"], first["sites"]["devices"], protocol)
            self.assertEqual(again["ooms"], first["ooms"], protocol)

    @NEEDS_PAIRS
    def test_where_torchs_viz_and_strata_disagree_by_design(self):
        mv = viz()
        b = snapshots.Builder()
        stack = b.stack(job(1, "f"))
        # One segment: a live block rounded up by 100 bytes, a pending block, a free one.
        seg = b.segment(0, 1 << 40, [(2 * MiB, "active_allocated", stack),
                                     (2 * MiB, "active_pending_free", stack),
                                     (4 * MiB, "inactive", None)])
        seg["blocks"][0]["requested_size"] = 2 * MiB - 100
        # A free whose request was not recorded; two allocations at one address, one free.
        b.event(0, "alloc", 100, 1000, stack)
        b.event(0, "free_completed", 100, 1000)
        b.event(0, "alloc", 200, 3000, stack)
        b.event(0, "alloc", 200, 5000, stack)
        b.event(0, "free_requested", 200, 5000)
        snap = b.snapshot()
        got = self.strata(snap)
        pool = got["segments"]["devices"][0]["pools"][0]
        torch_says = self.segsum(snap)
        self.assertEqual(pool["live"], 2 * MiB)
        self.assertEqual(torch_says["total_allocated"], 2 * MiB - 100)
        self.assertEqual((pool["pending_free"], pool["free"]), (2 * MiB, 4 * MiB))
        self.assertEqual(torch_says["total_free"], 2 * MiB + 4 * MiB + 100)
        # strata: both allocations at 200 ended, the one at 100 too: nothing grew.
        self.assertEqual(got["sites"]["devices"][0]["growth_bytes"], 0)
        saved = sys.stdout
        sys.stdout = io.StringIO()
        try:
            kept = mv.filter_alloc_free_pairs(copy.deepcopy(snap))
        finally:
            said, sys.stdout = sys.stdout.getvalue(), saved
        self.assertIn("free_completed without free_requested", said)
        left = [(e["addr"], e["size"]) for e in kept["device_traces"][0] if e["action"] == "alloc"]
        self.assertEqual(left, [(100, 1000), (200, 3000)])
        # trace's TOTAL MEM is its loop counter (the last entry's index, 4 here, plus the
        # last entry's size were it an allocation), not the 3,000 bytes left allocated.
        saved = mv._format_size
        mv._format_size = lambda n: "%d" % n
        try:
            text = mv.trace(copy.deepcopy(snap))
        finally:
            mv._format_size = saved
        self.assertEqual(text.splitlines()[-1], "TOTAL MEM: 4")


if __name__ == "__main__":
    unittest.main()

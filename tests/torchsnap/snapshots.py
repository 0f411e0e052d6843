"""PyTorch memory snapshots built as dicts, in the shape torch writes them, for strata's
tests of `strata analyze FILE.pickle` (standard library only: no torch needed to build them).

The shape is `torch.cuda.memory._snapshot()`'s, as `torch/csrc/cuda/Module.cpp` and
`torch/csrc/profiler/python/combined_traceback.cpp` build it: segments with every field torch
writes, blocks whose state is one of the library's own strings (`active_allocated`,
`active_pending_free`, `inactive`; the docstring's `active_awaiting_free` is not one), and
frames shared as torch shares them: one dict per distinct frame, one list per distinct
traceback, the same objects wherever they recur, so that `pickle.dump` memoises them as the
real files do. `expected()` works out, from the dict alone and its own way, what strata's
reduction must say of it.
"""

import math
import pickle

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

TORCH = "/venv/lib/python3.11/site-packages/torch"
JOB = "/home/user/job"


class Builder:
    """A snapshot under construction: segments, blocks and trace entries."""

    def __init__(self):
        self.segments = []
        self.traces = {}
        self._frames = {}
        self._stacks = {}
        self.time_us = 1_767_000_000_000_000

    def frame(self, filename, line, name):
        key = (filename, line, name)
        if key not in self._frames:
            self._frames[key] = {"name": name, "filename": filename, "line": line}
        return self._frames[key]

    def stack(self, *frames):
        """A traceback, innermost frame first: the same list for the same frames."""
        key = tuple(frames)
        if key not in self._stacks:
            self._stacks[key] = [self.frame(*f) for f in frames]
        return self._stacks[key]

    def segment(self, device, address, blocks, pool="large", expandable=False, stream=0):
        """blocks: (size, state, stack or None). Returns the segment dict."""
        out = []
        at = address
        for size, state, stack in blocks:
            out.append(
                {
                    "address": at,
                    "size": size,
                    "requested_size": size if state != "inactive" else 0,
                    "state": state,
                    "frames": stack if stack is not None else [],
                }
            )
            at += size
        total = at - address
        seg = {
            "device": device,
            "address": address,
            "total_size": total,
            "allocated_size": sum(b["size"] for b in out if b["state"] == "active_allocated"),
            "active_size": sum(b["size"] for b in out if b["state"] != "inactive"),
            "requested_size": sum(b["requested_size"] for b in out),
            "stream": stream,
            "segment_type": pool,
            "segment_pool_id": (0, 0),
            "is_expandable": expandable,
            "frames": [],
            "blocks": out,
        }
        self.segments.append(seg)
        return seg

    def event(self, device, action, addr=None, size=0, stack=None, device_free=None):
        self.time_us += 1000
        e = {"action": action}
        if action == "oom":
            e["device_free"] = device_free
        else:
            e["addr"] = addr
        e["size"] = size
        e["stream"] = 0
        if stack is not None:
            e["frames"] = stack
        e["time_us"] = self.time_us
        self.traces.setdefault(device, []).append(e)
        return e

    def snapshot(self, expandable=False):
        devices = max([s["device"] for s in self.segments] + list(self.traces) + [0]) + 1
        return {
            "segments": self.segments,
            "device_traces": [self.traces.get(d, []) for d in range(devices)],
            "allocator_settings": {
                "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True" if expandable else "",
                "max_split_size": -1,
                "garbage_collection_threshold": 0.0,
                "expandable_segments": expandable,
                "pinned_num_register_threads": 1,
                "release_lock_on_cudamalloc": False,
                "pinned_use_cuda_host_register": False,
                "roundup_power2_divisions": {"1": 0, "2": 0},
            },
        }


def job(line, name, file="train.py"):
    return (JOB + "/" + file, line, name)


def torch_frame(line, name, file="nn/modules/module.py"):
    return (TORCH + "/" + file, line, name)


def fragmented_oom():
    """Device 0: twelve 2 GiB segments pinned by a few MiB each, full segments, a small pool;
    an OOM of 1.5 GiB as the last entry of its trace (a snapshot dumped by an OOM observer).
    Device 1: expandable segments and a trace that goes on after its OOM."""
    b = Builder()
    forward = b.stack(torch_frame(10, "linear", "nn/functional.py"), job(42, "forward", "model.py"),
                      job(7, "step"), job(90, "main"), ("<frozen runpy>", 1, "_run"))
    kept = b.stack(("/usr/lib/python3.11/contextlib.py", 5, "inner"), job(55, "keep_cache", "cache.py"),
                   job(8, "step"))
    grads = b.stack(torch_frame(3, "backward", "autograd/__init__.py"), job(12, "step"), job(90, "main"))
    native = b.stack(("/pytorch/c10/cuda/CUDACachingAllocator.cpp", 1, "malloc"), ("??", 0, "??"))
    addr = 0x7F00_0000_0000
    # Twelve 2 GiB segments, each pinned by a small live block in its middle.
    for i in range(12):
        live = (4 + i) * MiB
        b.segment(0, addr, [(900 * MiB, "inactive", None), (live, "active_allocated", kept),
                            (2 * GiB - 900 * MiB - live, "inactive", None)])
        b.event(0, "segment_alloc", addr, 2 * GiB)
        b.event(0, "alloc", addr + 900 * MiB, live, kept)
        addr += 2 * GiB
    # Full segments of activations and gradients; one allocated before recording began.
    for i in range(4):
        size = 512 * MiB
        stack = forward if i % 2 == 0 else grads
        b.segment(0, addr, [(size, "active_allocated", stack), (20 * MiB, "active_pending_free", forward)])
        b.event(0, "segment_alloc", addr, size + 20 * MiB)
        b.event(0, "alloc", addr, size, stack)
        b.event(0, "alloc", addr + size, 20 * MiB, forward)
        b.event(0, "free_requested", addr + size, 20 * MiB)
        addr += size + 20 * MiB
    b.segment(0, addr, [(256 * MiB, "active_allocated", None)])
    addr += 256 * MiB
    # The small pool: 2 MiB segments split into many blocks.
    for _ in range(3):
        blocks = []
        for j in range(8):
            blocks.append((128 * KiB, "active_allocated", native if j % 3 == 0 else grads))
            blocks.append((128 * KiB, "inactive", None))
        b.segment(0, addr, blocks, pool="small")
        addr += 2 * MiB
    # A temporary that came and went: no growth.
    b.event(0, "alloc", addr + 64 * GiB, 300 * MiB, forward)
    b.event(0, "free_requested", addr + 64 * GiB, 300 * MiB)
    b.event(0, "free_completed", addr + 64 * GiB, 300 * MiB)
    b.event(0, "oom", size=1536 * MiB, stack=forward, device_free=600 * MiB)

    # Device 1: expandable segments; its OOM is followed by a free and a new segment.
    addr1 = 0x7E00_0000_0000
    b.segment(1, addr1, [(100 * MiB, "active_allocated", kept), (300 * MiB, "inactive", None),
                         (100 * MiB, "active_allocated", forward), (500 * MiB, "inactive", None)],
              expandable=True)
    b.event(1, "segment_map", addr1, 1000 * MiB)
    b.event(1, "alloc", addr1, 100 * MiB, kept)
    b.event(1, "alloc", addr1 + 400 * MiB, 100 * MiB, forward)
    b.event(1, "alloc", addr1 + 100 * MiB, 300 * MiB, grads)
    b.event(1, "oom", size=800 * MiB, stack=grads, device_free=10 * MiB)
    b.event(1, "free_requested", addr1 + 100 * MiB, 300 * MiB)
    b.event(1, "free_completed", addr1 + 100 * MiB, 300 * MiB)
    addr2 = 0x7D00_0000_0000
    b.segment(1, addr2, [(20 * MiB, "active_allocated", grads)], expandable=True)
    b.event(1, "segment_map", addr2, 20 * MiB)
    b.event(1, "alloc", addr2, 20 * MiB, grads)
    b.event(1, "snapshot", 0, 0)
    return b.snapshot(expandable=True)


def job_frame(filename):
    """The spec's rule: a frame of the job's own code (written apart from strata's)."""
    if not filename or filename == "??" or filename.startswith("<"):
        return False
    if filename.endswith((".cpp", ".cc", ".h", ".cu", ".c")):
        return False
    parts = filename.split("/")
    for a, b in zip(parts, parts[1:]):
        if a in ("site-packages", "dist-packages") and b == "torch":
            return False
    if "strata_feed" in parts:
        return False
    for i, (a, b) in enumerate(zip(parts, parts[1:])):
        if a in ("lib", "lib64") and b.startswith("python3.") and b[8:].isdigit():
            if not any(p in ("site-packages", "dist-packages") for p in parts[i + 2:]):
                return False
    return True


def site(frames):
    """(site, via) of a list of frames, innermost first; None without frames."""
    if not frames:
        return None
    own = [f for f in frames if job_frame(f["filename"])]
    if not own:
        return ("(no frame in the job's code)", [])

    def text(f):
        file = f["filename"]
        if len(file) > 256:
            file = "..." + file[-253:]
        return "%s:%d in %s" % (file, f["line"], f["name"][:128])

    return (text(own[0]), [text(f) for f in own[1:3]])


def expected(snap):
    """What the reduction must say of `snap`, worked out from the dict alone."""
    devices = {}
    for seg in snap["segments"]:
        d = devices.setdefault(seg["device"], {"pools": {}, "live_sites": {}, "live": 0,
                                               "blocks": 0, "unattributed": 0})
        key = (seg["segment_type"], seg["is_expandable"])
        p = d["pools"].setdefault(key, {"segments": 0, "reserved": 0, "live": 0, "pending_free": 0,
                                        "free": 0, "largest_free": 0, "pinned": [0, 0, 0],
                                        "buckets": {}})
        p["segments"] += 1
        p["reserved"] += seg["total_size"]
        live = sum(b["size"] for b in seg["blocks"] if b["state"] == "active_allocated")
        free = sum(b["size"] for b in seg["blocks"] if b["state"] == "inactive")
        p["live"] += live
        p["pending_free"] += sum(b["size"] for b in seg["blocks"] if b["state"] == "active_pending_free")
        p["free"] += free
        for b in seg["blocks"]:
            if b["state"] == "inactive":
                p["largest_free"] = max(p["largest_free"], b["size"])
                k = 1 << int(math.log2(b["size"]))
                n, s = p["buckets"].get(k, (0, 0))
                p["buckets"][k] = (n + 1, s + b["size"])
            if b["state"] == "active_allocated":
                d["live"] += b["size"]
                d["blocks"] += 1
                s = site(b["frames"])
                if s is None:
                    d["unattributed"] += b["size"]
                else:
                    n, total = d["live_sites"].get(s[0], (0, 0))
                    d["live_sites"][s[0]] = (n + 1, total + b["size"])
        if live > 0 and 4 * free >= 3 * seg["total_size"]:
            p["pinned"][0] += 1
            p["pinned"][1] += seg["total_size"]
            p["pinned"][2] += live
    out = {"devices": []}
    for index in sorted(devices):
        d = devices[index]
        pools = []
        for (pool, exp) in sorted(d["pools"], key=lambda k: (k[0] != "large", k[0], k[1])):
            p = d["pools"][(pool, exp)]
            pools.append({
                "pool": pool, "expandable": exp, "segments": p["segments"], "reserved": p["reserved"],
                "live": p["live"], "pending_free": p["pending_free"], "free": p["free"],
                "largest_free": p["largest_free"],
                "free_blocks": [[k, n, s] for k, (n, s) in sorted(p["buckets"].items())],
                "pinned": p["pinned"],
            })
        live_sites = sorted(d["live_sites"].items(), key=lambda kv: (-kv[1][1], kv[0]))[:50]
        out["devices"].append({
            "index": index, "pools": pools, "live_bytes": d["live"], "live_blocks": d["blocks"],
            "live_unattributed": d["unattributed"],
            "live_sites": [[s, n, total] for s, (n, total) in live_sites],
        })
    return out


def dump(snap, path):
    """As `torch.cuda.memory._dump_snapshot` writes it."""
    with open(path, "wb") as f:
        pickle.dump(snap, f)

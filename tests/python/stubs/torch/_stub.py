"""The stub's allocator model (one per device) and the helpers test jobs call."""

import bisect
import os
import sys
import threading
import time

import _strata_stub as _s

try:
    from _collections import deque
except ImportError:
    from collections import deque

LARGE_SEGMENT = 2 * 1024 * 1024  # a large segment is the request rounded up to this
SMALL_SIZE = 1 << 20  # requests up to this go to the small pool...
SMALL_BUFFER = 2 * 1024 * 1024  # ...whose segments have this size
ROUND = 512
_GROUPS = (
    "allocation",
    "segment",
    "active",
    "inactive_split",
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "inactive_split_bytes",
    "requested_bytes",
)
_lock = threading.RLock()
initialised = False
observers = []


recording = False  # history is on (torch._C._cuda_isHistoryEnabled)
fail_snapshot = None  # a message: the next snapshots raise RuntimeError with it (tests)
_set_settings = []  # strings given to _accelerator_setAllocatorSettings, in order


def version():
    from . import __version__

    out = []
    for part in __version__.split("+")[0].split("."):
        out.append(int(part))
    return tuple(out)


def env_conf():
    """What the CUDA allocator of real torch parses from the environment, read when asked
    (a variable set after import is honoured): PYTORCH_CUDA_ALLOC_CONF wins, the generic
    PYTORCH_ALLOC_CONF is read only when it is unset, and only from torch 2.9 on."""
    raw = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    if raw is None and version() >= (2, 9):
        raw = os.environ.get("PYTORCH_ALLOC_CONF")
    return raw


def _split(raw):
    conf = {}
    for item in (raw or "").split(","):
        if ":" in item:
            k, v = item.split(":", 1)
            conf[k.strip()] = v.strip()
    return conf


def last_settings():
    """What _accelerator_getAllocatorSettings() answers: the last string applied."""
    if _set_settings:
        return _set_settings[-1]
    return env_conf() or ""


def alloc_conf():
    """The effective settings: each string applied over the earlier ones, key by key."""
    conf = _split(env_conf())
    for raw in _set_settings:
        conf.update(_split(raw))
    return conf


def backend():
    b = os.environ.get("STRATA_STUB_BACKEND")
    if b:
        return b
    return "cudaMallocAsync" if alloc_conf().get("backend") == "cudaMallocAsync" else "native"


def expandable():
    return alloc_conf().get("expandable_segments", "").lower() == "true"


NEVER, STATE, ALLOC, ALL = 0, 1, 2, 3  # torch's RecordContext
_CONTEXT = {None: NEVER, "state": STATE, "alloc": ALLOC, "all": ALL}
_HERE = os.path.dirname(os.path.abspath(__file__))
_OWN = (_HERE + os.sep, os.path.join(os.path.dirname(_HERE), "_strata_stub.py"))


class History(object):
    """What _record_memory_history set: torch's record_history, record_context_ and the
    ring's size, for every device's allocator at once (as torch's recordHistory)."""

    def __init__(self):
        self.enabled = False
        self.context = NEVER
        self.max_entries = 1
        self.skip = frozenset()
        self.calls = []  # every call, (enabled, context, stacks, max_entries), for tests


HISTORY = History()


def capture():
    """The Python frames of the calling code, innermost first, as (filename, line, name):
    what torch's CapturedTraceback gathers with stacks="python". The stub's own frames are
    left out (torch's allocator is C++: no Python frame of its own)."""
    f = sys._getframe(1)
    out = []
    while f is not None:
        code = f.f_code
        if not code.co_filename.startswith(_OWN):
            out.append((code.co_filename, f.f_lineno, code.co_name))
        f = f.f_back
    return tuple(out)


def set_history(enabled, context, max_entries, clear, skip):
    """torch's DeviceCachingAllocator::recordHistory, on every device: off (or clear)
    empties the ring (torch also frees it, from late 2025)."""
    with _lock:
        h = HISTORY
        h.enabled = enabled
        h.context = context if enabled else NEVER
        h.max_entries = max(1, int(max_entries))
        h.skip = frozenset(skip or ())
        global recording
        recording = enabled
        for d in DEVICES:
            if not enabled or clear:
                d.ring = deque(maxlen=h.max_entries)
            else:
                d.ring = deque(d.ring, maxlen=h.max_entries)


class Block(object):
    __slots__ = ("size", "requested", "state", "frames", "addr", "seg")

    def __init__(self, size, requested, state, addr, seg):
        self.size, self.requested, self.state, self.addr, self.seg = size, requested, state, addr, seg
        self.frames = None  # context_when_allocated: a captured traceback, or None


class Segment(object):
    """A cudaMalloc'd segment (or an expandable one, mapped further as it grows); blocks in
    address order. Its counters give the device's inactive_split without a walk."""

    __slots__ = ("address", "blocks", "kind", "expandable", "frames", "active_n", "free_bytes", "free_n")

    def __init__(self, address, kind, expandable, frames):
        self.address, self.kind, self.expandable, self.frames = address, kind, expandable, frames
        self.blocks = []
        self.active_n = self.free_bytes = self.free_n = 0

    def total(self):
        return sum(b.size for b in self.blocks)

    def split(self):
        """(bytes, blocks) of inactive_split: the free blocks of a segment in use."""
        return (self.free_bytes, self.free_n) if self.active_n else (0, 0)


class Device(object):
    def __init__(self, index, spec):
        self.index = index
        self.spec = spec
        self.total = int(spec.get("total", 80 << 30))
        self.context = False
        self.segments = []  # Segment, in the order made
        self.next_address = 0x7F0000000000 + index * (1 << 40)
        self.cur = dict((g, 0) for g in _GROUPS)
        self.peak = dict((g, 0) for g in _GROUPS)
        self.cum_alloc = dict((g, 0) for g in _GROUPS)
        self.cum_free = dict((g, 0) for g in _GROUPS)
        self.retries = self.ooms = self.device_allocs = self.device_frees = 0
        self.ring = deque(maxlen=1)  # the trace: (action, addr, size, frames, time_us, extra)
        # Free blocks of each pool, sorted by (size, address): best fit is a bisection.
        self.free_keys = {"small": [], "large": []}
        self.free_blocks = {}  # (size, address) -> Block
        self.split_bytes = self.split_n = 0

    def record(self, action, addr, size, frames, extra=None):
        """torch's record_trace: into the ring while history is on, with the frames only
        when context is "alloc" or "all"."""
        h = HISTORY
        if not h.enabled or action in h.skip:
            return
        self.ring.append((action, addr, size, frames if h.context >= ALLOC else None,
                          int(time.time() * 1e6), extra))

    def _add(self, group, n):
        self.cur[group] += n
        if n > 0:
            self.cum_alloc[group] += n
        else:
            self.cum_free[group] -= n
        self.peak[group] = max(self.peak[group], self.cur[group])

    # -- the free index and the segments' counters ---------------------------------------

    def _index(self, b):
        key = (b.size, b.addr)
        bisect.insort(self.free_keys[b.seg.kind], key)
        self.free_blocks[key] = b
        b.seg.free_bytes += b.size
        b.seg.free_n += 1

    def _unindex(self, b):
        key = (b.size, b.addr)
        keys = self.free_keys[b.seg.kind]
        del keys[bisect.bisect_left(keys, key)]
        del self.free_blocks[key]
        b.seg.free_bytes -= b.size
        b.seg.free_n -= 1

    def _change(self, seg, fn, *args):
        """Runs fn on seg, keeping the device's inactive_split in step."""
        before = seg.split()
        out = fn(*args)
        after = seg.split()
        self.split_bytes += after[0] - before[0]
        self.split_n += after[1] - before[1]
        return out

    def _recount(self):
        split, n = (0, 0) if expandable() else (self.split_bytes, self.split_n)
        self._add("inactive_split_bytes", split - self.cur["inactive_split_bytes"])
        self._add("inactive_split", n - self.cur["inactive_split"])

    def reserved(self):
        return self.cur["reserved_bytes"]

    # -- allocation ------------------------------------------------------------------------

    def malloc(self, nbytes, frames=None):
        h = HISTORY
        if frames is None and h.enabled and h.context >= STATE:
            frames = capture()
        size = max(ROUND, (nbytes + ROUND - 1) // ROUND * ROUND)
        kind = "small" if size <= SMALL_SIZE else "large"
        b = self._best_fit(size, kind)
        if b is None:
            b = self._grow(size, kind, nbytes, frames)
        self._change(b.seg, self._take, b, size)
        b.requested = nbytes
        b.frames = frames if h.enabled and h.context >= STATE else None
        for g, n in (("allocated_bytes", size), ("active_bytes", size), ("requested_bytes", nbytes)):
            self._add(g, n)
        self._add("allocation", 1)
        self._add("active", 1)
        self._recount()
        self.record("alloc", b.addr, nbytes, b.frames)
        return (self.index, b.seg.address, id(b), b)

    def _take(self, b, size):
        """A free block becomes allocated, split when larger than size."""
        seg = b.seg
        self._unindex(b)
        if b.size > size:
            rest = Block(b.size - size, 0, "inactive", b.addr + size, seg)
            seg.blocks.insert(seg.blocks.index(b) + 1, rest)
            self._index(rest)
            b.size = size
        b.state = "active_allocated"
        seg.active_n += 1

    def _best_fit(self, size, kind):
        keys = self.free_keys[kind]
        i = bisect.bisect_left(keys, (size, -1))
        return self.free_blocks[keys[i]] if i < len(keys) else None

    def _grow(self, size, kind, nbytes, frames):
        """A new segment (cudaMalloc), or the pool's expandable segment mapped further.
        Returns the free block that holds size."""
        seg_size = SMALL_BUFFER if kind == "small" else (size + LARGE_SEGMENT - 1) // LARGE_SEGMENT * LARGE_SEGMENT
        if self.reserved() + seg_size > self.total:
            self.empty_cache()
            self.retries += 1
        if self.reserved() + seg_size > self.total:
            raise_oom(self.index, nbytes, size, frames)
        if expandable():
            seg = next((x for x in self.segments if x.expandable and x.kind == kind), None)
            if seg is None:
                seg = Segment(self.next_address, kind, True, frames)
                self.next_address += 1 << 36  # address space reserved to grow into
                self.segments.append(seg)
                self._add("segment", 1)
            at = seg.address + seg.total()
            last = seg.blocks[-1] if seg.blocks else None
            self._add("reserved_bytes", seg_size)
            self.record("segment_map", at, seg_size, frames)
            if last is not None and last.state == "inactive":
                self._change(seg, self._unindex, last)
                last.size += seg_size
                self._change(seg, self._index, last)
                b = last
            else:
                b = Block(seg_size, 0, "inactive", at, seg)
                seg.blocks.append(b)
                self._change(seg, self._index, b)
            return b if b.size >= size else self._grow(size, kind, nbytes, frames)
        seg = Segment(self.next_address, kind, False, frames)
        b = Block(seg_size, 0, "inactive", seg.address, seg)
        seg.blocks.append(b)
        self.segments.append(seg)
        self._index(b)
        self.next_address += seg_size
        self.device_allocs += 1
        self._add("reserved_bytes", seg_size)
        self._add("segment", 1)
        self.record("segment_alloc", seg.address, seg_size, frames)
        return b

    # -- freeing -----------------------------------------------------------------------------

    def free(self, handle, pending=False):
        """torch's free(): the allocation ends (free_requested); the block returns to the
        pool now, or once its stream uses complete (pending: active_pending_free until
        complete())."""
        b = handle[3]
        if b.state != "active_allocated" or b.seg not in self.segments:
            raise ValueError("block not allocated")
        h = HISTORY
        fctx = capture() if h.enabled and h.context >= ALL else None
        self._add("allocated_bytes", -b.size)
        self._add("requested_bytes", -b.requested)
        self._add("allocation", -1)
        self.record("free_requested", b.addr, b.requested, fctx or b.frames)
        if pending:
            b.state = "active_pending_free"
            return
        self._complete(b, fctx)

    def complete(self, handle):
        b = handle[3]
        if b.state != "active_pending_free":
            raise ValueError("block not pending")
        self._complete(b, None)

    def _complete(self, b, fctx):
        self.record("free_completed", b.addr, b.requested, fctx or b.frames)
        self._add("active_bytes", -b.size)
        self._add("active", -1)
        self._change(b.seg, self._release, b)
        self._recount()

    def _release(self, b):
        """An active block returns to the pool, merged with free neighbours."""
        seg = b.seg
        b.state, b.requested, b.frames = "inactive", 0, None
        seg.active_n -= 1
        blocks = seg.blocks
        i = blocks.index(b)
        if i + 1 < len(blocks) and blocks[i + 1].state == "inactive":
            nxt = blocks.pop(i + 1)
            self._unindex(nxt)
            b.size += nxt.size
        if i > 0 and blocks[i - 1].state == "inactive":
            prev = blocks[i - 1]
            self._unindex(prev)
            prev.size += b.size
            del blocks[i]
            b = prev
        self._index(b)

    def empty_cache(self):
        keep = []
        for seg in self.segments:
            if seg.active_n == 0:
                size = seg.total()
                for b in seg.blocks:
                    self._change(seg, self._unindex, b)
                self._add("reserved_bytes", -size)
                self._add("segment", -1)
                if seg.expandable:
                    self.record("segment_unmap", seg.address, size, None)
                else:
                    self.device_frees += 1
                    self.record("segment_free", seg.address, size, None)
                continue
            if seg.expandable and seg.blocks[-1].state == "inactive":
                tail = seg.blocks[-1]
                self._change(seg, self._unindex, tail)
                seg.blocks.pop()
                self._add("reserved_bytes", -tail.size)
                self.record("segment_unmap", tail.addr, tail.size, None)
            keep.append(seg)
        self.segments = keep
        self._recount()

    def stats(self):
        if backend() == "pluggable":
            raise RuntimeError("Tried to call memory_stats on a pluggable allocator (CUDAPluggableAllocator)")
        out = {}
        is_async = backend() == "cudaMallocAsync"
        for g in _GROUPS:
            for pool in ("all", "small_pool", "large_pool"):
                for kind, src in (("current", self.cur), ("peak", self.peak), ("allocated", self.cum_alloc), ("freed", self.cum_free)):
                    v = src[g] if pool != "small_pool" else 0
                    if is_async and (g not in ("allocated_bytes", "active_bytes", "reserved_bytes") or pool != "all" or kind not in ("current", "peak")):
                        v = 0
                    out["%s.%s.%s" % (g, pool, kind)] = v
        for key, v in (
            ("num_alloc_retries", self.retries),
            ("num_ooms", self.ooms),
            ("num_device_alloc", self.device_allocs),
            ("num_device_free", self.device_frees),
            ("num_sync_all_streams", 0),
            ("max_split_size", -1),
        ):
            out[key] = 0 if is_async else v
        for g in ("oversize_allocations", "oversize_segments"):
            for kind in ("current", "peak", "allocated", "freed"):
                out["%s.%s" % (g, kind)] = 0
        return dict(sorted(out.items()))

    def snapshot_segments(self, symbolize=None):
        """The segments as torch's snapshot gives them; frames through symbolize (None: none)."""
        segs = []
        for seg in self.segments:
            bl = []
            for b in seg.blocks:
                d = {"address": b.addr, "size": b.size, "requested_size": b.requested, "state": b.state}
                d["frames"] = symbolize(b.frames) if symbolize is not None and b.frames else []
                bl.append(d)
            used = sum(b.size for b in seg.blocks if b.state == "active_allocated")
            active = sum(b.size for b in seg.blocks if b.state != "inactive")
            segs.append(
                {
                    "device": self.index,
                    "address": seg.address,
                    "total_size": seg.total(),
                    "allocated_size": used,
                    "active_size": active,
                    "requested_size": sum(b.requested for b in seg.blocks),
                    "stream": 0,
                    "segment_type": seg.kind,
                    "segment_pool_id": (0, 0),
                    "is_expandable": seg.expandable,
                    "frames": symbolize(seg.frames) if symbolize is not None and seg.frames else [],
                    "blocks": bl,
                }
            )
        return segs

    def snapshot_trace(self, symbolize):
        out = []
        for action, addr, size, frames, t, extra in self.ring:
            e = {"action": action}
            if action == "oom":
                e["device_free"] = extra
            else:
                e["addr"] = addr
            e["size"] = size
            e["stream"] = 0
            e["compile_context"] = "N/A"
            e["user_metadata"] = ""
            if frames:
                e["frames"] = symbolize(frames)
            e["time_us"] = t
            out.append(e)
        return out

    def total_active(self):
        return sum(b.size for seg in self.segments for b in seg.blocks if b.state != "inactive")


def symbolizer():
    """torch's symbolize: one dict per distinct frame and one list per distinct traceback,
    shared by every block and trace entry that has it."""
    frames = {}
    lists = {}

    def symbolize(tb):
        hit = lists.get(id(tb))
        if hit is not None and hit[0] is tb:
            return hit[1]
        out = []
        for key in tb:
            d = frames.get(key)
            if d is None:
                d = frames[key] = {"filename": key[0], "line": key[1], "name": key[2]}
            out.append(d)
        lists[id(tb)] = (tb, out)
        return out

    return symbolize


def snapshot(include_traces=True):
    """torch's snapshot: a `snapshot` event in each device's trace while history is on, then
    the segments (and the traces)."""
    with _lock:
        for d in DEVICES:
            d.record("snapshot", 0, d.total_active(), None)
        sym = symbolizer() if include_traces else None
        segments = []
        for d in DEVICES:
            segments.extend(d.snapshot_segments(sym))
        traces = [d.snapshot_trace(sym) for d in DEVICES] if include_traces else []
        return segments, traces


def trace_actions(device):
    """The actions in a device's trace now (tests)."""
    with _lock:
        return [e[0] for e in DEVICES[device].ring]


DEVICES = [Device(i, spec) for i, spec in enumerate(_s.devices())]


def _device(index):
    if not initialised:
        from . import cuda

        cuda._lazy_init()
    return DEVICES[index]


def touch(index):
    """Make the device's primary context exist (a job's first use of it)."""
    d = _device(index)
    if not d.context:
        if _s.on_agent_thread():
            _s.violation("torch: context created on device %d" % index)
        d.context = True
    return d


def raise_oom(index, nbytes, size=None, frames=None):
    from . import cuda

    d = DEVICES[index]
    d.ooms += 1
    free = max(0, d.total - d.reserved())
    d.record("oom", None, size if size is not None else nbytes, frames, extra=free)
    for obs in list(observers):
        obs(index, nbytes, d.total, free)  # an exception here replaces the OOM, as in torch
    raise cuda.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate %d bytes. GPU %d has a total capacity of %d bytes" % (nbytes, index, d.total)
    )


# -- what test jobs call ------------------------------------------------------------------


def allocate(device, nbytes):
    """Allocate nbytes on device (initialising CUDA and the device's context if needed)."""
    with _lock:
        return touch(device).malloc(int(nbytes))


def free(handle, pending=False):
    """Free an allocation; pending: its block waits for a stream (active_pending_free)
    until complete(handle)."""
    with _lock:
        DEVICES[handle[0]].free(handle, pending)


def complete(handle):
    with _lock:
        DEVICES[handle[0]].complete(handle)


def empty_cache(device=None):
    with _lock:
        for d in DEVICES if device is None else [DEVICES[device]]:
            d.empty_cache()


def fragment(device, pieces=8, size=1 << 20):
    """Allocate `pieces` blocks in one segment and free every other one: the largest free
    block is then `size` (the tail of the segment aside). Returns the live handles."""
    with _lock:
        d = touch(device)
        hs = [d.malloc(size) for _ in range(pieces)]
        for h in hs[::2]:
            d.free(h)
        return hs[1::2]


def oom(device, nbytes):
    """What an allocation that does not fit does: observers, then OutOfMemoryError."""
    touch(device)
    h = HISTORY
    raise_oom(device, int(nbytes), None, capture() if h.enabled and h.context >= STATE else None)


def largest_inactive(device):
    best = 0
    for seg in DEVICES[device].segments:
        for b in seg.blocks:
            if b.state == "inactive":
                best = max(best, b.size)
    return best

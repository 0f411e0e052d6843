"""The stub's allocator model (one per device) and the helpers test jobs call."""

import os
import threading

import _strata_stub as _s

LARGE_SEGMENT = 2 * 1024 * 1024
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


history = []  # the memory history the job records (_record_memory_history), as events
recording = False
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


class Block(object):
    __slots__ = ("size", "requested", "state")

    def __init__(self, size, requested, state):
        self.size, self.requested, self.state = size, requested, state


class Device(object):
    def __init__(self, index, spec):
        self.index = index
        self.spec = spec
        self.total = int(spec.get("total", 80 << 30))
        self.context = False
        self.segments = []  # [address, [Block, ...]]
        self.next_address = 0x7F0000000000 + index * (1 << 40)
        self.cur = dict((g, 0) for g in _GROUPS)
        self.peak = dict((g, 0) for g in _GROUPS)
        self.cum_alloc = dict((g, 0) for g in _GROUPS)
        self.cum_free = dict((g, 0) for g in _GROUPS)
        self.retries = self.ooms = self.device_allocs = self.device_frees = 0

    def _add(self, group, n):
        self.cur[group] += n
        if n > 0:
            self.cum_alloc[group] += n
        else:
            self.cum_free[group] -= n
        self.peak[group] = max(self.peak[group], self.cur[group])

    def _recount(self):
        split = sum(
            b.size
            for _, blocks in self.segments
            if any(x.state != "inactive" for x in blocks)
            for b in blocks
            if b.state == "inactive"
        )
        n = sum(
            1
            for _, blocks in self.segments
            if any(x.state != "inactive" for x in blocks)
            for b in blocks
            if b.state == "inactive"
        )
        if expandable():
            split = n = 0
        self._add("inactive_split_bytes", split - self.cur["inactive_split_bytes"])
        self._add("inactive_split", n - self.cur["inactive_split"])

    def reserved(self):
        return self.cur["reserved_bytes"]

    def malloc(self, nbytes):
        size = max(ROUND, (nbytes + ROUND - 1) // ROUND * ROUND)
        found = self._best_fit(size)
        if found is None:
            seg_size = (size + LARGE_SEGMENT - 1) // LARGE_SEGMENT * LARGE_SEGMENT
            if self.reserved() + seg_size > self.total:
                self.empty_cache()
                self.retries += 1
            if self.reserved() + seg_size > self.total:
                raise_oom(self.index, nbytes)
            self.segments.append([self.next_address, [Block(seg_size, 0, "inactive")]])
            self.next_address += seg_size
            self.device_allocs += 1
            self._add("reserved_bytes", seg_size)
            self._add("segment", 1)
            found = (len(self.segments) - 1, 0)
        si, bi = found
        blocks = self.segments[si][1]
        b = blocks[bi]
        if b.size > size:
            blocks.insert(bi + 1, Block(b.size - size, 0, "inactive"))
            b.size = size
        b.state, b.requested = "active_allocated", nbytes
        for g, n in (("allocated_bytes", size), ("active_bytes", size), ("requested_bytes", nbytes)):
            self._add(g, n)
        self._add("allocation", 1)
        self._add("active", 1)
        self._recount()
        return (self.index, self.segments[si][0], id(b), b)

    def _best_fit(self, size):
        best = None
        for si, (_, blocks) in enumerate(self.segments):
            for bi, b in enumerate(blocks):
                if b.state == "inactive" and b.size >= size and (best is None or b.size < best[0]):
                    best = (b.size, si, bi)
        return None if best is None else best[1:]

    def free(self, handle):
        _, addr, _, block = handle
        for seg in self.segments:
            if seg[0] != addr:
                continue
            blocks = seg[1]
            for bi, b in enumerate(blocks):
                if b is block and b.state != "inactive":
                    self._add("allocated_bytes", -b.size)
                    self._add("active_bytes", -b.size)
                    self._add("requested_bytes", -b.requested)
                    self._add("allocation", -1)
                    self._add("active", -1)
                    b.state, b.requested = "inactive", 0
                    merged = []
                    for x in blocks:
                        if merged and merged[-1].state == "inactive" and x.state == "inactive":
                            merged[-1].size += x.size
                        else:
                            merged.append(x)
                    seg[1] = merged
                    self._recount()
                    return
        raise ValueError("unknown block")

    def empty_cache(self):
        keep = []
        for seg in self.segments:
            if all(b.state == "inactive" for b in seg[1]):
                self._add("reserved_bytes", -sum(b.size for b in seg[1]))
                self._add("segment", -1)
                self.device_frees += 1
            else:
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

    def snapshot_segments(self):
        segs = []
        for addr, blocks in self.segments:
            a = addr
            bl = []
            for b in blocks:
                bl.append({"address": a, "size": b.size, "requested_size": b.requested, "state": b.state, "frames": []})
                a += b.size
            total = sum(b.size for b in blocks)
            used = sum(b.size for b in blocks if b.state != "inactive")
            segs.append(
                {
                    "device": self.index,
                    "address": addr,
                    "total_size": total,
                    "allocated_size": used,
                    "active_size": used,
                    "requested_size": sum(b.requested for b in blocks),
                    "stream": 0,
                    "segment_type": "large",
                    "segment_pool_id": (0, 0),
                    "is_expandable": expandable(),
                    "frames": [],
                    "blocks": bl,
                }
            )
        return segs


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


def raise_oom(index, nbytes):
    from . import cuda

    d = DEVICES[index]
    d.ooms += 1
    free = max(0, d.total - d.reserved())
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


def free(handle):
    with _lock:
        DEVICES[handle[0]].free(handle)


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
    raise_oom(device, int(nbytes))


def largest_inactive(device):
    best = 0
    for _, blocks in DEVICES[device].segments:
        for b in blocks:
            if b.state == "inactive":
                best = max(best, b.size)
    return best

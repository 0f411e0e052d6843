"""CuPy: the default memory pool per device that holds a context.

CuPy's pool reports the calling thread's current device, so each device is read inside
`with cupy.cuda.Device(i)` on the agent thread. Switching device with the CUDA runtime
creates a context on a device that has none, so only devices whose primary context the
driver reports active are read, and the agent thread's own current device is first set to
one of those (Device.__exit__ switches back to it).
"""

import os
import sys

from . import _cuda
from . import MAX_DEVICES
from ._reading import DEVICE_FIELDS, count, importing, new_entry, pci_from_string, text

REASON = "not reported by the cupy pool"


class CupyReader(object):
    name = "cupy"

    def __init__(self, agent):
        self.agent = agent
        self.waiting_note = "waiting for cupy to use a GPU"
        self.version = None
        self.backend = None
        self.settings = {"CUPY_GPU_MEMORY_LIMIT": text(os.environ.get("CUPY_GPU_MEMORY_LIMIT"), 64)}
        self.devices = []
        self.ident = {}
        self.note = None
        self.home = None  # the agent thread's current device, once set

    def _active(self, n):
        return [i for i in range(min(n, MAX_DEVICES)) if _cuda.primary_context_active(i)]

    def ready(self):
        cupy = sys.modules.get("cupy")
        cuda = getattr(cupy, "cuda", None) if cupy is not None else None
        if cuda is None or importing(cupy):
            self.waiting_note = "waiting for cupy to finish importing"
            return False
        self.waiting_note = "waiting for cupy to use a GPU"
        # Never cuInit: before the job's, the driver answers "not initialised".
        n = _cuda.device_count()
        if n is None:
            if _cuda.lib() is None:
                self.waiting_note = "waiting for cupy to use a GPU (libcuda not loaded yet)"
            return False
        return bool(self._active(n))

    def _pool(self, cupy):
        """(backend, pool) or (backend, None) when the job uses its own allocator."""
        alloc = cupy.cuda.get_allocator()
        default = cupy.get_default_memory_pool()
        if alloc == default.malloc:
            return "pool", default
        owner = getattr(alloc, "__self__", None)
        if owner is not None and type(owner).__name__ == "MemoryAsyncPool":
            return "async_pool", owner
        return "custom", None

    def sample(self, now, timer):
        cupy = sys.modules.get("cupy")
        if cupy is None:
            return None
        if self.version is None:
            self.version = text(getattr(cupy, "__version__", None), 64)
        self.backend, pool = self._pool(cupy)
        n = _cuda.device_count() or 0
        self.devices = self._active(n)
        for i in self.devices:
            if i not in self.ident:
                ident = {"index": i, "uuid": None, "pci_bus_id": None, "name": None}
                try:
                    # uuid stays null: CuPy's UUID bytes can be cut at a zero byte.
                    ident["pci_bus_id"] = pci_from_string(timer.call(lambda d: cupy.cuda.Device(d).pci_bus_id, i))
                except Exception:
                    pass
                self.ident[i] = ident
        if pool is None:
            self.note = "custom CuPy allocator: the default pool does not see its memory"
            return []
        self.note = None
        if not self.devices:
            return []
        runtime = cupy.cuda.runtime
        if self.home not in self.devices:
            cur = timer.call(runtime.getDevice)
            if cur not in self.devices:
                timer.call(runtime.setDevice, self.devices[0])
                cur = self.devices[0]
            self.home = cur
        entries = []
        for i in self.devices:
            with cupy.cuda.Device(i):
                used = count(timer.call(pool.used_bytes))
                total = count(timer.call(pool.total_bytes))
                limit = None
                get_limit = getattr(pool, "get_limit", None)
                if get_limit is not None:
                    try:
                        limit = count(timer.call(get_limit)) or None
                    except Exception:
                        limit = None
            e = self.entry(i, used, total, limit)
            if e is not None:
                entries.append(e)
        return entries

    def entry(self, i, used, total, limit):
        if used is None or total is None:
            return None
        e = new_entry(i)
        e["allocated"] = used
        e["reserved"] = total
        e["limit"] = limit
        unrep = e["unreported"]
        for f in DEVICE_FIELDS:
            if e[f] is None:
                unrep[f] = REASON
        unrep["largest_free_block"] = REASON
        if limit is None:
            unrep["limit"] = "no pool limit set"
        return e

    def pool_state(self, i):
        """(reserved,) of device i now: the default pool's total bytes, or None."""
        cupy = sys.modules.get("cupy")
        if cupy is None or i not in self.devices:
            return None
        try:
            _, pool = self._pool(cupy)
            if pool is None:
                return None
            with cupy.cuda.Device(i):
                total = count(pool.total_bytes())
        except Exception:
            return None
        return None if total is None else (total,)

    def step_read(self):
        """At a step's end, on the job's thread: the pool of the job's current device only
        (the pool answers for the calling thread's device; switching it is not ours to do
        on the job's thread)."""
        cupy = sys.modules.get("cupy")
        if cupy is None or not self.devices:
            return None
        _, pool = self._pool(cupy)
        if pool is None:
            return None
        i = cupy.cuda.runtime.getDevice()
        if i not in self.devices:
            return None
        get_limit = getattr(pool, "get_limit", None)
        limit = count(get_limit()) or None if get_limit is not None else None
        return [(i, (count(pool.used_bytes()), count(pool.total_bytes()), limit))]

    def step_entries(self, raw, when):
        entries = []
        for i, (used, total, limit) in raw:
            e = self.entry(i, used, total, limit)
            if e is not None:
                entries.append(e)
        return entries

    def hello_fields(self):
        return {
            "framework": "cupy",
            "framework_version": self.version,
            "backend": self.backend,
            "settings": self.settings,
            "devices": [self.ident[i] for i in self.devices if i in self.ident],
            "note": self.note,
        }

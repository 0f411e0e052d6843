"""The agent's own reading of each device's CUDA context (PROTOCOL.md, "Context at CUDA init").

After each periodic sample, on the sampler's thread: a device whose pool has held nothing
yet (reserved 0, and where the allocator counts them, no device allocation and a peak of 0)
gets its NVML usage read (_nvml.process_used), with the pool's state read just before and
just after; only when both are empty and equal is the reading its context. Each device is
read until one reading holds, at most three times; the result goes into every later hello.
"""

from . import _nvml

MAX_TRIES = 3


def _untouched(entry, warm):
    """Whether the device's allocator has held nothing since CUDA init, as far as its sample
    tells. Without any counter to say so, only during the warm-up right after init."""
    if entry.get("reserved") != 0:
        return False
    allocs, peak = entry.get("device_allocs"), entry.get("peak_reserved")
    if allocs not in (None, 0) or peak not in (None, 0):
        return False
    return warm or allocs is not None or peak is not None


class Contexts(object):
    def __init__(self):
        self.read = {}  # device index -> the hello's context object
        self.tries = {}

    def update(self, reader, entries, warm):
        """Reads the context of the devices in `entries` that need it; True when one was
        read (the hello changes)."""
        if reader is None or not entries or _nvml.off() is not None:
            return False
        pool_state = getattr(reader, "pool_state", None)
        if pool_state is None:
            return False
        ident = getattr(reader, "ident", None) or {}
        changed = False
        for e in entries:
            i = e.get("index")
            if i in self.read or self.tries.get(i, 0) >= MAX_TRIES or not _untouched(e, warm):
                continue
            d = ident.get(i) or {}
            before = pool_state(i)
            if before is None or before[0] != 0:
                continue
            self.tries[i] = self.tries.get(i, 0) + 1
            got = _nvml.process_used(d.get("uuid"), d.get("pci_bus_id"))
            if got is None:
                continue
            if pool_state(i) != before:
                continue  # the pool moved while NVML was read: not the context alone
            self.read[i] = {"bytes": got[0], "time": got[1], "reserved": 0, "method": _nvml.METHOD}
            changed = True
        return changed

    def add_to(self, devices):
        """The hello's devices, each with its context where it was read."""
        read = self.read
        if not read:
            return devices
        return [dict(d, context=read[d["index"]]) if d.get("index") in read else d for d in devices]

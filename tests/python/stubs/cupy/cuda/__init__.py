"""cupy.cuda, stubbed."""

import threading

import _strata_stub as _s

from . import runtime

_thread_local = threading.local()
_current_allocator = None


class Device(object):
    def __init__(self, device=None):
        self.id = runtime.getDevice() if device is None else int(device)

    def __enter__(self):
        stack = getattr(_thread_local, "stack", None)
        if stack is None:
            stack = _thread_local.stack = []
        prev = runtime.getDevice()
        stack.append(prev)
        if self.id != prev:
            runtime.setDevice(self.id)
        return self

    def __exit__(self, *args):
        # Like CuPy: back to the previous device, unconditionally.
        runtime.setDevice(_thread_local.stack.pop())

    def use(self):
        runtime.setDevice(self.id)

    @property
    def pci_bus_id(self):
        return runtime.deviceGetPCIBusId(self.id)


class MemoryPointer(object):
    def __init__(self, pool, device, size):
        self.pool, self.device_id, self.size = pool, device, size


class MemoryPool(object):
    def __init__(self):
        self._lock = threading.Lock()
        self._used = {}
        self._free = {}
        self._limit = {}

    def malloc(self, size):
        dev = runtime.getDevice()
        runtime._require_context(dev)
        size = max(512, (int(size) + 511) // 512 * 512)
        with self._lock:
            free = self._free.setdefault(dev, [])
            if size in free:
                free.remove(size)
            else:
                lim = self._limit.get(dev, 0)
                if lim and self._used.get(dev, 0) + sum(free) + size > lim:
                    raise RuntimeError("OutOfMemoryError: pool limit")
            self._used[dev] = self._used.get(dev, 0) + size
        return MemoryPointer(self, dev, size)

    def _release(self, ptr):
        with self._lock:
            self._used[ptr.device_id] -= ptr.size
            self._free.setdefault(ptr.device_id, []).append(ptr.size)

    def used_bytes(self):
        return self._used.get(runtime.getDevice(), 0)

    def free_bytes(self):
        return sum(self._free.get(runtime.getDevice(), []))

    def total_bytes(self):
        return self.used_bytes() + self.free_bytes()

    def free_all_blocks(self, stream=None):
        with self._lock:
            self._free[runtime.getDevice()] = []

    def set_limit(self, size=None, fraction=None):
        self._limit[runtime.getDevice()] = int(size or 0)

    def get_limit(self):
        return self._limit.get(runtime.getDevice(), 0)


class MemoryAsyncPool(MemoryPool):
    pass


def get_allocator():
    a = getattr(_thread_local, "allocator", None)
    return a if a is not None else _current_allocator


def set_allocator(allocator=None):
    global _current_allocator
    _current_allocator = allocator


def using_allocator(allocator=None):
    raise NotImplementedError("not stubbed")


__all__ = ["Device", "MemoryPool", "MemoryAsyncPool", "get_allocator", "set_allocator", "runtime"]

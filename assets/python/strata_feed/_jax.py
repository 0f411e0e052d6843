"""JAX: Device.memory_stats() of each local GPU, read only once the job initialised backends.

What memory_stats() holds under each XLA_PYTHON_CLIENT_ALLOCATOR, from XLA's sources
(xla/python/py_device.cc PyDevice::MemoryStats, xla/pjrt/gpu/se_gpu_pjrt_client.cc
GetStreamExecutorGpuDeviceAllocator and StreamExecutorGpuDevice::GetAllocatorStats,
xla/pjrt/gpu/allocator_config.h, xla/stream_executor/gpu/gpu_cudamallocasync_allocator.cc,
xla/stream_executor/vmm_device_address_allocator.h; jaxlib's xla_client.py for the names):
memory_stats() is None unless the client's allocator is a MultiDeviceAdapter whose
per-device allocator keeps statistics.
- bfc, default (BFCAllocator in a MultiDeviceAdapter): bytes_in_use, peaks, bytes_limit,
  pool_bytes / peak_pool_bytes (the pool; bytes_reserved reads 0) and
  largest_free_block_bytes inside it: everything is filled.
- cuda_async (GpuCudaMallocAsyncAllocator): bytes_in_use, peak_bytes_in_use, num_allocs,
  largest_alloc_size and bytes_limit only. No pool_bytes, bytes_reserved stays 0 and
  largest_free_block_bytes is never set: reserved and the largest free block are sent as
  null with that reason, allocated is kept.
- platform (synchronous StreamExecutor allocations, no pool): the client uses the backend's
  own allocator (or, in newer XLA, a MultiDeviceAdapter of StreamExecutor allocators that
  keep no statistics): memory_stats() is None.
- vmm (CudaDeviceAddressVmmAllocator, a DeviceAddressAllocator, not a MultiDeviceAdapter):
  memory_stats() is None.
- address, or any other value: not an allocator jaxlib accepts (default, platform, bfc,
  cuda_async, vmm): jaxlib refuses it and the GPU backend does not start.
Should platform or vmm ever return statistics, allocated is kept and reserved is null: they
keep no pool.
"""

import os
import sys

from . import MAX_DEVICES
from ._reading import DEVICE_FIELDS, count, importing, new_entry, pci_from_string, text, try_lock

REASON = "not reported by jax"
ASYNC_REASON = "not reported by XLA's cuda_async allocator"
NO_POOL = ("platform", "vmm")  # allocators without a pool: no reserved figure
ACCEPTED = ("bfc", "cuda_async", "platform", "vmm")  # what jaxlib accepts ("default" is bfc)
_GPU_PLATFORMS = ("gpu", "cuda")
# XLA_CLIENT_MEM_FRACTION is the current name; XLA_PYTHON_CLIENT_MEM_FRACTION the old one.
_ENV = (
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
)
OLDEST = "0.4.21"  # the first JAX with xla_bridge.backends_are_initialized


def _backend_name():
    a = (os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR") or "").strip().lower()
    if a in ("", "default", "bfc"):
        return "bfc"
    return text(a, 64)


class _NoTimer(object):
    @staticmethod
    def call(fn, *args):
        return fn(*args)


class JaxReader(object):
    name = "jax"

    def __init__(self, agent):
        self.agent = agent
        self.waiting_note = "waiting for jax to initialise its backends"
        self.settled = False
        self.idle = False
        self.version = None
        self.backend = _backend_name()
        self.settings = dict((k, text(os.environ.get(k), 64)) for k in _ENV)
        self.devices = []
        self.read = []  # (index, jax device) of the devices the last sample read
        self.ident = {}
        self.notes = {}
        self.cpu_only = None  # the backends seen with no GPU among them

    def ready(self):
        jax = sys.modules.get("jax")
        xb = sys.modules.get("jax._src.xla_bridge")
        if jax is None or xb is None or importing(jax) or importing(xb):
            self.waiting_note = "waiting for jax to finish importing"
            return False
        if not callable(getattr(xb, "backends_are_initialized", None)):
            self.idle = self.settled = True
            self.waiting_note = "jax %s is older than %s (no backends_are_initialized): its memory is not read" % (
                text(getattr(jax, "__version__", None), 32),
                OLDEST,
            )
            return False
        # backends_are_initialized() takes _backend_lock, which backends() holds for the
        # whole of the job's backend init: look at the lock and the dict without waiting.
        free = try_lock(getattr(xb, "_backend_lock", None))
        if free is False:
            self.waiting_note = "jax is initialising its backends"
            return False
        backends = getattr(xb, "_backends", None)
        if free is None or not isinstance(backends, dict):
            self.waiting_note = "jax %s: cannot tell without waiting whether its backends are up" % text(getattr(jax, "__version__", None), 32)
            self.idle = self.settled = True
            return False
        if not backends:
            self.settled = self.idle = False
            self.waiting_note = "waiting for jax to initialise its backends"
            return False
        # Initialised: listing devices initialises nothing more. A JAX on the CPU alone is
        # not the framework to read (torch or CuPy may hold the GPU), and stays so: it is
        # looked at again only when its backends change.
        key = tuple(sorted(backends))
        if key == self.cpu_only:
            return False
        if not self._gpus(jax, _NoTimer()):
            self.cpu_only = key
            self.idle = self.settled = True
            self.waiting_note = "jax has no GPU backend (backends: %s)" % ", ".join(key)
            if self.backend not in ACCEPTED:
                self.waiting_note += (
                    "; XLA_PYTHON_CLIENT_ALLOCATOR=%s is not an allocator jaxlib accepts "
                    "(default, platform, bfc, cuda_async, vmm)" % self.backend
                )
            return False
        return True

    def _gpus(self, jax, timer):
        devs = timer.call(jax.local_devices)
        gpus = [d for d in devs if getattr(d, "platform", None) in _GPU_PLATFORMS]
        if not gpus:
            # The default backend may be the CPU while a GPU backend exists too. Backends
            # are initialised already, so naming one initialises nothing.
            try:
                devs = timer.call(lambda: jax.local_devices(backend="gpu"))
                gpus = [d for d in devs if getattr(d, "platform", None) in _GPU_PLATFORMS]
            except Exception:
                gpus = []
        return gpus[:MAX_DEVICES]

    @staticmethod
    def _index(d):
        i = getattr(d, "local_hardware_id", None)
        if i is None:
            i = getattr(d, "id", None)
        return i

    def _identity(self, d, i):
        from . import _cuda

        # JAX initialised the GPU backend, so its cuInit ran: the driver can answer.
        ident = {"index": i, "uuid": None, "pci_bus_id": None, "name": text(getattr(d, "device_kind", None))}
        try:
            ident["pci_bus_id"] = pci_from_string(_cuda.pci_bus_id(i)) if i is not None else None
            ident["uuid"] = _cuda.uuid(i) if i is not None else None
        except Exception:
            pass
        return ident

    def sample(self, now, timer):
        jax = sys.modules.get("jax")
        if jax is None:
            return None
        if self.version is None:
            self.version = text(getattr(jax, "__version__", None), 64)
        gpus = self._gpus(jax, timer)
        if not gpus:
            self.notes["_"] = "jax has no local GPU device"
        else:
            self.notes.pop("_", None)
        entries = []
        devices = []
        read = []
        for d in gpus:
            i = self._index(d)
            if not isinstance(i, int):
                continue
            devices.append(i)
            if i not in self.ident:
                self.ident[i] = self._identity(d, i)
            try:
                st = timer.call(d.memory_stats)
            except Exception as e:
                self.notes[i] = "memory_stats() of device %d failed: %s" % (i, text(e, 200))
                continue
            if st is None:
                self.notes[i] = "memory_stats() of device %d returned None: XLA's %s allocator keeps no statistics" % (
                    i,
                    self.backend,
                )
                continue
            self.notes.pop(i, None)
            e = self.entry(i, st, now)
            if e is not None:
                entries.append(e)
                read.append((i, d))
        self.devices = devices
        self.read = read
        return entries

    def pool_state(self, i):
        """(reserved,) of device i now, or None (no pool figure under cuda_async)."""
        for j, d in self.read:
            if j == i:
                try:
                    st = d.memory_stats()
                    e = self.entry(i, st, 0.0) if st is not None else None
                except Exception:
                    return None
                return (e["reserved"],) if e is not None and e["reserved"] is not None else None
        return None

    def step_read(self):
        """At a step's end, on the job's thread: memory_stats() of the devices the last
        sample read."""
        return [(i, d.memory_stats()) for i, d in self.read]

    def step_entries(self, raw, when):
        entries = []
        for i, st in raw:
            e = self.entry(i, st, when) if st is not None else None
            if e is not None:
                entries.append(e)
        return entries

    def entry(self, i, st, now):
        e = new_entry(i)
        unrep = e["unreported"]

        def get(key):
            return count(st.get(key))

        e["allocated"] = get("bytes_in_use")
        if e["allocated"] is None:
            self.notes[i] = "memory_stats() of device %d lacks bytes_in_use" % i
            return None
        e["peak_allocated"] = get("peak_bytes_in_use")
        if self.backend == "cuda_async" or self.backend in NO_POOL:
            # No pool figure at all: bytes_reserved is an unset 0, not a measured one.
            reason = ASYNC_REASON
            if self.backend != "cuda_async":
                reason = "not reported by XLA's %s allocator (it keeps no pool)" % self.backend
            unrep["reserved"] = reason
            unrep["peak_reserved"] = reason
            unrep["largest_free_block"] = reason
        else:
            e["reserved"] = get("pool_bytes")
            if e["reserved"] is None:
                e["reserved"] = get("bytes_reserved")
            if e["reserved"] is None:
                self.notes[i] = "memory_stats() of device %d lacks a reserved figure" % i
                return None
            e["peak_reserved"] = get("peak_pool_bytes")
            if e["peak_reserved"] is None:
                e["peak_reserved"] = get("peak_bytes_reserved")
            e["largest_free_block"] = get("largest_free_block_bytes")
            if e["largest_free_block"] is None:
                unrep["largest_free_block"] = REASON
            else:
                e["largest_free_block_time"] = now
        for f in DEVICE_FIELDS:
            if e[f] is None and f not in unrep:
                unrep[f] = REASON
        e["limit"] = get("bytes_limit")
        if e["limit"] is None:
            unrep["limit"] = "bytes_limit not set"
        return e

    def hello_fields(self):
        notes = [self.notes[k] for k in sorted(self.notes, key=str)]
        if self.backend == "cuda_async":
            notes.append("cuda_async allocator: reserved and the largest free block are not reported, allocated is")
        return {
            "framework": "jax",
            "framework_version": self.version,
            "backend": self.backend,
            "settings": self.settings,
            "devices": [self.ident[i] for i in self.devices if i in self.ident],
            "note": "; ".join(notes) if notes else None,
        }

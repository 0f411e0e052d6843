"""The stub's backends and BFC-like pools, and the helpers test jobs call."""

import gc
import os
import threading

import _strata_stub as _s

from ._src import xla_bridge as _xb

_lock = threading.Lock()


class Backend(object):
    def __init__(self, platform, devices):
        self.platform = platform
        self.devices = devices


class Device(object):
    def __init__(self, id, local_hardware_id, platform, spec):
        self.id = id
        self.local_hardware_id = local_hardware_id
        self.platform = platform
        self.process_index = 0
        self.device_kind = spec.get("name", "NVIDIA Stub GPU") if platform == "gpu" else "cpu"
        self.total = int(spec.get("total", 80 << 30))
        self.in_use = self.peak_in_use = self.num_allocs = self.largest_alloc = 0
        self.pool = self.peak_pool = 0
        self.limit = int(self.total * float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION") or 0.75))
        self.live = {}

    def __repr__(self):
        return "CudaDevice(id=%d)" % self.id if self.platform == "gpu" else "CpuDevice(id=%d)" % self.id

    def memory_stats(self):
        # The real one first drops the Python references XLA deferred
        # (PythonRefManager::CollectGarbage in xla/python/python_ref_manager.cc), which
        # frees buffers but is not a gc.collect(). STRATA_STUB_JAX_STATS_GC=1 makes the
        # call expensive the way a large heap would, for the tests of the agent's duty.
        if os.environ.get("STRATA_STUB_JAX_STATS_GC") == "1":
            gc.collect()
        if self.platform != "gpu":
            return None
        if (os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR") or "").lower() in ("platform", "vmm"):
            if os.environ.get("STRATA_STUB_JAX_PLATFORM_STATS") != "1":
                return None  # no MultiDeviceAdapter with statistics behind them
        mode = os.environ.get("STRATA_STUB_JAX_STATS") or "bfc"
        with _lock:
            largest_free = max(0, self.pool - self.in_use)
            st = {
                "num_allocs": self.num_allocs,
                "bytes_in_use": self.in_use,
                "peak_bytes_in_use": self.peak_in_use,
                "largest_alloc_size": self.largest_alloc,
                "bytes_reserved": 0,
                "peak_bytes_reserved": 0,
                "largest_free_block_bytes": largest_free,
            }
            if mode == "bfc":
                st.update(bytes_limit=self.limit, pool_bytes=self.pool, peak_pool_bytes=self.peak_pool)
            elif mode == "reserved":
                st.update(bytes_limit=self.limit, bytes_reserved=self.pool, peak_bytes_reserved=self.peak_pool)
            elif mode == "async":
                # XLA's GpuCudaMallocAsyncAllocator: no pool figures, an unset 0 for the
                # largest free block and bytes_reserved; bytes_limit is the pool size.
                st.update(bytes_limit=self.limit, largest_free_block_bytes=0)
            elif mode == "pjrt":
                st.update(
                    bytes_limit=-1,
                    pool_bytes=-1,
                    peak_pool_bytes=-1,
                    bytes_reserved=self.pool,
                    peak_bytes_reserved=self.peak_pool,
                    largest_free_block_bytes=-1,
                )
            return st


def init():
    """Initialise the backends as JAX's first operation does: cuInit, a context on every
    GPU, and (unless XLA_PYTHON_CLIENT_PREALLOCATE=false) the BFC pool preallocated."""
    if _xb._backends:
        return
    if _s.on_agent_thread():
        _s.violation("jax backends initialised on the agent thread")
    specs = _s.devices()
    allocator = (os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR") or "default").lower()
    if allocator not in ("default", "platform", "bfc", "cuda_async", "vmm"):
        # jaxlib refuses the value (xla_client.generate_pjrt_gpu_plugin_options raises
        # ValueError) and JAX goes on with the CPU backend alone.
        _xb._backends["cpu"] = Backend("cpu", [Device(len(specs), 0, "cpu", {})])
        return
    _s.cu_init()
    gpus = []
    for i, spec in enumerate(specs):
        _s.cu_retain(i)
        d = Device(i, i, "gpu", spec)
        if (os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE") or "true").lower() != "false":
            d.pool = d.peak_pool = d.limit
        gpus.append(d)
    _xb._backends["cpu"] = Backend("cpu", [Device(len(specs), 0, "cpu", {})])
    _xb._backends["gpu"] = Backend("gpu", gpus)


def _gpu(i):
    init()
    return _xb._backends["gpu"].devices[i]


def allocate(device, nbytes):
    d = _gpu(device)
    with _lock:
        if d.in_use + nbytes > d.limit:
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate %d bytes." % nbytes)
        d.in_use += nbytes
        d.num_allocs += 1
        d.largest_alloc = max(d.largest_alloc, nbytes)
        d.peak_in_use = max(d.peak_in_use, d.in_use)
        if d.in_use > d.pool:  # no preallocation: the pool grows by 2 MiB regions
            d.pool = (d.in_use + (2 << 20) - 1) // (2 << 20) * (2 << 20)
            d.peak_pool = max(d.peak_pool, d.pool)
        h = (device, object())
        d.live[h] = nbytes
        return h


def free(handle):
    d = _gpu(handle[0])
    with _lock:
        d.in_use -= d.live.pop(handle)

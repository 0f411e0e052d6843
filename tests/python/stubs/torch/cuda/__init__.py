"""torch.cuda, stubbed: lazy init, the memory API, device properties."""

import os
import threading
import time
import traceback

import _strata_stub as _s

from .. import _C


class OutOfMemoryError(RuntimeError):
    pass


class DeferredCudaCallError(Exception):
    pass


_initialized = False
_tls = threading.local()
_initialization_lock = threading.Lock()
_queued_calls = []
_current = threading.local()


def _state():
    from .. import _stub

    return _stub


def is_initialized():
    return _initialized and not _C._cuda_isInBadFork()


def _lazy_call(callable, **kwargs):
    with _initialization_lock:
        if is_initialized():
            callable()
        else:
            _queued_calls.append((callable, traceback.format_stack()))


def _lazy_init():
    global _initialized
    if is_initialized() or hasattr(_tls, "is_initializing"):
        return
    with _initialization_lock:
        if is_initialized():
            return
        if _s.on_agent_thread():
            _s.violation("torch.cuda._lazy_init on the agent thread")
        delay = float(os.environ.get("STRATA_STUB_INIT_DELAY") or 0)
        if delay:
            time.sleep(delay)
        _state().initialised = True
        _tls.is_initializing = True
        try:
            for queued_call, orig_traceback in _queued_calls:
                try:
                    queued_call()
                except Exception as e:
                    raise DeferredCudaCallError("CUDA call failed lazily at initialization with error: %s" % e) from e
        finally:
            delattr(_tls, "is_initializing")
        _initialized = True


def init():
    _lazy_init()


def _require_init(name):
    if not is_initialized():
        _s.violation("torch.cuda.%s before CUDA init" % name)


def device_count():
    _require_init("device_count")
    return len(_state().DEVICES)


def is_available():
    _require_init("is_available")
    return True


def current_device():
    _require_init("current_device")
    return getattr(_current, "device", 0)


def set_device(device):
    _require_init("set_device")
    _state().touch(device)
    _current.device = device


def _index(device, name):
    if device is None:
        if _s.on_agent_thread():
            _s.violation("torch.cuda.%s without an explicit device on the agent thread" % name)
        return getattr(_current, "device", 0)
    if hasattr(device, "index"):
        return device.index or 0
    return int(device)


def mem_get_info(device=None):
    _require_init("mem_get_info")
    d = _state().touch(_index(device, "mem_get_info"))
    return (d.total - d.reserved(), d.total)


def cudart():
    _require_init("cudart")
    return object()


class _CUuuid(object):
    def __init__(self, s):
        self._s = s

    def __str__(self):
        return self._s

    def __repr__(self):
        return "_CUuuid(%r)" % self._s


class _CudaDeviceProperties(object):
    def __init__(self, d):
        spec = d.spec
        self.name = spec.get("name", "NVIDIA Stub GPU")
        self.total_memory = d.total
        self.major, self.minor, self.multi_processor_count = 9, 0, 132
        if os.environ.get("STRATA_STUB_TORCH_NO_UUID") != "1":
            self.uuid = _CUuuid(spec.get("uuid", "00000000-0000-0000-0000-000000000000"))
        dom, bus, dev = _s.parse_pci(spec.get("pci_bus_id", "00000000:00:00.0"))
        self.pci_domain_id, self.pci_bus_id, self.pci_device_id = dom, bus, dev


def get_device_properties(device=None):
    _require_init("get_device_properties")
    i = _index(device, "get_device_properties")
    _s.trace("get_device_properties %d" % i)
    return _CudaDeviceProperties(_state().DEVICES[i])


def get_allocator_backend():
    return _C._cuda_getAllocatorBackend()


def memory_stats_as_nested_dict(device=None):
    """torch._C._cuda_memoryStats: what memory_stats flattens ("a.b.c" keys)."""
    if not is_initialized():
        return {}
    i = _index(device, "memory_stats_as_nested_dict")
    _s.trace("memory_stats_as_nested_dict %d" % i)
    st = _state()
    with st._lock:
        flat = st.DEVICES[i].stats()
    nested = {}
    for key, v in flat.items():
        d = nested
        parts = key.split(".")
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = v
    return nested


def memory_stats(device=None):
    if not is_initialized():
        return {}
    i = _index(device, "memory_stats")
    if _s.on_agent_thread():
        _s.trace("memory_stats %d" % i)
    st = _state()
    with st._lock:
        return st.DEVICES[i].stats()


def memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def memory_snapshot(mempool_id=None, include_traces=True):
    _require_init("memory_snapshot")
    st = _state()
    if st.backend() != "native":
        raise RuntimeError("cudaMallocAsync does not yet support getMemorySnapshot")
    _s.trace("memory_snapshot")
    if not include_traces:
        _s.trace("memory_snapshot include_traces=False")
    if st.fail_snapshot:
        raise RuntimeError(st.fail_snapshot)
    delay = float(os.environ.get("STRATA_STUB_SNAPSHOT_DELAY") or 0)
    if delay:
        time.sleep(delay)  # holding the GIL would be truer; sleeping is enough to be slow
    segments, _ = st.snapshot(include_traces)
    return segments


def empty_cache():
    _state().empty_cache()


from . import memory  # noqa: E402,F401

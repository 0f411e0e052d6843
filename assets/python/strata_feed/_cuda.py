"""The CUDA driver through ctypes, for device identity (JAX) and context state (CuPy).

Only a libcuda the process has already loaded is used (dlopen with RTLD_NOLOAD): the agent
never loads the driver and never calls cuInit. Before the job's cuInit every call answers
CUDA_ERROR_NOT_INITIALIZED (3), which reads here as "unknown".

A failed dlopen(RTLD_NOLOAD) searches the library path (about 50 us, with the GIL held), so
it is tried again only once the process has loaded a new shared object: glibc counts loads
in dl_iterate_phdr's dlpi_adds, which costs a few microseconds to read.
"""

import ctypes
import os

CUDA_SUCCESS = 0
_NAME = "libcuda.so.1"  # the name frameworks load (the driver's soname)
_lib = None
_adds_seen = None  # dlpi_adds when libcuda was last found missing


class _PhdrInfo(ctypes.Structure):
    _fields_ = [
        ("dlpi_addr", ctypes.c_void_p),
        ("dlpi_name", ctypes.c_char_p),
        ("dlpi_phdr", ctypes.c_void_p),
        ("dlpi_phnum", ctypes.c_uint16),
        ("dlpi_adds", ctypes.c_ulonglong),
        ("dlpi_subs", ctypes.c_ulonglong),
    ]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_PhdrInfo), ctypes.c_size_t, ctypes.c_void_p)
_iterate = None
_adds = [0]


def _on_phdr(info, size, data):
    if size >= ctypes.sizeof(_PhdrInfo):
        _adds[0] = info.contents.dlpi_adds
    return 1  # the first object tells the process-wide count: stop


_on_phdr_c = _CALLBACK(_on_phdr)


def loads():
    """How many shared objects the process has loaded so far (dlpi_adds), or None."""
    global _iterate
    try:
        if _iterate is None:
            f = ctypes.CDLL(None).dl_iterate_phdr
            f.argtypes = [_CALLBACK, ctypes.c_void_p]
            f.restype = ctypes.c_int
            _iterate = f
        _adds[0] = None
        _iterate(_on_phdr_c, None)
        return _adds[0]
    except Exception:
        return None


def lib():
    global _lib, _adds_seen
    if _lib is not None:
        return _lib
    n = loads()
    if n is not None and n == _adds_seen:
        return None  # nothing loaded since libcuda was last found missing
    mode = getattr(os, "RTLD_NOLOAD", 4) | getattr(os, "RTLD_LAZY", 1)
    try:
        h = ctypes.CDLL(_NAME, mode=mode)
    except OSError:
        _adds_seen = n
        return None
    _setup(h)
    _lib = h
    return h


def _setup(h):
    c_int, c_uint, p = ctypes.c_int, ctypes.c_uint, ctypes.POINTER
    for name, args in (
        ("cuDeviceGetCount", [p(c_int)]),
        ("cuDeviceGet", [p(c_int), c_int]),
        ("cuDeviceGetPCIBusId", [ctypes.c_char_p, c_int, c_int]),
        ("cuDeviceGetUuid_v2", [ctypes.c_char_p, c_int]),
        ("cuDeviceGetUuid", [ctypes.c_char_p, c_int]),
        ("cuDevicePrimaryCtxGetState", [c_int, p(c_uint), p(c_int)]),
    ):
        try:
            f = getattr(h, name)
        except AttributeError:
            continue
        f.argtypes = args
        f.restype = c_int


def _fn(name):
    h = lib()
    if h is None:
        return None
    try:
        return getattr(h, name)
    except AttributeError:
        return None


def device_count():
    """The number of devices once the process ran cuInit, else None."""
    f = _fn("cuDeviceGetCount")
    if f is None:
        return None
    n = ctypes.c_int(0)
    if f(ctypes.byref(n)) != CUDA_SUCCESS:
        return None
    return n.value


def _device(ordinal):
    f = _fn("cuDeviceGet")
    if f is None:
        return None
    d = ctypes.c_int(0)
    if f(ctypes.byref(d), int(ordinal)) != CUDA_SUCCESS:
        return None
    return d.value


def primary_context_active(ordinal):
    """True / False, or None when unknown (driver not loaded or not initialised)."""
    f = _fn("cuDevicePrimaryCtxGetState")
    dev = _device(ordinal)
    if f is None or dev is None:
        return None
    flags = ctypes.c_uint(0)
    active = ctypes.c_int(0)
    if f(dev, ctypes.byref(flags), ctypes.byref(active)) != CUDA_SUCCESS:
        return None
    return bool(active.value)


def pci_bus_id(ordinal):
    """The driver's bus id string, e.g. '0000:18:00.0', or None."""
    f = _fn("cuDeviceGetPCIBusId")
    dev = _device(ordinal)
    if f is None or dev is None:
        return None
    buf = ctypes.create_string_buffer(64)
    if f(buf, 64, dev) != CUDA_SUCCESS:
        return None
    return buf.value.decode("ascii", "replace")


def _raw_uuid(name, dev):
    f = _fn(name)
    if f is None:
        return None
    buf = ctypes.create_string_buffer(16)
    if f(buf, dev) != CUDA_SUCCESS:
        return None
    return buf.raw[:16]


def uuid(ordinal):
    """The device's UUID, lowercase: 'MIG-...' for a MIG instance, 'GPU-...' for a whole
    GPU, bare hex when the driver cannot tell which; None when unknown.

    cuDeviceGetUuid_v2 gives a MIG instance's own UUID, cuDeviceGetUuid the GPU's: when
    both answer and differ, the device is a MIG instance."""
    dev = _device(ordinal)
    if dev is None:
        return None
    v2 = _raw_uuid("cuDeviceGetUuid_v2", dev)
    v1 = _raw_uuid("cuDeviceGetUuid", dev)
    raw = v2 if v2 is not None else v1
    if raw is None:
        return None
    h = raw.hex()
    bare = "%s-%s-%s-%s-%s" % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
    if v2 is not None and v1 is not None:
        return ("GPU-" if v1 == v2 else "MIG-") + bare
    return bare

"""The CUDA driver through ctypes, for device identity (JAX) and context state (CuPy).

Only a libcuda the process has already loaded is used (dlopen with RTLD_NOLOAD): the agent
never loads the driver and never calls cuInit. Before the job's cuInit every call answers
CUDA_ERROR_NOT_INITIALIZED (3), which reads here as "unknown".
"""

import ctypes
import os

CUDA_SUCCESS = 0
_NAMES = ("libcuda.so.1", "libcuda.so")
_lib = None


def lib():
    global _lib
    if _lib is not None:
        return _lib
    mode = getattr(os, "RTLD_NOLOAD", 4) | getattr(os, "RTLD_LAZY", 1)
    for name in _NAMES:
        try:
            h = ctypes.CDLL(name, mode=mode)
        except OSError:
            continue
        _setup(h)
        _lib = h
        return h
    return None


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


def uuid(ordinal):
    """'GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx' (lowercase), or None."""
    dev = _device(ordinal)
    if dev is None:
        return None
    for name in ("cuDeviceGetUuid_v2", "cuDeviceGetUuid"):
        f = _fn(name)
        if f is None:
            continue
        buf = ctypes.create_string_buffer(16)
        if f(buf, dev) != CUDA_SUCCESS:
            continue
        h = buf.raw[:16].hex()
        return "GPU-%s-%s-%s-%s-%s" % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
    return None

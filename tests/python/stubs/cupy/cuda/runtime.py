"""cupy.cuda.runtime, stubbed over the (fake) driver: like CUDA 12's runtime, the first
call initialises the driver, and setDevice creates the device's primary context."""

import ctypes
import threading

import _strata_stub as _s

_tls = threading.local()


def _init(what):
    if not _s.cu_initialised():
        if _s.on_agent_thread():
            _s.violation("cupy.cuda.runtime.%s before the job initialised CUDA" % what)
        _s.cu_init()


def _require_context(dev):
    _init("a call that needs a context")
    if not _s.cu_active(dev):
        if _s.on_agent_thread():
            _s.violation("cupy: context created on device %d" % dev)
        _s.cu_retain(dev)


def getDeviceCount():
    _init("getDeviceCount")
    n = ctypes.c_int()
    _s.libcuda().cuDeviceGetCount(ctypes.byref(n))
    return n.value


def getDevice():
    return getattr(_tls, "device", 0)


def setDevice(device):
    _init("setDevice")
    _require_context(int(device))
    _tls.device = int(device)


def deviceGetPCIBusId(device):
    _init("deviceGetPCIBusId")
    buf = ctypes.create_string_buffer(32)
    rc = _s.libcuda().cuDeviceGetPCIBusId(buf, 32, ctypes.c_int(int(device)))
    if rc != 0:
        raise RuntimeError("cudaErrorInvalidDevice")
    return buf.value.decode()

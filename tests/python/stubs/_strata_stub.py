"""Shared by the torch, jax and cupy stubs: devices, the violation log, the call trace.

Environment:
  STRATA_STUB_DEVICES  JSON list of {"uuid", "pci_bus_id", "name", "total"} (default: one H100)
  STRATA_STUB_LOG      file: every call that would initialise CUDA (or make the agent create a
                       context) is appended as a line, and raises StubViolation
  STRATA_STUB_TRACE    file: calls of interest, one line each: "<thread name> <call>"
  STRATA_FAKE_CUDA     read by fake_libcuda.c (the driver the jax and cupy stubs load)
"""

import ctypes
import json
import os
import sys
import threading

AGENT_THREAD = "strata-feed"
_lock = threading.Lock()

DEFAULT_DEVICES = [
    {
        "uuid": "5f3c2a1e-8b7d-4c6e-9a10-2d4f6b8e0c31",
        "pci_bus_id": "00000000:18:00.0",
        "name": "NVIDIA H100 80GB HBM3",
        "total": 85520809984,
    }
]


class StubViolation(RuntimeError):
    pass


def devices():
    raw = os.environ.get("STRATA_STUB_DEVICES")
    return json.loads(raw) if raw else [dict(d) for d in DEFAULT_DEVICES]


def on_agent_thread():
    """On one of the agent's threads (the serving thread or its sampler): the agent lists
    them while they run (they are _thread threads, not in threading's registry)."""
    threads = sys.modules.get("strata_feed._threads")
    if threads is not None and threads.on_agent_thread():
        return True
    return threading.current_thread().name.startswith(AGENT_THREAD)


def thread_name():
    return AGENT_THREAD if on_agent_thread() else threading.current_thread().name


def _append(var, line):
    path = os.environ.get(var)
    if not path:
        return
    with _lock:
        with open(path, "a") as f:
            f.write(line + "\n")


def violation(what):
    """A call the agent must never make: log it and raise."""
    _append("STRATA_STUB_LOG", "%s [thread %s]" % (what, thread_name()))
    raise StubViolation(what)


def trace(what):
    """Logs a call; the agent's threads (serving and sampling) are all "strata-feed"."""
    _append("STRATA_STUB_TRACE", "%s %s" % (thread_name(), what))


def parse_pci(s):
    dom, bus, rest = s.split(":")
    return int(dom, 16), int(bus, 16), int(rest.split(".")[0], 16)


_libcuda = None


def libcuda():
    """The (fake) driver, loaded the way frameworks load it: dlopen("libcuda.so.1")."""
    global _libcuda
    if _libcuda is None:
        _libcuda = ctypes.CDLL("libcuda.so.1")
    return _libcuda


def cu_init():
    rc = libcuda().cuInit(0)
    if rc != 0:
        raise RuntimeError("cuInit failed: %d" % rc)


def cu_retain(ordinal):
    ctx = ctypes.c_void_p()
    rc = libcuda().cuDevicePrimaryCtxRetain(ctypes.byref(ctx), ctypes.c_int(ordinal))
    if rc != 0:
        raise RuntimeError("cuDevicePrimaryCtxRetain failed: %d" % rc)


def cu_active(ordinal):
    flags, active = ctypes.c_uint(), ctypes.c_int()
    rc = libcuda().cuDevicePrimaryCtxGetState(ctypes.c_int(ordinal), ctypes.byref(flags), ctypes.byref(active))
    return rc == 0 and bool(active.value)


def cu_initialised():
    n = ctypes.c_int()
    return libcuda().cuDeviceGetCount(ctypes.byref(n)) == 0

"""This process's own NVML usage on one device: its CUDA context, read once after CUDA init.

Right after the job's framework initialised CUDA on a device, and before its allocator holds
anything, NVML's used memory of this process on that device is its CUDA context. The
sampler reads it here once per device (PROTOCOL.md, "Context at CUDA init").

- Through libnvidia-ml.so.1 with ctypes: the driver's management library, which links no
  CUDA library and creates no CUDA context (nvidia-smi's library). Never the CUDA runtime.
  Each reading is an nvmlInit_v2 / nvmlShutdown pair (reference counted by NVML, so a job
  that uses NVML itself is not disturbed) on the sampler's thread; ctypes releases the GIL
  for each call.
- Its own entry is the one whose pid is this process's, which NVML reports as the initial
  PID namespace sees it. So a process in any other PID namespace (a container, `unshare
  --pid`) reads nothing: its own pid cannot be told from another process's there.
- Any failure (no library, a missing symbol, an NVML error, no entry or more than one for
  this pid, a figure NVML does not have) reads as None, and one that says NVML cannot be used
  in this process (no library, no init, another PID namespace, a call slower than a second)
  turns the reading off for good. Nothing is printed; nothing raises.
"""

import ctypes
import os
import time

METHOD = "nvml_process_used"
_NAME = "libnvidia-ml.so.1"  # the driver's soname, as NVML's own clients load it
_INIT_PID_NS = 0xEFFFFFFC  # PROC_PID_INIT_INO: the inode of the initial PID namespace
_SUCCESS = 0
_INSUFFICIENT_SIZE = 7
_NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF  # NVML_VALUE_NOT_AVAILABLE for usedGpuMemory
_MAX_PROCESSES = 4096  # entries read from one list at most
_SLOW = 1.0  # seconds: one reading slower than this and NVML is not read again
_TRIES = 3  # a list that keeps growing between the size query and the read

_state = {"pid": None, "lib": None, "off": None}


class _ProcessInfo(ctypes.Structure):
    """nvmlProcessInfo_t of the _v3 process calls (24 bytes)."""

    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


class _PciInfo(ctypes.Structure):
    """nvmlPciInfo_t (68 bytes)."""

    _fields_ = [
        ("busIdLegacy", ctypes.c_char * 16),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * 32),
    ]


def _reset_after_fork():
    """State is this process's: a forked child starts over (and reads nothing of the
    parent's library handle)."""
    pid = os.getpid()
    if _state["pid"] != pid:
        _state.update(pid=pid, lib=None, off=None)


def off():
    """Why NVML is not read in this process, or None."""
    _reset_after_fork()
    return _state["off"]


def own_pid():
    """This process's pid as NVML reports it, or None when that cannot be told: only in the
    initial PID namespace are NVML's pids this process's own."""
    pid = os.getpid()
    try:
        if os.stat("/proc/self/ns/pid").st_ino != _INIT_PID_NS:
            return None
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return pid if line.split()[1:] == [str(pid)] else None
    except (OSError, ValueError):
        return None
    return None


def _load():
    """libnvidia-ml with the symbols used, or None. A copy the job loaded already is used
    as it is (dlopen finds it first)."""
    try:
        h = ctypes.CDLL(_NAME)
    except OSError:
        return None
    p, c_uint, c_void_p = ctypes.POINTER, ctypes.c_uint, ctypes.c_void_p
    try:
        for name, args in (
            ("nvmlInit_v2", []),
            ("nvmlShutdown", []),
            ("nvmlDeviceGetHandleByUUID", [ctypes.c_char_p, p(c_void_p)]),
            ("nvmlDeviceGetComputeRunningProcesses_v3", [c_void_p, p(c_uint), p(_ProcessInfo)]),
        ):
            f = getattr(h, name)
            f.argtypes = args
            f.restype = ctypes.c_int
    except AttributeError:
        return None
    for name, args in (
        ("nvmlDeviceGetHandleByPciBusId_v2", [ctypes.c_char_p, p(c_void_p)]),
        ("nvmlDeviceGetCount_v2", [p(c_uint)]),
        ("nvmlDeviceGetHandleByIndex_v2", [c_uint, p(c_void_p)]),
        ("nvmlDeviceGetPciInfo_v3", [c_void_p, p(_PciInfo)]),
    ):
        f = getattr(h, name, None)  # optional: the PCI id route
        if f is not None:
            f.argtypes = args
            f.restype = ctypes.c_int
    return h


def _uuids(uuid):
    """NVML's spellings of a framework's UUID: as given when prefixed, else as a GPU's and as
    a MIG instance's (torch gives bare hex)."""
    if not uuid:
        return []
    u = str(uuid).strip()
    if u[:4].upper() in ("GPU-", "MIG-"):
        return [u[:4].upper() + u[4:]]
    return ["GPU-" + u, "MIG-" + u]


def _same_pci(a, b):
    def norm(s):
        try:
            s = s.decode("ascii", "replace") if isinstance(s, bytes) else str(s)
            dom, bus, rest = s.strip().rstrip("\0").split(":")
            return (int(dom, 16), int(bus, 16), int(rest.split(".")[0], 16))
        except (ValueError, AttributeError):
            return None

    na = norm(a)
    return na is not None and na == norm(b)


def _handle(lib, uuid, pci):
    dev = ctypes.c_void_p()
    for u in _uuids(uuid):
        if lib.nvmlDeviceGetHandleByUUID(u.encode("ascii", "replace"), ctypes.byref(dev)) == _SUCCESS:
            return dev
    if not pci:
        return None
    by_pci = getattr(lib, "nvmlDeviceGetHandleByPciBusId_v2", None)
    if by_pci is not None and by_pci(str(pci).encode("ascii", "replace"), ctypes.byref(dev)) == _SUCCESS:
        return dev
    # Older drivers (and the test library): the GPU whose PCI id matches, by index.
    count = getattr(lib, "nvmlDeviceGetCount_v2", None)
    by_index = getattr(lib, "nvmlDeviceGetHandleByIndex_v2", None)
    info_of = getattr(lib, "nvmlDeviceGetPciInfo_v3", None)
    if count is None or by_index is None or info_of is None:
        return None
    n = ctypes.c_uint(0)
    if count(ctypes.byref(n)) != _SUCCESS:
        return None
    for i in range(min(n.value, 64)):
        info = _PciInfo()
        if by_index(i, ctypes.byref(dev)) == _SUCCESS and info_of(dev, ctypes.byref(info)) == _SUCCESS:
            if _same_pci(info.busId, pci):
                return dev
    return None


def _entries(lib, dev):
    """This device's compute processes, or None."""
    f = lib.nvmlDeviceGetComputeRunningProcesses_v3
    n = ctypes.c_uint(0)
    rc = f(dev, ctypes.byref(n), None)
    if rc == _SUCCESS:
        return []
    for _ in range(_TRIES):
        if rc != _INSUFFICIENT_SIZE:
            return None
        size = min(n.value + 8, _MAX_PROCESSES)
        arr = (_ProcessInfo * size)()
        n = ctypes.c_uint(size)
        rc = f(dev, ctypes.byref(n), arr)
        if rc == _SUCCESS:
            return [(e.pid, e.usedGpuMemory) for e in arr[: min(n.value, size)]]
    return None


def process_used(uuid, pci):
    """(bytes, time): NVML's used memory of this process on the device named by `uuid` (as
    the framework gives it) or `pci` (NVML's spelling), and when it was read; None when it
    cannot be told."""
    try:
        return _read(uuid, pci)
    except Exception:
        return None


def _read(uuid, pci):
    _reset_after_fork()
    if _state["off"] is not None:
        return None
    pid = own_pid()
    if pid is None:
        _state["off"] = "its own pid cannot be told in this PID namespace"
        return None
    lib = _state["lib"]
    if lib is None:
        lib = _load()
        if lib is None:
            _state["off"] = "no usable %s" % _NAME
            return None
        _state["lib"] = lib
    t0 = time.monotonic()
    if lib.nvmlInit_v2() != _SUCCESS:
        _state["off"] = "nvmlInit_v2 failed"
        return None
    try:
        dev = _handle(lib, uuid, pci)
        if dev is None:
            return None
        when = time.time()
        entries = _entries(lib, dev)
    finally:
        lib.nvmlShutdown()
        if time.monotonic() - t0 > _SLOW:
            _state["off"] = "NVML took over %g s" % _SLOW
    if entries is None:
        return None
    mine = [used for p, used in entries if p == pid]
    if len(mine) != 1 or mine[0] == _NOT_AVAILABLE:
        return None  # not listed, listed twice (which one?), or no figure
    return int(mine[0]), when

"""What every framework's reader builds its readings from: the fields of a device entry
(DEVICE_FIELDS, new_entry), the checks that turn a framework's values into counts and texts,
PCI bus ids in NVML's form, and probes of a framework that must not wait on it (importing,
try_lock, version_tuple, package).

A leaf: it imports nothing of the agent's. The readers (_torch, _jax, _cupy) take these
from here rather than from _frameworks, which imports the readers, so no reader imports the
module that chooses it.
"""

import sys

DEVICE_FIELDS = (
    "allocated",
    "reserved",
    "active",
    "inactive_split",
    "requested",
    "peak_allocated",
    "peak_reserved",
    "peak_active",
    "peak_inactive_split",
    "peak_requested",
    "alloc_retries",
    "ooms",
    "device_allocs",
    "device_frees",
)


def package():
    """The strata_feed package (for callbacks that run on the job's threads)."""
    return sys.modules.get(__package__)


def importing(mod):
    """True while the module's own import is still running (maybe in another thread)."""
    spec = getattr(mod, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def count(v):
    """A byte count or counter: an int >= 0, else None (-1 and friends mean unknown)."""
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        return None
    return v


def text(v, limit=256):
    if v is None:
        return None
    try:
        return str(v)[:limit]
    except Exception:
        return None


def version_tuple(v):
    """'2.1.2+cu121' -> (2, 1, 2); None when it does not start with a number."""
    out = []
    for part in str(v or "").split("+")[0].split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
        if digits != part:
            break
    return tuple(out) or None


def try_lock(lock):
    """Whether `lock` is free right now, without waiting: a framework's init lock held by
    the job means its init is under way. None when it cannot be probed."""
    acquire = getattr(lock, "acquire", None)
    if acquire is None:
        return None
    try:
        if acquire(False):
            lock.release()
            return True
        return False
    except Exception:
        return None


def new_entry(index):
    e = {"index": index}
    for f in DEVICE_FIELDS:
        e[f] = None
    e["largest_free_block"] = None
    e["largest_free_block_time"] = None
    e["limit"] = None
    e["reserved_since"] = None
    e["step"] = None
    e["at_step_end"] = False
    e["unreported"] = {}
    return e


def pci_from_parts(domain, bus, device):
    try:
        if domain is None or bus is None or device is None:
            return None
        return "%08X:%02X:%02X.0" % (int(domain), int(bus), int(device))
    except Exception:
        return None


def pci_from_string(s):
    """'0000:18:00.0' (driver / CuPy) -> '00000000:18:00.0' (NVML)."""
    try:
        s = s.decode() if isinstance(s, bytes) else str(s)
        s = s.strip().rstrip("\0")
        dom, bus, rest = s.split(":")
        dev = rest.split(".")[0]
        return "%08X:%02X:%02X.0" % (int(dom, 16), int(bus, 16), int(dev, 16))
    except Exception:
        return None

"""Which framework to read, and helpers the readers share.

A reader has: name, waiting_note, ready() -> bool (True once the job initialised the
framework; it must never initialise anything itself), sample(now, timer) -> list of device
entries, hello_fields() -> dict. Frameworks are found in sys.modules only, never imported.
"""

import sys
import time

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
MAX_DEVICES = 64


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


def new_entry(index):
    e = {"index": index}
    for f in DEVICE_FIELDS:
        e[f] = None
    e["largest_free_block"] = None
    e["largest_free_block_time"] = None
    e["limit"] = None
    e["reserved_since"] = None
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


class Frameworks(object):
    def __init__(self, agent):
        self.agent = agent
        self.reader = None  # the framework chosen: the first one seen initialised
        self.ready_at = None
        self.candidates = {}
        self.waiting_note = "no framework imported yet"
        self.last_entries = None
        self.imported = False  # a framework module is in sys.modules
        self.hooked = False  # and it will wake the agent when it initialises

    def _make(self, name):
        if name == "torch":
            from ._torch import TorchReader as cls
        elif name == "jax":
            from ._jax import JaxReader as cls
        else:
            from ._cupy import CupyReader as cls
        return cls(self.agent)

    def _choose(self):
        note = None
        self.imported = self.hooked = False
        for name in ("torch", "jax", "cupy"):
            if sys.modules.get(name) is None:
                continue
            self.imported = True
            r = self.candidates.get(name)
            if r is None:
                r = self.candidates[name] = self._make(name)
            try:
                ok = r.ready()
            except Exception:
                ok = False
            if getattr(r, "hooked", False):
                self.hooked = True
            if ok:
                self.reader = r
                self.ready_at = time.monotonic()
                self.candidates = {}
                return
            if note is None:
                note = r.waiting_note
        self.waiting_note = note or "no framework imported yet"

    def sample(self, now, timer):
        if self.reader is None:
            cpu0 = time.thread_time_ns()
            self._choose()
            # Importing a reader module is set-up, not sampling cost.
            timer.excluded_ns += time.thread_time_ns() - cpu0
            if self.reader is None:
                return None
            self.agent.begin_warmup()
        entries = self.reader.sample(now, timer)
        self.last_entries = entries
        return entries

    def hello_fields(self):
        if self.reader is None:
            return {
                "framework": None,
                "framework_version": None,
                "backend": None,
                "settings": {},
                "devices": [],
                "note": self.waiting_note,
            }
        return self.reader.hello_fields()

    def warm(self):
        """True while the warm-up goes on: no device yet, or one still holds nothing."""
        e = self.last_entries
        if not e:
            return True
        return any(not x.get("reserved") for x in e)

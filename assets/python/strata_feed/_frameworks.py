"""Which framework to read: the first one seen initialised (torch, then jax, then cupy).

A reader has: name, waiting_note, ready() -> bool (True once the job initialised the
framework; it must never initialise anything itself, and never wait on a framework's lock),
sample(now, timer) -> list of device entries, hello_fields() -> dict, step_read() (on the
job's thread at a step's end: a raw reading of the devices the last sample found, or None)
and step_entries(raw, time) -> list of device entries. Optional: hooked (it
will wake the sampler itself when the framework initialises), settled (waiting will not end
by itself: JAX on the CPU only, a launcher), idle (the process uses no framework for GPU
work). Frameworks are found in sys.modules only, never imported. The helpers the readers
share are in _reading.
"""

import sys
import time

NO_FRAMEWORK = "no framework imported yet"


class Frameworks(object):
    def __init__(self, sampler):
        self.agent = sampler
        self.reader = None  # the framework chosen: the first one seen initialised
        self.ready_at = None
        self.candidates = {}
        self.waiting_note = NO_FRAMEWORK
        self.state = "no_framework"
        self.last_entries = None
        self.imported = False  # a framework module is in sys.modules
        self.hooked = False  # and it will wake the agent when it initialises
        self.settled = False  # and waiting will not end by itself

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
        idle = []
        self.imported = self.hooked = False
        settled = True
        for name in ("torch", "jax", "cupy"):
            if sys.modules.get(name) is None:
                continue
            self.imported = True
            r = self.candidates.get(name)
            if r is None:
                r = self.candidates[name] = self._make(name)
            ok = r.ready()
            if getattr(r, "hooked", False):
                self.hooked = True
            if ok:
                self.reader = r
                self.ready_at = time.monotonic()
                self.candidates = {}
                return
            if not getattr(r, "settled", False):
                settled = False
            if getattr(r, "idle", False):
                idle.append(r.waiting_note)
            elif note is None:
                note = r.waiting_note
        self.settled = self.imported and settled
        self.preview = {}
        for r in self.candidates.values():
            fields = getattr(r, "waiting_fields", None)
            if fields is not None:
                self.preview.update(fields())
        if note is not None:
            self.state, self.waiting_note = "waiting", note
        elif idle:
            self.state, self.waiting_note = "no_framework", "; ".join(idle)
        else:
            self.state, self.waiting_note = "no_framework", NO_FRAMEWORK

    def wait_key(self):
        """What the waiting looks like: a change restarts the back-off."""
        return (self.state, self.waiting_note, tuple(sorted(self.candidates)))

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
        """(framework fields, state, note) for the hello."""
        if self.reader is None:
            fields = {
                "framework": None,
                "framework_version": None,
                "backend": None,
                "settings": {},
                "devices": [],
            }
            fields.update(getattr(self, "preview", {}))
            return fields, self.state, self.waiting_note
        h = dict(self.reader.hello_fields())
        note = h.pop("note", None)
        return h, "reading", note

    def warm(self):
        """True while the warm-up goes on: no device yet, or one still holds nothing."""
        e = self.last_entries
        if not e:
            return True
        return any(not x.get("reserved") for x in e)

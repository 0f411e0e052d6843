"""PyTorch: memory_stats per device that holds a context, read only after the job's CUDA init."""

import os
import sys
import time

from . import MAX_DEVICES, _steps
from ._torchconf import GENERIC_CONF_SINCE, alloc_conf_from_env, parse_alloc_conf, split_alloc_conf  # noqa: F401
from ._reading import count, importing, new_entry, package, pci_from_parts, text, try_lock, version_tuple

_FIELDS = (
    ("allocated", "allocated_bytes.all.current"),
    ("reserved", "reserved_bytes.all.current"),
    ("active", "active_bytes.all.current"),
    ("inactive_split", "inactive_split_bytes.all.current"),
    ("requested", "requested_bytes.all.current"),
    ("peak_allocated", "allocated_bytes.all.peak"),
    ("peak_reserved", "reserved_bytes.all.peak"),
    ("peak_active", "active_bytes.all.peak"),
    ("peak_inactive_split", "inactive_split_bytes.all.peak"),
    ("peak_requested", "requested_bytes.all.peak"),
    ("alloc_retries", "num_alloc_retries"),
    ("ooms", "num_ooms"),
    ("device_allocs", "num_device_alloc"),
    ("device_frees", "num_device_free"),
)
_ASYNC_FILLED = frozenset(
    ("allocated", "reserved", "active", "peak_allocated", "peak_reserved", "peak_active")
)
ASYNC_REASON = "not reported by cudaMallocAsync"
EXPANDABLE_REASON = "expandable segments: inactive_split does not measure fragmentation"
MISSING_REASON = "not in this torch version's memory_stats"

SNAPSHOT_MIN_PERIOD = 60.0  # seconds between memory_snapshot calls, at least
SNAPSHOT_BACKOFF = 1000.0  # and at least this many times the last one's duration
SNAPSHOT_MAX = 0.020  # one slower than this and no more are taken
HISTORY_REASON = "not measured while the job records its memory history (a snapshot would mark its trace)"
NO_HISTORY_CHECK_REASON = "not measured: this torch cannot tell whether the job records its memory history"

OOM_OBSERVER_SINCE = (2, 1)  # before, torch called it with the allocator's device mutex held
LAUNCHERS = ("torch.distributed.run", "torch.distributed.launch", "torch.distributed.elastic.agent.server.api")

# Once per process (inherited by a forked child, like torch's own state).
_lazy_registered = False
_oom_attached = False


def flatten(nested, prefix="", out=None):
    """memory_stats_as_nested_dict() -> the keys of memory_stats(), as torch joins them."""
    out = {} if out is None else out
    for k, v in nested.items():
        key = prefix + str(k)
        if isinstance(v, dict):
            flatten(v, key + ".", out)
        else:
            out[key] = v
    return out


def _lazy_callback():
    # Runs inside the job's torch.cuda._lazy_init (holding torch's init lock): a raise here
    # would fail the job's CUDA init, so nothing escapes, and it only flags and wakes.
    try:
        pkg = package()
        a = pkg._current() if pkg is not None else None
        if a is not None:
            a.framework_init_hint()
    except Exception:
        pass


def _oom_observer(device, alloc_size, device_total, device_free):
    # torch calls this on the allocating thread, with the GIL, before raising
    # OutOfMemoryError; an exception here would replace that error: nothing escapes.
    try:
        pkg = package()
        a = pkg._current() if pkg is not None else None
        if a is None or a.frameworks is None:
            return
        r = a.frameworks.reader
        if r is not None and r.name == "torch":
            r.on_oom(device, alloc_size, device_total, device_free)
    except Exception:
        pass


class TorchReader(object):
    name = "torch"

    def __init__(self, agent):
        self.agent = agent
        self.waiting_note = "waiting for torch to initialise CUDA"
        self.hooked = False  # the lazy-init callback is queued: it wakes the agent
        self.settled = False
        self.idle = False
        self.started = False
        self.version = None
        self.vt = None
        self.backend = None
        self.conf = {}  # every allocator setting seen, the latest value of each key
        self.conf_raw = None  # the string the settings came from
        self.conf_source = None
        self.getter = None  # torch._C._accelerator_getAllocatorSettings, where it exists
        self.settings = {}
        self.count = None
        self.devices = []
        self.ident = {}
        self.failures = {}
        self.notes = []
        self.lfb = {}  # index -> largest inactive block of the last snapshot
        self.lfb_time = None
        self.lfb_reason = "not measured yet"
        self.snap_next = 0.0
        self.snap_off = None
        self.snap_traces = None  # whether memory_snapshot takes include_traces
        self.snap_taken = None  # (segments, time, seconds) of the last snapshot, for its map
        self.sites_recording = False  # the agent records history for a sites window now

    # -- before init ----------------------------------------------------------------------

    def ready(self):
        global _lazy_registered
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None) if torch is not None else None
        dist = sys.modules.get("torch.distributed")
        # torch.distributed too: a launcher's own modules come after it (torchrun's script
        # imports torch.distributed.run, which imports the package first).
        if cuda is None or importing(torch) or importing(cuda) or (dist is not None and importing(dist)):
            self.waiting_note = "waiting for torch to finish importing"
            return False
        # is_initialized() reads a flag: it takes no lock.
        if cuda.is_initialized():
            return True
        launcher = [m for m in LAUNCHERS if sys.modules.get(m) is not None]
        # `python -m torch.distributed.run`: the launcher is __main__, under its own name
        # only in __main__.__spec__ (runpy sets it before the module's first line runs).
        main = getattr(getattr(sys.modules.get("__main__"), "__spec__", None), "name", None)
        if main in LAUNCHERS:
            launcher.insert(0, main)
        if launcher:
            self.idle = self.settled = True
            self.waiting_note = "torch launcher (%s): CUDA not used here, its workers have their own feeds" % launcher[0]
            return False
        self.idle = self.settled = False
        self.waiting_note = "waiting for torch to initialise CUDA"
        self._settings_before_init(torch)
        _steps.register_torch_hook(self.version)
        lazy = getattr(cuda, "_lazy_call", None)
        if not _lazy_registered and callable(lazy):
            # _lazy_call takes torch's init lock, which the job holds for the whole of its
            # CUDA init: queue the hook only while the lock is free (this thread would
            # otherwise wait out the init; it still serves nothing, but samples late).
            free = try_lock(getattr(cuda, "_initialization_lock", None))
            if free is False:
                self.waiting_note = "torch is initialising CUDA"
            else:
                try:
                    lazy(_lazy_callback)
                    _lazy_registered = True
                except Exception:
                    pass  # tried again at the next look
        self.hooked = _lazy_registered
        return False

    def _settings_before_init(self, torch):
        """The settings the allocator will use, shown while waiting. Read from the
        environment with torch's precedence, never from torch: its getter parses the
        configuration for good, and a job may still set the variable before its CUDA init."""
        if self.vt is None:
            self.version = text(getattr(torch, "__version__", None), 64)
            self.vt = version_tuple(self.version) or ()
        source, raw = alloc_conf_from_env(generic=not self.vt or self.vt >= GENERIC_CONF_SINCE)
        if not self.settings or raw != self.conf_raw or source != self.conf_source:
            self.conf, self.conf_source = {}, source
            self._merge_conf(raw)

    def waiting_fields(self):
        return {"settings": self.settings} if self.settings else {}

    # -- after init -----------------------------------------------------------------------

    def _first(self, torch, timer):
        self.started = True
        self.version = text(getattr(torch, "__version__", None), 64)
        self.vt = version_tuple(self.version)
        cuda = torch.cuda
        gab = getattr(cuda, "get_allocator_backend", None)
        if callable(gab):
            try:
                self.backend = text(timer.call(gab), 64)
            except Exception:
                self.backend = None
        try:
            self.count = int(timer.call(cuda.device_count))
        except Exception:
            self.count = 0
        getter = getattr(torch._C, "_accelerator_getAllocatorSettings", None)
        self.getter = getter if callable(getter) else None
        self.conf_source = None  # from now on, what torch says
        if self.getter is None:
            # Fixed once the allocator is up: the environment as it is at CUDA init.
            generic = not self.vt or self.vt >= GENERIC_CONF_SINCE
            self.conf = {}
            self.conf_source, raw = alloc_conf_from_env(generic=generic)
            self._merge_conf(raw)
        snap = getattr(cuda, "memory_snapshot", None)
        code = getattr(snap, "__code__", None)
        if code is not None:
            self.snap_traces = "include_traces" in code.co_varnames[: code.co_argcount]
        self._attach_oom(torch, timer)

    def _merge_conf(self, raw):
        """torch applies each settings string on top of the earlier ones (a key not named
        keeps its value), so the effective settings are every key's latest value."""
        self.conf_raw = raw
        self.conf.update(split_alloc_conf(raw))
        self.expandable = self.conf.get("expandable_segments", "").lower() == "true"
        self.settings = {
            "expandable_segments": self.expandable,
            "alloc_conf": text(raw, 1024),
            "alloc_conf_source": self.conf_source,
        }
        if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1":
            self.settings["no_caching"] = True

    def _read_conf(self, timer):
        """Where torch says which settings are in effect, ask it each sample: they change at
        run time (_accelerator_setAllocatorSettings, a variable set after import torch)."""
        if self.getter is None:
            return
        try:
            raw = timer.call(self.getter)
        except Exception:
            return
        raw = raw or None
        if raw != self.conf_raw or self.conf_source is None:
            self.conf_source = "torch._C._accelerator_getAllocatorSettings()"
            self._merge_conf(raw)

    def _attach_oom(self, torch, timer):
        global _oom_attached
        if _oom_attached or self.backend not in (None, "native"):
            return
        if self.vt is not None and self.vt < OOM_OBSERVER_SINCE:
            # torch before 2.1 calls the observer with the allocator's device mutex held:
            # the observer's memory_stats and the sampler's could deadlock.
            self.notes.append("OOM observer not attached: torch %s calls it with the allocator locked (needs torch >= 2.1)" % self.version)
            _oom_attached = True
            return
        attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
        if not callable(attach):
            return
        _oom_attached = True
        try:
            timer.call(attach, _oom_observer)
        except Exception as e:
            self.notes.append("OOM observer not attached: %s" % text(e, 200))

    def _identity(self, cuda, i, timer):
        d = {"index": i, "uuid": None, "pci_bus_id": None, "name": None}
        try:
            p = timer.call(cuda.get_device_properties, i)
        except Exception:
            return d
        u = getattr(p, "uuid", None)
        d["uuid"] = text(u, 64) if u is not None else None
        # pci_* exist from torch 2.8; before, the device is matched by UUID alone.
        d["pci_bus_id"] = pci_from_parts(
            getattr(p, "pci_domain_id", None),
            getattr(p, "pci_bus_id", None),
            getattr(p, "pci_device_id", None),
        )
        d["name"] = text(getattr(p, "name", None))
        return d

    def sample(self, now, timer):
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        cuda = torch.cuda
        if not self.started:
            self._first(torch, timer)
            _steps.register_torch_hook(self.version)
        self._read_conf(timer)
        has = torch._C._cuda_hasPrimaryContext
        devices = []
        for i in range(min(self.count or 0, MAX_DEVICES)):
            try:
                if timer.call(has, i):
                    devices.append(i)
            except Exception:
                pass
        for i in devices:
            if i not in self.ident:
                self.ident[i] = self._identity(cuda, i, timer)
        self.devices = devices
        if self.backend == "pluggable":
            return []
        self._maybe_snapshot(torch, cuda, now, timer)
        entries = []
        for i in devices:
            try:
                st = timer.call(cuda.memory_stats, i)
            except Exception as e:
                self.failures[i] = "memory_stats(%d) failed: %s" % (i, text(e, 200))
                continue
            self.failures.pop(i, None)
            e = self.entry(i, st)
            if e is not None:
                entries.append(e)
        return entries

    def pool_state(self, i):
        """(reserved, device allocs, device frees) of device i now, or None: the pool's state
        on either side of the agent's own NVML reading."""
        try:
            st = sys.modules["torch"].cuda.memory_stats(i)
        except Exception:
            return None
        reserved = count(st.get("reserved_bytes.all.current")) if st else None
        if reserved is None:
            return None
        return (reserved, count(st.get("num_device_alloc")), count(st.get("num_device_free")))

    def step_read(self):
        """At a step's end, on the job's thread: the counters of the devices the last sample
        found (torch's cheapest call: the allocator's nested stats), or None."""
        devices = self.devices
        if not devices or self.backend == "pluggable":
            return None
        cuda = sys.modules["torch"].cuda
        if not cuda.is_initialized():
            return None
        nested = cuda.memory_stats_as_nested_dict
        return [(i, nested(i)) for i in devices]

    def step_entries(self, raw, when):
        """Device entries of a step_read, on the sampler's thread."""
        entries = []
        for i, nested in raw:
            e = self.entry(i, flatten(nested))
            if e is not None:
                entries.append(e)
        return entries

    def entry(self, i, st):
        if not st:
            return None
        e = new_entry(i)
        unrep = e["unreported"]
        is_async = self.backend == "cudaMallocAsync"
        for field, key in _FIELDS:
            if is_async and field not in _ASYNC_FILLED:
                unrep[field] = ASYNC_REASON
                continue
            v = count(st.get(key))
            e[field] = v
            if v is None:
                unrep[field] = MISSING_REASON
        if e["allocated"] is None or e["reserved"] is None:
            return None
        if self.settings.get("expandable_segments") and not is_async:
            for f in ("inactive_split", "peak_inactive_split"):
                e[f] = None
                unrep[f] = EXPANDABLE_REASON
        if is_async:
            unrep["largest_free_block"] = ASYNC_REASON
        elif self.lfb_time is not None:
            e["largest_free_block"] = self.lfb.get(i, 0)
            e["largest_free_block_time"] = self.lfb_time
        else:
            unrep["largest_free_block"] = self.lfb_reason
        return e

    def _history_on(self, torch):
        """Whether the job records its memory history: True, False, or None (unknown)."""
        f = getattr(torch._C, "_cuda_isHistoryEnabled", None)
        if not callable(f):
            return None
        try:
            return bool(f())
        except Exception:
            return None

    def _maybe_snapshot(self, torch, cuda, now, timer):
        if self.backend != "native" or self.snap_off is not None or self.agent.in_warmup():
            return
        mono = time.monotonic()
        if mono < self.snap_next:
            return
        if self.sites_recording:
            # History is on for the agent's own window: its snapshot comes at the window's end
            # (and a snapshot now would convert the ring under the GIL). The last measure stays.
            self.snap_next = mono + SNAPSHOT_MIN_PERIOD / 6
            return
        history = self._history_on(torch)
        if history is not False:
            # A snapshot while the job records its history converts that history under the
            # GIL and leaves a "snapshot" event in the job's trace: take none then. A torch
            # that cannot tell is treated the same.
            self.snap_next = mono + SNAPSHOT_MIN_PERIOD / 6
            self.lfb, self.lfb_time = {}, None
            self.lfb_reason = HISTORY_REASON if history else NO_HISTORY_CHECK_REASON
            return
        cpu0 = time.thread_time_ns()
        t0 = time.perf_counter()
        try:
            if self.snap_traces:
                segments = timer.call(cuda.memory_snapshot, include_traces=False)
            else:
                segments = timer.call(cuda.memory_snapshot)
        except Exception as e:
            self.snap_off = "memory_snapshot failed: %s" % text(e, 200)
            segments = None
        d = time.perf_counter() - t0
        self.snap_next = mono + max(SNAPSHOT_MIN_PERIOD, SNAPSHOT_BACKOFF * d)
        if self.snap_off is None and d > SNAPSHOT_MAX:
            self.snap_off = "memory_snapshot took %d ms: not taken again" % round(d * 1000)
        if self.snap_off is not None:
            self.lfb, self.lfb_time, self.lfb_reason = {}, None, self.snap_off
        else:
            largest = {}
            for seg in segments or ():
                dev = seg.get("device")
                for b in seg.get("blocks") or ():
                    if b.get("state") == "inactive":
                        size = count(b.get("size")) or 0
                        if size > largest.get(dev, 0):
                            largest[dev] = size
            self.lfb, self.lfb_time = largest, now
            self.snap_taken = (segments, now, d)
        timer.excluded_ns += time.thread_time_ns() - cpu0

    def take_segments(self):
        """The last snapshot's segments, once, for the segment map (_segmap)."""
        got, self.snap_taken = self.snap_taken, None
        return got

    def on_oom(self, device, alloc_size, device_total, device_free):
        """On the job's allocating thread: the stats at that instant, sent at once."""
        now = time.time()
        stats = None
        try:
            torch = sys.modules.get("torch")
            stats = self.entry(int(device), torch.cuda.memory_stats(int(device)))
            if stats is not None:
                stats["reserved_since"] = self.agent.reserved_since_for(stats, now)
                stats["step"] = _steps.STEPS.count
        except Exception:
            stats = None
        msg = {
            "v": 1,
            "type": "oom",
            "time": now,
            "seq": 0,
            "index": count(device),
            "requested": count(alloc_size),
            "device_free": count(device_free),
            "device_total": count(device_total),
            "stats": stats,
        }
        self.agent.post_oom(msg)

    def hello_fields(self):
        notes = list(self.notes)
        if isinstance(_steps.torch_hook, str):
            notes.append(_steps.torch_hook)
        if _steps.STEPS.off:
            notes.append(_steps.STEPS.off)
        if self.backend == "pluggable":
            notes.append("pluggable allocator: memory_stats is not available")
        if self.settings.get("no_caching"):
            notes.append("PYTORCH_NO_CUDA_MEMORY_CACHING=1: the caching allocator is off, its statistics stay 0")
        if self.lfb_reason in (HISTORY_REASON, NO_HISTORY_CHECK_REASON) and self.lfb_time is None:
            notes.append("largest free block: " + self.lfb_reason)
        for i in sorted(self.failures):
            notes.append(self.failures[i])
        return {
            "framework": "torch",
            "framework_version": self.version,
            "backend": self.backend,
            "settings": self.settings,
            "devices": [self.ident[i] for i in self.devices if i in self.ident],
            "note": "; ".join(notes) if notes else None,
        }

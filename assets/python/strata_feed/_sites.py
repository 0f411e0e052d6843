"""Allocation sites on demand (PROTOCOL.md, "sites"): a window of torch's allocator history,
reduced in the job to a small summary (_siterule) of which lines of the job's code hold
memory and which grew over the window. Never raw traces.

- Window (torch 2.1+, native allocator): when the job records no history of its own, the
  agent turns it on (enabled="all", context="all", stacks="python", max_entries=MAX_ENTRIES),
  waits the window while sampling goes on, takes torch.cuda.memory._snapshot() and turns it
  off (enabled=None; torch then empties and, from late 2025, frees its ring). When the job
  records its own, the agent changes nothing and reads the job's trace since the request.
- The summary and the segment map of the same snapshot are made in slices on the sampler's
  thread (_slices), the summary within a CPU budget.

Every call into torch is made on the sampler's thread (the only thread of the agent's that
calls a framework); the serving thread only hands requests over (Agent._on_request).
"""

import math
import sys
import time

from . import MAX_DEVICES, _segmap, _slices
from ._reading import count, text, version_tuple
from ._siterule import NO_FRAME, Reduction, Sites, fit_sites, frame_text, is_job_file  # noqa: F401

SITES_SINCE = (2, 1)  # _record_memory_history(enabled=str, ...), _cuda_isHistoryEnabled
MAX_ENTRIES = 100000  # the ring the agent asks for, per device
CPU_BUDGET = 0.5  # seconds of the sampler thread's CPU the reduction may take
REASON_CHARS = 300


# -- the window -----------------------------------------------------------------------------


def refusal(rid, reason, now=None):
    return {"v": 1, "type": "sites", "time": now or time.time(), "id": rid, "state": "refused",
            "reason": reason[:REASON_CHARS]}


class Window(object):
    __slots__ = ("id", "seconds", "top", "started", "start_mono", "end_mono", "history", "devices",
                 "before", "since_us")


class SitesWindow(object):
    """The sites window of one agent, on the sampler's thread. `post(msg, keep)` hands a
    `sites` message to the serving thread: kept in the backlog (refused, done, failed) or
    only sent (running); `post_segments(line)` a `segments` line."""

    def __init__(self, sampler, post, post_segments):
        self.sampler = sampler
        self.post = post
        self.post_segments = post_segments
        self.window = None  # the Window recording now
        self.reducing = None  # the Window whose summary is being made
        self.budget = CPU_BUDGET

    # -- starting -----------------------------------------------------------------------

    def _reader(self):
        return self.sampler.frameworks.reader

    def _calls(self, torch):
        mem = getattr(getattr(torch, "cuda", None), "memory", None)
        rec = getattr(mem, "_record_memory_history", None)
        snap = getattr(mem, "_snapshot", None)
        on = getattr(getattr(torch, "_C", None), "_cuda_isHistoryEnabled", None)
        if callable(rec) and callable(snap) and callable(on):
            return rec, snap, on
        return None

    def why_not(self, torch, reader):
        """None when a window can start, else the reason it cannot. Reads attributes only:
        nothing here calls torch but is_initialized() (a flag)."""
        if reader is not None and reader.name != "torch":
            return "sites: needs torch (the job's allocator is %s's)" % reader.name
        if torch is None:
            return "sites: needs torch (no framework in use yet)"
        version = text(getattr(torch, "__version__", None), 64)
        vt = version_tuple(version) or ()
        if len(vt) < 2 or vt < SITES_SINCE or self._calls(torch) is None:
            shown = "%d.%d" % vt[:2] if len(vt) >= 2 else (version or "of unknown version")
            return "sites: not available in torch %s" % shown
        if reader is None:
            return "sites: CUDA not initialised by the job yet (the agent never initialises it)"
        if reader.backend == "cudaMallocAsync":
            return "sites: not available with the cudaMallocAsync allocator (it records no allocation history)"
        if reader.backend == "pluggable":
            return "sites: not available with a pluggable allocator (it records no allocation history)"
        if reader.backend not in (None, "native"):
            return "sites: not available with the %s allocator" % text(reader.backend, 64)
        try:
            if not torch.cuda.is_initialized():
                return "sites: CUDA not initialised by the job yet (the agent never initialises it)"
        except Exception as e:
            return "sites: cannot tell whether CUDA is initialised: %s" % text(e, 200)
        return None

    def busy(self):
        """The refusal of a second window, or None."""
        w = self.window
        if w is not None:
            return "a sites window is already running (ends in %d s)" % max(0, math.ceil(w.end_mono - time.monotonic()))
        if self.reducing is not None:
            return "a sites window is already running (ends in 0 s: its summary is being made)"
        return None

    def request(self, rid, seconds, top):
        torch = sys.modules.get("torch")
        reader = self._reader()
        reason = self.busy() or self.why_not(torch, reader)
        if reason is not None:
            self.post(refusal(rid, reason), True)
            return
        rec, snap, on = self._calls(torch)
        try:
            job_history = bool(on())
        except Exception as e:
            self.post(refusal(rid, "sites: cannot tell whether the job records its memory history: %s" % text(e, 200)), True)
            return
        w = Window()
        w.id, w.seconds, w.top = rid, seconds, top
        w.devices = self._context_devices(torch, reader)
        if job_history:
            w.history = "job"
        else:
            try:
                rec(enabled="all", context="all", stacks="python", max_entries=MAX_ENTRIES)
            except Exception as e:
                self._history_off(rec, on)
                self.post(refusal(rid, "sites: could not turn memory history on: %s" % text(e, 200)), True)
                return
            w.history = "agent"
            reader.sites_recording = True
        # Then the counts: an event between them is in the window and counted (dropped
        # never counts one the trace holds as lost).
        w.started = time.time()
        w.before = self._counts(w.devices)
        w.since_us = w.started * 1e6 if job_history else None
        w.start_mono = time.monotonic()
        w.end_mono = w.start_mono + seconds
        self.window = w
        self.post({"v": 1, "type": "sites", "time": w.started, "id": rid, "state": "running",
                   "started": w.started, "seconds": seconds, "history": w.history}, False)

    @staticmethod
    def _history_off(rec, on):
        """Recording off if it is on (after a failed start): False when it stays on."""
        try:
            if on():
                rec(enabled=None)
            return not on()
        except Exception:
            return False

    @staticmethod
    def _context_devices(torch, reader):
        """The devices that hold a context now (the last sample's list may be older): one
        without had no allocation, so its counts were 0."""
        has = getattr(torch._C, "_cuda_hasPrimaryContext", None)
        out = []
        for i in range(min(reader.count or 0, MAX_DEVICES)):
            try:
                if has is None or has(i):
                    out.append(i)
            except Exception:
                pass
        return out

    def _counts(self, devices):
        """{device: (allocations, frees)} from memory_stats, or None when it has no counts."""
        cuda = sys.modules["torch"].cuda
        out = {}
        for i in devices:
            try:
                st = cuda.memory_stats(i)
            except Exception:
                return None
            a, f = count(st.get("allocation.all.allocated")), count(st.get("allocation.all.freed"))
            if a is None or f is None:
                return None
            out[i] = (a, f)
        return out

    # -- ending -------------------------------------------------------------------------

    def due_at(self):
        w = self.window
        return w.end_mono if w is not None else None

    def finish(self):
        """The window's end (on time): the snapshot, history back as the job had it, and the
        reduction to run. Returns the tasks to drive (the summary, then the segment map)."""
        w, self.window = self.window, None
        try:
            return self._finish(w)
        except Exception as e:
            self.reducing = None
            torch = sys.modules.get("torch")
            calls = self._calls(torch) if torch is not None else None
            if w.history == "agent" and calls is not None:
                self._history_off(calls[0], calls[2])
            self._fail(w, "agent error: %s: %s" % (type(e).__name__, text(e, 200)))
            return []

    def _finish(self, w):
        torch = sys.modules.get("torch")
        reader = self._reader()
        calls = self._calls(torch) if torch is not None else None
        if calls is None or reader is None:
            self._fail(w, "torch is gone from the process")
            return []
        rec, snap, on = calls
        now_devices = sorted(set(w.devices) | set(self._context_devices(torch, reader)))
        after = self._counts(now_devices)
        end_mono = time.monotonic()
        snapshot, err, took = None, None, None
        try:
            still = bool(on())
        except Exception:
            still = None
        if still is False:
            # The job turned history off (torch emptied the ring): nothing left to read.
            if w.history == "agent":
                reader.sites_recording = False
            self._fail(w, "the job turned memory history off during the window")
            return []
        try:
            t0 = time.perf_counter()
            try:
                snapshot = snap()
            finally:
                took = time.perf_counter() - t0
        except Exception as e:
            err = "snapshot failed: %s" % text(e, 200)
        finally:
            if w.history == "agent":
                reader.sites_recording = False
                try:
                    rec(enabled=None)
                except Exception as e:
                    err = (err + "; " if err else "") + "history could not be turned off: %s" % text(e, 200)
        if err is None and not (isinstance(snapshot, dict) and isinstance(snapshot.get("segments"), list)):
            err = "the snapshot is not a dict with segments"
        if err is not None:
            self._fail(w, err)
            return []
        window_s = end_mono - w.start_mono
        red = Reduction(snapshot, w.since_us)
        clock = _slices.Clock()
        run = _slices.Run(red.run(clock), clock, budget=self.budget)
        self.reducing = w
        snapped = time.time()

        def done():
            self.reducing = None
            self.post(self._summary(w, red, run, w.before, after, window_s, took, snapped), True)

        # The map of the same snapshot; its largest free blocks are the sample's too, unless
        # the job records its own history (then the agent measures none: _torch).
        segs = segment_run(snapshot.get("segments"), snapped, took, reader if w.history == "agent" else None,
                           self.post_segments)
        return [(run, done, lambda reason: self._fail_reducing(w, reason)), segs]

    def _summary(self, w, red, run, before, after, window_s, took, now):
        stopped = None
        if run.over_budget:
            walked, total = red.walked(), red.total
            if red.phase == "live":
                stopped = ("CPU budget of %g s spent while reading live blocks: live sites are partial, "
                           "growth not read" % self.budget)
            else:
                stopped = ("CPU budget of %g s spent: growth covers the last %d of %d trace entries "
                           "(each device's latest, walked from the window's end)" % (self.budget, walked, total))
        window = window_s
        if w.since_us is not None and red.untimed:
            window = None  # entries without time_us: the job's whole trace, of unknown length
        msg = {
            "v": 1, "type": "sites", "time": now, "id": w.id, "state": "done", "reason": None,
            "started": w.started, "seconds": w.seconds, "window": window, "history": w.history,
            "entries": red.walked(), "dropped": red.dropped(before, after),
            "cost": {"cpu": run.cpu_ns / 1e9, "gil_max": run.hold_max_ns / 1e9, "snapshot": took},
            "stopped": stopped, "devices": red.devices(w.top),
        }
        return msg

    def _fail(self, w, reason):
        self.post({"v": 1, "type": "sites", "time": time.time(), "id": w.id, "state": "failed",
                   "reason": reason[:REASON_CHARS], "started": w.started, "seconds": w.seconds,
                   "history": w.history}, True)

    def _fail_reducing(self, w, reason):
        self.reducing = None
        self._fail(w, reason)

    def halt(self, why):
        """The agent stops (the job exits, stop()): a window recording ends here, history
        put back first; no snapshot is taken (it could outlast the exit)."""
        w, self.window = self.window, None
        if w is None:
            return
        if w.history == "agent":
            torch = sys.modules.get("torch")
            calls = self._calls(torch) if torch is not None else None
            reader = self._reader()
            if reader is not None:
                reader.sites_recording = False
            off = calls is not None and self._history_off(calls[0], calls[2])
            tail = "; history turned off" if off else "; history could not be turned off"
        else:
            tail = ""
        self._fail(w, "%s %.1f s into the window%s" % (why, time.monotonic() - w.start_mono, tail))


def segment_run(segments, when, took, reader, post):
    """The Run of a snapshot's segment map and what posts it when done (a `segments`
    message, kept) and hands the largest free blocks to the reader."""
    smap = _segmap.SegmentMap(segments)
    clock = _slices.Clock()
    run = _slices.Run(smap.run(clock), clock)

    def done():
        msg = {"v": 1, "type": "segments", "time": when, "took": took, "devices": smap.devices()}
        line = _segmap.fit(msg)
        if line is not None:
            post(line)
        if reader is not None:
            reader.lfb, reader.lfb_time = smap.largest_free(), when

    return (run, done, None)

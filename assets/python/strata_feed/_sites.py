"""Allocation sites on demand (PROTOCOL.md, "sites"): a window of torch's allocator history,
reduced in the job to a small summary of which lines of the job's code hold memory and
which grew over the window. Never raw traces.

- Window (torch 2.1+, native allocator): when the job records no history of its own, the
  agent turns it on (enabled="all", context="all", stacks="python", max_entries=MAX_ENTRIES),
  waits the window while sampling goes on, takes torch.cuda.memory._snapshot() and turns it
  off (enabled=None; torch then empties and, from late 2025, frees its ring). When the job
  records its own, the agent changes nothing and reads the job's trace since the request.
- Reduction: a generator run in slices (_slices) on the sampler's thread, within a CPU
  budget; the site rule is the one of src/sample/pool.rs, for `strata analyze` too.

Every call into torch is made on the sampler's thread (the only thread of the agent's that
calls a framework); the serving thread only hands requests over (Agent.request).
"""

import math
import sys
import time

from . import MAX_DEVICES, _segmap, _slices
from ._reading import count, text, version_tuple
from ._wire import LINE_LIMIT, encode

SITES_SINCE = (2, 1)  # _record_memory_history(enabled=str, ...), _cuda_isHistoryEnabled
MAX_ENTRIES = 100000  # the ring the agent asks for, per device
CPU_BUDGET = 0.5  # seconds of the sampler thread's CPU the reduction may take
MAX_TOP = 50
FILE_CHARS = 256
FUNC_CHARS = 128
REASON_CHARS = 300
NO_FRAME = "(no frame in the job's code)"
ROUND_ROBIN = 1024  # trace entries of one device walked before the next device's turn

_NOT_JOB_SUFFIXES = (".cpp", ".cc", ".h", ".cu", ".c")
_PACKAGES = ("site-packages", "dist-packages")
_MISS = object()


# -- the site rule --------------------------------------------------------------------------


def _stdlib_dir(part):
    """'python3.11' (and a free-threaded 'python3.13t'): a lib/ directory's Python."""
    if not part.startswith("python3."):
        return False
    rest = part[8:]
    if rest.endswith("t"):
        rest = rest[:-1]
    return rest.isdigit()


def is_job_file(name):
    """Whether a frame's filename is the job's own code: not torch's (a `torch` directly
    under site-packages/dist-packages), not the agent's (`strata_feed`), not the standard
    library (under lib/python3.N/ and not in a site-packages/dist-packages below it), not
    C/C++ (.cpp .cc .h .cu .c), not `<...>`, `??` or empty."""
    if not isinstance(name, str) or not name or name == "??" or name.startswith("<"):
        return False
    if name.endswith(_NOT_JOB_SUFFIXES):
        return False
    stdlib = False
    prev = None
    for part in name.split("/"):
        if part == "strata_feed":
            return False
        if part in _PACKAGES:
            stdlib = False  # a package below lib/python3.N is not the standard library
        elif part == "torch" and prev in _PACKAGES:
            return False
        elif prev == "lib" and _stdlib_dir(part):
            stdlib = True
        prev = part
    return not stdlib


def frame_text(f):
    """`FILE:LINE in FUNCTION`: FILE as the frame gives it, its start cut to `...` past 256
    characters; FUNCTION cut at 128."""
    name = f.get("filename")
    name = name if isinstance(name, str) else (text(name, FILE_CHARS) or "")
    if len(name) > FILE_CHARS:
        name = "..." + name[len(name) - (FILE_CHARS - 3):]
    line = f.get("line")
    line = str(line) if isinstance(line, int) and not isinstance(line, bool) else "?"
    func = f.get("name")
    func = func[:FUNC_CHARS] if isinstance(func, str) else (text(func, FUNC_CHARS) or "?")
    return "%s:%s in %s" % (name, line, func)


class Sites(object):
    """The site of a list of frames (innermost first). torch shares one dict between equal
    frames, so a frame's verdict is cached by identity (the snapshot keeps every frame
    alive while this lives). A call allocates nothing that outlives it but a new site's
    text: a pass over a large snapshot must not set off the garbage collector, whose full
    collection would walk the whole snapshot inside one slice."""

    def __init__(self, clock=None):
        self.frames = {}  # id(frame dict) -> (dict, its text or None when not the job's)
        self.results = {}  # (site, via 1, via 2) texts -> (site, via)
        self.clock = clock

    def frame(self, f):
        hit = self.frames.get(id(f))
        if hit is not None and hit[0] is f:
            return hit[1]
        t = None
        if isinstance(f, dict):
            name = f.get("filename")
            if isinstance(name, str) and len(name) > 4096 and self.clock is not None:
                self.clock.heavy = True  # a long text looked at: read the clock next
            if is_job_file(name):
                t = frame_text(f)
        self.frames[id(f)] = (f, t)
        return t

    def site(self, frames):
        """(site, via) of a non-empty list of frames."""
        cache = self.frames
        t0 = t1 = None
        for f in frames:
            hit = cache.get(id(f))
            t = hit[1] if hit is not None and hit[0] is f else self.frame(f)
            if t is not None:
                if t0 is None:
                    t0 = t
                elif t1 is None:
                    t1 = t
                else:
                    key = (t0, t1, t)
                    break
        else:
            key = (t0, t1, None)
        res = self.results.get(key)
        if res is None:
            res = self.results[key] = (t0 or NO_FRAME, [x for x in key[1:] if x is not None])
        return res


# -- the reduction --------------------------------------------------------------------------


class _Dev(object):
    __slots__ = ("index", "live", "live_bytes", "live_blocks", "unattributed", "growth", "trace",
                 "pos", "freed_later", "walked", "held", "timed_out")

    def __init__(self, index):
        self.index = index
        self.live = {}  # site -> [bytes, count, via, largest block]
        self.live_bytes = self.live_blocks = self.unattributed = 0
        self.growth = {}  # site -> [bytes, allocs, frees, via, largest alloc]
        self.trace = ()
        self.pos = 0  # entries of the trace still to walk, from the end
        self.freed_later = set()
        self.walked = 0  # trace entries of the window walked
        self.held = 0  # of them, allocations and free requests (what memory_stats counts)
        self.timed_out = False


class Reduction(object):
    """A snapshot's live blocks by site, and growth by site over the window from its trace.

    since_us: the window's start in the trace's time_us (unix microseconds); entries before
    it are not the window's (the job's own history), None when the whole trace is the
    window (the agent's ring, emptied when history was last turned off). The trace is walked
    from its end, so a walk cut short by the CPU budget still finds only true growth: each
    allocation it counts was made in the window and is live at its end."""

    def __init__(self, snapshot, since_us=None):
        self.snapshot = snapshot
        self.since_us = since_us
        self.devs = {}
        self.untimed = 0  # window entries without time_us
        self.total = 0  # trace entries of every device
        self.phase = "live"

    def _dev(self, i):
        d = self.devs.get(i)
        if d is None:
            d = self.devs[i] = _Dev(i)
        return d

    def run(self, clock):
        sites = Sites(clock)
        self.sites = sites
        due = clock.due
        segs = self.snapshot.get("segments")
        for seg in segs if isinstance(segs, list) else ():
            if not isinstance(seg, dict):
                continue
            dev = seg.get("device")
            if isinstance(dev, bool) or not isinstance(dev, int) or dev < 0:
                continue
            d = self._dev(dev)
            blocks = seg.get("blocks")
            for b in blocks if isinstance(blocks, list) else ():
                if isinstance(b, dict) and b.get("state") == "active_allocated":
                    size = count(b.get("size")) or 0
                    d.live_bytes += size
                    d.live_blocks += 1
                    frames = b.get("frames")
                    if not frames or not isinstance(frames, list):
                        d.unattributed += size
                    else:
                        site, via = sites.site(frames)
                        acc = d.live.get(site)
                        if acc is None:
                            d.live[site] = [size, 1, via, size]
                        else:
                            acc[0] += size
                            acc[1] += 1
                            if size > acc[3]:
                                acc[2], acc[3] = via, size
                if due():
                    yield
        self.phase = "growth"
        traces = self.snapshot.get("device_traces")
        walking = []
        for i, trace in enumerate(traces if isinstance(traces, list) else ()):
            if isinstance(trace, list) and trace:
                d = self._dev(i)
                d.trace, d.pos = trace, len(trace)
                self.total += len(trace)
                walking.append(d)
        since = self.since_us
        while walking:
            for d in list(walking):
                trace, freed_later, growth = d.trace, d.freed_later, d.growth
                stop = max(0, d.pos - ROUND_ROBIN)
                while d.pos > stop:
                    d.pos -= 1
                    e = trace[d.pos]
                    if not isinstance(e, dict):
                        continue
                    t = e.get("time_us")
                    if since is not None:
                        if isinstance(t, (int, float)) and not isinstance(t, bool):
                            if t < since:
                                continue
                        else:
                            self.untimed += 1
                    d.walked += 1
                    action = e.get("action")
                    if action == "alloc":
                        d.held += 1
                        addr = e.get("addr")
                        frames = e.get("frames")
                        if frames and isinstance(frames, list):
                            site, via = sites.site(frames)
                        else:
                            site, via = NO_FRAME, []
                        size = count(e.get("size")) or 0
                        g = growth.get(site)
                        if g is None:
                            g = growth[site] = [0, 0, 0, via, -1]
                        g[1] += 1
                        if addr in freed_later:
                            freed_later.discard(addr)
                            g[2] += 1
                        else:
                            g[0] += size
                            if size > g[4]:
                                g[3], g[4] = via, size
                    elif action == "free_requested" or action == "free_completed":
                        if action == "free_requested":
                            d.held += 1
                        freed_later.add(e.get("addr"))
                    if due():
                        yield
                if d.pos == 0:
                    walking.remove(d)
        self.phase = "done"

    # -- the summary --------------------------------------------------------------------

    def walked(self):
        return sum(d.walked for d in self.devs.values())

    def complete(self):
        return self.phase == "done"

    def devices(self, top):
        top = min(top, MAX_TOP)
        out = []
        for i in sorted(self.devs):
            d = self.devs[i]
            live = sorted(d.live.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top]
            grew = sorted(((s, g) for s, g in d.growth.items() if g[0] > 0), key=lambda kv: (-kv[1][0], kv[0]))
            out.append({
                "index": i,
                "live": [{"site": s, "via": a[2], "bytes": a[0], "count": a[1]} for s, a in live],
                "live_bytes": d.live_bytes,
                "live_blocks": d.live_blocks,
                "live_unattributed": d.unattributed,
                "growth": [{"site": s, "via": g[3], "bytes": g[0], "allocs": g[1], "frees": g[2]} for s, g in grew[:top]],
                "growth_bytes": sum(g[0] for _, g in grew),
            })
        return out

    def dropped(self, before, after):
        """Allocations and frees memory_stats counted over the window that the trace does not
        hold, floor 0 per device; None where either count is unknown or the walk stopped."""
        if not self.complete() or before is None or after is None:
            return None
        total = 0
        for i in set(after) | set(self.devs):
            a = after.get(i)
            b = before.get(i, (0, 0))  # a device without a context then had allocated nothing
            if a is None or b is None or None in a or None in b:
                return None
            counted = (a[0] - b[0]) + (a[1] - b[1])
            if counted < 0:
                return None  # the job reset its statistics in the window
            d = self.devs.get(i)
            total += max(0, counted - (d.held if d is not None else 0))
        return total


def fit_sites(msg, limit=LINE_LIMIT):
    """msg (a `sites` message) encoded within limit: the smallest entries of the longest
    lists go first, and `stopped` says so. None when even empty lists do not fit."""
    line = encode(msg)
    if len(line) <= limit:
        return line
    lists = [d[k] for d in msg.get("devices") or () for k in ("live", "growth")]
    sizes = {id(x): len(encode(x)) + 1 for lst in lists for x in lst}
    over = len(line) - limit + 200  # room for the note
    cut = 0
    while over > 0 and any(lists):
        lst = max(lists, key=len)
        over -= sizes[id(lst.pop())]
        cut += 1
    note = "%d sites left out to fit the 64 KiB line" % cut
    msg["stopped"] = note if not msg.get("stopped") else msg["stopped"] + "; " + note
    line = encode(msg)
    while len(line) > limit and any(lists):
        max(lists, key=len).pop()
        line = encode(msg)
    return line if len(line) <= limit else None


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
        w.before = self._counts(w.devices)
        w.started = time.time()
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

"""The reduction of a torch allocator snapshot to sites (PROTOCOL.md, "sites", "The site of
a frame list"): which lines of the job's code hold live blocks, and which allocated over
the window and had not freed by its end. One rule, the same as the monitor's for snapshot
files (src/sample/pool.rs): keep both in step.

Pure: it reads a snapshot dict and calls nothing of torch's. The pass is a generator driven
in slices (_slices). A leaf but for _reading and _wire.
"""

from ._reading import count, text
from ._wire import MADE_LIMIT, encode

MAX_TOP = 50
FILE_CHARS = 256
FUNC_CHARS = 128
NO_FRAME = "(no frame in the job's code)"
ROUND_ROBIN = 1024  # trace entries of one device walked before the next device's turn

_NOT_JOB_SUFFIXES = (".cpp", ".cc", ".h", ".cu", ".c")
_PACKAGES = ("site-packages", "dist-packages")


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
                 "pos", "freed_later", "walked", "held")

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
        # Entries this much older than the window end a device's walk: the trace is in time
        # order, but its clock is approximate (converted from the TSC), so those just before
        # the window's start are skipped one by one.
        older = None if since is None else since - 1e6
        while walking:
            for d in list(walking):
                trace, freed_later, growth = d.trace, d.freed_later, d.growth
                stop = max(0, d.pos - ROUND_ROBIN)
                while d.pos > stop:
                    if due():
                        yield
                    d.pos -= 1
                    e = trace[d.pos]
                    if not isinstance(e, dict):
                        continue
                    t = e.get("time_us")
                    if since is not None:
                        if isinstance(t, (int, float)) and not isinstance(t, bool):
                            if t < since:
                                if t < older:
                                    d.pos = 0
                                    break
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


def fit_sites(msg, limit=MADE_LIMIT):
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

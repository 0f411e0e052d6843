"""The segment map of a torch allocator snapshot (PROTOCOL.md, "segments"): per device and
pool, the segments' sizes, live, pending and free bytes, free blocks by size, the segments a
few live bytes pin, and a strip of runs for up to 32 segments. One rule, the same as the
monitor's for snapshot files (src/sample/pool.rs): keep both in step.

The pass is a generator driven in slices (_slices): it holds the GIL a slice at a time
however many blocks the snapshot has. A leaf but for _slices and _wire.
"""

import heapq

from ._wire import MADE_LIMIT, encode

MAX_STRIPS = 32
MAX_RUNS = 64
PINNED_NUM, PINNED_DEN = 3, 4  # pinned: live > 0 and free * 4 >= size * 3
POOL_TEXT = 16  # characters of a pool's name kept (torch writes "large" or "small")
_RUN_OF = {"active_allocated": "l", "active_pending_free": "p", "inactive": "f"}
_POOL_ORDER = {"large": 0, "small": 1}


def _count(v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        return None
    return v


class _Pool(object):
    __slots__ = ("name", "expandable", "segments", "reserved", "live", "pending", "free", "largest",
                 "buckets", "pin_n", "pin_reserved", "pin_live")

    def __init__(self, name, expandable):
        self.name, self.expandable = name, expandable
        self.segments = self.reserved = self.live = self.pending = self.free = self.largest = 0
        self.buckets = {}  # k -> [blocks, bytes] of free blocks with 2**k <= size < 2**(k+1)
        self.pin_n = self.pin_reserved = self.pin_live = 0

    def as_dict(self):
        return {
            "pool": self.name,
            "expandable": self.expandable,
            "segments": self.segments,
            "reserved": self.reserved,
            "live": self.live,
            "pending_free": self.pending,
            "free": self.free,
            "largest_free": self.largest,
            "free_blocks": [
                {"at_least": 1 << k, "blocks": v[0], "bytes": v[1]} for k, v in sorted(self.buckets.items())
            ],
            "pinned": {"segments": self.pin_n, "reserved": self.pin_reserved, "live": self.pin_live},
        }


class _Device(object):
    __slots__ = ("index", "pools", "chosen", "seen", "n")

    def __init__(self, index):
        self.index = index
        self.pools = {}
        self.chosen = []  # a heap of the MAX_STRIPS segments to draw, worst first
        self.seen = 0  # segments in the map
        self.n = 0  # a tie-breaker for the heap


class SegmentMap(object):
    """run(clock) fills the map from `segments` (the snapshot's list); devices() is the
    result, largest_free() each device's largest inactive block."""

    def __init__(self, segments):
        self.segments = segments if isinstance(segments, (list, tuple)) else ()
        self.by_device = {}
        self.strips = {}  # device index -> [strip dicts], in drawing order
        self.skipped = 0  # segments without a device index

    def run(self, clock):
        due = clock.due
        for seg in self.segments:
            if not isinstance(seg, dict):
                self.skipped += 1
                continue
            dev = seg.get("device")
            if isinstance(dev, bool) or not isinstance(dev, int) or dev < 0:
                self.skipped += 1
                continue
            d = self.by_device.get(dev)
            if d is None:
                d = self.by_device[dev] = _Device(dev)
            name = seg.get("segment_type")
            name = name[:POOL_TEXT] if isinstance(name, str) else "unknown"
            expandable = seg.get("is_expandable") is True
            key = (name, expandable)
            p = d.pools.get(key)
            if p is None:
                p = d.pools[key] = _Pool(name, expandable)
            total = _count(seg.get("total_size")) or 0
            live = pending = free = largest = 0
            blocks = seg.get("blocks")
            for b in blocks if isinstance(blocks, (list, tuple)) else ():
                if not isinstance(b, dict):
                    continue
                size = _count(b.get("size")) or 0
                state = b.get("state")
                if state == "active_allocated":
                    live += size
                elif state == "active_pending_free":
                    pending += size
                elif state == "inactive":
                    free += size
                    if size > largest:
                        largest = size
                    if size:
                        k = size.bit_length() - 1
                        bucket = p.buckets.get(k)
                        if bucket is None:
                            p.buckets[k] = [1, size]
                        else:
                            bucket[0] += 1
                            bucket[1] += size
                if due():
                    yield
            p.segments += 1
            p.reserved += total
            p.live += live
            p.pending += pending
            p.free += free
            if largest > p.largest:
                p.largest = largest
            pinned = live > 0 and free * PINNED_DEN >= total * PINNED_NUM
            if pinned:
                p.pin_n += 1
                p.pin_reserved += total
                p.pin_live += live
            address = _count(seg.get("address")) or 0
            # Drawing order: pinned first (most free first), then the largest; then address.
            order = (0, -free, address) if pinned else (1, -total, address)
            d.seen += 1
            d.n += 1
            item = (_neg(order), d.n, seg, pinned, total, live, free, largest)
            if len(d.chosen) < MAX_STRIPS:
                heapq.heappush(d.chosen, item)
            elif item[0] > d.chosen[0][0]:
                heapq.heapreplace(d.chosen, item)
            if due():
                yield
        for dev, d in self.by_device.items():
            picked = sorted(d.chosen, key=lambda it: (_neg(it[0]), it[1]))
            out = []
            for _, _, seg, pinned, total, live, free, largest in picked:
                runs = []
                for _ in _runs(seg, total, runs, clock):
                    yield
                name = seg.get("segment_type")
                out.append({
                    "pool": name[:POOL_TEXT] if isinstance(name, str) else "unknown",
                    "expandable": seg.get("is_expandable") is True,
                    "size": total,
                    "live": live,
                    "free": free,
                    "largest_free": largest,
                    "pinned": pinned,
                    "runs": runs,
                })
            self.strips[dev] = out

    def devices(self):
        out = []
        for dev in sorted(self.by_device):
            d = self.by_device[dev]
            pools = sorted(d.pools.values(), key=lambda p: (_POOL_ORDER.get(p.name, 2), p.name, p.expandable))
            strips = self.strips.get(dev, [])
            out.append({
                "index": dev,
                "pools": [p.as_dict() for p in pools],
                "strips": strips,
                "strips_left_out": d.seen - len(strips),
            })
        return out

    def largest_free(self):
        return {dev: max([p.largest for p in d.pools.values()] or [0]) for dev, d in self.by_device.items()}


def _neg(order):
    return (-order[0], -order[1], -order[2])


def _runs(seg, total, runs, clock):
    """The segment's blocks in address order as [bytes, state] runs, merged, adding up to
    total: a gap before, between or after blocks is free, blocks past the end are cut.
    Past MAX_RUNS runs, the last one ("m") holds all the rest."""
    base = _count(seg.get("address"))
    blocks = seg.get("blocks")
    items = []
    addressed, ordered, prev = base is not None, True, None
    due = clock.due
    for b in blocks if isinstance(blocks, (list, tuple)) else ():
        if not isinstance(b, dict):
            continue
        a = _count(b.get("address"))
        if a is None:
            addressed = False
        elif prev is not None and a < prev:
            ordered = False
        prev = a
        items.append(b)
        if due():
            yield
    if addressed and not ordered:
        items.sort(key=lambda b: b["address"])  # torch lists them in order: never seen
    pos = 0  # offset in the segment
    mixed = [0]  # bytes of the "m" run once there is one

    def add(n, state):
        if n <= 0:
            return
        if mixed[0]:
            mixed[0] += n
        elif runs and runs[-1][1] == state:
            runs[-1][0] += n
        elif len(runs) >= MAX_RUNS:
            mixed[0] = runs.pop()[0] + n  # the 64th run and every one after it
        else:
            runs.append([n, state])

    for b in items:
        size = _count(b.get("size")) or 0
        if addressed:
            start = b["address"] - base
            if start > pos:
                add(min(start, total) - min(pos, total), "f")
                pos = start
        end = pos + size
        add(min(end, total) - min(pos, total), _RUN_OF.get(b.get("state"), "f"))
        pos = end
        if due():
            yield
    if pos < total:
        add(total - pos, "f")
    if mixed[0]:
        runs.append([mixed[0], "m"])


def fit(msg, limit=MADE_LIMIT):
    """msg (a `segments` message) encoded within limit: strips go from the end of the device
    that has the most, counted in its strips_left_out; then free-block histograms, then
    devices from the end. None when not even one device fits."""
    line = encode(msg)
    if len(line) <= limit:
        return line
    devices = msg["devices"]
    sizes = {}  # id(strip) -> its encoded size, and the comma before it
    for d in devices:
        for s in d["strips"]:
            sizes[id(s)] = len(encode(s)) + 1
    over = len(line) - limit
    while over > 0:
        d = max(devices, key=lambda x: (len(x["strips"]), x["index"]))
        if not d["strips"]:
            break
        s = d["strips"].pop()
        d["strips_left_out"] += 1
        over -= sizes[id(s)]
    line = encode(msg)
    while len(line) > limit:
        if any(d["strips"] for d in devices):
            d = max(devices, key=lambda x: (len(x["strips"]), x["index"]))
            d["strips"].pop()
            d["strips_left_out"] += 1
        elif any(p["free_blocks"] for d in devices for p in d["pools"]):
            for d in devices:
                for p in d["pools"]:
                    p["free_blocks"] = []
        elif len(devices) > 1:
            devices.pop()
        else:
            return None
        line = encode(msg)
    return line

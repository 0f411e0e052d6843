#!/usr/bin/env python3
"""Writes the committed snapshot fixtures of `tests/integration/torch_snapshot.rs`, or a large
snapshot to time strata on (standard library only):

    python3 tests/torchsnap/make_fixtures.py                   # the fixtures, in this directory
    python3 tests/torchsnap/make_fixtures.py --large N PATH    # N trace entries into PATH
    python3 tests/torchsnap/make_fixtures.py --distinct N PATH # the same, a traceback each

The fixtures: fragmented_oom.pickle (snapshots.fragmented_oom(), as `_dump_snapshot` writes
it), the same gzip-compressed, and fragmented_oom.expected.json (what the reduction must say of
it, worked out by snapshots.expected() from the dict alone).
"""

import gzip
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import snapshots  # noqa: E402
from snapshots import GiB, MiB, job, torch_frame  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def fixtures():
    snap = snapshots.fragmented_oom()
    path = os.path.join(HERE, "fragmented_oom.pickle")
    snapshots.dump(snap, path)
    with open(path, "rb") as f, open(path + ".gz", "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
            out.write(f.read())
    with open(os.path.join(HERE, "fragmented_oom.expected.json"), "w") as f:
        json.dump(snapshots.expected(snap), f, indent=1, sort_keys=True)
        f.write("\n")


def large(entries, path, distinct=False):
    """A snapshot of `entries` trace entries on one device: 500 distinct tracebacks of 20 to 40
    frames (with `distinct`, one of its own for each allocation, of frames drawn from 5,000),
    allocations and frees of a training loop, 2,000 segments."""
    rng = random.Random(35)
    b = snapshots.Builder()
    stacks = []
    for i in range(500):
        depth = rng.randint(20, 40)
        frames = [torch_frame(rng.randint(1, 900), "op%d" % rng.randint(0, 50)) for _ in range(depth // 2)]
        frames += [job(rng.randint(1, 400), "f%d" % j, "mod%d.py" % (i % 37)) for j in range(depth - depth // 2)]
        stacks.append(b.stack(*frames))
    addr = 0x7F00_0000_0000
    for s in range(2000):
        blocks = []
        for _ in range(rng.randint(1, 12)):
            state = rng.choice(["active_allocated", "inactive", "active_allocated", "active_pending_free"])
            blocks.append((rng.randint(1, 64) * MiB // 4, state, rng.choice(stacks) if state != "inactive" else None))
        seg = b.segment(0, addr, blocks, pool="large" if s % 4 else "small")
        addr += seg["total_size"] + 2 * MiB
    live = []
    for n in range(entries):
        if live and (rng.random() < 0.5 or len(live) > 5000):
            a, size = live.pop(rng.randrange(len(live)))
            b.event(0, "free_requested", a, size)
        else:
            size = rng.randint(1, 4096) * 512
            a = addr + n * 4 * MiB
            if distinct:
                depth = rng.randint(20, 40)
                stack = b.stack(*[job(rng.randint(1, 5000), "f", "mod%d.py" % rng.randint(0, 99))
                                  for _ in range(depth)] + [("<unique>", n, "entry")])
            else:
                stack = rng.choice(stacks)
            b.event(0, "alloc", a, size, stack)
            live.append((a, size))
    b.event(0, "oom", size=2 * GiB, stack=stacks[0], device_free=100 * MiB)
    snapshots.dump(b.snapshot(), path)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] in ("--large", "--distinct"):
        large(int(sys.argv[2]), sys.argv[3], distinct=sys.argv[1] == "--distinct")
    else:
        fixtures()

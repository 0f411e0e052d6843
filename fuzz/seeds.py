#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus (fuzz/corpus/<target>/seed-*) from a few samples of
the demo node (`strata snapshot --demo --json`) and the real zstd and gzip tools. Run from the
repository root after a build: python3 fuzz/seeds.py [STRATA]. Inputs AFL finds and keeps
are added beside the seeds by benches/fuzz.sh."""

import gzip
import os
import subprocess
import sys

strata = sys.argv[1] if len(sys.argv) > 1 else "target/debug/strata"
demo = subprocess.run(
    [strata, "snapshot", "--demo", "--demo-at", "900", "--json", "--count", "3"],
    check=True, capture_output=True,
).stdout
lines = demo.splitlines(keepends=True)


def zstd(data, *args):
    return subprocess.run(["zstd", "-q", "-c", *args], input=data, check=True,
                          capture_output=True).stdout


def write(target, name, data):
    path = os.path.join("fuzz", "corpus", target, "seed-" + name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


two = lines[0] + lines[1]
frames = zstd(lines[0]) + zstd(lines[1])
damaged = bytearray(frames)
damaged[len(frames) // 4] ^= 0xFF
raw = {
    "plain": two,
    "zstd": zstd(two),
    "zstd-frames": frames,
    "zstd-cut": zstd(two)[:-40],
    "zstd-damaged": bytes(damaged),
    "zstd-long31": zstd(lines[0], "--long=31"),
    "gzip-members": gzip.compress(lines[0]) + gzip.compress(lines[1]),
    "gzip-cut": gzip.compress(two)[:-30],
    "oversized": lines[0] + b"x" * 5000 + b"\n" + lines[1],
    "no-newline": b"\0" * 70000,
    "cut-last-line": lines[0] + lines[1][: len(lines[1]) // 2],
    "junk": b"not a sample\n[1,2]\n{\"time\": 1}\n",
}
for name, data in raw.items():
    write("recording_reader", name, b"\0" + data)
    write("analyze", name, b"\0" + data)
# Framed: kind (1 zstd, 2 gzip, 3 plain), then frames, spoil (0 none, 1 cut, 2 flip), where,
# the flip's bits, then the text.
text = b'{"a":1}\n{"b":[1,2,3]}\nnot json\n' * 20
for kind, name in [(1, "zstd"), (2, "gzip"), (3, "plain")]:
    for spoil, how in [(0, "whole"), (1, "cut"), (2, "flip")]:
        header = bytes([kind, 3, spoil]) + (97).to_bytes(4, "little")[:3] + b"\x5a"
        write("recording_reader", f"framed-{name}-{how}", header + text)
# Planned recordings: a count, then a byte stream the plan reads from.
for n, plan in enumerate([bytes(range(256)), bytes([40] + [7, 3, 1, 2, 5, 9, 0, 1] * 60),
                          bytes([63] + [2, 0, 2, 16, 2, 200, 0, 2, 2, 100] * 80)]):
    write("analyze", f"planned-{n}", b"\x01" + plan)

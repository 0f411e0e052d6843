"""The model behind strata's labelled corpus (make_traces.py tells the stories with it).

A story is a few GPUs and processes whose memory is a sum of components in time (a warm-up,
a saw-tooth, a leak, a step). Rendering walks the story every 5 s and writes what a node
would have shown strata at each instant: NVML's figures, /proc's, and each allocator feed's
latest sample, kept consistent the way a real node is:
- per fed process, NVML `used` = context + outside_pool + reserved, to the byte, and the
  feed's `reserved` >= `allocated` + `inactive_split`;
- the feed is the agent's last sample (on its 0.5 s grid) 0.15-0.35 s before NVML's reading,
  and `reserved_since` is the first agent sample that saw the pool at its present size; the
  pool never changes between the feed's sample and NVML's reading (no skew is staged);
- a GPU's `used` = the sum of its processes' `used` + memory no listed process holds, and
  `free` = `total` - `driver_reserved` - `used`.
Every process also carries `layers`: the generator's truth at the line (context,
outside_pool, live, fragmented, cached; or unattributed for a process without a feed). It is
a derived field of the snapshot schema, which strata ignores on input; tests/corpus.rs checks
the identity against it.
"""

import gzip
import json
import math
import os
import random
import zlib

MiB = 1 << 20
GiB = 1 << 30
T0 = 1767258000.0  # 2026-01-01 09:00:00 UTC: every story starts here
INTERVAL = 5.0
AGENT_INTERVAL = 0.5
HZ = 100  # clock ticks per second, for /proc start times
BOOT = T0 - 3 * 86400 - 1234.0  # the node booted three days before
UID = 1000

GPU_MODELS = {
    "h100": ("NVIDIA H100 80GB HBM3", 85520809984, 546308096),
    "a100": ("NVIDIA A100-SXM4-80GB", 85899345920, 546308096),
    "l40s": ("NVIDIA L40S", 48305799168, 592445440),
}
PCI_BUSES = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]


def M(minutes):
    """Unix time `minutes` into the story."""
    return T0 + 60.0 * minutes


def clamp01(x):
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


def round_up(value, unit):
    return -(-int(value) // unit) * unit


def round_down(value, unit):
    return int(value) // unit * unit


def ticks(unix):
    """A /proc start time (clock ticks since boot)."""
    return int(round((unix - BOOT) * HZ))


# Components: functions of time (unix seconds) to bytes. A process's live tensors, its
# fragmentation, its extra cache, its memory outside the pool and a GPU's unheld memory are
# each a sum of these.


def ramp(begin, seconds, amount):
    """Rises linearly by `amount` bytes over `seconds` from `begin`, then holds."""
    return lambda t: amount * clamp01((t - begin) / seconds)


def step(at, amount, seconds=8.0):
    """A single step (a new model on the device, an eval pass, a bigger batch)."""
    return ramp(at, seconds, amount)


def leak(begin, mib_per_min, end=None):
    """A steady climb of `mib_per_min` from `begin` (to `end`, if it stops)."""
    stop = end if end is not None else float("inf")
    return lambda t: 0.0 if t < begin else (min(t, stop) - begin) / 60.0 * mib_per_min * MiB


def settle(begin, tau, amount):
    """Approaches `amount` exponentially (time constant `tau` seconds): a warm-up's tail."""
    return lambda t: 0.0 if t < begin else amount * (1.0 - math.exp(-(t - begin) / tau))


def saw(begin, period, depth, phase=0.0):
    """A saw-tooth: rises by `depth` over each `period`, then drops back."""

    def f(t):
        if t < begin:
            return 0.0
        x = (t - begin + phase) / period
        return depth * (x - math.floor(x))

    return f


def constant(amount):
    return lambda t: amount


def total(components, t):
    return sum(c(t) for c in components)


class Gpu:
    def __init__(self, rng, index, model="h100", other=()):
        self.index = index
        self.name, self.total, self.driver_reserved = GPU_MODELS[model]
        self.uuid = "GPU-%08x-%04x-%04x-%04x-%012x" % (
            rng.getrandbits(32),
            rng.getrandbits(16),
            0x4000 | rng.getrandbits(12),
            0x8000 | rng.getrandbits(14),
            rng.getrandbits(48),
        )
        self.pci_bus_id = "00000000:%s:00.0" % PCI_BUSES[index]
        # Memory no listed process holds, beyond the driver's reservation.
        self.other = list(other)

        # MIG instances (Mig), where the GPU is in MIG mode.
        self.migs = []

    @property
    def bare_uuid(self):
        """As torch names the device: no `GPU-` prefix."""
        return self.uuid[len("GPU-"):]


class Mig:
    """A MIG instance of `parent` (which is then in MIG mode): processes run on it as on a
    GPU, its memory its own. The agent names it by its MIG UUID (`MIG-...`, lowercase hex, as
    the agent's `_cuda.py` reads it), and its PCI id is the parent's."""

    def __init__(self, rng, parent, profile, total, other=()):
        self.parent = parent
        self.index = parent.index
        self.profile = profile
        self.total = total
        self.driver_reserved = 0
        self.uuid = "MIG-%08x-%04x-%04x-%04x-%012x" % (
            rng.getrandbits(32),
            rng.getrandbits(16),
            0x4000 | rng.getrandbits(12),
            0x8000 | rng.getrandbits(14),
            rng.getrandbits(48),
        )
        self.pci_bus_id = parent.pci_bus_id
        self.other = list(other)
        self.gpu_instance_id = 1 + len(parent.migs)
        parent.migs.append(self)

    @property
    def bare_uuid(self):
        return self.uuid


class Proc:
    """One process on one GPU, from its start to its exit (and what it leaves behind).

    live, frag, cache, outside: components (live tensors; inactive splits beyond the usual
    `frag_level`; cache the pool keeps beyond what live and splits need; memory outside the
    pool). step_amp: live varies within each training step by up to this, so each sample
    falls anywhere in it; noise: jitter on top. retries: (begin, end, per minute) of
    allocation retries; ooms: (time, class, requested or None, whether the agent reports
    it); idle: (begin, end) with SM at 0% (idle_sm: a range it is drawn from instead,
    whole percents, as NVML reads a process that still runs the odd small kernel). exit,
    after: when it ends and what it leaves: "gone" (released), "zombie" (the pid is gone,
    its context stays), "defunct" (state Z).
    floor: a pool reserved up front to this size; breathe: (without a feed) a pool that
    grows and is released, by these components.

    Options a few stories use (each left at its default changes nothing, in the output or in
    the draws from the generator): oom_once, an OOM report carried only on the line after it
    arrived (never again); unmeasured_block, `largest_free_block` not reported;
    report_context, the hello's device says the context the agent read at CUDA init;
    step_secs, the job runs training steps of that length from step_from, the live tensors
    rising by step_amp within each step (at its phase, not at random) and the agent taking
    a reading at the end of a step (at most one every 0.2 s), live then `live`'s value with
    step_noise of jitter; peak_counts_jitter, the allocator's peak counter holds the highest
    of the jitter too (4 noise above the step's top, what the pool grows to hold), as a
    real counter that sees every allocation does, rather than the highest sampled;
    async_pool, a JAX job on XLA's cuda_async allocator: its feed reports live tensors and
    their peak, no pool figure, no split pieces; feed_kept, seconds the monitor keeps the
    closed feed of a process that exited (and is gone: NVML no longer lists it).
    """

    def __init__(self, pid, gpu, start, command="python train.py",
                 executable="/usr/bin/python3.11", user="alice", fed=True, context_mib=506,
                 cuda_after=4.0, live=(), step_amp=0, noise=8 * MiB, frag_level=160 * MiB,
                 frag=(), cache=(), outside=(), retries=(), ooms=(), idle=(), exit=None,
                 after="gone", sm=(70, 98), growth_odds=1 / 150.0, breathe=(), floor=0,
                 oom_once=False, unmeasured_block=False, report_context=False,
                 step_secs=None, step_from=None, step_noise=2 * MiB, idle_sm=(0, 0),
                 peak_counts_jitter=False, async_pool=False, feed_kept=0.0):
        self.pid = pid
        self.gpu = gpu
        self.start = start
        self.listed_from = start + cuda_after  # when it created its CUDA context
        self.command = command
        self.executable = executable
        self.user = user
        self.fed = fed
        self.context = context_mib * MiB
        self.live = list(live)
        self.step_amp = step_amp
        self.noise = noise
        self.frag_level = frag_level
        self.frag = list(frag)
        self.cache = list(cache)
        self.outside = list(outside)
        self.retries = list(retries)
        self.ooms = list(ooms)
        self.idle = list(idle)
        self.idle_sm = idle_sm
        self.exit = exit
        self.after = after
        self.sm = sm
        self.growth_odds = growth_odds
        self.breathe = list(breathe)
        self.floor = floor
        # The allocator's state, advanced line by line.
        self.agent_start = None
        self.pool = 0
        self.pool_since = None
        self.peak_allocated = 0
        self.peak_reserved = 0
        self.device_allocs = 0
        self.device_frees = 0
        self.outside_wobble = 0
        self.last = None  # (stats, used, truth) of the last line it was alive
        self.oom_reports = []
        self.oom_once = oom_once
        self.unmeasured_block = unmeasured_block
        self.report_context = report_context
        self.step_secs = step_secs
        self.step_from = step_from if step_from is not None else self.listed_from + 20.0
        self.step_noise = step_noise
        self.peak_counts_jitter = peak_counts_jitter
        self.async_pool = async_pool
        self.feed_kept = feed_kept
        self.step_readings = []  # step-end readings since the previous line
        self.first_report = None
        self.last_step_reading = None

    def steps_done(self, t):
        """Training steps completed at `t` (a stepped job)."""
        if self.step_secs is None or t < self.step_from:
            return 0
        return int((t - self.step_from) / self.step_secs + 1e-9)

    def step_end_readings(self, rng, prev_tf, tf):
        """The agent's readings at the end of each step in (prev_tf, tf], at most one every
        0.2 s: live tensors as the step leaves them."""
        out = []
        every = max(1, math.ceil(0.2 / self.step_secs - 1e-9))
        k = self.steps_done(prev_tf) + 1
        while self.step_from + k * self.step_secs <= tf:
            at = self.step_from + k * self.step_secs
            if k % every == 0:
                live = max(0.0, total(self.live, at)) + rng.gauss(0, self.step_noise)
                out.append({
                    "index": 0,
                    "seq": self.seq(at),
                    "time": round(at, 3),
                    "allocated": max(0, round_down(live, 512)),
                    "reserved": self.pool,
                    "step": k,
                    "at_step_end": True,
                })
            k += 1
        return out

    def alive(self, t):
        return self.exit is None or t < self.exit

    def listed(self, t):
        return t >= self.listed_from and (self.alive(t) or self.after in ("zombie", "defunct"))

    def idle_at(self, t):
        return any(begin <= t < end for begin, end in self.idle)

    def start_agent(self, rng):
        """The agent samples every 0.5 s from just after the process starts, on a grid that
        falls 0.15-0.35 s before NVML's readings."""
        if self.agent_start is None:
            lag = rng.choice([0.15, 0.2, 0.25, 0.3, 0.35])
            grid = T0 - lag
            self.agent_start = grid + AGENT_INTERVAL * math.ceil((self.start + 0.6 - grid)
                                                                 / AGENT_INTERVAL)

    def feed_time(self, line_time):
        """The agent's last sample at least 0.1 s before NVML's reading."""
        k = math.floor((line_time - 0.1 - self.agent_start) / AGENT_INTERVAL)
        return self.agent_start + max(0, k) * AGENT_INTERVAL

    def agent_ceil(self, t):
        """The first agent sample at or after `t`."""
        k = math.ceil((t - self.agent_start) / AGENT_INTERVAL - 1e-9)
        return self.agent_start + k * AGENT_INTERVAL

    def seq(self, t):
        # A stepped job's agent also numbers its step-end readings: a finer count.
        unit = 0.05 if self.step_secs is not None else AGENT_INTERVAL
        return int((t - self.agent_start) / unit + 1e-6)

    def advance(self, rng, prev_time, line_time):
        """The process at this line: its feed statistics, NVML's `used`, and the truth."""
        self.start_agent(rng)
        tf = self.feed_time(line_time)
        idle = self.idle_at(tf) and self.last is not None
        base = max(0.0, total(self.live, tf))
        if idle:  # nothing runs: the tensors stay as they were
            live = self.last[0]["allocated"]
            inactive = self.last[0]["inactive_split"]
        elif base > 0 and self.step_secs is not None:
            phase = ((tf - self.step_from) / self.step_secs) % 1.0 if tf >= self.step_from else 0.0
            live = base + phase * self.step_amp + rng.gauss(0, self.noise)
            live = max(0, round_down(live, 512))
            inactive = self.frag_level * rng.uniform(0.5, 1.5) + max(0.0, total(self.frag, tf))
            inactive = round_down(inactive, 512)
        elif base > 0:
            live = base + rng.uniform(0, self.step_amp) + rng.gauss(0, self.noise)
            live = max(0, round_down(live, 512))
            inactive = self.frag_level * rng.uniform(0.5, 1.5) + max(0.0, total(self.frag, tf))
            inactive = round_down(inactive, 512)
        else:
            live = inactive = 0
        self.grow_pool(rng, prev_time, line_time, tf, live, inactive, idle)
        cached = self.pool - live - inactive
        assert cached >= 0, (self.pid, line_time, self.pool, live, inactive)
        retries = int(sum(max(0.0, (min(tf, end) - begin) / 60.0 * per_min)
                          for begin, end, per_min in self.retries))
        if idle:
            largest = self.last[0]["largest_free_block"]
        else:
            # Split remnants are many small pieces; unsplit cache comes in segments.
            largest_cached = round_down(cached * rng.uniform(0.2, 0.8), 2 * MiB)
            largest_split = round_down(min(inactive * rng.uniform(0.04, 0.12),
                                           rng.uniform(96, 640) * MiB), 512)
            largest = max(largest_cached, largest_split)
        top = base + self.step_amp
        if self.peak_counts_jitter:
            # The counter sees every allocation, not only the sampled ones: the jitter's
            # highest too, as much of it as the pool grew to hold (see grow_pool).
            top += 4 * self.noise
        self.peak_allocated = max(self.peak_allocated, live,
                                  min(round_down(top, 512), self.pool))
        self.peak_reserved = max(self.peak_reserved, self.pool)
        if not idle and rng.random() < 0.02:  # a cuBLAS/cuDNN workspace comes and goes
            self.outside_wobble = rng.choice([0, 0, 2, 4, 8, 32]) * MiB
        outside = 0
        if self.pool > 0:
            outside = round_down(max(0.0, total(self.outside, line_time)), 2 * MiB)
            outside += self.outside_wobble
        stats = {
            "index": 0,
            "seq": self.seq(tf),
            "time": round(tf, 3),
            "allocated": live,
            "reserved": self.pool,
            "inactive_split": inactive,
            "active": live,
            "peak_allocated": self.peak_allocated,
            "peak_reserved": self.peak_reserved,
            "alloc_retries": retries,
            "ooms": sum(1 for o in self.ooms if o[0] <= tf),
            "device_allocs": self.device_allocs + retries,
            "device_frees": self.device_frees + retries + retries // 3,
            "largest_free_block": largest,
            "reserved_since": round(self.pool_since, 3),
        }
        if self.unmeasured_block:
            stats["largest_free_block"] = None
            stats["unreported"] = {"largest_free_block": "not measured yet"}
        if self.async_pool:
            # XLA's cuda_async: live tensors and their peak, no pool figure (the agent's
            # _jax.py): NVML's used still holds the pool the driver keeps for it.
            reason = "not reported by XLA's cuda_async allocator"
            stats["unreported"] = {}
            for key in ("reserved", "peak_reserved", "largest_free_block"):
                stats[key] = None
                stats["unreported"][key] = reason
            stats["reserved_since"] = None
            for key in ("inactive_split", "alloc_retries", "device_allocs", "device_frees"):
                stats[key] = None
                stats["unreported"][key] = "not in jax's memory_stats()"
        if self.step_secs is not None:
            prev_tf = self.last[0]["time"] if self.last is not None else tf - (line_time - prev_time)
            self.step_readings = self.step_end_readings(rng, prev_tf, tf)
            for reading in self.step_readings:
                reading["reserved"] = self.pool
                reading["peak_allocated"] = self.peak_allocated
            stats["step"] = self.steps_done(tf)
        used = self.context + outside + self.pool
        truth = {"context": self.context, "outside_pool": outside, "live": live,
                 "fragmented": inactive, "cached": cached}
        self.last = (stats, used, truth)
        return self.last

    def grow_pool(self, rng, prev_time, line_time, tf, live, inactive, idle):
        """The caching allocator's pool: grows to what the last interval needed (the live
        peak within a step, the most the splits reach, the story's extra cache; not this
        sample's own jitter, or the pool would creep up record by record), and keeps it."""
        span = [prev_time + (line_time - prev_time) * f for f in (0.0, 0.33, 0.66, 1.0)]
        top = max(max(0.0, total(self.live, s)) for s in span)
        need = 0
        if top > 0:
            splits = 1.5 * self.frag_level + max(0.0, total(self.frag, tf))
            need = top + self.step_amp + 4 * self.noise + splits + total(self.cache, tf)
            need = max(need, live + inactive, self.floor)
        size = None
        if self.breathe and need > 0:
            size = round_up(need + max(0.0, total(self.breathe, tf)), 2 * MiB)
            size = None if size == self.pool else size
        elif need > self.pool:
            size = round_up(need, 2 * MiB) + rng.choice([0, 2, 2, 20, 64]) * MiB
        elif self.pool > 0 and not idle and rng.random() < self.growth_odds:
            size = self.pool + rng.choice([2, 20, 20, 64]) * MiB  # a rare new shape
        if size is not None:
            segments = max(1, abs(size - self.pool) // (64 * MiB))
            if size > self.pool:
                self.device_allocs += min(segments, 40)
            else:
                self.device_frees += min(segments, 40)
            self.pool = size
            # It changed between the previous reading and this feed sample.
            change = rng.uniform(prev_time, tf - 0.05) if tf - 0.05 > prev_time else tf
            self.pool_since = min(self.agent_ceil(change), tf)
        if self.pool_since is None:
            self.pool_since = self.agent_start

    def sm_util(self, rng, t):
        if self.idle_at(t):
            low, high = self.idle_sm
            return rng.randint(low, high) if high > 0 else 0
        if self.pool == 0 or rng.random() < 0.02:
            return 0  # loading, or a data-loader stall
        low, high = self.sm
        return max(0, min(100, int(rng.gauss((low + high) / 2, (high - low) / 4))))

    def oom_reports_since(self, rng, prev_time, line_time, stats, free):
        """The OOM reports received since the previous line, plus the latest: what a feed
        record holds."""
        fresh = []
        for when, klass, requested, reported in self.ooms:
            if not (prev_time < when <= line_time) or not reported:
                continue
            aggregate = (stats["reserved"] - stats["allocated"]) + free
            if requested is None and klass == "capacity":
                # More than is free in all: the device cannot hold it.
                requested = round_up(aggregate + rng.uniform(0.5, 2.5) * GiB, 2 * MiB)
            elif requested is None:
                # Above every free block and above what freeing the unsplit cache and
                # retrying could give, below the free memory in all.
                cached = stats["reserved"] - stats["allocated"] - stats["inactive_split"]
                low = max(stats["largest_free_block"], free + cached) + 256 * MiB
                requested = round_up(low + (aggregate - low) * rng.uniform(0.02, 0.1),
                                     2 * MiB)
                assert low < requested < aggregate, (self.pid, when)
            seq = self.seq(when)
            fresh.append({
                "time": round(when, 3),
                "seq": seq,
                "index": 0,
                "requested": requested,
                "device_free": free,
                "device_total": self.gpu.total,
                "stats": dict(stats, time=round(when, 3), seq=seq),
            })
        if fresh:
            self.oom_reports = fresh
            if self.first_report is None:
                self.first_report = fresh[0]
        if self.oom_once:
            return fresh
        return fresh or self.oom_reports[-1:]

    def feed_record(self, stats, ooms, closed):
        connected_at = max(T0 - 1.0, self.agent_start)
        samples = max(1, int(round((stats["time"] - connected_at) / AGENT_INTERVAL)))
        hello = {
            "pid": self.pid,
            "time": round(self.agent_start, 3),
            "started": round(self.agent_start, 3),
            "interval": AGENT_INTERVAL,
            "framework": "jax" if self.async_pool else "torch",
            "framework_version": "0.4.35" if self.async_pool else "2.5.1+cu124",
            "backend": "cuda_async" if self.async_pool else "native",
            "devices": [{"index": 0, "uuid": self.gpu.bare_uuid,
                         "pci_bus_id": self.gpu.pci_bus_id}],
        }
        if self.report_context:
            # Read by the agent right after CUDA init, its pool empty: the context alone.
            hello["devices"][0]["context"] = {"bytes": self.context,
                                              "time": round(self.listed_from + 0.1, 3),
                                              "reserved": 0, "method": "nvml_process_used"}
        state = {"state": "connected"}
        if closed:
            state = {"state": "closed", "reason": "the agent closed the connection"}
        return {
            "socket": "/tmp/strata-%d/%d.sock" % (UID, self.pid),
            "found_via": "feed_dir",
            "peer": {"pid": self.pid, "uid": UID, "gid": UID},
            "nspid": self.pid,
            "state": state,
            "hello": hello,
            "devices": [{"latest": stats, "earlier": list(self.step_readings)}],
            "ooms": ooms,
            "counters": {"lines": samples + 1 + len(self.oom_reports), "samples": samples,
                         "oversized": 0, "malformed": 0, "unknown_version": 0,
                         "unknown_type": 0, "invalid": 0, "rate_limited": 0, "floods": 0},
            "connected_at": round(connected_at, 3),
            "last_heard": stats["time"],
        }


def process_entry(proc, rng, line_time, used, truth, alive):
    entry = {
        "pid": proc.pid,
        "device_uuid": proc.gpu.uuid,
        "used": used,
        "kind": "compute",
        "visible": True,
        "proc_state": rng.choice("RRRS"),
        "start_time": ticks(proc.start),
        "user": proc.user,
        "command": proc.command,
        "executable": proc.executable,
        "sm_util": None,
    }
    if alive:
        entry["sm_util"] = proc.sm_util(rng, line_time)
        if proc.idle_at(line_time):
            entry["proc_state"] = "S"
    elif proc.after == "zombie":  # /proc has no such pid: nothing of it is known
        entry.update(visible=False, proc_state=None, start_time=None, user=None, command=None,
                     executable=None)
    else:  # defunct: /proc still has it, as Z, with no command line or executable
        entry.update(proc_state="Z", command=None, executable=None)
    if proc.fed:
        entry["layers"] = dict(truth, unattributed=None)
    else:
        entry["layers"] = {"context": None, "outside_pool": None, "live": None,
                           "fragmented": None, "cached": None, "unattributed": used}
    return entry


def render(gpus, procs, minutes, rng):
    """The story as recorded lines (dicts), one every 5 s."""
    lines = []
    prev_time = T0 - INTERVAL
    for k in range(int(minutes * 60 / INTERVAL) + 1):
        line_time = round(T0 + k * INTERVAL + rng.gauss(0, 0.01), 3)
        held = {}
        busy = {}
        listed = []
        for proc in procs:
            if not proc.listed(line_time):
                continue
            alive = proc.alive(line_time)
            if alive:
                stats, used, truth = proc.advance(rng, prev_time, line_time)
            else:
                stats, used, truth = proc.last
            entry = process_entry(proc, rng, line_time, used, truth, alive)
            held[proc.gpu.uuid] = held.get(proc.gpu.uuid, 0) + used
            busy[proc.gpu.uuid] = max(busy.get(proc.gpu.uuid, 0), entry["sm_util"] or 0)
            listed.append((proc, entry, stats, alive))
        gpu_entries, free_of = [], {}
        for g in gpus:
            migs = []
            for m in g.migs:
                m_used = held.get(m.uuid, 0) + round_down(max(0.0, total(m.other, line_time)),
                                                          2 * MiB)
                m_free = m.total - m_used
                assert m_free > 0, (line_time, m.uuid)
                free_of[m.uuid] = m_free
                migs.append({
                    "uuid": m.uuid,
                    "profile": m.profile,
                    "gpu_instance_id": m.gpu_instance_id,
                    "compute_instance_id": 0,
                    "memory": {"total": m.total, "used": m_used, "free": m_free},
                    "processes_known": True,
                })
            used = (held.get(g.uuid, 0) + sum(m["memory"]["used"] for m in migs)
                    + round_down(max(0.0, total(g.other, line_time)), 2 * MiB))
            free = g.total - g.driver_reserved - used
            assert free > 0, (line_time, g.index)
            free_of[g.uuid] = free
            util = max([busy.get(g.uuid, 0)] + [busy.get(m.uuid, 0) for m in g.migs])
            gpu_entries.append({
                "index": g.index,
                "uuid": g.uuid,
                "name": g.name,
                "pci_bus_id": g.pci_bus_id,
                "memory": {"total": g.total, "used": used, "free": free,
                           "driver_reserved": g.driver_reserved},
                "utilization_gpu": max(0, min(100, util + rng.randint(-3, 2))) if util else 0,
                "mig_mode": bool(g.migs),
                "lost": False,
                "processes_known": True,
                "mig": migs,
            })
        feeds = []
        for proc, _, stats, alive in listed:
            if not proc.fed:
                continue
            if alive:
                ooms = proc.oom_reports_since(rng, prev_time, line_time, stats,
                                              free_of[proc.gpu.uuid])
            else:
                ooms = [] if proc.oom_once else proc.oom_reports[-1:]
            feeds.append(proc.feed_record(stats, ooms, closed=not alive))
        # The closed feeds of processes that exited, kept a while after NVML stopped
        # listing them.
        for proc in procs:
            if (proc.fed and proc.feed_kept > 0 and proc.exit is not None
                    and proc.last is not None and not proc.listed(line_time)
                    and proc.exit <= line_time < proc.exit + proc.feed_kept):
                feeds.append(proc.feed_record(proc.last[0], [], closed=True))
        lines.append({
            "time": line_time,
            "interval": INTERVAL,
            "host": "trace",
            "driver_version": "550.90.07",
            "cuda_driver_version": "12.4",
            "host_pid_namespace": True,
            "gpus": gpu_entries,
            "processes": [entry for _, entry, _, _ in listed],
            "feeds": feeds,
        })
        prev_time = line_time
    return lines


# Labels: one entry per event a correct monitor must flag.


def _who(proc_or_gpu):
    if isinstance(proc_or_gpu, Proc):
        return proc_or_gpu.pid, proc_or_gpu.gpu.uuid
    return None, proc_or_gpu.uuid


def climb(cause, proc_or_gpu, start, rate, **extra):
    """A climb; `bytes_per_step` and `step_secs` for a job that reports steps."""
    pid, uuid = _who(proc_or_gpu)
    return dict({"kind": "climb", "cause": cause, "pid": pid, "device_uuid": uuid,
                 "start": round(start, 3), "rate_mib_per_min": float(rate)}, **extra)


def event(kind, proc_or_gpu, start, **extra):
    pid, uuid = _who(proc_or_gpu)
    return dict({"kind": kind, "pid": pid, "device_uuid": uuid, "start": round(start, 3)},
                **extra)


def derived(line):
    """A line in the snapshot's derived form, as older recordings kept it: each fed process's
    allocator figures in its `feed` (matched to NVML), no raw `feeds`."""
    out = dict(line)
    feeds = out.pop("feeds")
    out["schema"] = "strata.snapshot/1"
    processes = []
    for entry in out["processes"]:
        entry = dict(entry)
        for i, record in enumerate(feeds):
            if record["peer"]["pid"] != entry["pid"]:
                continue
            hello = record["hello"]
            entry["feed"] = dict({"framework": hello["framework"],
                                  "framework_version": hello["framework_version"],
                                  "backend": hello["backend"], "feed": i},
                                 **record["devices"][0]["latest"])
        processes.append(entry)
    out["processes"] = processes
    return out


def write(directory, name, story):
    """Tells one story (seeded by its name) and writes its trace and labels. A story may
    return a seventh element, its options: `shape` ("derived": the lines in the snapshot's
    derived form), `layers` (written into the labels: "exact", every context and
    memory outside the pool within 5 % of the truth) and `never` (written into the labels:
    finding kinds that must not be raised on the trace at all)."""
    rng = random.Random(zlib.crc32(name.encode()))
    told = story(rng)
    description, minutes, gpus, procs, expect, normal = told[:6]
    options = told[6] if len(told) > 6 else {}
    assert normal == (not any(e["kind"] in ("climb", "oom_forecast") for e in expect)), name
    lines = render(gpus, procs, minutes, rng)
    if options.get("shape") == "derived":
        lines = [derived(line) for line in lines]
    # An expected OOM whose evidence must keep its report's figures: those of its first.
    for e in expect:
        if e.get("evidence") == "from_report":
            proc = next(p for p in procs if p.pid == e["pid"])
            r = proc.first_report
            e["evidence"] = {k: r[k] for k in ("requested", "device_free", "device_total")}
    text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    path = os.path.join(directory, name + ".jsonl.gz")
    # mtime 0 and no file name in the header: the same story gives the same bytes.
    with open(path, "wb") as out:
        out.write(gzip.compress(text.encode(), compresslevel=9, mtime=0))
    labels = {"description": description, "minutes": minutes, "expect": expect,
              "normal": normal}
    if "layers" in options:
        labels["layers"] = options["layers"]
    if "never" in options:
        labels["never"] = options["never"]
    with open(os.path.join(directory, name + ".labels.json"), "w") as out:
        json.dump(labels, out, indent=2)
        out.write("\n")
    return path, len(text)

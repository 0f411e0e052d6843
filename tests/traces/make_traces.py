#!/usr/bin/env python3
"""Writes strata's labelled corpus: tests/traces/<name>.jsonl.gz and <name>.labels.json.

Each trace is a recording as `strata analyze FILE` reads it (JSON lines, one raw node sample
every 5 s, the fields of `src/sample/mod.rs` `NodeSample`), gzipped; its labels name every
event a correct monitor must flag. The stories are below; the model that renders them, and
what it keeps consistent, is in tracegen.py. Standard library only, deterministic: each
story draws from its own generator, seeded by its name.

    python3 tests/traces/make_traces.py                  # every trace
    python3 tests/traces/make_traces.py leak_live_85     # some
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tracegen import (  # noqa: E402
    GiB, M, MiB, T0, Gpu, Mig, Proc, climb, constant, event, leak, ramp, saw, settle, step,
    total, write,
)

# The stories. Each takes its generator and returns (description, minutes, GPUs, processes,
# expected events, normal).

STORIES = {}


def story(fn):
    STORIES[fn.__name__] = fn
    return fn


def trainer_warmup(at, params=14 * GiB, optimizer=28 * GiB, activations=6 * GiB):
    """Live tensors of a training job started at `at`: weights, then optimizer state at the
    first step, then the steady activations and their cache."""
    return [
        ramp(at + 10, 25, params),
        step(at + 45, optimizer, 6),
        settle(at + 50, 40, activations),
    ]


def running(level):
    """Live tensors of a job already at its plateau when the recording starts."""
    return [constant(level)]


@story
def warmup_plateau(rng):
    g = Gpu(rng, 0)
    p = Proc(41230, g, M(0.3), live=trainer_warmup(M(0.3)), step_amp=3 * GiB, noise=40 * MiB,
             outside=[step(M(1.2), 1536 * MiB)])
    return ("A training job starts, loads its weights, builds optimizer state at its first "
            "step and settles within a few minutes into a plateau with a 3 GiB saw-tooth "
            "within each step.", 40, [g], [p], [], True)


@story
def warmup_staged_plateau(rng):
    g = Gpu(rng, 0, "a100")
    live = trainer_warmup(M(0.5), params=6 * GiB, optimizer=12 * GiB, activations=10 * GiB)
    live.append(step(M(9), 3 * GiB, 20))  # the first evaluation pass keeps its buffers
    p = Proc(52001, g, M(0.5), live=live, step_amp=2 * GiB, noise=60 * MiB,
             outside=[step(M(1.0), 768 * MiB)])
    return ("A warm-up in stages: weights, optimizer state, a slower activation cache "
            "(time constant 40 s), then a one-off step at the first eval; a plateau after.",
            45, [g], [p], [], True)


@story
def sawtooth_20s_deep(rng):
    g = Gpu(rng, 0)
    p = Proc(23011, g, T0 - 3600, live=running(22 * GiB) + [saw(T0 - 3600, 20, 12 * GiB)],
             step_amp=512 * MiB, noise=30 * MiB, outside=[constant(1024 * MiB)])
    return ("A job already running: live tensors saw-tooth by 12 GiB every 20 s (gradient "
            "accumulation), sampled every 5 s; reserved flat.", 35, [g], [p], [], True)


@story
def sawtooth_90s(rng):
    g = Gpu(rng, 0)
    p = Proc(23412, g, T0 - 1800, live=running(18 * GiB) + [saw(T0 - 1800, 90, 5 * GiB)],
             step_amp=1 * GiB, noise=30 * MiB, outside=[constant(512 * MiB)])
    return ("Live tensors rise by 5 GiB over 90 s and drop back (an evaluation cache freed "
            "each cycle); reserved flat.", 35, [g], [p], [], True)


@story
def sawtooth_5min(rng):
    g = Gpu(rng, 0)
    p = Proc(30777, g, T0 - 7200, live=running(20 * GiB) + [saw(T0 - 7200, 300, 2 * GiB)],
             step_amp=256 * MiB, noise=20 * MiB, outside=[constant(512 * MiB)])
    return ("A slow saw-tooth: live tensors climb 2 GiB over 5 minutes (about 400 MiB/min) "
            "and drop back, again and again: no leak.", 50, [g], [p], [], True)


@story
def sawtooth_3min_two_gpus(rng):
    g0, g1 = Gpu(rng, 0), Gpu(rng, 1)
    procs = []
    for i, (g, pid) in enumerate(((g0, 61200), (g1, 61201))):
        live = running(26 * GiB) + [saw(T0 - 900, 180, 4 * GiB, phase=7 * i)]
        procs.append(Proc(pid, g, T0 - 900, command="python -m torch.distributed.run "
                          "--nproc-per-node 2 train.py --rank %d" % i,
                          live=live, step_amp=1536 * MiB, noise=40 * MiB,
                          outside=[constant(2560 * MiB)]))
    return ("Data-parallel job on two GPUs, one process each: live tensors saw-tooth by "
            "4 GiB every 3 minutes on both, with NCCL's 2.5 GiB outside the pool.", 40,
            [g0, g1], procs, [], True)


@story
def sawtooth_45s_shallow(rng):
    g = Gpu(rng, 0, "l40s")
    p = Proc(8812, g, T0 - 600, command="python serve.py --model mistral-7b",
             live=running(16 * GiB) + [saw(T0 - 600, 45, 768 * MiB)], step_amp=128 * MiB,
             noise=16 * MiB, outside=[constant(256 * MiB)], sm=(20, 60))
    return ("An inference server on an L40S: a shallow 768 MiB saw-tooth every 45 s "
            "(batches of requests), reserved flat.", 30, [g], [p], [], True)


@story
def noisy_plateau(rng):
    g = Gpu(rng, 0)
    p = Proc(19876, g, T0 - 5400, live=running(30 * GiB), step_amp=6 * GiB, noise=400 * MiB,
             frag_level=900 * MiB, outside=[constant(1024 * MiB)])
    return ("A plateau with heavy noise: live tensors anywhere within 6 GiB of the floor "
            "at each sample, plus 400 MiB of jitter; splits jitter too.", 45, [g], [p], [],
            True)


@story
def noisy_plateau_unfed(rng):
    g = Gpu(rng, 0)
    # No feed: NVML sees the pool as one number, which moves as its cache grows and is
    # released (empty_cache between requests).
    wobble = [saw(T0 - 600, 37, 900 * MiB), saw(T0 - 600, 61, 700 * MiB, phase=13)]
    p = Proc(7421, g, T0 - 600, command="python infer.py --batch dynamic", fed=False,
             live=running(12 * GiB), step_amp=1 * GiB, noise=100 * MiB, growth_odds=0.0,
             breathe=wobble)
    return ("A process without a feed whose NVML usage jitters by about 1.5 GiB around a "
            "flat level (its cache grows and is released).", 35, [g], [p], [], True)


@story
def single_step(rng):
    g = Gpu(rng, 0)
    p = Proc(40404, g, T0 - 3600, live=running(24 * GiB) + [step(M(15), 7 * GiB, 12)],
             step_amp=2 * GiB, noise=50 * MiB, outside=[constant(1024 * MiB)])
    return ("A plateau, then one step of 7 GiB at minute 15 (a larger sequence length), "
            "then flat again.", 40, [g], [p], [], True)


@story
def single_step_outside(rng):
    g = Gpu(rng, 0)
    p = Proc(40777, g, T0 - 3600, live=running(20 * GiB), step_amp=1 * GiB, noise=40 * MiB,
             outside=[constant(512 * MiB), step(M(12), 3 * GiB, 4)])
    return ("A plateau, then NCCL creates a new communicator at minute 12: 3 GiB outside "
            "the pool in one step, flat afterwards.", 35, [g], [p], [], True)


@story
def restart(rng):
    g = Gpu(rng, 0)
    a = Proc(50100, g, M(0.2), live=trainer_warmup(M(0.2)), step_amp=2 * GiB,
             noise=40 * MiB, outside=[step(M(1), 1024 * MiB)], exit=M(17.4))
    b = Proc(50388, g, M(17.6), live=trainer_warmup(M(17.6)), step_amp=2 * GiB,
             noise=40 * MiB, outside=[step(M(18.4), 1024 * MiB)])
    return ("A training job warms up, crashes at minute 17.4 and is restarted by its "
            "scheduler with the same command: a new pid and start time, memory back to "
            "zero, the same warm-up again.", 40, [g], [a, b], [], True)


@story
def restart_twice(rng):
    g = Gpu(rng, 0, "a100")
    cmd = "python finetune.py --config lora.yaml"
    procs = []
    for i, (pid, at, end) in enumerate(((9001, M(0.3), M(11)), (9217, M(11.3), M(26)),
                                        (9460, M(26.2), None))):
        procs.append(Proc(pid, g, at, command=cmd,
                          live=trainer_warmup(at, 8 * GiB, 4 * GiB, 9 * GiB),
                          step_amp=2 * GiB, noise=60 * MiB, exit=end))
    return ("A fine-tune restarted twice (minutes 11 and 26), each time a new pid warming "
            "up from nothing to the same plateau.", 45, [g], procs, [], True)


@story
def pid_reuse(rng):
    g = Gpu(rng, 0)
    a = Proc(31337, g, T0 - 1200, live=running(30 * GiB), step_amp=2 * GiB, noise=50 * MiB,
             outside=[constant(1024 * MiB)], exit=M(14))
    b = Proc(31337, g, M(14.5), command="python eval.py --ckpt last.pt",
             live=[ramp(M(14.5) + 8, 30, 9 * GiB), settle(M(14.5) + 40, 30, 3 * GiB)],
             step_amp=1 * GiB, noise=30 * MiB)
    return ("PID 31337 ends at minute 14 at 30 GiB live; 30 s later a new process gets the "
            "same PID (a new start time, a new feed with counters from zero) and warms up to "
            "12 GiB.", 35, [g], [a, b], [], True)


@story
def leak_live_20(rng):
    g = Gpu(rng, 0)
    p = Proc(27182, g, T0 - 2400, live=running(24 * GiB) + [leak(M(6), 20)],
             step_amp=1 * GiB, noise=30 * MiB, outside=[constant(1024 * MiB)])
    return ("A slow leak of live tensors, 20 MiB/min from minute 6 (a list of losses kept "
            "on the device), on a 1 GiB in-step saw-tooth.", 45, [g], [p],
            [climb("live", p, M(6), 20)], False)


@story
def leak_live_35_noisy(rng):
    g = Gpu(rng, 0)
    p = Proc(27999, g, T0 - 2400, live=running(28 * GiB) + [leak(M(10), 35)],
             step_amp=2 * GiB, noise=80 * MiB, outside=[constant(1024 * MiB)])
    return ("A 35 MiB/min live leak from minute 10 under a 2 GiB in-step saw-tooth and "
            "80 MiB of jitter.", 50, [g], [p], [climb("live", p, M(10), 35)], False)


@story
def leak_live_50_late(rng):
    g = Gpu(rng, 0)
    p = Proc(33001, g, M(0.5), live=trainer_warmup(M(0.5)) + [leak(M(25), 50)],
             step_amp=2 * GiB, noise=40 * MiB, outside=[step(M(1.2), 1024 * MiB)])
    return ("Warm-up, a plateau for 20 minutes, then live tensors climb 50 MiB/min from "
            "minute 25.", 50, [g], [p], [climb("live", p, M(25), 50)], False)


@story
def leak_live_85(rng):
    g = Gpu(rng, 0)
    p = Proc(41230, g, T0 - 3600, live=running(22 * GiB) + [leak(M(10), 85)],
             step_amp=3 * GiB, noise=60 * MiB, outside=[constant(1536 * MiB)])
    return ("Live tensors climb 85 MiB/min from minute 10 on a 3 GiB in-step saw-tooth: "
            "references kept across steps.", 40, [g], [p], [climb("live", p, M(10), 85)],
            False)


@story
def leak_live_200_warmup(rng):
    g = Gpu(rng, 0)
    at = M(0.5)
    p = Proc(44871, g, at, live=trainer_warmup(at, 10 * GiB, 20 * GiB, 4 * GiB)
             + [leak(M(3), 200)], step_amp=2 * GiB, noise=50 * MiB,
             outside=[step(M(1.2), 1024 * MiB)])
    return ("A leak of 200 MiB/min that starts at minute 3, while the warm-up's tail is "
            "still settling.", 35, [g], [p], [climb("live", p, M(3), 200)], False)


@story
def leak_live_500(rng):
    g = Gpu(rng, 0)
    p = Proc(45500, g, T0 - 1800, live=running(16 * GiB) + [leak(M(15), 500)],
             step_amp=1 * GiB, noise=40 * MiB, outside=[constant(768 * MiB)])
    return ("A fast leak: 500 MiB/min of live tensors from minute 15 (a cache keyed by "
            "sequence that is never evicted).", 35, [g], [p],
            [climb("live", p, M(15), 500)], False)


@story
def leak_live_120_stops(rng):
    g = Gpu(rng, 0, "a100")
    p = Proc(46120, g, T0 - 1800, live=running(20 * GiB) + [leak(M(8), 120, M(26))],
             step_amp=1536 * MiB, noise=50 * MiB, outside=[constant(768 * MiB)])
    return ("Live tensors climb 120 MiB/min from minute 8 to minute 26 (about 2.1 GiB), "
            "then hold: the climb must be flagged while it lasts.", 40, [g], [p],
            [climb("live", p, M(8), 120)], False)


@story
def leak_on_sawtooth(rng):
    g = Gpu(rng, 0)
    p = Proc(47001, g, T0 - 2400,
             live=running(20 * GiB) + [saw(T0 - 2400, 60, 3 * GiB), leak(M(12), 60)],
             step_amp=512 * MiB, noise=30 * MiB, outside=[constant(1024 * MiB)])
    return ("A 3 GiB saw-tooth every 60 s whose troughs rise 60 MiB/min from minute 12: "
            "a leak under a cache cycle.", 40, [g], [p], [climb("live", p, M(12), 60)],
            False)


@story
def leak_on_slow_sawtooth(rng):
    g = Gpu(rng, 0)
    p = Proc(47333, g, T0 - 2400,
             live=running(18 * GiB) + [saw(T0 - 2400, 150, 1536 * MiB), leak(M(8), 30)],
             step_amp=256 * MiB, noise=20 * MiB, outside=[constant(512 * MiB)])
    return ("A saw-tooth of 1.5 GiB every 2.5 minutes with a 30 MiB/min leak under it "
            "from minute 8.", 45, [g], [p], [climb("live", p, M(8), 30)], False)


@story
def leak_one_rank(rng):
    g0, g1 = Gpu(rng, 0), Gpu(rng, 1)
    procs = []
    for i, (g, pid) in enumerate(((g0, 70100), (g1, 70101))):
        live = running(30 * GiB)
        if i == 1:
            live.append(leak(M(9), 100))
        procs.append(Proc(pid, g, T0 - 1200, command="python train.py --local-rank %d" % i,
                          live=live, step_amp=2 * GiB, noise=50 * MiB,
                          outside=[constant(2 * GiB)]))
    return ("Two ranks of one job; only rank 1 (GPU 1) leaks, 100 MiB/min from minute 9; "
            "rank 0 is flat.", 35, [g0, g1], procs,
            [climb("live", procs[1], M(9), 100)], False)


@story
def leak_after_restart(rng):
    g = Gpu(rng, 0)
    a = Proc(52210, g, T0 - 600, live=running(26 * GiB), step_amp=2 * GiB, noise=50 * MiB,
             outside=[constant(1024 * MiB)], exit=M(12))
    at = M(12.3)
    b = Proc(52977, g, at, live=trainer_warmup(at, 9 * GiB, 14 * GiB, 3 * GiB)
             + [leak(M(18), 70)], step_amp=2 * GiB, noise=50 * MiB,
             outside=[step(at + 50, 1024 * MiB)])
    return ("A job restarts at minute 12 (new pid) and warms up; the new process leaks "
            "70 MiB/min from minute 18. The restart itself is no climb.", 45, [g], [a, b],
            [climb("live", b, M(18), 70)], False)


@story
def cache_growth(rng):
    g = Gpu(rng, 0)
    p = Proc(60606, g, T0 - 1800, live=running(20 * GiB), step_amp=2 * GiB, noise=40 * MiB,
             cache=[leak(M(8), 120)], outside=[constant(1024 * MiB)])
    return ("Reserved climbs 120 MiB/min from minute 8 while live tensors stay flat: a "
            "widening distribution of shapes keeps adding segments to the cache.", 40, [g],
            [p], [climb("cached", p, M(8), 120)], False)


@story
def cache_growth_slow(rng):
    g = Gpu(rng, 0, "a100")
    p = Proc(60999, g, T0 - 1800, live=running(14 * GiB), step_amp=1 * GiB, noise=30 * MiB,
             cache=[leak(M(5), 35)], outside=[constant(512 * MiB)])
    return ("Reserved climbs 35 MiB/min from minute 5 with live tensors flat.", 45, [g], [p],
            [climb("cached", p, M(5), 35)], False)


@story
def outside_leak(rng):
    g = Gpu(rng, 0)
    p = Proc(62020, g, T0 - 1800, live=running(24 * GiB), step_amp=2 * GiB, noise=40 * MiB,
             outside=[constant(1024 * MiB), leak(M(10), 150)])
    return ("Memory outside the pool climbs 150 MiB/min from minute 10 (a custom CUDA "
            "extension's cudaMalloc never freed); the pool is flat.", 35, [g], [p],
            [climb("outside_pool", p, M(10), 150)], False)


@story
def outside_leak_slow(rng):
    g = Gpu(rng, 0)
    p = Proc(62555, g, T0 - 1800, live=running(22 * GiB), step_amp=1 * GiB, noise=30 * MiB,
             outside=[constant(2048 * MiB), leak(M(7), 25)])
    return ("Memory outside the pool climbs 25 MiB/min from minute 7 (NCCL buffers "
            "registered per new group); the pool is flat.", 45, [g], [p],
            [climb("outside_pool", p, M(7), 25)], False)


@story
def other_leak(rng):
    g = Gpu(rng, 0, other=[leak(M(6), 100)])
    p = Proc(63000, g, T0 - 1800, live=running(20 * GiB), step_amp=1 * GiB, noise=40 * MiB,
             outside=[constant(512 * MiB)])
    return ("Memory no listed process holds (a process in another container) climbs "
            "100 MiB/min from minute 6; every listed process is flat. Past 512 MiB it is "
            "unexplained usage too.", 35, [g], [p],
            [climb("no_process", g, M(6), 100), event("unexplained_usage", g, M(6 + 512 / 100))],
            False)


@story
def other_leak_slow_two_gpus(rng):
    g0 = Gpu(rng, 0)
    g1 = Gpu(rng, 1, other=[leak(M(4), 40)])
    procs = [Proc(64000 + i, g, T0 - 900, command="python train.py --local-rank %d" % i,
                  live=running(28 * GiB), step_amp=2 * GiB, noise=40 * MiB,
                  outside=[constant(2 * GiB)]) for i, g in enumerate((g0, g1))]
    return ("Two GPUs training flat; on GPU 1 memory no listed process holds climbs "
            "40 MiB/min from minute 4.", 45, [g0, g1], procs,
            [climb("no_process", g1, M(4), 40), event("unexplained_usage", g1, M(4 + 512 / 40))],
            False)


@story
def unfed_climb(rng):
    g = Gpu(rng, 0)
    p = Proc(65123, g, T0 - 1800, command="python generate.py", fed=False,
             live=running(18 * GiB) + [leak(M(10), 90)], step_amp=1 * GiB, noise=40 * MiB)
    return ("A Python process without a feed whose NVML usage climbs 90 MiB/min from "
            "minute 10: the climb cannot be split, only attributed to the process.", 35,
            [g], [p], [climb("unattributed", p, M(10), 90)], False)


@story
def unfed_climb_slow_server(rng):
    g = Gpu(rng, 0, "l40s")
    server = Proc(65900, g, T0 - 7200, command="/opt/tritonserver/bin/tritonserver "
                  "--model-repository /models", executable="/opt/tritonserver/bin/tritonserver",
                  user="triton", fed=False, live=running(9 * GiB) + [leak(M(5), 30)],
                  step_amp=256 * MiB, noise=20 * MiB, sm=(10, 40))
    p = Proc(65950, g, T0 - 600, live=running(12 * GiB), step_amp=1 * GiB, noise=30 * MiB)
    return ("An inference server (not Python, no feed) climbs 30 MiB/min from minute 5 "
            "beside a flat fed job.", 40, [g], [server, p],
            [climb("unattributed", server, M(5), 30)], False)


@story
def fragmentation_growth(rng):
    g = Gpu(rng, 0)
    p = Proc(70707, g, T0 - 1800, command="python finetune.py --variable-length",
             live=running(30 * GiB), step_amp=2 * GiB, noise=60 * MiB, frag_level=400 * MiB,
             frag=[ramp(M(8), 22 * 60, 11 * GiB)], floor=46 * GiB,
             retries=[(M(14), M(40), 9)], growth_odds=0.0, outside=[constant(512 * MiB)])
    return ("Variable-length batches: inactive splits grow from 0.4 to 11.4 GiB from "
            "minute 8 under a flat reserved pool, live flat; allocation retries rise "
            "from minute 14 (about 9 a minute). No OOM.", 40, [g], [p],
            [event("fragmentation", p, M(8)), event("alloc_retries", p, M(14))], True)


@story
def fragmentation_oom(rng):
    g = Gpu(rng, 0)
    ooms = [(M(27.3), "fragmentation", None, True), (M(31.7), "fragmentation", None, True),
            (M(34.1), "fragmentation", None, True)]
    p = Proc(71717, g, T0 - 1800, command="python finetune.py --packing off",
             live=running(44 * GiB), step_amp=3 * GiB, noise=80 * MiB, frag_level=600 * MiB,
             frag=[ramp(M(6), 20 * 60, 26 * GiB)], floor=75 * GiB,
             retries=[(M(12), M(40), 20)], ooms=ooms, growth_odds=0.0,
             outside=[constant(1024 * MiB)])
    return ("Fragmentation grows until allocations fail: inactive splits climb to 27 GiB "
            "under a flat 75 GiB pool, retries from minute 12, then three OOMs (minutes "
            "27.3, 31.7, 34.1) whose requests are below the aggregate free memory but above "
            "the largest free block. The job catches them and goes on.", 40, [g], [p],
            [event("fragmentation", p, M(6)), event("alloc_retries", p, M(12)),
             event("oom", p, M(27.3), **{"class": "fragmentation"})], True)


@story
def oom_fragmentation_counter_only(rng):
    g = Gpu(rng, 0, "a100")
    ooms = [(M(22.5), "fragmentation", None, False), (M(29.0), "fragmentation", None, False)]
    p = Proc(72002, g, T0 - 1800, command="python train_asr.py",
             live=running(40 * GiB), step_amp=3 * GiB, noise=80 * MiB, frag_level=500 * MiB,
             frag=[ramp(M(5), 15 * 60, 28 * GiB)], floor=74 * GiB,
             retries=[(M(10), M(35), 15)], ooms=ooms, growth_odds=0.0,
             outside=[constant(768 * MiB)])
    return ("Like fragmentation_oom, but the agent never delivers an OOM report: only the "
            "ooms counter rises (minutes 22.5 and 29) while inactive splits hold a third of "
            "the pool. Without the request's size the class cannot be told: uncertain (the "
            "split share is said to point to fragmentation).", 35, [g], [p],
            [event("fragmentation", p, M(5)), event("alloc_retries", p, M(10)),
             event("oom", p, M(22.5), **{"class": "uncertain"})], True)


@story
def oom_capacity(rng):
    g = Gpu(rng, 0)
    ooms = [(M(21.2), "capacity", None, True)]
    # A long-context batch at minute 21 needs more than the device holds.
    p = Proc(73003, g, T0 - 3600, command="python train.py --seq-len 32768",
             live=running(73 * GiB), step_amp=2 * GiB, noise=60 * MiB, frag_level=200 * MiB,
             ooms=ooms, cache=[constant(300 * MiB)], growth_odds=0.0,
             outside=[constant(1024 * MiB)])
    return ("Live tensors near what the device holds (75 of the 77.6 GiB left beside the "
            "context and NCCL, at the top of a step); a long batch at minute 21 asks for more than is free in all: a capacity "
            "OOM, caught; the job goes on.", 35, [g], [p],
            [event("oom", p, M(21.2), **{"class": "capacity"}), event("capacity", g, T0)],
            True)


@story
def oom_capacity_exit(rng):
    g = Gpu(rng, 0, "a100")
    at = M(0.5)
    ooms = [(M(9.0), "capacity", None, True)]
    p = Proc(73555, g, at, command="python train.py --batch-size 64",
             live=trainer_warmup(at, 16 * GiB, 32 * GiB, 22 * GiB) + [step(M(8.8), 5 * GiB, 6)],
             step_amp=1 * GiB, noise=50 * MiB, frag_level=200 * MiB, ooms=ooms,
             growth_odds=0.0, outside=[step(M(1.5), 1024 * MiB)], exit=M(9.25))
    q = Proc(73700, g, M(12), command="python train.py --batch-size 48",
             live=trainer_warmup(M(12), 16 * GiB, 32 * GiB, 14 * GiB), step_amp=1 * GiB,
             noise=50 * MiB, outside=[step(M(13), 1024 * MiB)])
    return ("A job whose batch is too large: live grows to about 76 GiB, a capacity OOM at "
            "minute 9 and the process exits 15 s later; relaunched at minute 12 with a "
            "smaller batch, which plateaus.", 35, [g], [p, q],
            [event("oom", p, M(9.0), **{"class": "capacity"}), event("capacity", g, M(8.8))],
            True)


@story
def alloc_retries_pressure(rng):
    g = Gpu(rng, 0)
    p = Proc(74404, g, T0 - 1800, command="python train.py --grad-ckpt off",
             live=running(46 * GiB), step_amp=4 * GiB, noise=80 * MiB, frag_level=800 * MiB,
             floor=74 * GiB, retries=[(M(10), M(35), 4)], growth_odds=0.0,
             outside=[constant(1024 * MiB)])
    return ("A pool near the device's size (75 of 79 GiB) and live at 46-50 GiB: from "
            "minute 10 the allocator has to free cache and retry, about 4 times a minute. "
            "No fragmentation growth, no OOM.", 35, [g], [p],
            [event("alloc_retries", p, M(10))], True)


@story
def zombie(rng):
    g = Gpu(rng, 0)
    a = Proc(80801, g, T0 - 3000, command="python preprocess.py", fed=False,
             live=running(3 * GiB), step_amp=256 * MiB, noise=10 * MiB, exit=M(10),
             after="zombie")
    b = Proc(80900, g, T0 - 3000, live=running(24 * GiB), step_amp=2 * GiB, noise=40 * MiB)
    return ("A preprocessing process dies at minute 10 but its CUDA context stays: NVML "
            "keeps listing its pid with 3.5 GiB, /proc has no such pid. A training job "
            "beside it is flat.", 30, [g], [a, b], [event("zombie_context", a, M(10))], True)


@story
def zombie_fed(rng):
    g0, g1 = Gpu(rng, 0), Gpu(rng, 1)
    a = Proc(81111, g0, T0 - 1200, command="python train.py --local-rank 0",
             live=running(30 * GiB), step_amp=2 * GiB, noise=40 * MiB,
             outside=[constant(2 * GiB)], exit=M(14), after="zombie")
    b = Proc(81112, g1, T0 - 1200, command="python train.py --local-rank 1",
             live=running(30 * GiB), step_amp=2 * GiB, noise=40 * MiB,
             outside=[constant(2 * GiB)], exit=M(14.05))
    return ("A two-rank job is killed at minute 14: rank 1's memory is released, rank 0's "
            "pid is gone but its context keeps 34 GiB (its feed closed).", 35, [g0, g1],
            [a, b], [event("zombie_context", a, M(14))], True)


@story
def zombie_defunct_pair(rng):
    g = Gpu(rng, 0)
    a = Proc(82001, g, T0 - 600, command="python worker.py --id 1", fed=False,
             live=running(1536 * MiB), step_amp=128 * MiB, noise=8 * MiB, exit=M(8),
             after="defunct")
    b = Proc(82002, g, T0 - 600, command="python worker.py --id 2", fed=False,
             live=running(2 * GiB), step_amp=128 * MiB, noise=8 * MiB, exit=M(19),
             after="zombie")
    c = Proc(82000, g, T0 - 700, command="python serve.py", live=running(16 * GiB),
             step_amp=1 * GiB, noise=30 * MiB)
    return ("Two workers of a server: one becomes defunct (state Z, never reaped) at minute "
            "8, the other's pid vanishes at minute 19; both keep their contexts.", 35, [g],
            [a, b, c], [event("zombie_context", a, M(8)), event("zombie_context", b, M(19))],
            True)


@story
def idle_holder(rng):
    g = Gpu(rng, 0)
    p = Proc(83838, g, T0 - 900, command="python -m ipykernel_launcher -f kernel.json",
             live=running(6 * GiB), step_amp=256 * MiB, noise=10 * MiB, idle=[(M(4), M(40))],
             sm=(30, 90))
    return ("A notebook kernel runs for a few minutes, then sits from minute 4 at SM 0% "
            "holding about 7 GiB.", 40, [g], [p], [event("idle_holder", p, M(4))], True)


@story
def idle_holder_beside_training(rng):
    g0, g1 = Gpu(rng, 0), Gpu(rng, 1)
    t = Proc(84000, g0, T0 - 900, live=running(30 * GiB), step_amp=2 * GiB, noise=40 * MiB,
             outside=[constant(1024 * MiB)])
    idle = Proc(84100, g1, T0 - 300, command="python debug_eval.py", fed=False,
                live=running(2 * GiB), step_amp=128 * MiB, noise=8 * MiB,
                idle=[(M(7), M(40))], sm=(40, 80))
    small = Proc(84200, g1, T0 - 300, command="python probe.py", fed=False,
                 live=running(96 * MiB), step_amp=0, noise=1 * MiB, idle=[(T0 - 300, M(40))],
                 context_mib=404)
    return ("A trainer on GPU 0; on GPU 1 an eval script without a feed goes idle at minute "
            "7 holding 2.5 GiB, beside a probe that has been idle all along holding only "
            "0.5 GiB (under the 1 GiB bar).", 35, [g0, g1], [t, idle, small],
            [event("idle_holder", idle, M(7))], True)


@story
def mixed_node_normal(rng):
    g0, g1 = Gpu(rng, 0), Gpu(rng, 1)
    at = M(2)
    a = Proc(90001, g0, at, command="python train.py --local-rank 0",
             live=trainer_warmup(at) + [saw(at, 120, 2 * GiB)], step_amp=2 * GiB,
             noise=50 * MiB, outside=[step(at + 60, 2 * GiB)])
    b = Proc(90002, g1, at, command="python train.py --local-rank 1",
             live=trainer_warmup(at) + [saw(at, 120, 2 * GiB, phase=11)], step_amp=2 * GiB,
             noise=50 * MiB, outside=[step(at + 60, 2 * GiB)])
    c = Proc(90100, g1, T0 - 4000, command="python serve.py --port 8000", fed=False,
             live=running(5 * GiB), step_amp=512 * MiB, noise=30 * MiB, sm=(5, 30))
    return ("A busy node: a two-rank job starts at minute 2 and warms up with a 2-minute "
            "saw-tooth, an inference server without a feed shares GPU 1. Nothing leaks.",
            45, [g0, g1], [a, b, c], [], True)


# The defects an independent labelled set found (each fails on the detectors before them),
# time to OOM, and jobs that report their training steps.


@story
def oom_fragmentation_unmeasured_block(rng):
    g = Gpu(rng, 0, "l40s")
    ooms = [(M(20.2), "fragmentation", 11 * GiB, True)]
    p = Proc(75010, g, T0 - 1800, command="python train_detector.py --multiscale",
             live=running(22 * GiB), step_amp=1 * GiB, noise=40 * MiB, frag_level=600 * MiB,
             frag=[constant(5400 * MiB)], floor=36 * GiB, ooms=ooms, growth_odds=0.0,
             outside=[constant(768 * MiB)], unmeasured_block=True)
    return ("An L40S: 22 GiB live in a 36 GiB pool (about 6 GiB in split pieces, 7 GiB "
            "cached), 7 GiB free. At minute 20 it asks for 11 GiB and fails; the agent has "
            "not measured the largest free block. Live + request fits in the pool plus the "
            "free memory: fragmentation, never capacity.", 30, [g], [p],
            [event("oom", p, M(20.2), **{"class": "fragmentation"}),
             event("fragmentation", p, T0)], True)


@story
def oom_report_once(rng):
    g = Gpu(rng, 0, "a100")
    ooms = [(M(13.6), "capacity", None, True)]
    p = Proc(75220, g, T0 - 2400, command="python train.py --seq-len 16384",
             live=running(66 * GiB), step_amp=3 * GiB, noise=60 * MiB, frag_level=300 * MiB,
             ooms=ooms, cache=[constant(400 * MiB)], growth_odds=0.0,
             outside=[constant(1536 * MiB)], oom_once=True)
    return ("A capacity OOM at minute 13.6 whose report the feed carries only on the next "
            "line; the ooms counter says it after. The finding's evidence must keep the "
            "report's request, free memory and total for as long as it is shown.", 30, [g],
            [p], [event("oom", p, M(13.6), **{"class": "capacity", "evidence": "from_report"})],
            True)


@story
def fragmentation_slow_retries(rng):
    g = Gpu(rng, 0, "a100")
    p = Proc(75400, g, T0 - 600, command="python finetune.py --dynamic-shapes",
             live=running(30 * GiB), step_amp=2 * GiB, noise=50 * MiB, frag_level=400 * MiB,
             frag=[leak(T0 - 300, 186)], floor=52 * GiB, retries=[(M(12), M(40), 5)],
             growth_odds=0.0, outside=[constant(1024 * MiB)])
    return ("A 52 GiB pool whose split pieces grow slowly, about 0.35 points of the pool a "
            "minute (never 5 points in 10 minutes), past 10 % by minute 26, while the "
            "allocator retries from minute 12: fragmentation at a slow pace.", 40, [g], [p],
            [event("fragmentation", p, M(12)), event("alloc_retries", p, M(12))], True)


@story
def fragmentation_sitting(rng):
    g = Gpu(rng, 0)
    p = Proc(75555, g, T0 - 3600, command="python serve.py --dynamic-batch",
             live=running(24 * GiB), step_amp=2 * GiB, noise=40 * MiB, frag_level=500 * MiB,
             frag=[constant(7680 * MiB)], floor=40 * GiB, growth_odds=0.0,
             outside=[constant(768 * MiB)], sm=(30, 70))
    return ("A fifth of a 40 GiB pool sits in free split pieces from before the recording, "
            "neither growing nor shrinking, no retries: fragmentation by its level.", 30, [g],
            [p], [event("fragmentation", p, T0)], True)


@story
def sawtooth_splits_within_step(rng):
    g = Gpu(rng, 0)
    p = Proc(75700, g, T0 - 600, command="python train.py --packing",
             live=running(20 * GiB), step_amp=1 * GiB, noise=40 * MiB, frag_level=200 * MiB,
             frag=[saw(T0 - 600, 70, 9 * GiB)], floor=42 * GiB, growth_odds=0.0,
             outside=[constant(1024 * MiB)])
    return ("Split pieces come and go within each 70 s step, up to a fifth of a 42 GiB pool "
            "and gone at its end: a healthy saw-tooth, no fragmentation.", 30, [g], [p], [],
            True)


@story
def leak_live_derived_shape(rng):
    g = Gpu(rng, 0)
    p = Proc(75900, g, T0 - 2400, live=running(26 * GiB) + [leak(M(8), 70)],
             step_amp=2 * GiB, noise=50 * MiB, outside=[constant(1024 * MiB)])
    return ("A 70 MiB/min live leak from minute 8, recorded in the snapshot's derived form "
            "of older recordings: the allocator's figures in processes[].feed, no raw "
            "feeds.", 35, [g], [p], [climb("live", p, M(8), 70)], False,
            {"shape": "derived"})


def late_monitor(rng, report):
    """Two ranks under `strata run` since before the monitor opened, each with its context
    and NCCL's memory outside the pool."""
    g0, g1 = Gpu(rng, 0), Gpu(rng, 1)
    procs = []
    for i, (g, pid, context, nccl) in enumerate(((g0, 76100, 540, 420), (g1, 76101, 520, 1300))):
        procs.append(Proc(pid, g, T0 - 240, command="python train.py --local-rank %d" % i,
                          context_mib=context, live=trainer_warmup(T0 - 240),
                          step_amp=2 * GiB, noise=40 * MiB,
                          outside=[constant(nccl * MiB)], report_context=report))
    return [g0, g1], procs


@story
def late_monitor_reported_context(rng):
    gpus, procs = late_monitor(rng, True)
    return ("Two ranks started 4 minutes before the monitor opened, each with a context of "
            "about 530 MiB and 420 MiB or 1.3 GiB outside the pool (NCCL). Each agent read its "
            "context right after CUDA init and its hello says so: context and outside_pool "
            "must be within 5 % of the truth at once.", 30, gpus, procs, [], True,
            {"layers": "exact"})


@story
def late_monitor_estimated_context(rng):
    gpus, procs = late_monitor(rng, False)
    return ("The same two ranks, their agents without the context reading: the monitor's "
            "estimate is an upper bound (context with NCCL's memory in it), the memory outside "
            "the pool a lower bound, and both must be marked as bounds.", 30, gpus, procs, [],
            True, {"layers": "bounds"})


@story
def idle_holder_low_sm(rng):
    g0, g1 = Gpu(rng, 0), Gpu(rng, 1)
    notebook = Proc(85500, g0, T0 - 1200,
                    command="python -m ipykernel_launcher -f kernel-7.json",
                    live=running(9 * GiB), step_amp=256 * MiB, noise=10 * MiB,
                    idle=[(M(5), M(25))], idle_sm=(0, 1), sm=(30, 90))
    starved = Proc(85600, g1, T0 - 1200, command="python train.py --num-workers 1",
                   live=running(20 * GiB), step_amp=2 * GiB, noise=40 * MiB,
                   outside=[constant(512 * MiB)], sm=(0, 10))
    return ("A notebook kernel runs cells until minute 5, then holds about 10 GiB for 20 "
            "minutes with its SMs at 0-1 % (a 1 % reading every other sample, never 0 for "
            "long), and runs again from minute 25. On GPU 1 a training job starved by its "
            "data loader keeps its SMs low (about 5 %, up to 12 %) but at work: not idle.",
            30, [g0, g1], [notebook, starved], [event("idle_holder", notebook, M(5))], True)


@story
def fragmentation_slow_steady(rng):
    g = Gpu(rng, 0)
    p = Proc(75800, g, T0 - 1800, command="python finetune.py --bucket-by-length",
             live=running(24 * GiB), step_amp=2 * GiB, noise=40 * MiB, frag_level=300 * MiB,
             frag=[constant(2560 * MiB), leak(M(2), 82)], floor=40 * GiB, growth_odds=0.0,
             outside=[constant(768 * MiB)])
    return ("A 40 GiB pool whose split pieces rise steadily from minute 2, 82 MiB a minute "
            "(0.2 points of the pool a minute: never 5 points in 10 minutes), from 7 % to "
            "past 10 % by minute 17 and 15 % only past minute 44; no allocation retries: "
            "fragmentation at a slow, steady pace.", 45, [g], [p],
            [event("fragmentation", p, M(2))], True)


def first_line_over(proc, limit, start, end):
    """The first 5 s line at which the generator's pool would need more than `limit`."""
    t = start
    while t < end:
        top = max(total(proc.live, t - 5 + 5 * f) for f in (0.0, 0.33, 0.66, 1.0))
        need = top + proc.step_amp + 4 * proc.noise + 1.5 * proc.frag_level + 64 * MiB
        if need > limit:
            return t
        t += 5.0
    raise AssertionError("never over")


@story
def climb_to_capacity(rng):
    g = Gpu(rng, 0, "a100")
    p = Proc(76300, g, T0 - 1800, command="python eval_loop.py --keep-logits",
             live=running(60 * GiB) + [leak(M(4), 500)], step_amp=2 * GiB, noise=50 * MiB,
             frag_level=200 * MiB, growth_odds=0.0, outside=[constant(1024 * MiB)],
             peak_counts_jitter=True)
    limit = g.total - g.driver_reserved - p.context - 1024 * MiB - SLACK
    oom = first_line_over(p, limit, M(4), M(60)) - 2.0
    # Live tensors at 95 % of what the device can give them: at capacity.
    near = first_line_over(p, 0.95 * limit, M(4), M(60))
    p.ooms = [(oom, "capacity", None, True)]
    p.exit = oom + 10.0
    return ("Live tensors climb 500 MiB/min from minute 4 toward what the A100 can hold; "
            "the job dies of a capacity OOM at minute %.1f. The forecast must be raised at "
            "least 5 minutes before, its first ETA within 30 %% of the truth; near the end, "
            "live tensors are at capacity." % ((oom - T0) / 60),
            40, [g], [p],
            [climb("live", p, M(4), 500),
             event("oom_forecast", p, M(4), oom_at=round(oom, 3)),
             event("capacity", g, near),
             event("oom", p, oom, **{"class": "capacity"})], False)


@story
def step_leak_deep_sawtooth(rng):
    g = Gpu(rng, 0)
    # 3 MiB a step at 2 s a step: 90 MiB/min, under a 10 GiB saw-tooth within each step.
    p = Proc(77010, g, T0 - 1200, live=running(30 * GiB) + [leak(M(6), 90)],
             step_amp=10 * GiB, noise=40 * MiB, outside=[constant(1024 * MiB)],
             step_secs=2.0, step_from=T0 - 1000)
    return ("A job reporting its steps (2 s each) leaks 3 MiB a step from minute 6 under a "
            "10 GiB saw-tooth within every step: bytes_per_step within 25 %, flagged within "
            "300 steps.", 35, [g], [p],
            [climb("live", p, M(6), 90, bytes_per_step=3 * MiB, step_secs=2.0),
             event("warm_up", p, T0)], False)


@story
def step_leak_fast_20hz(rng):
    g = Gpu(rng, 0)
    # 1.5 MiB a step at 20 steps a second: 1.76 GiB/min.
    p = Proc(77020, g, T0 - 600, live=running(24 * GiB) + [leak(M(4), 1800)],
             step_amp=4 * GiB, noise=40 * MiB, outside=[constant(768 * MiB)],
             step_secs=0.05, step_from=T0 - 500)
    return ("20 steps a second, a step-end reading every 0.2 s: 1.5 MiB a step kept from "
            "minute 4 (1.8 GiB/min), flagged within 300 steps (15 s).", 10, [g], [p],
            [climb("live", p, M(4), 1800, bytes_per_step=1.5 * MiB, step_secs=0.05),
             event("warm_up", p, T0)], False)


@story
def step_leak_slow_5s(rng):
    g = Gpu(rng, 0, "a100")
    # 1 MiB a step at one step every 5 s: 12 MiB/min.
    p = Proc(77030, g, T0 - 1800, live=running(20 * GiB) + [leak(M(5), 12)],
             step_amp=6 * GiB, noise=40 * MiB, outside=[constant(1024 * MiB)],
             step_secs=5.0, step_from=T0 - 1700)
    return ("One step every 5 s under a 6 GiB in-step saw-tooth; 1 MiB a step kept from "
            "minute 5 (12 MiB/min): flagged within 300 steps (25 minutes).", 40, [g], [p],
            [climb("live", p, M(5), 12, bytes_per_step=1 * MiB, step_secs=5.0),
             event("warm_up", p, T0)], False)


@story
def step_normal_job(rng):
    g = Gpu(rng, 0)
    at = M(0.5)
    p = Proc(77100, g, at, live=trainer_warmup(at), step_amp=8 * GiB, noise=40 * MiB,
             outside=[step(M(1.2), 1024 * MiB)], step_secs=1.5, step_from=at + 60)
    return ("A job that reports its steps (1.5 s each) warms up and holds, with an 8 GiB "
            "saw-tooth within each step: no climb, and once its step-end memory and peak "
            "hold, the verdict that it fits.", 30, [g], [p],
            [event("warm_up", p, M(2))], True)


@story
def step_normal_fast_20hz(rng):
    g = Gpu(rng, 0, "a100")
    p = Proc(77200, g, T0 - 900, live=running(28 * GiB), step_amp=6 * GiB, noise=40 * MiB,
             outside=[constant(1024 * MiB)], step_secs=0.05, step_from=T0 - 800)
    return ("20 steps a second, step-end readings every 0.2 s, a 6 GiB saw-tooth within each "
            "step, nothing kept from step to step: no climb; it fits.", 10, [g], [p],
            [event("warm_up", p, T0)], True)


@story
def warmup_ramp_10hz(rng):
    g = Gpu(rng, 0)
    at = M(0.2)
    # Ten steps a second from its start: live tensors ramp to their working level over the
    # first 90 s (2.4 GiB of it in 900 steps, 27 MiB a step), then hold.
    p = Proc(77300, g, at, live=[ramp(at + 5, 90, 24 * GiB)], step_amp=2 * GiB,
             noise=40 * MiB, outside=[step(at + 20, 768 * MiB)], step_secs=0.1,
             step_from=at + 5)
    return ("Ten steps a second from the job's start; live tensors ramp to 24 GiB over the "
            "first 90 s (27 MiB a step) and then hold: a warm-up, not a leak. No climb, no "
            "forecast; once the level holds, the verdict that it fits.", 20, [g], [p],
            [event("warm_up", p, at + 95)], True)


@story
def warmup_leak_during_5hz(rng):
    g = Gpu(rng, 0)
    at = M(0.2)
    # Five steps a second: live tensors ramp to 20 GiB over the first 90 s (45 MiB a step);
    # from 40 s in, 1 MiB a step is kept too (300 MiB/min), hidden in the ramp until it
    # ends at 95 s.
    ramp_end = at + 5 + 90
    p = Proc(77400, g, at, live=[ramp(at + 5, 90, 20 * GiB), leak(at + 40, 300)],
             step_amp=2 * GiB, noise=40 * MiB, outside=[step(at + 20, 768 * MiB)],
             step_secs=0.2, step_from=at + 5)
    return ("Five steps a second from the job's start; live tensors ramp to 20 GiB over the "
            "first 90 s while 1 MiB a step (300 MiB/min) is kept from 40 s on: the leak, "
            "hidden in the ramp, must be found within 300 steps of the ramp's end, with its "
            "pace per step.", 20, [g], [p],
            [climb("live", p, ramp_end, 300, bytes_per_step=1 * MiB, step_secs=0.2)], False)


@story
def jax_async_live_climb(rng):
    g = Gpu(rng, 0)
    # A JAX job on XLA's cuda_async allocator: its feed reports live tensors, not the pool.
    # From minute 5 it keeps 90 MiB/min of them, under a 4 GiB saw-tooth within each step.
    p = Proc(78400, g, T0 - 1200, command="python train_jax.py",
             live=running(24 * GiB) + [leak(M(5), 90)], step_amp=4 * GiB, noise=120 * MiB,
             outside=[constant(512 * MiB)], async_pool=True)
    return ("A JAX job on cuda_async (allocated reported, reserved null) keeps 90 MiB/min of "
            "live tensors from minute 5 under a 4 GiB saw-tooth: a live climb (`cause: live`), "
            "never `unattributed` (its evidence says `live` from when it is first raised), its pool "
            "unknown.", 40, [g], [p],
            [climb("live", p, M(5), 90, evidence={"cause": "live"})], False)


@story
def exits_with_closed_feeds(rng):
    g = Gpu(rng, 0)
    h = Gpu(rng, 1)
    # Three fed jobs; two exit (at minutes 8 and 17) and their closed feeds are kept for
    # 60 s and 30 s after NVML stops listing them, as the monitor keeps a feed it has read.
    a = Proc(78500, g, T0 - 600, live=running(20 * GiB), step_amp=2 * GiB,
             outside=[constant(512 * MiB)], exit=M(8), feed_kept=60.0)
    b = Proc(78501, h, T0 - 600, live=running(16 * GiB), step_amp=1 * GiB,
             outside=[constant(512 * MiB)], exit=M(17), feed_kept=30.0)
    c = Proc(78502, g, M(10), live=[ramp(M(10) + 20, 60, 12 * GiB)], step_amp=1 * GiB,
             outside=[step(M(10) + 30, 512 * MiB)])
    return ("Two fed jobs exit (at 8m and 17m) and their closed feeds are kept for a while "
            "after NVML stops listing them; a third starts at 10m. A feed whose process has "
            "exited is not a feed on a device NVML does not list: no `feed_device_unlisted`.",
            25, [g, h], [a, b, c], [], True, {"never": ["feed_device_unlisted"]})


# What the oracle leaves beside a pool on a device: the 32 MiB a cuBLAS workspace may take
# for a while (first_line_over counts the 64 MiB a new pool size may be rounded up by).
SLACK = 32 * MiB


def forecast_story(p, limit, start):
    """The OOM of `p` (the first line whose pool would need more than `limit`), set on the
    process (a capacity OOM, reported; it exits 10 s later): the truth an `oom_forecast`'s
    ETA is scored against."""
    oom = first_line_over(p, limit, start, start + 3600) - 2.0
    p.ooms = [(oom, "capacity", None, True)]
    p.exit = oom + 10.0
    return oom


@story
def forecast_live_noisy(rng):
    g = Gpu(rng, 0, "l40s")
    # A noisy climb: 250 MiB/min of live tensors from minute 5 under a 3 GiB saw-tooth with
    # 150 MiB of jitter, on a 45 GiB L40S.
    p = Proc(78100, g, T0 - 900, live=running(30 * GiB) + [leak(M(5), 250)],
             step_amp=3 * GiB, noise=150 * MiB, frag_level=200 * MiB, growth_odds=0.0,
             outside=[constant(768 * MiB)], peak_counts_jitter=True)
    limit = g.total - g.driver_reserved - p.context - 768 * MiB - SLACK
    oom = forecast_story(p, limit, M(5))
    near = first_line_over(p, 0.95 * limit, M(5), oom)
    return ("Live tensors climb 250 MiB/min from minute 5 under a 3 GiB saw-tooth and 150 MiB "
            "of jitter; the L40S runs out at minute %.1f. The forecast's ETA must be within "
            "30 %% of the truth when first raised and within 30 %% (or 60 s) at every later "
            "sample." % ((oom - T0) / 60), 45, [g], [p],
            [climb("live", p, M(5), 250), event("oom_forecast", p, M(5), oom_at=round(oom, 3)),
             event("capacity", g, near), event("oom", p, oom, **{"class": "capacity"})], False)


@story
def forecast_mig_live(rng):
    g = Gpu(rng, 0, "a100")
    m = Mig(rng, g, "3g.40gb", 40192 * MiB)
    # On a MIG instance: live tensors climb 150 MiB/min from minute 4 under a 4 GiB
    # saw-tooth (its peaks 4 GiB above its floors).
    p = Proc(78200, m, T0 - 1200, live=running(28 * GiB) + [leak(M(4), 150)],
             step_amp=4 * GiB, noise=60 * MiB, frag_level=200 * MiB, growth_odds=0.0,
             outside=[constant(512 * MiB)], peak_counts_jitter=True)
    limit = m.total - p.context - 512 * MiB - SLACK
    oom = forecast_story(p, limit, M(4))
    near = first_line_over(p, 0.95 * limit, M(4), oom)
    return ("On a 3g.40gb MIG instance, live tensors climb 150 MiB/min from minute 4 under a "
            "4 GiB saw-tooth: the instance runs out at minute %.1f. The forecast is read from "
            "the peak (not the floor), its ETA within 30 %% when first raised and within "
            "30 %% (or 60 s) at every later sample." % ((oom - T0) / 60), 50, [g], [p],
            [climb("live", p, M(4), 150), event("oom_forecast", p, M(4), oom_at=round(oom, 3)),
             event("capacity", m, near), event("oom", p, oom, **{"class": "capacity"})], False)


@story
def forecast_shared_gpu(rng):
    g = Gpu(rng, 0, "a100")
    # Two jobs share one A100: an inference server holding a pool reserved up front (32 GiB,
    # flat), and a training job whose live tensors climb 400 MiB/min from minute 3.
    a = Proc(78300, g, T0 - 1800, command="python serve.py", live=running(20 * GiB),
             step_amp=1 * GiB, noise=20 * MiB, growth_odds=0.0, floor=32 * GiB,
             outside=[constant(256 * MiB)])
    b = Proc(78301, g, T0 - 900, live=running(30 * GiB) + [leak(M(3), 400)],
             step_amp=2 * GiB, noise=60 * MiB, frag_level=200 * MiB, growth_odds=0.0,
             outside=[constant(512 * MiB)], peak_counts_jitter=True)
    # What the server holds: its context, its memory outside the pool, and its pool (the
    # floor, and at most 64 MiB the first growth rounds it up by).
    server = a.context + 256 * MiB + 32 * GiB + 64 * MiB
    limit = g.total - g.driver_reserved - server - b.context - 512 * MiB - SLACK
    oom = forecast_story(b, limit, M(3))
    return ("Two jobs share an A100: a server holding 32 GiB, flat, and a training job whose "
            "live tensors climb 400 MiB/min from minute 3; the trainer runs out at minute "
            "%.1f, what it can still take set by the server's share. ETA within 30 %% when "
            "first raised and within 30 %% (or 60 s) at every later sample."
            % ((oom - T0) / 60), 45, [g], [a, b],
            [climb("live", b, M(3), 400), event("oom_forecast", b, M(3), oom_at=round(oom, 3)),
             event("oom", b, oom, **{"class": "capacity"})], False)


def main(argv):
    names = argv or sorted(STORIES)
    unknown = [n for n in names if n not in STORIES]
    if unknown:
        sys.exit("unknown trace(s): %s (known: %s)"
                 % (", ".join(unknown), ", ".join(sorted(STORIES))))
    here = os.path.dirname(os.path.abspath(__file__))
    packed = plain = 0
    for name in names:
        path, size = write(here, name, STORIES[name])
        packed += os.path.getsize(path)
        plain += size
        print("%-32s %6.1f KiB (%5.0f KiB unpacked)"
              % (name, os.path.getsize(path) / 1024, size / 1024))
    print("%d trace(s): %.2f MiB (%.1f MiB unpacked)" % (len(names), packed / MiB, plain / MiB))


if __name__ == "__main__":
    main(sys.argv[1:])

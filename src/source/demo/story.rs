//! The demo node's cast: what each simulated process holds at a given story time.
//!
//! Story time runs from 0 to [`LOOP_SECS`] and then loops. Every value is a pure function of
//! (seed, story time), so any instant can be reproduced exactly.

use super::noise;

pub(crate) const LOOP_SECS: f64 = 1200.0;

const GIB: f64 = (1u64 << 30) as f64;
const MIB: u64 = 1 << 20;

/// Where a simulated process runs: a whole GPU, or a MIG slot of GPU 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    Gpu(usize),
    Mig(usize, usize),
}

/// A fed process's allocator state.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    pub(crate) framework: &'static str,
    pub(crate) framework_version: &'static str,
    pub(crate) backend: &'static str,
    pub(crate) allocated: u64,
    pub(crate) reserved: u64,
    pub(crate) inactive_split: Option<u64>,
    pub(crate) peak_allocated: u64,
    pub(crate) peak_reserved: u64,
    pub(crate) alloc_retries: Option<u64>,
    pub(crate) ooms: Option<u64>,
    pub(crate) largest_free_block: Option<u64>,
    /// Story time the feed was last published at (a stuck agent stops publishing).
    pub(crate) published_at: f64,
    /// The latest out-of-memory error so far, as the OOM observer reported it.
    pub(crate) last_oom: Option<DemoOom>,
}

/// An out-of-memory error of the story: when, what was asked, and the device's free and
/// total (or allowed maximum) as the allocator saw them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DemoOom {
    pub(crate) at: f64,
    pub(crate) requested: u64,
    pub(crate) device_free: u64,
    pub(crate) device_total: u64,
}

/// The latest of `times` up to `t`.
fn latest(times: &[f64], t: f64) -> Option<f64> {
    times.iter().copied().rfind(|&at| t >= at)
}

/// One simulated process at one story instant.
#[derive(Debug, Clone)]
pub(crate) struct Actor {
    pub(crate) pid: u32,
    pub(crate) place: Place,
    /// Story time the process started at.
    pub(crate) started_at: f64,
    pub(crate) user: Option<&'static str>,
    pub(crate) command: Option<&'static str>,
    pub(crate) used: u64,
    pub(crate) visible: bool,
    pub(crate) sm_util: Option<u32>,
    pub(crate) pool: Option<Pool>,
}

fn bytes(gib: f64) -> u64 {
    (gib.max(0.0) * GIB) as u64
}

/// Rounds up to the allocator's 2 MiB segment granularity.
fn segments(gib: f64) -> u64 {
    bytes(gib).div_ceil(2 * MIB) * 2 * MIB
}

/// 0 at `from`, 1 at `to`, smooth between.
fn ramp(t: f64, from: f64, to: f64) -> f64 {
    let x = ((t - from) / (to - from)).clamp(0.0, 1.0);
    x * x * (3.0 - 2.0 * x)
}

/// Activations of one training step: rise through the forward pass, fall in the backward.
fn step_shape(t: f64, period: f64) -> f64 {
    let phase = (t / period).fract();
    if phase < 0.65 {
        phase / 0.65
    } else {
        (1.0 - phase) / 0.35
    }
}

/// Largest of `f` over `[from, to]`, on a 2 s grid plus the end point: a peak as the
/// allocator's `max_memory_*` counters would have recorded it since the process started.
fn peak(from: f64, to: f64, f: impl Fn(f64) -> u64) -> u64 {
    let mut best = f(to);
    let mut t = from;
    while t < to {
        best = best.max(f(t));
        t += 2.0;
    }
    best
}

/// Memory a library takes outside the pool some time after start-up (cuDNN workspaces,
/// cuBLAS handles, NCCL buffers): before it arrives, all a process holds beyond its pool is
/// its CUDA context, which is how strata learns the context's size.
fn outside(t: f64, start: f64, bytes: u64) -> u64 {
    if t >= start + 12.0 {
        bytes
    } else {
        0
    }
}

pub(crate) const CONTEXT_H100: u64 = 532 * MIB;
pub(crate) const CONTEXT_A100: u64 = 476 * MIB;

/// Story seconds a trainer spends between CUDA init and its first allocation (loading data):
/// its agent, started with it under `strata run`, sees the pool empty, so the monitor
/// observes the CUDA context exactly.
const TRAINER_IDLE_SECS: f64 = 24.0;

/// A data-parallel training rank: warms up to a plateau, tensors saw-tooth within each step,
/// NCCL buffers outside the pool.
fn trainer(seed: u64, t: f64, pid: u32, gpu: usize, command: &'static str) -> Actor {
    let start = 4.0;
    let first_alloc = start + TRAINER_IDLE_SECS;
    let warm = move |t: f64| ramp(t, first_alloc, start + 150.0);
    let live = move |t: f64| {
        if t < first_alloc {
            return 0;
        }
        let w = warm(t);
        let weights = 17.6 * w.min(1.0);
        let activations = 21.5 * step_shape(t + gpu as f64 * 1.7, 60.0) * w;
        bytes(weights + activations + 0.05 * noise(seed, u64::from(pid), (t * 4.0) as u64))
    };
    // The pool grows in segments as warm-up reaches new peaks, then stays: a plateau.
    let reserved = move |t: f64| {
        if t < first_alloc {
            return 0;
        }
        segments((39.2 * warm(t) + 12.6 * warm(t).powi(2)).max(0.0) + 0.5)
    };
    let fragmented = move |t: f64| {
        if t < first_alloc {
            return 0;
        }
        bytes(0.31 * warm(t) + 0.02 * noise(seed, 77, (t * 4.0) as u64))
    };
    let nccl = outside(t, first_alloc, 1792 * MIB);
    let allocated = live(t);
    let pool_reserved = reserved(t).max(allocated + fragmented(t));
    Actor {
        pid,
        place: Place::Gpu(gpu),
        started_at: start,
        user: Some("mlteam"),
        command: Some(command),
        used: CONTEXT_H100 + nccl + pool_reserved,
        visible: true,
        sm_util: Some((88.0 + 9.0 * noise(seed, 3 + gpu as u64, t as u64)) as u32),
        pool: Some(Pool {
            framework: "torch",
            framework_version: "2.5.1+cu124",
            backend: "native",
            allocated,
            reserved: pool_reserved,
            inactive_split: Some(fragmented(t)),
            peak_allocated: peak(start, t, live),
            peak_reserved: peak(start, t, reserved).max(pool_reserved),
            alloc_retries: Some(0),
            ooms: Some(0),
            largest_free_block: Some(bytes(6.4 * warm(t))),
            published_at: t,
            last_oom: None,
        }),
    }
}

/// The eval loop's memory cap (`torch.cuda.set_per_process_memory_fraction(0.2)`).
const LEAKER_CAP_GIB: f64 = 15.9;
/// When its climbing live tensors meet that cap: the loop catches each OOM and goes on.
const LEAKER_OOMS: [f64; 3] = [1010.0, 1070.0, 1130.0];

/// An evaluation loop that keeps every result on the GPU: live memory climbs without plateau,
/// until it runs into its memory cap (a capacity OOM, caught and repeated).
fn leaker(seed: u64, t: f64) -> Actor {
    let start = 30.0;
    let live = move |t: f64| {
        let minutes = (t - start).max(0.0) / 60.0;
        // Past its cap the loop cannot hold more: each new result is an OOM it catches.
        bytes(
            (5.8 * ramp(t, start, start + 40.0)
                + 0.62 * minutes
                + 0.08 * noise(seed, 11, t as u64))
            .min(LEAKER_CAP_GIB - 0.9),
        )
    };
    let fragmented = |_t: f64| 180 * MIB;
    let reserved = move |t: f64| {
        let need = live(t) + fragmented(t) + 700 * MIB;
        need.div_ceil(512 * MIB) * 512 * MIB
    };
    let pool_reserved = reserved(t);
    Actor {
        pid: 52010,
        place: Place::Gpu(2),
        started_at: start,
        user: Some("bob"),
        command: Some("python eval_loop.py --watch ckpt/ --keep-outputs"),
        used: CONTEXT_H100 + outside(t, start, 310 * MIB) + pool_reserved,
        visible: true,
        sm_util: Some((22.0 + 14.0 * noise(seed, 12, t as u64)) as u32),
        pool: Some(Pool {
            framework: "torch",
            framework_version: "2.4.0+cu121",
            backend: "native",
            allocated: live(t),
            reserved: pool_reserved,
            inactive_split: Some(fragmented(t)),
            peak_allocated: peak(start, t, live),
            peak_reserved: peak(start, t, reserved),
            alloc_retries: Some(0),
            ooms: Some(LEAKER_OOMS.iter().filter(|&&at| t >= at).count() as u64),
            largest_free_block: Some(512 * MIB),
            published_at: t,
            last_oom: latest(&LEAKER_OOMS, t).map(|at| DemoOom {
                at,
                requested: 2 << 30,
                device_total: bytes(LEAKER_CAP_GIB),
                device_free: bytes(LEAKER_CAP_GIB).saturating_sub(reserved(at)),
            }),
        }),
    }
}

/// Inference under the cudaMallocAsync backend: no split statistics. Its agent stalls for a
/// while, so its feed goes stale and must not be mixed into the instant.
fn async_server(seed: u64, t: f64) -> Actor {
    let start = 15.0;
    let stalled = (660.0..750.0).contains(&t);
    let published_at = if stalled { 660.0 } else { t };
    let live = move |t: f64| {
        bytes(13.1 * ramp(t, start, start + 25.0) + 1.6 * noise(seed, 21, (t / 5.0) as u64))
    };
    let reserved = move |t: f64| segments(16.0 * ramp(t, start, start + 25.0) + 0.2);
    let at = published_at;
    Actor {
        pid: 52077,
        place: Place::Gpu(2),
        started_at: start,
        user: Some("svc-infer"),
        command: Some("python infer_async.py --model mistral-7b --max-batch 32"),
        used: CONTEXT_H100 + outside(t, start, 640 * MIB) + reserved(t),
        visible: true,
        sm_util: Some((41.0 + 30.0 * noise(seed, 22, t as u64)) as u32),
        pool: Some(Pool {
            framework: "torch",
            framework_version: "2.5.1+cu124",
            backend: "cudaMallocAsync",
            allocated: live(at).min(reserved(at)),
            reserved: reserved(at),
            inactive_split: None,
            peak_allocated: peak(start, at, live),
            peak_reserved: peak(start, at, reserved),
            alloc_retries: None,
            ooms: Some(0),
            largest_free_block: None,
            published_at: at,
            last_oom: None,
        }),
    }
}

/// Fine-tuning on variable-length batches in a 3g.40gb MIG slice: the pool fragments,
/// retries climb, OOMs follow and the job dies; a restart warms up again.
fn varlen(seed: u64, t: f64) -> Option<Actor> {
    const CAPACITY_GIB: f64 = 37.9;
    let (pid, start, crash) = if t < 960.0 {
        (60112, 10.0, true)
    } else if t >= 1000.0 {
        (60340, 1000.0, false)
    } else {
        return None;
    };
    let age = move |t: f64| (t - start).max(0.0);
    let fragmented = move |t: f64| {
        let settled = 0.4 * ramp(t, start, start + 60.0);
        if crash {
            bytes(settled + 8.9 * ramp(t, 60.0, 930.0))
        } else {
            bytes(settled)
        }
    };
    let reserved = move |t: f64| {
        segments(
            (21.0 * ramp(t, start, start + 90.0)
                + 15.5 * ramp(t, 150.0, 880.0) * f64::from(u8::from(crash)))
            .min(CAPACITY_GIB),
        )
    };
    let live = move |t: f64| {
        let shape = noise(seed, 31, (t / 3.0) as u64);
        let want = bytes((13.5 + 9.5 * shape) * ramp(t, start, start + 60.0));
        want.min(reserved(t).saturating_sub(fragmented(t) + 64 * MIB))
    };
    let retries = if crash {
        let x = (age(t) - 380.0).max(0.0) / 10.0;
        (x * x * 0.9) as u64
    } else {
        0
    };
    const OOMS: [f64; 3] = [900.0, 930.0, 955.0];
    let ooms = if crash {
        OOMS.iter().filter(|&&at| t >= at).count() as u64
    } else {
        0
    };
    let pool_reserved = reserved(t).max(live(t) + fragmented(t));
    // Each OOM asks for a long sequence's activations: well under what is free in all, but
    // larger than any free block.
    let last_oom = latest(&OOMS, t).filter(|_| crash).map(|at| {
        let held = CONTEXT_A100 + outside(at, start, 380 * MIB) + reserved(at);
        DemoOom {
            at,
            requested: 2560 * MIB,
            device_total: bytes(CAPACITY_GIB + 1.3),
            device_free: bytes(CAPACITY_GIB + 1.3).saturating_sub(held),
        }
    });
    Some(Actor {
        pid,
        place: Place::Mig(3, 0),
        started_at: start,
        user: Some("carol"),
        command: Some("python finetune_varlen.py --max-len 8192 --bucket none"),
        used: CONTEXT_A100 + outside(t, start, 380 * MIB) + pool_reserved,
        visible: true,
        sm_util: Some((70.0 + 20.0 * noise(seed, 32, t as u64)) as u32),
        pool: Some(Pool {
            framework: "torch",
            framework_version: "2.5.1+cu124",
            backend: "native",
            allocated: live(t),
            reserved: pool_reserved,
            inactive_split: Some(fragmented(t)),
            peak_allocated: peak(start, t, live),
            peak_reserved: peak(start, t, reserved),
            alloc_retries: Some(retries),
            ooms: Some(ooms),
            largest_free_block: Some(bytes(
                (1.9 - 1.6 * ramp(t, 60.0, 930.0) * f64::from(u8::from(crash))).max(0.05),
            )),
            published_at: t,
            last_oom,
        }),
    })
}

/// A JAX server in a 2g.20gb slice: preallocates its pool, reports no split statistics.
fn jax_server(seed: u64, t: f64) -> Actor {
    let reserved = segments(15.0);
    let allocated = bytes(8.6 + 0.9 * noise(seed, 41, (t / 4.0) as u64));
    Actor {
        pid: 60500,
        place: Place::Mig(3, 1),
        started_at: 0.0,
        user: Some("svc-jax"),
        command: Some("python -m serve_t5 --model t5-3b --port 9000"),
        used: CONTEXT_A100 + outside(t, 0.0, 210 * MIB) + reserved,
        visible: true,
        sm_util: Some((18.0 + 25.0 * noise(seed, 42, t as u64)) as u32),
        pool: Some(Pool {
            framework: "jax",
            framework_version: "0.4.35",
            backend: "bfc",
            allocated,
            reserved,
            inactive_split: None,
            peak_allocated: bytes(9.5),
            peak_reserved: reserved,
            alloc_retries: None,
            ooms: Some(0),
            largest_free_block: None,
            published_at: t,
            last_oom: None,
        }),
    }
}

/// Everyone on the node at story time `t` (within one loop).
pub(crate) fn cast(seed: u64, t: f64) -> Vec<Actor> {
    let mut actors = vec![
        trainer(
            seed,
            t,
            41230,
            0,
            "python train.py --config llama-7b.yaml --rank 0",
        ),
        trainer(
            seed,
            t,
            41231,
            1,
            "python train.py --config llama-7b.yaml --rank 1",
        ),
        Actor {
            pid: 38811,
            place: Place::Gpu(1),
            started_at: 0.0,
            user: Some("svc-embed"),
            command: Some("python serve_embeddings.py --port 8081"),
            used: 9 * 1024 * MIB + 312 * MIB,
            visible: true,
            sm_util: Some((6.0 + 8.0 * noise(seed, 51, t as u64)) as u32),
            pool: None,
        },
        leaker(seed, t),
        async_server(seed, t),
        // An exited process whose CUDA context the driver still holds.
        Actor {
            pid: 31337,
            place: Place::Gpu(2),
            started_at: 0.0,
            user: None,
            command: None,
            used: 2150 * MIB,
            visible: false,
            sm_util: Some(0),
            pool: None,
        },
        jax_server(seed, t),
        Actor {
            pid: 61002,
            place: Place::Mig(3, 2),
            started_at: 0.0,
            user: Some("triton"),
            command: Some("tritonserver --model-repository=/models"),
            used: 3 * 1024 * MIB + 205 * MIB,
            visible: true,
            sm_util: Some((9.0 + 6.0 * noise(seed, 61, t as u64)) as u32),
            pool: None,
        },
    ];
    actors.extend(varlen(seed, t));
    actors.retain(|a| t >= a.started_at);
    actors
}

/// Usage on a device that no listed process accounts for (another container's processes,
/// which NVML does not list here).
pub(crate) fn unlisted(place: Place) -> u64 {
    match place {
        Place::Mig(3, 2) => 2662 * MIB,
        _ => 0,
    }
}

//! Advice for the findings from history: climbs by their cause, fragmentation, retries, OOMs
//! by their class, capacity, idle holders, forecasts, warm-ups.

use crate::detect::evidence::{
    Capacity, Climb, Forecast, Fragmentation, Idle, Oom, Retries, Verdict, WarmUpForecast,
    WarmUpVerdict, Warming,
};
use crate::detect::{Evidence, FindingKind};
use crate::layers::Layer;
use crate::units::{bytes, duration};

/// The allocator setting that lets segments grow in place (PyTorch).
const EXPANDABLE: &str = "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`";
/// What lowers the peak of live tensors, whatever the allocator.
const LEVERS: &str = "a smaller micro-batch with gradient accumulation, activation checkpointing, lower precision such as bf16, or sharding such as FSDP";

/// The advice of a finding from history; `None` for evidence of the instant.
pub(super) fn advice(evidence: &Evidence) -> Option<Vec<String>> {
    use Evidence as E;
    Some(match evidence {
        E::Climb(e) => climb(e),
        E::Fragmentation(e) => fragmentation(e),
        E::AllocRetries(e) => retries(Some(e)),
        E::Oom(e) => oom(e),
        E::Capacity(e) => capacity(Some(e)),
        E::IdleHolder(e) => idle(Some(e)),
        E::OomForecast(e) => forecast(e),
        E::WarmUp(e) => warm_up(e),
        E::WarmUpForecast(e) => warm_up_forecast(Some(e)),
        E::WarmingUp(e) => warming(Some(e)),
        _ => return None,
    })
}

/// A kind's advice without figures.
pub(super) fn by_kind(kind: FindingKind) -> Vec<String> {
    use FindingKind as K;
    match kind {
        K::Climb => vec![
            "Look at which layer climbs in the evidence view: live (tensors kept across steps), cached (a widening mix of shapes) or outside_pool.".into(),
        ],
        K::Fragmentation => reshape(Some("torch"), None, None, None),
        K::AllocRetries => retries(None),
        K::Oom => vec![format!(
            "If live tensors filled the device, lower the peak with {LEVERS}; if not, it was fragmentation: try {EXPANDABLE}."
        )],
        K::Capacity => capacity(None),
        K::IdleHolder => idle(None),
        K::OomForecast => vec![
            "Save a checkpoint soon: at its present pace this runs out of memory within the hour.".into(),
        ],
        K::WarmUp => warm_up_forecast(None),
        K::WarmingUp => warming(None),
        // Findings of the instant have their own.
        _ => vec!["Open the evidence view (Enter) for what this finding shows.".into()],
    }
}

/// What a climb of this cause (the evidence's word) calls for; `per_step` where the process
/// reports steps.
fn by_cause(cause: &str, per_step: Option<i64>) -> Vec<String> {
    let kept = "a list of losses not `.item()`'d, a cache that grows, a hook that stores tensors";
    match cause {
        c if c == Layer::Live.name() => vec![
            match per_step.filter(|&b| b > 0) {
                Some(b) => format!(
                    "Look for what each step keeps (about {} a step): {kept}.",
                    bytes(b as u64)
                ),
                None => format!("Look for tensors kept across steps: {kept}."),
            },
            "In PyTorch, `torch.cuda.memory._record_memory_history()` and a memory snapshot show where the kept tensors were allocated.".into(),
        ],
        c if Layer::named(c) == Some(Layer::Cached) => vec![
            "Bucket or pad batches to a few shapes: live tensors are flat while cached memory grows, so the shapes asked for are widening.".into(),
            "Cached memory is reused, not leaked: it stops growing once the shapes stop widening.".into(),
        ],
        c if c == Layer::OutsidePool.name() => vec![
            "Look outside the allocator: NCCL buffers (a new communicator), cuDNN or cuBLAS handles and kernels loaded as new shapes appear, CUDA graphs being captured, or a library calling cudaMalloc itself.".into(),
            "NCCL sizes its buffers by `NCCL_BUFFSIZE` per channel, so each new communicator adds them.".into(),
        ],
        c if c == Layer::Unattributed.name() => vec![
            "If the job has no allocator feed, run it under `strata run -- CMD` to see which layer grows: live, cached or outside_pool.".into(),
        ],
        _ => vec![
            "Look for a holder NVML does not list here: a process in another container or PID namespace (`nvidia-smi` on the host), or an MPS server.".into(),
            "`strata doctor` says what strata cannot see on this node.".into(),
        ],
    }
}

fn climb(e: &Climb) -> Vec<String> {
    by_cause(&e.cause, e.bytes_per_step.0.map(|b| b.0))
}

/// Fragmentation's remedies for a job of `framework` whose `expandable_segments` is as said;
/// `fit` a sentence of the amounts (an OOM's), said before the remedies that follow the first.
/// `pinned`: the segments the agent's map says a few live bytes keep (a clause), where known:
/// the remedy before the last resort is then to place long-lived tensors first.
fn reshape(
    framework: Option<&str>,
    expandable: Option<bool>,
    fit: Option<String>,
    pinned: Option<String>,
) -> Vec<String> {
    let shapes = "bucket variable-length batches to a few shapes and run the largest shape first";
    // Why the setting helps: the amounts where an OOM gives them.
    let why = fit
        .clone()
        .unwrap_or_else(|| "segments then grow in place instead of being split".into());
    let out = if framework.is_some_and(|f| f != "torch") {
        let mut out = vec![format!(
            "Make the shapes repeat: {shapes}, so its block exists before the pool is carved up."
        )];
        out.extend(fit.map(|f| format!("{f}.")));
        out
    } else {
        let last_resort = match pinned {
            Some(pinned) => format!(
                "failing that, allocate long-lived tensors before the short-lived ones ({pinned}: `w` shows which lines hold them); `max_split_size_mb` is the last resort."
            ),
            None => format!("failing that, {shapes}; `max_split_size_mb` is the last resort."),
        };
        match expandable {
            Some(true) => vec![
                format!("The job already runs with `expandable_segments:True`: make the shapes repeat, {shapes}."),
                format!(
                    "{}under expandable segments `inactive_split` does not measure fragmentation.",
                    fit.map_or_else(String::new, |f| format!("{f}; "))
                ),
            ],
            Some(false) => vec![
                format!("Restart the job with {EXPANDABLE}: {why}."),
                last_resort,
            ],
            None => vec![
                format!("If the job does not run with it yet, restart it with {EXPANDABLE}: {why}."),
                last_resort,
            ],
        }
    };
    out.into_iter().map(capitalised).collect()
}

/// A sentence begun with a capital.
fn capitalised(s: String) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_lowercase() => c.to_uppercase().chain(chars).collect(),
        _ => s,
    }
}

fn fragmentation(e: &Fragmentation) -> Vec<String> {
    let pinned = pinned(e.pinned_segments.0, e.pinned_reserved.0, e.pinned_live.0);
    reshape(
        e.framework.0.as_deref(),
        e.expandable_segments.0,
        None,
        pinned,
    )
}

fn retries(e: Option<&Retries>) -> Vec<String> {
    let counted = e.map_or_else(String::new, |e| {
        format!(
            " ({} in the last {})",
            e.retries_in_window.0,
            duration(e.window_secs.0)
        )
    });
    vec![
        "Lower the peak a little, or let the allocator reclaim cached memory earlier with `PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8`.".into(),
        format!("Each retry{counted} freed all its cached memory and waited on the GPU; if fragmentation is raised for this process too, treat that first."),
    ]
}

fn oom(e: &Oom) -> Vec<String> {
    let needed = e.needed_bytes.map(|b| b.0);
    let could_have = e.could_have_bytes.map(|b| b.0);
    match e.class.as_str() {
        "capacity" => {
            // How much is missing: beyond what the device could give the pool, or (that
            // unknown) beyond the device's whole memory.
            let short = match (needed, could_have, e.device_total) {
                (Some(n), Some(c), _) => Some((n.saturating_sub(c), c, "could give this pool")),
                (Some(n), None, Some(t)) => Some((n.saturating_sub(t.0), t.0, "holds in all")),
                _ => None,
            }
            .filter(|(missing, _, _)| *missing > 0);
            let first = match short {
                Some((missing, _, _)) => {
                    format!("Lower the peak by at least {}: {LEVERS}.", bytes(missing))
                }
                None => format!("Lower the peak: {LEVERS}."),
            };
            let second = match (short, needed, e.requested) {
                (Some((_, room, what)), Some(n), Some(r)) => format!(
                    "No allocator setting helps: the {} request with live tensors needed {}, more than the {} the device {what}.",
                    bytes(r.0),
                    bytes(n),
                    bytes(room)
                ),
                _ => "No allocator setting helps: live tensors and the request needed more than the device could give.".into(),
            };
            vec![first, second]
        }
        "fragmentation" => {
            let fit = match (needed, could_have) {
                (Some(n), Some(c)) => Some(format!(
                    "the {} it needed fit in the {} the device could give this pool, but not in one piece",
                    bytes(n),
                    bytes(c)
                )),
                _ => None,
            };
            let pinned = pinned(e.pinned_segments.0, e.pinned_reserved.0, e.pinned_live.0);
            reshape(
                e.framework.0.as_deref(),
                e.expandable_segments.0,
                fit,
                pinned,
            )
        }
        _ => uncertain(e),
    }
}

/// Segments pinned by a few live bytes, as a clause of the remedy: `12 segments (24.0 GiB)
/// are kept by 63.0 MiB of them`.
fn pinned(
    segments: Option<crate::detect::evidence::units::Count>,
    reserved: Option<crate::detect::evidence::units::Bytes>,
    live: Option<crate::detect::evidence::units::Bytes>,
) -> Option<String> {
    let (n, reserved, live) = (segments?.0, reserved?.0, live?.0);
    (n > 0).then(|| {
        format!(
            "{n} segment{} ({}) {} kept by {} of them",
            if n == 1 { "" } else { "s" },
            bytes(reserved),
            if n == 1 { "is" } else { "are" },
            bytes(live)
        )
    })
}

/// An OOM that could not be classed: the remedy of each class, on the condition that tells
/// them apart, and what was missing to tell.
fn uncertain(e: &Oom) -> Vec<String> {
    let torch = e.framework.0.as_deref().is_none_or(|f| f == "torch");
    let otherwise = match (torch, e.expandable_segments.0) {
        (true, Some(false) | None) => format!("try {EXPANDABLE}"),
        _ => "make the shapes repeat (bucket variable-length batches to a few shapes)".into(),
    };
    let live = format!("live tensors ({})", bytes(e.allocated.0));
    let first = match e.needed_bytes {
        Some(n) => format!(
            "If {live} and the request ({} in all) are near what the device can give, lower the peak with {LEVERS}; if not, {otherwise}.",
            bytes(n.0)
        ),
        None => format!(
            "If {live} are near what the device can give, lower the peak with {LEVERS}; if not, {otherwise}."
        ),
    };
    let missing = if e.reserved.is_none() {
        "The allocator reports no pool, so capacity and fragmentation cannot be told apart."
    } else if e.requested.is_none() {
        "The request's size is not known: strata's agent reports it where torch's OOM observer works (not under cudaMallocAsync)."
    } else {
        "The device's free memory at the OOM was not reported, so capacity and fragmentation cannot be told apart."
    };
    vec![first, missing.into()]
}

fn capacity(e: Option<&Capacity>) -> Vec<String> {
    let peaked = e.map_or_else(String::new, |e| {
        format!(
            ": live tensors peaked at {} of the {} they can have",
            bytes(e.peak_live.0),
            bytes(e.holdable.0)
        )
    });
    vec![
        format!("Leave headroom before a larger batch or a longer sequence{peaked}."),
        format!("To make room, lower the peak with {LEVERS}: allocator settings cannot help, the peak is live tensors."),
    ]
}

fn idle(e: Option<&Idle>) -> Vec<String> {
    let free = e.map_or_else(String::new, |e| format!(" to free its {}", bytes(e.used.0)));
    vec![
        format!("If its work is done (a notebook kernel left open, a job that does not exit), end it{free}: select it and press K."),
        "If it is waiting (on data, a barrier or another rank), the GPU is starved, not free.".into(),
    ]
}

/// `~21m00s (~800 steps)`: how long until it runs out, where known.
fn eta(secs: Option<f64>, steps: Option<u64>) -> Option<String> {
    let secs = secs.filter(|s| s.is_finite() && *s >= 0.0)?;
    let steps = steps.map_or_else(String::new, |n| format!(" (~{n} steps)"));
    Some(format!("~{}{steps}", duration(secs)))
}

fn forecast(e: &Forecast) -> Vec<String> {
    let when = eta(Some(e.eta_secs.0), e.eta_step.map(|s| s.0));
    let no_process = e.cause == "no_process";
    let first = match (when, no_process) {
        (Some(when), false) => {
            format!("Save a checkpoint within {when}: at this pace the job runs out of memory then.")
        }
        (Some(when), true) => format!(
            "Save the work of the jobs on this device within {when}: at this pace it runs out of memory then."
        ),
        (None, _) => "Save a checkpoint soon: at this pace it runs out of memory.".into(),
    };
    let mut out = vec![first];
    out.extend(
        by_cause(&e.cause, e.bytes_per_step.map(|b| b.0))
            .into_iter()
            .take(1),
    );
    out
}

fn warm_up(e: &WarmUpVerdict) -> Vec<String> {
    let headroom = e.headroom_bytes.0;
    match e.verdict {
        Verdict::WillNotFit => vec![
            format!(
                "Lower the peak by at least {} before it runs out: {LEVERS}.",
                bytes(headroom.unsigned_abs())
            ),
            format!(
                "Its peak live tensors ({}) are above the {} it can use once its warm-up held: an allocation of that peak's shape would fail.",
                bytes(e.peak_live_bytes.0),
                bytes(e.usable_bytes.0)
            ),
        ],
        Verdict::WarmingUp => warming(None),
        Verdict::Fits => vec![
            format!(
                "Nothing to do: it fits, with {} to spare.",
                bytes(headroom.max(0) as u64)
            ),
            "A larger batch fits only if its peak grows by less than that.".into(),
        ],
    }
}

fn warm_up_forecast(e: Option<&WarmUpForecast>) -> Vec<String> {
    let when = e.and_then(|e| eta(e.eta_secs.map(|s| s.0), e.eta_step.map(|s| s.0)));
    let first = match when {
        Some(when) => {
            format!("Save a checkpoint within {when}: at its pace per step the job will not fit.")
        }
        None => "Save a checkpoint: at its pace per step the job will not fit.".into(),
    };
    vec![
        first,
        format!("If its step-end memory does not level off, look for tensors kept across steps, or lower the peak with {LEVERS}."),
    ]
}

fn warming(e: Option<&Warming>) -> Vec<String> {
    let rising = e
        .map(|e| e.bytes_per_step.0)
        .filter(|&b| b > 0)
        .map_or_else(String::new, |b| {
            format!(" (rising {} a step so far)", bytes(b as u64))
        });
    vec![
        format!("Nothing to do yet: strata judges whether it fits once its step-end memory levels off{rising}."),
        "A rise that does not level off is judged as a climb.".into(),
    ]
}

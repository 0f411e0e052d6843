//! The labels of `strata serve`'s metrics and the gauge families keyed by them: a device's,
//! a process's (with its owner), a layer's and a bound's; strings from outside made safe as
//! label values; bytes set as gauge values.

use crate::layers::{Layer, Layers};
use crate::sample::{GpuSample, NodeSample, ProcessSample};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::atomic::AtomicU64;

/// Characters of a command line kept in the `command` label (after cleaning).
pub const COMMAND_CHARS: usize = 64;
/// The `pid`, `user` and `command` of the series that sum the processes left out.
pub(crate) const OTHER: &str = "other";

/// A metric's labels, in order.
pub(super) type Labels = Vec<(&'static str, String)>;
/// Whole-number gauges (bytes, counts, 0/1) and fractional ones, by labels.
pub(super) type Ints = Family<Labels, Gauge>;
pub(super) type Floats = Family<Labels, Gauge<f64, AtomicU64>>;
pub(super) type Counters = Family<Labels, Counter>;

/// A string from outside, safe as a label value: control characters replaced (the crate
/// escapes quotes, backslashes and newlines; a terminal that shows a label must not act on
/// an escape sequence), at most `max` characters.
pub(crate) fn label_text(text: &str, max: usize) -> String {
    crate::text::clean(text).chars().take(max).collect()
}

/// A GPU's labels: `gpu` (its index), `uuid`, and `name` where NVML gives it.
pub(super) fn gpu_labels(gpu: &GpuSample) -> Labels {
    let mut base = vec![
        ("gpu", gpu.index.to_string()),
        ("uuid", label_text(&gpu.uuid, 128)),
    ];
    if let Some(name) = &gpu.name {
        base.push(("name", label_text(name, 96)));
    }
    base
}

/// Bytes as a gauge value: a count beyond `i64` (no real device) is left out.
pub(super) fn set_bytes(family: &Ints, labels: Labels, bytes: u64) {
    if let Ok(value) = i64::try_from(bytes) {
        family.get_or_create(&labels).set(value);
    }
}

pub(super) fn layer_labels(base: &Labels, layer: Layer) -> Labels {
    let mut labels = base.clone();
    labels.push(("layer", layer.name().to_string()));
    labels
}

/// Every known layer of a device; nothing when its layers are unknown this instant.
pub(super) fn set_layers(family: &Ints, base: &Labels, layers: Option<&Layers>) {
    let Some(layers) = layers else { return };
    for layer in Layer::ALL {
        if let Some(bytes) = layers.get(layer) {
            set_bytes(family, layer_labels(base, layer), bytes);
        }
    }
}

/// The layers of a device or process that are bounds, not exact: 1 for each, with its
/// `layer` and `bound` (`upper`, `lower`).
pub(super) fn set_bounds(family: &Ints, base: &Labels, bounds: &crate::accounting::Bounds) {
    for (layer, bound) in bounds {
        let mut labels = layer_labels(base, *layer);
        let word = match bound {
            crate::accounting::Bound::Upper => "upper",
            crate::accounting::Bound::Lower => "lower",
        };
        labels.push(("bound", word.to_string()));
        family.get_or_create(&labels).set(1);
    }
}

/// The device labels of a process's (or a finding's) device: `gpu` (index) and `uuid`.
pub(super) fn device_labels(sample: &NodeSample, uuid: &str) -> Labels {
    let mut labels = Vec::with_capacity(5);
    if let Some((gpu, _)) = sample.locate(uuid) {
        labels.push(("gpu", gpu.index.to_string()));
    }
    labels.push(("uuid", label_text(uuid, 128)));
    labels
}

pub(super) fn process_labels(sample: &NodeSample, p: &ProcessSample) -> Labels {
    let mut labels = device_labels(sample, &p.device_uuid);
    labels.push(("pid", p.pid.to_string()));
    if let Some(user) = &p.user {
        labels.push(("user", label_text(user, COMMAND_CHARS)));
    }
    if let Some(command) = &p.command {
        labels.push(("command", label_text(command, COMMAND_CHARS)));
    }
    labels.extend(owner_labels(p.owner.as_deref()));
    labels
}

/// Who owns a process, as labels every per-process series carries: the Kubernetes
/// namespace, pod and container, the Slurm job, and its place in a distributed job (`rank`,
/// `local_rank`, `world_size`, and `run`: torchrun's run id or rendezvous address), by
/// which a fleet joins a job's ranks across nodes; empty (the same as absent to PromQL)
/// where nothing names one. One value each per process, so they add no series.
pub(super) fn owner_labels(owner: Option<&crate::sample::owner::Owner>) -> Labels {
    let text =
        |value: Option<&String>| value.map_or_else(String::new, |v| label_text(v, COMMAND_CHARS));
    vec![
        ("namespace", text(owner.and_then(|o| o.namespace.as_ref()))),
        ("pod", text(owner.and_then(|o| o.pod.as_ref()))),
        ("container", text(owner.and_then(|o| o.container.as_ref()))),
        ("slurm_job", text(owner.and_then(|o| o.slurm_job.as_ref()))),
        ("rank", text(owner.and_then(|o| o.rank.as_ref()))),
        (
            "local_rank",
            text(owner.and_then(|o| o.local_rank.as_ref())),
        ),
        (
            "world_size",
            text(owner.and_then(|o| o.world_size.as_ref())),
        ),
        ("run", text(owner.and_then(|o| o.run_id.as_ref()))),
    ]
}

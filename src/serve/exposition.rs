//! One observed instant as Prometheus metrics (README, "strata serve"): built with the
//! `prometheus-client` crate, encoded once per sample, so that a scrape only copies text.
//!
//! Unknown is absent: Prometheus has no `n/a`, so a layer, a figure or a label nobody knows
//! is left out, never written as 0.

use crate::layers::{Layer, Layers};
use crate::pipeline::Observed;
use crate::sample::{NodeSample, ProcessSample};
use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;

/// Characters of a command line kept in the `command` label (after cleaning).
pub const COMMAND_CHARS: usize = 64;
/// The `pid`, `user` and `command` of the series that sum the processes left out.
pub const OTHER: &str = "other";

/// A metric's labels, in order.
pub(super) type Labels = Vec<(&'static str, String)>;
/// Whole-number gauges (bytes, counts, 0/1) and fractional ones, by labels.
pub(super) type Ints = Family<Labels, Gauge>;
pub(super) type Floats = Family<Labels, Gauge<f64, AtomicU64>>;
pub(super) type Counters = Family<Labels, Counter>;

/// What the sampler has counted since it started (not part of any one sample).
#[derive(Debug, Clone, Copy, Default)]
pub struct SamplerCounts {
    /// Complete samples taken.
    pub samples: u64,
    /// Samples that failed (the source's error); the last complete sample stays served.
    pub errors: u64,
}

/// The two encodings of one sample, each without its end (the age of the sample, and the
/// OpenMetrics `# EOF`, are added at scrape time).
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    /// Prometheus text format 0.0.4.
    pub prometheus: String,
    /// OpenMetrics text 1.0.0, without `# EOF`.
    pub openmetrics: String,
}

/// A string from outside, safe as a label value: control characters replaced (the crate
/// escapes quotes, backslashes and newlines; a terminal that shows a label must not act on
/// an escape sequence), at most `max` characters.
pub fn label_text(text: &str, max: usize) -> String {
    crate::text::clean(text).chars().take(max).collect()
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
/// namespace, pod and container, and the Slurm job; empty (the same as absent to PromQL)
/// where nothing names one. One value each per process, so they add no series.
pub(super) fn owner_labels(owner: Option<&crate::sample::owner::Owner>) -> Labels {
    let text =
        |value: Option<&String>| value.map_or_else(String::new, |v| label_text(v, COMMAND_CHARS));
    vec![
        ("namespace", text(owner.and_then(|o| o.namespace.as_ref()))),
        ("pod", text(owner.and_then(|o| o.pod.as_ref()))),
        ("container", text(owner.and_then(|o| o.container.as_ref()))),
        ("slurm_job", text(owner.and_then(|o| o.slurm_job.as_ref()))),
    ]
}

/// Builds and encodes the metrics of one observed instant.
pub fn encode(observed: &Observed, counts: SamplerCounts, max_processes: usize) -> Exposition {
    let registry = registry(observed, counts, max_processes);
    let mut exposition = Exposition::default();
    // Writing to a String cannot fail; an encoder error would leave a metric out, not stop
    // the sampler.
    let _ = prometheus_text::encode(&mut exposition.prometheus, &registry);
    let _ = text::encode_registry(&mut exposition.openmetrics, &registry);
    exposition
}

/// The sample's age at scrape time, and the OpenMetrics end, appended to a stored body.
pub fn finish(body: &str, age_secs: Option<f64>, openmetrics: bool) -> String {
    let mut registry = Registry::default();
    if let Some(age) = age_secs {
        let gauge = Gauge::<f64, AtomicU64>::default();
        gauge.set(age);
        registry.register_with_unit(
            "strata_sample_age",
            "Seconds since the sample served was taken (grows while sampling fails)",
            Unit::Seconds,
            gauge,
        );
    }
    let mut out = String::with_capacity(body.len() + 256);
    out.push_str(body);
    if openmetrics {
        let _ = text::encode_registry(&mut out, &registry);
        let _ = text::encode_eof(&mut out);
    } else {
        let _ = prometheus_text::encode(&mut out, &registry);
    }
    out
}

fn registry(observed: &Observed, counts: SamplerCounts, max_processes: usize) -> Registry {
    let sample = &observed.sample;
    let mut registry = Registry::default();

    // The node and the sampler.
    let info = Family::<Labels, Gauge>::default();
    let mut node = vec![("host", label_text(&sample.host, 128))];
    if let Some(v) = &sample.driver_version {
        node.push(("driver_version", label_text(v, 64)));
    }
    if let Some(v) = &sample.cuda_driver_version {
        node.push(("cuda_driver_version", label_text(v, 64)));
    }
    node.push(("version", env!("CARGO_PKG_VERSION").to_string()));
    info.get_or_create(&node).set(1);
    registry.register(
        "strata_node_info",
        "The node strata samples: host name, driver and CUDA versions (value 1)",
        info,
    );
    let time = Gauge::<f64, AtomicU64>::default();
    time.set(sample.time);
    registry.register_with_unit(
        "strata_sample_timestamp",
        "When the sample served was taken, unix time (the demo's is story time)",
        Unit::Seconds,
        time,
    );
    let interval = Gauge::<f64, AtomicU64>::default();
    interval.set(sample.interval);
    registry.register_with_unit(
        "strata_sample_interval",
        "Seconds between samples (--interval; story seconds for the demo)",
        Unit::Seconds,
        interval,
    );
    if let Some(poll) = sample.poll_secs {
        let gauge = Gauge::<f64, AtomicU64>::default();
        gauge.set(poll);
        registry.register_with_unit(
            "strata_sample_poll",
            "How long NVML's poll for the sample served took",
            Unit::Seconds,
            gauge,
        );
    }
    let samples = Counter::<u64>::default();
    samples.inc_by(counts.samples);
    registry.register(
        "strata_samples",
        "Complete samples taken since strata serve started",
        samples,
    );
    let errors = Counter::<u64>::default();
    errors.inc_by(counts.errors);
    registry.register(
        "strata_sample_errors",
        "Samples that failed since strata serve started (the last complete one stays served)",
        errors,
    );

    // GPUs and MIG instances.
    let gpu_total = Ints::default();
    let gpu_layers = Ints::default();
    let gpu_lost = Ints::default();
    let mig_total = Ints::default();
    let mig_layers = Ints::default();
    let gpu_bounds = Ints::default();
    let mig_bounds = Ints::default();
    for (gpu, acc) in sample.gpus.iter().zip(&observed.account.gpus) {
        let mut base = vec![
            ("gpu", gpu.index.to_string()),
            ("uuid", label_text(&gpu.uuid, 128)),
        ];
        if let Some(name) = &gpu.name {
            base.push(("name", label_text(name, 96)));
        }
        gpu_lost.get_or_create(&base).set(i64::from(gpu.lost));
        if let Some(memory) = gpu.memory {
            set_bytes(&gpu_total, base.clone(), memory.total);
        }
        set_layers(&gpu_layers, &base, acc.layers.as_ref().ok());
        let bounds = crate::snapshot::device_bounds(acc.layers.as_ref().ok(), acc.context_source);
        set_bounds(&gpu_bounds, &base, &bounds);
        for (position, (mig, macc)) in gpu.mig.iter().zip(&acc.mig).enumerate() {
            // The compute instances of one GPU instance share its memory: one series set per
            // GPU instance, named by its first compute instance, so sums count it once.
            if !macc.leads(position) {
                continue;
            }
            let mut labels = vec![
                ("gpu", gpu.index.to_string()),
                ("gpu_uuid", label_text(&gpu.uuid, 128)),
                ("uuid", label_text(&mig.uuid, 128)),
            ];
            if let Some(profile) = &mig.profile {
                labels.push(("profile", label_text(profile, 32)));
            }
            if let Some(gi) = mig.gpu_instance_id {
                labels.push(("gpu_instance", gi.to_string()));
            }
            if let Some(memory) = mig.memory {
                set_bytes(&mig_total, labels.clone(), memory.total);
            }
            set_layers(&mig_layers, &labels, macc.layers.as_ref().ok());
            let bounds =
                crate::snapshot::device_bounds(macc.layers.as_ref().ok(), macc.context_source);
            set_bounds(&mig_bounds, &labels, &bounds);
        }
    }
    registry.register_with_unit(
        "strata_gpu_memory_total",
        "NVML's total memory of a GPU",
        Unit::Bytes,
        gpu_total,
    );
    registry.register_with_unit(
        "strata_gpu_layer",
        "A GPU's memory by layer (live, fragmented, cached, outside_pool, context, unattributed, other, free); the known layers add up to strata_gpu_memory_total_bytes; an unknown layer is absent",
        Unit::Bytes,
        gpu_layers,
    );
    registry.register(
        "strata_gpu_layer_bound",
        "1 for each layer of a GPU that is a bound, not exact (bound=upper: an estimated context; bound=lower: the memory outside the pool beside it)",
        gpu_bounds,
    );
    registry.register(
        "strata_gpu_lost",
        "1 when the GPU has fallen off the bus",
        gpu_lost,
    );
    registry.register_with_unit(
        "strata_mig_memory_total",
        "NVML's total memory of a MIG GPU instance",
        Unit::Bytes,
        mig_total,
    );
    registry.register_with_unit(
        "strata_mig_layer",
        "A MIG GPU instance's memory by layer; the known layers add up to strata_mig_memory_total_bytes; an unknown layer is absent",
        Unit::Bytes,
        mig_layers,
    );

    registry.register(
        "strata_mig_layer_bound",
        "1 for each layer of a MIG GPU instance that is a bound, not exact (bound=upper or lower)",
        mig_bounds,
    );

    super::processes::register(&mut registry, observed, max_processes);
    super::findings::register(&mut registry, observed);
    registry
}

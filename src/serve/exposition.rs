//! One observed instant as Prometheus metrics (`docs/prometheus.md`): built with the
//! `prometheus-client` crate, encoded once per sample, so that a scrape only copies text.
//!
//! Unknown is absent: Prometheus has no `n/a`, so a layer, a figure or a label nobody knows
//! is left out, never written as 0.

use super::labels::{gpu_labels, label_text, set_bounds, set_bytes, set_layers, Ints, Labels};
use crate::pipeline::Observed;
use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;

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

/// `strata_node_info`'s `exports`: the families, comma-separated, whose absence on a node says
/// "none" rather than "not exported": `device_findings` (strata_device_findings, with
/// strata_oom_forecast_seconds and strata_climb_rate_bytes_per_second).
pub const EXPORTS: &str = "device_findings";

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
    // What this strata exports that an older one did not: a reader (strata fleet) tells a
    // device with no finding from a node whose strata exports none.
    node.push(("exports", EXPORTS.to_string()));
    info.get_or_create(&node).set(1);
    registry.register(
        "strata_node_info",
        "The node strata samples: host name, driver and CUDA versions, what it exports (value 1)",
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
        let base = gpu_labels(gpu);
        gpu_lost.get_or_create(&base).set(i64::from(gpu.lost));
        if let Some(memory) = gpu.memory {
            set_bytes(&gpu_total, base.clone(), memory.total);
        }
        set_layers(&gpu_layers, &base, acc.layers.as_ref().ok());
        set_bounds(&gpu_bounds, &base, &acc.bounds());
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
            set_bounds(&mig_bounds, &labels, &macc.bounds());
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
        "1 for each layer of a GPU that is a bound, not exact (bound=upper: an estimated context, or other while the GPU's process list cannot be read; bound=lower: the memory outside the pool beside an estimated context)",
        gpu_bounds,
    );
    registry.register(
        "strata_gpu_lost",
        "1 when the GPU has fallen off the bus",
        gpu_lost,
    );
    super::vitals::register(&mut registry, sample);
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

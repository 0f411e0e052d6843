//! The three tables `strata export` writes, as rows of cells: their columns (names with
//! units, types, meanings) and how each row is made from what the pipeline derived from a
//! sample (devices, processes) or from the analysis (findings). Pure: the writers of each
//! format take the rows.
//!
//! Unknown is a null cell, never 0. Every string from the recording is made safe for a
//! terminal ([`crate::text::clean`]): a CSV is read with `head` as often as with pandas.

use crate::analyze::Episode;
use crate::history::ProcessId;
use crate::layers::Layer;
use crate::pipeline::Observed;
use crate::sample::AllocatorStats;
use std::borrow::Cow;
use std::collections::HashMap;

/// The schema of an export, in every Parquet file's key-value metadata.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
pub(crate) const SCHEMA: &str = "strata.export/1";

/// A column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// 64-bit float.
    Float,
    /// 64-bit signed integer.
    Int,
    Bool,
    /// UTF-8 text.
    Text,
}

/// One column of a table.
#[derive(Debug)]
// Its type, nullability and meaning are read by the Parquet writer only.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
pub(crate) struct Column {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) nullable: bool,
    pub(crate) meaning: &'static str,
}

/// One table: its file's stem, what a row is, its columns.
#[derive(Debug)]
pub(crate) struct Table {
    pub(crate) name: &'static str,
    // Read by the Parquet writer only.
    #[cfg_attr(not(feature = "parquet"), allow(dead_code))]
    pub(crate) meaning: &'static str,
    pub(crate) columns: &'static [Column],
}

const fn column(name: &'static str, kind: Kind, nullable: bool, meaning: &'static str) -> Column {
    Column {
        name,
        kind,
        nullable,
        meaning,
    }
}

/// One cell of a row, in its column's kind.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell<'a> {
    Float(Option<f64>),
    Int(Option<i64>),
    Bool(Option<bool>),
    Text(Option<Cow<'a, str>>),
}

/// A string from outside, safe for a terminal.
fn text(s: &str) -> Cell<'_> {
    Cell::Text(Some(crate::text::clean(s)))
}

fn maybe_text(s: Option<&str>) -> Cell<'_> {
    Cell::Text(s.map(crate::text::clean))
}

/// Bytes and counts as a signed 64-bit integer, what every reader computes with; a figure
/// past 2^63, which no device holds, is not a number strata can stand behind: null.
fn int(v: Option<u64>) -> Cell<'static> {
    Cell::Int(v.and_then(|v| i64::try_from(v).ok()))
}

pub(crate) const DEVICES: Table = Table {
    name: "devices",
    meaning: "one row per device (GPU, or MIG instance) per layer per sample: the partition \
              of the device's memory the monitor shows (the layers of `strata snapshot --json`); \
              the known layers of a device at a sample add up to its NVML total",
    columns: &[
        column("time_unix_s", Kind::Float, false, "when the sample was taken, unix seconds (the demo: story seconds)"),
        column("gpu_index", Kind::Int, false, "NVML's index of the GPU (of a MIG instance: its GPU's)"),
        column("gpu_uuid", Kind::Text, false, "the GPU's UUID (of a MIG instance: its GPU's)"),
        column("mig_uuid", Kind::Text, true, "the MIG instance's UUID; null for the whole GPU. Compute instances of one GPU instance share its memory, and so its layers"),
        column("device_uuid", Kind::Text, false, "the MIG instance's UUID, else the GPU's: what processes.device_uuid names"),
        column("layer", Kind::Text, false, "live, fragmented, cached, outside_pool, context, unattributed, other, free"),
        column("bytes", Kind::Int, true, "the layer's bytes; null where nothing is known of it on this device (no feed reports it) or the device's layers are unknown (layers_gap)"),
        column("partial", Kind::Bool, false, "the layer sums only the processes whose share is known while another's is not: a lower bound"),
        column("bound", Kind::Text, true, "upper or lower where the layer is derived from an estimate (an estimated context is an upper bound, the memory outside the pool beside it a lower one); null where exact"),
        column("layers_gap", Kind::Text, true, "why the device's layers are unknown (a lost GPU, NVML figures that contradict each other); null where known"),
    ],
};

pub(crate) const PROCESSES: Table = Table {
    name: "processes",
    meaning: "one row per process per device per metric per reading, long form: NVML's figures \
              at the sample's time, the allocator feed's at the time the agent read them \
              (its backlog included, each reading once)",
    columns: &[
        column("time_unix_s", Kind::Float, false, "when the value was measured, unix seconds: the sample's time for NVML's figures and outside_pool, the agent's reading time for the allocator's"),
        column("pid", Kind::Int, false, "the process's PID in the host's PID namespace"),
        column("start_time_ticks", Kind::Int, true, "the process's start, clock ticks since boot (/proc/PID/stat field 22): with pid, tells a reused PID apart"),
        column("device_uuid", Kind::Text, false, "the GPU or MIG instance the process holds memory on"),
        column("metric", Kind::Text, false, "what value is (strata.metric.NAME in the metadata says each)"),
        column("unit", Kind::Text, false, "bytes, percent or count"),
        column("value", Kind::Int, true, "the metric's value in its unit; null where unknown at that reading"),
        column("step", Kind::Int, true, "training steps the process had completed at the allocator's reading; null for NVML's figures, or where the framework gives no steps"),
        column("at_step_end", Kind::Bool, true, "the allocator's reading was taken at the end of a step; null for NVML's figures"),
    ],
};

pub(crate) const FINDINGS: Table = Table {
    name: "findings",
    meaning: "one row per finding over the time it held, as `strata analyze --json` gives them",
    columns: &[
        column(
            "kind",
            Kind::Text,
            false,
            "what the finding is about: climb, oom, zombie_context, ...",
        ),
        column(
            "severity",
            Kind::Text,
            false,
            "info, warning or critical: the worst it reached",
        ),
        column(
            "since_unix_s",
            Kind::Float,
            false,
            "when it was first raised, unix seconds",
        ),
        column(
            "until_unix_s",
            Kind::Float,
            false,
            "when it was last seen, unix seconds",
        ),
        column(
            "open",
            Kind::Bool,
            false,
            "it still held at the recording's last sample",
        ),
        column(
            "pid",
            Kind::Int,
            true,
            "the process it is about; null for a device's or the node's",
        ),
        column(
            "device_uuid",
            Kind::Text,
            true,
            "the GPU or MIG instance it is about; null for the node's",
        ),
        column("message", Kind::Text, false, "its message when last seen"),
        column(
            "evidence_json",
            Kind::Text,
            false,
            "its evidence when last seen, a JSON object",
        ),
        column(
            "first_message",
            Kind::Text,
            false,
            "its message when first raised",
        ),
        column(
            "first_evidence_json",
            Kind::Text,
            false,
            "its evidence when first raised, a JSON object",
        ),
    ],
};

/// The metrics of the processes table: what the pipeline keeps in each process's history.
/// Name, unit, meaning.
pub(crate) const METRICS: [(&str, &str, &str); 8] = [
    ("used", "bytes", "NVML's used memory of the process on the device"),
    ("sm", "percent", "NVML's SM utilisation of the process (rows once NVML has given it)"),
    (Layer::OutsidePool.name(), "bytes", "memory the process holds outside its allocator's pool (NCCL, cuDNN, raw cudaMalloc): NVML's used less reserved and the context, as the monitor splits it"),
    ("allocated", "bytes", "the allocator's live tensor bytes (the live layer)"),
    ("reserved", "bytes", "the bytes the allocator's pool holds from the driver"),
    ("inactive_split", "bytes", "free pieces of split blocks in the pool (the fragmented layer)"),
    ("alloc_retries", "count", "allocations that had to free the cache and retry, since the process started"),
    ("ooms", "count", "out-of-memory errors the allocator raised, since the process started"),
];

fn bound_name(bound: crate::accounting::Bound) -> &'static str {
    match bound {
        crate::accounting::Bound::Upper => "upper",
        crate::accounting::Bound::Lower => "lower",
    }
}

/// The devices rows of one sample, each handed to `row`.
pub(crate) fn device_rows<E>(
    observed: &Observed,
    row: &mut impl FnMut(&[Cell]) -> Result<(), E>,
) -> Result<(), E> {
    let sample = &observed.sample;
    let time = Cell::Float(Some(sample.time));
    for (gpu, acc) in sample.gpus.iter().zip(&observed.account.gpus) {
        let mut devices = vec![(None, &gpu.uuid, &acc.layers, &acc.partial, acc.bounds())];
        for (m, macc) in gpu.mig.iter().zip(&acc.mig) {
            devices.push((
                Some(&m.uuid),
                &m.uuid,
                &macc.layers,
                &macc.partial,
                macc.bounds(),
            ));
        }
        for (mig, device, layers, partial, bounds) in devices {
            let known = layers.as_ref().ok();
            let gap = layers.as_ref().err().map(|g| g.describe());
            for layer in Layer::ALL {
                row(&[
                    time.clone(),
                    Cell::Int(Some(i64::from(gpu.index))),
                    text(&gpu.uuid),
                    maybe_text(mig.map(String::as_str)),
                    text(device),
                    Cell::Text(Some(Cow::Borrowed(layer.name()))),
                    int(known.and_then(|l| l.get(layer))),
                    Cell::Bool(Some(partial.contains(&layer))),
                    Cell::Text(bounds.get(&layer).map(|&b| Cow::Borrowed(bound_name(b)))),
                    maybe_text(gap.as_deref()),
                ])?;
            }
        }
    }
    Ok(())
}

/// What the processes rows remember of each process (pid, start, device) from one sample
/// to the next.
#[derive(Debug, Default)]
struct Seen {
    /// The time of the allocator's latest reading written: a reading a sample carries again
    /// (no newer one had arrived) is written once.
    last_reading: Option<f64>,
    /// The metrics once known (by their index in [`METRICS`]): from then on an unknown value
    /// is a null row, a gap; a metric never known (a backend without a pool) has no rows.
    known: u8,
}

impl Seen {
    /// Whether a row is written for metric `index` of value `value`.
    fn keeps(&mut self, index: usize, value: Option<u64>) -> bool {
        if value.is_some() {
            self.known |= 1 << index;
        }
        self.known & (1 << index) != 0
    }
}

/// The processes rows, sample after sample.
#[derive(Debug, Default)]
pub(crate) struct ProcessRows {
    seen: HashMap<ProcessId, Seen>,
}

/// A metric's index in [`METRICS`].
fn metric(name: &str) -> usize {
    METRICS.iter().position(|m| m.0 == name).unwrap_or(0)
}

impl ProcessRows {
    /// The processes rows of one sample, each handed to `row`.
    pub(crate) fn rows<E>(
        &mut self,
        observed: &Observed,
        row: &mut impl FnMut(&[Cell]) -> Result<(), E>,
    ) -> Result<(), E> {
        let sample = &observed.sample;
        for (p, acc) in sample.processes.iter().zip(&observed.account.processes) {
            let seen = self.seen.entry(ProcessId::of(p)).or_default();
            let pid = Cell::Int(Some(i64::from(p.pid)));
            let start = int(p.start_time);
            let device = text(&p.device_uuid);
            let mut put = |time: f64,
                           name: &str,
                           value: Option<u64>,
                           reading: Option<&AllocatorStats>|
             -> Result<(), E> {
                let index = metric(name);
                row(&[
                    Cell::Float(Some(time)),
                    pid.clone(),
                    start.clone(),
                    device.clone(),
                    Cell::Text(Some(Cow::Borrowed(METRICS[index].0))),
                    Cell::Text(Some(Cow::Borrowed(METRICS[index].1))),
                    int(value),
                    int(reading.and_then(|r| r.step)),
                    Cell::Bool(reading.map(|r| r.at_step_end)),
                ])
            };
            let time = sample.time;
            put(time, "used", p.used, None)?;
            let sm = p.sm_util.map(u64::from);
            if seen.keeps(metric("sm"), sm) {
                put(time, "sm", sm, None)?;
            }
            let outside = acc.layers.outside_pool;
            if seen.keeps(metric(Layer::OutsidePool.name()), outside) {
                put(time, Layer::OutsidePool.name(), outside, None)?;
            }
            let Some(feed) = &p.feed else { continue };
            // The readings that arrived since the sample before (a feed met for the first
            // time brings its backlog), then the latest, each at its own time.
            let earlier = feed.earlier(sample);
            for stats in earlier.iter().chain(std::iter::once(&feed.stats)) {
                if seen.last_reading.is_some_and(|last| stats.time <= last) {
                    continue;
                }
                seen.last_reading = Some(stats.time);
                let t = stats.time;
                put(t, "allocated", Some(stats.allocated), Some(stats))?;
                for (name, value) in [
                    ("reserved", stats.reserved),
                    ("inactive_split", stats.inactive_split),
                    ("alloc_retries", stats.alloc_retries),
                    ("ooms", stats.ooms),
                ] {
                    if seen.keeps(metric(name), value) {
                        put(t, name, value, Some(stats))?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The findings row of one episode.
pub(crate) fn finding_row(e: &Episode) -> Vec<Cell<'_>> {
    let name = |v: serde_json::Value| v.as_str().map(str::to_string).unwrap_or_default();
    let json = |v: &crate::detect::Evidence| {
        let text = serde_json::to_string(v).unwrap_or_else(|_| "null".into());
        Cell::Text(Some(Cow::Owned(crate::text::clean(&text).into_owned())))
    };
    vec![
        Cell::Text(Some(Cow::Owned(e.kind.name()))),
        Cell::Text(Some(Cow::Owned(name(
            serde_json::to_value(e.severity).unwrap_or_default(),
        )))),
        Cell::Float(Some(e.since)),
        Cell::Float(Some(e.until)),
        Cell::Bool(Some(e.open)),
        Cell::Int(e.pid.map(i64::from)),
        maybe_text(e.device_uuid.as_deref()),
        text(&e.message),
        json(&e.evidence),
        text(&e.first_message),
        json(&e.first_evidence),
    ]
}

#[cfg(test)]
#[path = "tables_tests.rs"]
mod tests;

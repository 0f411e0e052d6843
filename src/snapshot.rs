//! `strata snapshot --json`: one instant, every layer and finding, as one JSON object.
//!
//! Schema `strata.snapshot/1`. Bytes are integers; unknown is `null`. The raw fields are
//! those of [`crate::sample`]; `layers`, `feed_status` and `findings` are derived, and
//! readers of recordings recompute them.

use crate::accounting::{Bounds, FeedStatus, Gap, ProcessLayers};
use crate::context::ContextSource;
use crate::detect::Finding;
use crate::layers::{Layer, Layers};
use crate::pipeline::Observed;
use crate::sample::feed::{FeedRecord, FeedScan};
use crate::sample::{
    DeviceFileScan, DeviceMemory, FeedSample, GpuInfo, HostMemory, MigInfo, MigSample,
    ProcessSample,
};
use serde::Serialize;
use std::collections::BTreeMap;

pub(crate) const SCHEMA: &str = crate::sample::SNAPSHOT_SCHEMA;

#[derive(Serialize)]
pub struct Snapshot<'a> {
    pub(crate) schema: &'static str,
    pub(crate) time: f64,
    pub(crate) interval: f64,
    pub(crate) host: &'a str,
    /// The built-in demo's sample (its times are the story's clock); absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) demo: bool,
    pub(crate) driver_version: Option<&'a str>,
    pub(crate) cuda_driver_version: Option<&'a str>,
    pub(crate) host_pid_namespace: Option<bool>,
    /// How long NVML's poll for this sample took, in seconds.
    pub(crate) poll_secs: Option<f64>,
    /// What NVML refused for the node (`device_count`, `driver`).
    pub(crate) problems: &'a BTreeMap<String, String>,
    /// The host's CPU in use over the last interval, percent of all cores.
    pub(crate) host_cpu_percent: Option<f64>,
    /// The host's memory, bytes.
    pub(crate) host_memory: Option<HostMemory>,
    /// Who holds the GPUs' device files open (searched only while a context outlives its
    /// process).
    pub(crate) device_files: Option<&'a DeviceFileScan>,
    pub(crate) gpus: Vec<GpuOut<'a>>,
    pub(crate) processes: Vec<ProcessOut<'a>>,
    /// Every allocator feed: who it is (kernel credentials and hello), its state, its
    /// latest statistics per device, and its counters of bad input. `earlier` (what arrived
    /// since the previous sample: a new feed's whole backlog) is thinned to at most
    /// [`EARLIER_SHOWN`] samples, evenly spread, the first and last always kept.
    pub(crate) feeds: Vec<FeedRecord>,
    /// What the search for feeds met that is not a feed: feed dirs cut short at the scan's
    /// budget, and suspicious entries where a feed dir or a socket belongs.
    pub(crate) feed_scan: &'a FeedScan,
    pub(crate) findings: &'a [Finding],
    /// The processes grouped by their owner (`--group-by`): absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) groups: Option<Groups>,
}

/// `groups`: the grouping asked for, and its rows (one per group and device).
#[derive(Serialize)]
pub(crate) struct Groups {
    pub(crate) by: crate::accounting::GroupBy,
    pub(crate) rows: Vec<crate::accounting::GroupRow>,
}

/// A GPU: its raw figures as the sample holds them ([`GpuInfo`]), then what is derived.
#[derive(Serialize)]
pub(crate) struct GpuOut<'a> {
    #[serde(flatten)]
    pub(crate) info: &'a GpuInfo,
    pub(crate) layers: Option<Layers>,
    /// Why `layers` is null, when it is.
    pub(crate) layers_gap: Option<&'a Gap>,
    /// Layers summed over the processes whose share is known while another's is not: lower
    /// bounds.
    pub(crate) partial: &'a [Layer],
    /// Layers derived from a bound (an estimated context): `upper` or `lower`.
    pub(crate) bounds: Bounds,
    /// The least exact source of the contexts summed in `layers.context`.
    pub(crate) context_source: Option<ContextSource>,
    /// What NVML refused for this GPU (`docs/command-line.md`, `problems`).
    pub(crate) problems: &'a BTreeMap<String, String>,
    pub(crate) mig: Vec<MigOut<'a>>,
}

/// A MIG instance: its raw figures ([`MigInfo`]), then what is derived.
#[derive(Serialize)]
pub(crate) struct MigOut<'a> {
    #[serde(flatten)]
    pub(crate) info: &'a MigInfo,
    pub(crate) layers: Option<Layers>,
    pub(crate) layers_gap: Option<&'a Gap>,
    pub(crate) partial: &'a [Layer],
    pub(crate) bounds: Bounds,
    pub(crate) context_source: Option<ContextSource>,
    /// The UUIDs of the compute instances that share this one's GPU instance (and so its
    /// memory and `layers`), itself included.
    pub(crate) gpu_instance_members: Vec<&'a str>,
    pub(crate) problems: &'a BTreeMap<String, String>,
}

/// A process: its raw fields as the sample holds them ([`ProcessSample`]), then what is
/// derived.
#[derive(Serialize)]
pub(crate) struct ProcessOut<'a> {
    #[serde(flatten)]
    pub(crate) raw: &'a ProcessSample,
    /// The feed's statistics for this device, matched to NVML's listing.
    pub(crate) feed: Option<&'a FeedSample>,
    pub(crate) feed_status: &'a FeedStatus,
    pub(crate) layers: ProcessLayers,
    /// Layers derived from a bound: an estimated context is an `upper` bound, the memory
    /// outside the pool beside it a `lower` one.
    pub(crate) bounds: Bounds,
    /// How far its peak of live tensors can grow before an allocation of the same shape
    /// would fail (`headroom.bytes`); `null` without a feed combined at this instant.
    pub(crate) headroom_bytes: Option<i64>,
    /// Its definition's figures: the peak (`peak_live_bytes`, the highest `allocated` over
    /// `peak_window_secs`, strata's last 15 minutes at most) and what the device could give
    /// the pool now (`usable_bytes`: NVML free + reserved − fragmented).
    pub(crate) headroom: Option<crate::detect::Headroom>,
    /// Where `layers.context` comes from: `observed`, `reported` (the agent's own reading at
    /// CUDA init), `estimated`, `fixed`, or `unsplit` (context and memory outside the pool
    /// together, until a reading pairs).
    pub(crate) context_source: Option<ContextSource>,
}

fn split(layers: &Result<Layers, Gap>) -> (Option<Layers>, Option<&Gap>) {
    match layers {
        Ok(l) => (Some(*l), None),
        Err(g) => (None, Some(g)),
    }
}

impl<'a> Snapshot<'a> {
    pub fn of(observed: &'a Observed) -> Self {
        let sample = &observed.sample;
        let gpus = sample
            .gpus
            .iter()
            .zip(&observed.account.gpus)
            .map(|(g, acc)| {
                let (layers, layers_gap) = split(&acc.layers);
                GpuOut {
                    info: &g.info,
                    layers,
                    layers_gap,
                    partial: &acc.partial,
                    bounds: acc.bounds(),
                    context_source: acc.context_source,
                    problems: &g.problems,
                    mig: g
                        .mig
                        .iter()
                        .zip(&acc.mig)
                        .map(|(m, macc)| {
                            let (layers, layers_gap) = split(&macc.layers);
                            MigOut {
                                info: &m.info,
                                layers,
                                layers_gap,
                                partial: &macc.partial,
                                bounds: macc.bounds(),
                                context_source: macc.context_source,
                                gpu_instance_members: macc
                                    .gpu_instance_members
                                    .iter()
                                    .filter_map(|&i| g.mig.get(i).map(|m| m.uuid.as_str()))
                                    .collect(),
                                problems: &m.problems,
                            }
                        })
                        .collect(),
                }
            })
            .collect();
        let processes = sample
            .processes
            .iter()
            .zip(&observed.account.processes)
            .enumerate()
            .map(|(i, (p, acc))| ProcessOut {
                raw: p,
                feed: p.feed.as_deref(),
                feed_status: &acc.feed_status,
                layers: acc.layers,
                bounds: acc.bounds(),
                headroom_bytes: observed.headroom.get(i).copied().flatten().map(|h| h.bytes),
                headroom: observed.headroom.get(i).copied().flatten(),
                context_source: acc.context_source,
            })
            .collect();
        Snapshot {
            schema: SCHEMA,
            time: sample.time,
            interval: sample.interval,
            host: &sample.host,
            demo: sample.demo,
            driver_version: sample.driver_version.as_deref(),
            cuda_driver_version: sample.cuda_driver_version.as_deref(),
            host_pid_namespace: sample.host_pid_namespace,
            poll_secs: sample.poll_secs,
            problems: &sample.problems,
            host_cpu_percent: sample.host_cpu_percent,
            host_memory: sample.host_memory,
            device_files: sample.device_files.as_ref(),
            gpus,
            processes,
            feeds: sample.feeds.iter().map(thinned).collect(),
            feed_scan: &sample.feed_scan,
            findings: &observed.findings,
            groups: None,
        }
    }

    /// The same, with the processes grouped `by` their owner.
    pub fn grouped(observed: &'a Observed, by: crate::accounting::GroupBy) -> Self {
        let mut snapshot = Snapshot::of(observed);
        snapshot.groups = Some(Groups {
            by,
            rows: crate::accounting::groups(&observed.sample, &observed.account.processes, by),
        });
        snapshot
    }
}

/// Earlier feed samples shown per device in the JSON, at most.
pub(crate) const EARLIER_SHOWN: usize = 120;

/// A feed record whose backlog is cut to [`EARLIER_SHOWN`] evenly spread samples: a
/// snapshot of 64 jobs must not print 64 fifteen-minute backlogs.
fn thinned(record: &FeedRecord) -> FeedRecord {
    let mut record = record.clone();
    for device in &mut record.devices {
        let n = device.earlier.len();
        if n > EARLIER_SHOWN {
            let keep = |i: usize| i * (n - 1) / (EARLIER_SHOWN - 1);
            device.earlier = (0..EARLIER_SHOWN)
                .map(|i| device.earlier[keep(i)].clone())
                .collect();
        }
    }
    record
}

/// A plain-text summary of one instant, for `strata snapshot` without `--json`: each device's
/// layers, the processes holding memory, and the findings. Every string that comes from
/// outside (NVML, `/proc`, feeds) goes through [`crate::text::clean`]: this goes to a
/// terminal.
///
/// The demo's instant is told as story time (`at story 15m05s`), never as a UTC clock.
/// `GI1/CI0+1`: a GPU instance and the compute instances that share its memory (`members`,
/// positions in `all`; `m` stands for them), as the monitor names it; `GI1` without compute
/// instance ids, empty without a GPU instance id.
pub(crate) fn instance_ids(all: &[MigSample], members: &[usize], m: &MigSample) -> String {
    let cis: Vec<String> = if members.is_empty() {
        m.compute_instance_id.iter().map(u32::to_string).collect()
    } else {
        members
            .iter()
            .filter_map(|&i| all.get(i).and_then(|c| c.compute_instance_id))
            .map(|c| c.to_string())
            .collect()
    };
    match (m.gpu_instance_id, cis.is_empty()) {
        (Some(g), false) => format!("GI{g}/CI{}", cis.join("+")),
        (Some(g), true) => format!("GI{g}"),
        (None, _) => String::new(),
    }
}

pub fn text(observed: &Observed, demo: bool) -> String {
    use crate::text::clean;
    use crate::units::{bytes, opt_bytes};
    use std::fmt::Write;
    let s = &observed.sample;
    let mut out = String::new();
    let when = if demo {
        crate::source::demo::story_time(s.time)
    } else {
        format!("{} UTC", crate::units::clock(s.time))
    };
    let _ = writeln!(
        out,
        "{} at {when} · driver {} · CUDA {}",
        clean(&s.host),
        clean(s.driver_version.as_deref().unwrap_or("n/a")),
        clean(s.cuda_driver_version.as_deref().unwrap_or("n/a"))
    );
    let device = |out: &mut String,
                  label: String,
                  memory: Option<DeviceMemory>,
                  layers: &Result<Layers, Gap>,
                  exactness: crate::present::Exactness<'_>| {
        let total = memory.map_or_else(|| "n/a".into(), |m| bytes(m.total));
        let _ = writeln!(out, "{} (total {total})", clean(&label));
        match layers {
            Ok(l) => {
                for layer in crate::layers::Layer::ALL {
                    let figure = match l.get(layer) {
                        Some(v) => format!("{}{}", exactness.mark(layer), bytes(v)),
                        None => "n/a".into(),
                    };
                    let _ = writeln!(out, "    {:<13} {figure:>10}", layer.name());
                }
            }
            Err(gap) => {
                let _ = writeln!(out, "    layers n/a: {}", clean(&gap.describe()));
            }
        }
    };
    for (g, acc) in s.gpus.iter().zip(&observed.account.gpus) {
        device(
            &mut out,
            format!("GPU {} {}", g.index, g.name.as_deref().unwrap_or("n/a")),
            g.memory,
            &acc.layers,
            crate::present::Exactness {
                context: acc.context_source,
                partial: &acc.partial,
                processes_unknown: !acc.processes_known,
            },
        );
        for (position, (m, macc)) in g.mig.iter().zip(&acc.mig).enumerate() {
            // The compute instances of one GPU instance share its memory: told once.
            if !macc.leads(position) {
                continue;
            }
            let ids = instance_ids(&g.mig, &macc.gpu_instance_members, m);
            device(
                &mut out,
                format!(
                    "  MIG {}{}{ids}",
                    m.profile.as_deref().unwrap_or(&m.uuid),
                    if ids.is_empty() { "" } else { " " }
                ),
                m.memory,
                &macc.layers,
                crate::present::Exactness {
                    context: macc.context_source,
                    partial: &macc.partial,
                    processes_unknown: !macc.processes_known,
                },
            );
        }
    }
    if !s.processes.is_empty() {
        let _ = writeln!(out, "Processes ({})", s.processes.len());
        let _ = writeln!(
            out,
            "    {:>7}  {:<10} {:<14} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9}  {:<10} COMMAND",
            "PID",
            "USER",
            "GPU",
            "USED",
            Layer::Live.head(),
            Layer::Cached.head(),
            Layer::Fragmented.head(),
            Layer::Context.head(),
            Layer::OutsidePool.head(),
            "STATE"
        );
    }
    let host_ns = s.host_pid_namespace;
    for (p, acc) in s.processes.iter().zip(&observed.account.processes) {
        let place = match s.locate(&p.device_uuid) {
            Some((g, None)) => format!("GPU {}", g.index),
            Some((g, Some(m))) => {
                format!("GPU {} {}", g.index, m.profile.as_deref().unwrap_or("MIG"))
            }
            None => p.device_uuid.to_string(),
        };
        let l = &acc.layers;
        let state = crate::present::state_label(p, &acc.feed_status, host_ns);
        let _ = writeln!(
            out,
            "    {:>7}  {:<10} {:<14} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9}  {:<10} {}",
            p.pid,
            crate::text::clean(&crate::present::fit(p.user.as_deref().unwrap_or("n/a"), 10)),
            crate::present::fit(&clean(&place), 14),
            opt_bytes(p.used),
            opt_bytes(l.live),
            opt_bytes(l.cached),
            opt_bytes(l.fragmented),
            match l.context {
                Some(c) => format!(
                    "{}{}",
                    acc.context_source.map_or("", |s| s.mark()),
                    bytes(c)
                ),
                None => "n/a".into(),
            },
            match l.outside_pool {
                Some(v) => format!(
                    "{}{}",
                    acc.bounds()
                        .get(&crate::layers::Layer::OutsidePool)
                        .map_or("", |b| b.mark()),
                    bytes(v)
                ),
                None => "n/a".into(),
            },
            state,
            match (&p.command, p.visible, p.hidden) {
                (Some(command), _, _) => clean(command),
                (None, _, true) => "n/a (hidden by /proc)".into(),
                (None, false, false) => "n/a (not in this /proc)".into(),
                (None, true, false) => "n/a".into(),
            }
        );
    }
    for f in &observed.findings {
        let _ = writeln!(out, "[{}] {}", f.severity.label(), clean(&f.message));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fixtures::{feed_record, stats};
    use crate::sample::feed::DeviceFeed;

    #[test]
    fn a_long_backlog_is_thinned_keeping_its_ends_and_order() {
        let earlier = (0..1800)
            .map(|i| stats(0, i, 0.0, f64::from(i as u32)))
            .collect();
        let record = FeedRecord {
            peer: None,
            nspid: None,
            hello: None,
            devices: vec![DeviceFeed {
                latest: stats(0, 1800, 0.0, 1800.0),
                earlier,
            }],
            ..feed_record(1, 0)
        };
        let shown = thinned(&record);
        let kept: Vec<u64> = shown.devices[0]
            .earlier
            .iter()
            .filter_map(|s| s.reserved)
            .collect();
        assert_eq!(kept.len(), EARLIER_SHOWN);
        assert_eq!(kept.first(), Some(&0));
        assert_eq!(kept.last(), Some(&1799));
        assert!(kept.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            shown.devices[0].latest.reserved,
            Some(1800),
            "the latest is whole"
        );
    }

    /// Every string in the text view that comes from outside, with escapes, bidi overrides,
    /// zero-width characters and newlines planted in each: none reaches the output raw, and
    /// each is still there, defused.
    #[test]
    fn the_text_view_defuses_every_string_from_outside() {
        let mut sample = crate::source::demo::node_at(0, 600.0, 10.0);
        sample.host = "node\u{1b}]0;pwned\u{7}".into();
        sample.driver_version = Some("550\u{1b}[2J".into());
        sample.cuda_driver_version = Some("12.4\u{202e}".into());
        sample.gpus[0].name = Some("H100\u{9b}31m".into());
        let mig = sample
            .gpus
            .iter()
            .position(|g| !g.mig.is_empty())
            .expect("the demo has MIG");
        sample.gpus[mig].mig[0].profile = Some("3g\u{200b}.40gb".into());
        sample.processes[0].command = Some("python\ntrain.py \u{1b}]0;pwned\u{7}".into());
        sample.processes[0].user = Some("ro\u{feff}ot\r".into());
        let observed = crate::pipeline::Pipeline::new(None).ingest(sample);
        let shown = text(&observed, false);
        let raw: Vec<char> = shown
            .chars()
            .filter(|&c| c != '\n' && crate::text::clean(&c.to_string()) != c.to_string())
            .collect();
        assert!(raw.is_empty(), "raw {raw:?} in:\n{shown}");
        for defused in [
            "node\u{fffd}]0;pwned\u{fffd}",
            "driver 550\u{fffd}[2J",
            "CUDA 12.4\u{fffd}",
            "H100\u{fffd}31m",
            "3g\u{fffd}.40gb",
            "python\u{fffd}train.py \u{fffd}]0;pwned\u{fffd}",
            "ro\u{fffd}ot\u{fffd}",
        ] {
            assert!(
                shown.contains(defused),
                "{defused:?} missing from:\n{shown}"
            );
        }
        // A newline in a command line does not start a line of its own.
        assert!(!shown.lines().any(|l| l.starts_with("train.py")), "{shown}");
    }

    /// A GPU whose GPU instance 2 has two compute instances (0 and 1) sharing 14 GiB of its
    /// memory, each with a process of its own; and GPU instance 3 with one.
    pub(crate) fn two_compute_instances() -> crate::sample::NodeSample {
        use crate::fixtures::{gpu, memory, mig, node, process, GIB};
        let mut s = node();
        let mut g = gpu(0, memory(80 * GIB, 20 * GIB));
        g.mig_mode = Some(true);
        for (uuid, gi, ci, used) in [
            ("MIG-a-0", 2, 0, 14 * GIB),
            ("MIG-a-1", 2, 1, 14 * GIB),
            ("MIG-b-0", 3, 0, 4 * GIB),
        ] {
            let mut m = mig(uuid, "1g.20gb", memory(20 * GIB, used));
            m.gpu_instance_id = Some(gi);
            m.compute_instance_id = Some(ci);
            g.mig.push(m);
        }
        s.gpus.push(g);
        s.processes.push(process(7, "MIG-a-0", Some(6 * GIB)));
        s.processes.push(process(8, "MIG-a-1", Some(8 * GIB)));
        s.processes.push(process(9, "MIG-b-0", Some(4 * GIB)));
        s
    }

    #[test]
    fn a_gpu_instance_with_two_compute_instances_is_told_once_as_the_monitor_names_it() {
        let observed = crate::pipeline::Pipeline::new(None).ingest(two_compute_instances());
        let shown = text(&observed, false);
        let headings: Vec<&str> = shown.lines().filter(|l| l.starts_with("  MIG ")).collect();
        assert_eq!(
            headings,
            [
                "  MIG 1g.20gb GI2/CI0+1 (total 20.0 GiB)",
                "  MIG 1g.20gb GI3/CI0 (total 20.0 GiB)"
            ],
            "{shown}"
        );
        // Its partition once: both processes' 14 GiB unattributed, not twice over.
        let unattributed: Vec<&str> = shown
            .lines()
            .filter(|l| l.trim_start().starts_with("unattributed"))
            .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
            .map(|v| if v == "14.0 GiB" { "14" } else { "other" })
            .collect();
        assert_eq!(
            unattributed.iter().filter(|v| **v == "14").count(),
            1,
            "{shown}"
        );
    }

    #[test]
    fn instance_ids_name_the_gpu_instance_and_its_compute_instances() {
        let s = two_compute_instances();
        let all = &s.gpus[0].mig;
        assert_eq!(instance_ids(all, &[0, 1], &all[0]), "GI2/CI0+1");
        assert_eq!(instance_ids(all, &[2], &all[2]), "GI3/CI0");
        assert_eq!(instance_ids(all, &[], &all[1]), "GI2/CI1");
        let mut bare = all[0].clone();
        bare.compute_instance_id = None;
        assert_eq!(instance_ids(&[bare.clone()], &[0], &bare), "GI2");
        bare.gpu_instance_id = None;
        assert_eq!(instance_ids(&[bare.clone()], &[0], &bare), "");
    }
}

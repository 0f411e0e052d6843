//! The incident report (`strata snapshot --report`, `R` in the monitor): one instant as
//! Markdown, for an issue tracker. It holds what the OOM-diagnosis guides ask of a
//! reproducible report: the GPU and its total memory, driver and CUDA versions, per process
//! the framework, its version and allocator backend, allocated, reserved and their peaks with
//! the interval each peak holds over, used (NVML's) at the same instant, the last
//! OOM with its requested size, and the active findings with their evidence.
//!
//! Every figure carries its metric name and unit, and exact bytes beside the human form, so
//! that a teammate's numbers reconcile. Unknown is `n/a`; a partial sum is marked `≥`.
//! Every string from outside is cleaned and Markdown-escaped ([`markdown::escape`]).

pub mod chart;
mod findings;
pub(crate) mod markdown;
mod oom;
mod pool;
mod process;
#[cfg(test)]
mod tests;

use crate::accounting::Gap;
use crate::context::ContextSource;
use crate::history::{History, Metric, Series, SeriesKey};
use crate::layers::{Layer, Layers};
use crate::pipeline::Observed;
use crate::sample::{DeviceMemory, NodeSample};
use markdown::{escape, figure, opt_escape, Clock};
use std::fmt::Write;

/// The report of the instant `observed`, with the peaks `history` holds up to it. `demo`
/// says the demo's story time beside the report's instant; every time is UTC.
pub fn markdown(observed: &Observed, history: &History, demo: bool) -> String {
    let clock = Clock { demo };
    let mut out = String::new();
    header(&mut out, observed, history, clock);
    devices(&mut out, observed, history, clock);
    process::processes(&mut out, observed, history, clock);
    oom::last_oom(&mut out, observed, clock);
    findings::findings(&mut out, observed, clock);
    unseen(&mut out);
    out
}

/// `strata-report-<host>-<YYYYmmdd-HHMMSS>.md` for the instant of `sample` (UTC; the demo's
/// own fixed clock), the host reduced to characters that are safe in a file name.
pub(crate) fn file_name(sample: &NodeSample) -> String {
    let host: String = sample
        .host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let host = host.trim_start_matches('.');
    let host = if host.is_empty() { "host" } else { host };
    format!("strata-report-{host}-{}.md", Clock::stamp(sample.time))
}

fn header(out: &mut String, observed: &Observed, history: &History, clock: Clock) {
    let s = &observed.sample;
    let _ = writeln!(
        out,
        "# strata report: {} at {}\n",
        escape(&s.host),
        clock.at(s.time)
    );
    let _ = writeln!(out, "| | |\n|---|---|");
    let _ = writeln!(out, "| host | {} |", escape(&s.host));
    let when = if clock.demo {
        format!(
            "{} (the demo's {}: its simulated clock, since its story began)",
            clock.at(s.time),
            crate::source::demo::story_time(s.time)
        )
    } else {
        clock.at(s.time)
    };
    let _ = writeln!(out, "| time | {when} |");
    let poll = s.poll_secs.map_or_else(
        || "n/a".into(),
        |p| format!("NVML's poll for this instant took {p:.3} s, ending at that time"),
    );
    let _ = writeln!(out, "| NVML reading | {poll} |");
    let _ = writeln!(
        out,
        "| sampling interval | {}{} |",
        crate::units::interval(s.interval),
        if clock.demo { " (story seconds)" } else { "" }
    );
    let _ = writeln!(out, "| strata | {} |", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(out, "| history | {} |", history.budget().describe());
    let _ = writeln!(
        out,
        "| NVIDIA driver | {} (NVML `nvmlSystemGetDriverVersion`) |",
        opt_escape(s.driver_version.as_deref())
    );
    let _ = writeln!(
        out,
        "| CUDA | {} (NVML `nvmlSystemGetCudaDriverVersion`: the newest CUDA the driver supports) |",
        opt_escape(s.cuda_driver_version.as_deref())
    );
    for (what, problem) in &s.problems {
        let _ = writeln!(
            out,
            "| NVML refused | {}: {} |",
            escape(what),
            escape(problem)
        );
    }
    let _ = writeln!(
        out,
        "\nBytes in binary units (1 GiB = 2^30 B), the exact count beside each. `n/a`: not \
         known (never 0). `≥`: a sum over the processes whose share is known while another's \
         is not (a lower bound).\n"
    );
}

fn devices(out: &mut String, observed: &Observed, history: &History, clock: Clock) {
    let s = &observed.sample;
    let _ = writeln!(out, "## Devices\n");
    if s.gpus.is_empty() {
        let _ = writeln!(out, "No GPU listed by NVML at this instant.\n");
    }
    for (g, acc) in s.gpus.iter().zip(&observed.account.gpus) {
        let title = format!(
            "GPU {} · {}{}",
            g.index,
            opt_escape(g.name.as_deref()),
            if g.lost {
                " · lost (fallen off the bus)"
            } else {
                ""
            }
        );
        let detail = Device {
            title: &title,
            uuid: &g.uuid,
            uuids: None,
            memory: g.memory,
            layers: &acc.layers,
            partial: &acc.partial,
            context_source: acc.context_source,
        };
        device(out, &detail, history, clock);
        for (what, problem) in &g.problems {
            let _ = writeln!(out, "- NVML refused {}: {}", escape(what), escape(problem));
        }
        if !g.problems.is_empty() {
            out.push('\n');
        }
        for (position, (m, macc)) in g.mig.iter().zip(&acc.mig).enumerate() {
            // The compute instances of one GPU instance share its memory: told once.
            if !macc.leads(position) {
                continue;
            }
            let ids = crate::snapshot::instance_ids(&g.mig, &macc.gpu_instance_members, m);
            let members: Vec<&crate::sample::MigSample> = macc
                .gpu_instance_members
                .iter()
                .filter_map(|&i| g.mig.get(i))
                .collect();
            let cis: Vec<String> = members
                .iter()
                .map(|c| {
                    c.compute_instance_id
                        .map_or_else(|| "n/a".into(), |i| i.to_string())
                })
                .collect();
            let gi = m
                .gpu_instance_id
                .map_or_else(|| "n/a".into(), |i| i.to_string());
            let about = match (ids.is_empty(), members.len() > 1) {
                (true, _) => format!(" (GPU instance {gi})"),
                (false, false) => format!(" {ids}"),
                (false, true) => format!(
                    " {ids} (compute instances {} share GPU instance {gi}'s memory)",
                    cis.join(" and ")
                ),
            };
            let title = format!(
                "GPU {} · MIG {}{about}",
                g.index,
                opt_escape(m.profile.as_deref()),
            );
            // Each compute instance's UUID, where the GPU instance has several.
            let uuids = (members.len() > 1).then(|| {
                members
                    .iter()
                    .zip(&cis)
                    .map(|(c, ci)| format!("{} (CI {ci})", c.uuid))
                    .collect::<Vec<_>>()
                    .join(", ")
            });
            let detail = Device {
                title: &title,
                uuid: &m.uuid,
                uuids: uuids.as_deref(),
                memory: m.memory,
                layers: &macc.layers,
                partial: &macc.partial,
                context_source: macc.context_source,
            };
            device(out, &detail, history, clock);
        }
    }
}

struct Device<'a> {
    title: &'a str,
    /// The device whose history is read.
    uuid: &'a str,
    /// The UUIDs shown, where not `uuid` alone (a GPU instance's compute instances).
    uuids: Option<&'a str>,
    memory: Option<DeviceMemory>,
    layers: &'a Result<Layers, Gap>,
    partial: &'a [Layer],
    context_source: Option<ContextSource>,
}

/// What each layer is summed from, for the table.
fn layer_source(layer: Layer) -> &'static str {
    match layer {
        Layer::Live => "Σ fed processes' live tensors (`allocated_bytes.all.current`)",
        Layer::Fragmented => {
            "Σ fed processes' free split pieces (`inactive_split_bytes.all.current`)"
        }
        Layer::Cached => "Σ fed processes' reserved − live − fragmented",
        Layer::OutsidePool => "Σ fed processes' NVML `used` − reserved − context",
        Layer::Context => "Σ fed processes' CUDA context",
        Layer::Unattributed => "Σ NVML `used` of visible processes without a usable feed",
        Layer::Other => "NVML `total` − `free` − Σ visible processes' `used`",
        Layer::Free => "NVML `free`",
    }
}

fn device(out: &mut String, d: &Device<'_>, history: &History, clock: Clock) {
    let _ = writeln!(out, "### {}\n", d.title);
    let _ = writeln!(out, "UUID {}\n", escape(d.uuids.unwrap_or(d.uuid)));
    let _ = writeln!(out, "| figure | metric | value |\n|---|---|---|");
    let m = d.memory;
    let _ = writeln!(
        out,
        "| total memory | NVML `total` (`nvmlDeviceGetMemoryInfo_v2`) | {} |",
        figure(m.map(|m| m.total))
    );
    let _ = writeln!(
        out,
        "| used | NVML `used` | {} |",
        figure(m.map(|m| m.used))
    );
    let _ = writeln!(
        out,
        "| free | NVML `free` | {} |",
        figure(m.map(|m| m.free))
    );
    let _ = writeln!(
        out,
        "| driver reserved | NVML `reserved` (v2; `n/a` under v1, whose `used` holds it) | {} |",
        figure(m.and_then(|m| m.driver_reserved))
    );
    if let Some(peak) = held_peak(history.get(&SeriesKey::device(d.uuid, Metric::Used))) {
        let _ = writeln!(
            out,
            "| peak occupied | max of NVML `total` − `free` {} | {} |",
            peak.over(clock),
            figure(Some(peak.max))
        );
    }
    out.push('\n');
    match d.layers {
        Ok(layers) => {
            let _ = writeln!(
                out,
                "Layers (they add up to NVML `total`, exactly, in bytes):\n"
            );
            let _ = writeln!(out, "| layer | from | value |\n|---|---|---|");
            for layer in Layer::ALL {
                // A partial sum, or the memory outside the pool beside an estimated context:
                // a lower bound.
                let lower = crate::accounting::context_bounds(d.context_source, true)
                    .get(&layer)
                    .is_some_and(|b| *b == crate::accounting::Bound::Lower);
                let partial = if d.partial.contains(&layer) || lower {
                    "≥ "
                } else {
                    ""
                };
                let mut from = layer_source(layer).to_string();
                if layer == Layer::Context {
                    if let Some(source) = d.context_source {
                        let _ = write!(from, " ({}, the least exact of them)", source.name());
                    }
                }
                let value = match layers.get(layer) {
                    Some(v) => format!("{partial}{}", figure(Some(v))),
                    None => "n/a".into(),
                };
                let _ = writeln!(out, "| {} | {from} | {value} |", layer.name());
            }
            out.push('\n');
        }
        Err(gap) => {
            let _ = writeln!(
                out,
                "Layers: n/a at this instant: {}.\n",
                escape(&gap.describe())
            );
        }
    }
}

/// The largest value a series holds, over every tier, and the span it holds values for.
pub(crate) struct HeldPeak {
    pub(crate) max: u64,
    pub(crate) from: f64,
    pub(crate) to: f64,
    /// Slots of the full-resolution window with no value.
    pub(crate) gaps: usize,
}

impl HeldPeak {
    /// `over strata's history from story 5s to story 15m05s, 15m00s (900 s); kept to 1 KiB, rounded up`.
    pub(crate) fn over(&self, clock: Clock) -> String {
        let gaps = match self.gaps {
            0 => String::new(),
            1 => "; 1 sample unknown".into(),
            n => format!("; {n} samples unknown"),
        };
        format!(
            "over strata's history from {} to {}, {}; kept to 1 KiB, rounded up{gaps}",
            clock.at(self.from),
            clock.at(self.to),
            markdown::span(self.to - self.from)
        )
    }
}

/// The peak of a series over everything it holds (the full-resolution window and the folded
/// tiers, each fold keeping its maximum).
pub(crate) fn held_peak(series: Option<&Series>) -> Option<HeldPeak> {
    let series = series?;
    let mut max: Option<u64> = None;
    for tier in 0..3 {
        for (_, span) in series.points(tier, f64::NEG_INFINITY) {
            if let Some(span) = span {
                max = Some(max.map_or(span.max, |m| m.max(span.max)));
            }
        }
    }
    Some(HeldPeak {
        max: max?,
        from: series.first_time()?,
        to: series.last_time()?,
        gaps: series.raw().filter(|(_, v)| v.is_none()).count(),
    })
}

/// What the guides ask of a report that strata cannot see.
fn unseen(out: &mut String) {
    let _ = writeln!(
        out,
        "## Not in this report\n\n\
         strata sees the driver and the allocators, not the job. A reproducible report also \
         needs, from whoever runs it: the model's precision, batch size, input length, and \
         training or inference; the traceback of the failing allocation; and any controlled \
         change tried (a smaller batch, an allocator setting) with its measured result."
    );
}

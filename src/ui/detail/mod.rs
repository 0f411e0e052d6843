//! The reconciliation view of one process: used (NVML's) = context + outside_pool + reserved,
//! reserved = live + fragmented + cached, each with its metric, unit and time.

mod feed;
mod history;
mod owner;
pub(crate) mod pool;

use super::theme::Theme;
use crate::accounting::{FeedStatus, ProcessAccount};
use crate::app::State;
use crate::context::ContextSource;
use crate::detect::device_name;
use crate::layers::Layer;
use crate::pipeline::Observed;
use crate::present::{fit, grouped, metric_names, peak_words, state_label};
use crate::sample::ProcessSample;
use crate::units;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;

/// `09:11:19.6`: the time of a reading, to a tenth of a second.
pub(super) fn clock_tenths(unix_secs: f64) -> String {
    let tenths = ((unix_secs.fract() * 10.0).floor() as u8).min(9);
    format!("{}.{tenths}", units::clock(unix_secs))
}

pub(super) struct Rows {
    lines: Vec<Line<'static>>,
    width: usize,
}

impl Rows {
    /// One reconciliation row: layer, metric name, exact bytes (where wide enough), human
    /// figure and time of the reading it comes from.
    fn value(&mut self, layer: &str, metric: &str, value: Option<u64>, when: &str, style: Style) {
        self.marked(layer, metric, value, "", when, style);
    }

    /// [`Rows::value`] with a mark before the human figure (`≥` for a lower bound).
    fn marked(
        &mut self,
        layer: &str,
        metric: &str,
        value: Option<u64>,
        mark: &str,
        when: &str,
        style: Style,
    ) {
        let human = match value {
            Some(v) => format!("{mark}{}", units::bytes(v)),
            None => "n/a".into(),
        };
        let exact = if self.width >= 110 {
            format!(
                "{:>20}",
                value.map_or_else(|| "n/a".to_string(), |v| format!("{} B", grouped(v)))
            )
        } else {
            String::new()
        };
        let fixed = 18 + exact.len() + 11 + 2 + when.chars().count();
        let metric_width = self.width.saturating_sub(fixed).max(8);
        let text = format!(
            "{layer:<18}{:<metric_width$}{exact} {human:>10}  {when}",
            fit(metric, metric_width.saturating_sub(1))
        );
        self.lines.push(Line::styled(fit(&text, self.width), style));
    }

    pub(super) fn text(&mut self, text: String, style: Style) {
        self.lines.push(Line::styled(fit(&text, self.width), style));
    }

    pub(super) fn blank(&mut self) {
        self.lines.push(Line::raw(""));
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn draw_detail(
    frame: &mut Frame<'_>,
    area: Rect,
    state: &State,
    observed: &Observed,
    pid: u32,
    device_uuid: &str,
    theme: Theme,
) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.focused_border())
        .title(Line::styled(
            format!(" Reconciliation · PID {pid} "),
            theme.title(),
        ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let sample = &observed.sample;
    let place = device_name(sample, device_uuid);
    let found = sample
        .processes
        .iter()
        .zip(&observed.account.processes)
        .find(|(p, _)| p.pid == pid && *p.device_uuid == *device_uuid);
    let mut rows = Rows {
        lines: Vec::new(),
        width: inner.width as usize,
    };
    match found {
        None => rows.text(
            format!("PID {pid} no longer holds memory on {place}. Esc goes back."),
            theme.dim(),
        ),
        Some((process, account)) => {
            reconcile(&mut rows, state, observed, process, account, &place, theme)
        }
    }
    let visible = inner.height as usize;
    let room = rows.lines.len().saturating_sub(visible);
    state.views.scroll_room.set(Some(room));
    let start = state.views.detail_scroll.min(room);
    super::widgets::put_lines(frame, inner, &rows.lines[start..]);
}

fn reconcile(
    rows: &mut Rows,
    state: &State,
    observed: &Observed,
    p: &ProcessSample,
    account: &ProcessAccount,
    place: &str,
    theme: Theme,
) {
    let sample = &observed.sample;
    let gpu_name = sample
        .locate(&p.device_uuid)
        .and_then(|(g, _)| g.name.clone())
        .unwrap_or_else(|| "n/a".into());
    let mps = if p.mps { " · MPS client" } else { "" };
    rows.text(
        format!(
            "{} · user {} · {}{mps}",
            p.command.as_deref().unwrap_or("command n/a"),
            p.user.as_deref().unwrap_or("n/a"),
            state_label(p, &account.feed_status, sample.host_pid_namespace)
        ),
        theme.title(),
    );
    let framework = p.feed.as_ref().map_or_else(
        || "no allocator feed".to_string(),
        |f| {
            format!(
                "{} {} · allocator backend {}{}",
                f.framework,
                f.framework_version.as_deref().unwrap_or("(version n/a)"),
                f.backend,
                feed::settings_summary(sample, f)
            )
        },
    );
    rows.text(
        format!("on {place} ({gpu_name}) · {framework}"),
        Style::new(),
    );
    let cpu = p
        .cpu_percent
        .map_or_else(|| "n/a".into(), |c| format!("{c:.1}% of a core"));
    rows.text(
        format!(
            "host CPU {cpu} · host memory {} resident · running {} · SM {} · {}",
            units::opt_bytes(p.host_memory),
            p.elapsed
                .map_or_else(|| "n/a".into(), |s| units::duration(s as f64)),
            units::opt_percent(p.sm_util),
            super::host::kind_words(p)
        ),
        Style::new(),
    );
    let nvml_time = clock_tenths(sample.time);
    rows.blank();
    rows.text(
        format!("{:<18}{}", "layer", "metric (times UTC)"),
        theme.table_header(),
    );
    rows.value(
        "used",
        "NVML usedGpuMemory",
        p.used,
        &nvml_time,
        Style::new(),
    );
    let layers = &account.layers;
    match (&p.feed, &account.feed_status) {
        (Some(feed), FeedStatus::Fresh { .. }) => {
            let stats = &feed.stats;
            let names = metric_names(&feed.framework);
            let when = clock_tenths(stats.time);
            let fw = feed.framework.as_str();
            let pool_unknown = stats.reserved.is_none();
            let (context_metric, outside_metric) = match account.context_source {
                _ if pool_unknown => (
                    "n/a: the allocator does not report its pool",
                    "n/a: the allocator does not report its pool",
                ),
                Some(ContextSource::Observed) => (
                    "observed: used while the pool was empty",
                    "used - reserved - context",
                ),
                Some(ContextSource::Reported) => (
                    "reported by the agent: its used at CUDA init, pool empty",
                    "used - reserved - context",
                ),
                Some(ContextSource::Estimated) => (
                    "~ estimated: least used - reserved, paired",
                    "≥ used - reserved - context (a lower bound)",
                ),
                Some(ContextSource::Fixed) => ("fixed: --context-mib", "used - reserved - context"),
                Some(ContextSource::Unsplit) | None => (
                    "≤ unsplit: used - reserved (no paired reading)",
                    "inside the context figure until split",
                ),
            };
            rows.value(
                &format!(" = {}", Layer::Context.name()),
                context_metric,
                layers.context,
                &nvml_time,
                theme.layer(Layer::Context),
            );
            let outside_mark = account
                .bounds()
                .get(&Layer::OutsidePool)
                .map_or("", |b| b.mark());
            rows.marked(
                &format!(" + {}", Layer::OutsidePool.name()),
                outside_metric,
                layers.outside_pool,
                outside_mark,
                &nvml_time,
                theme.layer(Layer::OutsidePool),
            );
            rows.value(
                " + reserved",
                &format!("{fw} {}", names.reserved),
                stats.reserved,
                &when,
                Style::new(),
            );
            rows.value(
                &format!("    = {}", Layer::Live.name()),
                &format!("{fw} {}", names.allocated),
                layers.live,
                &when,
                theme.layer(Layer::Live),
            );
            rows.value(
                &format!("    + {}", Layer::Fragmented.name()),
                &format!("{fw} {}", names.inactive_split),
                layers.fragmented,
                &when,
                theme.layer(Layer::Fragmented),
            );
            rows.value(
                &format!("    + {}", Layer::Cached.name()),
                "reserved - live - fragmented",
                layers.cached,
                &when,
                theme.layer(Layer::Cached),
            );
            let outside = layers.outside_pool.unwrap_or(0);
            let check = match (p.used, layers.context, stats.reserved) {
                (Some(_), _, None) => format!(
                    "the pool is not reported ({}): only live is split; used - live = {} is shown unsplit, as unattributed",
                    stats
                        .unreported
                        .get("reserved")
                        .map_or("no reason given", String::as_str),
                    units::opt_bytes(layers.unattributed)
                ),
                (Some(used), Some(c), Some(reserved)) if c + outside + reserved == used => {
                    "check: context + outside_pool + reserved = used, exactly".to_string()
                }
                (None, _, _) => {
                    "NVML does not report this process's usage: context and outside_pool are n/a"
                        .to_string()
                }
                _ => "check: the parts do not add up (report this)".to_string(),
            };
            rows.text(check, theme.dim());
            if account.context_source == Some(ContextSource::Estimated) {
                rows.text(
                    "~ the context is an upper bound: memory outside the pool present at every paired reading is inside it, so outside_pool is a lower bound (≥)".into(),
                    theme.dim(),
                );
            }
            if account.context_source == Some(ContextSource::Reported) {
                if let Some(c) = crate::context::reported_context(sample, feed) {
                    rows.text(
                        format!(
                            "context reported by the agent: this process's used at {} UTC, its pool empty ({})",
                            clock_tenths(c.time),
                            c.method.as_deref().unwrap_or("method n/a")
                        ),
                        theme.dim(),
                    );
                }
            }
            if stats.inactive_split.is_none() {
                let why = stats
                    .unreported
                    .get("inactive_split")
                    .cloned()
                    .unwrap_or_else(|| format!("backend {} does not report it", feed.backend));
                rows.text(
                    format!("fragmented is n/a ({why}): any fragmentation is inside cached"),
                    theme.dim(),
                );
            }
            rows.blank();
            rows.text(
                "peaks since the process started or last reset them (each its own instant; never summed)".into(),
                theme.table_header(),
            );
            rows.value(
                "peak allocated",
                &format!("{fw} {}", names.peak_allocated),
                stats.peak_allocated,
                &when,
                Style::new(),
            );
            rows.value(
                "peak reserved",
                &format!("{fw} {}", names.peak_reserved),
                stats.peak_reserved,
                &when,
                Style::new(),
            );
            let room = sample
                .processes
                .iter()
                .position(|q| std::ptr::eq(q, p))
                .and_then(|i| observed.headroom.get(i).copied().flatten());
            if let Some(room) = room {
                let sign = if room.bytes < 0 { "-" } else { "" };
                rows.text(
                    format!(
                        "{:<18}{sign}{} = free + reserved - fragmented ({}) - peak live {} ({})",
                        "headroom",
                        units::bytes(room.bytes.unsigned_abs()),
                        units::bytes(room.usable_bytes),
                        units::bytes(room.peak_live_bytes),
                        peak_words(&room)
                    ),
                    if room.bytes < 0 {
                        theme.alert()
                    } else {
                        Style::new()
                    },
                );
            }
            let largest_when = stats
                .largest_free_block_time
                .map_or_else(|| "n/a".to_string(), clock_tenths);
            rows.value(
                "largest free",
                "largest cached block",
                stats.largest_free_block,
                &largest_when,
                Style::new(),
            );
            let count = |v: Option<u64>| v.map_or_else(|| "n/a".into(), |v| v.to_string());
            rows.text(
                format!(
                    "{:<18}{} {}    {} {}",
                    "counters",
                    names.retries,
                    count(stats.alloc_retries),
                    names.ooms,
                    count(stats.ooms)
                ),
                if stats.ooms.unwrap_or(0) > 0 {
                    theme.alert()
                } else {
                    Style::new()
                },
            );
        }
        (Some(feed), status) => {
            let stats = &feed.stats;
            let why = match status {
                FeedStatus::Stale { age } => format!(
                    "feed is stale ({} old): shown, not combined with NVML's instant",
                    units::duration(age.abs())
                ),
                FeedStatus::Inconsistent { reason } => format!("feed not used: {reason}"),
                _ => String::new(),
            };
            rows.text(why, theme.alert());
            let names = metric_names(&feed.framework);
            let when = clock_tenths(stats.time);
            rows.value(
                " (reserved)",
                names.reserved,
                stats.reserved,
                &when,
                theme.stale(),
            );
            rows.value(
                " (live)",
                names.allocated,
                Some(stats.allocated),
                &when,
                theme.stale(),
            );
            rows.value(
                " (fragmented)",
                names.inactive_split,
                stats.inactive_split,
                &when,
                theme.stale(),
            );
            rows.text(
                "used is shown unsplit, as unattributed, until the feed is current again".into(),
                theme.dim(),
            );
        }
        (None, status) => {
            rows.value(
                " = unattributed",
                "no allocator feed: not split",
                layers.unattributed,
                &nvml_time,
                theme.layer(Layer::Unattributed),
            );
            let hint = match status {
                FeedStatus::Refused { reason } | FeedStatus::Pending { reason, .. } => reason.clone(),
                _ if !p.visible => {
                    "this PID is not visible here: its bytes are counted in the device's `other` layer"
                        .into()
                }
                _ if crate::detect::is_python(p) => {
                    "start the job under `strata run -- CMD` (or `strata attach PID`, Python 3.14+) to split it into layers"
                        .into()
                }
                _ => "not a Python process: no allocator feed can split it".into(),
            };
            let failed = matches!(
                status,
                FeedStatus::Refused { .. }
                    | FeedStatus::Pending {
                        kind: crate::accounting::attach::PendingKind::AgentError,
                        ..
                    }
            );
            let style = if failed { theme.alert() } else { theme.dim() };
            rows.text(hint, style);
        }
    }
    owner::section(rows, p, theme);
    feed::section(rows, observed, p, theme);
    pool::section(rows, observed, p, theme);
    history::section(rows, state, observed, p, theme);
}

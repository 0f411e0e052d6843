//! What nvitop users look for beside the memory: the context's kind, SM %, host CPU %, host
//! memory and time since start, per process; the host's CPU and memory in the header. The
//! process table's extra columns come in a fixed order of priority, each only while the
//! command keeps its room.

use super::widgets::short_bytes;
use crate::sample::{ContextKind, NodeSample, ProcessSample};
use ratatui::layout::Constraint;

/// The COMMAND column keeps at least this much before an extra column is added.
const COMMAND_ROOM: u16 = 16;

/// An extra column of the process table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostColumn {
    /// `C` compute, `G` graphics, `CG` both, `M` an MPS client.
    Kind,
    Sm,
    Cpu,
    Memory,
    Time,
    /// Who the process belongs to: `pod train/llama-7b-0`, `slurm 81234.0`, `docker a1b2c3`.
    Owner,
}

impl HostColumn {
    pub(crate) fn header(self) -> &'static str {
        match self {
            HostColumn::Kind => "T",
            HostColumn::Sm => "SM%",
            HostColumn::Cpu => "CPU%",
            HostColumn::Memory => "HMEM",
            HostColumn::Time => "TIME",
            HostColumn::Owner => "OWNER",
        }
    }

    pub(crate) fn width(self) -> u16 {
        match self {
            HostColumn::Kind => 2,
            HostColumn::Sm => 3,
            HostColumn::Cpu => 5,
            HostColumn::Memory => 5,
            HostColumn::Time => 6,
            HostColumn::Owner => OWNER_WIDTH,
        }
    }

    pub(crate) fn constraint(self) -> Constraint {
        Constraint::Length(self.width())
    }

    /// The cell of process `p`; figures to the right, so that their magnitudes line up.
    pub(crate) fn cell(self, p: &ProcessSample) -> String {
        let width = usize::from(self.width());
        let figure = match self {
            HostColumn::Kind => return kind_mark(p).to_string(),
            HostColumn::Owner => return owner_cell(p),
            HostColumn::Sm => p.sm_util.map_or_else(|| "n/a".into(), |v| v.to_string()),
            HostColumn::Cpu => cpu(p.cpu_percent),
            HostColumn::Memory => short_bytes(p.host_memory),
            HostColumn::Time => elapsed(p.elapsed),
        };
        format!("{figure:>width$}")
    }

    /// The header, to the right as its figures are.
    pub(crate) fn title(self) -> String {
        match self {
            HostColumn::Kind | HostColumn::Owner => self.header().to_string(),
            _ => format!("{:>w$}", self.header(), w = usize::from(self.width())),
        }
    }

    /// The column the config file names.
    pub(crate) fn of(column: crate::config::Column) -> HostColumn {
        use crate::config::Column;
        match column {
            Column::Kind => HostColumn::Kind,
            Column::Sm => HostColumn::Sm,
            Column::Cpu => HostColumn::Cpu,
            Column::Owner => HostColumn::Owner,
            Column::HostMemory => HostColumn::Memory,
            Column::Elapsed => HostColumn::Time,
        }
    }

    /// The extra columns that fit when the command has `command_width` to itself, of those
    /// `offered` and in their order (after the memory figures): as many as leave the
    /// command [`COMMAND_ROOM`].
    pub(crate) fn fitting(
        command_width: u16,
        offered: &[crate::config::Column],
    ) -> Vec<HostColumn> {
        let mut room = command_width;
        let mut out = Vec::new();
        for column in offered.iter().map(|&c| HostColumn::of(c)) {
            let take = column.width() + 1;
            if room < COMMAND_ROOM + take {
                break;
            }
            room -= take;
            out.push(column);
        }
        out
    }
}

/// The OWNER column's width: `pod inference/mistral-7b…` is cut, the rest is in the detail.
const OWNER_WIDTH: u16 = 20;

/// The owner in a few words, cut to the column; blank where nothing names one, `n/a` where it
/// is not known (an invisible process, an unreadable cgroup, one not read yet: off the screen
/// until now).
fn owner_cell(p: &ProcessSample) -> String {
    let text = match p.owner.as_deref() {
        Some(owner) => owner.short().unwrap_or_default(),
        None => "n/a".into(),
    };
    crate::present::fit(&crate::text::clean(&text), usize::from(OWNER_WIDTH))
}

/// `C` compute, `G` graphics, `CG` both, `M` a client of an MPS server.
pub(crate) fn kind_mark(p: &ProcessSample) -> &'static str {
    match (p.mps, p.kind) {
        (true, ContextKind::Graphics | ContextKind::ComputeGraphics) => "MG",
        (true, ContextKind::Compute) => "M",
        (false, ContextKind::Compute) => "C",
        (false, ContextKind::Graphics) => "G",
        (false, ContextKind::ComputeGraphics) => "CG",
    }
}

/// The kind in words, for the reconciliation view.
pub(crate) fn kind_words(p: &ProcessSample) -> &'static str {
    match (p.mps, p.kind) {
        (true, _) => "compute, client of an MPS server (M)",
        (false, ContextKind::Compute) => "compute (C)",
        (false, ContextKind::Graphics) => "graphics (G)",
        (false, ContextKind::ComputeGraphics) => "compute and graphics (CG)",
    }
}

/// CPU percent of one core: `5.1` under 10, whole above (`118`), `n/a` when unknown.
pub(crate) fn cpu(value: Option<f64>) -> String {
    match value {
        None => "n/a".into(),
        Some(v) if v < 9.95 => format!("{v:.1}"),
        Some(v) => format!("{v:.0}"),
    }
}

/// Time since start, in six characters at most: `0:42`, `59:59`, `23h59m`, `12d03h`, `999d`.
pub(crate) fn elapsed(secs: Option<u64>) -> String {
    let Some(s) = secs else {
        return "n/a".into();
    };
    match s {
        0..3600 => format!("{}:{:02}", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        86_400..8_640_000 => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// The host's figures for the header, long and short: `CPU  5.1% · MEM 227/2016 GiB`,
/// `CPU  5% MEM 227G/1.97T`; `None` where neither is known. The share takes two digits'
/// width below 99.5 %, so that what follows it in the header holds still (and is not
/// written again) when the share goes from one digit to two; a third digit is one more
/// column, as `n/a` is the width of two.
pub(crate) fn header_figures(sample: &NodeSample) -> Option<(String, String)> {
    if sample.host_cpu_percent.is_none() && sample.host_memory.is_none() {
        return None;
    }
    let cpu_long = sample
        .host_cpu_percent
        .map_or_else(|| format!("{:>5}", "n/a"), |c| format!("{c:>4.1}%"));
    let cpu_short = sample
        .host_cpu_percent
        .map_or_else(|| "n/a".into(), |c| format!("{c:>2.0}%"));
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    let (mem_long, mem_short) = match sample.host_memory {
        Some(m) => (
            format!("{:.0}/{:.0} GiB", gib(m.used), gib(m.total)),
            format!(
                "{}/{}",
                short_bytes(Some(m.used)),
                short_bytes(Some(m.total))
            ),
        ),
        None => ("n/a".into(), "n/a".into()),
    };
    Some((
        format!("CPU {cpu_long} · MEM {mem_long}"),
        format!("CPU {cpu_short} MEM {mem_short}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An owner not read (a process off the screen until now) is not known: `n/a`, never the
    /// blank that says nothing names one.
    #[test]
    fn an_owner_not_read_is_not_shown_as_none() {
        let mut p = crate::fixtures::process(42, "GPU-0", Some(1 << 30));
        p.visible = true;
        p.owner = None;
        assert_eq!(owner_cell(&p).trim(), "n/a");
        p.owner = Some(std::sync::Arc::new(crate::sample::owner::Owner::default()));
        assert_eq!(owner_cell(&p).trim(), "", "read, and nothing names one");
    }

    /// The host's CPU share takes one width from 0 to 99 % (and unknown), long and short,
    /// so that the memory after it does not move when the share gains a second digit.
    #[test]
    fn the_cpu_share_keeps_its_width_in_the_header() {
        let mut sample = crate::fixtures::node();
        sample.host_memory = Some(crate::sample::HostMemory {
            used: 227 << 30,
            total: 2016 << 30,
        });
        let mut widths = std::collections::BTreeSet::new();
        for share in [
            None,
            Some(0.0),
            Some(5.04),
            Some(9.96),
            Some(18.0),
            Some(99.4),
        ] {
            sample.host_cpu_percent = share;
            let (long, short) = header_figures(&sample).expect("figures");
            widths.insert((long.chars().count(), short.chars().count()));
            if share == Some(5.04) {
                assert_eq!(
                    (long.as_str(), short.as_str()),
                    ("CPU  5.0% · MEM 227/2016 GiB", "CPU  5% MEM 227G/1.97T")
                );
            }
        }
        assert_eq!(widths.len(), 1, "{widths:?}");
    }

    #[test]
    fn times_fit_six_characters_at_every_scale() {
        let cases = [
            (0, "0:00"),
            (42, "0:42"),
            (3599, "59:59"),
            (3600, "1h00m"),
            (86_399, "23h59m"),
            (86_400, "1d00h"),
            (1_044_000, "12d02h"),
            (8_639_999, "99d23h"),
            (86_400_000, "1000d"),
        ];
        for (secs, text) in cases {
            assert_eq!(elapsed(Some(secs)), text);
            assert!(text.len() <= 6);
        }
        assert_eq!(elapsed(None), "n/a");
    }

    #[test]
    fn cpu_reads_at_a_glance() {
        assert_eq!(cpu(Some(0.0)), "0.0");
        assert_eq!(cpu(Some(5.14)), "5.1");
        assert_eq!(cpu(Some(118.7)), "119");
        assert_eq!(cpu(Some(2240.0)), "2240");
        assert_eq!(cpu(None), "n/a", "unknown is not 0");
    }

    #[test]
    fn the_kind_is_marked_as_nvitop_does() {
        let mut p = crate::fixtures::process(1, "GPU-0", None);
        assert_eq!(kind_mark(&p), "C");
        p.kind = ContextKind::Graphics;
        assert_eq!(kind_mark(&p), "G");
        p.kind = ContextKind::ComputeGraphics;
        assert_eq!(kind_mark(&p), "CG");
        p.kind = ContextKind::Compute;
        p.mps = true;
        assert_eq!(kind_mark(&p), "M");
    }

    #[test]
    fn extra_columns_take_only_what_the_command_can_spare() {
        use crate::config::Column;
        let fitting = |width| HostColumn::fitting(width, &Column::ALL);
        assert!(fitting(COMMAND_ROOM + 2).is_empty());
        assert_eq!(fitting(COMMAND_ROOM + 3), [HostColumn::Kind]);
        let every: Vec<HostColumn> = Column::ALL.into_iter().map(HostColumn::of).collect();
        let all: u16 = every.iter().map(|c| c.width() + 1).sum();
        assert_eq!(fitting(COMMAND_ROOM + all), every);
        assert_eq!(fitting(COMMAND_ROOM + all - 1).len(), 5);
    }

    #[test]
    fn only_the_columns_offered_in_their_order() {
        use crate::config::Column;
        let offered = [Column::Owner, Column::Sm];
        let all = COMMAND_ROOM + 100;
        assert_eq!(
            HostColumn::fitting(all, &offered),
            [HostColumn::Owner, HostColumn::Sm]
        );
        // The first that does not fit stops the rest: the order is the user's priority.
        let owner_only = COMMAND_ROOM + HostColumn::Owner.width() + 1;
        assert_eq!(
            HostColumn::fitting(owner_only, &offered),
            [HostColumn::Owner]
        );
        assert!(HostColumn::fitting(all, &[]).is_empty());
    }
}

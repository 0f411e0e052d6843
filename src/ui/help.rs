//! The help screen: keys, layers and how they add up.

use super::chart::CLIMB_MARK;
use super::strata::PARTIAL_GLYPH;
use super::theme::Theme;
use crate::detect::Severity;
use crate::layers::Layer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

pub fn draw_help(frame: &mut Frame<'_>, area: Rect, scroll: usize, theme: Theme) {
    let mut lines = vec![
        Line::styled("Keys", theme.table_header()),
        Line::raw("  q Ctrl-C quit · Esc back · ↑↓ j PgUp PgDn Home End move"),
        Line::raw("  Tab focus processes/findings · p pause/resume (samples are kept)"),
        Line::raw(
            "  s sort key (used live frag cache sm cpu host-mem time pid gpu) · S reverse ▲▼",
        ),
        Line::raw(
            "    rows keep their order unless a value moves clearly (its 10-sample peak, ±5%)",
        ),
        Line::raw(
            "  k F9 signal the process (SIGINT/TERM/KILL, then confirm y); on a zombie_context",
        ),
        Line::raw("    finding: the processes still holding its /dev/nvidia<N> open"),
        Line::raw("  Enter: a process's reconciliation, or a finding's evidence"),
        Line::raw("  v strata view: every layer of each device over time; ↑↓ pick a device"),
        Line::raw("    z + - zoom it through the history's tiers: 15m, 2h, 24h"),
        Line::raw("  ? this help (↑↓ scroll it)"),
        Line::styled("Marks", theme.table_header()),
        Line::from(vec![
            Span::raw("  "),
            Span::styled(CLIMB_MARK.to_string(), theme.severity(Severity::Warning)),
            Span::raw(" where a flagged climb began (sparklines, strata view, evidence)"),
        ]),
        Line::raw("  TREND +636M/m 8m: a flagged climb's rate, read over its window (8 min)"),
        Line::raw(
            "  T C compute · G graphics · CG both · M MPS client; CPU% of one core; HMEM host",
        ),
        Line::raw("    memory (resident); TIME since the process started"),
        Line::from(vec![
            Span::raw("  "),
            Span::styled(PARTIAL_GLYPH.to_string(), theme.alert()),
            Span::raw(" strata view: bytes of a layer known only in part · blank: unknown"),
        ]),
        Line::styled(
            "Per GPU and per MIG instance, at one instant",
            theme.table_header(),
        ),
        Line::raw("  total = live + fragmented + cached + outside_pool + context"),
        Line::raw("          + unattributed + other + free"),
        Line::raw("  NVML used = context + outside_pool + reserved (a process with a feed)"),
        Line::raw("  reserved = live + fragmented + cached"),
        Line::raw("  n/a is unknown, never 0; a feed 3 intervals old is stale, not mixed in"),
        Line::styled("Layers", theme.table_header()),
    ];
    for layer in Layer::ALL {
        lines.push(Line::from(vec![
            Span::raw("  "),
            Span::styled(layer.glyph().to_string().repeat(2), theme.layer(layer)),
            Span::raw(format!(" {:<13} {}", layer.name(), layer.meaning())),
        ]));
    }
    let help = Paragraph::new(lines)
        .scroll((scroll.min(usize::from(u16::MAX)) as u16, 0))
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(theme.focused_border())
                .title(Line::styled(" Help ", theme.title())),
        );
    frame.render_widget(help, area);
}

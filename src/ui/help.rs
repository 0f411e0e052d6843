//! The help screen: keys, layers and how they add up.

use super::theme::Theme;
use crate::layers::Layer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

pub fn draw_help(frame: &mut Frame<'_>, area: Rect, theme: Theme) {
    let mut lines = vec![
        Line::styled("Keys", theme.table_header()),
        Line::raw("  q, Ctrl-C   quit                 Esc   back (quit from the main screen)"),
        Line::raw("  ↑ ↓  j k    move                 PgUp PgDn Home End   move further"),
        Line::raw("  Enter       reconcile the selected process     Tab   focus processes / findings"),
        Line::raw("  s           cycle the sort column              p     pause / resume (samples are kept)"),
        Line::raw("  ?           this help"),
        Line::raw(""),
        Line::styled("How the layers add up (per GPU and per MIG instance, at one instant)", theme.table_header()),
        Line::raw("  NVML total = live + fragmented + cached + outside_pool + context + unattributed + other + free"),
        Line::raw("  process NVML used = context + outside_pool + reserved;  reserved = live + fragmented + cached"),
        Line::raw("  n/a means unknown (never 0); a feed older than 3 intervals is shown stale, not mixed in"),
        Line::raw(""),
        Line::styled("Layers", theme.table_header()),
    ];
    for layer in Layer::ALL {
        lines.push(Line::from(vec![
            Span::raw("  "),
            Span::styled(layer.glyph().to_string().repeat(3), theme.layer(layer)),
            Span::raw(format!(" {:<13} {}", layer.name(), layer.meaning())),
        ]));
    }
    let help = Paragraph::new(lines).wrap(Wrap { trim: false }).block(
        Block::default()
            .borders(Borders::ALL)
            .border_style(theme.focused_border())
            .title(Line::styled(" Help ", theme.title())),
    );
    frame.render_widget(help, area);
}

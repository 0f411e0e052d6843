//! Colours, with a monochrome mode (`NO_COLOR`) where glyphs alone carry the meaning.

use crate::detect::Severity;
use crate::layers::Layer;
use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy)]
pub(crate) struct Theme {
    pub(crate) mono: bool,
}

impl Theme {
    fn pick(self, style: Style) -> Style {
        if self.mono {
            // Keep emphasis (bold, reverse), drop colour.
            Style {
                fg: None,
                bg: None,
                ..style
            }
        } else {
            style
        }
    }

    pub(crate) fn layer(self, layer: Layer) -> Style {
        let color = match layer {
            Layer::Live => Color::Green,
            Layer::Fragmented => Color::LightRed,
            Layer::Cached => Color::Blue,
            Layer::OutsidePool => Color::Yellow,
            Layer::Context => Color::Magenta,
            Layer::Unattributed => Color::Cyan,
            Layer::Other => Color::Gray,
            Layer::Free => Color::DarkGray,
        };
        self.pick(Style::new().fg(color))
    }

    /// Values that are not current: a lost GPU's last reading, a stale feed.
    pub(crate) fn stale(self) -> Style {
        self.pick(Style::new().fg(Color::DarkGray).add_modifier(Modifier::DIM))
    }

    pub(crate) fn dim(self) -> Style {
        self.pick(Style::new().fg(Color::DarkGray))
    }

    pub(crate) fn title(self) -> Style {
        self.pick(Style::new().fg(Color::White).add_modifier(Modifier::BOLD))
    }

    pub(crate) fn header_bar(self) -> Style {
        self.pick(Style::new().fg(Color::Black).bg(Color::Cyan))
    }

    pub(crate) fn table_header(self) -> Style {
        self.pick(Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD))
    }

    pub(crate) fn selected(self) -> Style {
        self.pick(Style::new().add_modifier(Modifier::REVERSED))
    }

    pub(crate) fn focused_border(self) -> Style {
        self.pick(Style::new().fg(Color::Cyan))
    }

    pub(crate) fn border(self) -> Style {
        self.pick(Style::new().fg(Color::DarkGray))
    }

    pub(crate) fn alert(self) -> Style {
        self.pick(
            Style::new()
                .fg(Color::LightRed)
                .add_modifier(Modifier::BOLD),
        )
    }

    pub(crate) fn severity(self, severity: Severity) -> Style {
        let style = match severity {
            Severity::Critical => Style::new()
                .fg(Color::LightRed)
                .add_modifier(Modifier::BOLD),
            Severity::Warning => Style::new().fg(Color::Yellow),
            Severity::Info => Style::new().fg(Color::Cyan),
        };
        self.pick(style)
    }
}

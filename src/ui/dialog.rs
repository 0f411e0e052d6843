//! The signal dialog (`K`) and the attach confirmation (`a`), drawn over whatever view they
//! were opened from.

use super::theme::Theme;
use crate::app::{AttachOffer, KillDialog, Stage};
use crate::present::fit;
use crate::process_signal::Signal;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear};
use ratatui::Frame;

/// The keys of each stage, for the dialog and the footer.
pub(crate) fn keys(stage: Stage) -> &'static str {
    match stage {
        Stage::Process | Stage::Signal => "↑↓ choose · Enter next · Esc cancel",
        Stage::Confirm => "y/Enter send · n/Esc cancel",
    }
}

fn who(dialog: &KillDialog) -> String {
    dialog.offer().map_or_else(String::new, |o| {
        let user = o
            .target
            .user
            .as_deref()
            .map_or_else(String::new, |u| format!(", user {}", crate::text::clean(u)));
        format!("{}{user}", o.target.describe())
    })
}

fn lines(dialog: &KillDialog, width: usize, theme: Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let row = |chosen: bool, text: String| {
        let mark = if chosen { "› " } else { "  " };
        format!("{mark}{text}")
    };
    match dialog.stage {
        Stage::Process => {
            out.push(Line::raw(fit("Which process?", width)));
            for (i, offer) in dialog.offers.iter().enumerate() {
                let t = &offer.target;
                let mut text = t.describe();
                if let Some(user) = &t.user {
                    text = format!("{text} · {}", crate::text::clean(user));
                }
                if let Some(note) = &t.note {
                    text = format!("{text} · {}", crate::text::clean(note));
                }
                let chosen = i == dialog.chosen;
                let style = match (&offer.refusal, chosen) {
                    (Some(_), _) => theme.dim(),
                    (None, true) => theme.selected(),
                    (None, false) => ratatui::style::Style::new(),
                };
                let text = match offer.refusal {
                    Some(_) => format!("{text} · cannot be signalled"),
                    None => text,
                };
                out.push(Line::styled(fit(&row(chosen, text), width), style));
            }
        }
        Stage::Signal => {
            out.push(Line::raw(fit(&format!("Signal {}:", who(dialog)), width)));
            for signal in Signal::ALL {
                let chosen = signal == dialog.signal;
                let text = row(chosen, format!("{:<8} {}", signal.name(), signal.meaning()));
                let style = if chosen {
                    theme.selected()
                } else {
                    ratatui::style::Style::new()
                };
                out.push(Line::styled(fit(&text, width), style));
            }
        }
        Stage::Confirm => {
            let question = format!("Send {} to {}?", dialog.signal.name(), who(dialog));
            out.extend(
                super::widgets::wrap(&question, width)
                    .into_iter()
                    .map(|l| Line::styled(l, theme.alert())),
            );
        }
    }
    // Why the process at the cursor cannot be signalled, said before Enter is tried.
    let refused = match dialog.stage {
        Stage::Process => dialog.offer().and_then(|o| o.refusal.clone()),
        _ => None,
    };
    if let Some(message) = dialog.message.clone().or(refused) {
        out.extend(
            super::widgets::wrap(&format!("cannot: {message}"), width)
                .into_iter()
                .map(|l| Line::styled(l, theme.alert())),
        );
    }
    out.push(Line::styled(fit(keys(dialog.stage), width), theme.dim()));
    out
}

/// Draws the dialog in the middle of `area`.
pub(crate) fn draw_dialog(frame: &mut Frame<'_>, area: Rect, dialog: &KillDialog, theme: Theme) {
    let width = area.width.saturating_sub(4).min(96);
    if width < 10 || area.height < 5 {
        return;
    }
    let inner_width = usize::from(width - 2);
    let lines = lines(dialog, inner_width, theme);
    let height = (lines.len() as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.focused_border())
        .title(Line::styled(
            fit(
                &format!(" Signal · {} ", crate::text::clean(&dialog.title)),
                inner_width,
            ),
            theme.title(),
        ));
    let inner = block.inner(popup);
    frame.render_widget(Clear, popup);
    frame.render_widget(block, popup);
    super::widgets::put_lines(frame, inner, &lines);
}

/// The keys of the attach confirmation, for it and the footer.
pub(crate) const ATTACH_KEYS: &str = "y/Enter attach · n/Esc cancel";

/// Draws the attach confirmation (`a`) in the middle of `area`.
pub(crate) fn draw_attach(frame: &mut Frame<'_>, area: Rect, offer: &AttachOffer, theme: Theme) {
    let width = area.width.saturating_sub(4).min(80);
    if width < 10 || area.height < 5 {
        return;
    }
    let inner_width = usize::from(width - 2);
    let question = format!(
        "Attach the allocator feed to {}? Its Python runs the agent through sys.remote_exec; the job is not stopped.",
        crate::text::clean(&offer.title)
    );
    let mut lines: Vec<Line<'static>> = super::widgets::wrap(&question, inner_width)
        .into_iter()
        .map(|l| Line::styled(l, theme.alert()))
        .collect();
    lines.push(Line::styled(fit(ATTACH_KEYS, inner_width), theme.dim()));
    let height = (lines.len() as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.focused_border())
        .title(Line::styled(fit(" Attach ", inner_width), theme.title()));
    let inner = block.inner(popup);
    frame.render_widget(Clear, popup);
    frame.render_widget(block, popup);
    super::widgets::put_lines(frame, inner, &lines);
}

//! One group of the grouped process table (`g`, then Enter on a group row): its NVML used
//! and layers summed over its members on one device, exactly, with `≥` where a member's
//! share is unknown; its members; and their findings, each opening its evidence.

use super::theme::Theme;
use super::widgets::put_lines;
use crate::accounting::GroupRow;
use crate::app::State;
use crate::layers::Layer;
use crate::pipeline::Observed;
use crate::present::fit;
use crate::text::clean;
use crate::units;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;

/// A sum with its mark: `≥12.0 GiB` when partial (or a lower bound), `≤` an upper bound,
/// `n/a` when no member reports it.
fn sum(value: Option<u64>, mark: &str) -> String {
    match value {
        Some(v) => format!("{mark}{}", units::bytes(v)),
        None => "n/a".into(),
    }
}

/// The layers a group has: each process layer, `other` and `free` being the device's.
const GROUP_LAYERS: [Layer; 6] = [
    Layer::Live,
    Layer::Fragmented,
    Layer::Cached,
    Layer::OutsidePool,
    Layer::Context,
    Layer::Unattributed,
];

fn lines(
    state: &State,
    observed: &Observed,
    group: &GroupRow,
    width: usize,
    theme: Theme,
) -> Vec<Line<'static>> {
    let sample = &observed.sample;
    let place = crate::detect::device_name(sample, &group.device_uuid);
    let mut out = vec![Line::styled(
        fit(
            &format!(
                "{} on {place}: {} process{}, grouped by {}",
                clean(&group.key),
                group.pids.len(),
                if group.pids.len() == 1 { "" } else { "es" },
                state.process_table.group_by.label()
            ),
            width,
        ),
        theme.title(),
    )];
    out.push(Line::raw(fit(
        &format!(
            "  used           {}   (summed over the members at this sample; peaks are never summed)",
            sum(group.used, if group.used_partial { "≥" } else { "" })
        ),
        width,
    )));
    for layer in GROUP_LAYERS {
        let mark = match (group.bounds.get(&layer), group.partial.contains(&layer)) {
            (Some(bound), _) => bound.mark(),
            (None, true) => "≥",
            (None, false) => "",
        };
        out.push(Line::styled(
            fit(
                &format!(
                    "  {:<14} {}",
                    layer.name(),
                    sum(group.layers.get(layer), mark)
                ),
                width,
            ),
            theme.layer(layer),
        ));
    }
    out.push(Line::raw(""));
    out.push(Line::styled(
        fit("  PID      USER       USED        COMMAND", width),
        theme.table_header(),
    ));
    for &pid in &group.pids {
        let Some(p) = sample
            .processes
            .iter()
            .find(|p| p.pid == pid && *p.device_uuid == *group.device_uuid)
        else {
            continue;
        };
        let text = format!(
            "  {:<8} {:<10} {:<11} {}",
            pid,
            clean(p.user.as_deref().unwrap_or("n/a")),
            p.used.map_or_else(|| "n/a".into(), units::bytes),
            clean(p.command.as_deref().unwrap_or("n/a"))
        );
        out.push(Line::raw(fit(&text, width)));
    }
    out.push(Line::raw(""));
    let findings = state.group_findings(group);
    if findings.is_empty() {
        out.push(Line::styled(
            fit("  No finding names its members.", width),
            theme.dim(),
        ));
    } else {
        out.push(Line::styled(
            fit(
                &format!(
                    "  Findings ({}): ↑↓ choose, Enter its evidence",
                    findings.len()
                ),
                width,
            ),
            theme.table_header(),
        ));
        let cursor = state.views.group_cursor.min(findings.len() - 1);
        for (i, f) in findings.iter().enumerate() {
            let mark = if i == cursor { "› " } else { "  " };
            let text = format!("  {mark}{:<5} {}", f.severity.label(), clean(&f.message));
            let style = match i == cursor {
                true => theme.selected(),
                false => theme.severity(f.severity),
            };
            out.push(Line::styled(fit(&text, width), style));
        }
    }
    out
}

/// Draws the group view.
pub(crate) fn draw_group(
    frame: &mut Frame<'_>,
    area: Rect,
    state: &State,
    observed: &Observed,
    key: &str,
    device_uuid: &str,
    theme: Theme,
) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.focused_border())
        .title(Line::styled(
            fit(
                &format!(" Group · {} ", clean(key)),
                area.width.saturating_sub(4) as usize,
            ),
            theme.title(),
        ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let width = inner.width as usize;
    let shown = match state.group_shown(key, device_uuid) {
        Some(group) => lines(state, observed, &group, width, theme),
        None => vec![Line::styled(
            fit(
                "This group holds nothing on this device any more. Esc goes back.",
                width,
            ),
            Style::new(),
        )],
    };
    put_lines(frame, inner, &shown);
}

//! Drawing. Everything here reads `&State` and writes into a frame; nothing changes the
//! state but one cell: a scrolling view (help, reconciliation, evidence) records in
//! `Views::scroll_room` how far it can scroll, which only its drawing can know (it depends on
//! the lines that fit), so that the scroll keys stop at its last line.

mod chart;
pub(crate) mod detail;
mod dialog;
pub(crate) mod evidence;
mod findings;
mod gpus;
mod group;
mod header;
mod help;
mod host;
mod layout;
mod mode;
pub(crate) mod processes;
mod strata;
pub(crate) mod theme;
pub(crate) mod widgets;

use crate::app::{State, View};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use theme::Theme;
use widgets::Paint;

/// Below this size the monitor shows a one-line message instead of a cramped screen.
pub(crate) const MIN_WIDTH: u16 = 60;
pub(crate) const MIN_HEIGHT: u16 = 16;

/// What a terminal below the minimum shows, a line each, at most `height` lines: the whole
/// sentence where it fits on one line of `width` cells; else its parts, the way out first, so
/// that "q to quit" is never what is cut. (Each character here is one cell wide.)
fn too_small(width: u16, height: u16) -> Vec<String> {
    let size = format!("{width}x{height} < {MIN_WIDTH}x{MIN_HEIGHT}");
    let whole = format!("too small ({size}): enlarge the terminal, or q to quit");
    if whole.chars().count() <= usize::from(width) {
        return vec![whole];
    }
    if height < 2 {
        let one = [
            format!("q to quit · too small: {size}"),
            "q to quit · too small".into(),
        ]
        .into_iter()
        .find(|line| line.chars().count() <= usize::from(width))
        .unwrap_or_else(|| "q to quit".into());
        return vec![one];
    }
    let mut parts = vec![
        "q to quit".to_string(),
        format!("too small: {size}"),
        "enlarge the terminal".to_string(),
    ];
    parts.truncate(usize::from(height));
    parts
}

/// What the main screen's bands drew in the last frame written, kept to compare the next
/// frame's with ([`draw_bands`]).
#[derive(Debug, Default)]
pub(crate) struct Bands {
    last: Option<Drawn>,
    /// What the GPU section in `last` was drawn from, where it was drawn from what the next
    /// frame's may be ([`gpus::section`]): reset with `last`.
    gpus: gpus::Kept,
    /// What the footer in `last` was drawn from, the same way ([`header::footer`]).
    footer: header::FooterKept,
}

impl Bands {
    /// Lets go of what the kept bands were drawn from: the frame that drew them is gone.
    fn forget(&mut self) {
        self.gpus.forget();
        self.footer.forget();
    }
}

#[derive(Debug)]
struct Drawn {
    area: Rect,
    theme: Theme,
    /// Top to bottom, each band's rows and what it drew there.
    bands: Vec<(Rect, Paint)>,
}

/// Draws the whole screen for the current state; in ASCII mode (`--ascii`), every cell of
/// the frame is then written in ASCII, so that no glyph escapes it.
pub fn draw(frame: &mut Frame<'_>, state: &State) {
    draw_bands(frame, state, &mut Bands::default(), true);
}

/// Draws the screen for the current state, band by band where it can, and says which rows
/// it drew. On the main screen with no dialog over it, the header, the GPUs, the table, the
/// findings and the footer are each worked out as a [`Paint`] and kept in `bands`; a band
/// whose rows and paint are the last frame's is not drawn again, and its rows are left
/// blank in `frame`: the screen shows them still. A still node's frame draws its header
/// only, for the clock. Anywhere else, or where the screen was `wiped` since the last frame
/// (or it was drawn another way), every band is drawn; off the main screen, the whole frame.
/// Returns the ranges of rows drawn, counted from the frame's top, or `None` where every row
/// was.
pub(crate) fn draw_bands(
    frame: &mut Frame<'_>,
    state: &State,
    bands: &mut Bands,
    wiped: bool,
) -> Option<Vec<std::ops::Range<u16>>> {
    let theme = Theme {
        mono: state.setup.monochrome,
        palette: state.setup.palette,
        ascii: state.setup.ascii,
    };
    // The GPUs' places are recorded anew by each frame that draws them.
    state.mouse.gpus.borrow_mut().clear();
    let area = frame.area();
    let banded = area.width >= MIN_WIDTH
        && area.height >= MIN_HEIGHT
        && matches!(state.view, View::Main)
        && state.kill.dialog.is_none()
        && state.attach.offer.is_none();
    let Some(observed) = state.current.as_ref().filter(|_| banded) else {
        bands.last = None;
        bands.forget();
        draw_in(frame, state, theme);
        if theme.ascii {
            theme::to_ascii(frame.buffer_mut());
        }
        return None;
    };
    let mut last = match bands.last.take() {
        Some(last) if last.area == area && last.theme == theme => last.bands,
        _ => {
            bands.forget();
            Vec::new()
        }
    };
    let mut now = Vec::new();
    let mut rows = Vec::new();
    for (i, (band, paint)) in main_screen(area, state, observed, theme, bands)
        .into_iter()
        .enumerate()
    {
        let was = last.get_mut(i).filter(|(was, _)| *was == band);
        let (paint, same) = match (paint, was) {
            (Some(paint), was) => {
                let same = was.is_some_and(|(_, drew)| *drew == paint);
                (paint, same)
            }
            // Kept: drawn from what the last frame's band was, in the same rows.
            (None, Some((_, drew))) => (std::mem::take(drew), true),
            (None, None) => {
                // Never: a band is kept only where the last frame drew it in these rows.
                // Drawn again whole, nothing kept.
                debug_assert!(false, "band {i} kept without the last frame's");
                bands.forget();
                return draw_bands(frame, state, bands, true);
            }
        };
        if !(same && !wiped || band.is_empty()) {
            paint.render(frame.buffer_mut(), band);
            if theme.ascii {
                theme::to_ascii_in(frame.buffer_mut(), band);
            }
            rows.push(band.top() - area.top()..band.bottom() - area.top());
        }
        now.push((band, paint));
    }
    bands.last = Some(Drawn {
        area,
        theme,
        bands: now,
    });
    Some(rows)
}

/// The header's row, the body's and the footer's.
fn frame_rows(area: Rect) -> [Rect; 3] {
    Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area)
}

/// The main screen's bands, top to bottom, covering `area` row for row: the header, the
/// GPUs, the table, the findings and the footer; `None` for the GPUs and the footer where
/// `kept` says the last frame's stands ([`gpus::section`], [`header::footer`]).
fn main_screen(
    area: Rect,
    state: &State,
    observed: &crate::pipeline::Observed,
    theme: Theme,
    kept: &mut Bands,
) -> Vec<(Rect, Option<Paint>)> {
    let [top, body, bottom] = frame_rows(area);
    let mut header = Paint::default();
    header::draw_header(&mut header, top, state, theme);
    let mut bands = vec![(top, Some(header))];
    bands.extend(main_bands(
        body,
        state,
        observed,
        theme,
        Some(&mut kept.gpus),
    ));
    bands.push((
        bottom,
        header::footer(bottom, state, theme, &mut kept.footer),
    ));
    bands
}

/// The header's row and the footer's, each with its paint: the same on every screen.
fn edges(top: Rect, bottom: Rect, state: &State, theme: Theme) -> [(Rect, Paint); 2] {
    let mut header = Paint::default();
    header::draw_header(&mut header, top, state, theme);
    let mut footer = Paint::default();
    header::draw_footer(&mut footer, bottom, state, theme);
    [(top, header), (bottom, footer)]
}

fn draw_in(frame: &mut Frame<'_>, state: &State, theme: Theme) {
    let area = frame.area();
    if area.width == 0 || area.height == 0 {
        return;
    }
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let lines: Vec<Line<'_>> = too_small(area.width, area.height)
            .into_iter()
            .map(|text| {
                Line::styled(
                    crate::present::fit(&text, area.width as usize),
                    theme.alert(),
                )
            })
            .collect();
        frame.render_widget(Paragraph::new(lines), area);
        return;
    }
    let [top, body, bottom] = frame_rows(area);
    for (row, paint) in edges(top, bottom, state, theme) {
        paint.render(frame.buffer_mut(), row);
    }
    let Some(observed) = &state.current else {
        let waiting = Paragraph::new(Line::styled(
            format!(
                "waiting for the first sample from {}…",
                state.setup.source_label
            ),
            theme.dim(),
        ));
        frame.render_widget(waiting, body);
        return;
    };
    match &state.view {
        View::Main => {
            for (band, paint) in main_bands(body, state, observed, theme, None) {
                if let Some(paint) = paint {
                    paint.render(frame.buffer_mut(), band);
                }
            }
        }
        View::Detail { pid, device_uuid } => {
            detail::draw_detail(frame, body, state, observed, *pid, device_uuid, theme)
        }
        View::Sites { pid, device_uuid } => {
            detail::pool::draw_sites(frame, body, state, observed, *pid, device_uuid, theme)
        }
        View::Help => help::draw_help(frame, body, state, theme),
        View::Evidence(id) => evidence::draw_evidence(frame, body, state, observed, id, theme),
        View::Strata => strata::draw_strata(frame, body, state, observed, theme),
        View::Group { key, device_uuid } => {
            group::draw_group(frame, body, state, observed, key, device_uuid, theme)
        }
    }
    if let Some(open) = &state.kill.dialog {
        dialog::draw_dialog(frame, body, open, theme);
    }
    if let Some(offer) = &state.attach.offer {
        dialog::draw_attach(frame, body, offer, theme);
    }
}

/// The main screen's body in three bands, top to bottom, covering `area` row for row: the
/// GPUs, the process table and the findings, each band's paint within its rows (the GPUs'
/// `None` where `kept` says the last frame's stands, [`gpus::section`]).
fn main_bands(
    area: Rect,
    state: &State,
    observed: &crate::pipeline::Observed,
    theme: Theme,
    mut kept: Option<&mut gpus::Kept>,
) -> Vec<(Rect, Option<Paint>)> {
    let forms = gpus::forms(state, observed, area.width);
    let heights: Vec<(u16, bool)> = forms.iter().map(|f| (f.height, f.last_resort)).collect();
    // The table's rule and header, and a row per line of it. A filter (`/`) narrows what the
    // table shows, not the node's shape: the rows are shared as if every process were shown,
    // so that the GPU panels do not change form while the user types.
    let shown = state.table_len();
    let lines = if state.process_table.filter.terms.is_empty() {
        shown
    } else {
        shown.max(observed.sample.processes.len())
    };
    let table_need = u16::try_from(lines).unwrap_or(u16::MAX).saturating_add(2);
    let rows = layout::arrange(area.height, &heights, table_need);
    let Some(&form) = forms.get(rows.form) else {
        if let Some(kept) = kept.as_deref_mut() {
            kept.forget();
        }
        return vec![(area, Some(Paint::default()))];
    };
    let [gpu_area, table_area, findings_area] = Layout::vertical([
        Constraint::Length(rows.gpus),
        Constraint::Length(rows.table),
        Constraint::Length(rows.findings),
    ])
    .areas(area);
    let gpus = gpus::section(gpu_area, state, observed, (area.width, form, theme), kept);
    let mut table = Paint::default();
    processes::draw_processes(&mut table, table_area, state, theme);
    let mut findings = Paint::default();
    findings::draw_findings(&mut findings, findings_area, state, observed, theme);
    // Bands that meet: each from its own area's top to the next one's.
    let band = |top: u16, bottom: u16| Rect {
        y: top,
        height: bottom.saturating_sub(top),
        ..area
    };
    vec![
        (band(area.top(), table_area.top()), gpus),
        (band(table_area.top(), findings_area.top()), Some(table)),
        (band(findings_area.top(), area.bottom()), Some(findings)),
    ]
}

#[cfg(test)]
mod picture;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_bands;
#[cfg(test)]
mod tests_layout;
#[cfg(test)]
mod tests_sites;
#[cfg(test)]
mod tests_strata_and_evidence;
#[cfg(test)]
mod tests_vocabulary;

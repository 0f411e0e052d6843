//! The mouse: a click selects a line of the process table, a second click on the same line
//! opens it (as Enter does), the wheel moves the selection or scrolls the view under it. A
//! click on a GPU (its panel or its rows) selects it: the table shows that GPU's processes
//! (`gpu:N`, as `/` would; a click on it again shows them all); a double-click opens the
//! strata view at that GPU. Where each line of the table and each GPU is on screen is what
//! the drawing recorded ([`Mouse::table`], [`Mouse::gpus`]), never worked out again here.

use super::{Action, Focus, State, View};
use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;
use std::cell::RefCell;
use std::time::{Duration, Instant};

/// Two presses on one line within this are a double-click (the common desktop default).
pub(crate) const DOUBLE_CLICK: Duration = Duration::from_millis(500);

/// Lines a wheel's notch scrolls a text view (help, reconciliation, evidence) by; a table
/// moves its selection one row a notch.
const WHEEL_LINES: usize = 3;

/// What one line of the drawn table holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TableLine {
    /// A process, by (pid, device uuid).
    Process(u32, String),
    /// A group row (`g`), by (key, device uuid).
    Group(String, String),
}

/// The process table as last drawn: where its lines are and what each holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableDrawn {
    /// The table's columns, from `left` for `width` cells.
    pub(crate) left: u16,
    pub(crate) width: u16,
    /// The screen row of its first line below the header.
    pub(crate) top: u16,
    /// Its lines shown, top to bottom, one a screen row.
    pub(crate) lines: Vec<TableLine>,
}

impl TableDrawn {
    /// The line at screen cell (`column`, `row`), if the table shows one there.
    fn line_at(&self, column: u16, row: u16) -> Option<&TableLine> {
        if column < self.left || column >= self.left.saturating_add(self.width) || row < self.top {
            return None;
        }
        self.lines.get(usize::from(row - self.top))
    }

    /// Whether screen cell (`column`, `row`) is on the table, its header and title included.
    fn covers(&self, column: u16, row: u16) -> bool {
        column >= self.left
            && column < self.left.saturating_add(self.width)
            && row.saturating_add(2) >= self.top
            && usize::from(row) < usize::from(self.top) + self.lines.len()
    }
}

/// A GPU as last drawn: the cells its panel (or its compact rows, one record a row) took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GpuDrawn {
    pub(crate) area: Rect,
    /// Its index as NVML numbers it (what `gpu:N` names).
    pub(crate) index: u32,
    pub(crate) uuid: String,
}

/// What a click landed on, for a double-click: the same thing twice.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Clicked {
    Line(TableLine),
    /// A GPU, by UUID.
    Gpu(String),
}

/// What the mouse needs: the table's place as drawn, and the last click.
#[derive(Debug, Default)]
pub struct Mouse {
    /// The process table as last drawn; `None` when the last frame did not draw it. Set by
    /// the drawing (it alone knows the rows that fit and how far the table scrolled), taken
    /// by the event loop before each frame.
    pub(crate) table: RefCell<Option<TableDrawn>>,
    /// The GPUs as last drawn; empty when the last frame drew none. Set and taken like
    /// [`Mouse::table`].
    pub(crate) gpus: RefCell<Vec<GpuDrawn>>,
    /// The last press of the left button: when, and on what, for a double-click.
    last_click: Option<(Instant, Clicked)>,
}

impl State {
    /// A mouse event at `now`; whether it changed anything to redraw.
    pub(crate) fn on_mouse(&mut self, event: MouseEvent, now: Instant) -> bool {
        // Not captured (`--no-mouse`): the terminal's own, even if a report comes through.
        // A dialog or a prompt waits for its answer from the keyboard.
        if !self.setup.mouse
            || self.kill.dialog.is_some()
            || self.attach.offer.is_some()
            || self.recorder.prompt.is_some()
        {
            return false;
        }
        let (column, row) = (event.column, event.row);
        match event.kind {
            MouseEventKind::Down(MouseButton::Left) => self.click(column, row, now),
            MouseEventKind::ScrollDown => self.wheel(column, row, 1),
            MouseEventKind::ScrollUp => self.wheel(column, row, -1),
            _ => false,
        }
    }

    /// The table as last drawn, when the main screen shows it.
    fn table_drawn(&self) -> Option<TableDrawn> {
        if self.view != View::Main {
            return None;
        }
        self.mouse.table.borrow().clone()
    }

    fn click(&mut self, column: u16, row: u16, now: Instant) -> bool {
        let Some(line) = self
            .table_drawn()
            .and_then(|t| t.line_at(column, row).cloned())
        else {
            return self.click_gpu(column, row, now);
        };
        let double = self.double(Clicked::Line(line.clone()), now);
        self.focus = Focus::Processes;
        self.process_table.selection_moved = true;
        match &line {
            TableLine::Process(pid, uuid) => {
                self.process_table.selected_group = None;
                self.process_table.selected = Some((*pid, uuid.clone()));
            }
            TableLine::Group(key, uuid) => {
                self.process_table.selected = None;
                self.process_table.selected_group = Some((key.clone(), uuid.clone()));
            }
        }
        if double {
            self.apply_action(Action::Open);
        } else {
            self.mouse.last_click = Some((now, Clicked::Line(line)));
        }
        true
    }

    /// Whether a press on `what` at `now` is the second of a double-click (the last click
    /// is forgotten either way).
    fn double(&mut self, what: Clicked, now: Instant) -> bool {
        self.mouse
            .last_click
            .take()
            .is_some_and(|(at, last)| last == what && now.duration_since(at) <= DOUBLE_CLICK)
    }

    /// A click on a GPU selects it: the table shows its processes (`gpu:N`), or all of them
    /// again when it already did. A double-click opens the strata view at that GPU.
    fn click_gpu(&mut self, column: u16, row: u16, now: Instant) -> bool {
        let hit = (self.view == View::Main)
            .then(|| {
                self.mouse
                    .gpus
                    .borrow()
                    .iter()
                    .find(|g| {
                        let a = g.area;
                        column >= a.x && column < a.right() && row >= a.y && row < a.bottom()
                    })
                    .cloned()
            })
            .flatten();
        let Some(gpu) = hit else {
            self.mouse.last_click = None;
            return false;
        };
        let clicked = Clicked::Gpu(gpu.uuid.clone());
        if self.double(clicked.clone(), now) {
            let devices = self
                .current
                .as_ref()
                .map(|o| super::strata::strata_devices(&o.sample))
                .unwrap_or_default();
            if let Some(position) = devices.iter().position(|d| d.uuid == gpu.uuid) {
                self.strata.device = position;
            }
            self.view = View::Strata;
            return true;
        }
        let term = format!("gpu:{}", gpu.index);
        if self.process_table.filter.is_on() && self.process_table.filter.text == term {
            self.clear_filter();
        } else if self.start_filtered(&term).is_err() {
            return false;
        }
        self.focus = Focus::Processes;
        self.mouse.last_click = Some((now, clicked));
        true
    }

    /// A notch of the wheel, `delta` down: over the table its selection moves a row; on the
    /// main screen elsewhere the focused list's; a text view scrolls a few lines.
    fn wheel(&mut self, column: u16, row: u16, delta: isize) -> bool {
        let action = if delta > 0 { Action::Down } else { Action::Up };
        match self.view {
            View::Main => {
                if self.table_drawn().is_some_and(|t| t.covers(column, row)) {
                    self.focus = Focus::Processes;
                }
                self.apply_action(action);
            }
            View::Help | View::Detail { .. } | View::Sites { .. } | View::Evidence(_) => {
                for _ in 0..WHEEL_LINES {
                    self.apply_action(action);
                }
            }
            View::Strata | View::Group { .. } => self.apply_action(action),
        }
        self.mouse.last_click = None;
        true
    }
}

#[cfg(test)]
#[path = "mouse_tests.rs"]
mod tests;

//! Which cells of a frame changed since the last: ratatui's `Buffer::diff`, cell for cell
//! and in the same order, at a fraction of its cost on a screen that hardly moves.
//!
//! ratatui's diff measures the width of every cell it passes (a look-up in the Unicode
//! tables for every bar, rule and mark) and compares each pair through `Cell`'s
//! `PartialEq` (the symbols through `memcmp`): some 140 instructions a cell, six tenths of a
//! still frame's drawing at 1 GPU × 1 process. Here two cells are compared field by field,
//! a one-byte symbol by its byte, and a cell that did not change is measured only where its
//! symbol could be wider than a column. Where a cell changed, the walk is ratatui's own:
//! the same widths, the same trailing cells rewritten behind a wide character or after a
//! wide one gone from a coloured background.

use ratatui::buffer::{Buffer, Cell, CellDiffOption, CellWidth};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};

/// ratatui's: a cell with one of these shows on a blank.
const VISIBLE_ON_BLANK: Modifier = Modifier::REVERSED
    .union(Modifier::UNDERLINED)
    .union(Modifier::SLOW_BLINK)
    .union(Modifier::RAPID_BLINK)
    .union(Modifier::CROSSED_OUT);

/// The cells of `next` to write over a screen that shows `prev`, with their columns and
/// rows: what `prev.diff(next)` gives (where that does not index past the frame's end,
/// after a wide character in its last cell). The buffers have the same place and width (as
/// ratatui's diff asks); rows past the shorter one are not compared.
pub(crate) fn changes<'p, 'n>(prev: &'p Buffer, next: &'n Buffer) -> Changes<'p, 'n> {
    changes_in(prev, next, 0..u16::MAX)
}

/// [`changes`] in the rows `rows` of the frame only (counted from its top): the same cells
/// as [`changes`] gives in those rows where no wide character stands across a row's end
/// (none can: ratatui writes none past its line's end).
pub(crate) fn changes_in<'p, 'n>(
    prev: &'p Buffer,
    next: &'n Buffer,
    rows: std::ops::Range<u16>,
) -> Changes<'p, 'n> {
    assert!(
        prev.area.x == next.area.x
            && prev.area.y == next.area.y
            && prev.area.width == next.area.width,
        "frames of different places or widths: {:?} and {:?}",
        prev.area,
        next.area
    );
    let mut area = prev.area;
    area.height = area.height.min(next.area.height);
    let len = next.content.len().min(prev.content.len());
    let width = usize::from(area.width);
    Changes {
        next: &next.content,
        prev: &prev.content,
        area,
        pos: (usize::from(rows.start) * width).min(len),
        end: (usize::from(rows.end) * width).min(len),
        trailing: None,
    }
}

/// The walk [`changes`] makes.
pub(crate) struct Changes<'p, 'n> {
    next: &'n [Cell],
    prev: &'p [Cell],
    area: Rect,
    pos: usize,
    /// Where the walk stops: the end of its last row, or of the shorter frame.
    end: usize,
    trailing: Option<Trailing>,
}

/// The cells behind a changed one that are looked at again (ratatui's `TrailingState`).
struct Trailing {
    next_index: usize,
    end: usize,
    force: bool,
}

impl Changes<'_, '_> {
    fn place(&self, index: usize) -> (u16, u16) {
        let width = usize::from(self.area.width);
        let x = index % width + usize::from(self.area.x);
        let y = index / width + usize::from(self.area.y);
        // Within the area, whose corners are u16.
        (x as u16, y as u16)
    }
}

impl<'n> Iterator for Changes<'_, 'n> {
    type Item = (u16, u16, &'n Cell);

    fn next(&mut self) -> Option<Self::Item> {
        let len = self.end;
        if let Some(Trailing {
            next_index,
            end,
            force,
        }) = &mut self.trailing
        {
            while *next_index < *end {
                let j = *next_index;
                // Past the next frame's end ratatui's walk fails; here it stops.
                let Some(cell) = self.next.get(j) else {
                    break;
                };
                *next_index += usize::from(cell.cell_width().max(1));
                *end = (*end).max(*next_index).min(len);
                if !skipped(cell)
                    && (*force || self.prev.get(j).map(Cell::symbol) != Some(cell.symbol()))
                {
                    let (x, y) = self.place(j);
                    return Some((x, y, &self.next[j]));
                }
            }
            self.pos = *end;
            self.trailing = None;
        }
        while self.pos < len {
            // Most of a frame: cells one column wide that did not change, passed in a tight
            // loop.
            let start = self.pos;
            self.pos += self.next[start..len]
                .iter()
                .zip(&self.prev[start..len])
                .position(|(current, previous)| !unchanged(current, previous))
                .unwrap_or(len - start);
            if self.pos == len {
                break;
            }
            let i = self.pos;
            self.pos += 1;
            let current = &self.next[i];
            let previous = &self.prev[i];
            match current.diff_option {
                CellDiffOption::Skip => {}
                _ if skipped(current) => {}
                CellDiffOption::ForcedWidth(width) => {
                    self.pos = self
                        .pos
                        .saturating_add(usize::from(width.get().saturating_sub(1)));
                    if !same(current, previous) {
                        let (x, y) = self.place(i);
                        return Some((x, y, current));
                    }
                }
                CellDiffOption::None | CellDiffOption::AlwaysUpdate => {
                    let update = matches!(current.diff_option, CellDiffOption::AlwaysUpdate);
                    if !update && same(current, previous) {
                        // ratatui measures the cell first: a wide one hides the next columns.
                        if !narrow(current.symbol()) {
                            let width = usize::from(current.cell_width());
                            self.pos += width.saturating_sub(1);
                        }
                        continue;
                    }
                    let width = usize::from(current.cell_width());
                    let previous_width = usize::from(previous.cell_width());
                    let vs16 = width > 1 && current.symbol().contains('\u{FE0F}');
                    if vs16 {
                        self.trailing = Some(Trailing {
                            next_index: i + 1,
                            end: (i + width).min(len),
                            force: false,
                        });
                    } else if width > 1 {
                        self.pos += width - 1;
                    } else if previous_width > width
                        && (previous.bg != Color::Reset
                            || previous.modifier.intersects(VISIBLE_ON_BLANK))
                    {
                        self.trailing = Some(Trailing {
                            next_index: i + 1,
                            end: i + previous_width,
                            force: true,
                        });
                    }
                    let (x, y) = self.place(i);
                    return Some((x, y, current));
                }
            }
        }
        None
    }
}

/// A cell ratatui's walk passes and leaves as it is: written as any (no diff option, not
/// skipped), one column wide, and as it was.
#[allow(deprecated)]
#[inline(always)]
fn unchanged(current: &Cell, previous: &Cell) -> bool {
    matches!(current.diff_option, CellDiffOption::None)
        && !current.skip
        && same(current, previous)
        && narrow(current.symbol())
}

/// ratatui's: the cell is not written.
#[allow(deprecated)]
fn skipped(cell: &Cell) -> bool {
    matches!(cell.diff_option, CellDiffOption::Skip)
        || (cell.skip && matches!(cell.diff_option, CellDiffOption::None))
}

/// `a == b` as `Cell`'s `PartialEq` has it (no symbol and a space are the same), the
/// cheapest fields first and a one-byte symbol by its byte.
#[allow(deprecated)]
#[inline(always)]
fn same(a: &Cell, b: &Cell) -> bool {
    a.fg == b.fg
        && a.bg == b.bg
        && a.modifier == b.modifier
        && a.underline_color == b.underline_color
        && a.skip == b.skip
        && a.diff_option == b.diff_option
        && match (a.symbol().as_bytes(), b.symbol().as_bytes()) {
            ([x], [y]) => x == y,
            (x, y) => x == y,
        }
}

/// A symbol surely one column wide without measuring it: one byte (ratatui counts any as
/// one), or one character of those the screen's figures, arrows, rules, bars and marks are
/// drawn with that `unicode-width` counts one column: U+00A0 to U+00FF but the soft hyphen
/// (U+00AD, none), the dashes and dots of U+2010 to U+2027, the arrows and mathematical
/// operators of U+2190 to U+22FF, and the box-drawing, block and geometric characters of
/// U+2500 to U+25FF but U+25FD and U+25FE (wide). The middle dot of a bar's free part and
/// the cross of its other part were measured at every cell of every frame.
fn narrow(symbol: &str) -> bool {
    match symbol.as_bytes() {
        [_] => true,
        // U+00A0..=U+00BF is C2 A0 ..= C2 BF; U+00C0..=U+00FF is C3 80 ..= C3 BF.
        [0xC2, second] => matches!(second, 0xA0..=0xAC | 0xAE..=0xBF),
        [0xC3, _] => true,
        // U+2010..=U+2027 is E2 80 90 ..= E2 80 A7.
        [0xE2, 0x80, 0x90..=0xA7] => true,
        // U+2190..=U+22FF is E2 86 90 ..= E2 8B BF.
        [0xE2, 0x86, 0x90..=0xBF] | [0xE2, 0x87..=0x8B, _] => true,
        // U+2500..=U+25FF is E2 94 80 ..= E2 97 BF.
        [0xE2, 0x94..=0x96, _] => true,
        [0xE2, 0x97, last] => !matches!(last, 0xBD | 0xBE),
        _ => false,
    }
}

#[cfg(test)]
#[path = "diff_tests.rs"]
mod tests;

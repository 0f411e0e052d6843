//! The cells written are ratatui's diff's, for any two frames.

use super::*;
use proptest::prelude::*;
use std::num::NonZeroU16;

/// Symbols of every kind the walk treats apart: one byte, none, a space, narrow bars and
/// rules, U+25FD (wide, among the narrow shapes), wide, wide with VS16, combining, a
/// halfwidth sound mark ratatui counts a column more.
const SYMBOLS: [&str; 16] = [
    "a",
    "·",
    "\u{AD}",
    " ",
    "",
    "7",
    "█",
    "─",
    "◿",
    "◽",
    "中",
    "❤\u{FE0F}",
    "e\u{301}",
    "ｶﾞ",
    "\u{200B}",
    "ab",
];
const COLOURS: [Color; 5] = [
    Color::Reset,
    Color::Red,
    Color::DarkGray,
    Color::Indexed(208),
    Color::Rgb(1, 2, 3),
];

/// One cell: symbol, fg, bg, underline colour, modifier bits, skip, diff option.
type Drawn = (usize, usize, usize, usize, u8, bool, u8);

fn drawn() -> impl Strategy<Value = Drawn> {
    (
        0..SYMBOLS.len(),
        0..COLOURS.len(),
        0..COLOURS.len(),
        0..COLOURS.len(),
        any::<u8>(),
        prop::bool::weighted(0.05),
        // Mostly `None`; the others now and then.
        prop_oneof![8 => Just(0u8), 1 => 1u8..5],
    )
}

#[allow(deprecated)]
fn cell(&(symbol, fg, bg, underline, bits, skip, option): &Drawn) -> Cell {
    let mut cell = Cell::EMPTY;
    // Now and then no symbol at all (`Cell::EMPTY`'s), which is a space to ratatui.
    if symbol != 1 || bits % 2 == 0 {
        cell.set_symbol(SYMBOLS[symbol]);
    }
    cell.fg = COLOURS[fg];
    cell.bg = COLOURS[bg];
    cell.underline_color = COLOURS[underline];
    cell.modifier = Modifier::from_bits_truncate(u16::from(bits));
    cell.skip = skip;
    cell.diff_option = match option {
        0 => CellDiffOption::None,
        1 => CellDiffOption::Skip,
        2 => CellDiffOption::AlwaysUpdate,
        3 => CellDiffOption::ForcedWidth(NonZeroU16::MIN),
        _ => CellDiffOption::ForcedWidth(NonZeroU16::new(2).unwrap()),
    };
    cell
}

/// Two frames of `width` and their heights, at (x, y): each cell of the second a copy of
/// the first's, or changed in one field or in all, as frames of a monitor differ.
fn frames() -> impl Strategy<Value = (Buffer, Buffer)> {
    (1u16..14, 0u16..6, 0u16..6, 0u16..3, 0u16..3).prop_flat_map(|(width, h1, h2, x, y)| {
        let cells = usize::from(width * h1.max(h2));
        (
            proptest::collection::vec(drawn(), cells),
            proptest::collection::vec((0u8..10, drawn()), cells),
        )
            .prop_map(move |(first, second)| {
                let mut prev = Buffer::empty(Rect::new(x, y, width, h1));
                let mut next = Buffer::empty(Rect::new(x, y, width, h2));
                for (i, was) in first.iter().enumerate() {
                    if let Some(c) = prev.content.get_mut(i) {
                        *c = cell(was);
                    }
                }
                for (i, (how, new)) in second.iter().enumerate() {
                    let Some(c) = next.content.get_mut(i) else {
                        continue;
                    };
                    *c = cell(&first[i]);
                    match how {
                        0..=5 => {}
                        6 => {
                            c.set_symbol(SYMBOLS[new.0]);
                        }
                        7 => c.bg = COLOURS[new.2],
                        8 => c.modifier = Modifier::from_bits_truncate(u16::from(new.4)),
                        _ => *c = cell(new),
                    }
                }
                (prev, next)
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn the_cells_written_are_ratatuis_diffs((prev, next) in frames()) {
        let ours: Vec<(u16, u16, &Cell)> = changes(&prev, &next).collect();
        // ratatui's walk indexes past the end of a frame whose last cells were wide.
        let ratatuis = std::panic::catch_unwind(|| prev.diff(&next));
        prop_assume!(ratatuis.is_ok());
        let ratatuis = ratatuis.unwrap();
        prop_assert_eq!(ours.len(), ratatuis.len(), "{:?} against {:?}", ours, ratatuis);
        for (a, b) in ours.iter().zip(&ratatuis) {
            prop_assert_eq!((a.0, a.1), (b.0, b.1));
            // The very cell of the next frame, not only an equal one.
            prop_assert!(std::ptr::eq(a.2, b.2));
        }
    }

    #[test]
    fn two_cells_are_the_same_as_ratatui_compares_them(a in drawn(), b in drawn(), field in 0..8) {
        // The second cell the first with one field of another's (or all of its).
        let mut mixed = a;
        match field {
            0 => mixed.0 = b.0,
            1 => mixed.1 = b.1,
            2 => mixed.2 = b.2,
            3 => mixed.3 = b.3,
            4 => mixed.4 = b.4,
            5 => mixed.5 = b.5,
            6 => mixed.6 = b.6,
            _ => mixed = b,
        }
        let (a, b) = (cell(&a), cell(&mixed));
        prop_assert_eq!(same(&a, &b), a == b);
        prop_assert!(same(&a, &a.clone()));
    }
}

#[test]
fn a_symbol_called_narrow_is_one_column_as_ratatui_measures_it() {
    let mut s = String::new();
    let mut passed = 0;
    // Every character but the control characters, which never reach a cell (and which
    // ratatui's measure refuses); past U+FFFF, none is narrow.
    for c in (0x20u32..0x7F)
        .chain(0xA0..0x11_0000)
        .filter_map(char::from_u32)
    {
        s.clear();
        s.push(c);
        // ratatui counts any one byte a column.
        if narrow(&s) {
            assert_eq!(s.cell_width(), 1, "U+{:04X}", u32::from(c));
            passed += 1;
        }
        // Where narrow looks, it says what ratatui measures.
        let c = u32::from(c);
        if [
            0xA0..=0xFF,
            0x2010..=0x2027,
            0x2190..=0x22FF,
            0x2500..=0x25FF,
        ]
        .iter()
        .any(|range| range.contains(&c))
        {
            assert_eq!(narrow(&s), s.cell_width() == 1, "U+{c:04X}");
        }
    }
    // The printable ASCII, 95 of U+00A0..=U+00FF, 24 dashes and dots, 368 arrows and
    // operators, 254 rules, blocks and shapes.
    assert_eq!(passed, 95 + 95 + 24 + 368 + 254);
    for symbol in SYMBOLS {
        assert!(!narrow(symbol) || symbol.cell_width() == 1, "{symbol:?}");
    }
    assert!(!narrow("─a") && !narrow("中") && !narrow("") && !narrow("\u{AD}"));
    assert!(narrow("·") && narrow("×") && narrow("°") && narrow("→") && narrow("≤"));
}

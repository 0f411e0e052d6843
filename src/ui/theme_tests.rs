//! The palettes' contrast, computed from the xterm-256 colours' RGB; the ASCII mode's
//! glyphs, and the demo's screens made ASCII cell by cell.

use super::*;
use crate::ui::tests::{demo_state, render};

/// The RGB of an xterm-256 colour of the cube (16–231) or the grey ramp (232–255), as xterm
/// defines them.
fn xterm_rgb(index: u8) -> [u8; 3] {
    const LEVELS: [u8; 6] = [0, 95, 135, 175, 215, 255];
    match index {
        16..=231 => {
            let i = usize::from(index - 16);
            [LEVELS[i / 36], LEVELS[(i / 6) % 6], LEVELS[i % 6]]
        }
        232..=255 => {
            let grey = 8 + 10 * (index - 232);
            [grey; 3]
        }
        _ => panic!("colour {index} is one of the 16 each terminal redefines"),
    }
}

/// WCAG 2's relative luminance of an sRGB colour.
fn luminance([r, g, b]: [u8; 3]) -> f64 {
    let linear = |v: u8| {
        let v = f64::from(v) / 255.0;
        if v <= 0.03928 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)
}

/// WCAG 2's contrast ratio of two colours, 1 to 21.
fn contrast(a: [u8; 3], b: [u8; 3]) -> f64 {
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

#[test]
fn contrast_ratios_are_those_of_wcag() {
    assert!((contrast([0; 3], [255; 3]) - 21.0).abs() < 1e-9);
    assert!((contrast([255; 3], [255; 3]) - 1.0).abs() < 1e-9);
    // The named blue of xterm's own scheme (#0000ee): what the cached layer was drawn in.
    assert!(contrast([0, 0, 238], [0; 3]) < 3.0);
}

#[test]
fn every_layer_reads_at_3_to_1_on_its_background() {
    for (palette, background) in [(Palette::Dark, [0u8; 3]), (Palette::Light, [255u8; 3])] {
        let theme = Theme {
            palette,
            ..Theme::default()
        };
        for layer in Layer::ALL {
            let index = theme.layer_index(layer);
            let ratio = contrast(xterm_rgb(index), background);
            eprintln!("{palette:?} {:<13} {index:>3} {ratio:.2}:1", layer.name());
            assert!(
                ratio >= 3.0,
                "{layer:?} ({index}) is {ratio:.2}:1 on {palette:?}"
            );
            assert_eq!(
                theme.layer(layer).fg,
                Some(Color::Indexed(index)),
                "drawn in the colour measured"
            );
        }
    }
}

#[test]
fn monochrome_drops_every_colour_in_either_palette() {
    for palette in [Palette::Dark, Palette::Light] {
        let theme = Theme {
            mono: true,
            palette,
            ascii: false,
        };
        for layer in Layer::ALL {
            assert_eq!(theme.layer(layer).fg, None);
        }
        assert_eq!(theme.title().fg, None);
    }
}

#[test]
fn ascii_mode_names_every_glyph_in_ascii() {
    let ascii = Theme {
        ascii: true,
        ..Theme::default()
    };
    for glyph in GLYPHS {
        assert!(ascii.glyph(glyph).is_ascii(), "{glyph:?}");
        assert!(!Theme::default().glyph(glyph).is_ascii(), "{glyph:?}");
    }
    assert!(ascii.ticks().iter().all(char::is_ascii));
    let border = ascii.border_set();
    for part in [
        border.top_left,
        border.horizontal_top,
        border.vertical_left,
        border.bottom_right,
    ] {
        assert!(part.is_ascii(), "{part:?}");
    }
    assert_eq!(ascii.text("≥1.2G · 64°C … ok"), ">=1.2G . 64C ... ok");
    assert_eq!(ascii.text("python 训练"), "python ??");
    assert_eq!(Theme::default().text("≥1.2G"), "≥1.2G");
}

/// Each screen of the demo at three sizes, made ASCII by the last pass: every cell ASCII,
/// and every glyph drawn has an ASCII form of its own (only letters of other scripts and
/// emoji from outside become `?`).
#[test]
fn the_demo_screens_in_ascii_are_ascii_in_every_cell() {
    let state = demo_state(false);
    for (width, height) in [(80, 24), (120, 40), (200, 60)] {
        let mut buffer = render(&state, width, height);
        for cell in buffer.content() {
            for c in cell.symbol().chars() {
                let from_outside = c.is_alphabetic() || u32::from(c) >= 0x1f000;
                assert!(
                    ascii_char(c).is_some() || from_outside,
                    "{c:?} (U+{:04X}) at {width}x{height} has no ASCII form",
                    u32::from(c)
                );
            }
        }
        let before: Vec<String> = buffer
            .content()
            .iter()
            .map(|c| c.symbol().to_string())
            .collect();
        assert!(
            before.iter().any(|s| !s.is_ascii()),
            "the screen drew glyphs to convert"
        );
        to_ascii(&mut buffer);
        for (i, cell) in buffer.content().iter().enumerate() {
            assert!(
                cell.symbol().is_ascii(),
                "cell {i} at {width}x{height}: {:?}",
                cell.symbol()
            );
            if before[i].is_ascii() {
                assert_eq!(cell.symbol(), before[i], "ASCII is kept as it is");
            }
        }
    }
}

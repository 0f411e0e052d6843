//! Strings from outside (NVML, `/proc`, feeds, recordings) made safe for a terminal.

use std::borrow::Cow;

/// Whether a character must not reach a terminal as is: C0 and C1 controls (escape sequences
/// start with ESC or CSI; a newline or tab in a command line would break the row), DEL, the
/// bidirectional overrides and isolates that reorder what follows them on screen, and the
/// zero-width characters that hide text or make two different strings look the same.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2060}'..='\u{2064}'
                | '\u{061C}'
                | '\u{180E}'
                | '\u{FEFF}'
        )
}

/// The string with every unsafe character replaced by `�`; borrowed when already clean.
pub fn clean(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| if unsafe_char(c) { '\u{FFFD}' } else { c })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_and_bidi_overrides_never_pass() {
        assert_eq!(clean("python train.py"), "python train.py");
        assert!(matches!(clean("plain"), Cow::Borrowed(_)));
        assert_eq!(clean("a\x1b[2Jb"), "a\u{FFFD}[2Jb");
        assert_eq!(
            clean("x\u{9b}31m\ny\r\x07"),
            "x\u{FFFD}31m\u{FFFD}y\u{FFFD}\u{FFFD}"
        );
        assert_eq!(clean("evil\u{202E}txt.exe"), "evil\u{FFFD}txt.exe");
        assert_eq!(clean("ünïcödé 名前"), "ünïcödé 名前");
    }

    #[test]
    fn zero_width_characters_are_made_visible() {
        for hidden in [
            '\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}', '\u{180E}',
        ] {
            let name = format!("python{hidden} train.py");
            assert_eq!(
                clean(&name),
                "python\u{FFFD} train.py",
                "U+{:04X}",
                hidden as u32
            );
        }
    }

    #[test]
    fn newlines_and_tabs_in_a_command_line_become_one_visible_mark_each() {
        let command = "python -c import os\nos.system('x')\tend";
        let shown = clean(command);
        assert_eq!(
            shown,
            "python -c import os\u{FFFD}os.system('x')\u{FFFD}end"
        );
        assert!(!shown.contains(['\n', '\r', '\t']));
    }
}

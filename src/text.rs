//! Strings from outside (NVML, `/proc`, feeds, recordings) made safe for a terminal.

use std::borrow::Cow;

/// Whether a character must not reach a terminal as is: C0 and C1 controls (escape sequences
/// start with ESC or CSI), DEL, and the bidirectional overrides and isolates that reorder
/// what follows them on screen.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
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
}

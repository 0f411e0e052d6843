//! How figures and text are written wherever strata shows them: exact bytes grouped for
//! reading, the mark before a figure that is not exact, and text fitted to a width in
//! display cells.

use crate::context::ContextSource;
use crate::layers::Layer;

/// `58,646,999,040`: exact bytes, grouped for reading.
pub(crate) fn grouped(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// How exact a device's figures are: the least exact source of its context, and the layers
/// only partly known (lower bounds).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Exactness<'a> {
    pub(crate) context: Option<ContextSource>,
    pub(crate) partial: &'a [Layer],
    /// A process list of the device could not be read: `other` holds what those processes
    /// hold too, an upper bound.
    pub(crate) processes_unknown: bool,
}

impl Exactness<'_> {
    /// The mark before a layer's figure: `≥` for a lower bound (a partial sum, or the memory
    /// outside the pool beside an estimated context), else the context's own mark (`~`
    /// estimated, `≤` not yet split).
    pub(crate) fn mark(&self, layer: Layer) -> &'static str {
        let bounds = crate::accounting::context_bounds(self.context, true);
        if self.partial.contains(&layer) {
            "≥"
        } else if layer == Layer::Other && self.processes_unknown {
            "≤"
        } else if layer == Layer::Context {
            self.context.map_or("", |c| c.mark())
        } else {
            bounds.get(&layer).map_or("", |b| b.mark())
        }
    }
}

/// Truncates to `width` display cells, marking the cut with `…`. Whatever it is given is made
/// safe for the terminal first ([`crate::text::clean`]): most of what is drawn comes from
/// outside (NVML, `/proc`, feeds).
pub(crate) fn fit(text: &str, width: usize) -> String {
    use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};
    let text = crate::text::clean(text);
    let text = text.as_ref();
    if text.width() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    // Whole characters up to one cell short of the width, then the mark: a wide character
    // that would straddle the edge is left out, never split.
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > width - 1 {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_counts_display_cells_not_characters() {
        use unicode_width::UnicodeWidthStr;
        // Each of these takes two cells.
        let wide = "训练模型数据集🚀🚀";
        for width in 0..20 {
            let cut = fit(wide, width);
            assert!(
                cut.width() <= width,
                "{width}: {cut:?} is {} cells",
                cut.width()
            );
        }
        assert_eq!(fit(wide, 6), "训练…");
        assert_eq!(fit("python 训练.py", 40), "python 训练.py");
        assert_eq!(fit("abcdef", 4), "abc…");
    }

    #[test]
    fn bytes_are_grouped_in_threes() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(58_646_999_040), "58,646,999,040");
    }
}

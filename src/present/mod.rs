//! Words and figures: how what strata knows is written, shared by the monitor's drawing
//! ([`crate::ui`]) and the text exports ([`crate::report`], [`crate::snapshot`]). Plain
//! strings, no terminal: nothing here draws.

pub(crate) mod evidence;
mod format;
mod names;
pub(crate) mod pool_text;
pub(crate) mod shown;
pub(crate) mod sort;

pub(crate) use format::{fit, grouped, Exactness};
pub(crate) use names::state_label;
pub(crate) use names::{metric_names, peak_words};

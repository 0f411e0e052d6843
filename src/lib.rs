//! strata: where every byte of each NVIDIA GPU's memory goes.
//!
//! Flow (DESIGN.md §2): `source` → raw [`sample`] → [`accounting`] (layers) → `history` →
//! `detect` (findings) → views (`ui`, snapshot JSON).

pub mod accounting;
pub mod analyze;
pub mod app;
pub mod cli;
pub mod context;
pub mod detect;
pub mod doctor;
pub mod feed;
pub mod fixtures;
pub mod history;
pub mod launch;
pub mod layers;
pub mod manual;
pub mod oom;
pub mod pipeline;
pub mod record;
pub mod recording;
pub mod replay;
pub mod report;
pub mod sample;
pub mod serve;
pub mod signal;
pub mod snapshot;
pub mod source;
pub mod terminal;
pub mod text;
pub mod tui;
pub mod ui;
pub mod units;
pub mod version;

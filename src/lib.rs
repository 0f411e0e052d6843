//! strata: where every byte of each NVIDIA GPU's memory goes.
//!
//! Flow (ARCHITECTURE.md, "The flow"): `source` → raw [`sample`] → [`accounting`] (layers) →
//! `history` → `detect` (findings) → views (`ui`, snapshot JSON).
//!
//! The modules, by room. The collector reads the node; the model turns one raw sample into
//! layers, history and findings, with no I/O; the app holds the monitor's state; drawing
//! reads that state; the exports are other views of the same observed instant; the shell
//! holds the commands and the process around them.

// The collector: I/O only.

// Allocator feeds: finding agents' sockets, trusting them and reading their lines.
pub mod feed;
// Sources of raw node samples: NVML, the demo node.
pub mod source;

// The model: pure, no I/O.

// Feeds matched to NVML's processes and judged, then each device split into its layers.
pub mod accounting;
// Each fed process's CUDA context: observed, estimated or fixed.
pub mod context;
// Findings from an instant and the history.
pub mod detect;
// Bounded rolling history of every layer and process figure, in folded tiers.
pub mod history;
// The layers memory is split into, and their order, names and glyphs.
pub mod layers;
// The model's one direction of flow: raw sample → layers → history → findings.
pub mod pipeline;
// The raw node sample: what the sources observed at one instant, nothing derived.
pub mod sample;

// The app.

// The monitor's state and how keys and samples change it; no drawing, no terminal.
pub mod app;
// `strata replay`: the replay source, and what it and the monitor's state share: its clock,
// seeks, checkpoints.
pub mod replay;

// Drawing.

// Drawing the monitor from its state, with ratatui.
pub mod ui;

// Words and figures.

// How figures and words are written, for the monitor and the text exports alike.
pub(crate) mod present;

// Exports: views of one observed instant, or of many.

// `strata analyze`: the monitor's judgement over a recording, findings as episodes.
pub mod analyze;
// `strata export`: a recording as tidy tables (Parquet or CSV).
pub mod export;
// `strata record`, the monitor's `r`, the flight recorder, re-encoding: what drives a
// recording's writer.
pub mod record;
// Recordings, read and written: the formats.
pub mod recording;
// The incident report: one instant as Markdown, with its chart.
pub mod report;
// `strata serve`: the layers and findings as Prometheus metrics over HTTP.
pub mod serve;
// `strata fleet`: many nodes' `strata serve`, through Prometheus or their endpoints.
pub mod fleet;
// `strata sites PID`: which lines of a job's code hold its memory, from its agent.
pub mod sites;
// `strata snapshot --json`: one instant as one JSON object.
pub mod snapshot;
// `strata analyze FILE.pickle`: PyTorch snapshot files read and reduced to the segment map and
// allocation sites.
pub mod torchsnap;

// The shell: the commands, the terminal and the process around them.

// The command line; its doc comments are the help text.
pub mod cli;
// The config file: the monitor's settings, under the command line's.
pub mod config;
// `strata doctor`: what strata can and cannot see on this node, and why.
pub mod doctor;
// Small builders of raw samples for unit, property and screen tests, and benchmarks.
pub mod fixtures;
// Putting the Python agent into jobs: `strata run` and `strata attach`.
pub mod launch;
// What the loader read once and the monitor lets go of: its relocation records.
pub mod footprint;
// Shell completions and man pages, generated from the command line.
pub mod manual;
// Running out of memory ends strata with one line, the terminal restored.
pub mod oom;
// Sending a signal to a process (`K`), checked and re-verified by pidfd.
pub mod process_signal;
// Owning the terminal: raw mode, the alternate screen, one restore for every exit.
pub mod terminal;
// Strings from outside made safe for a terminal.
pub mod text;
// The full-screen monitor's event loop.
pub mod tui;
// Human-readable figures: binary units, `n/a` for unknown.
pub mod units;
// What this build is: version, commit, date, feed protocol.
pub(crate) mod version;

// The reference under docs/ held to the code (finding kinds, export columns).
#[cfg(test)]
mod docs_tests;

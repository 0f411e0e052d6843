//! The integration tests that need no process of their own, each file a module of this one
//! test binary, so that the whole dependency tree is linked once rather than once a file:
//! `cargo test --test integration FILE::` runs one file's tests.
//!
//! The others are test binaries of their own, beside this directory: those that load the
//! fake NVML into the test process and set its scenario variable (`nvml_faults`,
//! `nvml_old_driver`, `nvml_procfs`, `fake_nvml_pynvml`), the one that counts the process's
//! allocations with a global allocator (`history_memory`), and those the documentation and
//! scripts run by name (`corpus`, `fuzz_corpus`, `fake_nvml_pynvml`).

// Tests may panic: `unwrap` and `expect` say which of a test's assumptions failed, in its
// helpers too (clippy.toml allows them only in `#[test]` functions and `#[cfg(test)]` code).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod accounting_props;
mod agent_python;
mod analyze_faults;
mod analyze_progress_tmux;
mod attach;
mod build_script;
mod cli_hostile_strings;
mod cli_output;
mod cli_usage;
mod doctor_cli;
mod doctor_procfs;
mod export_cli;
mod export_tables;
mod feeds_context_e2e;
mod feeds_dirs;
mod feeds_e2e;
mod feeds_trust;
mod fleet_backfill;
mod fleet_endpoints;
mod fleet_prometheus;
mod fuzz_feeds_corpus;
mod grafana_dashboard;
mod kubernetes_assets;
mod layer_names;
mod mig_compute_instances;
mod nvml_host;
mod nvml_source;
mod owner_cgroup;
mod prometheus_rules;
mod record_cli;
mod record_fed;
mod record_reencode;
mod record_ring;
mod record_tmux;
mod recording_hostile;
mod replay_roundtrip;
mod replay_tmux;
mod report_chart;
mod report_cli;
mod rooms;
mod serve_cli;
mod serve_exposition;
mod serve_idle;
mod serve_prometheus;
mod sites_e2e;
mod snapshot_cli;
mod snapshot_groups;
mod strata_run;
mod systemd_unit;
mod torch_snapshot;
mod tui_attach_tmux;
mod tui_feeds_tmux;
mod tui_filter_tmux;
mod tui_job_control_tmux;
mod tui_kill_dialog_tmux;
mod tui_mouse_tmux;
mod tui_nvml_tmux;
mod tui_owner_tmux;
mod tui_report_tmux;
mod tui_sort_tmux;
mod tui_tmux;
mod tui_wide_chars_tmux;
mod wheel;

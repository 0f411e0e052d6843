//! The command line (DESIGN.md §4). Doc comments are the help text.

use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

/// Where every byte of each NVIDIA GPU's memory goes: CUDA context, memory outside the
/// framework's pool, cached and fragmented blocks, live tensors; per GPU and MIG instance.
#[derive(Debug, Parser)]
#[command(name = "strata", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Options every command takes.
#[derive(Debug, Args, Clone)]
pub struct Common {
    /// Watch the built-in simulated training node instead of this machine's GPUs.
    #[arg(long, global = true)]
    pub demo: bool,

    /// Seconds between samples.
    #[arg(long, global = true, default_value_t = 1.0, value_name = "SECS", value_parser = parse_interval)]
    pub interval: f64,

    /// The NVML library to load (default: the driver's libnvidia-ml.so.1).
    #[arg(long, global = true, env = "STRATA_NVML_LIB", value_name = "PATH")]
    pub nvml_lib: Option<PathBuf>,

    /// Look for allocator feeds only in this directory (and in the jobs' own roots): by
    /// default /tmp/strata-<uid>, or every /tmp/strata-* as root.
    #[arg(long, global = true, env = "STRATA_FEED_DIR", value_name = "DIR")]
    pub feed_dir: Option<PathBuf>,

    /// Use this CUDA context size for every fed process instead of estimating it.
    #[arg(long, global = true, value_name = "N")]
    pub context_mib: Option<u64>,

    /// Demo only: story seconds per wall-clock second (10 plays its 20 minutes in 2).
    #[arg(long, global = true, default_value_t = 10.0, value_name = "X", value_parser = parse_speed)]
    pub demo_speed: f64,

    /// Demo only: the story second to start at (the story so far is loaded as history).
    #[arg(long, global = true, value_name = "SECS", value_parser = parse_nonnegative)]
    pub demo_at: Option<f64>,

    /// Demo only: the seed of the simulation's noise.
    #[arg(long, global = true, default_value_t = 0, value_name = "N")]
    pub demo_seed: u64,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print one sample of the node: every layer and finding.
    Snapshot(SnapshotArgs),
    /// Run CMD with the allocator feed in every Python process it starts (no code change).
    Run(RunArgs),
    /// Start the allocator feed in a running Python 3.14+ process (sys.remote_exec).
    Attach(AttachArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Seconds between the agent's samples of the allocator.
    #[arg(long, default_value_t = 0.5, value_name = "SECS", value_parser = parse_feed_interval)]
    pub feed_interval: f64,

    /// The command to run and its arguments, after `--`: strata run -- python train.py
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The Python process to attach to.
    pub pid: u32,

    /// Seconds between the agent's samples of the allocator.
    #[arg(long, default_value_t = 0.5, value_name = "SECS", value_parser = parse_feed_interval)]
    pub feed_interval: f64,

    /// Seconds to wait for the agent to report that it started.
    #[arg(long, default_value_t = 10.0, value_name = "SECS", value_parser = parse_nonnegative)]
    pub wait: f64,
}

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Print JSON (schema strata.snapshot/1), one object per line.
    #[arg(long)]
    pub json: bool,

    /// Take this many samples, one interval apart.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: u64,
}

fn parse_positive(text: &str, what: &str, min: f64, max: f64) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of {what}"))?;
    if !value.is_finite() || value < min || value > max {
        return Err(format!("{what} must be between {min} and {max}"));
    }
    Ok(value)
}

fn parse_interval(text: &str) -> Result<f64, String> {
    parse_positive(text, "seconds", 0.05, 3600.0)
}

fn parse_feed_interval(text: &str) -> Result<f64, String> {
    parse_positive(text, "seconds", 0.01, 60.0)
}

fn parse_speed(text: &str) -> Result<f64, String> {
    parse_positive(text, "story seconds per second", 0.01, 10_000.0)
}

fn parse_nonnegative(text: &str) -> Result<f64, String> {
    parse_positive(text, "seconds", 0.0, 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn intervals_out_of_range_are_refused() {
        assert!(Cli::try_parse_from(["strata", "--interval", "0"]).is_err());
        assert!(Cli::try_parse_from(["strata", "--interval", "nan"]).is_err());
        assert!(Cli::try_parse_from(["strata", "--interval", "0.5"]).is_ok());
        assert!(Cli::try_parse_from(["strata", "snapshot", "--count", "0"]).is_err());
    }

    #[test]
    fn run_takes_the_whole_command_after_the_separator() {
        let cli = Cli::try_parse_from([
            "strata", "run", "--", "python", "-u", "train.py", "--lr", "3",
        ])
        .expect("parses");
        match cli.command {
            Some(Command::Run(run)) => assert_eq!(
                run.command,
                ["python", "-u", "train.py", "--lr", "3"].map(OsString::from)
            ),
            other => panic!("{other:?}"),
        }
        assert!(
            Cli::try_parse_from(["strata", "run"]).is_err(),
            "CMD is required"
        );
        assert!(Cli::try_parse_from(["strata", "attach", "not-a-pid"]).is_err());
    }
}

//! The command line (ARCHITECTURE.md, "Command line"). Doc comments are the help text.

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

/// Where every byte of each NVIDIA GPU's memory goes: CUDA context, memory outside the
/// framework's pool, cached and fragmented blocks, live tensors; per GPU and MIG instance.
///
/// With no command, the monitor: this node's GPUs, or the simulated one with --demo.
#[derive(Debug, Parser)]
#[command(name = "strata", version = crate::version::DESCRIBE, about, propagate_version = true)]
pub struct Cli {
    /// What the monitor watches (given before a command, they are that command's: `strata
    /// --demo snapshot` is `strata snapshot --demo`).
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub monitor: MonitorArgs,
    #[command(flatten)]
    pub live: LiveArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// What only the live monitor does (not `strata replay`): it acts on running jobs.
#[derive(Debug, Args, Clone, Default)]
pub struct LiveArgs {
    /// When a climb of live tensors is first raised on a fed torch job, ask its agent for a
    /// sites window on its own (as `w` does), once per climb: which lines grew.
    #[arg(long)]
    pub sites_on_climb: bool,
}

// The options come in groups, each flattened only into the commands that read it, so that a
// command's --help lists what it takes and nothing else (a new option goes into the group of
// the commands that read it, or a group of its own):
// - `SourceArgs`: the node a live command samples (the monitor, snapshot, serve, record):
//   the demo's, NVML's, the feeds', the context's and the interval's options;
// - `ContextArgs` alone: the commands that judge a recording (analyze, export, replay);
// - `FeedArgs`: where the agents' feeds are (run, attach, doctor), `NvmlArgs` (doctor);
// - `MonitorArgs`: how the monitor looks and what it shows (the monitor and replay);
// - `LiveArgs`: what the live monitor alone does to running jobs.

/// The monitor's own options: how it looks and what it shows, for the live monitor and for
/// `strata replay` alike.
#[derive(Debug, Args, Clone, Default)]
pub struct MonitorArgs {
    /// Start with the process table showing this user's processes (as `/` user:NAME).
    #[arg(long, value_name = "NAME", value_parser = parse_user)]
    pub user: Option<String>,

    /// Start with the process table showing this process (as `/` pid:PID).
    #[arg(long, value_name = "PID", value_parser = parse_pid)]
    pub pid: Option<u32>,

    /// Start with the process table showing the processes on this GPU: its index, or a
    /// prefix of its UUID (as `/` gpu:N).
    #[arg(long, value_name = "N", value_parser = parse_gpu)]
    pub gpu: Option<String>,

    /// Leave the mouse to the terminal (its own text selection) instead of clicks and the
    /// wheel in strata.
    #[arg(long)]
    pub no_mouse: bool,

    /// Colours for a dark terminal background (the default) or a light one.
    #[arg(long, value_enum, value_name = "THEME")]
    pub theme: Option<ThemeArg>,

    /// Draw with ASCII only: no block, braille or box-drawing glyphs, for poor terminals and
    /// fonts.
    #[arg(long)]
    pub ascii: bool,

    /// The config file to read instead of $XDG_CONFIG_HOME/strata/config.toml (`strata config
    /// --default` prints one with every key).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl MonitorArgs {
    /// The filter the options compose, as `/` would show it: `user:ana gpu:0`.
    pub fn filter_text(&self) -> String {
        let mut terms = Vec::new();
        terms.extend(self.user.as_ref().map(|u| format!("user:{u}")));
        terms.extend(self.pid.map(|p| format!("pid:{p}")));
        terms.extend(self.gpu.as_ref().map(|g| format!("gpu:{g}")));
        terms.join(" ")
    }
}

/// `--theme`: the palette.
/// The fleet's device order (`strata fleet --sort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FleetSort {
    /// Critical findings, then the soonest OOM, climbs, fragmentation, the fullest
    Urgency,
    /// By node name, then GPU
    Node,
    /// The fullest first
    Used,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ThemeArg {
    /// Colours readable on a dark background.
    Dark,
    /// Colours readable on a light background.
    Light,
}

fn parse_user(text: &str) -> Result<String, String> {
    if text.is_empty()
        || text
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c.is_control())
    {
        return Err(format!(
            "`{}` is not a user name: give one name, without spaces or quotes",
            text.escape_debug()
        ));
    }
    Ok(text.to_string())
}

/// A PID, as the filter's `pid:` takes it: a whole number from 1.
fn parse_pid(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(pid) if pid > 0 => Ok(pid),
        _ => Err(format!(
            "`{}` is not a PID: a whole number from 1 to {}",
            text.escape_debug(),
            u32::MAX
        )),
    }
}

/// A GPU, as the filter's `gpu:` takes it: its index, or a prefix of its UUID (`GPU-5f2a`).
fn parse_gpu(text: &str) -> Result<String, String> {
    let uuid_like = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | ':' | '.'));
    if text.is_empty() || text.starts_with('-') || !uuid_like {
        return Err(format!(
            "`{}` is not a GPU: its index (0) or a prefix of its UUID (GPU-5f2a)",
            text.escape_debug()
        ));
    }
    Ok(text.to_string())
}

/// The node a live command samples: this machine's GPUs through NVML with the allocator
/// feeds found on it, or the simulated node.
#[derive(Debug, Args, Clone)]
pub struct SourceArgs {
    #[command(flatten)]
    pub demo: DemoArgs,
    #[command(flatten)]
    pub nvml: NvmlArgs,
    #[command(flatten)]
    pub feeds: FeedArgs,
    #[command(flatten)]
    pub context: ContextArgs,
    #[command(flatten)]
    pub interval: IntervalArgs,
}

/// The simulated node and its story.
#[derive(Debug, Args, Clone)]
pub struct DemoArgs {
    /// Watch the built-in simulated training node instead of this machine's GPUs.
    #[arg(long)]
    pub demo: bool,

    /// Demo only: story seconds per wall-clock second (10 plays its 20 minutes in 2).
    #[arg(long, default_value_t = 10.0, value_name = "X", value_parser = parse_speed)]
    pub demo_speed: f64,

    /// Demo only: the story second to start at (the story so far is loaded as history).
    #[arg(long, value_name = "SECS", value_parser = parse_nonnegative)]
    pub demo_at: Option<f64>,

    /// Demo only: the seed of the simulation's noise.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub demo_seed: u64,
}

/// How often a live command samples.
#[derive(Debug, Args, Clone)]
pub struct IntervalArgs {
    /// Seconds between samples [default: 1, or the config file's `interval` for the monitor].
    #[arg(long, value_name = "SECS", value_parser = parse_interval)]
    pub interval: Option<f64>,
}

impl IntervalArgs {
    /// Seconds between samples when the command line gives none.
    pub const DEFAULT: f64 = 1.0;

    /// The interval given, or the default.
    pub fn secs(&self) -> f64 {
        self.interval.unwrap_or(Self::DEFAULT)
    }
}

/// The NVML library.
#[derive(Debug, Args, Clone)]
pub struct NvmlArgs {
    /// The NVML library to load (default: the driver's libnvidia-ml.so.1).
    #[arg(long, env = "STRATA_NVML_LIB", value_name = "PATH")]
    pub nvml_lib: Option<PathBuf>,
}

/// Where the allocator feeds are.
#[derive(Debug, Args, Clone)]
pub struct FeedArgs {
    /// Look for allocator feeds only in this directory (and in the jobs' own roots): by
    /// default /tmp/strata-<uid>, or every /tmp/strata-* as root.
    #[arg(long, env = "STRATA_FEED_DIR", value_name = "DIR")]
    pub feed_dir: Option<PathBuf>,
}

/// How a fed process's CUDA context is sized.
#[derive(Debug, Args, Clone, Default)]
pub struct ContextArgs {
    /// Use this CUDA context size (MiB) for every fed process instead of estimating it.
    #[arg(long, value_name = "N", value_parser = parse_context_mib)]
    pub(crate) context_mib: Option<u64>,
}

impl ContextArgs {
    /// The fixed CUDA context size in bytes (`--context-mib`); the parser has made sure it
    /// fits.
    pub fn context_bytes(&self) -> Option<u64> {
        self.context_mib.and_then(|mib| mib.checked_mul(MIB))
    }
}

impl SourceArgs {
    /// Whether the source is the simulated node.
    pub fn is_demo(&self) -> bool {
        self.demo.demo
    }

    /// Seconds between samples.
    pub fn interval(&self) -> f64 {
        self.interval.secs()
    }

    /// The fixed CUDA context size in bytes (`--context-mib`).
    pub fn context_bytes(&self) -> Option<u64> {
        self.context.context_bytes()
    }
}

/// The options that only the demo reads: given without `--demo`, they are a mistake.
const DEMO_ONLY: [&str; 3] = ["demo_speed", "demo_at", "demo_seed"];

/// Whether the user typed `id` in these matches; a default value is not a use.
fn typed(matches: &ArgMatches, id: &str) -> bool {
    matches.try_contains_id(id).unwrap_or(false)
        && matches.value_source(id) == Some(ValueSource::CommandLine)
}

/// Which of `ids` the user typed, at the top level or in the subcommand; a default value is
/// not a use.
fn given_on_command_line(matches: &ArgMatches, ids: &[&'static str]) -> Vec<&'static str> {
    ids.iter()
        .copied()
        .filter(|id| {
            typed(matches, id) || matches.subcommand().is_some_and(|(_, sub)| typed(sub, id))
        })
        .collect()
}

/// Whether `--demo` is on, at the top level or in the subcommand.
fn demo_on(matches: &ArgMatches) -> bool {
    let on = |m: &ArgMatches| matches!(m.try_get_one::<bool>("demo"), Ok(Some(true)));
    on(matches) || matches.subcommand().is_some_and(|(_, sub)| on(sub))
}

/// The environment variables that stand for options: set but empty means unset.
const OPTION_ENV: [(&str, &str); 2] = [
    ("nvml_lib", "STRATA_NVML_LIB"),
    ("feed_dir", "STRATA_FEED_DIR"),
];

/// Whether `command` itself has the option `id`.
fn has_arg(command: &clap::Command, id: &str) -> bool {
    command.get_arguments().any(|a| a.get_id() == id)
}

/// `command` with the option `id` reading no environment variable, wherever it is.
fn without_env(mut command: clap::Command, id: &'static str) -> clap::Command {
    if has_arg(&command, id) {
        command = command.mut_arg(id, |arg| arg.env(Option::<&'static str>::None));
    }
    let names: Vec<String> = command
        .get_subcommands()
        .filter(|s| has_arg(s, id))
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, |s| {
            s.mut_arg(id, |a| a.env(Option::<&'static str>::None))
        });
    }
    command
}

/// The options written before a command's name are that command's: `strata --demo snapshot`
/// is read as `strata snapshot --demo`. Returns the arguments so reordered and the command's
/// name, or the arguments as they are where no command is named (the monitor) or where
/// something before it is not one of the monitor's options (clap says what).
fn hoist(command: &clap::Command, args: Vec<OsString>) -> (Vec<OsString>, Option<String>) {
    let mut at = 1;
    while let Some(token) = args.get(at) {
        let Some(text) = token.to_str() else {
            return (args, None);
        };
        if let Some(long) = text.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((name, _)) => (name, true),
                None => (long, false),
            };
            let Some(arg) = command.get_arguments().find(|a| a.get_long() == Some(name)) else {
                return (args, None);
            };
            let takes_value = arg.get_action().takes_values();
            at += if takes_value && !inline { 2 } else { 1 };
            continue;
        }
        if text.starts_with('-') {
            return (args, None);
        }
        let Some(sub) = command.find_subcommand(text) else {
            return (args, None);
        };
        let name = sub.get_name().to_string();
        if at == 1 {
            return (args, Some(name));
        }
        let mut moved = Vec::with_capacity(args.len());
        moved.push(args[0].clone());
        moved.push(args[at].clone());
        moved.extend(args[1..at].iter().cloned());
        moved.extend(args[at + 1..].iter().cloned());
        return (moved, Some(name));
    }
    (args, None)
}

/// Why a command does not take an option some other command does, in a few words.
fn why_not(command: &str, option: &str) -> &'static str {
    match (command, option) {
        ("doctor", o) if o.starts_with("--demo") => {
            "doctor checks this node's driver, /proc, feed dirs and terminal, and the simulated node has none of them (hint: `strata --demo` runs anywhere)"
        }
        ("analyze" | "export" | "replay", _) => {
            "it reads a recording, not a node (hint: record with `strata record FILE`, which takes the source's options)"
        }
        ("run" | "attach", _) => {
            "it starts the allocator feed in a job; the monitor reads it (hint: `strata --help`)"
        }
        ("completions" | "man", _) => "it prints strata's own documentation",
        _ => "",
    }
}

/// An option that some command of strata takes, given to one that does not: one line that
/// says so (clap's own would only say the argument is unexpected).
fn not_taken(command: &clap::Command, sub: &str, error: &clap::Error) -> Option<clap::Error> {
    use clap::error::{ContextKind, ContextValue};
    if error.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(typed)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    refusal(command, sub, typed)
}

/// The one-line refusal of `typed` (`--demo`, `--interval=2`) by the command `sub`, where
/// `typed` is an option of another command of strata's.
fn refusal(command: &clap::Command, sub: &str, typed: &str) -> Option<clap::Error> {
    let option = typed.split('=').next().unwrap_or(typed);
    let long = option.strip_prefix("--")?;
    let known = std::iter::once(command)
        .chain(command.get_subcommands())
        .any(|c| c.get_arguments().any(|a| a.get_long() == Some(long)));
    if !known {
        return None;
    }
    let why = why_not(sub, option);
    let hint = if why.contains("hint:") {
        String::new()
    } else {
        format!(" (hint: `strata {sub} --help` lists what it takes)")
    };
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(": {why}")
    };
    Some(clap::Error::raw(
        ErrorKind::UnknownArgument,
        format!("strata {sub} does not take {option}{why}{hint}\n"),
    ))
}

impl Cli {
    /// Parses the process's command line, exiting with clap's message (status 2) on a usage
    /// error. An empty `STRATA_NVML_LIB` or `STRATA_FEED_DIR` counts as unset (as a shell's
    /// `VAR= strata` means), not as an empty path.
    pub fn from_env() -> Cli {
        let empty = |name: &str| std::env::var_os(name).is_some_and(|v| v.is_empty());
        Cli::parse_with(std::env::args_os(), empty).unwrap_or_else(|e| e.exit())
    }

    /// Parses `args`; `empty_env(NAME)` says whether that variable is set but empty.
    pub fn parse_with<I, T>(args: I, empty_env: impl Fn(&str) -> bool) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let mut command = Cli::command();
        for (id, var) in OPTION_ENV {
            if empty_env(var) {
                command = without_env(command, id);
            }
        }
        // An option given twice counts once, the last: `strata --interval 2 snapshot
        // --interval 3` samples every 3 s, as the command's own option is the later one.
        command = command.args_override_self(true);
        let names: Vec<String> = command
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        for name in names {
            command = command.mut_subcommand(name, |s| s.args_override_self(true));
        }
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let (args, sub) = hoist(&command, args);
        let mut matches = match command.try_get_matches_from_mut(args) {
            Ok(matches) => matches,
            Err(e) => {
                let refused = sub.as_deref().and_then(|sub| not_taken(&command, sub, &e));
                return Err(refused.unwrap_or(e));
            }
        };
        if !demo_on(&matches) {
            let given = given_on_command_line(&matches, &DEMO_ONLY);
            if !given.is_empty() {
                let flags: Vec<String> = given
                    .iter()
                    .map(|id| format!("--{}", id.replace('_', "-")))
                    .collect();
                return Err(command.error(
                    ErrorKind::MissingRequiredArgument,
                    format!(
                        "{} only {} to the simulated node: add --demo, or leave {} out",
                        flags.join(", "),
                        if flags.len() == 1 { "applies" } else { "apply" },
                        if flags.len() == 1 { "it" } else { "them" },
                    ),
                ));
            }
        }
        let cli = Cli::from_arg_matches_mut(&mut matches)?;
        // `strata run` takes CMD's own options after CMD: one of strata's in CMD's place is a
        // mistake, not a program to run.
        if let Some(Command::Run(run)) = &cli.command {
            if let Some(refused) = run
                .command
                .first()
                .and_then(|first| first.to_str())
                .and_then(|first| refusal(&command, "run", first))
            {
                return Err(refused);
            }
        }
        Ok(cli)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print one sample of the node: every layer and finding.
    Snapshot(SnapshotArgs),
    /// Run CMD with the allocator feed in every Python process it starts (no code change).
    Run(RunArgs),
    /// Start the allocator feed in a running Python 3.14+ process (sys.remote_exec).
    Attach(AttachArgs),
    /// Which lines of a fed PyTorch job's code hold its GPU memory: its agent records the
    /// allocator's history for --seconds (torch 2.1+, Python stacks only, put back as the job
    /// had it), then prints the sites of live blocks and of what grew over the window.
    Sites(SitesArgs),
    /// Judge a recording as the monitor would have: findings with when each was first raised
    /// and last seen. Or read a PyTorch memory snapshot (`_dump_snapshot`): its segment map,
    /// the code that holds the memory, its OOMs.
    Analyze(AnalyzeArgs),
    /// Serve the layers and findings as Prometheus metrics at http://ADDR/metrics, sampling
    /// every --interval on its own (a scrape never waits on NVML).
    Serve(ServeArgs),
    /// Every node's devices, layers and findings in one view, from Prometheus (which scrapes
    /// `strata serve` on each node) or, for a few nodes, from their endpoints directly; a job's
    /// ranks across nodes with the ones that stand apart (`rank_outlier`).
    Fleet(FleetArgs),
    /// Append raw samples to FILE, one per interval, until stopped (TERM, HUP, INT) or
    /// --duration: recording format 2 (zstd) unless the name says JSON lines (.jsonl plain,
    /// .jsonl.zst, .gz gzip); with --ring, a flight record in the directory FILE; with
    /// --from, re-encode a recording into FILE.
    Record(RecordArgs),
    /// Write a recording's tables for a notebook into the directory OUT: devices (each
    /// device's layers at each sample), processes (each process's figures, long form) and
    /// findings, as Parquet or CSV files that pandas, polars and DuckDB read as they are.
    Export(ExportArgs),
    /// The monitor, driven by a recording (format 2 or JSON lines, plain or compressed):
    /// p pause, + - speed, ← → a minute back or on, g G start and end.
    Replay(ReplayArgs),
    /// What strata can and cannot see on this node, and why: each check ok, limited or
    /// missing, with the fix (exit status 0 when all is ok, 3 when some is limited, 1 when
    /// any is missing).
    Doctor(DoctorArgs),
    /// Print the completion script for SHELL: `strata completions bash >
    /// ~/.local/share/bash-completion/completions/strata`.
    Completions(CompletionsArgs),
    /// Print strata's man page (roff), or write one page per command into --dir:
    /// `strata man | man -l -`.
    Man(ManArgs),
    /// Say which config file the monitor reads and whether it is there, or print one with
    /// every key, documented (--default): `strata config --default >
    /// ~/.config/strata/config.toml`.
    Config(ConfigArgs),
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Print the default config file, every key with its meaning and its default.
    #[arg(long)]
    pub default: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write strata.1 and strata-COMMAND.1 for each command into DIR instead.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print JSON (schema strata.doctor/1): every check with its status, reason and fix.
    #[arg(long)]
    pub(crate) json: bool,

    /// The address `strata serve` would listen on, whose port is checked.
    #[arg(long, default_value = crate::serve::DEFAULT_LISTEN, value_name = "ADDR")]
    pub(crate) listen: String,

    /// Seconds one check may take (a call into a hung driver never returns): past it, the
    /// check says it timed out and the rest go on.
    #[arg(long, default_value_t = 5.0, value_name = "SECS", value_parser = parse_check_timeout)]
    pub(crate) timeout: f64,

    #[command(flatten)]
    pub(crate) nvml: NvmlArgs,

    #[command(flatten)]
    pub(crate) feeds: FeedArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Listen on this HOST:PORT (a host name is resolved); 0.0.0.0:9842 for every interface.
    #[arg(long, default_value = crate::serve::DEFAULT_LISTEN, value_name = "ADDR")]
    pub listen: String,

    /// Export at most this many processes one by one (the largest by used memory); the rest
    /// are summed per device as pid="other".
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_processes: usize,

    /// Keep a flight record of the samples served in the directory DIR (with --ring).
    #[arg(long, value_name = "DIR", requires = "ring")]
    pub record: Option<PathBuf>,

    #[command(flatten)]
    pub ring: RingArgs,

    #[command(flatten)]
    pub source: SourceArgs,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The recording, appended to if it exists: format 2 (zstd) unless the name says JSON
    /// lines (`.jsonl` plain, `.jsonl.zst`, `.gz` gzip). With --ring, a directory.
    pub file: PathBuf,

    /// Stop after this long: 90s, 30m, 24h, or seconds.
    #[arg(long, value_name = "TIME", value_parser = crate::record::parse_duration)]
    pub duration: Option<std::time::Duration>,

    /// Rotate FILE past this size (500M, 2G): FILE becomes FILE.1, FILE.1 FILE.2, ...
    #[arg(long, value_name = "SIZE", value_parser = crate::record::parse_size, conflicts_with = "ring")]
    pub max_size: Option<u64>,

    /// With --max-size: how many rotated files to keep (FILE.1 to FILE.N).
    #[arg(long, value_name = "N", default_value_t = 5, requires = "max_size",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub keep: u32,

    /// Re-encode the recording IN (format 2 or JSON lines, plain or compressed, or
    /// `snapshot --json --count` output) into FILE, in the format FILE's name asks for, then
    /// stop. A recording with no sample is an error, and FILE is left as it was.
    #[arg(long, value_name = "IN", conflicts_with_all = ["duration", "max_size", "ring"])]
    pub from: Option<PathBuf>,

    #[command(flatten)]
    pub ring: RingArgs,

    #[command(flatten)]
    pub source: SourceArgs,
}

/// The flight recorder's options (`strata record --ring`, `strata serve --record`).
#[derive(Debug, Args, Clone)]
pub struct RingArgs {
    /// Keep the last DURATION (6h) on disk as a flight record: finished segments in the
    /// directory, the oldest deleted; segments around an OOM, a zombie context or a critical
    /// forecast are kept past it.
    #[arg(long, value_name = "DURATION", value_parser = crate::record::parse_duration)]
    pub ring: Option<std::time::Duration>,

    /// With --ring: the most the ring's segments may take on disk (older ones go first).
    #[arg(long, value_name = "SIZE", default_value = "1G", requires = "ring",
          value_parser = crate::record::parse_size)]
    pub ring_size: u64,

    /// With --ring: the most the segments kept as evidence may take (the oldest go first).
    #[arg(long, value_name = "SIZE", default_value = "1G", requires = "ring",
          value_parser = crate::record::parse_size)]
    pub evidence_size: u64,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The recording: format 2 (what `strata record` writes) or JSON lines (`strata snapshot
    /// --json --count N`), plain or compressed (zstd, gzip).
    pub file: PathBuf,

    #[command(flatten)]
    pub context: ContextArgs,

    #[command(flatten)]
    pub interval: IntervalArgs,

    #[command(flatten)]
    pub monitor: MonitorArgs,
}

#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// The recording: format 2 (what `strata record` writes) or JSON lines (`strata snapshot
    /// --json --count N`), plain or compressed (zstd, gzip); `-` reads stdin. Or a PyTorch
    /// memory snapshot, what `torch.cuda.memory._dump_snapshot()` writes, plain or gzip
    /// (told by its content, or a name ending .pickle or .pkl).
    pub file: PathBuf,

    /// Print JSON: {"findings": [...]} with each finding's evidence; for a PyTorch snapshot,
    /// `strata.torch_snapshot/1` (its segment map, sites, OOMs and findings).
    #[arg(long)]
    pub json: bool,

    /// Write the incident report of this instant (unix seconds, or RFC 3339:
    /// 2026-01-01T09:15:00Z) into the current directory, as `R` would have live, with its
    /// chart beside it.
    #[arg(long, value_name = "TIME", conflicts_with = "json",
          value_parser = crate::analyze::report_at::parse_time)]
    pub report_at: Option<f64>,

    /// Run every detector at every sample, as the monitor does. By default the ones that
    /// read the history (climbs, fragmentation, retries, OOMs, capacity) run every 10 s of
    /// recording time and at a process's last sample, a finding's since at most 10 s later:
    /// several times faster on a long recording.
    #[arg(long)]
    pub every_sample: bool,

    #[command(flatten)]
    pub context: ContextArgs,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The recording: format 2 (what `strata record` writes) or JSON lines (`strata snapshot
    /// --json --count N`), plain or compressed (zstd, gzip); `-` reads stdin.
    pub file: PathBuf,

    /// The tables' format.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub to: crate::export::Format,

    /// The directory to write devices.FORMAT, processes.FORMAT and findings.FORMAT into:
    /// made if missing, refused if it holds anything.
    #[arg(value_name = "OUT")]
    pub out: PathBuf,

    /// Write into OUT even though it holds files: the three tables of this format are
    /// replaced, each once it is written whole; nothing else in OUT is touched.
    #[arg(long)]
    pub force: bool,

    #[command(flatten)]
    pub context: ContextArgs,
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

    #[command(flatten)]
    pub feeds: FeedArgs,
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

    #[command(flatten)]
    pub feeds: FeedArgs,
}

#[derive(Debug, Args)]
pub struct SitesArgs {
    /// The process (as this machine sees it) whose agent is asked.
    pub pid: u32,

    /// How long to record, in seconds (1 to 600).
    #[arg(long, default_value_t = 60, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=600))]
    pub seconds: u32,

    /// Sites listed per device, live and grown (1 to 50).
    #[arg(long, default_value_t = 20, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=50))]
    pub top: u32,

    /// Print the summary as one JSON object (the agent's `sites` message).
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub feeds: FeedArgs,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("fleet_source").required(true).args(["prometheus", "endpoints", "endpoints_file"])))]
pub struct FleetArgs {
    /// Prometheus's base URL (http:// or https://): it scrapes `strata serve` on every node.
    /// Credentials from --basic-auth-file or --bearer-token-file, or the environment
    /// (STRATA_PROMETHEUS_BASIC_AUTH=user:password, STRATA_PROMETHEUS_TOKEN), never here.
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,

    /// Read these `strata serve` endpoints directly (HOST:PORT,...), for a few nodes; past a
    /// few dozen, Prometheus is the way.
    #[arg(long, value_name = "LIST")]
    pub endpoints: Option<String>,

    /// Read the endpoints listed in FILE (one a line; `#` starts a comment).
    #[arg(long, value_name = "FILE")]
    pub endpoints_file: Option<PathBuf>,

    /// Print the fleet once as JSON (schema strata.fleet/1) and exit.
    #[arg(long)]
    pub json: bool,

    /// Seconds between refreshes of the view.
    #[arg(long, default_value_t = 15.0, value_name = "SECS", value_parser = parse_interval)]
    pub refresh: f64,

    /// How often Prometheus scrapes the nodes (or, with --endpoints, --refresh): a node whose
    /// sample is older than three of these is shown stale.
    #[arg(long, value_name = "SECS", value_parser = parse_interval)]
    pub scrape_interval: Option<f64>,

    /// Seconds one request may take, connect to last byte.
    #[arg(long, default_value_t = 5.0, value_name = "SECS", value_parser = parse_interval)]
    pub timeout: f64,

    /// Endpoints read at once (--endpoints).
    #[arg(long, default_value_t = 16, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub concurrency: u32,

    /// Trust the CA certificates in this PEM file instead of the system's.
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,

    /// A file with one line, user:password, for Prometheus's basic auth.
    #[arg(long, value_name = "FILE", conflicts_with = "bearer_token_file")]
    pub basic_auth_file: Option<PathBuf>,

    /// A file with the bearer token for Prometheus.
    #[arg(long, value_name = "FILE")]
    pub bearer_token_file: Option<PathBuf>,

    /// The command that opens a node's live view, `{node}` replaced by its name.
    #[arg(long, default_value = "ssh -t {node} strata", value_name = "CMD")]
    pub ssh_command: String,

    /// From Prometheus, read N device rows and N jobs a refresh, the first by the order and
    /// filter shown, picked by Prometheus (topk); the screen reads N more as the cursor
    /// nears the last [default: 200; with --json, every row]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub rows: Option<u32>,

    /// The device rows' order at the start (`s` changes it on the screen)
    #[arg(long, value_enum, default_value_t = FleetSort::Urgency)]
    pub sort: FleetSort,

    /// The least urgent, last node or emptiest first (`S` on the screen)
    #[arg(long)]
    pub reversed: bool,

    /// Only rows whose node, device, finding or process owner (job, pod, namespace, user)
    /// contains TEXT, in any case; jobs whose key does (`/` on the screen)
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
}

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Print JSON (schema strata.snapshot/1), one object per line.
    #[arg(long)]
    pub json: bool,

    /// Print a Markdown report of the instant, for an issue tracker or an incident: GPUs,
    /// driver and CUDA versions, each process's allocator figures and peaks, the last OOM,
    /// the findings with their evidence.
    #[arg(long, conflicts_with = "json")]
    pub report: bool,

    /// Take this many samples, one interval apart.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: u64,

    /// With --json: add `groups`, the processes summed per device by their launcher, pod
    /// (or container), Slurm job or user.
    #[arg(long, value_name = "BY", requires = "json", value_parser = crate::accounting::GroupBy::parse)]
    pub group_by: Option<crate::accounting::GroupBy>,

    #[command(flatten)]
    pub source: SourceArgs,
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

const MIB: u64 = 1 << 20;

/// A context size in MiB whose bytes fit in 64 bits (a larger one would wrap silently).
fn parse_context_mib(text: &str) -> Result<u64, String> {
    let mib: u64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number of MiB"))?;
    if mib.checked_mul(MIB).is_none() {
        return Err(format!(
            "{mib} MiB is more bytes than strata can count (at most {} MiB)",
            u64::MAX / MIB
        ));
    }
    Ok(mib)
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

fn parse_check_timeout(text: &str) -> Result<f64, String> {
    parse_positive(text, "seconds", 0.1, 600.0)
}

fn parse_nonnegative(text: &str) -> Result<f64, String> {
    parse_positive(text, "seconds", 0.0, 1e9)
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;

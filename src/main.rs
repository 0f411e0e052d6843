//! The `strata` binary: parses the command line and hands off. Errors end here, as one line
//! with a hint, exit status 1; usage errors are clap's, exit status 2.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;
use strata::app::State;
use strata::cli::{
    AttachArgs, Cli, Command, ConfigArgs, LiveArgs, MonitorArgs, RecordArgs, ReplayArgs, RunArgs,
    ServeArgs, SnapshotArgs, SourceArgs, ThemeArg,
};
use strata::config::{Config, ConfigError, Overrides, Palette, Settings};
use strata::feed::{FeedConfig, FeedHub};
use strata::launch::run::RunOptions;
use strata::pipeline::Pipeline;
use strata::snapshot::{self, Snapshot};
use strata::source::demo::{DemoSource, SNAPSHOT_AT};
use strata::source::fed::FedSource;
use strata::source::nvml::NvmlSource;
use strata::source::{Source, SourceError};

/// Out of memory, strata exits 1 with one line rather than abort.
#[global_allocator]
static ALLOCATOR: strata::oom::ExitOnOom = strata::oom::ExitOnOom;

fn main() -> ExitCode {
    // Before anything else is in memory: the peak of the monitor's RSS is then without them.
    strata::footprint::release_relocations();
    let cli = Cli::from_env();
    // While this process has one thread: the sampler's descriptors then cost no wait.
    if matches!(
        cli.command,
        None | Some(Command::Serve(_) | Command::Record(_) | Command::Snapshot(_))
    ) {
        strata::source::reserve_descriptors();
    }
    let result = match cli.command {
        None => monitor(&cli.source, &cli.monitor, &cli.live),
        Some(Command::Snapshot(args)) => snapshot(&args.source, &args),
        Some(Command::Run(args)) => return run(&args),
        Some(Command::Attach(args)) => attach(&args),
        Some(Command::Fleet(args)) => return strata::fleet::run(&args),
        Some(Command::Sites(args)) => strata::sites::run(&strata::sites::SitesAsk {
            pid: args.pid,
            seconds: args.seconds,
            top: args.top,
            json: args.json,
            feed_dir: args.feeds.feed_dir.clone(),
        }),
        // A PyTorch snapshot file (`_dump_snapshot`), told by its content or its name.
        Some(Command::Analyze(args)) if strata::torchsnap::is_snapshot_file(&args.file) => {
            return ExitCode::from(strata::torchsnap::command::analyze_args(
                &args.file,
                args.json,
                args.report_at.is_some(),
                args.every_sample,
                args.context.context_bytes().is_some(),
            ));
        }
        Some(Command::Analyze(args)) if args.report_at.is_some() => {
            let at = args.report_at.unwrap_or_default();
            let context = args.context.context_bytes();
            return ExitCode::from(strata::analyze::report_at::run(
                &args.file,
                at,
                context,
                std::path::Path::new("."),
            ));
        }
        Some(Command::Analyze(args)) => {
            let context = args.context.context_bytes();
            let clock = if args.every_sample {
                strata::analyze::Clock::EverySample
            } else {
                strata::analyze::Clock::Coarse
            };
            return ExitCode::from(strata::analyze::command::run(
                &args.file, args.json, context, clock,
            ));
        }
        Some(Command::Export(args)) => {
            return ExitCode::from(strata::export::command::run(
                &args.file,
                args.to,
                &args.out,
                args.force,
                args.context.context_bytes(),
            ));
        }
        Some(Command::Serve(args)) => serve(&args.source, &args),
        Some(Command::Record(args)) if args.from.is_some() => return reencode(&args),
        Some(Command::Record(args)) => record(&args.source, &args),
        Some(Command::Replay(args)) => replay(&args),
        Some(Command::Doctor(args)) => return strata::doctor::main(&args),
        Some(Command::Completions(args)) => print_all(&strata::manual::completions(args.shell))
            .map_err(|e| anyhow::anyhow!("cannot write the completion script: {e}")),
        Some(Command::Man(args)) => man(&args),
        Some(Command::Config(args)) => config(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            strata::terminal::restore();
            let hint = e
                .downcast_ref::<SourceError>()
                .map(|s| format!(" (hint: {})", s.hint()))
                .or_else(|| {
                    e.downcast_ref::<strata::recording::RecordError>()
                        .map(|r| format!(" (hint: {})", r.hint()))
                })
                .unwrap_or_default();
            // Not `eprintln!`, which panics where standard error is a terminal hung up.
            let _ = writeln!(std::io::stderr(), "strata: {}{hint}", said(&e));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, each cause once: an error whose message already
/// says its cause (`cannot write X: No space left on device`) is not followed by it again.
fn said(e: &anyhow::Error) -> String {
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !line.contains(&cause) {
            line.push_str(": ");
            line.push_str(&cause);
        }
    }
    line
}

/// `strata man`: the page on stdout, or every page into `--dir`.
fn man(args: &strata::cli::ManArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    match &args.dir {
        Some(dir) => {
            let pages = strata::manual::man_pages(dir)
                .with_context(|| format!("cannot write man pages into {}", dir.display()))?;
            for page in pages {
                println!("{}", page.display());
            }
        }
        None => {
            let mut page = Vec::new();
            strata::manual::man_page(&mut page).context("cannot render the man page")?;
            print_all(&page).context("cannot write the man page")?;
        }
    }
    Ok(())
}

/// Writes `bytes` to stdout; a reader that has gone (`| head`) is not an error.
fn print_all(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// The source the options ask for: the demo starting at `demo_start` (its feeds are part of
/// its story), or this machine's NVML with the allocator feeds found on this node.
fn open_source(source: &SourceArgs, demo_start: f64) -> anyhow::Result<Opened> {
    let demo = &source.demo;
    if demo.demo {
        let start = demo.demo_at.unwrap_or(demo_start);
        return Ok(Opened::Plain(Box::new(DemoSource::new(
            demo.demo_seed,
            source.interval(),
            demo.demo_speed,
            start,
        ))));
    }
    let nvml = NvmlSource::open(source.nvml.nvml_lib.clone(), source.interval())?;
    let config = FeedConfig::new(
        source.feeds.feed_dir.clone(),
        Duration::from_secs_f64(source.interval()),
    );
    // The feed thread starts once a socket is found (a node without agents wakes no thread
    // of its own for them).
    let hub = FeedHub::start_when_found(config)
        .map_err(|e| anyhow::anyhow!("cannot start reading allocator feeds: {e}"))?;
    Ok(Opened::Fed(FedSource::new(Box::new(nvml), hub)))
}

/// A source, and whether it reads feeds (a one-shot snapshot waits for them).
enum Opened {
    Plain(Box<dyn Source>),
    Fed(FedSource),
}

impl Opened {
    fn boxed(self) -> Box<dyn Source> {
        match self {
            Opened::Plain(s) => s,
            Opened::Fed(s) => Box::new(s),
        }
    }
}

/// How long a snapshot waits to read every feed's hello and backlog.
const SNAPSHOT_SETTLE: Duration = Duration::from_millis(1500);
/// How long a snapshot waits after NVML's reading for the feeds' next samples.
const SNAPSHOT_WAIT_NEWER: Duration = Duration::from_millis(1200);

fn pipeline(context_bytes: Option<u64>) -> Pipeline {
    Pipeline::new(context_bytes)
}

/// Refuses to take the terminal unless there is one on both ends.
fn need_terminal() -> anyhow::Result<()> {
    // Without a terminal on both ends (cron, `ssh host strata` without -t, a pipe), raw
    // mode and the alternate screen would fail half-way or garble the output: say what to
    // use instead, before touching the terminal.
    let missing = match (
        std::io::stdin().is_terminal(),
        std::io::stdout().is_terminal(),
    ) {
        (true, true) => None,
        (false, true) => Some("stdin is not one"),
        (true, false) => Some("stdout is not one"),
        (false, false) => Some("neither stdin nor stdout is one"),
    };
    if let Some(which) = missing {
        anyhow::bail!(
            "the monitor needs a terminal, and {which} (hint: `strata snapshot` prints samples \
             without a terminal; over SSH, `ssh -t HOST strata` gives the monitor one)"
        );
    }
    Ok(())
}

/// The monitor's settings: the command line over the config file (`--config`, else
/// `$XDG_CONFIG_HOME/strata/config.toml`; a missing file is every default) over the defaults.
fn settings(view: &MonitorArgs, interval: Option<f64>) -> anyhow::Result<Settings> {
    let file = match (&view.config, Config::path()) {
        (Some(path), _) => Config::load(path).map_err(|e| anyhow::anyhow!("{e}"))?,
        // The default place, in a home this user may not read (strata run as another user
        // with HOME kept, as sudo -u does): no file of this user's, so every default.
        (None, Some(path)) => match Config::load(&path) {
            Err(ConfigError::Read { error, .. })
                if error.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                Config::default()
            }
            loaded => loaded.map_err(|e| anyhow::anyhow!("{e}"))?,
        },
        (None, None) => Config::default(),
    };
    let overrides = Overrides {
        interval,
        theme: view.theme.map(|t| match t {
            ThemeArg::Dark => Palette::Dark,
            ThemeArg::Light => Palette::Light,
        }),
        ascii: view.ascii.then_some(true),
        sort: None,
        mouse: view.no_mouse.then_some(false),
        filter: None,
    };
    let mut settings = Settings::resolve(&overrides, &file);
    // A filter on the command line replaces the file's whole.
    if !view.filter_text().is_empty() {
        settings.filter = Default::default();
    }
    Ok(settings)
}

/// The settings (`--theme`, `--ascii`, `--no-mouse`, the saved filter and sort) set in `state`.
fn start_view(state: &mut State, view: &MonitorArgs, settings: &Settings) -> anyhow::Result<()> {
    state.setup.mouse = settings.mouse;
    state.setup.palette = settings.theme;
    state.setup.ascii = settings.ascii;
    state.setup.columns.clone_from(&settings.columns);
    state.start_sorted(settings.sort);
    let filter = match view.filter_text() {
        text if text.is_empty() => settings.filter.text(),
        text => text,
    };
    state.start_filtered(&filter).map_err(|e| {
        anyhow::anyhow!("bad filter `{filter}`: {e} (hint: --user NAME, --pid PID, --gpu N, or the config file's [filter])")
    })
}

/// `strata config`: which file the monitor reads and whether it is there; `--default`: a
/// file with every key.
fn config(args: &ConfigArgs) -> anyhow::Result<()> {
    if args.default {
        print!("{}", Config::default_text());
        return Ok(());
    }
    match Config::path() {
        Some(path) => {
            let state = match Config::load(&path) {
                Ok(_) if path.exists() => "read",
                Ok(_) => "not there: every setting is its default",
                Err(e) => return Err(anyhow::anyhow!("{e}")),
            };
            println!("{} ({state})", path.display());
        }
        None => println!(
            "no config file: neither XDG_CONFIG_HOME nor HOME is set (hint: --config FILE)"
        ),
    }
    Ok(())
}

fn monitor(common: &SourceArgs, view: &MonitorArgs, live: &LiveArgs) -> anyhow::Result<()> {
    let settings = settings(view, common.interval.interval)?;
    let mut common = common.clone();
    common.interval.interval = Some(settings.interval);
    let common = &common;
    let opened = open_source(common, 0.0)?;
    let asker = match &opened {
        Opened::Fed(fed) => Some(fed.sites_asker()?),
        Opened::Plain(_) => None,
    };
    let source = opened.boxed();
    need_terminal()?;
    let mut state = State::new(
        pipeline(common.context_bytes()),
        source.label(),
        common.interval(),
    );
    state.setup.demo = common.is_demo();
    state.setup.monochrome = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    start_view(&mut state, view, &settings)?;
    // This machine's processes: signalled through the kernel. The demo's are simulated.
    if !common.is_demo() {
        state.kill.signaller = Box::new(strata::process_signal::Kernel::default());
        state.attach.attacher = Box::new(strata::launch::offer::LiveAttacher {
            feed_dir: common.feeds.feed_dir.clone(),
            interval: 0.5,
            wait: Duration::from_secs(10),
        });
    }
    if let Some(asker) = asker {
        state.sites.asker = Box::new(HubSites(asker));
    }
    state.sites.on_climb = live.sites_on_climb;
    strata::tui::run(source, state, Duration::from_secs_f64(common.interval()))
}

/// `w` asks the feed hub's agents: the monitor's trait over the hub's handle.
#[derive(Debug)]
struct HubSites(strata::feed::HubAsker);

impl strata::app::SitesAsker for HubSites {
    fn ask(&self, pid: u32, seconds: u32, top: u32) -> Result<u64, String> {
        self.0.ask(pid, seconds, top)
    }
}

/// `strata replay FILE`: the monitor over a recording. A file that cannot be replayed is
/// refused before the terminal is taken.
fn replay(args: &ReplayArgs) -> anyhow::Result<()> {
    let context = args.context.context_bytes();
    let source = strata::replay::source::ReplaySource::open(&args.file, context)
        .map_err(|e| anyhow::anyhow!("{e} (hint: {})", e.hint()))?;
    need_terminal()?;
    let mut state = State::new(pipeline(context), source.label(), args.interval.secs());
    state.setup.monochrome = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let settings = settings(&args.monitor, args.interval.interval)?;
    start_view(&mut state, &args.monitor, &settings)?;
    state.replay = Some(strata::app::ReplayView::new(source.control()));
    state.attach.attacher = Box::new(strata::launch::offer::NoAttacher(
        "a replay shows the past: attach to a running process from the live monitor",
    ));
    state.sites.asker = Box::new(strata::app::NoSitesAsker(
        "a replay shows the past: ask a running job from the live monitor (the recording keeps the sites it was sent)",
    ));
    let control = source.control();
    let result = strata::tui::replay(source, state);
    control.close();
    result
}

fn snapshot(common: &SourceArgs, args: &SnapshotArgs) -> anyhow::Result<()> {
    let mut source = match open_source(common, SNAPSHOT_AT)? {
        Opened::Fed(mut fed) => {
            // Read every feed's hello and backlog, and pair each NVML reading with the feed
            // samples on either side of it.
            fed.for_snapshot(SNAPSHOT_SETTLE, SNAPSHOT_WAIT_NEWER);
            Box::new(fed) as Box<dyn Source>
        }
        Opened::Plain(plain) => plain,
    };
    let mut pipeline = pipeline(common.context_bytes());
    // Learn from what came before (context estimates, when findings were first raised).
    for earlier in source.backlog() {
        pipeline.ingest(earlier);
    }
    let stdout = std::io::stdout();
    for n in 0..args.count {
        if n > 0 && !common.is_demo() {
            std::thread::sleep(Duration::from_secs_f64(common.interval()));
        }
        let observed = pipeline.ingest(source.sample()?);
        let shown = if args.json {
            let shown = match args.group_by {
                Some(by) => Snapshot::grouped(&observed, by),
                None => Snapshot::of(&observed),
            };
            let mut line = serde_json::to_string(&shown)?;
            line.push('\n');
            line
        } else if args.report {
            strata::report::markdown(&observed, &pipeline.history, common.is_demo())
        } else {
            snapshot::text(&observed, common.is_demo())
        };
        let mut out = stdout.lock();
        match out.write_all(shown.as_bytes()).and_then(|()| out.flush()) {
            // The reader has gone (`strata snapshot | head -1`): it has what it wanted.
            // Stop quietly, with status 0, as a shell pipeline expects.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            written => written?,
        }
    }
    Ok(())
}

/// `strata run`: replaces this process with CMD; returns only when CMD could not be run.
fn run(args: &RunArgs) -> ExitCode {
    let options = RunOptions {
        feed_dir: args.feeds.feed_dir.clone(),
        interval: args.feed_interval,
    };
    let failure = strata::launch::run::exec(&args.command, &options);
    eprintln!(
        "strata: {} (hint: strata run -- CMD ARGS runs CMD with the allocator feed; check that CMD is on PATH)",
        failure.error
    );
    ExitCode::from(failure.status)
}

fn attach(args: &AttachArgs) -> anyhow::Result<()> {
    let report = strata::launch::attach::attach(
        args.pid,
        args.feeds.feed_dir.clone(),
        args.feed_interval,
        Duration::from_secs_f64(args.wait),
    )?;
    println!("{report}");
    Ok(())
}

/// `strata serve`: binds first (a port in use is an error before anything starts), then
/// opens the source and serves until stopped.
fn serve(common: &SourceArgs, args: &ServeArgs) -> anyhow::Result<()> {
    let listener = strata::serve::bind(&args.listen)?;
    let source = open_source(common, 0.0)?.boxed();
    let address = listener.local_addr()?;
    println!(
        "strata serve: http://{address}/metrics ({}, a sample every {})",
        source.label(),
        strata::units::interval(common.interval())
    );
    std::io::stdout().flush()?;
    let recorder = match (&args.record, args.ring.ring) {
        (Some(dir), Some(keep)) => {
            let ring = strata::record::ring::Ring::open(dir, ring_bounds(&args.ring, keep))?;
            eprintln!("strata serve: {}", ring.stated());
            Some(std::sync::Arc::new(
                strata::record::ring::RingThread::start(ring, "serve")?,
            ))
        }
        (None, Some(_)) => anyhow::bail!(
            "--ring needs --record DIR: the directory of the flight record (hint: strata serve --record /var/lib/strata/ring --ring 6h)"
        ),
        _ => None,
    };
    let options = strata::serve::ServeOptions {
        interval: Duration::from_secs_f64(common.interval()),
        max_processes: args.max_processes,
        recorder,
    };
    strata::serve::run(listener, source, pipeline(common.context_bytes()), options)
}

fn ring_bounds(args: &strata::cli::RingArgs, keep: Duration) -> strata::record::ring::RingBounds {
    strata::record::ring::RingBounds {
        keep,
        ring_bytes: args.ring_size,
        evidence_bytes: args.evidence_size,
    }
}

/// What a live command samples, in words: the demo node or this one, and the source's
/// label.
fn source_words(common: &SourceArgs, source: &dyn strata::source::Source) -> String {
    if common.is_demo() {
        format!("the simulated demo node ({})", source.label())
    } else {
        format!("this node ({})", source.label())
    }
}

/// A failing poll is said once, not at every interval, and again when it changes.
fn poll_failures() -> impl FnMut(&str) {
    let mut last_failure = String::new();
    move |line| {
        if line != last_failure {
            eprintln!("strata: record: {line}; still recording");
            last_failure = line.to_string();
        }
    }
}

/// `strata record --ring DURATION DIR`: the flight record, until a signal or --duration.
fn record_ring(common: &SourceArgs, args: &RecordArgs, keep: Duration) -> anyhow::Result<()> {
    let ring = strata::record::ring::Ring::open(&args.file, ring_bounds(&args.ring, keep))?;
    let source = open_source(common, 0.0)?.boxed();
    eprintln!(
        "strata: {}",
        strata::record::opening_line(
            &source_words(common, source.as_ref()),
            common.interval(),
            &format!("the {}", ring.stated()),
            args.duration,
        )
    );
    let (stop, samples) = strata::record::record_ring(
        source,
        ring,
        pipeline(common.context_bytes()),
        Duration::from_secs_f64(common.interval()),
        args.duration,
        |first| eprintln!("strata: {}", strata::record::devices_line(first)),
        poll_failures(),
    )?;
    eprintln!(
        "strata: recorded {samples} sample(s) into the flight record {}, saved; {}",
        strata::text::clean(&args.file.display().to_string()),
        strata::record::stopped_by(stop, args.duration),
    );
    Ok(())
}

/// `strata record OUT --from IN`: one line on stderr says what was written; exit status 0,
/// 3 when part of IN was lost (what could be read is written), 1 when nothing could be done.
fn reencode(args: &RecordArgs) -> ExitCode {
    let Some(from) = &args.from else {
        return ExitCode::FAILURE;
    };
    let clean = |p: &std::path::Path| strata::text::clean(&p.display().to_string()).into_owned();
    match strata::record::reencode::reencode(from, &args.file) {
        Ok((read, summary)) => {
            let encoding = strata::recording::Encoding::for_path(&args.file);
            let line = strata::record::summary_line(&args.file, encoding, &summary);
            let cut = if read.truncated {
                " (its last sample was cut short: left out)"
            } else {
                ""
            };
            eprintln!("strata: from {}{cut}: {line}", clean(from));
            if read.lost_some() {
                eprintln!(
                    "strata: part of the recording {} was lost: {}",
                    clean(from),
                    read.losses()
                );
                return ExitCode::from(strata::analyze::command::LOST);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("strata: {e} (hint: {})", e.hint());
            ExitCode::FAILURE
        }
    }
}

/// `strata record FILE`: the file is opened (and a bad path refused) before sampling starts;
/// a TERM, HUP, INT or the end of --duration finishes it. On stderr: at once what is
/// recorded, where and how it stops; the devices at the first sample; at the end what was
/// saved. Nothing on stdout.
fn record(common: &SourceArgs, args: &RecordArgs) -> anyhow::Result<()> {
    use strata::recording::{RecordWriter, Rotation};
    if let Some(keep) = args.ring.ring {
        return record_ring(common, args, keep);
    }
    let rotation = args.max_size.map(|max_bytes| Rotation {
        max_bytes,
        keep: args.keep,
    });
    let existed = args.file.exists();
    let writer = RecordWriter::create(&args.file, rotation)?;
    let encoding = writer.encoding();
    // The demo's story runs at --demo-speed, as in the monitor: each sample is
    // interval × speed story seconds after the one before.
    let source = match open_source(common, 0.0) {
        Ok(opened) => opened.boxed(),
        Err(e) => {
            // Nothing was recorded: leave no empty file behind.
            drop(writer);
            if !existed {
                let _ = std::fs::remove_file(&args.file);
            }
            return Err(e);
        }
    };
    let into = strata::record::file_words(&args.file, encoding, rotation, existed);
    eprintln!(
        "strata: {}",
        strata::record::opening_line(
            &source_words(common, source.as_ref()),
            common.interval(),
            &into,
            args.duration,
        )
    );
    let (stop, summary) = strata::record::record(
        source,
        writer,
        Duration::from_secs_f64(common.interval()),
        args.duration,
        |first| eprintln!("strata: {}", strata::record::devices_line(first)),
        poll_failures(),
    )?;
    let summary = strata::record::summary_line(&args.file, encoding, &summary);
    if stop == strata::record::Stop::SourceGone {
        anyhow::bail!(
            "sampling stopped (a bug in strata: please report it); {summary} (hint: the recording so far is finished and reads back)"
        );
    }
    eprintln!(
        "strata: {summary}, saved; {}",
        strata::record::stopped_by(stop, args.duration)
    );
    Ok(())
}

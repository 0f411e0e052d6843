//! The `strata` binary: parses the command line and hands off. Errors end here, as one line
//! with a hint, exit status 1; usage errors are clap's, exit status 2.

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;
use strata::app::State;
use strata::cli::{Cli, Command, Common, SnapshotArgs};
use strata::pipeline::Pipeline;
use strata::snapshot::{self, Snapshot};
use strata::source::demo::{DemoSource, SNAPSHOT_AT};
use strata::source::nvml::NvmlSource;
use strata::source::{Source, SourceError};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => monitor(&cli.common),
        Some(Command::Snapshot(args)) => snapshot(&cli.common, &args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            strata::terminal::restore();
            let hint = e
                .downcast_ref::<SourceError>()
                .map(|s| format!(" (hint: {})", s.hint()))
                .unwrap_or_default();
            eprintln!("strata: {e:#}{hint}");
            ExitCode::FAILURE
        }
    }
}

/// The source the options ask for: the demo starting at `demo_start`, or this machine's NVML.
fn open_source(common: &Common, demo_start: f64) -> Result<Box<dyn Source>, SourceError> {
    if common.demo {
        let start = common.demo_at.unwrap_or(demo_start);
        Ok(Box::new(DemoSource::new(
            common.demo_seed,
            common.interval,
            common.demo_speed,
            start,
        )))
    } else {
        Ok(Box::new(NvmlSource::open(
            common.nvml_lib.clone(),
            common.interval,
        )?))
    }
}

fn pipeline(common: &Common) -> Pipeline {
    Pipeline::new(common.context_mib.map(|mib| mib << 20))
}

fn monitor(common: &Common) -> anyhow::Result<()> {
    let source = open_source(common, 0.0)?;
    let mut state = State::new(pipeline(common), source.label(), common.interval);
    state.monochrome = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    strata::tui::run(source, state, Duration::from_secs_f64(common.interval))
}

fn snapshot(common: &Common, args: &SnapshotArgs) -> anyhow::Result<()> {
    let mut source = open_source(common, SNAPSHOT_AT)?;
    let mut pipeline = pipeline(common);
    // Learn from what came before (context estimates, when findings were first raised).
    for earlier in source.backlog() {
        pipeline.ingest(earlier);
    }
    let stdout = std::io::stdout();
    for n in 0..args.count {
        if n > 0 && !common.demo {
            std::thread::sleep(Duration::from_secs_f64(common.interval));
        }
        let observed = pipeline.ingest(source.sample()?);
        let mut out = stdout.lock();
        if args.json {
            serde_json::to_writer(&mut out, &Snapshot::of(&observed))?;
            writeln!(out)?;
        } else {
            write!(out, "{}", snapshot::text(&observed))?;
        }
        out.flush()?;
    }
    Ok(())
}

//! The command line: what each command takes and refuses.

use super::*;

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

#[test]
fn a_context_size_whose_bytes_would_wrap_is_refused() {
    let largest = u64::MAX >> 20;
    let cli = Cli::try_parse_from(["strata", "--context-mib", &largest.to_string()])
        .expect("the largest size that fits");
    assert_eq!(cli.source.context_bytes(), Some(largest << 20));
    assert_eq!(largest << 20 >> 20, largest, "no bit lost");
    for too_big in [largest + 1, 1 << 44, u64::MAX] {
        let err = Cli::try_parse_from(["strata", "--context-mib", &too_big.to_string()])
            .expect_err("wraps");
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
        assert!(
            err.to_string().contains("at most 17592186044415 MiB"),
            "{err}"
        );
    }
    let cli = Cli::try_parse_from(["strata", "--context-mib", "500"]).expect("parses");
    assert_eq!(cli.source.context_bytes(), Some(500 << 20));
}

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::parse_with(args.iter().copied(), |_| false)
}

#[test]
fn demo_only_options_need_the_demo() {
    for args in [
        vec!["strata", "--demo-speed", "5"],
        vec!["strata", "--demo-at", "600"],
        vec!["strata", "--demo-seed", "3"],
        vec!["strata", "snapshot", "--demo-speed", "10"],
        vec!["strata", "--demo-seed", "0", "snapshot", "--json"],
    ] {
        let err = parse(&args).expect_err("needs --demo");
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::MissingRequiredArgument,
            "{args:?}"
        );
        assert!(err.to_string().contains("--demo"), "{err}");
        let mut with_demo = args.clone();
        with_demo.push("--demo");
        assert!(parse(&with_demo).is_ok(), "{with_demo:?}");
    }
    // The defaults alone are not a use of the options.
    let cli = parse(&["strata", "snapshot"]).expect("parses");
    match cli.command {
        Some(Command::Snapshot(args)) => {
            assert_eq!(args.source.demo.demo_speed, 10.0);
            assert_eq!(args.source.demo.demo_seed, 0);
        }
        other => panic!("{other:?}"),
    }
}

/// `--user`, `--pid` and `--gpu` compose one filter for the monitor and `replay`; a bad
/// value, or one given before another command's name, is a usage error with a hint.
#[test]
fn the_monitors_view_composes_a_filter_and_refuses_bad_values() {
    let cli = parse(&[
        "strata", "--user", "ana", "--gpu", "GPU-5f2a", "--pid", "41230",
    ])
    .expect("parses");
    assert_eq!(cli.monitor.filter_text(), "user:ana pid:41230 gpu:GPU-5f2a");
    assert!(!cli.monitor.no_mouse);
    let cli = parse(&["strata", "--no-mouse"]).expect("parses");
    assert!(cli.monitor.no_mouse);
    assert_eq!(cli.monitor.filter_text(), "");
    let cli = parse(&["strata", "replay", "x.zst", "--gpu", "1", "--no-mouse"]).expect("parses");
    match cli.command {
        Some(Command::Replay(r)) => {
            assert_eq!(r.monitor.filter_text(), "gpu:1");
            assert!(r.monitor.no_mouse);
        }
        other => panic!("{other:?}"),
    }
    for (args, says) in [
        (vec!["strata", "--pid", "abc"], "`abc` is not a PID"),
        (vec!["strata", "--pid", "0"], "`0` is not a PID"),
        (vec!["strata", "--gpu=-1"], "`-1` is not a GPU"),
        (vec!["strata", "--user", "a b"], "`a b` is not a user name"),
        (vec!["strata", "--user", ""], "is not a user name"),
    ] {
        let err = parse(&args).expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::ValueValidation, "{args:?}");
        assert!(err.to_string().contains(says), "{args:?}: {err}");
    }
    // Before another command's name, an option is that command's: `snapshot` does not take
    // the monitor's view, `replay` does.
    let err = parse(&["strata", "--user", "ana", "snapshot"]).expect_err("refused");
    assert!(err.to_string().contains("--user"), "{err}");
    match parse(&["strata", "--no-mouse", "replay", "x.zst"]).map(|c| c.command) {
        Ok(Some(Command::Replay(r))) => assert!(r.monitor.no_mouse),
        other => panic!("{other:?}"),
    }
    assert!(parse(&["strata", "snapshot", "--user", "ana"]).is_err());
}

#[test]
fn an_empty_environment_variable_is_unset() {
    let empty = |name: &str| name == "STRATA_NVML_LIB" || name == "STRATA_FEED_DIR";
    for args in [
        vec!["strata", "snapshot"],
        vec!["strata", "doctor"],
        vec!["strata", "run", "--", "x"],
        vec!["strata"],
    ] {
        let cli = Cli::parse_with(args.clone(), empty).expect("parses");
        let (nvml, feeds) = match &cli.command {
            None => (Some(&cli.source.nvml), &cli.source.feeds),
            Some(Command::Snapshot(a)) => (Some(&a.source.nvml), &a.source.feeds),
            Some(Command::Doctor(a)) => (Some(&a.nvml), &a.feeds),
            Some(Command::Run(a)) => (None, &a.feeds),
            other => panic!("{other:?}"),
        };
        assert_eq!(nvml.and_then(|n| n.nvml_lib.clone()), None, "{args:?}");
        assert_eq!(feeds.feed_dir, None, "{args:?}");
    }
    let cli =
        Cli::parse_with(["strata", "--nvml-lib", "/x/libnvidia-ml.so"], empty).expect("parses");
    assert_eq!(
        cli.source.nvml.nvml_lib,
        Some(PathBuf::from("/x/libnvidia-ml.so"))
    );
}

/// The long options each command takes, as a user would list them: the contract its
/// --help shows. The source's options are the live commands' (the monitor, snapshot,
/// serve, record); the commands that read a recording take only --context-mib of them.
fn taken(command: &str) -> Vec<&'static str> {
    const DEMO: [&str; 4] = ["demo", "demo-speed", "demo-at", "demo-seed"];
    const SOURCE: [&str; 4] = ["nvml-lib", "feed-dir", "context-mib", "interval"];
    const RING: [&str; 3] = ["ring", "ring-size", "evidence-size"];
    const VIEW: [&str; 7] = ["user", "pid", "gpu", "no-mouse", "theme", "ascii", "config"];
    let mut own: Vec<&'static str> = match command {
        "strata" => [DEMO.as_slice(), &SOURCE, &VIEW, &["sites-on-climb"]].concat(),
        "snapshot" => [&DEMO[..], &SOURCE, &["json", "report", "count", "group-by"]].concat(),
        "serve" => [
            &DEMO[..],
            &SOURCE,
            &RING,
            &["listen", "max-processes", "record"],
        ]
        .concat(),
        "record" => [
            &DEMO[..],
            &SOURCE,
            &RING,
            &["duration", "max-size", "keep", "from"],
        ]
        .concat(),
        "replay" => [&["context-mib", "interval"][..], &VIEW].concat(),
        "analyze" => vec!["json", "report-at", "every-sample", "context-mib"],
        "export" => vec!["to", "force", "context-mib"],
        "run" => vec!["feed-interval", "feed-dir"],
        "attach" => vec!["feed-interval", "wait", "feed-dir"],
        "sites" => vec!["seconds", "top", "json", "feed-dir"],
        "fleet" => vec![
            "prometheus",
            "endpoints",
            "endpoints-file",
            "json",
            "refresh",
            "scrape-interval",
            "timeout",
            "concurrency",
            "ca",
            "basic-auth-file",
            "bearer-token-file",
            "ssh-command",
            "rows",
            "sort",
            "reversed",
            "filter",
        ],
        "doctor" => vec!["json", "listen", "timeout", "nvml-lib", "feed-dir"],
        "completions" => vec![],
        "man" => vec!["dir"],
        "config" => vec!["default"],
        other => panic!("no contract for {other}: add it here"),
    };
    own.extend(["help", "version"]);
    own.sort_unstable();
    own
}

/// The long options a --help text lists: the first `--name` of each line that starts
/// with an option.
fn listed(help: &str) -> Vec<String> {
    let mut names: Vec<String> = help
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| {
            let at = l.find("--")?;
            let name: String = l[at + 2..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            Some(name)
        })
        .collect();
    names.sort_unstable();
    names
}

#[test]
fn each_command_lists_exactly_the_options_it_takes_and_refuses_the_rest() {
    let mut root = Cli::command();
    root.build();
    let every: std::collections::BTreeSet<String> = std::iter::once(&root)
        .chain(root.get_subcommands())
        .flat_map(|c| c.get_arguments().filter_map(|a| a.get_long()))
        .map(str::to_string)
        .collect();
    let mut commands = vec![root.clone()];
    commands.extend(
        root.get_subcommands()
            .filter(|s| s.get_name() != "help")
            .cloned(),
    );
    for mut command in commands {
        let name = command.get_name().to_string();
        let help = command.render_help().to_string();
        assert_eq!(listed(&help), taken(&name), "{name} --help:\n{help}");
        for option in every.iter().filter(|o| !taken(&name).contains(&o.as_str())) {
            let mut args = vec!["strata".to_string()];
            if name != "strata" {
                args.push(name.clone());
            }
            args.push(format!("--{option}"));
            let err = parse(&args.iter().map(String::as_str).collect::<Vec<_>>())
                .expect_err(&format!("{name} takes no --{option}"));
            assert_eq!(err.kind(), ErrorKind::UnknownArgument, "{args:?}");
            let text = err.to_string();
            if name != "strata" {
                assert_eq!(text.trim_end().lines().count(), 1, "one line: {text}");
                assert!(
                    text.starts_with(&format!("error: strata {name} does not take --{option}")),
                    "{text}"
                );
            }
        }
    }
}

#[test]
fn options_before_a_command_are_that_commands() {
    let cli =
        parse(&["strata", "--demo", "--interval", "2", "snapshot", "--json"]).expect("parses");
    match cli.command {
        Some(Command::Snapshot(args)) => {
            assert!(args.source.is_demo() && args.json);
            assert_eq!(args.source.interval(), 2.0);
        }
        other => panic!("{other:?}"),
    }
    // The command's own, later, wins.
    let cli = parse(&[
        "strata",
        "--interval=2",
        "record",
        "--interval",
        "3",
        "--demo",
        "f",
    ])
    .expect("parses");
    match cli.command {
        Some(Command::Record(args)) => assert_eq!(args.source.interval(), 3.0),
        other => panic!("{other:?}"),
    }
    let cli = parse(&[
        "strata",
        "--feed-dir",
        "/f",
        "run",
        "--",
        "python",
        "--demo",
    ])
    .expect("parses");
    match cli.command {
        Some(Command::Run(args)) => {
            assert_eq!(args.feeds.feed_dir, Some(PathBuf::from("/f")));
            assert_eq!(args.command, ["python", "--demo"].map(OsString::from));
        }
        other => panic!("{other:?}"),
    }
    // A value that looks like a command's name is a value.
    let cli = parse(&["strata", "--feed-dir", "snapshot"]).expect("parses");
    assert!(cli.command.is_none());
    assert_eq!(cli.source.feeds.feed_dir, Some(PathBuf::from("snapshot")));
    // Before a command that does not take it: refused in one line, naming both.
    let err = parse(&["strata", "--demo", "doctor"]).expect_err("refused");
    assert!(
        err.to_string()
            .starts_with("error: strata doctor does not take --demo"),
        "{err}"
    );
    let err = parse(&["strata", "--context-mib", "5", "man"]).expect_err("refused");
    assert!(
        err.to_string()
            .contains("strata man does not take --context-mib"),
        "{err}"
    );
    // A typo is clap's, with its suggestion.
    let err = parse(&["strata", "snapshot", "--jsn"]).expect_err("refused");
    assert!(err.to_string().contains("--json"), "{err}");
}

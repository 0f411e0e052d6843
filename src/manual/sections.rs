//! The man pages' own sections, after clap's: on `strata(1)` the layers, the keys, the
//! findings, the exit status, the files, the environment, examples and the other pages; on
//! each command's page its exit status, examples and the pages beside it. The layers come
//! from `layers.rs` and the findings' names from the detectors' own type, so a page cannot
//! name one that is not there.

use crate::detect::FindingKind;
use crate::layers::Layer;
use std::fmt::Write;

/// Text made safe for roff: a backslash, a minus (which roff would make a hyphen) and a dot
/// or quote at the start of a line (a request) are escaped.
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

fn bold(text: &str) -> String {
    format!("\\fB{}\\fR", roff(text))
}

fn section(out: &mut String, title: &str) {
    let _ = writeln!(out, ".SH {title}");
}

/// A tagged paragraph: the tag on its own line, the text indented below it.
fn item(out: &mut String, tag: &str, text: &str) {
    let _ = writeln!(out, ".TP\n{tag}\n{}", roff(text));
}

fn paragraph(out: &mut String, text: &str) {
    let _ = writeln!(out, ".PP\n{}", roff(text));
}

/// The monitor's keys, as `app/keys.rs` maps them: each key by the name the test of this
/// page gives it (`tests::key_name`).
pub(super) const KEYS: [(&[&str], &str); 26] = [
    (&["q", "F10", "Ctrl-C"], "quit"),
    (&["Ctrl-Z"], "stop strata and give the terminal back, as in a shell (fg resumes)"),
    (
        &["Esc"],
        "close the open view, or clear the filter; on the main screen it does nothing",
    ),
    (&["↑", "k", "↓", "j"], "move the selection up or down"),
    (&["PgUp", "PgDn", "Space"], "a page up or down"),
    (&["Home", "End"], "the top or the bottom of the list"),
    (
        &["g", "G"],
        "the top or the bottom of the list; in a replay, its start or its end",
    ),
    (&["←", "→"], "in a replay, a minute back or on"),
    (
        &["Enter"],
        "open the selection: a process's or GPU's detail, a finding's evidence",
    ),
    (&["Tab", "Shift-Tab"], "the next panel: GPUs, processes, findings"),
    (&["s", "F6"], "sort the process table by the next column"),
    (&["S"], "sort by the same column, the other way round"),
    (&["/"], "filter the process table by PID, user, command, owner or GPU"),
    (
        &["K", "F9"],
        "send a signal to the selected process (or to the holders of a zombie context), after a dialog",
    ),
    (&["y", "n"], "in the signal dialog: send it, or do not"),
    (
        &["a"],
        "attach the allocator feed to the selected Python 3.14+ process",
    ),
    (
        &["w"],
        "sites: which lines of a fed torch job's code hold its memory (its agent records 60 s of the allocator's history), and its segment map",
    ),
    (
        &["o"],
        "group the process table by owner: launcher, pod or container, Slurm job, user",
    ),
    (
        &["p"],
        "pause the screen (samples are still taken, and recorded); again to catch up",
    ),
    (&["?", "h", "F1"], "the help screen"),
    (&["v"], "the strata view: each layer over time"),
    (&["+", "="], "in the strata view, a shorter window"),
    (&["-", "_"], "in the strata view, a longer window"),
    (&["z"], "in the strata view, the next window round"),
    (
        &["R"],
        "write the Markdown report of the instant shown, with its chart, into the current directory",
    ),
    (
        &["r"],
        "start recording into a file (a prompt for its name), or stop; quitting while recording saves the file and says where",
    ),
];

/// What a finding of each kind says, in a few words. Every kind has a line: a new kind does
/// not build until it is given one here.
pub(super) fn finding(kind: FindingKind) -> &'static str {
    match kind {
        FindingKind::ZombieContext => {
            "a process that has exited still holds a CUDA context: who holds the device file, and K"
        }
        FindingKind::NotVisibleHolder => "a PID outside this PID namespace holds memory",
        FindingKind::UnattributedMemory => {
            "processes without an allocator feed hold memory that cannot be split (strata run gives them one)"
        }
        FindingKind::UnexplainedUsage => "memory in use that no listed process accounts for",
        FindingKind::StaleFeed => "a feed too old to combine with NVML's reading",
        FindingKind::InconsistentFeed => "a feed whose figures contradict themselves or NVML",
        FindingKind::GpuLost => "a GPU fell off the bus",
        FindingKind::InconsistentCounters => {
            "NVML's counters for a device contradict each other: no layers this instant"
        }
        FindingKind::RefusedFeed => "a feed failed a trust check, or was dropped for flooding",
        FindingKind::FeedBadInput => "a feed sent lines it had to skip",
        FindingKind::FeedDeviceUnlisted => {
            "a feed reports a device NVML does not list its process on"
        }
        FindingKind::FeedDirCutShort => "a feed dir holds more entries than one scan reads",
        FindingKind::SuspiciousFeedEntry => {
            "a link, FIFO or file where a feed dir or socket belongs: never followed"
        }
        FindingKind::NvmlProblem => "NVML refused something: what is not known",
        FindingKind::Climb => "a layer rising steadily with no plateau: a leak, or a cache growing",
        FindingKind::Fragmentation => {
            "free pieces of split blocks, large and growing as a share of the pool"
        }
        FindingKind::AllocRetries => "the allocator's retries rising: pressure before an OOM",
        FindingKind::Oom => "an out-of-memory error, by capacity or by fragmentation",
        FindingKind::Capacity => "live tensors within a few percent of what the device holds",
        FindingKind::IdleHolder => "a process idle for minutes that holds memory",
        FindingKind::OomForecast => "a climb that will run out of memory within the hour",
        FindingKind::WarmUp => "a job's warm-up verdict: whether its steady state fits",
        FindingKind::WarmingUp => "a job still warming up: judged once its steps settle",
    }
}

/// Every finding kind, in the order the page lists them.
pub(super) const FINDINGS: [FindingKind; 23] = [
    FindingKind::Oom,
    FindingKind::OomForecast,
    FindingKind::Climb,
    FindingKind::Fragmentation,
    FindingKind::AllocRetries,
    FindingKind::Capacity,
    FindingKind::WarmUp,
    FindingKind::WarmingUp,
    FindingKind::ZombieContext,
    FindingKind::IdleHolder,
    FindingKind::UnattributedMemory,
    FindingKind::UnexplainedUsage,
    FindingKind::NotVisibleHolder,
    FindingKind::GpuLost,
    FindingKind::InconsistentCounters,
    FindingKind::NvmlProblem,
    FindingKind::StaleFeed,
    FindingKind::InconsistentFeed,
    FindingKind::RefusedFeed,
    FindingKind::FeedBadInput,
    FindingKind::FeedDeviceUnlisted,
    FindingKind::FeedDirCutShort,
    FindingKind::SuspiciousFeedEntry,
];

/// One row of the exit status table: the status, the commands it is for (none: every
/// command), and when.
pub(super) struct Exit {
    pub(super) status: &'static str,
    pub(super) commands: &'static [&'static str],
    pub(super) when: &'static str,
}

/// The exit statuses, the same condition the same status across commands, in the order of
/// the status.
pub(super) const EXIT_STATUS: [Exit; 10] = [
    Exit {
        status: "0",
        commands: &[],
        when: "done as asked",
    },
    Exit {
        status: "0",
        commands: &["record", "serve"],
        when: "stopped by Ctrl-C, TERM or HUP (record: or at the end of --duration); what was recorded is saved",
    },
    Exit {
        status: "1",
        commands: &[],
        when: "an error, said in one line on stderr with a hint: NVML cannot be loaded, a file cannot be written, the disk is full, the port is taken",
    },
    Exit {
        status: "1",
        commands: &["analyze", "export", "replay", "record"],
        when: "the recording is missing, cannot be read, is empty or is not a recording (record: the one given to --from); nothing is printed or written. Reading that stops part-way is an error too (analyze and export print or write what came before)",
    },
    Exit {
        status: "1",
        commands: &["doctor"],
        when: "some check is missing: strata cannot show it at all",
    },
    Exit {
        status: "2",
        commands: &[],
        when: "a usage error: an option the command does not take, a value out of range, a demo option without --demo",
    },
    Exit {
        status: "3",
        commands: &["analyze", "export", "record"],
        when: "done, but part of the recording was lost (lines that are not samples, corrupt compressed data, samples whose keyframe was lost): one line on stderr says what (record: with --from)",
    },
    Exit {
        status: "3",
        commands: &["doctor"],
        when: "some check is limited (and none missing): strata shows it, with a gap",
    },
    Exit {
        status: "126, 127",
        commands: &["run"],
        when: "CMD cannot be run, or is not found, as a shell says; otherwise strata run becomes CMD and exits with its status",
    },
    Exit {
        status: "128+N",
        commands: &["strata", "replay"],
        when: "the monitor was ended by signal N (TERM, HUP): it gives the terminal back first (a recording started with r is saved)",
    },
];

/// `strata COMMAND` examples: the command each is for, the command line, what it does.
const EXAMPLES: [(&str, &str, &str); 14] = [
    (
        "strata",
        "strata --demo",
        "the monitor on the simulated node: runs anywhere",
    ),
    ("strata", "strata", "the monitor on this node's GPUs"),
    (
        "run",
        "strata run -- python train.py",
        "a job with the allocator feed: its memory split into every layer",
    ),
    (
        "snapshot",
        "strata snapshot --json",
        "one sample as JSON, for a script",
    ),
    (
        "snapshot",
        "strata snapshot --report > incident.md",
        "a Markdown report of the instant, for an issue",
    ),
    (
        "record",
        "strata record --duration 8h night.zst",
        "the night's samples into a recording (format 2)",
    ),
    (
        "analyze",
        "strata analyze night.zst",
        "the findings of a recording, with when each was raised",
    ),
    (
        "replay",
        "strata replay night.zst",
        "the monitor, driven by the recording",
    ),
    (
        "export",
        "strata export night.zst --to parquet tables",
        "a recording's tables for a notebook",
    ),
    (
        "serve",
        "strata serve --listen 0.0.0.0:9842",
        "Prometheus metrics of this node",
    ),
    (
        "doctor",
        "strata doctor",
        "what strata can and cannot see here, and how to fix it",
    ),
    (
        "attach",
        "strata attach 4242",
        "the feed into a running Python 3.14+ process",
    ),
    ("man", "strata man | man -l -", "this page"),
    (
        "config",
        "strata config --default > ~/.config/strata/config.toml",
        "a config file with every key, to edit",
    ),
];

/// The environment variables strata reads.
pub(super) const ENVIRONMENT: [(&str, &str); 11] = [
    (
        "STRATA_NVML_LIB",
        "the NVML library to load, as --nvml-lib (set but empty: unset)",
    ),
    (
        "STRATA_FEED_DIR",
        "the directory of the allocator feeds, as --feed-dir (set but empty: unset)",
    ),
    (
        "STRATA_PODS_DIR",
        "the kubelet's pod log directory, where a process's pod is named (default /var/log/pods)",
    ),
    (
        "STRATA_DEV_DIR",
        "where the GPUs' device files are looked for when finding who holds a zombie context (default /dev; for tests)",
    ),
    (
        "STRATA_PROMETHEUS_BASIC_AUTH",
        "strata fleet: user:password for Prometheus's basic auth, where --basic-auth-file is not given",
    ),
    (
        "STRATA_PROMETHEUS_TOKEN",
        "strata fleet: the bearer token for Prometheus, where --bearer-token-file is not given",
    ),
    (
        "XDG_CONFIG_HOME",
        "where the config file is looked for (default ~/.config)",
    ),
    ("NO_COLOR", "set and not empty: no colour"),
    (
        "TERM, COLORTERM",
        "the terminal and its colours (strata doctor checks them)",
    ),
    (
        "PYTHONPATH",
        "strata run puts the agent first on it and keeps the job's own after",
    ),
    (
        "LD_LIBRARY_PATH",
        "where the driver's libnvidia-ml.so.1 is found when --nvml-lib is not given",
    ),
];

const FILES: [(&str, &str); 4] = [
    (
        "$XDG_CONFIG_HOME/strata/config.toml",
        "the monitor's settings (interval, theme, sort, filter, mouse, columns); strata config --default writes one",
    ),
    (
        "/tmp/strata-UID/",
        "the feed dir: the sockets of the agents of this user's jobs (every /tmp/strata-* as root); --feed-dir or STRATA_FEED_DIR names another",
    ),
    (
        "FILE.zst, FILE.jsonl, FILE.jsonl.zst, FILE.gz",
        "recordings: format 2 (zstd) unless the name says JSON lines (plain, zstd or gzip); strata record and the monitor's r write them, replay, analyze and export read them",
    ),
    (
        "strata-report-HOST-TIME.md, .svg",
        "the incident report R writes into the current directory, with its chart",
    ),
];

/// Whether a row or an example for `commands` belongs on `name`'s page.
fn for_page(name: &str, commands: &[&str]) -> bool {
    name == "strata" || commands.is_empty() || commands.contains(&name)
}

/// The sections strata adds to the page of `command` (`root`: the whole command line, for
/// the pages beside it).
pub(super) fn extra(command: &clap::Command, root: &clap::Command) -> String {
    let name = command.get_name();
    let mut out = String::new();
    if name == "strata" {
        section(&mut out, "LAYERS");
        paragraph(
            &mut out,
            "Each GPU's memory (and each MIG instance's) is split, to the byte, into these layers; a layer nobody reports is n/a, never 0:",
        );
        for layer in Layer::ALL {
            let tag = match layer.short_form() {
                Some(short) => format!(
                    "{} ({}, {})",
                    bold(layer.name()),
                    roff(short),
                    layer.glyph()
                ),
                None => format!("{} ({})", bold(layer.name()), layer.glyph()),
            };
            item(&mut out, &tag, layer.meaning());
        }
        section(&mut out, "KEYS");
        paragraph(&mut out, "In the monitor and in strata replay:");
        for (keys, what) in KEYS {
            let tag: Vec<String> = keys.iter().map(|k| bold(k)).collect();
            item(&mut out, &tag.join(", "), what);
        }
        section(&mut out, "FINDINGS");
        paragraph(
            &mut out,
            "What strata finds, by kind (the JSON's kind), each with its evidence:",
        );
        for kind in FINDINGS {
            item(&mut out, &bold(&kind.name()), finding(kind));
        }
    }
    section(&mut out, "EXIT STATUS");
    for exit in EXIT_STATUS.iter().filter(|e| for_page(name, e.commands)) {
        let text = if name == "strata" && !exit.commands.is_empty() {
            let names: Vec<String> = exit
                .commands
                .iter()
                .map(|c| match *c {
                    "strata" => "the monitor".to_string(),
                    c => format!("strata {c}"),
                })
                .collect();
            format!("{}: {}", names.join(", "), exit.when)
        } else {
            exit.when.to_string()
        };
        item(&mut out, &bold(exit.status), &text);
    }
    if name == "strata" {
        section(&mut out, "FILES");
        for (file, what) in FILES {
            item(&mut out, &bold(file), what);
        }
        section(&mut out, "ENVIRONMENT");
        for (variable, what) in ENVIRONMENT {
            item(&mut out, &bold(variable), what);
        }
    }
    let examples: Vec<_> = EXAMPLES
        .iter()
        .filter(|(for_, _, _)| for_page(name, &[for_]))
        .collect();
    if !examples.is_empty() {
        section(&mut out, "EXAMPLES");
        for (_, line, what) in examples {
            item(&mut out, &bold(line), what);
        }
    }
    section(&mut out, "SEE ALSO");
    let pages: Vec<String> = if name == "strata" {
        root.get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| format!("{}(1)", bold(&format!("strata-{}", s.get_name()))))
            .collect()
    } else {
        vec![format!("{}(1)", bold("strata"))]
    };
    let _ = writeln!(out, "{}", pages.join(", "));
    out
}

//! A command line in CJK and emoji takes two cells a character: the process table, cut to
//! the terminal's width, keeps every row's columns where the header puts them, at 80 and at
//! 120 columns, and the command is cut at the edge with its `…`. Real processes (one named in wide characters, one plain) listed by the fake
//! NVML, the monitor in a real pseudo-terminal.

use crate::common;

use common::fake_nvml::{fake_nvml_lib, SCENARIO_ENV};
use common::tmux::Pane;
use common::{strata, Running, Scratch};
use serde_json::json;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;
use unicode_width::UnicodeWidthStr;

const WIDE_ARGV0: &str = "训练模型数据集处理器🚀🚀🚀训练模型数据集处理器🚀🚀🚀训练模型";

fn sleeper(argv0: &str) -> Running {
    Running::spawn(Command::new("sleep").arg0(argv0).arg("600"))
}

/// The display column where `needle` starts in `line`, if it is there.
fn column_of(line: &str, needle: &str) -> Option<usize> {
    line.find(needle).map(|at| line[..at].width())
}

#[test]
fn every_row_keeps_its_columns_with_a_wide_character_command() {
    let wide = sleeper(WIDE_ARGV0);
    let plain = sleeper("plain-worker");
    let scratch = Scratch::new("wide");
    let dir = &scratch.dir;
    let gib = 1u64 << 30;
    let scenario = json!({"devices": [{
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-5f3c2a1e-8b7d-4c6e-9a10-2d4f6b8e0c31",
        "memory": { "total": 80 * gib, "reserved": 0, "used": 3 * gib },
        "mig_mode": "NotSupported",
        "compute_processes": [
            { "pid": wide.pid(), "used": 2 * gib },
            { "pid": plain.pid(), "used": gib },
        ],
    }]});
    let path = dir.join("wide.json");
    std::fs::write(&path, scenario.to_string()).expect("scenario");
    let command = format!(
        "{SCENARIO_ENV}='{}' {} --interval 0.5 --nvml-lib '{}' --feed-dir '{}'",
        path.display(),
        strata(),
        fake_nvml_lib().display(),
        dir.join("no-feeds").display()
    );
    for width in [80u16, 120] {
        let pane = Pane::start(&format!("wide-{width}"), &command, width, 30);
        let screen = pane
            .wait_for(&["plain-w", "训练"], Duration::from_secs(15))
            .unwrap_or_else(|s| panic!("the rows are missing at {width}:\n{s}"));
        let header = screen
            .lines()
            .find(|l| l.starts_with("PID "))
            .unwrap_or_else(|| panic!("no table header at {width}:\n{screen}"));
        let state_at = column_of(header, "STATE").expect("a STATE column");
        let command_at = column_of(header, "COMMAND").expect("a COMMAND column");
        for pid in [wide.pid(), plain.pid()] {
            let row = screen
                .lines()
                .find(|l| l.starts_with(&format!("{pid} ")))
                .unwrap_or_else(|| panic!("no row for {pid} at {width}:\n{screen}"));
            assert!(
                row.width() <= usize::from(width),
                "{width}: wider than the terminal: {row}"
            );
            assert_eq!(
                column_of(row, "S nofeed"),
                Some(state_at),
                "{width}: the STATE cell moved in\n{row}\n{header}"
            );
            let command_cell = if pid == wide.pid() {
                "训练"
            } else {
                "plain-w"
            };
            assert_eq!(
                column_of(row, command_cell),
                Some(command_at),
                "{width}: the command moved in\n{row}\n{header}"
            );
        }
        // The wide command runs to the edge and says it is cut: `…` in the last cell, or the
        // one before where a two-cell character would have straddled the edge.
        let row = screen
            .lines()
            .find(|l| l.starts_with(&format!("{} ", wide.pid())))
            .expect("the wide row");
        let row = row.trim_end();
        assert!(row.ends_with('…'), "{width}: cut without its mark: {row}");
        assert!(
            row.width() + 1 >= usize::from(width),
            "{width}: cut short of the edge: {row}"
        );
        pane.keys(&["q"]);
        let _ = pane.wait_exit(Duration::from_secs(5));
    }
}

//! `strata export` on bad input, as a user meets it: an unreadable recording, one with bad
//! lines or cut short, an OUT that already holds files or is a file, a disk that fills.
//! Each is one line on stderr with a hint, the exit status says what was lost (3: part of
//! the recording, the tables of the rest written), and nothing of a failed export is left.
//! The tables are read back with the csv crate here; tests/integration/export_tables.rs reads them with
//! pyarrow and DuckDB.

use crate::common;

use common::{strata_output as strata, utf8 as path, Scratch};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The demo's 20-minute story as JSON lines (121 samples, 10 s apart).
fn story() -> &'static str {
    std::str::from_utf8(common::snapshot::demo_story()).expect("UTF-8")
}

fn export(input: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["export", path(input), "--to", "csv", path(out)];
    args.extend_from_slice(extra);
    strata(&args)
}

/// One line, from strata, with a hint.
fn one_line_with_hint(out: &Output) -> String {
    let text = stderr(out);
    assert_eq!(text.lines().count(), 1, "one line: {text}");
    assert!(text.starts_with("strata: "), "{text}");
    assert!(text.contains("(hint: "), "{text}");
    text
}

/// The instants the devices table holds.
fn instants(dir: &Path) -> BTreeSet<u64> {
    let mut reader = csv::Reader::from_path(dir.join("devices.csv")).expect("devices.csv");
    let headers = reader.headers().expect("header").clone();
    let time = headers
        .iter()
        .position(|h| h == "time_unix_s")
        .expect("time_unix_s");
    reader
        .records()
        .map(|r| {
            let r = r.expect("a row");
            r[time].parse::<f64>().expect("a time").to_bits()
        })
        .collect()
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

const TABLES: [&str; 3] = ["devices.csv", "findings.csv", "processes.csv"];

#[test]
fn an_unreadable_recording_is_one_line_and_leaves_nothing() {
    let scratch = Scratch::new("export-cli-unreadable");
    let dir = scratch.dir.clone();
    let out = dir.join("tables");
    let result = export(&dir.join("missing.zst"), &out, &[]);
    assert_eq!(result.status.code(), Some(1));
    let said = one_line_with_hint(&result);
    assert!(said.contains("cannot read the recording"), "{said}");
    assert!(
        said.contains("hint: record one with `strata record FILE`"),
        "{said}"
    );
    assert!(!out.exists(), "no OUT made for nothing");
    // A device that never ends (before, read for ever): refused before a byte is read.
    let zeros = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["export", "/dev/zero", "--to", "csv", path(&out)])
        .output()
        .expect("runs");
    assert_eq!(zeros.status.code(), Some(1), "{}", stderr(&zeros));
    let said = one_line_with_hint(&zeros);
    assert!(
        said.contains("it is a character device, not a recording"),
        "{said}"
    );
    assert!(!out.exists(), "nothing written, OUT removed: {said}");
    // An empty file: nothing to table is an error, as for analyze and replay (before, exit
    // 0 and tables of nothing).
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, b"").expect("write");
    let result = export(&empty, &out, &[]);
    assert_eq!(result.status.code(), Some(1));
    let said = one_line_with_hint(&result);
    assert!(said.contains("holds no sample: it is empty"), "{said}");
    assert!(!out.exists(), "no OUT made for nothing");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_lines_are_counted_and_skipped_and_the_rest_is_tabled_with_exit_3() {
    let scratch = Scratch::new("export-cli-bad-lines");
    let dir = scratch.dir.clone();
    let mut lines: Vec<&str> = story().lines().collect();
    lines[4] = "{not json";
    lines[9] = "[1, 2, 3]";
    let last = lines.pop().expect("a last line");
    let cut = &last[..last.len() / 2];
    let recording = dir.join("bad.jsonl");
    std::fs::write(&recording, format!("{}\n{cut}", lines.join("\n"))).expect("write");
    let out = dir.join("tables");
    let result = export(&recording, &out, &[]);
    assert_eq!(result.status.code(), Some(3), "{}", stderr(&result));
    let said = one_line_with_hint(&result);
    assert!(
        said.contains("was lost: 2 lines not read as samples"),
        "{said}"
    );
    assert_eq!(names(&out), TABLES);
    // 121 samples, less the two bad lines and the one cut short.
    assert_eq!(instants(&out).len(), 118);
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(stdout.contains("118 sample(s)"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_format_2_recording_cut_in_a_record_is_tabled_up_to_the_cut() {
    let scratch = Scratch::new("export-cli-cut");
    let dir = scratch.dir.clone();
    let jsonl = dir.join("demo.jsonl");
    std::fs::write(&jsonl, story()).expect("write");
    let whole = dir.join("demo.zst");
    let made = strata(&["record", path(&whole), "--from", path(&jsonl)]);
    assert!(made.status.success(), "{}", stderr(&made));
    let bytes = std::fs::read(&whole).expect("read");
    let cut = dir.join("cut.zst");
    std::fs::write(&cut, &bytes[..bytes.len() * 3 / 5]).expect("write");
    // How many samples analyze reads of it: the oracle.
    let analysis = strata(&["analyze", path(&cut), "--json"]);
    let analysis: serde_json::Value = serde_json::from_slice(&analysis.stdout).expect("JSON");
    let samples = analysis["samples"].as_u64().expect("samples");
    assert!(samples > 10 && samples < 121, "{samples}");
    let out = dir.join("tables");
    let result = export(&cut, &out, &[]);
    assert_eq!(
        result.status.code(),
        Some(0),
        "a cut is not a loss: {}",
        stderr(&result)
    );
    assert_eq!(instants(&out).len() as u64, samples);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_out_that_holds_files_is_refused_unless_forced_and_its_files_stay() {
    let scratch = Scratch::new("export-cli-not-empty");
    let dir = scratch.dir.clone();
    let recording = dir.join("demo.jsonl");
    std::fs::write(&recording, story()).expect("write");
    let out = dir.join("tables");
    std::fs::create_dir_all(&out).expect("mkdir");
    std::fs::write(out.join("notes.txt"), "mine").expect("write");
    let result = export(&recording, &out, &[]);
    assert_eq!(result.status.code(), Some(1));
    let said = one_line_with_hint(&result);
    assert!(
        said.contains("is not empty") && said.contains("--force"),
        "{said}"
    );
    assert_eq!(names(&out), ["notes.txt"], "nothing written");

    // Forced: the tables land beside it, and again over the tables of a first run.
    for _ in 0..2 {
        let result = export(&recording, &out, &["--force"]);
        assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
        let mut want = vec!["notes.txt".to_string()];
        want.extend(TABLES.map(String::from));
        want.sort();
        assert_eq!(names(&out), want, "no hidden file left");
        assert_eq!(
            std::fs::read_to_string(out.join("notes.txt"))
                .ok()
                .as_deref(),
            Some("mine")
        );
        assert_eq!(instants(&out).len(), 121);
    }

    // A file where OUT should be is refused, forced or not.
    let file = dir.join("a-file");
    std::fs::write(&file, "x").expect("write");
    for extra in [&[][..], &["--force"][..]] {
        let result = export(&recording, &file, extra);
        assert_eq!(result.status.code(), Some(1));
        assert!(one_line_with_hint(&result).contains("is not a directory"));
    }
    assert_eq!(std::fs::read_to_string(&file).ok().as_deref(), Some("x"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn standard_input_is_a_recording_too() {
    use std::io::Write;
    let scratch = Scratch::new("export-cli-stdin");
    let dir = scratch.dir.clone();
    let out = dir.join("tables");
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["export", "-", "--to", "csv", path(&out)])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(story().as_bytes()).expect("feed");
    drop(stdin);
    let result = child.wait_with_output().expect("waits");
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    assert!(String::from_utf8_lossy(&result.stdout).contains("of standard input"));
    assert_eq!(instants(&out).len(), 121);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A disk that fills while the tables are written (a 16 KiB tmpfs, in a mount namespace of
/// its own), in either format: one line, and the export leaves nothing behind.
#[test]
fn a_full_disk_is_one_line_and_leaves_no_table() {
    if !common::can_mount_tmpfs() {
        return;
    }
    for format in ["csv", "parquet"] {
        full_disk(format);
    }
}

fn full_disk(format: &str) {
    let scratch = Scratch::new(&format!("export-cli-full-{format}"));
    let dir = scratch.dir.clone();
    let recording = dir.join("demo.jsonl");
    std::fs::write(&recording, story()).expect("write");
    let small = dir.join("small");
    std::fs::create_dir_all(&small).expect("mkdir");
    let script = format!(
        "mount -t tmpfs -o size=16k strata-export-test '{small}' && '{strata}' export '{rec}' --to {format} '{small}/tables'; echo \"rc=$?\"; ls -A '{small}'",
        small = path(&small),
        strata = env!("CARGO_BIN_EXE_strata"),
        rec = path(&recording),
    );
    let result = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("unshare runs");
    let said = stderr(&result);
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(stdout.contains("rc=1"), "{format}: {stdout} {said}");
    assert_eq!(said.lines().count(), 1, "one line: {said}");
    assert!(said.contains("cannot write the tables into"), "{said}");
    assert!(said.contains("hint: check the free space"), "{said}");
    let listed: Vec<&str> = stdout.lines().filter(|l| !l.starts_with("rc=")).collect();
    assert!(listed.is_empty(), "the export left {listed:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A read that stops midway (here: a gigabyte of zeros without a line end after the story,
/// on stdin) writes the tables of the samples before it, with one line and exit status 1.
#[test]
fn a_read_that_stops_midway_tables_what_came_before() {
    use std::io::Write;
    let scratch = Scratch::new("export-cli-stops");
    let dir = scratch.dir.clone();
    let out = dir.join("tables");
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["export", "-", "--to", "csv", path(&out)])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let feeder = std::thread::spawn(move || {
        let zeros = vec![0u8; 1 << 20];
        // strata stops reading at its limit: the write that fails then is the end.
        let _ = stdin.write_all(story().as_bytes());
        for _ in 0..1100 {
            if stdin.write_all(&zeros).is_err() {
                break;
            }
        }
    });
    let result = child.wait_with_output().expect("waits");
    let _ = feeder.join();
    assert_eq!(result.status.code(), Some(1), "{}", stderr(&result));
    let said = one_line_with_hint(&result);
    assert!(
        said.contains("stopped") && said.contains("the tables hold the 121 sample(s) before"),
        "{said}"
    );
    assert_eq!(names(&out), TABLES);
    assert_eq!(instants(&out).len(), 121);
    let _ = std::fs::remove_dir_all(&dir);
}

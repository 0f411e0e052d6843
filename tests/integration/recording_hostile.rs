//! `strata analyze` and `strata replay` on recordings made to hurt: a line of hundreds of
//! MiB, `/dev/zero`, gzip and zstd bombs of zeros, every address-space cap from 64 MiB up,
//! corruption inside a zstd frame or a gzip member (made and checked with the real `zstd` and
//! `gzip`), a recording recompressed with `zstd --long=31`, a FIFO. Each must end, with one
//! line where it fails, never an abort, and lose nothing it could read.

use crate::common;

use common::{strata, Scratch};
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// What writes a child's standard input.
type Feed = Box<dyn FnOnce(&mut dyn Write) + Send>;

/// Runs `command`, feeding `stdin` from a thread, killed if it runs past `limit`.
fn run(mut command: Command, stdin: Option<Feed>, limit: Duration) -> Output {
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("starts");
    let feeder = stdin.map(|feed| {
        let mut pipe = child.stdin.take().expect("stdin");
        std::thread::spawn(move || feed(&mut pipe))
    });
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(100));
            // SAFETY: a signal 0 probe of our own child.
            if unsafe { libc::kill(pid as i32, 0) } != 0 {
                return false;
            }
        }
        // SAFETY: our own child, still running past its limit.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        true
    });
    let out = child.wait_with_output().expect("waits");
    if let Some(feeder) = feeder {
        let _ = feeder.join();
    }
    assert!(
        !watchdog.join().expect("watchdog"),
        "still running after {limit:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// strata with `args`, its address space capped at `cap_mib` MiB (`prlimit`) if given.
fn capped(args: &[&str], cap_mib: Option<u64>) -> Command {
    match cap_mib {
        Some(cap) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--as={}", cap << 20))
                .arg(strata())
                .args(args);
            c
        }
        None => {
            let mut c = Command::new(strata());
            c.args(args);
            c
        }
    }
}

/// stderr holds exactly one line, which contains each of `words`; no abort.
fn one_line(out: &Output, words: &[&str]) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!stderr.contains("memory allocation of"), "{stderr}");
    for w in words {
        assert!(stderr.contains(w), "{w:?} not in {stderr}");
    }
    stderr
}

/// A sample line of the demo at story second `t`.
fn sample_line(t: f64) -> String {
    serde_json::to_string(&strata::source::demo::node_at(0, t, 10.0)).expect("json") + "\n"
}

/// `n` demo samples 10 s apart from story second `from`.
fn samples(from: f64, n: u32) -> String {
    (0..n)
        .map(|i| sample_line(from + f64::from(i) * 10.0))
        .collect()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {} / {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn tool(name: &str, args: &[&str], input: &Path, output: &Path) {
    let status = Command::new(name)
        .args(args)
        .stdin(std::fs::File::open(input).expect("input"))
        .stdout(std::fs::File::create(output).expect("output"))
        .status()
        .unwrap_or_else(|e| panic!("{name}: {e} (hint: apt-get install {name})"));
    assert!(status.success(), "{name} {args:?}");
}

/// A 300 MiB line between two samples: skipped and counted (exit 3: a line lost), both
/// samples read, under an address-space cap the unbounded reader ran out of.
#[test]
fn a_line_over_the_limit_is_skipped_and_the_lines_after_it_read() {
    let feed: Feed = Box::new(|pipe| {
        let block = vec![b'x'; 1 << 20];
        let _ = pipe.write_all(sample_line(0.0).as_bytes());
        // It begins as a sample does: held up to the limit, then skipped.
        let _ = pipe.write_all(b"{\"pad\": \"");
        for _ in 0..300 {
            if pipe.write_all(&block).is_err() {
                return;
            }
        }
        let _ = pipe.write_all(b"\"}\n");
        let _ = pipe.write_all(sample_line(10.0).as_bytes());
    });
    let out = run(
        capped(&["analyze", "--json", "-"], Some(768)),
        Some(feed),
        Duration::from_secs(120),
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let analysis = json(&out);
    assert_eq!(analysis["samples"], 2);
    let bad = &analysis["bad_lines"][0];
    assert_eq!(bad["line"], 2);
    let error = bad["error"].as_str().expect("error");
    assert!(
        error.contains("300 MiB long, over the 256 MiB line limit"),
        "{error}"
    );
    one_line(
        &out,
        &["part of the recording standard input was lost: 1 line not read"],
    );
}

/// Input with no line end at all is given up with one line naming the offset: zeros on
/// standard input, and bombs of zeros made with the real gzip and zstd (1.25 GiB of text, 20
/// members or frames of 64 MiB of zeros), under a 1 GiB address-space cap. `/dev/zero`
/// itself, a device that never ends, is refused before a byte is read, as `/dev/urandom`
/// (which before was read for ever, with nothing said).
#[test]
fn dev_zero_and_bombs_of_zeros_are_given_up_with_one_line() {
    let scratch = Scratch::new("hostile-bombs");
    let dir = &scratch.dir;
    for device in ["/dev/zero", "/dev/urandom"] {
        for command in ["analyze", "export"] {
            let mut args = vec![command, device];
            if command == "export" {
                args.extend(["--to", "csv"]);
                args.push(dir.to_str().expect("path"));
            }
            let out = run(capped(&args, None), None, Duration::from_secs(300));
            assert_eq!(out.status.code(), Some(1), "{command} {device}: {out:?}");
            one_line(
                &out,
                &["it is a character device, not a recording", "(hint: "],
            );
        }
    }
    let piped = run(
        capped(&["analyze", "-"], Some(1024)),
        Some(Box::new(|pipe| {
            let block = vec![0u8; 1 << 20];
            for _ in 0..1300 {
                if pipe.write_all(&block).is_err() {
                    return;
                }
            }
        })),
        Duration::from_secs(300),
    );
    assert_eq!(piped.status.code(), Some(1), "{piped:?}");
    one_line(
        &piped,
        &[
            "no line ends in the 1.00 GiB of text",
            "from byte 0: not JSON lines",
            "(hint: ",
        ],
    );
    let zeros = dir.join("zeros");
    std::fs::write(&zeros, vec![0u8; 64 << 20]).expect("zeros");
    let mut inputs = Vec::new();
    for (name, args) in [("gzip", ["-1", "-c"]), ("zstd", ["-1", "-c"])] {
        let member = dir.join(format!("member.{name}"));
        tool(name, &args, &zeros, &member);
        let member = std::fs::read(&member).expect("member");
        let bomb = dir.join(format!("bomb.{name}"));
        std::fs::write(&bomb, member.repeat(20)).expect("bomb");
        inputs.push((bomb, "from byte 0 (read to byte "));
    }
    std::fs::remove_file(&zeros).expect("removed");
    for (path, said) in inputs {
        let path = path.to_str().expect("path");
        let out = run(
            capped(&["analyze", path], Some(1024)),
            None,
            Duration::from_secs(300),
        );
        assert_eq!(out.status.code(), Some(1), "{path}: {out:?}");
        one_line(
            &out,
            &["no line ends in the 1.00 GiB of text", said, "(hint: "],
        );
        assert!(out.stdout.is_empty(), "{path}");
    }
}

/// Under any address-space cap, strata ends with exit status 1 and one line: it never
/// aborts on a failed allocation (before, "memory allocation of 8589934592 bytes failed" and
/// exit 134). The input begins as a sample does and never ends its line, so that it is held
/// up to the line limit: under the smaller caps that fails, and says so.
#[test]
fn under_any_memory_cap_reading_ends_with_one_line_never_an_abort() {
    let mut out_of_memory = 0;
    for cap in [64, 96, 128, 192, 256, 320, 384, 512] {
        let feed: Feed = Box::new(|pipe| {
            let block = vec![b'x'; 1 << 20];
            let _ = pipe.write_all(b"{\"pad\": \"");
            for _ in 0..1200 {
                if pipe.write_all(&block).is_err() {
                    return;
                }
            }
        });
        let out = run(
            capped(&["analyze", "-"], Some(cap)),
            Some(feed),
            Duration::from_secs(300),
        );
        assert_eq!(out.status.code(), Some(1), "cap {cap} MiB: {out:?}");
        let line = one_line(&out, &["strata: "]);
        if line.contains("strata: out of memory: an allocation of ") {
            out_of_memory += 1;
        } else {
            assert!(line.contains("no line ends"), "cap {cap} MiB: {line}");
        }
    }
    assert!(out_of_memory > 0, "no cap was small enough to run out");
}

/// Two frames (or members) made by the real tool, the first damaged in its middle: the tool's
/// own test finds it corrupt; analyze says where, reads the whole second frame, counts what
/// it skipped, and exits 3. A recording cut inside its last frame exits 0.
#[test]
fn corruption_in_a_frame_is_said_and_the_next_frame_is_read() {
    let scratch = Scratch::new("hostile-corrupt");
    let dir = &scratch.dir;
    let (a, b) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    std::fs::write(&a, samples(0.0, 61)).expect("a");
    std::fs::write(&b, samples(610.0, 61)).expect("b");
    for tool_name in ["zstd", "gzip"] {
        let (fa, fb) = (dir.join("a.part"), dir.join("b.part"));
        tool(tool_name, &["-c"], &a, &fa);
        tool(tool_name, &["-c"], &b, &fb);
        let first = std::fs::read(&fa).expect("a");
        let second = std::fs::read(&fb).expect("b");
        let mut bytes = first.clone();
        bytes.extend(&second);
        let middle = first.len() / 2;
        for byte in &mut bytes[middle..middle + 16] {
            *byte = !*byte;
        }
        let path = dir.join(format!("damaged.{tool_name}"));
        std::fs::write(&path, &bytes).expect("write");
        let test = Command::new(tool_name)
            .arg("-t")
            .arg(&path)
            .output()
            .expect("test");
        assert!(!test.status.success(), "{tool_name} -t finds it sound");

        let out = run(
            capped(&["analyze", "--json", path.to_str().expect("path")], None),
            None,
            Duration::from_secs(120),
        );
        assert_eq!(out.status.code(), Some(3), "{tool_name}: {out:?}");
        let analysis = json(&out);
        let corrupt = analysis["corrupt"].as_array().expect("corrupt");
        assert_eq!(corrupt.len(), 1, "{tool_name}: {analysis}");
        // Said where decoding failed: within the damaged frame, at most at its end (where a
        // checksum that does not match is found).
        let at = corrupt[0]["at"].as_u64().expect("at");
        assert!(
            (middle as u64 - 200_000.min(middle as u64)..=first.len() as u64).contains(&at),
            "{tool_name}: corrupt at {at}, damaged at {middle}, first frame {} bytes",
            first.len()
        );
        assert_eq!(corrupt[0]["resumed_at"], first.len(), "{tool_name}");
        let samples = analysis["samples"].as_u64().expect("samples");
        assert!(
            (61..122).contains(&samples),
            "{tool_name}: {samples} samples"
        );
        assert_eq!(
            analysis["last_time"].as_f64(),
            Some(strata::source::demo::node_at(0, 1210.0, 10.0).time),
            "{tool_name}: the second frame read to its end"
        );
        assert_eq!(analysis["truncated"], false, "{tool_name}");
        one_line(&out, &[&format!("corrupt at byte {at}")]);

        // Cut inside the last frame: only the sample in flight is lost.
        let mut cut = first.clone();
        cut.extend(&second[..second.len() * 2 / 3]);
        let path = dir.join(format!("cut.{tool_name}"));
        std::fs::write(&path, &cut).expect("write");
        let out = run(
            capped(&["analyze", "--json", path.to_str().expect("path")], None),
            None,
            Duration::from_secs(120),
        );
        assert_eq!(out.status.code(), Some(0), "{tool_name}: {out:?}");
        assert!(out.stderr.is_empty(), "{tool_name}: {out:?}");
        let analysis = json(&out);
        assert_eq!(analysis["truncated"], true, "{tool_name}");
        assert!(
            analysis["samples"].as_u64().expect("samples") > 61,
            "{tool_name}"
        );
    }
}

/// A recording recompressed with `zstd --long=31` from a pipe (its header asks for a 2 GiB
/// window) reads as the plain one; where that window cannot be had, one line says so and how
/// to recompress.
#[test]
fn a_recording_recompressed_with_long_31_reads() {
    let scratch = Scratch::new("hostile-long");
    let dir = &scratch.dir;
    let plain = dir.join("plain.jsonl");
    std::fs::write(&plain, samples(0.0, 30)).expect("plain");
    let long = dir.join("long.zst");
    tool("zstd", &["-q", "--long=31", "-c"], &plain, &long);
    let header = std::fs::read(&long).expect("read");
    assert_eq!(header[5] >> 3, 31 - 10, "the frame asks for a 2 GiB window");
    let analyse = |path: &Path, cap| {
        run(
            capped(&["analyze", "--json", path.to_str().expect("path")], cap),
            None,
            Duration::from_secs(120),
        )
    };
    let want = analyse(&plain, None);
    let got = analyse(&long, None);
    assert_eq!(got.status.code(), Some(0), "{got:?}");
    assert_eq!(json(&got), json(&want));
    let capped = analyse(&long, Some(1024));
    assert_eq!(capped.status.code(), Some(1), "{capped:?}");
    one_line(
        &capped,
        &[
            "the zstd frame at byte 0 needs a 2.00 GiB window",
            "zstd -dc --long=31 FILE | zstd -o NEW.zst",
        ],
    );
}

/// `strata replay` of a FIFO is refused at once, before the terminal, with a hint (before,
/// it waited for a writer on a blank screen); so is a device.
#[test]
fn replay_of_a_fifo_or_a_device_is_refused_at_once() {
    let scratch = Scratch::new("hostile-fifo");
    let dir = &scratch.dir;
    let fifo = dir.join("pipe");
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    for (path, kind) in [
        (
            fifo.to_str().expect("path"),
            "is a FIFO (a named pipe), not a regular file",
        ),
        ("/dev/zero", "is a character device, not a regular file"),
    ] {
        let out = run(
            capped(&["replay", path], None),
            None,
            Duration::from_secs(20),
        );
        assert_eq!(out.status.code(), Some(1), "{path}: {out:?}");
        one_line(&out, &[kind, "`strata analyze -` reads a pipe"]);
    }
}

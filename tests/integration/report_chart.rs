//! `strata analyze FILE --report-at TIME`: the report of an instant of the demo's story as
//! `R` would write it, with its chart beside it, linked. The SVG is rendered by a real
//! renderer (`rsvg-convert`, Debian's librsvg2-bin; tests/all installs it) and its pixels
//! read back: at the OOM's column the live layer's colour takes the share of the bar that
//! live tensors take of the device, as the pipeline accounts that instant.

use crate::common;

use common::{strata, Scratch};
use std::path::{Path, PathBuf};
use std::process::Command;
use strata::layers::Layer;
use strata::pipeline::Pipeline;
use strata::recording::{Line, Lines};

/// The demo's story at 10 s, 0 to 20 minutes, as a recording.
fn story(dir: &Path) -> PathBuf {
    let path = dir.join("demo.jsonl");
    std::fs::write(&path, common::snapshot::demo_story()).expect("write");
    path
}

/// Live tensors' share of the device `uuid` at the recording's last sample at or before
/// `at`, as the pipeline accounts it (not through the history or the chart).
fn live_share(path: &Path, at: f64, uuid: &str) -> f64 {
    let mut lines = Lines::open(path).expect("opens");
    let mut pipeline = Pipeline::new(None);
    let mut last = None;
    while let Some((_, line)) = lines.next_line().expect("reads") {
        let Line::Sample(s) = line else { continue };
        if s.time > at {
            break;
        }
        last = Some(pipeline.ingest(*s));
    }
    let observed = last.expect("a sample");
    for (g, acc) in observed.sample.gpus.iter().zip(&observed.account.gpus) {
        for (m, macc) in g.mig.iter().zip(&acc.mig) {
            if m.uuid == uuid {
                let layers = macc.layers.as_ref().expect("layers");
                let total = m.memory.expect("memory").total;
                return layers.get(Layer::Live).expect("live") as f64 / total as f64;
            }
        }
    }
    panic!("no device {uuid}");
}

/// The RGB pixels of a PNG, row by row, and its width.
fn pixels(png_path: &Path) -> (Vec<[u8; 3]>, usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).expect("png"),
    ));
    let mut reader = decoder.read_info().expect("png header");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("png frame");
    let step = info.color_type.samples();
    let px = buf[..info.buffer_size()]
        .chunks(step)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    (px, info.width as usize)
}

fn near(a: [u8; 3], b: plotters::style::RGBColor) -> bool {
    let d = |x: u8, y: u8| (i16::from(x) - i16::from(y)).abs();
    d(a[0], b.0) < 12 && d(a[1], b.1) < 12 && d(a[2], b.2) < 12
}

#[test]
fn the_report_of_an_instant_has_its_chart_and_the_oom_column_shows_live_as_accounted() {
    let scratch = Scratch::new("chart-oom");
    let dir = &scratch.dir;
    let recording = story(dir);
    // The fine-tune on the 3g.40gb slice runs out of memory at 09:15:30 (story 930 s).
    let out = Command::new(strata())
        .args(["analyze"])
        .arg(&recording)
        .args(["--report-at", "2026-01-01T09:15:30Z"])
        .current_dir(dir)
        .output()
        .expect("runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = dir.join("strata-report-demo-node-20260101-091530.md");
    let svg = dir.join("strata-report-demo-node-20260101-091530.svg");
    let report = std::fs::read_to_string(&md).expect("the report");
    assert!(
        report.starts_with("# strata report: demo-node at 2026-01-01 09:15:30.0 UTC"),
        "{report}"
    );
    assert!(report.contains("## Last OOM"));
    assert!(report.contains("](strata-report-demo-node-20260101-091530.svg)"));
    let text = std::fs::read_to_string(&svg).expect("the chart");
    for words in ["live", "fragmented", "cached", "free", "GiB", "OOM"] {
        assert!(text.contains(words), "{words}");
    }
    let png = dir.join("chart.png");
    let rendered = Command::new("rsvg-convert")
        .arg("-o")
        .arg(&png)
        .arg(&svg)
        .status()
        .expect("rsvg-convert is missing (hint: apt-get install librsvg2-bin; tests/all does)");
    assert!(rendered.success());
    let (px, width) = pixels(&png);
    let height = px.len() / width;
    // The OOM's mark: the column of black pixels that runs the plot's height.
    let black = |x: usize| {
        (0..height)
            .filter(|&y| px[y * width + x] == [0, 0, 0])
            .count()
    };
    let mark = (0..width).max_by_key(|&x| black(x)).expect("a mark");
    assert!(black(mark) > height / 2, "a mark down the plot at x {mark}");
    // The bar just before it: the instant of the OOM (the chart's last column).
    let x = mark - 4;
    let column: Vec<[u8; 3]> = (0..height).map(|y| px[y * width + x]).collect();
    let colours = strata::report::chart::STACK.map(strata::report::chart::colour);
    let in_bar = column
        .iter()
        .filter(|&&p| colours.iter().any(|&c| near(p, c)))
        .count();
    let live = column
        .iter()
        .filter(|&&p| near(p, strata::report::chart::colour(Layer::Live)))
        .count();
    assert!(
        in_bar > height / 2,
        "the bar fills the plot's height: {in_bar} of {height}"
    );
    let expected = live_share(
        &recording,
        1_767_258_930.0,
        "MIG-9b2d7e41-0c5a-5f83-a6e1-0000d4b7c258",
    );
    let seen = live as f64 / in_bar as f64;
    assert!(
        (seen - expected).abs() < 0.02,
        "live takes {seen:.3} of the OOM's column, {expected:.3} of the device"
    );
}

/// The demo's story clock is for the demo's samples, which say so (`demo`), not for a host
/// that happens to be named as the demo's: the same samples without the mark, as a real
/// node called `demo-node` would record them, are reported in UTC.
#[test]
fn a_real_host_named_as_the_demo_is_reported_in_utc() {
    let scratch = Scratch::new("chart-real-demo-node");
    let dir = &scratch.dir;
    let mut lines = Vec::new();
    for line in String::from_utf8_lossy(common::snapshot::demo_story()).lines() {
        let mut sample: serde_json::Value = serde_json::from_str(line).expect("JSON");
        assert_eq!(sample["host"], "demo-node");
        assert_eq!(sample["demo"], true, "the demo marks its samples");
        sample.as_object_mut().expect("an object").remove("demo");
        lines.push(sample.to_string());
    }
    let recording = dir.join("real.jsonl");
    std::fs::write(&recording, lines.join("\n") + "\n").expect("write");
    let out = Command::new(strata())
        .args(["analyze"])
        .arg(&recording)
        .args(["--report-at", "2026-01-01T09:15:30Z"])
        .current_dir(dir)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = dir.join("strata-report-demo-node-20260101-091530.md");
    let report = std::fs::read_to_string(&md).expect("the report");
    assert!(
        report.starts_with("# strata report: demo-node at 2026-01-01 09:15:30.0 UTC"),
        "{}",
        report.lines().next().unwrap_or_default()
    );
    // "history" holds "story": each "story " must be that.
    let lower = report.to_lowercase();
    assert_eq!(
        lower.matches("story ").count(),
        lower.matches("history ").count(),
        "no story time in a real node's report"
    );
}

//! The report read back as Markdown: hostile strings stay text, tables keep their columns.

use super::*;
use crate::pipeline::Pipeline;
use crate::source::demo::node_at;
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

const COMMAND: &str = "python train.py | rm -rf / `id` <script>alert(1)</script>\n| 1 | 2 | 3 |\n# @admin #12 ![x](http://e/i.png) *b* _i_ ~~s~~ &amp; $x$ \\|";

fn hostile() -> (NodeSample, String) {
    let mut sample = node_at(0, 905.0, 10.0);
    sample.host = "node|x`id`<script>alert(1)</script>\n# pwned\u{1b}]0;t\u{7}".into();
    sample.driver_version = Some("550 <img src=x onerror=alert(1)>".into());
    sample.cuda_driver_version = Some("12.4\u{202e}|".into());
    sample.gpus[0].name = Some("H100 | *bold* [link](http://evil)".into());
    let mig = sample
        .gpus
        .iter()
        .position(|g| !g.mig.is_empty())
        .expect("the demo has MIG");
    sample.gpus[mig].mig[0].profile = Some("3g.40gb\u{1b}[31m|<b>".into());
    let fed = sample
        .feeds
        .iter()
        .position(|f| f.hello.is_some())
        .expect("a fed process");
    let pid = sample.feeds[fed].pid().expect("its pid");
    if let Some(hello) = sample.feeds[fed]
        .hello
        .as_mut()
        .map(std::sync::Arc::make_mut)
    {
        hello.framework = Some("torch</td><script>".into());
        hello.framework_version = Some("2.5\u{200b}|1".into());
        hello.backend = Some("native|`x`".into());
    }
    // What the job's own code says of its sites: its file and function names.
    let time = sample.time;
    sample.feeds[fed].sites = Some(std::sync::Arc::new(crate::fixtures::sites_window(
        time - 5.0,
        COMMAND,
        610 << 20,
    )));
    sample.feeds[fed].segments = Some(std::sync::Arc::new(crate::fixtures::segment_map(
        time - 30.0,
    )));
    for p in sample.processes.iter_mut().filter(|p| p.pid == pid) {
        p.command = Some(COMMAND.into());
        p.user = Some("ro|ot\r[x]".into());
    }
    (sample, pid.to_string())
}

/// The cells of each table row, as a Markdown reader parses them: the text of each cell.
fn rows(markdown: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut row: Option<Vec<String>> = None;
    let mut cell: Option<String> = None;
    for event in Parser::new_ext(markdown, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::TableRow | Tag::TableHead) => row = Some(Vec::new()),
            Event::End(TagEnd::TableRow | TagEnd::TableHead) => out.extend(row.take()),
            Event::Start(Tag::TableCell) => cell = Some(String::new()),
            Event::End(TagEnd::TableCell) => {
                if let (Some(r), Some(c)) = (row.as_mut(), cell.take()) {
                    r.push(c);
                }
            }
            Event::Text(t) => {
                if let Some(c) = cell.as_mut() {
                    c.push_str(&t);
                }
            }
            // Anything else inside a cell (code, HTML, a link) would be markup: mark it.
            Event::Code(t) | Event::Html(t) | Event::InlineHtml(t) => {
                if let Some(c) = cell.as_mut() {
                    c.push_str(&format!("<markup:{t}>"));
                }
            }
            _ => {}
        }
    }
    out
}

/// The `|` that separate cells in a line of Markdown: those not escaped by a backslash.
fn separators(line: &str) -> usize {
    let mut count = 0;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '|' => count += 1,
            _ => {}
        }
    }
    count
}

#[test]
fn hostile_strings_are_text_in_the_report_never_markup() {
    let (sample, pid) = hostile();
    let observed = Pipeline::new(None).ingest(sample);
    let report = markdown(&observed, &History::default(), false);

    // No control, bidi or zero-width character reaches the file but the line ends.
    let raw: Vec<char> = report
        .chars()
        .filter(|&c| c != '\n' && crate::text::clean(&c.to_string()) != c.to_string())
        .collect();
    assert!(raw.is_empty(), "raw {raw:?}");

    // Every line of a table has as many cell separators as its header.
    let mut header = None;
    for line in report.lines() {
        if line.starts_with('|') {
            let n = separators(line);
            let expected = *header.get_or_insert(n);
            assert_eq!(
                n, expected,
                "a row with other columns than its header: {line}"
            );
        } else {
            header = None;
        }
    }

    // Read as Markdown, the hostile command is one cell's plain text, whole and defused.
    let cells: Vec<Vec<String>> = rows(&report);
    let command = crate::text::clean(COMMAND).into_owned();
    let row = cells
        .iter()
        .find(|r| r.first() == Some(&pid) && r.len() == 8)
        .unwrap_or_else(|| panic!("no process row for {pid}: {cells:?}"));
    assert_eq!(row[4], command, "the command cell: {row:?}");
    // The sites of its window: the site one cell, whole; the segment map beside them.
    let site = cells
        .iter()
        .find(|r| r.len() == 3 && r[0] == command && r[1].starts_with("610 MiB"))
        .unwrap_or_else(|| panic!("no growth row of the site: {cells:?}"));
    assert_eq!(site[2], "600 (539)");
    assert!(cells.iter().any(|r| r.len() == 7
        && r[0] == "large"
        && r[6] == "12 (24.0 GiB (25,769,803,776 B)) by 63.0 MiB (66,060,288 B) live"));
    assert_eq!(row[1], "ro|ot\u{fffd}[x]");
    assert!(
        row[5].starts_with("torch</td><script> 2.5\u{fffd}|1"),
        "{row:?}"
    );
    let driver = cells
        .iter()
        .find(|r| r.first().map(String::as_str) == Some("NVIDIA driver"))
        .expect("the driver row");
    assert!(
        driver[1].starts_with("550 <img src=x onerror=alert(1)> (NVML "),
        "{driver:?}"
    );

    // Rendered, nothing of theirs became a tag, a link, an image or emphasis.
    let mut html = String::new();
    pulldown_cmark::html::push_html(
        &mut html,
        Parser::new_ext(
            &report,
            Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH,
        ),
    );
    for tag in [
        "<script",
        "<img",
        "<a ",
        "<b>",
        "<em>",
        "<del>",
        "</td><script",
    ] {
        assert!(!html.contains(tag), "{tag} in the rendered report");
    }
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    // The host in the title, defused and whole, and the heading still one line.
    let title = report.lines().next().unwrap_or_default();
    assert!(
        title.starts_with("# strata report: node\\|x\\`id\\`\\<script\\>"),
        "{title}"
    );
    assert!(!report.lines().any(|l| l.starts_with("# pwned")));
}

#[test]
fn unknown_figures_are_na_never_zero() {
    let mut sample = node_at(0, 905.0, 10.0);
    sample.driver_version = None;
    for p in &mut sample.processes {
        p.used = None;
    }
    sample.gpus[0].memory = None;
    let observed = Pipeline::new(None).ingest(sample);
    let report = markdown(&observed, &History::default(), true);
    assert!(report.contains("| NVIDIA driver | n/a (NVML"), "{report}");
    assert!(report.contains("| total memory | NVML `total` (`nvmlDeviceGetMemoryInfo_v2`) | n/a |"));
    assert!(report.contains("| used | NVML `usedGpuMemory` (per process) | n/a |"));
    assert!(report.contains("Layers: n/a at this instant: memory not reported by NVML."));
    // Without history, strata's peaks say so rather than show a number.
    assert!(report.contains("| peak allocated (strata) | max of `allocated_bytes.all.current` seen | n/a | no history held |"));
}

#[test]
fn a_partial_layer_is_marked_as_a_lower_bound() {
    let observed = Pipeline::new(None).ingest(node_at(0, 905.0, 10.0));
    let gpu = observed
        .account
        .gpus
        .iter()
        .position(|g| !g.partial.is_empty())
        .expect("the demo has a partial layer at 905 s");
    let layer = observed.account.gpus[gpu].partial[0];
    let report = markdown(&observed, &History::default(), true);
    let section = report
        .split("\n### ")
        .find(|s| s.starts_with(&format!("GPU {gpu} · ")))
        .expect("its section");
    let row = section
        .lines()
        .find(|l| l.starts_with(&format!("| {} |", layer.name())))
        .expect("its row");
    assert!(row.contains("| ≥ "), "{row}");
}

#[test]
fn file_names_keep_to_safe_characters() {
    let mut sample = node_at(0, 905.0, 10.0);
    assert_eq!(
        file_name(&sample),
        "strata-report-demo-node-20260101-091505.md"
    );
    sample.host = "../../etc/x y\u{1b}".into();
    let name = file_name(&sample);
    assert!(
        !name.contains('/') && !name.contains(' ') && !name.contains('\u{1b}'),
        "{name}"
    );
}

/// The header says what the history holds against its budget, and what the budget made it
/// let go of.
#[test]
fn the_header_tells_the_history_budget_and_what_it_let_go() {
    use crate::history::{Metric, SeriesKey};
    let observed = Pipeline::new(None).ingest(node_at(0, 905.0, 10.0));
    let mut history = History::with_budget(64 << 10);
    for t in 0..200u32 {
        history.begin(f64::from(t), 1.0);
        for pid in 0..4 {
            let key = SeriesKey::process(4 * t + pid, Some(1), "GPU-0", Metric::Used);
            history.record(key, f64::from(t), Some(1 << 20));
        }
    }
    let report = markdown(&observed, &history, true);
    let row = report
        .lines()
        .find(|l| l.starts_with("| history |"))
        .expect("a history row");
    assert!(row.contains("held of a 64.0 KiB budget"), "{row}");
    assert!(
        row.contains("series of exited processes let go early"),
        "{row}"
    );
}

/// A grouped finding names each of its devices in the report's evidence.
#[test]
fn a_grouped_finding_lists_its_devices() {
    use crate::fixtures::{gpu, node, GIB, MIB};
    use crate::sample::DeviceMemory;
    let mut s = node();
    for g in 0..8 {
        s.gpus.push(gpu(
            g,
            DeviceMemory {
                total: 80 * GIB,
                used: 512 * MIB,
                free: 79 * GIB,
                driver_reserved: Some(512 * MIB),
            },
        ));
    }
    let mut pipeline = Pipeline::new(None);
    let observed = pipeline.ingest(s);
    let report = markdown(&observed, &pipeline.history, false);
    assert_eq!(report.matches("`unexplained_usage`").count(), 1, "{report}");
    assert!(report.contains("- devices: 8 of them"), "{report}");
    for g in 0..8 {
        assert!(
            report.contains(&format!(
                "  - bytes 512 MiB (536,870,912 B) · device GPU {g} · other 1.00 GiB (1,073,741,824 B) · uuid GPU-test-{g}\n"
            )),
            "GPU {g}: {report}"
        );
    }
}

/// A GPU instance with two compute instances is one section, named as the monitor names it,
/// with both compute instances' UUIDs.
#[test]
fn a_gpu_instance_with_two_compute_instances_is_one_section() {
    let sample = crate::snapshot::tests::two_compute_instances();
    let mut pipeline = Pipeline::new(None);
    let observed = pipeline.ingest(sample);
    let report = markdown(&observed, &pipeline.history, false);
    let sections: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("### GPU 0 · MIG"))
        .collect();
    assert_eq!(
        sections,
        [
            "### GPU 0 · MIG 1g.20gb GI2/CI0+1 (compute instances 0 and 1 share GPU instance 2's memory)",
            "### GPU 0 · MIG 1g.20gb GI3/CI0"
        ],
        "{report}"
    );
    assert!(
        report.contains("UUID MIG-a-0 (CI 0), MIG-a-1 (CI 1)\n"),
        "{report}"
    );
    assert!(report.contains("UUID MIG-b-0\n"), "{report}");
}

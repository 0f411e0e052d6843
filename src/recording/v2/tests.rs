use super::*;
use crate::recording::{Line, Lines, Progress};
use crate::sample::ProcessSample;
use crate::source::demo::node_at;

/// The demo's samples, `n` of them `step` story seconds apart from `from`.
fn demo(from: f64, n: usize, step: f64) -> Vec<NodeSample> {
    (0..n)
        .map(|k| node_at(0, from + k as f64 * step, step))
        .collect()
}

fn encode_all(samples: &[NodeSample]) -> Vec<u8> {
    let mut encoder = Encoder::new();
    let mut out = Vec::new();
    for s in samples {
        let key = encoder.wants_keyframe(s);
        encoder.encode(s, key, &mut out);
    }
    out
}

/// Every line of a recording's bytes.
fn read_all(bytes: Vec<u8>) -> Vec<Line> {
    let mut lines =
        Lines::new(Box::new(std::io::Cursor::new(bytes)), Progress::default()).expect("lines");
    let mut out = Vec::new();
    while let Some((_, line)) = lines.next_line().expect("reads") {
        out.push(line);
    }
    out
}

fn samples(lines: Vec<Line>) -> Vec<NodeSample> {
    lines
        .into_iter()
        .map(|l| match l {
            Line::Sample(s) => *s,
            other => panic!("not a sample: {other:?}"),
        })
        .collect()
}

#[test]
fn the_demo_reads_back_as_it_was_written() {
    let written = demo(0.0, 130, 10.0);
    let back = samples(read_all(encode_all(&written)));
    assert_eq!(back.len(), written.len());
    for (a, b) in written.iter().zip(&back) {
        assert_eq!(a, b, "at {}", a.time);
    }
}

/// Format 1 (JSON lines) and format 2 of the same samples read back alike, sample for
/// sample, every field: floats to their bits (the JSON reader included).
fn same_as_format_1(written: &[NodeSample]) {
    let text: String = written
        .iter()
        .map(|s| serde_json::to_string(s).expect("json") + "\n")
        .collect();
    let one = samples(read_all(text.into_bytes()));
    let two = samples(read_all(encode_all(&one)));
    assert_eq!(one.len(), written.len());
    assert_eq!(two.len(), one.len());
    for ((w, a), b) in written.iter().zip(&one).zip(&two) {
        assert_eq!(a, b, "format 2 at {}", a.time);
        assert_eq!(w, a, "format 1 at {}", w.time);
        assert_eq!(a.time.to_bits(), b.time.to_bits());
    }
}

#[test]
fn format_2_reads_back_what_format_1_does_for_the_demo_story() {
    // The 20-minute story at 10 s, its OOMs, restarts and stale feed included.
    same_as_format_1(&demo(0.0, 121, 10.0));
}

/// The samples as a format-2 file as the recorder writes it: a zstd frame per keyframe.
fn frames_file(samples: &[NodeSample], name: &str) -> std::path::PathBuf {
    let mut encoder = Encoder::new();
    let mut file = Vec::new();
    let mut frame = Vec::new();
    for s in samples {
        let key = encoder.wants_keyframe(s);
        if key && !frame.is_empty() {
            file.extend(zstd::encode_all(&frame[..], 3).expect("zstd"));
            frame.clear();
        }
        encoder.encode(s, key, &mut frame);
    }
    file.extend(zstd::encode_all(&frame[..], 3).expect("zstd"));
    let path = std::env::temp_dir().join(format!("strata-v2-{name}-{}.zst", std::process::id()));
    std::fs::write(&path, file).expect("writes");
    path
}

/// Each line of a file, with where a reader could start at it.
fn lines_with_keyframes(lines: &mut Lines) -> Vec<(u64, Option<u64>, NodeSample)> {
    let mut out = Vec::new();
    while let Some((n, line)) = lines.next_line().expect("reads") {
        let Line::Sample(s) = line else {
            panic!("not a sample: {line:?}")
        };
        out.push((n, lines.keyframe_at(), *s));
    }
    out
}

/// A seek reads from the keyframe before its target: started at any keyframe's frame, a
/// reader gives the same lines, numbered alike, as one that read everything before it.
#[test]
fn a_reader_started_at_a_keyframes_frame_reads_on_as_one_from_the_start() {
    // 50 minutes at 10 s: a keyframe every 5 minutes.
    let path = frames_file(&demo(0.0, 300, 10.0), "keyframes");
    let whole = lines_with_keyframes(&mut Lines::open(&path).expect("opens"));
    let keyframes: Vec<(u64, u64)> = whole
        .iter()
        .filter_map(|(n, k, _)| k.map(|k| (*n, k)))
        .collect();
    assert_eq!(keyframes.len(), 10, "{keyframes:?}");
    assert_eq!(keyframes[0], (1, 0));
    for &(n, offset) in &keyframes {
        let from = lines_with_keyframes(&mut Lines::open_at(&path, offset, n - 1).expect("opens"));
        assert_eq!(from.len(), whole.len() - (n as usize - 1), "from line {n}");
        for (a, b) in from.iter().zip(&whole[n as usize - 1..]) {
            assert_eq!((a.0, a.1), (b.0, b.1));
            assert_eq!(a.2, b.2, "line {}", a.0);
        }
    }
    // Anywhere else is no frame's start: refused, not read as something else.
    for offset in [1, keyframes[3].1 - 1, keyframes[3].1 + 7] {
        assert!(Lines::open_at(&path, offset, 0).is_err(), "at {offset}");
    }
    let _ = std::fs::remove_file(&path);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    /// A demo sample with its moving numbers and some of its rare parts changed as `noise`
    /// says: times off the grid (17 significant digits), figures up and down, processes and
    /// feeds reordered, dropped or unknown.
    fn varied(base: NodeSample, noise: &[u64], k: usize) -> NodeSample {
        let mut s = base;
        let n = |i: usize| noise[(k * 7 + i) % noise.len()];
        s.time += (n(0) % 1_000_000) as f64 * 1e-7 + 1.0 / 3.0;
        s.poll_secs = Some((n(1) % 5000) as f64 * 1e-6);
        s.host_cpu_percent = (n(2) % 3 != 0).then(|| (n(2) % 1000) as f64 / 10.0);
        for (i, p) in s.processes.iter_mut().enumerate() {
            p.used = p.used.map(|u| u.wrapping_add(n(i) % (64 << 20)));
            p.cpu_percent = (n(i + 3) % 4 != 0).then(|| (n(i + 3) % 4000) as f64 / 10.0);
            if n(i + 5) % 11 == 0 {
                p.command = Some(format!("python train.py --step {}", n(i + 5) % 97));
            }
        }
        if n(9) % 5 == 0 {
            s.processes.reverse();
        }
        if n(10) % 7 == 0 {
            s.processes.pop();
        }
        for (i, f) in s.feeds.iter_mut().enumerate() {
            f.last_heard = f.last_heard.map(|t| t + (n(i + 11) % 1000) as f64 * 1e-6);
            for d in &mut f.devices {
                d.latest.allocated = d.latest.allocated.wrapping_add(n(i + 13) % (1 << 30));
                d.latest.time += (n(i + 17) % 1000) as f64 * 1.37e-4;
                d.latest.requested = d.latest.requested.map(|r| r.wrapping_sub(n(i) % 4096));
                if n(i + 19) % 9 == 0 {
                    d.earlier.push(d.latest.clone());
                }
            }
        }
        if n(20) % 6 == 0 {
            s.feeds.rotate_left(1);
        }
        // The vitals: moving, unknown, a known 0, and the limits now and then unknown.
        for (i, g) in s.gpus.iter_mut().enumerate() {
            let v = |j: usize, of: Option<u32>, span: u64| match n(i + 21 + j) % 8 {
                0 => None,
                1 => Some(0),
                2 => of,
                _ => of.map(|x| x.wrapping_add((n(i + 29 + j) % span) as u32)),
            };
            g.info.temperature = v(0, g.temperature, 5);
            g.info.power_mw = v(1, g.power_mw, 90_000);
            g.info.sm_clock_mhz = v(2, g.sm_clock_mhz, 120);
            if n(i + 33) % 10 == 0 {
                g.info.power_limit_mw = None;
                g.info.sm_clock_max_mhz = None;
            }
        }
        s
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn generated_runs_read_back_alike_in_both_formats(
            noise in proptest::collection::vec(any::<u64>(), 40..80),
            start in 0u32..1100,
            len in 2usize..40,
        ) {
            let written: Vec<NodeSample> = (0..len)
                .map(|k| varied(node_at(7, f64::from(start) + 10.0 * k as f64, 10.0), &noise, k))
                .collect();
            same_as_format_1(&written);
        }
    }
}

/// A file cut in the middle of a record reads up to the cut, and says it was cut.
#[test]
fn a_file_cut_inside_a_record_reads_to_the_cut() {
    let written = demo(300.0, 20, 10.0);
    let bytes = encode_all(&written);
    for cut in [bytes.len() - 1, bytes.len() - 300, bytes.len() / 2, 30] {
        let lines = read_all(bytes[..cut].to_vec());
        let (read, rest): (Vec<_>, Vec<_>) = lines
            .into_iter()
            .partition(|l| matches!(l, Line::Sample(_)));
        let read = samples(read);
        assert!(read.len() < written.len(), "cut at {cut}");
        assert_eq!(read, written[..read.len()], "cut at {cut}");
        assert!(
            matches!(rest[..], [Line::Truncated]),
            "cut at {cut}: {rest:?}"
        );
    }
}

/// A keyframe lost (its record damaged): what refers to it is counted and skipped to the
/// next keyframe, where reading goes on; nothing of the lost stretch is made up.
#[test]
fn deltas_whose_keyframe_was_lost_are_skipped_to_the_next_keyframe() {
    // 10 s apart: keyframes at 0 s, 300 s, 600 s.
    let written = demo(0.0, 70, 10.0);
    let mut bytes = encode_all(&written);
    // The first keyframe's payload, damaged: its CRC no longer matches.
    bytes[MAGIC.len() + 40] ^= 0x5A;
    let lines = read_all(bytes);
    let kinds: Vec<String> = lines
        .iter()
        .map(|l| format!("{l:?}").chars().take(30).collect())
        .collect();
    assert!(matches!(lines[0], Line::Bad(_)), "{kinds:?}");
    let unanchored = lines
        .iter()
        .filter(|l| matches!(l, Line::Unanchored))
        .count();
    assert_eq!(
        unanchored, 29,
        "the deltas before the keyframe at 300 s: {kinds:?}"
    );
    let back = samples(
        lines
            .into_iter()
            .filter(|l| matches!(l, Line::Sample(_)))
            .collect(),
    );
    assert_eq!(
        back,
        written[30..],
        "from the next keyframe on, every sample"
    );
}

/// Samples decoded into samples given back (used, out of order, and of other shapes) read
/// back as they were written.
#[test]
fn samples_decoded_into_recycled_ones_are_the_samples_written() {
    let written = demo(0.0, 130, 10.0);
    let mut lines = Lines::new(
        Box::new(std::io::Cursor::new(encode_all(&written))),
        Progress::default(),
    )
    .expect("lines");
    let mut back = Vec::new();
    let mut used: std::collections::VecDeque<Box<NodeSample>> = Default::default();
    let mut recycled = 0;
    while let Some((_, line)) = lines.next_line().expect("reads") {
        let Line::Sample(mut s) = line else {
            panic!("not a sample: {line:?}")
        };
        back.push((*s).clone());
        // Used as the analysis uses it (feeds attached to its processes), and changed
        // beyond that: more of everything, other words.
        crate::pipeline::prepare(&mut s);
        s.host = "elsewhere".into();
        if let Some(p) = s.processes.first().cloned() {
            s.processes.push(ProcessSample {
                command: Some("another".into()),
                ..p
            });
        }
        if let Some(f) = s.feeds.first_mut() {
            f.socket.push_str("-moved");
            if let Some(d) = f.devices.first_mut() {
                d.latest
                    .unreported
                    .insert("allocated".into(), "another reason".into());
                d.earlier.push(d.latest.clone());
            }
            f.state = crate::sample::feed::FeedState::Dropped {
                reason: "another state".into(),
            };
        }
        if let Some(f) = s.feeds.first().cloned() {
            s.feeds.push(f);
        }
        used.push_back(s);
        // Given back a few samples late, not in order.
        if used.len() > 3 {
            if let Some(s) = used.remove(back.len() % 3) {
                lines.recycle(s);
                recycled += 1;
            }
        }
    }
    assert!(recycled > 100, "{recycled}");
    assert!(written.iter().any(|s| !s.feeds.is_empty()));
    assert_eq!(back.len(), written.len());
    for (a, b) in written.iter().zip(&back) {
        assert_eq!(a, b, "at {}", a.time);
    }
}

/// Every sample of a checked-in recording (`tests/recordings/`), and nothing else.
fn checked_in(name: &str) -> Vec<NodeSample> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/recordings")
        .join(name);
    let mut lines = Lines::open(&path).expect("opens");
    let mut out = Vec::new();
    while let Some((_, line)) = lines.next_line().expect("reads") {
        out.push(line);
    }
    samples(out)
}

/// A recording of format 2 written before the GPUs' moving vitals had columns of their own
/// (each GPU's temperature, power draw and SM clock in its rest) reads back as the same
/// samples as the format-1 recording written of them by the same build.
#[test]
fn a_recording_written_before_the_vitals_columns_reads_back_as_written() {
    let two = checked_in("format-2.0.zst");
    let one = checked_in("format-2.0.jsonl.zst");
    assert_eq!(two.len(), 40);
    assert_eq!(one.len(), two.len());
    for (a, b) in one.iter().zip(&two) {
        assert_eq!(a, b, "at {}", a.time);
    }
    // What the file was written to hold: vitals moving, unknown, and a known 0.
    let vitals = |s: &NodeSample, g: usize| {
        let i = &s.gpus[g].info;
        (i.temperature, i.power_mw, i.sm_clock_mhz)
    };
    assert!(two
        .windows(2)
        .any(|w| vitals(&w[0], 0).1 != vitals(&w[1], 0).1));
    assert!(two.iter().any(|s| vitals(s, 1).1.is_none()));
    assert!(two.iter().any(|s| vitals(s, 2).0.is_none()));
    assert!(two.iter().any(|s| vitals(s, 0).2 == Some(0)));
    assert!(two.iter().all(|s| s.gpus[0].info.power_limit_mw.is_some()));
}

/// A node of one GPU with every vital known.
fn gpu_node() -> NodeSample {
    use crate::fixtures::{gpu, memory, node, GIB};
    let mut s = node();
    // 2026-01-01: a time a reader takes for a clock's.
    s.time = 1_767_225_600.0;
    let mut g = gpu(0, memory(80 * GIB, 10 * GIB));
    g.info.temperature = Some(40);
    g.info.power_mw = Some(300_000);
    g.info.power_limit_mw = Some(700_000);
    g.info.sm_clock_mhz = Some(1980);
    g.info.sm_clock_max_mhz = Some(1980);
    s.gpus.push(g);
    s
}

/// A record payload's parts: its column table, control, packed columns and blobs.
fn parts(payload: &[u8]) -> [Vec<u8>; 4] {
    let mut r = wire::Reader::new(payload);
    let chunks: Vec<Vec<u8>> = (0..3)
        .map(|_| r.chunk().expect("a chunk").to_vec())
        .collect();
    let mut head = Vec::new();
    for chunk in &chunks {
        wire::put_varint(&mut head, chunk.len() as u64);
        head.extend_from_slice(chunk);
    }
    let [table, control, packed] = <[Vec<u8>; 3]>::try_from(chunks).expect("three");
    [table, control, packed, payload[head.len()..].to_vec()]
}

/// A GPU's temperature, power draw and SM clock move nearly every sample: each has a column,
/// so a sample in which only they moved (or became unknown, or a known 0) writes no rest of
/// the GPU's, and every value reads back.
#[test]
fn vitals_that_move_are_columns_not_a_rest_written_again() {
    let first = gpu_node();
    let mut written = vec![first.clone()];
    let vitals = [
        (Some(41), Some(312_345), Some(1965)),
        (None, None, None),
        (Some(0), Some(0), Some(0)),
        (Some(39), Some(98_765), Some(345)),
    ];
    for (k, (t, p, c)) in vitals.into_iter().enumerate() {
        let mut s = first.clone();
        s.time += 1.0 + k as f64;
        s.gpus[0].info.temperature = t;
        s.gpus[0].info.power_mw = p;
        s.gpus[0].info.sm_clock_mhz = c;
        written.push(s);
    }
    let mut state = state::State::default();
    for (k, s) in written.iter().enumerate() {
        let [_, _, _, blobs] = parts(&encode::encode(&mut state, s));
        if k == 0 {
            assert!(!blobs.is_empty(), "a keyframe writes the rests");
        } else {
            assert!(
                blobs.is_empty(),
                "sample {k}: a rest written ({} B)",
                blobs.len()
            );
        }
    }
    assert_eq!(samples(read_all(encode_all(&written))), written);
}

/// A GPU laid out as no layout this build knows (a newer one) is refused, said as such,
/// never read as a layout it knows.
#[test]
fn a_gpu_of_a_layout_this_build_does_not_know_is_refused_with_a_hint() {
    let payload = encode::encode(&mut state::State::default(), &gpu_node());
    let [table, mut control, packed, blobs] = parts(&payload);
    // The node's rest flag, the codes of time, poll and host CPU, the host memory's flag,
    // the count of GPUs: then the GPU's layout, 2.1 with its rest.
    assert_eq!(control[4..6], [0, 1], "{control:?}");
    assert_eq!(control[6], 3, "{control:?}");
    control[6] = 4;
    let mut patched = Vec::new();
    for part in [&table, &control, &packed] {
        wire::put_varint(&mut patched, part.len() as u64);
        patched.extend_from_slice(part);
    }
    patched.extend_from_slice(&blobs);
    match Decoder::new().decode(KEYFRAME, &patched) {
        Decoded::Bad(why) => {
            assert!(why.contains("a GPU laid out as 4"), "{why}");
            assert!(why.contains("hint: read it with"), "{why}");
        }
        other => panic!("read: {other:?}"),
    }
    control[6] = 1;
    let mut patched = Vec::new();
    for part in [&table, &control, &packed] {
        wire::put_varint(&mut patched, part.len() as u64);
        patched.extend_from_slice(part);
    }
    patched.extend_from_slice(&blobs);
    assert!(
        matches!(Decoder::new().decode(KEYFRAME, &patched), Decoded::Bad(_)),
        "a 2.1 GPU said as 2.0 leaves its vitals' codes unread"
    );
}

/// The bytes of `samples` as the recorder writes them (zstd at its level, a frame per
/// keyframe).
fn recorded_bytes(samples: &[NodeSample], name: &str) -> u64 {
    let dir = crate::fixtures::TempDir::new(name);
    let path = dir.path().join("r.zst");
    let mut writer = crate::recording::RecordWriter::create(&path, None).expect("creates");
    for s in samples {
        writer.write(s).expect("writes");
    }
    writer.finish().expect("finishes");
    std::fs::metadata(&path).expect("written").len()
}

/// The demo's GPUs' vitals (temperature, power draw, SM clock, each moving at nearly every
/// sample, and the limits) cost under a fifth of its recording: 20 minutes at 1 s, the
/// story once through. Written in each GPU's rest they cost 39 %.
#[test]
fn the_demos_vitals_cost_under_a_fifth_of_its_recording() {
    let with = demo(0.0, 1200, 1.0);
    let mut without = with.clone();
    for g in without.iter_mut().flat_map(|s| &mut s.gpus) {
        g.info.temperature = None;
        g.info.power_mw = None;
        g.info.power_limit_mw = None;
        g.info.sm_clock_mhz = None;
        g.info.sm_clock_max_mhz = None;
    }
    let (with, without) = (
        recorded_bytes(&with, "vitals-with"),
        recorded_bytes(&without, "vitals-without"),
    );
    assert!(
        with * 5 < without * 6,
        "{with} B with the vitals, {without} B without: +{:.1} %",
        100.0 * (with as f64 / without as f64 - 1.0)
    );
}

/// A feed's segment map and sites window, new ones arriving now and then, read back from
/// both formats as they were written (format 2 keeps them in the feed's rest).
#[test]
fn segment_maps_and_sites_windows_read_back_from_both_formats() {
    let mut written = demo(0.0, 40, 10.0);
    for (k, s) in written.iter_mut().enumerate() {
        let Some(feed) = s.feeds.first_mut() else {
            continue;
        };
        if k >= 5 {
            let at = s.time - (k % 6) as f64 * 10.0;
            feed.segments = Some(std::sync::Arc::new(crate::fixtures::segment_map(at)));
        }
        if k >= 20 {
            let end = s.time - (k % 10) as f64 * 10.0;
            feed.sites = Some(std::sync::Arc::new(crate::fixtures::sites_window(
                end,
                "train.py:118 in evaluate",
                610 << 20,
            )));
        }
    }
    assert!(written
        .iter()
        .any(|s| s.feeds.iter().any(|f| f.sites.is_some())));
    same_as_format_1(&written);
}

use super::*;
use crate::recording::{Line, Lines, Progress};
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

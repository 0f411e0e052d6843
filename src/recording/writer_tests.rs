use super::*;
use crate::source::demo::node_at;
use std::io::BufRead;

fn dir(name: &str) -> crate::fixtures::TempDir {
    crate::fixtures::TempDir::new(&format!("writer-{name}"))
}

/// The samples a recording reads back as, through the reader `analyze` uses, and whether
/// it was cut.
fn read_back(path: &Path) -> (Vec<NodeSample>, bool) {
    let mut lines = crate::recording::Lines::open(path).expect("open");
    let mut samples = Vec::new();
    let mut cut = false;
    while let Some((_, line)) = lines.next_line().expect("reads") {
        match line {
            crate::recording::Line::Sample(s) => samples.push(*s),
            crate::recording::Line::Truncated => cut = true,
            other => panic!("{other:?}"),
        }
    }
    (samples, cut || lines.cut())
}

fn demo(n: u64) -> Vec<NodeSample> {
    (0..n).map(|k| node_at(0, 300.0 + k as f64, 1.0)).collect()
}

#[test]
fn names_choose_the_encoding() {
    assert_eq!(Encoding::for_path(Path::new("a.jsonl")), Encoding::Plain);
    assert_eq!(Encoding::for_path(Path::new("a.JSONL")), Encoding::Plain);
    assert_eq!(
        Encoding::for_path(Path::new("a.jsonl.gz")),
        Encoding::Gzip(GZIP_LEVEL)
    );
    for name in ["a.jsonl.zst", "A.NDJSON.ZST"] {
        assert_eq!(
            Encoding::for_path(Path::new(name)),
            Encoding::Zstd(ZSTD_LEVEL),
            "{name}"
        );
    }
    for name in ["a.zst", "recording", "a.bin", "night.strata"] {
        assert_eq!(
            Encoding::for_path(Path::new(name)),
            Encoding::Records(RECORDS_LEVEL),
            "{name}"
        );
    }
}

/// Each encoding reads back every sample as it was, with its schema; the compressed ones are
/// told by their first bytes.
#[test]
fn every_encoding_reads_back_every_sample() {
    let dir = dir("roundtrip");
    let samples = demo(5);
    for (name, kind) in [
        ("r.jsonl", Compression::Plain),
        ("r.jsonl.zst", Compression::Zstd),
        ("r.jsonl.gz", Compression::Gzip),
        ("r.zst", Compression::Zstd),
    ] {
        let path = dir.join(name);
        let mut writer = RecordWriter::create(&path, None).expect("create");
        for s in &samples {
            writer.write(s).expect("write");
        }
        let summary = writer.finish().expect("finish");
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(summary.samples, 5);
        assert_eq!(summary.bytes, bytes.len() as u64, "{name}");
        assert_eq!(Compression::sniff(&bytes), kind, "{name}");
        assert_eq!(read_back(&path), (samples.clone(), false), "{name}");
        let (mut read, _) = crate::recording::open(&path).expect("open");
        let mut first = String::new();
        read.read_line(&mut first).expect("line");
        if name == "r.zst" {
            assert!(first.starts_with("strata.recording/2\n"), "{first}");
            continue;
        }
        assert!(
            first.starts_with("{\"schema\":\"strata.snapshot/1\","),
            "{first}"
        );
        assert!(!first.contains("\"layers\""), "raw fields only: {name}");
    }
}

/// Flushed per sample: before the frame is finished, every sample written is in the file and
/// reads back (the frame reads as cut, which is what a SIGKILL leaves).
#[test]
fn each_sample_is_on_disk_before_the_next() {
    let dir = dir("flushed");
    for name in ["f.jsonl", "f.jsonl.zst", "f.gz", "f.zst"] {
        let path = dir.join(name);
        let mut writer = RecordWriter::create(&path, None).expect("create");
        for (k, s) in demo(3).iter().enumerate() {
            writer.write(s).expect("write");
            let (back, _) = read_back(&path);
            assert_eq!(back.len(), k + 1, "{name}");
        }
        std::mem::forget(writer);
    }
}

#[test]
fn appending_adds_a_frame_that_reads_with_the_first() {
    let dir = dir("append");
    for name in ["a.jsonl", "a.jsonl.zst", "a.gz", "a.zst"] {
        let path = dir.join(name);
        let samples = demo(4);
        for half in samples.chunks(2) {
            let mut writer = RecordWriter::create(&path, None).expect("create");
            for s in half {
                writer.write(s).expect("write");
            }
            writer.finish().expect("finish");
        }
        assert_eq!(read_back(&path), (samples, false), "{name}");
    }
}

#[test]
fn appending_refuses_to_mix_encodings_or_follow_a_cut_frame() {
    let dir = dir("refuse");
    let plain = dir.join("p.jsonl");
    std::fs::write(&plain, "{}\n").expect("write");
    let err = RecordWriter::with_encoding(&plain, Encoding::Zstd(3), None)
        .err()
        .expect("refused");
    assert!(
        err.to_string().contains("appending would mix them"),
        "{err}"
    );

    // JSON lines in zstd and format 2 are both zstd: told apart by their text.
    let lines = dir.join("l.jsonl.zst");
    let mut writer = RecordWriter::create(&lines, None).expect("create");
    writer.write(&demo(1)[0]).expect("write");
    writer.finish().expect("finish");
    let err = RecordWriter::with_encoding(&lines, Encoding::Records(3), None)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("would mix them"), "{err}");
    let records = dir.join("r.zst");
    let mut writer = RecordWriter::create(&records, None).expect("create");
    writer.write(&demo(1)[0]).expect("write");
    writer.finish().expect("finish");
    let err = RecordWriter::with_encoding(&records, Encoding::Zstd(3), None)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("would mix them"), "{err}");

    // A killed recorder's file: its frame unfinished (a copy, as the kernel leaves it; the
    // writer forgotten here still holds its own file's lock, as a killed one would not).
    let killed = dir.join("k.zst");
    let mut writer = RecordWriter::create(&killed, None).expect("create");
    writer.write(&demo(1)[0]).expect("write");
    std::mem::forget(writer);
    let cut = dir.join("c.zst");
    std::fs::copy(&killed, &cut).expect("copy");
    let err = RecordWriter::create(&cut, None).err().expect("refused");
    assert!(err.to_string().contains("cut short"), "{err}");

    // A plain recording cut inside a line: the next sample starts a line of its own.
    let torn = dir.join("t.jsonl");
    std::fs::write(&torn, "{\"time\":").expect("write");
    let mut writer = RecordWriter::create(&torn, None).expect("create");
    writer.write(&demo(1)[0]).expect("write");
    writer.finish().expect("finish");
    let text = std::fs::read_to_string(&torn).expect("read");
    assert!(text.starts_with("{\"time\":\n{\"schema\""), "{text}");
}

#[test]
fn bad_paths_are_refused_with_their_cause() {
    let dir = dir("paths");
    let cases = [
        (dir.join("missing/r.zst"), "its directory does not exist"),
        (dir.to_path_buf(), "it is a directory"),
    ];
    for (path, cause) in cases {
        let err = RecordWriter::create(&path, None).err().expect("refused");
        assert!(err.to_string().contains(cause), "{err}");
        assert!(err.hint().contains("directory"), "{}", err.hint());
    }
}

/// With a cap, files rotate before a sample would pass it: each stays within the cap, each
/// is a finished recording, only `keep` rotated files stay, and the newest samples are in
/// `FILE`, the ones before in `FILE.1`, and so on.
#[test]
fn rotation_keeps_bounded_finished_files() {
    let dir = dir("rotate");
    for name in ["r.jsonl.zst", "r.jsonl", "r.gz", "r.zst"] {
        let path = dir.join(name);
        let samples = demo(40);
        // The whole recording uncapped, and its first sample (the largest: a new frame has
        // no history to refer to).
        let size = |count: usize| {
            let probe = dir.join(format!("probe-{count}-{name}"));
            let mut w = RecordWriter::create(&probe, None).expect("create");
            for s in &samples[..count] {
                w.write(s).expect("write");
            }
            w.finish().expect("finish").bytes
        };
        let (whole, one) = (size(samples.len()), size(1));
        let rotation = Rotation {
            max_bytes: whole / 6,
            keep: 3,
        };
        let mut writer = RecordWriter::create(&path, Some(rotation)).expect("create");
        for s in &samples {
            writer.write(s).expect("write");
        }
        let summary = writer.finish().expect("finish");
        assert!(summary.rotations >= 4, "{name}: {summary:?}");
        assert!(!rotated_path(&path, 4).exists(), "{name}: keeps 3");
        let mut back = Vec::new();
        for file in [
            rotated_path(&path, 3),
            rotated_path(&path, 2),
            rotated_path(&path, 1),
            path.clone(),
        ] {
            let len = std::fs::metadata(&file).expect("exists").len();
            // Rotated before a sample that would pass the cap, as the one before it was: a
            // frame's first sample is the one that can pass it.
            assert!(len <= rotation.max_bytes + one, "{}: {len}", file.display());
            let (samples, cut) = read_back(&file);
            assert!(!cut, "{}", file.display());
            assert!(!samples.is_empty());
            back.extend(samples);
        }
        assert_eq!(back, samples[samples.len() - back.len()..], "{name}");
    }
}

/// What a failed write leaves: the file cut back to its last whole sample and the frame
/// ended by hand. The hand-made ending is checked against real decoders: every sample reads
/// back and nothing reads as cut.
#[test]
fn a_frame_ended_by_hand_reads_as_finished() {
    let dir = dir("frame-end");
    for name in ["e.jsonl.zst", "e.gz", "e.zst"] {
        let path = dir.join(name);
        let samples = demo(3);
        let mut writer = RecordWriter::create(&path, None).expect("create");
        for s in &samples {
            writer.write(s).expect("write");
        }
        let end = frame_end(writer.encoding, &writer.frame_crc);
        std::mem::forget(writer);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes.extend(end);
        std::fs::write(&path, &bytes).expect("write");
        assert_eq!(read_back(&path), (samples, false), "{name}");
    }
}

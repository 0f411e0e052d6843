//! Format-2 recordings damaged where a reader finds its way: each frame's magic, and each
//! record's tag, length and CRC-32 (RECORDING.md, "Layers"). The damage is made in the
//! decompressed text and each frame compressed again, as a bit flipped in memory or on disk
//! before compression would leave it. Whatever the damage, reading ends, reads every frame
//! the damage is not in, and says what it lost: a sample missing is never silent.

use crate::common::Scratch;
use crate::support::{analyze_bytes, format_2, story};

const MAGIC: &[u8] = b"strata.recording/2\n";

/// A record's place in the text: where its tag is, and its header's length (tag and length
/// varint) and its payload's.
#[derive(Debug, Clone, Copy)]
struct Record {
    at: usize,
    header: usize,
    payload: usize,
}

/// The text cut at its frames: each frame's text, and its records in order.
struct Text {
    frames: Vec<Vec<u8>>,
    records: Vec<Vec<Record>>,
}

fn varint(bytes: &[u8]) -> (u64, usize) {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().enumerate() {
        v |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    panic!("a length that does not end");
}

impl Text {
    fn of(file: &[u8]) -> Text {
        let text = zstd::decode_all(file).expect("zstd");
        let mut starts: Vec<usize> = text
            .windows(MAGIC.len())
            .enumerate()
            .filter(|(_, w)| *w == MAGIC)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(starts.first(), Some(&0), "the text begins with the magic");
        starts.push(text.len());
        let frames: Vec<Vec<u8>> = starts
            .windows(2)
            .map(|w| text[w[0]..w[1]].to_vec())
            .collect();
        let records = frames
            .iter()
            .map(|frame| {
                let mut at = MAGIC.len();
                let mut records = Vec::new();
                while at < frame.len() {
                    let (len, used) = varint(&frame[at + 1..]);
                    let record = Record {
                        at,
                        header: 1 + used,
                        payload: len as usize,
                    };
                    records.push(record);
                    at += record.header + record.payload + 4;
                }
                assert_eq!(at, frame.len(), "the records fill the frame");
                records
            })
            .collect();
        Text { frames, records }
    }

    /// Each frame compressed again, as the writer makes them: one zstd frame each.
    fn file(&self) -> Vec<u8> {
        self.frames
            .iter()
            .flat_map(|f| zstd::encode_all(&f[..], 3).expect("zstd"))
            .collect()
    }

    fn samples(&self) -> u64 {
        self.records.iter().map(|r| r.len() as u64).sum()
    }

    /// The bytes of frame `f` that tell a reader where things are: its magic, and its first
    /// record's tag, length and CRC.
    fn header_bytes(&self, f: usize) -> Vec<usize> {
        let first = self.records[f][0];
        let mut at: Vec<usize> = (0..MAGIC.len()).collect();
        at.extend(first.at..first.at + first.header);
        let crc = first.at + first.header + first.payload;
        at.extend(crc..crc + 4);
        at
    }
}

/// The demo's story, 20 minutes at 75 s: four frames of a keyframe and three sample records.
fn small(scratch: &Scratch) -> Text {
    let text = Text::of(&format_2(&scratch.dir, &story(16, 75)));
    assert_eq!(text.frames.len(), 4, "a keyframe every 300 s");
    assert_eq!(text.samples(), 16);
    text
}

/// The reported case: the continuation bit set on the last byte of the first keyframe's
/// length (a few KiB becomes over a MiB). Before, nothing was read ("no sample"), exit 0, and
/// the frames after it were never reached; now that frame alone is lost, and said.
#[test]
fn a_length_that_runs_past_its_frame_costs_that_frame_and_is_said() {
    let scratch = Scratch::new("adv-length");
    let text = small(&scratch);
    for (frame, past) in [
        (0, "past the next keyframe"),
        (3, "past the end of the recording"),
    ] {
        let mut damaged = Text {
            frames: text.frames.clone(),
            records: text.records.clone(),
        };
        let first = text.records[frame][0];
        let last_length_byte = first.at + first.header - 1;
        damaged.frames[frame][last_length_byte] |= 0x80;
        let analysis = analyze_bytes(damaged.file()).expect("ends");
        let lost = text.records[frame].len() as u64;
        assert_eq!(analysis.samples, text.samples() - lost, "frame {frame}");
        assert!(analysis.lost_some(), "frame {frame}: the loss is said");
        let said = &analysis.bad_lines[0].error;
        assert!(
            said.contains(past) && said.contains("its length is damaged"),
            "frame {frame}: {said}"
        );
    }
}

/// Every bit of every frame's header flipped, one at a time: reading ends, loses at most
/// the frame the flip is in, and says so whenever a sample is missing.
#[test]
fn any_flipped_bit_of_a_frame_header_loses_that_frame_at_most_and_says_so() {
    let scratch = Scratch::new("adv-flips");
    let text = small(&scratch);
    let total = text.samples();
    let mut flips = 0;
    for frame in 0..text.frames.len() {
        let in_frame = text.records[frame].len() as u64;
        for at in text.header_bytes(frame) {
            for bit in 0..8 {
                let mut damaged = Text {
                    frames: text.frames.clone(),
                    records: text.records.clone(),
                };
                damaged.frames[frame][at] ^= 1 << bit;
                let case = format!("frame {frame} byte {at} bit {bit}");
                let analysis = analyze_bytes(damaged.file())
                    .unwrap_or_else(|| panic!("{case}: the analysis did not end"));
                assert!(
                    analysis.samples + in_frame >= total,
                    "{case}: {} of {total} samples read, more than its frame lost",
                    analysis.samples
                );
                assert!(
                    analysis.samples == total || analysis.lost_some(),
                    "{case}: {} of {total} samples read and nothing said",
                    analysis.samples
                );
                assert!(
                    analysis.read_error.is_none(),
                    "{case}: {:?}",
                    analysis.read_error
                );
                flips += 1;
            }
        }
    }
    assert!(flips >= 4 * 8 * (MAGIC.len() + 6), "{flips} flips");
}

/// Files that are no recording, for `analyze` and `export` alike: exit 1 and one line that
/// says what the file is, never a report of nothing with exit 0 (before: an empty file, and
/// a text file "part of whose recording was lost") nor a read without end (`/dev/urandom`).
#[test]
fn files_that_are_no_recording_are_one_line_and_exit_1() {
    let scratch = Scratch::new("adv-not-recordings");
    let dir = &scratch.dir;
    let file = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).expect("write");
        path.to_str().expect("path").to_string()
    };
    let cases = [
        (file("empty.jsonl", b""), "holds no sample: it is empty"),
        (
            file("blank.jsonl", b"\n\n  \n"),
            "holds no sample: it is empty",
        ),
        (
            file("notes.txt", b"hello\nworld\n"),
            "is not a recording: none of its 2 lines is a sample",
        ),
        (
            file("other.json", b"{\"a\": 1}\n"),
            "is not a recording: its one line is not a sample",
        ),
        ("/dev/urandom".to_string(), "it is a character device"),
        (dir.to_str().expect("path").to_string(), "it is a directory"),
    ];
    for (path, said) in &cases {
        for command in ["analyze", "export"] {
            let out_dir = dir.join("tables");
            let mut args = vec![command, path.as_str()];
            if command == "export" {
                args.extend(["--to", "csv", out_dir.to_str().expect("path")]);
            }
            let out = crate::common::strata_output(&args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{command} {path}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{command} {path}: {stderr}");
            assert!(
                stderr.contains(said) && stderr.contains("(hint: "),
                "{command} {path}: {stderr}"
            );
            assert!(out.stdout.is_empty(), "{command} {path}: nothing printed");
            assert!(!out_dir.exists(), "{command} {path}: no tables");
        }
    }
}

use super::*;
use std::io::{Cursor, Write};

fn lines(input: Vec<u8>) -> (Vec<String>, bool) {
    let (read, cut) = reader(Cursor::new(input)).expect("reader");
    let lines = read.lines().map(|l| l.expect("line")).collect();
    (lines, cut.happened())
}

const TEXT: &str = "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n";

fn zstd_frame(text: &[u8]) -> Vec<u8> {
    zstd::encode_all(text, 3).expect("zstd")
}

fn gzip_member(text: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(text).expect("write");
    gz.finish().expect("gzip")
}

/// Every event of a recording's lines, as (line number, what), with the limits given.
fn events(bytes: Vec<u8>, limit: usize, give_up: u64) -> (Vec<(u64, String)>, Option<String>) {
    let mut lines = Lines::with_limits(
        Box::new(Cursor::new(bytes)),
        Progress::default(),
        limit,
        give_up,
    )
    .expect("lines");
    let mut out = Vec::new();
    loop {
        match lines.next_line() {
            Ok(Some((n, line))) => out.push((
                n,
                match line {
                    Line::Sample(s) => format!("sample {}", s.time - T0),
                    Line::Bad(_) => "bad".into(),
                    Line::Truncated => "truncated".into(),
                    Line::Oversized(bytes) => format!("oversized {bytes}"),
                    Line::Corrupt(c) => format!("corrupt {} {:?}", c.at, c.resumed_at),
                    Line::Unanchored => "unanchored".into(),
                },
            )),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e.to_string())),
        }
    }
}

/// When the tests' samples begin: a sample's time is read only between 2000 and 2200.
const T0: f64 = 1_767_258_000.0;

/// A sample line at `time` seconds after [`T0`].
fn sample_line(time: f64) -> String {
    let mut sample = crate::fixtures::node();
    sample.time = T0 + time;
    serde_json::to_string(&sample).expect("json") + "\n"
}

#[test]
fn plain_zstd_and_gzip_read_alike() {
    for input in [
        TEXT.as_bytes().to_vec(),
        zstd_frame(TEXT.as_bytes()),
        gzip_member(TEXT.as_bytes()),
    ] {
        let kind = Compression::sniff(&input);
        assert_eq!(
            lines(input),
            (
                vec!["{\"a\":1}".into(), "{\"a\":2}".into(), "{\"a\":3}".into()],
                false
            ),
            "{kind:?}"
        );
    }
}

/// A writer killed mid-frame: every sample flushed before the cut reads back, then at most a
/// piece of the one in flight (without its newline: analyze and replay take it for the cut
/// last line it is).
#[test]
fn a_frame_cut_short_reads_up_to_the_cut() {
    let flushed_text = "{\"a\":1}\n{\"a\":2}\n";
    let check = |bytes: Vec<u8>, kind: &str| {
        let (mut read, cut) = reader(Cursor::new(bytes)).expect("reader");
        let mut text = String::new();
        read.read_to_string(&mut text).expect("read");
        assert!(cut.happened(), "{kind}");
        assert!(!cut.corrupt(), "{kind}");
        let rest = text
            .strip_prefix(flushed_text)
            .unwrap_or_else(|| panic!("{kind}: {text:?}"));
        assert!("{\"a\":3}".starts_with(rest), "{kind}: {rest:?}");
    };
    let mut zst = zstd::stream::write::Encoder::new(Vec::new(), 3).expect("zstd");
    zst.write_all(flushed_text.as_bytes()).expect("write");
    zst.flush().expect("flush");
    let flushed = zst.get_ref().len();
    zst.write_all(b"{\"a\":3}\n").expect("write");
    let mut bytes = zst.finish().expect("finish");
    bytes.truncate(flushed + 3);
    check(bytes, "zstd");

    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(flushed_text.as_bytes()).expect("write");
    gz.flush().expect("flush");
    let flushed = gz.get_ref().len();
    gz.write_all(b"{\"a\":3}\n").expect("write");
    let mut bytes = gz.finish().expect("finish");
    bytes.truncate(flushed + 3);
    check(bytes, "gzip");
}

/// A recording appended to holds several frames or members: all of them are read.
#[test]
fn appended_frames_read_as_one_recording() {
    let mut zst = zstd_frame(b"{\"a\":1}\n");
    zst.extend(zstd_frame(b"{\"a\":2}\n"));
    assert_eq!(lines(zst).0.len(), 2);
    let mut gz = gzip_member(b"{\"a\":1}\n");
    gz.extend(gzip_member(b"{\"a\":2}\n"));
    assert_eq!(lines(gz).0.len(), 2);
}

/// A line over the limit is skipped to its newline and said with its length; the lines
/// around it read as ever, plain or compressed, and no buffer grows past the limit.
#[test]
fn a_line_over_the_limit_is_skipped_and_reading_goes_on() {
    let mut text = sample_line(1.0);
    text.push_str("{\"pad\": \"");
    text.push_str(&"x".repeat(300_000));
    text.push_str("\"}\n");
    text.push_str(&"y".repeat(300_000));
    text.push('\n');
    text.push_str(&sample_line(2.0));
    // The long line that may be a sample is held to the limit; the junk after it is let go
    // from its first 64 KiB on (a bad line either way).
    let want = vec![
        (1, "sample 1".to_string()),
        (2, "oversized 300012".to_string()),
        (3, "bad".to_string()),
        (4, "sample 2".to_string()),
    ];
    for bytes in [
        text.as_bytes().to_vec(),
        zstd_frame(text.as_bytes()),
        gzip_member(text.as_bytes()),
    ] {
        assert_eq!(events(bytes, 100_000, 1 << 30), (want.clone(), None));
    }
    // A line just at the limit, newline included, is read.
    let line = sample_line(3.0);
    assert_eq!(
        events(line.clone().into_bytes(), line.len(), 1 << 30).0,
        vec![(1, "sample 3".to_string())]
    );
    assert_eq!(
        events(line.clone().into_bytes(), line.len() - 1, 1 << 30).0,
        vec![(1, format!("oversized {}", line.len()))]
    );
}

#[test]
fn a_line_buffer_grows_by_doubling_up_to_the_limit_and_no_further() {
    let mut line = Vec::new();
    let mut capacities = Vec::new();
    for _ in 0..40 {
        if line.len() + 7000 > 100_000 {
            break;
        }
        lines::reserve_within(&mut line, 7000, 100_000);
        line.extend(std::iter::repeat_n(b'x', 7000));
        capacities.push(line.capacity());
    }
    assert!(capacities.iter().all(|&c| c <= 100_000), "{capacities:?}");
    assert_eq!(capacities.last(), Some(&100_000), "{capacities:?}");
}

/// Text with no line end at all (`/dev/zero`, a gzip bomb of zeros) is given up on after the
/// bound, naming where the line began and, compressed, how far into the file it had read.
#[test]
fn text_without_a_line_end_is_given_up_with_its_offset() {
    let mut text = sample_line(1.0).into_bytes();
    let from = text.len();
    text.extend(vec![0u8; 50_000]);
    let (got, error) = events(text.clone(), 1000, 20_000);
    assert_eq!(got, vec![(1, "sample 1".to_string())]);
    let error = error.expect("given up");
    assert!(
        error.starts_with(&format!(
            "no line ends in the 1.00 GiB of text from byte {from}: "
        )),
        "{error}"
    );
    let (_, error) = events(gzip_member(&text), 1000, 20_000);
    let error = error.expect("given up");
    assert!(
        error.contains(&format!("from byte {from} (read to byte ")),
        "{error}"
    );
}

/// Bytes of `frames` joined, and the offset where each begins.
fn joined(frames: &[Vec<u8>]) -> (Vec<u8>, Vec<u64>) {
    let mut all = Vec::new();
    let mut starts = Vec::new();
    for f in frames {
        starts.push(all.len() as u64);
        all.extend(f);
    }
    (all, starts)
}

/// Text of `n` sample lines from `t0`, one a second.
fn samples(t0: u32, n: u32) -> String {
    (t0..t0 + n).map(|t| sample_line(f64::from(t))).collect()
}

/// Corruption inside a zstd frame is said where it was found, and reading goes on with the
/// next frame: nothing after the damaged frame is lost.
#[test]
fn corruption_in_a_zstd_frame_skips_to_the_next_frame() {
    // Flushed per line, as strata record writes: blocks of one sample each.
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 1).expect("zstd");
    encoder.include_checksum(false).expect("param");
    let mut flushed_at = Vec::new();
    for t in 10..20 {
        encoder
            .write_all(sample_line(f64::from(t)).as_bytes())
            .expect("write");
        encoder.flush().expect("flush");
        flushed_at.push(encoder.get_ref().len());
    }
    let middle = encoder.finish().expect("finish");
    let (mut bytes, starts) = joined(&[
        zstd_frame(samples(0, 10).as_bytes()),
        middle,
        zstd_frame(samples(20, 10).as_bytes()),
    ]);
    // The middle frame's sixth block made of the reserved type: zstd cannot decode it.
    let damaged = starts[1] as usize + flushed_at[4];
    bytes[damaged] |= 0x06;
    let (got, error) = events(bytes, LINE_LIMIT, NO_LINE_END_LIMIT);
    assert_eq!(error, None);
    let corrupt: Vec<&(u64, String)> = got
        .iter()
        .filter(|(_, e)| e.starts_with("corrupt"))
        .collect();
    assert_eq!(corrupt.len(), 1, "{got:?}");
    let at: u64 = corrupt[0]
        .1
        .split(' ')
        .nth(1)
        .and_then(|a| a.parse().ok())
        .expect("at");
    // Said at the block header that was damaged.
    assert_eq!(at, damaged as u64, "{got:?}");
    assert!(
        corrupt[0].1.ends_with(&format!("Some({})", starts[2])),
        "{got:?}"
    );
    let times: Vec<&str> = got
        .iter()
        .filter_map(|(_, e)| e.strip_prefix("sample "))
        .collect();
    // The first frame, the middle one up to its damaged block, and the whole last frame.
    let mut want: Vec<String> = (0..15).map(|t| t.to_string()).collect();
    want.extend((20..30).map(|t| t.to_string()));
    assert_eq!(times, want.iter().map(String::as_str).collect::<Vec<_>>());
}

/// The same for gzip members; and junk after the last frame is corruption with nothing to go
/// on to, not a cut.
#[test]
fn corruption_in_a_gzip_member_skips_to_the_next_member() {
    let (mut bytes, starts) = joined(&[
        gzip_member(samples(0, 10).as_bytes()),
        gzip_member(samples(10, 10).as_bytes()),
        gzip_member(samples(20, 10).as_bytes()),
    ]);
    let damaged = starts[1] as usize + 40;
    for b in &mut bytes[damaged..damaged + 8] {
        *b ^= 0xA5;
    }
    let (got, error) = events(bytes, LINE_LIMIT, NO_LINE_END_LIMIT);
    assert_eq!(error, None);
    let corrupt: Vec<&String> = got
        .iter()
        .map(|(_, e)| e)
        .filter(|e| e.starts_with("corrupt"))
        .collect();
    assert_eq!(corrupt.len(), 1, "{got:?}");
    assert!(
        corrupt[0].ends_with(&format!("Some({})", starts[2])),
        "{got:?}"
    );
    let times: Vec<u32> = got
        .iter()
        .filter_map(|(_, e)| e.strip_prefix("sample ")?.parse().ok())
        .collect();
    assert_eq!(&times[..10], &(0..10).collect::<Vec<_>>()[..]);
    assert_eq!(
        &times[times.len() - 10..],
        &(20..30).collect::<Vec<_>>()[..]
    );

    for mut bytes in [
        zstd_frame(samples(0, 3).as_bytes()),
        gzip_member(samples(0, 3).as_bytes()),
    ] {
        let end = bytes.len() as u64;
        bytes.extend(b"junk appended\n");
        let (mut read, cut) = reader(Cursor::new(bytes.clone())).expect("reader");
        let mut text = String::new();
        read.read_to_string(&mut text).expect("read");
        assert_eq!(text, samples(0, 3));
        assert!(cut.corrupt() && !cut.happened());
        let (got, _) = events(bytes, LINE_LIMIT, NO_LINE_END_LIMIT);
        assert_eq!(
            got.last().map(|e| e.1.clone()),
            Some(format!("corrupt {end} None"))
        );
    }
}

/// A recording recompressed with a 2 GiB window (`zstd --long=31`, streamed: the window is
/// not cut down to the content) reads.
#[test]
fn a_zstd_frame_with_a_2_gib_window_reads() {
    use zstd::zstd_safe::CParameter;
    let text = samples(0, 5);
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).expect("zstd");
    encoder
        .set_parameter(CParameter::WindowLog(31))
        .expect("window");
    encoder
        .set_parameter(CParameter::EnableLongDistanceMatching(true))
        .expect("long");
    encoder.write_all(text.as_bytes()).expect("write");
    let bytes = encoder.finish().expect("finish");
    assert_eq!(decode::zstd_window(&bytes), Some(1 << 31));
    let (got, error) = events(bytes, LINE_LIMIT, NO_LINE_END_LIMIT);
    assert_eq!((got.len(), error), (5, None));
}

/// The largest sample strata can write: every feed meets the monitor with a whole backlog,
/// up to the monitor's bounds (2,048 earlier readings a device, 131,072 over all feeds: 64
/// feeds of 2,048), each reading with every figure, and 64 OOM reports a feed waiting; on
/// the busy 8 GPU x 64 fed process node. The line limit stands well above it.
#[test]
fn the_largest_sample_fits_well_within_the_line_limit() {
    use crate::fixtures::{feed_record, gpu, memory, process, GIB, MIB};
    use crate::sample::feed::*;
    use crate::sample::AllocatorStats;
    let t0 = 1_767_225_600.123_456_7;
    let reading = |i: u64| AllocatorStats {
        index: 0,
        seq: 1_000_000 + i,
        time: t0 + i as f64 * 0.5,
        allocated: 61_234_567_168 + i * 512,
        reserved: Some(77_309_411_328),
        step: Some(1_000 + i),
        at_step_end: i.is_multiple_of(2),
        active: Some(61_234_567_168 + i * 512),
        inactive_split: Some(1_073_741_824 + i),
        requested: Some(61_200_000_000 + i),
        peak_allocated: Some(70_000_000_000),
        peak_reserved: Some(77_309_411_328),
        peak_active: Some(70_000_000_000),
        peak_inactive_split: Some(2_147_483_648),
        peak_requested: Some(69_900_000_000),
        alloc_retries: Some(123_456),
        ooms: Some(12),
        device_allocs: Some(987_654),
        device_frees: Some(987_000),
        largest_free_block: Some(536_870_912),
        largest_free_block_time: Some(t0 - 3.25),
        limit: Some(85_899_345_920),
        reserved_since: Some(t0 - 12.5),
        unreported: Default::default(),
    };
    let mut sample = crate::fixtures::node();
    sample.time = t0 + 1024.0;
    for g in 0..8u32 {
        let uuid = format!("GPU-4c8f2a61-7d1e-5b9c-a{g:03}-0e1f2a3b4c5d");
        sample.gpus.push(gpu(g, memory(80 * GIB, 70 * GIB)));
        for r in 0..8u32 {
            let pid = 210_000 + g * 8 + r;
            let mut p = process(pid, &uuid, Some(70 * GIB / 8));
            p.command = Some(format!(
                "python -u train.py --config configs/llama-8b.yaml --rank {}",
                g * 8 + r
            ));
            sample.processes.push(p);
            sample.feeds.push(FeedRecord {
                hello: Some(
                    Hello {
                        pid,
                        time: t0,
                        agent_version: Some("0.1.0".into()),
                        python: Some("3.11.9".into()),
                        executable: Some("/usr/bin/python3.11".into()),
                        started: Some(t0 - 61.3),
                        interval: Some(0.5),
                        framework: Some("torch".into()),
                        framework_version: Some("2.5.1+cu124".into()),
                        backend: Some("native".into()),
                        devices: vec![FeedDevice {
                            index: 0,
                            uuid: Some(uuid.clone()),
                            pci_bus_id: Some("00000000:18:00.0".into()),
                            name: Some("NVIDIA H100 80GB HBM3".into()),
                            context: None,
                        }],
                        ..Hello::default()
                    }
                    .into(),
                ),
                devices: vec![DeviceFeed {
                    latest: reading(2048),
                    earlier: (0..2048).map(reading).collect(),
                }],
                ooms: (0..64u32)
                    .map(|i| OomReport {
                        time: t0 + f64::from(i),
                        seq: 5000 + u64::from(i),
                        index: 0,
                        requested: Some(2 * GIB),
                        device_free: Some(512 * MIB),
                        device_total: Some(80 * GIB),
                        stats: Some(reading(u64::from(i))),
                    })
                    .collect(),
                connected_at: Some(t0),
                last_heard: Some(t0 + 1023.9),
                ..feed_record(pid, 1000)
            });
        }
    }
    let line = serde_json::to_vec(&sample).expect("json");
    let mib = line.len() as f64 / f64::from(1 << 20);
    eprintln!("the largest sample: {} bytes ({mib:.1} MiB)", line.len());
    assert!(
        line.len() * 3 <= LINE_LIMIT,
        "{mib:.1} MiB against a limit of {} MiB",
        LINE_LIMIT >> 20
    );
    assert!(mib > 40.0, "{mib:.1} MiB: the bounds above are not reached");
}

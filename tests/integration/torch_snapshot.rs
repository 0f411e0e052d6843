//! `strata analyze FILE.pickle` end to end, without torch: the committed snapshot (built by
//! tests/torchsnap/make_fixtures.py in the shape torch writes, frames shared as torch shares
//! them) read plain and gzip'd, its JSON against what the builder worked out from the dict
//! alone (`fragmented_oom.expected.json`), its text, and the bad inputs a user may hand it,
//! each refused in one line with a hint and nothing on stdout. (A gzip bomb is refused by the
//! same bound as any pickle past 2 GiB; the unit tests run it with a bound of 1 MiB, which an
//! end-to-end run at the real bound would take minutes to reach in a debug build.)

use crate::common;

use common::Scratch;
use common::{strata_output, utf8};
use serde_json::Value;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/torchsnap");

fn fixture(name: &str) -> String {
    format!("{DIR}/{name}")
}

fn analyze_json(path: &str) -> Value {
    let out = strata_output(&["analyze", "--json", path]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn expected() -> Value {
    let text = std::fs::read_to_string(fixture("fragmented_oom.expected.json")).expect("expected");
    serde_json::from_str(&text).expect("expected JSON")
}

/// The builder's figures of each device against strata's.
fn check_against_expected(got: &Value) {
    let want = expected();
    let devices = got["segments"]["devices"].as_array().expect("devices");
    let want_devices = want["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), want_devices.len());
    for (d, w) in devices.iter().zip(want_devices) {
        assert_eq!(d["index"], w["index"]);
        let pools = d["pools"].as_array().expect("pools");
        let want_pools = w["pools"].as_array().expect("pools");
        assert_eq!(pools.len(), want_pools.len(), "device {}", d["index"]);
        for (p, wp) in pools.iter().zip(want_pools) {
            for key in [
                "pool",
                "expandable",
                "segments",
                "reserved",
                "live",
                "pending_free",
                "free",
                "largest_free",
            ] {
                assert_eq!(
                    p[key], wp[key],
                    "device {} pool {}: {key}",
                    d["index"], p["pool"]
                );
            }
            let buckets: Vec<Value> = p["free_blocks"]
                .as_array()
                .expect("buckets")
                .iter()
                .map(|b| serde_json::json!([b["at_least"], b["blocks"], b["bytes"]]))
                .collect();
            assert_eq!(Value::from(buckets), wp["free_blocks"]);
            let pinned = &p["pinned"];
            assert_eq!(
                serde_json::json!([pinned["segments"], pinned["reserved"], pinned["live"]]),
                wp["pinned"]
            );
        }
    }
    let sites = got["sites"]["devices"].as_array().expect("sites");
    for (d, w) in sites.iter().zip(want_devices) {
        assert_eq!(d["live_bytes"], w["live_bytes"]);
        assert_eq!(d["live_blocks"], w["live_blocks"]);
        assert_eq!(d["live_unattributed"], w["live_unattributed"]);
        let live: Vec<Value> = d["live"]
            .as_array()
            .expect("live")
            .iter()
            .map(|s| serde_json::json!([s["site"], s["count"], s["bytes"]]))
            .collect();
        assert_eq!(Value::from(live), w["live_sites"], "device {}", d["index"]);
    }
}

#[test]
fn the_committed_snapshot_reads_as_its_builder_says_plain_and_gzip() {
    let plain = analyze_json(&fixture("fragmented_oom.pickle"));
    assert_eq!(plain["schema"], "strata.torch_snapshot/1");
    assert_eq!(plain["source"]["gzip"], false);
    check_against_expected(&plain);
    let gz = analyze_json(&fixture("fragmented_oom.pickle.gz"));
    assert_eq!(gz["source"]["gzip"], true);
    // The same but for the time, which is each file's own (when it was written).
    assert_eq!(gz["segments"]["devices"], plain["segments"]["devices"]);
    assert_eq!(gz["sites"]["devices"], plain["sites"]["devices"]);
}

#[test]
fn the_ooms_are_the_traces_with_the_pool_they_failed_in() {
    let got = analyze_json(&fixture("fragmented_oom.pickle"));
    let ooms = got["ooms"].as_array().expect("ooms");
    assert_eq!(ooms.len(), 2);
    // Device 0: the last entry of its trace; the snapshot is the pool then.
    let o = &ooms[0];
    assert_eq!(o["device"], 0);
    assert_eq!(o["requested"], 1536u64 << 20);
    assert_eq!(o["device_free"], 600u64 << 20);
    assert_eq!(o["events_after"], 0);
    assert_eq!(o["class"], "fragmentation");
    let pool0 = &got["segments"]["devices"][0]["pools"];
    let reserved: u64 = pool0
        .as_array()
        .expect("pools")
        .iter()
        .map(|p| p["reserved"].as_u64().expect("n"))
        .sum();
    assert_eq!(o["reserved"], reserved);
    assert_eq!(o["largest_free"], 1144u64 << 20);
    assert!(
        o["why"]
            .as_str()
            .expect("why")
            .contains("its largest free block was 1.12 GiB"),
        "{}",
        o["why"]
    );
    // Device 1: a free and a new segment after it, undone: 500 MiB live in 1000 MiB then.
    let o = &ooms[1];
    assert_eq!(o["events_after"], 4);
    assert_eq!(o["reserved"], 1000u64 << 20);
    assert_eq!(o["live"], 500u64 << 20);
    assert_eq!(o["largest_free"], Value::Null);
    assert_eq!(o["class"], "capacity");
    assert_eq!(o["site"], "/home/user/job/train.py:12 in step");
}

#[test]
fn the_text_says_the_map_the_sites_the_ooms_and_the_findings() {
    let out = strata_output(&["analyze", &fixture("fragmented_oom.pickle")]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    for said in [
        "PyTorch memory snapshot",
        "device 0: 26.3 GiB reserved in 20 segments, largest free block 1.12 GiB",
        "pinned, large: 12 segments (24.0 GiB) pinned by 114 MiB live",
        "pinned [",
        "/home/user/job/model.py:42 in forward",
        "grew: ",
        "asked for 1.50 GiB, CUDA had 600 MiB free",
        "12 segments of 2.00 GiB each pinned by at most 15.0 MiB live each",
        "expandable segments: torch's `inactive_split` does not count",
    ] {
        assert!(text.contains(said), "{said:?} not in:\n{text}");
    }
}

/// `strata analyze` on `bytes` written as `name`: exit 1, one line on stderr that says
/// `said`, nothing on stdout.
fn refused(name: &str, bytes: &[u8], said: &str) {
    let dir = Scratch::new("torchsnap");
    let path = dir.write(name, bytes, 0o600);
    let out = strata_output(&["analyze", utf8(&path)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{name}: {err}");
    assert!(out.stdout.is_empty(), "{name}: nothing on stdout");
    assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
    assert!(err.contains(said), "{name}: {said:?} not in {err}");
    assert!(err.contains("(hint: "), "{name}: a hint: {err}");
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut enc, bytes).expect("gzip");
    enc.finish().expect("gzip")
}

#[test]
fn bad_snapshots_are_refused_in_one_line_each() {
    let good = std::fs::read(fixture("fragmented_oom.pickle")).expect("fixture");
    refused("empty.pickle", b"", "it is empty");
    refused(
        "cut.pickle",
        &good[..good.len() / 2],
        "the file was cut short",
    );
    refused("text.pickle", b"hello\n", "it is not a pickle");
    // pickle.dumps(collections.OrderedDict()) at protocol 2: a class, never loaded.
    refused(
        "class.pickle",
        b"\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01.",
        "GLOBAL collections.OrderedDict",
    );
    // pickle.dumps({"model": "x"}, protocol=4)
    refused(
        "other.pkl",
        b"\x80\x04\x95\x12\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x05model\x94\x8c\x01x\x94s.",
        "a dict without `segments` (its keys: `model`)",
    );
    // pickle.dumps([1, 2], protocol=4), named as anything: told by its content.
    refused(
        "list.bin",
        b"\x80\x04\x95\x09\x00\x00\x00\x00\x00\x00\x00]\x94(K\x01K\x02e.",
        "a pickle of a list",
    );
    refused(
        "cut.pickle.gz",
        &gzip(&good)[..200],
        "the file was cut short",
    );
    // Nested 100,000 deep: refused by its depth, not by a crash.
    let mut deep = vec![0x80, 4];
    deep.extend(std::iter::repeat_n(b']', 100_000));
    deep.extend(std::iter::repeat_n(b'a', 99_999));
    deep.push(b'.');
    refused("deep.pickle", &deep, "nested deeper than 32 levels");
    // A string that declares 4 GiB and holds three bytes.
    let mut lying = vec![0x80, 4, b'X'];
    lying.extend(u32::MAX.to_le_bytes());
    lying.extend(b"abc");
    refused("lying.pickle", &lying, "more than 1048576");
}

#[test]
fn recording_options_are_refused_for_a_snapshot() {
    let path = fixture("fragmented_oom.pickle");
    for option in [
        &["--report-at", "1767000000"][..],
        &["--every-sample"],
        &["--context-mib", "300"],
    ] {
        let mut args = vec!["analyze"];
        args.extend(option);
        args.push(&path);
        let out = strata_output(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{option:?}: {err}");
        assert!(
            err.contains(option[0]) && err.contains("is a PyTorch snapshot"),
            "{err}"
        );
    }
}

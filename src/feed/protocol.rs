//! Parsing one line of the feed protocol (assets/python/PROTOCOL.md) into a bounded message.
//!
//! Everything an agent sends is clipped here (string lengths, map sizes, device counts), so
//! what the hub keeps per message is bounded whatever the agent writes.

use crate::sample::feed::{AllocatorStats, FeedDevice, Hello, OomReport};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// The longest line, in bytes, including its `\n`.
pub(crate) const MAX_LINE_BYTES: usize = 65_536;
/// The most devices one message may carry (the agent sends at most 64).
pub(crate) const MAX_DEVICES: usize = 64;
/// Strings from the agent are cut to this many characters.
const MAX_STRING_CHARS: usize = 256;
/// `requests` (the request types an agent answers) keeps at most this many.
const MAX_REQUEST_KINDS: usize = 8;
/// `settings` keeps at most this many entries.
const MAX_MAP_ENTRIES: usize = 32;
/// The protocol version this monitor reads (every message's `v`).
pub(crate) const PROTOCOL: u64 = crate::version::FEED_PROTOCOL;

/// One message as the hub uses it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Message {
    Hello(Hello),
    /// Devices carry the message's `seq` and `time`.
    Sample {
        backlog: bool,
        devices: Vec<AllocatorStats>,
    },
    Oom {
        backlog: bool,
        report: OomReport,
    },
    Bye {
        reason: String,
    },
    /// A segment map from the agent's latest allocator snapshot.
    Segments(crate::sample::pool::SegmentsReport),
    /// Where a sites window stands, or its summary.
    Sites(crate::sample::pool::SitesReport),
    /// The agent will not be read: it said it is busy (too many monitors) before closing,
    /// or its hello speaks another protocol version. The reason is shown on the feed.
    Refuse(String),
}

/// Why a line was not used; each is one counter of [`crate::sample::feed::FeedCounters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bad {
    /// Not JSON, or not an object.
    Malformed,
    UnknownVersion,
    UnknownType,
    /// Missing or wrongly typed fields, or out of bounds.
    Invalid,
}

/// The two fields every message has; everything else is skipped on this first pass.
#[derive(Deserialize)]
struct Envelope {
    v: Option<Value>,
    #[serde(rename = "type")]
    kind: Option<Value>,
}

/// What a hello of another protocol version is read for: who to blame.
#[derive(Deserialize)]
struct WireVersion {
    #[serde(default)]
    agent_version: Option<Value>,
}

#[derive(Deserialize)]
struct WireBusy {
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize)]
struct WireHello {
    time: f64,
    pid: u32,
    #[serde(default)]
    agent_version: Option<String>,
    #[serde(default)]
    python: Option<String>,
    #[serde(default)]
    executable: Option<String>,
    #[serde(default)]
    started: Option<f64>,
    #[serde(default)]
    interval: Option<f64>,
    #[serde(default)]
    framework: Option<String>,
    #[serde(default)]
    framework_version: Option<String>,
    #[serde(default)]
    backend: Option<String>,
    #[serde(default)]
    settings: Option<BTreeMap<String, Value>>,
    #[serde(default)]
    devices: Option<Vec<WireDevice>>,
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    protocol: Option<u32>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    agent_copy: Option<String>,
    #[serde(default)]
    agent_path: Option<String>,
    #[serde(default)]
    requests: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct WireDevice {
    index: u32,
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    pci_bus_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    context: Option<crate::sample::feed::ReportedContext>,
}

#[derive(Deserialize)]
struct WireStats {
    #[serde(default)]
    index: Option<u32>,
    allocated: u64,
    /// Null where the allocator does not report it (XLA's cuda_async): the device is kept,
    /// with `allocated` alone splitting its usage. Required all the same.
    #[serde(deserialize_with = "present")]
    reserved: Option<u64>,
    /// Steps completed, and whether read at a step's end (PROTOCOL.md, "Steps").
    #[serde(default)]
    step: Option<u64>,
    #[serde(default)]
    at_step_end: Option<bool>,
    #[serde(default)]
    active: Option<u64>,
    #[serde(default)]
    inactive_split: Option<u64>,
    #[serde(default)]
    requested: Option<u64>,
    #[serde(default)]
    peak_allocated: Option<u64>,
    #[serde(default)]
    peak_reserved: Option<u64>,
    #[serde(default)]
    peak_active: Option<u64>,
    #[serde(default)]
    peak_inactive_split: Option<u64>,
    #[serde(default)]
    peak_requested: Option<u64>,
    #[serde(default)]
    alloc_retries: Option<u64>,
    #[serde(default)]
    ooms: Option<u64>,
    #[serde(default)]
    device_allocs: Option<u64>,
    #[serde(default)]
    device_frees: Option<u64>,
    #[serde(default)]
    largest_free_block: Option<u64>,
    #[serde(default)]
    largest_free_block_time: Option<f64>,
    #[serde(default)]
    limit: Option<u64>,
    #[serde(default)]
    reserved_since: Option<f64>,
    #[serde(default)]
    unreported: Option<BTreeMap<String, Option<String>>>,
}

/// A field that must be there, and may be null.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<u64>::deserialize(d)
}

#[derive(Deserialize)]
struct WireSample {
    seq: u64,
    time: f64,
    #[serde(default)]
    backlog: Option<bool>,
    devices: Vec<WireStats>,
}

#[derive(Deserialize)]
struct WireOom {
    time: f64,
    seq: u64,
    index: u32,
    #[serde(default)]
    requested: Option<u64>,
    #[serde(default)]
    device_free: Option<u64>,
    #[serde(default)]
    device_total: Option<u64>,
    #[serde(default)]
    stats: Option<WireStats>,
    #[serde(default)]
    backlog: Option<bool>,
}

#[derive(Deserialize)]
struct WireBye {
    #[serde(default)]
    reason: Option<String>,
}

/// Parses one line (without its `\n`).
pub(crate) fn parse_line(line: &[u8]) -> Result<Message, Bad> {
    // serde would also read a struct from a JSON array: only an object is a message.
    if line.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(Bad::Malformed);
    }
    let envelope: Envelope = serde_json::from_slice(line).map_err(|_| Bad::Malformed)?;
    let kind = match envelope.kind {
        Some(Value::String(kind)) => kind,
        _ => return Err(Bad::Invalid),
    };
    match envelope.v {
        Some(Value::Number(n)) if n.as_u64() == Some(PROTOCOL) => {}
        Some(Value::Number(n)) if kind == "hello" => {
            // Not misread as version 1: said on the feed, with whose version it is.
            let who: WireVersion = serde_json::from_slice(line).map_err(|_| Bad::UnknownVersion)?;
            let agent = match who.agent_version {
                Some(Value::String(v)) => clip_to(v, 32),
                _ => "of unknown version".into(),
            };
            return Ok(Message::Refuse(format!(
                "version mismatch: agent {agent} speaks feed protocol {n}, this strata ({}) reads protocol {PROTOCOL}: run the same version of both",
                env!("CARGO_PKG_VERSION")
            )));
        }
        Some(Value::Number(_)) => return Err(Bad::UnknownVersion),
        _ => return Err(Bad::Invalid),
    }
    let invalid = |_| Bad::Invalid;
    match kind.as_str() {
        "hello" => hello(serde_json::from_slice(line).map_err(invalid)?).map(Message::Hello),
        "sample" => sample(serde_json::from_slice(line).map_err(invalid)?),
        "oom" => oom(serde_json::from_slice(line).map_err(invalid)?),
        "segments" => {
            super::protocol_pool::segments(serde_json::from_slice(line).map_err(invalid)?)
                .map(Message::Segments)
        }
        "sites" => super::protocol_pool::sites(serde_json::from_slice(line).map_err(invalid)?)
            .map(Message::Sites),
        "bye" => {
            let bye: WireBye = serde_json::from_slice(line).map_err(invalid)?;
            let reason = clip(bye.reason.unwrap_or_default());
            Ok(Message::Bye { reason })
        }
        "busy" => {
            let busy: WireBusy = serde_json::from_slice(line).map_err(invalid)?;
            let reason = clip_to(busy.reason.unwrap_or_else(|| "busy".into()), 96);
            Ok(Message::Refuse(format!(
                "agent {reason}: not read, tried again later"
            )))
        }
        _ => Err(Bad::UnknownType),
    }
}

fn hello(wire: WireHello) -> Result<Hello, Bad> {
    let devices = wire.devices.unwrap_or_default();
    if devices.len() > MAX_DEVICES || !finite(wire.time) {
        return Err(Bad::Invalid);
    }
    let mut settings = BTreeMap::new();
    for (key, value) in wire.settings.unwrap_or_default() {
        if settings.len() == MAX_MAP_ENTRIES {
            break;
        }
        let value = match value {
            Value::String(s) => Value::String(clip(s)),
            Value::Null | Value::Bool(_) | Value::Number(_) => value,
            Value::Array(_) | Value::Object(_) => return Err(Bad::Invalid),
        };
        settings.insert(clip(key), value);
    }
    Ok(Hello {
        pid: wire.pid,
        time: wire.time,
        agent_version: wire.agent_version.map(clip),
        python: wire.python.map(clip),
        executable: wire.executable.map(clip),
        started: wire.started,
        interval: wire.interval,
        framework: wire.framework.map(clip),
        framework_version: wire.framework_version.map(clip),
        backend: wire.backend.map(clip),
        settings,
        devices: devices
            .into_iter()
            .map(|d| FeedDevice {
                index: d.index,
                uuid: d.uuid.map(clip),
                pci_bus_id: d.pci_bus_id.map(clip),
                name: d.name.map(clip),
                context: d.context.map(|c| crate::sample::feed::ReportedContext {
                    method: c.method.map(clip),
                    ..c
                }),
            })
            .collect(),
        note: wire.note.map(clip),
        protocol: wire.protocol,
        state: wire.state.map(|s| clip_to(s, 32)),
        error: wire.error.map(clip),
        agent_copy: wire.agent_copy.map(|s| clip_to(s, 32)),
        agent_path: wire.agent_path.map(clip),
        requests: wire
            .requests
            .unwrap_or_default()
            .into_iter()
            .take(MAX_REQUEST_KINDS)
            .map(|r| clip_to(r, 32))
            .collect(),
    })
}

fn sample(wire: WireSample) -> Result<Message, Bad> {
    if wire.devices.len() > MAX_DEVICES || !finite(wire.time) {
        return Err(Bad::Invalid);
    }
    let mut devices: Vec<AllocatorStats> = Vec::with_capacity(wire.devices.len());
    for entry in wire.devices {
        let index = entry.index.ok_or(Bad::Invalid)?;
        if devices.iter().any(|d| d.index == index) {
            return Err(Bad::Invalid);
        }
        devices.push(stats(entry, index, wire.seq, wire.time));
    }
    Ok(Message::Sample {
        backlog: wire.backlog.unwrap_or(false),
        devices,
    })
}

fn oom(wire: WireOom) -> Result<Message, Bad> {
    if !finite(wire.time) {
        return Err(Bad::Invalid);
    }
    let stats = wire.stats.map(|entry| {
        let index = entry.index.unwrap_or(wire.index);
        stats(entry, index, wire.seq, wire.time)
    });
    Ok(Message::Oom {
        backlog: wire.backlog.unwrap_or(false),
        report: OomReport {
            time: wire.time,
            seq: wire.seq,
            index: wire.index,
            requested: wire.requested,
            device_free: wire.device_free,
            device_total: wire.device_total,
            stats,
        },
    })
}

/// The statistics that may be null, hence named in `unreported`. Other keys are dropped: a
/// sample kept for history stays small whatever the agent writes.
const NULLABLE_STATS: [&str; 17] = [
    "reserved",
    "active",
    "inactive_split",
    "requested",
    "peak_allocated",
    "peak_reserved",
    "peak_active",
    "peak_inactive_split",
    "peak_requested",
    "alloc_retries",
    "ooms",
    "device_allocs",
    "device_frees",
    "largest_free_block",
    "largest_free_block_time",
    "limit",
    "reserved_since",
];
/// An `unreported` reason is cut to this many characters.
const MAX_REASON_CHARS: usize = 128;

/// The statistics of one device entry. A `reserved` of null (not reported) is kept as
/// unknown: the accounting uses `allocated` alone then.
fn stats(wire: WireStats, index: u32, seq: u64, time: f64) -> AllocatorStats {
    let mut unreported = BTreeMap::new();
    for (field, reason) in wire.unreported.unwrap_or_default() {
        if NULLABLE_STATS.contains(&field.as_str()) {
            let reason = clip_to(reason.unwrap_or_default(), MAX_REASON_CHARS);
            unreported.insert(field, reason);
        }
    }
    AllocatorStats {
        index,
        seq,
        time,
        allocated: wire.allocated,
        reserved: wire.reserved,
        step: wire.step,
        at_step_end: wire.step.is_some() && wire.at_step_end == Some(true),
        active: wire.active,
        inactive_split: wire.inactive_split,
        requested: wire.requested,
        peak_allocated: wire.peak_allocated,
        peak_reserved: wire.peak_reserved,
        peak_active: wire.peak_active,
        peak_inactive_split: wire.peak_inactive_split,
        peak_requested: wire.peak_requested,
        alloc_retries: wire.alloc_retries,
        ooms: wire.ooms,
        device_allocs: wire.device_allocs,
        device_frees: wire.device_frees,
        largest_free_block: wire.largest_free_block,
        largest_free_block_time: wire.largest_free_block_time,
        limit: wire.limit,
        reserved_since: wire.reserved_since,
        unreported,
    }
}

/// The optional fields a monitor's diagnosis reads: a hello device's `context`, a sample's
/// `step` and `at_step_end`.
#[cfg(test)]
#[path = "protocol_fields_tests.rs"]
mod fields_tests;

fn finite(time: f64) -> bool {
    time.is_finite()
}

/// Cuts a string from the agent to [`MAX_STRING_CHARS`] characters.
pub(crate) fn clip(s: String) -> String {
    clip_to(s, MAX_STRING_CHARS)
}

fn clip_to(mut s: String, max_chars: usize) -> String {
    if let Some((cut, _)) = s.char_indices().nth(max_chars) {
        s.truncate(cut);
    }
    s.shrink_to_fit();
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO: &str = r#"{"v":1,"type":"hello","time":1764412300.0,"pid":4242,"agent_version":"0.1.0","python":"3.11.7","executable":"/usr/bin/python3","started":1764412290.1,"interval":0.5,"framework":"torch","framework_version":"2.5.1","backend":"native","settings":{"expandable_segments":false,"alloc_conf":null},"devices":[{"index":0,"uuid":"5f3c2a1e-8b7d-4c6e-9a10-2d4f6b8e0c31","pci_bus_id":"00000000:18:00.0","name":"NVIDIA H100 80GB HBM3"}],"note":null}"#;
    const SAMPLE: &str = r#"{"v":1,"type":"sample","seq":7,"time":1764412300.5,"backlog":true,"devices":[{"index":0,"allocated":12884901888,"reserved":21474836480,"active":12884901888,"inactive_split":1073741824,"requested":12800000000,"peak_allocated":13958643712,"peak_reserved":21474836480,"peak_active":13958643712,"peak_inactive_split":2147483648,"peak_requested":13900000000,"alloc_retries":0,"ooms":0,"device_allocs":12,"device_frees":2,"largest_free_block":null,"largest_free_block_time":null,"limit":null,"reserved_since":1764412297.5,"unreported":{"largest_free_block":"not measured yet"}}],"cost":{"read_us":61,"gil_max_us":38}}"#;
    const OOM: &str = r#"{"v":1,"type":"oom","time":1764412301.2,"seq":8,"index":0,"requested":8589934592,"device_free":2147483648,"device_total":85520809984,"stats":{"index":0,"allocated":60129542144,"reserved":77309411328,"active":60129542144,"inactive_split":9663676416,"requested":null,"peak_allocated":60129542144,"peak_reserved":77309411328,"peak_active":null,"peak_inactive_split":null,"peak_requested":null,"alloc_retries":41,"ooms":1,"device_allocs":30,"device_frees":3,"largest_free_block":1073741824,"largest_free_block_time":1764412290.0,"limit":null,"reserved_since":1764412299.0,"unreported":{}}}"#;

    /// The agent and the monitor hold one protocol version and one device limit: what the
    /// agent writes (`assets/python/strata_feed/__init__.py`) is what this parser accepts.
    #[test]
    fn the_agent_writes_the_protocol_and_the_device_limit_read_here() {
        let init = include_str!("../../assets/python/strata_feed/__init__.py");
        for line in [
            format!("\nPROTOCOL = {PROTOCOL} "),
            format!("\nMAX_DEVICES = {MAX_DEVICES} "),
        ] {
            assert!(
                init.contains(&line),
                "assets/python/strata_feed/__init__.py must say `{}`",
                line.trim()
            );
        }
    }

    #[test]
    fn protocol_examples_parse_with_their_values() {
        let Ok(Message::Hello(hello)) = parse_line(HELLO.as_bytes()) else {
            panic!("hello did not parse");
        };
        assert_eq!(hello.pid, 4242);
        assert_eq!(hello.framework.as_deref(), Some("torch"));
        assert_eq!(
            hello.settings.get("expandable_segments"),
            Some(&Value::Bool(false))
        );
        assert_eq!(
            hello.devices[0].pci_bus_id.as_deref(),
            Some("00000000:18:00.0")
        );

        let Ok(Message::Sample { backlog, devices }) = parse_line(SAMPLE.as_bytes()) else {
            panic!("sample did not parse");
        };
        assert!(backlog);
        assert_eq!(devices.len(), 1);
        let d = &devices[0];
        assert_eq!((d.seq, d.time), (7, 1764412300.5));
        assert_eq!((d.allocated, d.reserved), (12884901888, Some(21474836480)));
        assert_eq!(d.inactive_split, Some(1073741824));
        assert_eq!(d.largest_free_block, None);
        assert_eq!(d.reserved_since, Some(1764412297.5));
        assert_eq!(
            d.unreported.get("largest_free_block").map(String::as_str),
            Some("not measured yet")
        );

        let Ok(Message::Oom { backlog, report }) = parse_line(OOM.as_bytes()) else {
            panic!("oom did not parse");
        };
        assert!(!backlog);
        assert_eq!(
            (report.seq, report.index, report.requested),
            (8, 0, Some(8589934592))
        );
        let stats = report.stats.expect("stats");
        assert_eq!(
            (stats.seq, stats.time, stats.alloc_retries),
            (8, 1764412301.2, Some(41))
        );

        let bye = parse_line(br#"{"v": 1, "type": "bye", "time": 1764412399.2, "reason": "exit"}"#);
        assert_eq!(
            bye,
            Ok(Message::Bye {
                reason: "exit".into()
            })
        );
    }

    #[test]
    fn each_kind_of_bad_line_is_told_apart() {
        let cases: &[(&str, Bad)] = &[
            ("not json", Bad::Malformed),
            ("[1,2]", Bad::Malformed),
            ("42", Bad::Malformed),
            ("", Bad::Malformed),
            ("{}", Bad::Invalid),
            (r#"{"v":1,"type":"hello""#, Bad::Malformed),
            (
                r#"{"v":2,"type":"sample","seq":1,"time":1,"devices":[]}"#,
                Bad::UnknownVersion,
            ),
            (
                r#"{"v":1.5,"type":"sample","seq":1,"time":1,"devices":[]}"#,
                Bad::UnknownVersion,
            ),
            (r#"{"type":"hello","time":1,"pid":1}"#, Bad::Invalid),
            (r#"{"v":"1","type":"hello","time":1,"pid":1}"#, Bad::Invalid),
            (r#"{"v":1,"type":"heartbeat"}"#, Bad::UnknownType),
            (r#"{"v":1,"type":7}"#, Bad::Invalid),
            (r#"{"v":1,"type":"hello","time":1}"#, Bad::Invalid),
            (r#"{"v":1,"type":"hello","time":1,"pid":-3}"#, Bad::Invalid),
            (
                r#"{"v":1,"type":"hello","time":1,"pid":1,"settings":{"a":[1]}}"#,
                Bad::Invalid,
            ),
            (
                r#"{"v":1,"type":"sample","seq":1,"time":1,"devices":[{"index":0,"allocated":1}]}"#,
                Bad::Invalid,
            ),
            (
                r#"{"v":1,"type":"sample","seq":1,"time":1,"devices":[{"index":0,"allocated":-1,"reserved":2}]}"#,
                Bad::Invalid,
            ),
            (
                r#"{"v":1,"type":"sample","seq":1,"time":1,"devices":[{"index":0,"allocated":1.5,"reserved":2}]}"#,
                Bad::Invalid,
            ),
            (
                r#"{"v":1,"type":"sample","seq":1,"time":1,"devices":[{"allocated":1,"reserved":2}]}"#,
                Bad::Invalid,
            ),
            (
                r#"{"v":1,"type":"sample","seq":1,"time":1,"devices":[{"index":0,"allocated":1,"reserved":2},{"index":0,"allocated":1,"reserved":2}]}"#,
                Bad::Invalid,
            ),
            (
                r#"{"v":1,"type":"sample","seq":1,"time":"now","devices":[]}"#,
                Bad::Invalid,
            ),
            (r#"{"v":1,"type":"oom","time":1,"seq":1}"#, Bad::Invalid),
        ];
        for (line, want) in cases {
            assert_eq!(parse_line(line.as_bytes()), Err(*want), "{line}");
        }
    }

    #[test]
    fn a_hello_of_another_protocol_is_a_mismatch_said_with_both_versions() {
        let got = parse_line(br#"{"v":2,"type":"hello","time":1,"pid":1,"agent_version":"0.3.0"}"#);
        let Ok(Message::Refuse(reason)) = got else {
            panic!("{got:?}");
        };
        assert!(
            reason
                .starts_with("version mismatch: agent 0.3.0 speaks feed protocol 2, this strata ("),
            "{reason}"
        );
        assert!(
            reason.ends_with("reads protocol 1: run the same version of both"),
            "{reason}"
        );
        let got = parse_line(br#"{"v":7,"type":"hello"}"#);
        assert!(
            matches!(&got, Ok(Message::Refuse(r)) if r.contains("agent of unknown version speaks feed protocol 7")),
            "{got:?}"
        );
    }

    #[test]
    fn busy_is_said_as_the_agent_says_it() {
        let got = parse_line(
            br#"{"v":1,"type":"busy","time":1.5,"reason":"busy: 256 monitors connected"}"#,
        );
        assert_eq!(
            got,
            Ok(Message::Refuse(
                "agent busy: 256 monitors connected: not read, tried again later".into()
            ))
        );
    }

    #[test]
    fn new_hello_fields_are_read_and_old_hellos_still_parse() {
        let line = br#"{"v":1,"type":"hello","time":1,"pid":9,"protocol":1,"state":"error","error":"agent error: AttributeError: x","agent_copy":"embedded","agent_path":"/tmp/strata-0/agent-1"}"#;
        let Ok(Message::Hello(h)) = parse_line(line) else {
            panic!("hello did not parse");
        };
        assert_eq!(h.protocol, Some(1));
        assert_eq!(h.state.as_deref(), Some("error"));
        assert_eq!(h.error.as_deref(), Some("agent error: AttributeError: x"));
        assert_eq!(h.agent_copy.as_deref(), Some("embedded"));
        let Ok(Message::Hello(old)) = parse_line(HELLO.as_bytes()) else {
            panic!("old hello did not parse");
        };
        assert_eq!((old.state, old.error, old.protocol), (None, None, None));
    }

    #[test]
    fn a_device_without_reserved_is_kept_with_reserved_unknown() {
        // XLA's cuda_async allocator: allocated known, reserved not reported.
        let line = br#"{"v":1,"type":"sample","seq":4,"time":2,"devices":[{"index":0,"allocated":5,"reserved":null,"unreported":{"reserved":"not reported by XLA's cuda_async allocator"}},{"index":1,"allocated":1,"reserved":2}]}"#;
        let Ok(Message::Sample { devices, .. }) = parse_line(line) else {
            panic!("sample did not parse");
        };
        assert_eq!(devices.len(), 2, "the device is kept");
        assert_eq!((devices[0].index, devices[0].allocated), (0, 5));
        assert_eq!(devices[0].reserved, None, "unknown, never 0");
        assert_eq!(
            devices[0].unreported.get("reserved").map(String::as_str),
            Some("not reported by XLA's cuda_async allocator")
        );
        assert_eq!((devices[1].index, devices[1].reserved), (1, Some(2)));
        // Required all the same: a missing reserved is invalid, not unknown.
        let missing =
            br#"{"v":1,"type":"sample","seq":4,"time":2,"devices":[{"index":0,"allocated":5}]}"#;
        assert_eq!(parse_line(missing), Err(Bad::Invalid));
        // An oom's stats of such a device are kept too.
        let oom = br#"{"v":1,"type":"oom","time":3,"seq":5,"index":0,"requested":9,"stats":{"index":0,"allocated":5,"reserved":null}}"#;
        let Ok(Message::Oom { report, .. }) = parse_line(oom) else {
            panic!("oom did not parse");
        };
        let stats = report.stats.expect("stats kept");
        assert_eq!((stats.allocated, stats.reserved), (5, None));
    }

    #[test]
    fn more_than_64_devices_is_invalid() {
        let entry = r#"{"index":N,"allocated":1,"reserved":2}"#;
        let devices: Vec<String> = (0..65)
            .map(|i| entry.replace('N', &i.to_string()))
            .collect();
        let line = format!(
            r#"{{"v":1,"type":"sample","seq":1,"time":1,"devices":[{}]}}"#,
            devices.join(",")
        );
        assert_eq!(parse_line(line.as_bytes()), Err(Bad::Invalid));
        let ok = format!(
            r#"{{"v":1,"type":"sample","seq":1,"time":1,"devices":[{}]}}"#,
            devices[..64].join(",")
        );
        assert!(
            matches!(parse_line(ok.as_bytes()), Ok(Message::Sample { devices, .. }) if devices.len() == 64)
        );
    }

    #[test]
    fn strings_and_maps_from_the_agent_are_bounded() {
        let long = "é".repeat(1000);
        let settings: Vec<String> = (0..100).map(|i| format!(r#""k{i:03}":"{long}""#)).collect();
        let line = format!(
            r#"{{"v":1,"type":"hello","time":1,"pid":1,"executable":"{long}","settings":{{{}}}}}"#,
            settings.join(",")
        );
        let Ok(Message::Hello(hello)) = parse_line(line.as_bytes()) else {
            panic!("hello did not parse");
        };
        assert_eq!(
            hello.executable.map(|s| s.chars().count()),
            Some(MAX_STRING_CHARS)
        );
        assert_eq!(hello.settings.len(), MAX_MAP_ENTRIES);
        assert!(hello.settings.values().all(|v| v
            .as_str()
            .is_some_and(|s| s.chars().count() == MAX_STRING_CHARS)));
    }

    #[test]
    fn unreported_keeps_only_statistics_names_with_short_reasons() {
        let long = "r".repeat(1000);
        let line = format!(
            r#"{{"v":1,"type":"sample","seq":1,"time":1,"devices":[{{"index":0,"allocated":1,"reserved":2,"unreported":{{"requested":"{long}","made_up":"x","limit":null}}}}]}}"#
        );
        let Ok(Message::Sample { devices, .. }) = parse_line(line.as_bytes()) else {
            panic!("sample did not parse");
        };
        let unreported = &devices[0].unreported;
        assert_eq!(
            unreported.keys().collect::<Vec<_>>(),
            vec!["limit", "requested"]
        );
        assert_eq!(unreported["requested"].len(), MAX_REASON_CHARS);
        assert_eq!(unreported["limit"], "");
    }

    #[test]
    fn unknown_fields_are_ignored_and_missing_optionals_are_none() {
        let line = r#"{"v":1,"type":"sample","seq":3,"time":2.5,"future":{"x":1},"devices":[{"index":1,"allocated":1,"reserved":2,"new_stat":9}]}"#;
        let Ok(Message::Sample { backlog, devices }) = parse_line(line.as_bytes()) else {
            panic!("sample did not parse");
        };
        assert!(!backlog);
        assert_eq!(devices[0].active, None);
        assert_eq!((devices[0].index, devices[0].seq), (1, 3));
    }
}

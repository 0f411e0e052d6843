//! The optional fields of PROTOCOL.md's "Context at CUDA init, and training steps", parsed
//! as specified: present, missing, and wrong.

use super::*;

#[test]
fn a_hello_device_carries_the_context_read_at_cuda_init() {
    let line = r#"{"v":1,"type":"hello","time":10.0,"pid":7,"devices":[{"index":0,"uuid":"u","context":{"bytes":555745280,"time":4.25,"reserved":0,"method":"nvml_process_used"}},{"index":1}]}"#;
    let Ok(Message::Hello(hello)) = parse_line(line.as_bytes()) else {
        panic!("hello did not parse");
    };
    let context = hello.devices[0].context.as_ref().expect("context");
    assert_eq!((context.bytes, context.time), (555_745_280, 4.25));
    assert_eq!(context.context_bytes(), Some(555_745_280));
    assert_eq!(context.method.as_deref(), Some("nvml_process_used"));
    assert_eq!(hello.devices[1].context, None);
    // Read while the pool held something, or without saying: not a context.
    let held = line.replace(r#""reserved":0"#, r#""reserved":2097152"#);
    let Ok(Message::Hello(hello)) = parse_line(held.as_bytes()) else {
        panic!("hello did not parse");
    };
    assert_eq!(
        hello.devices[0]
            .context
            .as_ref()
            .and_then(|c| c.context_bytes()),
        None
    );
    // A context without its bytes is a malformed hello.
    let broken = line.replace(r#""bytes":555745280,"#, "");
    assert_eq!(parse_line(broken.as_bytes()), Err(Bad::Invalid));
}

#[test]
fn a_sample_says_its_step_and_whether_it_ends_one() {
    let line = r#"{"v":1,"type":"sample","seq":3,"time":2.5,"devices":[{"index":0,"allocated":1,"reserved":2,"step":120,"at_step_end":true},{"index":1,"allocated":1,"reserved":2,"step":120},{"index":2,"allocated":1,"reserved":2,"at_step_end":true},{"index":3,"allocated":1,"reserved":2,"step":null}]}"#;
    let Ok(Message::Sample { devices, .. }) = parse_line(line.as_bytes()) else {
        panic!("sample did not parse");
    };
    assert_eq!(devices[0].step_end(), Some(120));
    assert_eq!(
        (devices[1].step, devices[1].at_step_end),
        (Some(120), false)
    );
    // A step end without a step is none.
    assert_eq!((devices[2].step, devices[2].step_end()), (None, None));
    assert_eq!(devices[3].step, None);
    let negative = line.replace(r#""step":120,"at"#, r#""step":-1,"at"#);
    assert_eq!(parse_line(negative.as_bytes()), Err(Bad::Invalid));
}

const SEGMENTS: &str = r#"{"v":1,"type":"segments","time":1764412360.0,"took":0.004,"devices":[{"index":0,"pools":[{"pool":"large","expandable":false,"segments":2,"reserved":44040192,"live":2097152,"pending_free":0,"free":41943040,"largest_free":20971520,"free_blocks":[[16777216,2,41943040]],"pinned":{"segments":2,"reserved":44040192,"live":2097152}}],"strips":[{"pool":"large","expandable":false,"size":22020096,"live":1048576,"free":20971520,"largest_free":20971520,"pinned":true,"runs":[[1048576,"l"],[20971520,"f"]]}],"strips_left_out":1}]}"#;

#[test]
fn a_segment_map_is_read_and_must_add_up() {
    let Ok(Message::Segments(report)) = parse_line(SEGMENTS.as_bytes()) else {
        panic!("segments did not parse");
    };
    let d = &report.devices[0];
    assert_eq!(
        (d.largest_free(), d.pinned().segments, d.reserved()),
        (20971520, 2, 44040192)
    );
    assert_eq!(d.pools[0].free_blocks[0].blocks, 2);
    assert_eq!(
        d.strips[0].runs[1],
        (20971520, crate::sample::pool::RunState::Free)
    );

    // A pool whose live, pending and free bytes are not its reserved bytes, a strip whose
    // runs are not its size, a bucket that is not a power of two: not used.
    for (from, to) in [
        (r#""live":2097152,"pending"#, r#""live":2097153,"pending"#),
        (r#"[20971520,"f"]]"#, r#"[20971521,"f"]]"#),
        ("[[16777216,2,", "[[16777215,2,"),
        (
            r#""largest_free":20971520,"free_blocks""#,
            r#""largest_free":41943041,"free_blocks""#,
        ),
    ] {
        let bad = SEGMENTS.replacen(from, to, 1);
        assert_ne!(bad, SEGMENTS, "{from}");
        assert_eq!(parse_line(bad.as_bytes()), Err(Bad::Invalid), "{to}");
    }
}

#[test]
fn a_sites_report_is_read_with_its_texts_cut() {
    let long = "x".repeat(100_000);
    let line = format!(
        r#"{{"v":1,"type":"sites","time":5.0,"id":9,"state":"done","window":60.0,"entries":3,"dropped":null,"cost":{{"cpu":0.01}},"stopped":"{long}","devices":[{{"index":0,"live":[{{"site":"{long}","bytes":10,"count":1}}],"live_bytes":10,"live_blocks":1,"growth":[],"growth_bytes":0}}]}}"#
    );
    let Ok(Message::Sites(report)) = parse_line(line.as_bytes()) else {
        panic!("sites did not parse");
    };
    let site = &report.devices[0].live[0].site;
    assert_eq!(
        site.chars().count(),
        crate::sample::pool::MAX_SITE_TEXT_CHARS
    );
    assert!(report.stopped.as_ref().is_some_and(|s| s.len() <= 256));
    assert_eq!(report.dropped, None, "unknown stays unknown");

    // Sites that hold more than the device's live bytes, a growth whose frees outnumber its
    // allocations, three callers: not used.
    for (from, to) in [
        (r#""live_bytes":10"#, r#""live_bytes":9"#),
        (
            r#""growth":[]"#,
            r#""growth":[{"site":"a","bytes":1,"allocs":1,"frees":2}],"x":0"#,
        ),
        (
            r#""bytes":10,"count":1"#,
            r#""via":["a","b","c"],"bytes":10,"count":1"#,
        ),
    ] {
        let bad = line.replacen(from, to, 1);
        assert_ne!(bad, line, "{from}");
        assert_eq!(parse_line(bad.as_bytes()), Err(Bad::Invalid), "{to}");
    }
}

#[test]
fn a_hello_says_which_requests_its_agent_answers() {
    let line =
        r#"{"v":1,"type":"hello","time":1.0,"pid":7,"devices":[],"requests":["sites","other"]}"#;
    let Ok(Message::Hello(hello)) = parse_line(line.as_bytes()) else {
        panic!("hello did not parse");
    };
    assert!(hello.answers("sites") && !hello.answers("nothing"));
    let old = r#"{"v":1,"type":"hello","time":1.0,"pid":7,"devices":[]}"#;
    let Ok(Message::Hello(hello)) = parse_line(old.as_bytes()) else {
        panic!("hello did not parse");
    };
    assert!(
        !hello.answers("sites"),
        "an agent that does not say answers none"
    );
}

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

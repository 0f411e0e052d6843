//! The reader against hand-made pickles (good, hostile, cut), the shape's refusals, and the
//! reductions against the spec's rules, figures worked out by hand.

use super::pickle::{self, PickleError, Value};
use super::shape::{self, Action, Block, BlockState, Entry, Segment, ShapeError, Stacks};
use super::*;
use crate::sample::pool::{RunState, MAX_RUNS, MAX_STRIPS};

const MIB: u64 = 1 << 20;

/// A Python value, written as protocol 4's pickler writes it.
#[derive(Clone)]
pub(super) enum Py {
    None,
    Int(i128),
    Str(String),
    List(Vec<Py>),
    Dict(Vec<(Py, Py)>),
}

pub(super) fn s(text: &str) -> Py {
    Py::Str(text.into())
}

impl Py {
    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Py::None => out.push(b'N'),
            Py::Int(i) => {
                if (0..256).contains(i) {
                    out.extend([b'K', *i as u8]);
                } else if i32::try_from(*i).is_ok() {
                    out.push(b'J');
                    out.extend((*i as i32).to_le_bytes());
                } else {
                    // LONG1: little-endian two's complement, as short as the value allows.
                    let mut bytes = i.to_le_bytes().to_vec();
                    while bytes.len() > 1 {
                        let last = bytes[bytes.len() - 1];
                        let before = bytes[bytes.len() - 2];
                        if (last == 0 && before & 0x80 == 0) || (last == 0xff && before & 0x80 != 0)
                        {
                            bytes.pop();
                        } else {
                            break;
                        }
                    }
                    out.extend([0x8a, bytes.len() as u8]);
                    out.extend(bytes);
                }
            }
            Py::Str(t) => {
                out.push(b'X');
                out.extend((t.len() as u32).to_le_bytes());
                out.extend(t.as_bytes());
            }
            Py::List(items) => {
                out.push(b']');
                if !items.is_empty() {
                    out.push(b'(');
                    for i in items {
                        i.write(out);
                    }
                    out.push(b'e');
                }
            }
            Py::Dict(pairs) => {
                out.push(b'}');
                if !pairs.is_empty() {
                    out.push(b'(');
                    for (k, v) in pairs {
                        k.write(out);
                        v.write(out);
                    }
                    out.push(b'u');
                }
            }
        }
    }

    pub(super) fn pickle(&self) -> Vec<u8> {
        let mut out = vec![0x80, 4];
        self.write(&mut out);
        out.push(b'.');
        out
    }
}

fn dict(pairs: Vec<(&str, Py)>) -> Py {
    Py::Dict(pairs.into_iter().map(|(k, v)| (s(k), v)).collect())
}

fn block(size: u64, state: &str) -> Py {
    dict(vec![
        ("size", Py::Int(size.into())),
        ("state", s(state)),
        ("frames", Py::List(vec![])),
    ])
}

fn segment_py(device: i128, blocks: Vec<Py>) -> Py {
    dict(vec![
        ("device", Py::Int(device)),
        ("address", Py::Int(0x7f00_0000_0000)),
        ("total_size", Py::Int(4 * MIB as i128)),
        ("segment_type", s("large")),
        ("blocks", Py::List(blocks)),
    ])
}

fn snapshot_py(segments: Vec<Py>) -> Py {
    dict(vec![
        ("segments", Py::List(segments)),
        ("device_traces", Py::List(vec![Py::List(vec![])])),
    ])
}

fn decode(bytes: &[u8]) -> Result<pickle::Pickle, PickleError> {
    pickle::decode(bytes, PICKLE_LIMITS)
}

fn read_bytes(bytes: &[u8]) -> Result<shape::Snapshot, String> {
    let p = decode(bytes).map_err(|e| e.to_string())?;
    shape::read(&p, SHAPE_LIMITS).map_err(|e| e.to_string())
}

#[test]
fn a_snapshot_decodes_with_addresses_beyond_i64_and_shared_frames() {
    // An address of 64 bits (LONG1 of 9 bytes), and one frames list shared by two blocks
    // through the memo, as torch shares a traceback.
    let mut bytes = vec![0x80, 4];
    let frames = dict(vec![
        ("filename", s("/home/me/train.py")),
        ("line", Py::Int(3)),
        ("name", s("step")),
    ]);
    bytes.extend([b'}', b'(']);
    s("segments").write(&mut bytes);
    bytes.extend([b']', b'(', b'}', b'(']);
    for (k, v) in [
        ("device", Py::Int(0)),
        ("address", Py::Int(u64::MAX as i128)),
        ("total_size", Py::Int(2 * MIB as i128)),
        ("segment_type", s("small")),
    ] {
        s(k).write(&mut bytes);
        v.write(&mut bytes);
    }
    s("blocks").write(&mut bytes);
    bytes.extend([b']', b'(']);
    // Block 1: its frames list memoised as 0.
    bytes.extend([b'}', b'(']);
    s("size").write(&mut bytes);
    Py::Int(MIB as i128).write(&mut bytes);
    s("state").write(&mut bytes);
    s("active_allocated").write(&mut bytes);
    s("frames").write(&mut bytes);
    bytes.extend([b']', 0x94, b'(']);
    frames.write(&mut bytes);
    bytes.extend([b'e', b'u']);
    // Block 2: the same list, fetched.
    bytes.extend([b'}', b'(']);
    s("size").write(&mut bytes);
    Py::Int(MIB as i128).write(&mut bytes);
    s("state").write(&mut bytes);
    s("active_allocated").write(&mut bytes);
    s("frames").write(&mut bytes);
    bytes.extend([b'h', 0, b'u']);
    bytes.extend([b'e', b'u', b'e', b'u', b'.']);
    let snap = read_bytes(&bytes).expect("read");
    assert_eq!(snap.segments.len(), 1);
    assert_eq!(snap.segments[0].address, u64::MAX);
    assert_eq!(snap.segments[0].pool, "small");
    let stacks: Vec<_> = snap.segments[0].blocks.iter().map(|b| b.stack).collect();
    assert_eq!(stacks, [Some(0), Some(0)], "one stack, read once");
    assert_eq!(snap.stacks.get(0).next().map(|f| f.line), Some(3));
    assert!(!snap.has_traces);
}

#[test]
fn every_bad_input_is_one_error_that_says_what() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "it is empty"),
        (b"{\"time\": 1}\n".to_vec(), "not a pickle"),
        (vec![0x80, 1, b'N', b'.'], "protocol 1"),
        (vec![0x80, 4, b'}'], "cut short"),
        (snapshot_py(vec![]).pickle()[..20].to_vec(), "cut short"),
        // A class instance: GLOBAL names it, nothing is run.
        (
            [
                &[0x80, 2, b'c'][..],
                b"os\nsystem\n",
                &[b'(', b'X', 2, 0, 0, 0],
                b"id",
                b"tR.",
            ]
            .concat(),
            "GLOBAL os.system",
        ),
        (
            [
                &[0x80, 4, 0x8c, 5][..],
                b"numpy",
                &[0x8c, 7],
                b"ndarray",
                &[0x93, b'.'],
            ]
            .concat(),
            "STACK_GLOBAL numpy.ndarray",
        ),
        (vec![0x80, 4, b'N', b')', b'R', b'.'], "REDUCE"),
        (vec![0x80, 4, b'N', b'}', b'b', b'.'], "BUILD"),
        (vec![0x80, 4, b'N', b'2', b'.'], "opcode 0x32"),
        (vec![0x80, 4, b'a', b'.'], "malformed"),
        (vec![0x80, 4, b'h', 9, b'.'], "memo get"),
        (vec![0x80, 4, b'.'], "nothing on the stack"),
        (
            dict(vec![("a", Py::Int(1)), ("b", Py::None)]).pickle(),
            "dict without `segments` (its keys: `a`, `b`)",
        ),
        (
            Py::List(vec![Py::Int(1)]).pickle(),
            "a pickle of a list, not a PyTorch memory snapshot",
        ),
        (Py::Int(3).pickle(), "a pickle of an int"),
        (
            snapshot_py(vec![segment_py(
                0,
                vec![block(MIB, "active_awaiting_free")],
            )])
            .pickle(),
            "state `active_awaiting_free` is none of",
        ),
        (
            snapshot_py(vec![segment_py(-1, vec![])]).pickle(),
            "segment 0: `device` is -1",
        ),
        (
            snapshot_py(vec![segment_py(5000, vec![])]).pickle(),
            "device 5000, beyond the 1024 devices",
        ),
        (
            dict(vec![("segments", Py::Int(1))]).pickle(),
            "`segments` is an int, not a list",
        ),
    ];
    for (bytes, said) in cases {
        let err = read_bytes(&bytes).expect_err(said);
        assert!(err.contains(said), "{said:?} not in {err:?}");
        assert!(!err.contains('\n'), "one line: {err:?}");
    }
}

#[test]
fn a_huge_declared_string_costs_only_the_bytes_that_are_there() {
    // BINUNICODE8 of 2^60 bytes: refused before anything is read.
    let mut bytes = vec![0x80, 4, 0x8d];
    bytes.extend((1u64 << 60).to_le_bytes());
    let err = decode(&bytes).expect_err("refused");
    assert!(matches!(err, PickleError::LongString { .. }), "{err}");
    // A length within the bound whose bytes are not there: cut short, nothing reserved.
    let mut bytes = vec![0x80, 4, b'X'];
    bytes.extend((1u32 << 20).to_le_bytes());
    bytes.extend(b"abc");
    assert!(matches!(decode(&bytes), Err(PickleError::Truncated(_))));
    // LONG4 declaring an int of 2^31 - 1 bytes: refused before anything is read.
    let mut bytes = vec![0x80, 4, 0x8b];
    bytes.extend(i32::MAX.to_le_bytes());
    assert!(matches!(decode(&bytes), Err(PickleError::LongInt { .. })));
    // BINBYTES8: the same bound.
    let mut bytes = vec![0x80, 4, 0x8e];
    bytes.extend(u64::MAX.to_le_bytes());
    assert!(matches!(
        decode(&bytes),
        Err(PickleError::LongString { .. })
    ));
}

#[test]
fn deep_nesting_and_many_marks_are_refused_without_recursion() {
    // 200,000 lists, each appended into the one before: a 400 KB pickle nested 200,000 deep.
    let n = 200_000;
    let mut bytes = vec![0x80, 4];
    bytes.extend(std::iter::repeat_n(b']', n));
    bytes.extend(std::iter::repeat_n(b'a', n - 1));
    bytes.push(b'.');
    let err = decode(&bytes).expect_err("too deep");
    assert_eq!(err, PickleError::TooDeep(PICKLE_LIMITS.depth));
    let mut marks = vec![0x80, 4];
    marks.extend(std::iter::repeat_n(b'(', 100_000));
    assert_eq!(
        decode(&marks).expect_err("marks"),
        PickleError::TooManyMarks(PICKLE_LIMITS.marks)
    );
}

#[test]
fn a_list_of_many_values_stops_at_the_bound_of_values() {
    let limits = pickle::Limits {
        values: 10_000,
        ..PICKLE_LIMITS
    };
    let mut bytes = vec![0x80, 4, b']', b'('];
    for _ in 0..100_000 {
        bytes.extend([b'K', 1]);
    }
    bytes.extend([b'e', b'.']);
    assert_eq!(
        pickle::decode(&bytes[..], limits).expect_err("bound"),
        PickleError::TooManyValues(10_000)
    );
    // One value fetched again and again through the memo: each fetch is held too.
    let mut bytes = vec![0x80, 4, b']', 0x94, b'('];
    for _ in 0..100_000 {
        bytes.extend([b'h', 0]);
    }
    assert_eq!(
        pickle::decode(&bytes[..], limits).expect_err("bound"),
        PickleError::TooManyValues(10_000)
    );
    // The same string over and over: stored once, each place on the stack still counted.
    let mut bytes = vec![0x80, 4, b'('];
    for _ in 0..100_000 {
        bytes.extend([0x8c, 1, b'x']);
    }
    assert_eq!(
        pickle::decode(&bytes[..], limits).expect_err("bound"),
        PickleError::TooManyValues(10_000)
    );
}

#[test]
fn a_self_referencing_list_is_read_and_refused_by_its_shape() {
    // l = []; l.append(l): the memo makes a cycle, which the shape never follows.
    let bytes = [0x80, 4, b']', 0x94, b'h', 0, b'a', b'.'];
    let p = decode(&bytes).expect("decoded");
    assert!(matches!(p.get(p.root), Value::List(items) if items == [p.root]));
    let err = shape::read(&p, SHAPE_LIMITS).expect_err("not a snapshot");
    assert!(matches!(err, ShapeError::NotSnapshot(_)), "{err}");
    // A segments list that holds the root dict itself: a field of the wrong shape.
    let bytes = [
        &[0x80, 4, b'}', 0x94, 0x8c, 8][..],
        b"segments",
        &[b']', b'h', 0, b'a', b's', b'.'],
    ]
    .concat();
    let err = read_bytes(&bytes).expect_err("refused");
    assert!(err.contains("segment 0: it has no `device`"), "{err}");
}

#[test]
fn a_pickled_memory_snapshot_list_is_read_as_segments_without_traces() {
    let list = Py::List(vec![segment_py(0, vec![block(4 * MIB, "inactive")])]);
    let snap = read_bytes(&list.pickle()).expect("read");
    assert_eq!(snap.segments.len(), 1);
    assert!(!snap.has_traces);
}

#[test]
fn bounds_of_the_shape_are_one_line_each() {
    let limits = shape::Limits {
        segments: 2,
        blocks: 3,
        entries: 2,
        frames: 2,
        devices: 4,
    };
    let read = |py: Py| {
        let p = decode(&py.pickle()).expect("decoded");
        shape::read(&p, limits).expect_err("bound").to_string()
    };
    let seg = || segment_py(0, vec![block(MIB, "inactive"), block(MIB, "inactive")]);
    assert!(read(snapshot_py(vec![seg(), seg(), seg()])).contains("3 segments, more than 2"));
    assert!(read(snapshot_py(vec![seg(), seg()])).contains("more than 3 blocks"));
    let frame = dict(vec![
        ("filename", s("a.py")),
        ("line", Py::Int(1)),
        ("name", s("f")),
    ]);
    let deep = dict(vec![
        ("size", Py::Int(1)),
        ("state", s("active_allocated")),
        (
            "frames",
            Py::List(vec![frame.clone(), frame.clone(), frame]),
        ),
    ]);
    assert!(read(snapshot_py(vec![segment_py(0, vec![deep])]))
        .contains("a stack of 3 frames, more than 2"));
    let entry = dict(vec![
        ("action", s("alloc")),
        ("addr", Py::Int(1)),
        ("size", Py::Int(1)),
    ]);
    let traces = dict(vec![
        ("segments", Py::List(vec![])),
        (
            "device_traces",
            Py::List(vec![Py::List(vec![entry.clone(), entry.clone(), entry])]),
        ),
    ]);
    assert!(read(traces).contains("more than 2 trace entries"));
}

fn seg(device: u32, address: u64, blocks: &[(u64, BlockState)]) -> Segment {
    Segment {
        device,
        address,
        total_size: blocks.iter().map(|b| b.0).sum(),
        pool: "large".into(),
        expandable: false,
        blocks: blocks
            .iter()
            .map(|&(size, state)| Block {
                size,
                state,
                stack: None,
            })
            .collect(),
    }
}

use BlockState::{Free, Live, Pending};

#[test]
fn a_segment_map_follows_the_rule() {
    let mut small = seg(0, 50, &[(1000, Live), (3000, Free), (5000, Free)]);
    small.pool = "small".into();
    let mut exp = seg(0, 60, &[(MIB, Live)]);
    exp.expandable = true;
    let segments = vec![
        // Pinned: live, and free 3/4 of it exactly.
        seg(0, 10, &[(100, Free), (100, Live), (200, Free), (400, Free)]),
        // Not pinned: free just under 3/4.
        seg(0, 20, &[(251, Live), (749, Free)]),
        seg(0, 30, &[(300, Pending), (700, Free)]),
        small,
        exp,
        seg(1, 5, &[(8, Live)]),
    ];
    let devices = segments::reduce(&segments);
    assert_eq!(devices.iter().map(|d| d.index).collect::<Vec<_>>(), [0, 1]);
    let d = &devices[0];
    let names: Vec<_> = d
        .pools
        .iter()
        .map(|p| (p.pool.as_str(), p.expandable))
        .collect();
    assert_eq!(names, [("large", false), ("large", true), ("small", false)]);
    let large = &d.pools[0];
    assert_eq!(large.segments, 3);
    assert_eq!(large.reserved, 800 + 1000 + 1000);
    assert_eq!(large.live, 100 + 251);
    assert_eq!(large.pending_free, 300);
    assert_eq!(large.free, 700 + 749 + 700);
    assert_eq!(large.largest_free, 749);
    assert_eq!(
        (
            large.pinned.segments,
            large.pinned.reserved,
            large.pinned.live
        ),
        (1, 800, 100)
    );
    // floor(log2): 100 → 64, 200 → 128, 400 → 256, 749 → 512, 700 → 512.
    let buckets: Vec<_> = large
        .free_blocks
        .iter()
        .map(|b| (b.at_least, b.blocks, b.bytes))
        .collect();
    assert_eq!(
        buckets,
        [(64, 1, 100), (128, 1, 200), (256, 1, 400), (512, 2, 1449)]
    );
    let small = &d.pools[2];
    assert_eq!(
        (small.free, small.largest_free, small.live),
        (8000, 5000, 1000)
    );
    assert_eq!(small.pinned.segments, 1, "8000 of 9000 free");
    // Strips: the pinned ones first, most free first; then by size, address breaking ties.
    let order: Vec<_> = d.strips.iter().map(|s| (s.size, s.pinned)).collect();
    assert_eq!(
        order,
        [
            (9000, true),
            (800, true),
            (MIB, false),
            (1000, false),
            (1000, false)
        ]
    );
    assert_eq!(
        d.strips[1].runs,
        [
            (100, RunState::Free),
            (100, RunState::Live),
            (600, RunState::Free)
        ]
    );
    let same_size: Vec<_> = d.strips[3..].iter().map(|s| s.live).collect();
    assert_eq!(same_size, [251, 0], "address 20 before 30");
    assert_eq!(d.strips_left_out, 0);
    assert_eq!(d.largest_free(), 5000);
}

#[test]
fn strips_stop_at_32_and_runs_at_64() {
    let mut segments: Vec<Segment> = (0..40).map(|i| seg(0, i, &[(100 + i, Live)])).collect();
    // 100 alternating blocks: 100 runs, of which the 64th and after are one mixed run.
    let blocks: Vec<(u64, BlockState)> = (0..100)
        .map(|i| (10, if i % 2 == 0 { Live } else { Free }))
        .collect();
    segments.push(seg(0, 99, &blocks));
    let d = &segments::reduce(&segments)[0];
    assert_eq!(d.strips.len(), MAX_STRIPS);
    assert_eq!(d.strips_left_out, 41 - MAX_STRIPS as u64);
    let many = d
        .strips
        .iter()
        .find(|s| s.size == 1000)
        .expect("drawn: the largest");
    assert_eq!(many.runs.len(), MAX_RUNS);
    assert_eq!(many.runs[MAX_RUNS - 1], (10 * (100 - 63), RunState::Mixed));
    assert_eq!(many.runs.iter().map(|r| r.0).sum::<u64>(), 1000);
    // Blocks short of the segment: the rest is free at its end.
    let mut short = seg(0, 1, &[(10, Live)]);
    short.total_size = 30;
    assert_eq!(
        segments::runs(&short),
        [(10, RunState::Live), (20, RunState::Free)]
    );
}

fn entry(action: Action, addr: u64, size: u64, stack: Option<u32>) -> Entry {
    Entry {
        action,
        addr: Some(addr),
        size: Some(size),
        device_free: None,
        time_us: None,
        stack,
    }
}

/// Stacks of one job frame each: `a.py:1 in f0`, `a.py:2 in f1`...
fn stacks(n: usize) -> Stacks {
    let mut snap = shape::Snapshot::default();
    let frames: Vec<Py> = (0..n)
        .map(|i| {
            Py::List(vec![dict(vec![
                ("filename", s("/job/a.py")),
                ("line", Py::Int(i as i128 + 1)),
                ("name", s(&format!("f{i}"))),
            ])])
        })
        .collect();
    let blocks = frames
        .into_iter()
        .map(|f| {
            dict(vec![
                ("size", Py::Int(1)),
                ("state", s("inactive")),
                ("frames", f),
            ])
        })
        .collect();
    let p = decode(&snapshot_py(vec![segment_py(0, blocks)]).pickle()).expect("decoded");
    snap.stacks = shape::read(&p, SHAPE_LIMITS).expect("read").stacks;
    snap.stacks
}

#[test]
fn growth_counts_what_the_trace_allocated_and_did_not_free() {
    let st = stacks(3);
    use Action::*;
    let trace = vec![
        entry(Alloc, 100, 10, Some(0)),
        entry(Alloc, 200, 20, Some(0)),
        entry(FreeRequested, 100, 10, None),
        // A completion after its request: already counted.
        entry(FreeCompleted, 100, 10, None),
        // A completion with no request seen ends the allocation.
        entry(Alloc, 300, 30, Some(1)),
        entry(FreeCompleted, 300, 30, None),
        // A free of what was allocated before the trace: nothing.
        entry(FreeRequested, 999, 5, None),
        // A second allocation at one address: the first was freed.
        entry(Alloc, 400, 40, Some(2)),
        entry(Alloc, 400, 41, Some(2)),
        // No frames: not a site.
        entry(Alloc, 500, 50, None),
    ];
    let sites = by_site::reduce(&[], &[(0, trace)], &st);
    let d = &sites[0];
    let g: Vec<_> = d
        .growth
        .iter()
        .map(|g| (g.site.as_str(), g.bytes, g.allocs, g.frees))
        .collect();
    assert_eq!(
        g,
        [
            ("/job/a.py:3 in f2", 41, 2, 1),
            ("/job/a.py:1 in f0", 20, 2, 1)
        ]
    );
    assert_eq!(d.growth_bytes, 61);
    assert!(d.live.is_empty() && d.live_bytes == 0);
}

#[test]
fn live_sites_group_by_site_and_count_the_unattributed_apart() {
    let st = stacks(2);
    let mut s0 = seg(
        0,
        1,
        &[(10, Live), (20, Live), (5, Live), (7, Pending), (9, Free)],
    );
    s0.blocks[0].stack = Some(0);
    s0.blocks[1].stack = Some(1);
    let mut s1 = seg(0, 2, &[(20, Live)]);
    s1.blocks[0].stack = Some(0);
    let sites = by_site::reduce(&[s0, s1], &[], &st);
    let d = &sites[0];
    assert_eq!(
        (d.live_bytes, d.live_blocks, d.live_unattributed),
        (55, 4, 5)
    );
    let live: Vec<_> = d
        .live
        .iter()
        .map(|s| (s.site.as_str(), s.bytes, s.count))
        .collect();
    // 30 bytes each: the tie is broken by the site's text.
    assert_eq!(
        live,
        [("/job/a.py:1 in f0", 30, 2), ("/job/a.py:2 in f1", 20, 1)]
    );
}

#[test]
fn an_oom_is_worked_back_to_the_pool_it_failed_in() {
    let st = stacks(1);
    use Action::*;
    let now = [seg(0, 1, &[(600, Live), (200, Free), (200, Free)])];
    let segs: Vec<&Segment> = now.iter().collect();
    let oom = Entry {
        action: Oom,
        addr: None,
        size: Some(300),
        device_free: Some(50),
        time_us: Some(2_000_000),
        stack: Some(0),
    };
    // At the snapshot: no event after it.
    let at = ooms::ooms(0, std::slice::from_ref(&oom), &segs, &st, Some(false));
    assert_eq!(at.len(), 1);
    let o = &at[0];
    assert_eq!(
        (o.reserved, o.live, o.split_free),
        (Some(1000), Some(600), Some(400))
    );
    assert_eq!(
        (o.largest_free, o.events_after, o.time),
        (Some(200), 0, Some(2.0))
    );
    assert_eq!(o.class, "fragmentation", "{}", o.why);
    assert!(
        o.why.contains("its largest free block was 200 B"),
        "{}",
        o.why
    );
    assert!(!o.advice.is_empty());
    assert_eq!(o.site.as_deref(), Some("/job/a.py:1 in f0"));
    // After it: a block freed (live then), a segment allocated (not reserved then).
    let later = [
        oom,
        entry(FreeRequested, 5, 300, None),
        entry(FreeCompleted, 5, 300, None),
        entry(SegmentAlloc, 9, 200, None),
        entry(Alloc, 9, 200, Some(0)),
    ];
    let now = [
        seg(0, 1, &[(300, Live), (700, Free)]),
        seg(0, 9, &[(200, Live)]),
    ];
    let segs: Vec<&Segment> = now.iter().collect();
    let o = &ooms::ooms(0, &later, &segs, &st, None)[0];
    assert_eq!(
        (o.reserved, o.live, o.pending_free),
        (Some(1000), Some(600), Some(0))
    );
    assert_eq!((o.largest_free, o.events_after), (None, 4));
    // A trace that does not add up: the pool then is not known, and the class says why.
    let broken = [later[0].clone(), entry(SegmentAlloc, 9, 1 << 40, None)];
    let o = &ooms::ooms(0, &broken, &segs, &st, None)[0];
    assert_eq!((o.reserved, o.class.as_str()), (None, "uncertain"));
}

#[test]
fn fragmentation_is_raised_past_the_detectors_thresholds() {
    const GIB: u64 = 1 << 30;
    let pinned: Vec<Segment> = (0..12)
        .map(|i| {
            seg(
                0,
                i,
                &[
                    (900 * MIB, Free),
                    (8 * MIB, Live),
                    (2 * GIB - 908 * MIB, Free),
                ],
            )
        })
        .collect();
    let segs: Vec<&Segment> = pinned.iter().collect();
    let found = findings::findings(0, &segs, None);
    assert_eq!(found.len(), 1);
    let f = &found[0];
    assert_eq!(f.kind, "fragmentation");
    assert!(
        f.message
            .contains("12 segments of 2.00 GiB each pinned by at most 8.00 MiB live each"),
        "{}",
        f.message
    );
    assert!(!f.advice.is_empty());
    // Under 1 GiB in split pieces: nothing.
    let few = [seg(0, 1, &[(100 * MIB, Free), (MIB, Live)])];
    let segs: Vec<&Segment> = few.iter().collect();
    assert!(findings::findings(0, &segs, None).is_empty());
    // Wholly free segments are cached, not split: nothing either.
    let cached = [seg(0, 1, &[(4 * GIB, Free)]), seg(0, 2, &[(GIB, Live)])];
    let segs: Vec<&Segment> = cached.iter().collect();
    assert!(findings::findings(0, &segs, None).is_empty());
}

#[test]
fn a_snapshot_file_is_told_by_its_content_or_its_name() {
    let dir = std::env::temp_dir().join(format!("strata-torchsnap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let pickle = dir.join("mem.bin");
    std::fs::write(&pickle, snapshot_py(vec![]).pickle()).expect("write");
    assert!(is_snapshot_file(&pickle));
    let gz = dir.join("mem2.bin");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, &snapshot_py(vec![]).pickle()).expect("gz");
    std::fs::write(&gz, enc.finish().expect("gz")).expect("write");
    assert!(is_snapshot_file(&gz));
    let json = dir.join("rec.jsonl");
    std::fs::write(&json, b"{\"time\": 1}\n").expect("write");
    assert!(!is_snapshot_file(&json));
    let named = dir.join("not_really.pickle");
    std::fs::write(&named, b"hello").expect("write");
    assert!(is_snapshot_file(&named));
    assert!(!is_snapshot_file(Path::new("-")));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_gzip_bomb_is_refused_at_the_bound_of_bytes() {
    // 64 MiB of zeros, gzip'd to about 64 KiB, read with a bound of 1 MiB.
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let mut bytes = vec![0x80, 4, b'('];
    bytes.resize(64 << 20, b'N');
    std::io::Write::write_all(&mut enc, &bytes).expect("gz");
    let gz = enc.finish().expect("gz");
    assert!(gz.len() < 1 << 20);
    let limits = pickle::Limits {
        bytes: 1 << 20,
        values: 1 << 30,
        ..PICKLE_LIMITS
    };
    let decoder = flate2::read::MultiGzDecoder::new(&gz[..]);
    assert_eq!(
        pickle::decode(decoder, limits).expect_err("bomb"),
        PickleError::TooLarge(1 << 20)
    );
    let said = read_error(PickleError::TooLarge(1 << 20), true);
    assert!(
        said.line.contains("decompresses to more than"),
        "{}",
        said.line
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    pub(super) const FIXTURE: &[u8] = include_bytes!("../../tests/torchsnap/fragmented_oom.pickle");

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Mutations of a real-shaped snapshot: bytes flipped, inserted, cut. The reader
        /// returns (a snapshot or an error), never panics, and holds no more than its bound.
        #[test]
        fn a_mutated_snapshot_never_panics_and_stays_bounded(
            flips in proptest::collection::vec((0usize..FIXTURE.len(), any::<u8>()), 0..8),
            insert in proptest::option::of((0usize..FIXTURE.len(), proptest::collection::vec(any::<u8>(), 1..16))),
            cut in proptest::option::of(0usize..FIXTURE.len()),
        ) {
            let mut bytes = FIXTURE.to_vec();
            for (at, b) in flips {
                bytes[at] = b;
            }
            if let Some((at, more)) = insert {
                bytes.splice(at..at, more);
            }
            if let Some(at) = cut {
                bytes.truncate(at);
            }
            let limits = pickle::Limits { values: 50_000, ..PICKLE_LIMITS };
            if let Ok(p) = pickle::decode(&bytes[..], limits) {
                prop_assert!(p.len() as u64 <= limits.values);
                if let Ok(snap) = shape::read(&p, SHAPE_LIMITS) {
                    let read = SnapshotFile { snapshot: snap, bytes: 0, gzip: false, modified: None };
                    let a = analyze(&read);
                    let text = command::text(&a, "x");
                    prop_assert!(!text.contains('\x1b'), "an escape reached the text");
                    for d in &a.segments.devices {
                        for s in &d.strips {
                            prop_assert_eq!(s.runs.iter().map(|r| r.0).sum::<u64>(), s.size);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn the_committed_fixture_reads_whole() {
    let snap = read_bytes(fuzz::FIXTURE).expect("the fixture");
    assert_eq!(snap.segments.len(), 22);
    assert_eq!(snap.traces.len(), 2);
    assert!(snap.traces[1].1.iter().any(|e| e.action == Action::Oom));
    assert_eq!(snap.expandable_setting, Some(true));
}

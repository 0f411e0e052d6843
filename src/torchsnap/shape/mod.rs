//! The fields strata uses of a decoded snapshot, typed: segments with their blocks, each
//! device's trace, and every distinct stack of frames once. Fields strata does not use are
//! never read, so nothing is walked but the snapshot's own shape (a dict of lists of dicts),
//! to a fixed depth; a list shared by many blocks (torch shares each distinct traceback) is
//! read once. Bounds: segments, blocks, trace entries, devices and frames per stack, each
//! one line of error.

mod reader;

use super::pickle::{Id, Pickle, Value};
use hashbrown::HashMap;
use reader::Reader;
use std::rc::Rc;

/// How much a snapshot may hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) segments: usize,
    /// Blocks over every segment.
    pub(crate) blocks: usize,
    /// Trace entries over every device.
    pub(crate) entries: usize,
    pub(crate) frames: usize,
    /// Device indexes, 0 to this less one.
    pub(crate) devices: u32,
}

/// One frame of a stack, as torch writes it: `filename`, `line`, `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) file: Rc<str>,
    pub(crate) line: i64,
    pub(crate) name: Rc<str>,
}

/// A stack's place in [`Stacks`].
pub(crate) type StackId = u32;

/// Every distinct stack, innermost frame first: each as a run of places in the table of
/// distinct frames (torch shares a frame between the tracebacks that hold it).
#[derive(Debug, Default)]
pub(crate) struct Stacks {
    table: Vec<Frame>,
    places: Vec<u32>,
    spans: Vec<(usize, usize)>,
}

impl Stacks {
    /// The frames of a stack, innermost first.
    pub(crate) fn get(&self, id: StackId) -> impl Iterator<Item = &Frame> + '_ {
        self.spans
            .get(id as usize)
            .and_then(|&(start, end)| self.places.get(start..end))
            .unwrap_or(&[])
            .iter()
            .filter_map(|&i| self.table.get(i as usize))
    }

    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }
}

/// A block's state, as the allocator writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockState {
    /// `active_allocated`: held by a tensor.
    Live,
    /// `active_pending_free`: freed, waiting on a stream.
    Pending,
    /// `inactive`: free, cached.
    Free,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    pub(crate) size: u64,
    pub(crate) state: BlockState,
    /// Where it was allocated; `None` without frames (allocated before recording began).
    pub(crate) stack: Option<StackId>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) device: u32,
    pub(crate) address: u64,
    pub(crate) total_size: u64,
    /// `segment_type`: `large` or `small`.
    pub(crate) pool: String,
    pub(crate) expandable: bool,
    pub(crate) blocks: Vec<Block>,
}

/// What a trace entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Oom,
    /// `snapshot`, `annotate` and whatever a later torch adds.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) action: Action,
    pub(crate) addr: Option<u64>,
    pub(crate) size: Option<u64>,
    /// An `oom` entry's: what CUDA said was free.
    pub(crate) device_free: Option<u64>,
    pub(crate) time_us: Option<i64>,
    pub(crate) stack: Option<StackId>,
}

/// A snapshot's segments and traces.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub(crate) segments: Vec<Segment>,
    /// Each device's trace: (device index, entries in order).
    pub(crate) traces: Vec<(u32, Vec<Entry>)>,
    /// Whether the file has `device_traces` at all (a pickled `memory_snapshot()` list has
    /// not).
    pub(crate) has_traces: bool,
    pub(crate) stacks: Stacks,
    /// `allocator_settings.expandable_segments`, where the file says.
    pub(crate) expandable_setting: Option<bool>,
}

/// Why a pickle is not a snapshot strata can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ShapeError {
    /// Another program's pickle: what it is.
    #[error("{0}")]
    NotSnapshot(String),
    /// A snapshot with a field of another shape.
    #[error("{0}")]
    Field(String),
    /// Past a bound.
    #[error("{0}")]
    Bound(String),
}

/// Keys of a dict that is not a snapshot, for the message: at most five, each cut.
fn keys(p: &Pickle, id: Id) -> String {
    let Value::Dict(pairs) = p.get(id) else {
        return String::new();
    };
    let mut out: Vec<String> = pairs
        .iter()
        .take(5)
        .map(|(k, _)| match p.get(*k) {
            Value::Str(s) => {
                let cut: String = s.chars().take(32).collect();
                format!("`{}`", crate::text::clean(&cut))
            }
            other => other.kind().to_string(),
        })
        .collect();
    if pairs.len() > 5 {
        out.push(format!("{} more", pairs.len() - 5));
    }
    out.join(", ")
}

/// Whether a dict looks like one of torch's segments.
fn is_segment(p: &Pickle, id: Id) -> bool {
    p.field(id, "total_size").is_some() && p.field(id, "blocks").is_some()
}

/// The snapshot in a decoded pickle: `_dump_snapshot`'s dict, or the list of segments
/// `memory_snapshot()` returns, pickled.
pub(crate) fn read(p: &Pickle, limits: Limits) -> Result<Snapshot, ShapeError> {
    let mut r = Reader {
        p,
        limits,
        blocks: 0,
        entries: 0,
        stacks: Stacks::default(),
        by_list: HashMap::new(),
        by_frame: HashMap::new(),
        texts: HashMap::new(),
        empty: Rc::from(""),
    };
    let root = p.root;
    let (segments, traces, settings) = match p.get(root) {
        Value::Dict(_) => {
            let Some(segments) = p.field(root, "segments") else {
                let keys = keys(p, root);
                return Err(ShapeError::NotSnapshot(if keys.is_empty() {
                    "a pickle of an empty dict, not a PyTorch memory snapshot (a dict with `segments`)".into()
                } else {
                    format!("a pickle of a dict without `segments` (its keys: {keys}), not a PyTorch memory snapshot")
                }));
            };
            (
                segments,
                p.field(root, "device_traces"),
                p.field(root, "allocator_settings"),
            )
        }
        Value::List(items) if !items.is_empty() && items.iter().all(|&i| is_segment(p, i)) => {
            (root, None, None)
        }
        other => {
            return Err(ShapeError::NotSnapshot(format!(
                "a pickle of {}, not a PyTorch memory snapshot (a dict with `segments`)",
                other.a_kind()
            )))
        }
    };
    let seg_items: &[Id] = match p.get(segments) {
        Value::List(items) => items,
        other => {
            return Err(ShapeError::Field(format!(
                "`segments` is {}, not a list",
                other.a_kind()
            )))
        }
    };
    if seg_items.len() > limits.segments {
        return Err(ShapeError::Bound(format!(
            "{} segments, more than {}",
            seg_items.len(),
            limits.segments
        )));
    }
    let mut out = Snapshot::default();
    for (n, &seg) in seg_items.iter().enumerate() {
        let s = r.segment(seg, n)?;
        out.segments.push(s);
    }
    if let Some(traces) = traces {
        out.has_traces = true;
        let lists: &[Id] = match p.get(traces) {
            Value::List(items) => items,
            Value::None => &[],
            other => {
                return Err(ShapeError::Field(format!(
                    "`device_traces` is {}, not a list",
                    other.a_kind()
                )))
            }
        };
        if lists.len() > limits.devices as usize {
            return Err(ShapeError::Bound(format!(
                "traces of {} devices, more than {}",
                lists.len(),
                limits.devices
            )));
        }
        for (device, &list) in lists.iter().enumerate() {
            let device = u32::try_from(device).unwrap_or(u32::MAX);
            let entries = r.trace(device, list)?;
            out.traces.push((device, entries));
        }
    }
    out.expandable_setting = settings
        .and_then(|s| p.field(s, "expandable_segments"))
        .and_then(|v| match p.get(v) {
            Value::Bool(b) => Some(b),
            _ => None,
        });
    out.stacks = std::mem::take(&mut r.stacks);
    Ok(out)
}

//! The fields strata uses of a decoded snapshot, typed: segments with their blocks, each
//! device's trace, and every distinct stack of frames once. Fields strata does not use are
//! never read, so nothing is walked but the snapshot's own shape (a dict of lists of dicts),
//! to a fixed depth; a list shared by many blocks (torch shares each distinct traceback) is
//! read once. Bounds: segments, blocks, trace entries, devices and frames per stack, each
//! one line of error.

use super::pickle::{Id, Pickle, Value};
use hashbrown::HashMap;
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

struct Reader<'a> {
    p: &'a Pickle,
    limits: Limits,
    blocks: usize,
    entries: usize,
    stacks: Stacks,
    by_list: HashMap<Id, StackId>,
    /// Each distinct frame dict read once (torch shares them between tracebacks): its place
    /// in the table.
    by_frame: HashMap<Id, u32>,
    texts: HashMap<Id, Rc<str>>,
    empty: Rc<str>,
}

impl Reader<'_> {
    fn int(&self, id: Id) -> Option<i128> {
        match self.p.get(id) {
            Value::Int(i) => Some(i.into()),
            Value::UInt(u) => Some(u.into()),
            Value::Bool(b) => Some(b.into()),
            _ => None,
        }
    }

    /// A field that must be a non-negative int of 64 bits.
    fn u64_field(
        &self,
        dict: Id,
        key: &str,
        place: &dyn Fn() -> String,
    ) -> Result<Option<u64>, ShapeError> {
        let Some(v) = self.p.field(dict, key) else {
            return Ok(None);
        };
        if matches!(self.p.get(v), Value::None) {
            return Ok(None);
        }
        match self.int(v).and_then(|i| u64::try_from(i).ok()) {
            Some(u) => Ok(Some(u)),
            None => Err(ShapeError::Field(format!(
                "{}: `{key}` is {}, where a non-negative int is expected",
                place(),
                describe(self.p, v)
            ))),
        }
    }

    fn required(&self, dict: Id, key: &str, place: &dyn Fn() -> String) -> Result<u64, ShapeError> {
        self.u64_field(dict, key, place)?
            .ok_or_else(|| ShapeError::Field(format!("{}: it has no `{key}`", place())))
    }

    fn text(&mut self, id: Option<Id>) -> Rc<str> {
        let Some(id) = id else {
            return self.empty.clone();
        };
        if let Some(t) = self.texts.get(&id) {
            return t.clone();
        }
        let t: Rc<str> = match self.p.get(id) {
            Value::Str(s) => Rc::from(s),
            _ => self.empty.clone(),
        };
        self.texts.insert(id, t.clone());
        t
    }

    /// The stack of a `frames` field: `None` when absent or empty.
    fn stack(
        &mut self,
        frames: Option<Id>,
        place: &dyn Fn() -> String,
    ) -> Result<Option<StackId>, ShapeError> {
        let Some(list) = frames else {
            return Ok(None);
        };
        if let Some(&id) = self.by_list.get(&list) {
            return Ok(Some(id));
        }
        let items = match self.p.get(list) {
            Value::List(items) | Value::Tuple(items) => items,
            Value::None => return Ok(None),
            other => {
                return Err(ShapeError::Field(format!(
                    "{}: `frames` is {}, not a list",
                    place(),
                    other.a_kind()
                )))
            }
        };
        if items.is_empty() {
            return Ok(None);
        }
        if items.len() > self.limits.frames {
            return Err(ShapeError::Bound(format!(
                "{}: a stack of {} frames, more than {}",
                place(),
                items.len(),
                self.limits.frames
            )));
        }
        let start = self.stacks.places.len();
        for &f in items {
            if let Some(&place) = self.by_frame.get(&f) {
                self.stacks.places.push(place);
                continue;
            }
            if !matches!(self.p.get(f), Value::Dict(_)) {
                return Err(ShapeError::Field(format!(
                    "{}: a frame is {}, not a dict",
                    place(),
                    self.p.get(f).a_kind()
                )));
            }
            let file = self.text(self.p.field(f, "filename"));
            let name = self.text(self.p.field(f, "name"));
            let line = self
                .p
                .field(f, "line")
                .and_then(|l| self.int(l))
                .and_then(|l| i64::try_from(l).ok())
                .unwrap_or(0);
            let place = u32::try_from(self.stacks.table.len()).unwrap_or(u32::MAX);
            self.stacks.table.push(Frame { file, line, name });
            self.by_frame.insert(f, place);
            self.stacks.places.push(place);
        }
        let id = StackId::try_from(self.stacks.spans.len()).unwrap_or(StackId::MAX);
        self.stacks.spans.push((start, self.stacks.places.len()));
        self.by_list.insert(list, id);
        Ok(Some(id))
    }

    fn segment(&mut self, seg: Id, n: usize) -> Result<Segment, ShapeError> {
        let place = || format!("segment {n}");
        if !matches!(self.p.get(seg), Value::Dict(_)) {
            return Err(ShapeError::Field(format!(
                "{}: {}, not a dict",
                place(),
                self.p.get(seg).a_kind()
            )));
        }
        let device = self.required(seg, "device", &place)?;
        let device = u32::try_from(device)
            .ok()
            .filter(|&d| d < self.limits.devices)
            .ok_or_else(|| {
                ShapeError::Bound(format!(
                    "{}: device {device}, beyond the {} devices strata reads",
                    place(),
                    self.limits.devices
                ))
            })?;
        let address = self.u64_field(seg, "address", &place)?.unwrap_or(0);
        let total_size = self.required(seg, "total_size", &place)?;
        let pool = match self.p.field(seg, "segment_type").map(|t| self.p.get(t)) {
            Some(Value::Str(s)) if s == "large" || s == "small" => s.to_string(),
            Some(other) => {
                let shown = match other {
                    Value::Str(s) => {
                        let cut: String = s.chars().take(32).collect();
                        format!("`{}`", crate::text::clean(&cut))
                    }
                    v => v.kind().to_string(),
                };
                return Err(ShapeError::Field(format!(
                    "{}: `segment_type` is {shown}, neither `large` nor `small`",
                    place()
                )));
            }
            None => {
                return Err(ShapeError::Field(format!(
                    "{}: it has no `segment_type`",
                    place()
                )))
            }
        };
        // Absent in files of torch before expandable segments: not expandable.
        let expandable = match self.p.field(seg, "is_expandable").map(|v| self.p.get(v)) {
            Some(Value::Bool(b)) => b,
            _ => false,
        };
        let list = self.p.field(seg, "blocks");
        let items: &[Id] = match list.map(|l| self.p.get(l)) {
            Some(Value::List(items)) => items,
            Some(other) => {
                return Err(ShapeError::Field(format!(
                    "{}: `blocks` is {}, not a list",
                    place(),
                    other.a_kind()
                )))
            }
            None => {
                return Err(ShapeError::Field(format!(
                    "{}: it has no `blocks`",
                    place()
                )))
            }
        };
        self.blocks += items.len();
        if self.blocks > self.limits.blocks {
            return Err(ShapeError::Bound(format!(
                "more than {} blocks",
                self.limits.blocks
            )));
        }
        let mut blocks = Vec::with_capacity(items.len());
        for (i, &b) in items.iter().enumerate() {
            let place = || format!("segment {n}, block {i}");
            if !matches!(self.p.get(b), Value::Dict(_)) {
                return Err(ShapeError::Field(format!(
                    "{}: {}, not a dict",
                    place(),
                    self.p.get(b).a_kind()
                )));
            }
            let size = self.required(b, "size", &place)?;
            let state = match self.p.field(b, "state").and_then(|s| self.p.str(s)) {
                Some("active_allocated") => BlockState::Live,
                Some("active_pending_free") => BlockState::Pending,
                Some("inactive") => BlockState::Free,
                Some(other) => {
                    let cut: String = other.chars().take(32).collect();
                    return Err(ShapeError::Field(format!(
                        "{}: state `{}` is none of active_allocated, active_pending_free, inactive",
                        place(),
                        crate::text::clean(&cut)
                    )));
                }
                None => return Err(ShapeError::Field(format!("{}: it has no `state`", place()))),
            };
            let stack = self.stack(self.p.field(b, "frames"), &place)?;
            blocks.push(Block { size, state, stack });
        }
        Ok(Segment {
            device,
            address,
            total_size,
            pool,
            expandable,
            blocks,
        })
    }

    fn trace(&mut self, device: u32, list: Id) -> Result<Vec<Entry>, ShapeError> {
        let items: &[Id] = match self.p.get(list) {
            Value::List(items) => items,
            other => {
                return Err(ShapeError::Field(format!(
                    "the trace of device {device} is {}, not a list",
                    other.a_kind()
                )))
            }
        };
        self.entries += items.len();
        if self.entries > self.limits.entries {
            return Err(ShapeError::Bound(format!(
                "more than {} trace entries",
                self.limits.entries
            )));
        }
        let mut out = Vec::with_capacity(items.len());
        for (i, &e) in items.iter().enumerate() {
            let place = || format!("device {device}, trace entry {i}");
            if !matches!(self.p.get(e), Value::Dict(_)) {
                return Err(ShapeError::Field(format!(
                    "{}: {}, not a dict",
                    place(),
                    self.p.get(e).a_kind()
                )));
            }
            let action = match self.p.field(e, "action").and_then(|a| self.p.str(a)) {
                Some("alloc") => Action::Alloc,
                Some("free_requested") => Action::FreeRequested,
                Some("free_completed") => Action::FreeCompleted,
                Some("segment_alloc") => Action::SegmentAlloc,
                Some("segment_free") => Action::SegmentFree,
                Some("segment_map") => Action::SegmentMap,
                Some("segment_unmap") => Action::SegmentUnmap,
                Some("oom") => Action::Oom,
                Some(_) => Action::Other,
                None => {
                    return Err(ShapeError::Field(format!(
                        "{}: it has no `action`",
                        place()
                    )))
                }
            };
            // Only the fields each action is read for: an `annotate` entry's own are not.
            let (addr, size, device_free) = match action {
                Action::Other => (None, None, None),
                Action::Oom => (
                    None,
                    self.u64_field(e, "size", &place)?,
                    self.u64_field(e, "device_free", &place)?,
                ),
                _ => (
                    self.u64_field(e, "addr", &place)?,
                    self.u64_field(e, "size", &place)?,
                    None,
                ),
            };
            let time_us = self
                .p
                .field(e, "time_us")
                .and_then(|t| self.int(t))
                .and_then(|t| i64::try_from(t).ok());
            let stack = match action {
                Action::Alloc | Action::Oom => self.stack(self.p.field(e, "frames"), &place)?,
                _ => None,
            };
            out.push(Entry {
                action,
                addr,
                size,
                device_free,
                time_us,
                stack,
            });
        }
        Ok(out)
    }
}

/// What a value is, for a message: its kind, or a short int.
fn describe(p: &Pickle, id: Id) -> String {
    match p.get(id) {
        Value::Int(i) => format!("{i}"),
        Value::Big => "an int beyond 64 bits".into(),
        other => other.a_kind(),
    }
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

//! The reader of a snapshot's fields: each segment with its blocks, each device's trace,
//! each distinct stack once; every field it reads checked for its type and bound.

use super::{
    Action, Block, BlockState, Entry, Frame, Limits, Segment, ShapeError, StackId, Stacks,
};
use crate::torchsnap::pickle::{Id, Pickle, Value};
use hashbrown::HashMap;
use std::rc::Rc;

/// The reader's state: what it has read, and what it has counted against the bounds.
pub(super) struct Reader<'a> {
    pub(super) p: &'a Pickle,
    pub(super) limits: Limits,
    pub(super) blocks: usize,
    pub(super) entries: usize,
    pub(super) stacks: Stacks,
    pub(super) by_list: HashMap<Id, StackId>,
    /// Each distinct frame dict read once (torch shares them between tracebacks): its place
    /// in the table.
    pub(super) by_frame: HashMap<Id, u32>,
    pub(super) texts: HashMap<Id, Rc<str>>,
    pub(super) empty: Rc<str>,
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

    pub(super) fn segment(&mut self, seg: Id, n: usize) -> Result<Segment, ShapeError> {
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

    pub(super) fn trace(&mut self, device: u32, list: Id) -> Result<Vec<Entry>, ShapeError> {
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

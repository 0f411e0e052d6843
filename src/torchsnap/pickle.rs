//! A reader of the plain data the standard `pickle` module writes (protocols 2 to 5): dicts,
//! lists, tuples, strings, bytes, ints of any size, floats, bools and `None`, as
//! `torch.cuda.memory._dump_snapshot` pickles its dict. Nothing else is read: an opcode that
//! names a class or calls one (`GLOBAL`, `STACK_GLOBAL`, `REDUCE`, `BUILD`, `INST`, `OBJ`,
//! `NEWOBJ`, persistent ids, extensions, out-of-band buffers) ends the read with an error, so
//! a pickle of another program is refused, never run (Rust has no Python to run it in, and
//! none of it is emulated).
//!
//! Why not a crate: serde-pickle 1.2.0 (the maintained one) was tried first. It recurses over
//! the data when it converts and drops it (a 200 KB pickle of lists nested 100,000 deep aborts
//! the process with a stack overflow), and it refuses a memoised object reached more often
//! than it is referenced in the stream (`Recursive`), which is exactly how torch writes its
//! frames: one dict per distinct frame, shared by every traceback list that holds it, and one
//! list per distinct traceback, shared by every block and trace entry of it
//! (`torch/csrc/profiler/python/combined_traceback.cpp`, `py_symbolize`). Bounding it would
//! have needed a pass over the opcodes of its own, which is this reader.
//!
//! The result is a flat arena of values: a memoised object fetched again (`BINGET`) is the
//! same value, never a copy, so memory is linear in the file whatever it shares, and nothing
//! here or in [`super::shape`] recurses over the data. Equal strings are stored once.
//! Bounds: the bytes read, the values held, each string's length and all strings' bytes, the
//! open marks and the nesting of containers (see [`Limits`]); each is one line of error.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::io::Read;

/// A value's place in the arena.
pub(crate) type Id = u32;

/// One value of the pickle.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// An int above `i64::MAX` that fits 64 bits (an address).
    UInt(u64),
    /// An int beyond 64 bits: its value is not kept.
    Big,
    Float(f64),
    Str(Box<str>),
    /// Bytes: only their length is kept.
    Bytes(u64),
    List(Vec<Id>),
    Tuple(Vec<Id>),
    Dict(Vec<(Id, Id)>),
}

impl Value {
    /// What it is with its article: `an int`, `a list`, `None`.
    pub(crate) fn a_kind(&self) -> String {
        match self.kind() {
            "None" => "None".into(),
            k @ "int" => format!("an {k}"),
            k => format!("a {k}"),
        }
    }

    /// What it is, in Python's words.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::UInt(_) | Value::Big => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
        }
    }
}

/// How much a pickle may hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Bytes of pickle read (after decompression).
    pub(crate) bytes: u64,
    /// Values and container slots held in all.
    pub(crate) values: u64,
    /// One string's bytes.
    pub(crate) string: u64,
    /// All distinct strings' bytes.
    pub(crate) strings: u64,
    /// Containers nested in one another.
    pub(crate) depth: u8,
    /// Marks open at once.
    pub(crate) marks: usize,
}

/// Why a pickle was not read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum PickleError {
    #[error("it is empty")]
    Empty,
    #[error("it is not a pickle (it begins with byte 0x{0:02x}, not the 0x80 of pickle protocol 2 and later)")]
    NotPickle(u8),
    #[error("it is a pickle of protocol {0}; strata reads protocols 2 to 5, what Python 3's `pickle.dump` writes")]
    Protocol(u8),
    #[error("the pickle ends at byte {0} before its STOP opcode: the file was cut short")]
    Truncated(u64),
    #[error("it holds a Python object of a class ({what} at byte {at}): strata reads the plain data `_dump_snapshot` writes and never loads a class")]
    Class { what: String, at: u64 },
    #[error("opcode 0x{op:02x} at byte {at} is not one Python's pickler writes for plain data")]
    Opcode { op: u8, at: u64 },
    #[error("it is malformed at byte {at}: {why}")]
    Malformed { at: u64, why: &'static str },
    #[error("it is larger than {0} bytes")]
    TooLarge(u64),
    #[error("it holds more than {0} values")]
    TooManyValues(u64),
    #[error("a string at byte {at} is {len} bytes long, more than {max}")]
    LongString { at: u64, len: u64, max: u64 },
    #[error("its strings hold more than {0} bytes")]
    TooMuchText(u64),
    #[error("its containers are nested deeper than {0} levels")]
    TooDeep(u8),
    #[error("it opens more than {0} marks at once")]
    TooManyMarks(usize),
    #[error("an integer at byte {at} is {len} bytes long")]
    LongInt { at: u64, len: u64 },
    #[error("reading it failed: {0}")]
    Io(String),
}

/// A decoded pickle: its values and the root.
#[derive(Debug, Default)]
pub(crate) struct Pickle {
    values: Vec<Value>,
    pub(crate) root: Id,
}

impl Pickle {
    /// Values held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    pub(crate) fn get(&self, id: Id) -> &Value {
        // Every id handed out is an index of `values`; `None` stands in were one not.
        self.values.get(id as usize).unwrap_or(&Value::None)
    }

    /// The string of a value, if it is one.
    pub(crate) fn str(&self, id: Id) -> Option<&str> {
        match self.get(id) {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value of `key` in the dict `id`.
    pub(crate) fn field(&self, id: Id, key: &str) -> Option<Id> {
        match self.get(id) {
            Value::Dict(pairs) => pairs
                .iter()
                .rev()
                .find(|(k, _)| self.str(*k) == Some(key))
                .map(|(_, v)| *v),
            _ => None,
        }
    }
}

/// Bytes read with their position, from a buffer refilled from the reader.
struct Input<R> {
    inner: R,
    buf: Vec<u8>,
    at: usize,
    len: usize,
    /// Bytes consumed before `buf`.
    base: u64,
    limit: u64,
}

impl<R: Read> Input<R> {
    fn new(inner: R, limit: u64) -> Self {
        Input {
            inner,
            buf: vec![0; 256 * 1024],
            at: 0,
            len: 0,
            base: 0,
            limit,
        }
    }

    /// Where the next byte is.
    fn pos(&self) -> u64 {
        self.base + self.at as u64
    }

    fn fill(&mut self) -> Result<bool, PickleError> {
        self.base += self.len as u64;
        self.at = 0;
        self.len = 0;
        if self.base > self.limit {
            return Err(PickleError::TooLarge(self.limit));
        }
        loop {
            match self.inner.read(&mut self.buf) {
                Ok(n) => {
                    self.len = n;
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // A compressed stream cut short.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    return Err(PickleError::Truncated(self.pos()))
                }
                Err(e) => return Err(PickleError::Io(e.to_string())),
            }
        }
    }

    fn byte(&mut self) -> Result<u8, PickleError> {
        if self.at == self.len && !self.fill()? {
            return Err(PickleError::Truncated(self.pos()));
        }
        let b = self.buf[self.at];
        self.at += 1;
        if self.pos() > self.limit {
            return Err(PickleError::TooLarge(self.limit));
        }
        Ok(b)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        let mut out = [0; N];
        for b in &mut out {
            *b = self.byte()?;
        }
        Ok(out)
    }

    /// `n` bytes into `out` (cleared first); what is read grows `out` as it arrives, so a
    /// length that lies costs no more than the bytes that are there.
    fn bytes(&mut self, n: u64, out: &mut Vec<u8>) -> Result<(), PickleError> {
        out.clear();
        let mut left = n;
        while left > 0 {
            if self.at == self.len && !self.fill()? {
                return Err(PickleError::Truncated(self.pos()));
            }
            let take = (left.min((self.len - self.at) as u64)) as usize;
            out.extend_from_slice(&self.buf[self.at..self.at + take]);
            self.at += take;
            left -= take as u64;
            if self.pos() > self.limit {
                return Err(PickleError::TooLarge(self.limit));
            }
        }
        Ok(())
    }

    /// `n` bytes read and dropped.
    fn skip(&mut self, n: u64) -> Result<(), PickleError> {
        let mut left = n;
        while left > 0 {
            if self.at == self.len && !self.fill()? {
                return Err(PickleError::Truncated(self.pos()));
            }
            let take = (left.min((self.len - self.at) as u64)) as usize;
            self.at += take;
            left -= take as u64;
            if self.pos() > self.limit {
                return Err(PickleError::TooLarge(self.limit));
            }
        }
        Ok(())
    }

    /// A line (protocol 0's text operands), at most 256 bytes.
    fn line(&mut self) -> Result<Vec<u8>, PickleError> {
        let mut out = Vec::new();
        loop {
            let b = self.byte()?;
            if b == b'\n' {
                return Ok(out);
            }
            if out.len() < 256 {
                out.push(b);
            }
        }
    }
}

/// The decoder's state: the arena, the stack, the marks, the memo, the strings seen.
struct Decoder {
    limits: Limits,
    values: Vec<Value>,
    /// Each value's nesting: 0 for a scalar, 1 + its deepest item for a container.
    depths: Vec<u8>,
    /// Values and container slots held.
    held: u64,
    text: u64,
    stack: Vec<Id>,
    marks: Vec<usize>,
    memo: HashMap<u32, Id>,
    /// Distinct strings, by hash of their text.
    strings: hashbrown::HashTable<Id>,
    hasher: hashbrown::DefaultHashBuilder,
    scratch: Vec<u8>,
}

impl Decoder {
    fn new(limits: Limits) -> Self {
        Decoder {
            limits,
            values: Vec::new(),
            depths: Vec::new(),
            held: 0,
            text: 0,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            strings: hashbrown::HashTable::new(),
            hasher: hashbrown::DefaultHashBuilder::default(),
            scratch: Vec::new(),
        }
    }

    fn count(&mut self, n: u64) -> Result<(), PickleError> {
        self.held += n;
        if self.held > self.limits.values {
            return Err(PickleError::TooManyValues(self.limits.values));
        }
        Ok(())
    }

    /// A new value in the arena, not on the stack.
    fn alloc(&mut self, value: Value) -> Result<Id, PickleError> {
        self.count(1)?;
        let id = Id::try_from(self.values.len())
            .map_err(|_| PickleError::TooManyValues(self.limits.values))?;
        self.values.push(value);
        self.depths.push(0);
        Ok(id)
    }

    fn push(&mut self, value: Value) -> Result<(), PickleError> {
        let id = self.alloc(value)?;
        self.stack.push(id);
        Ok(())
    }

    /// A string from `self.scratch`, the one value of its text.
    fn push_str(&mut self, at: u64) -> Result<(), PickleError> {
        let bytes = std::mem::take(&mut self.scratch);
        let text = match std::str::from_utf8(&bytes) {
            Ok(t) => t,
            Err(_) => {
                return Err(PickleError::Malformed {
                    at,
                    why: "a string is not UTF-8",
                })
            }
        };
        let hash = self.hasher.hash_one(text);
        let values = &self.values;
        let found = self
            .strings
            .find(
                hash,
                |&id| matches!(&values[id as usize], Value::Str(s) if **s == *text),
            )
            .copied();
        let id = match found {
            Some(id) => {
                // Its place on the stack is held like any value's.
                self.count(1)?;
                id
            }
            None => {
                self.text += text.len() as u64;
                if self.text > self.limits.strings {
                    return Err(PickleError::TooMuchText(self.limits.strings));
                }
                let id = self.alloc(Value::Str(text.into()))?;
                let (values, hasher) = (&self.values, &self.hasher);
                self.strings
                    .insert_unique(hash, id, |&id| match &values[id as usize] {
                        Value::Str(s) => hasher.hash_one(&**s),
                        _ => 0,
                    });
                id
            }
        };
        self.scratch = bytes;
        self.stack.push(id);
        Ok(())
    }

    fn pop(&mut self, at: u64) -> Result<Id, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(PickleError::Malformed {
                at,
                why: "an opcode takes a value the stack does not hold",
            });
        }
        Ok(self.stack.pop().unwrap_or_default())
    }

    /// The values above the last mark, which is closed.
    fn pop_mark(&mut self, at: u64) -> Result<Vec<Id>, PickleError> {
        let Some(mark) = self.marks.pop() else {
            return Err(PickleError::Malformed {
                at,
                why: "an opcode takes a mark that was not set",
            });
        };
        Ok(self.stack.split_off(mark.min(self.stack.len())))
    }

    /// The container on top of the stack (above the last open mark), for items to be added
    /// to it.
    fn target(&self, at: u64) -> Result<Id, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        match self.stack.last() {
            Some(&id) if self.stack.len() > floor => Ok(id),
            _ => Err(PickleError::Malformed {
                at,
                why: "items are added to a container the stack does not hold",
            }),
        }
    }

    fn deepen(&mut self, container: Id, items: &[Id]) -> Result<(), PickleError> {
        let deepest = items
            .iter()
            .map(|&i| self.depths.get(i as usize).copied().unwrap_or(0))
            .max()
            .unwrap_or(0);
        let depth = deepest.saturating_add(1);
        if depth > self.limits.depth {
            return Err(PickleError::TooDeep(self.limits.depth));
        }
        if let Some(d) = self.depths.get_mut(container as usize) {
            *d = (*d).max(depth);
        }
        Ok(())
    }

    fn new_container(&mut self, value: Value, items: &[Id]) -> Result<(), PickleError> {
        self.count(items.len() as u64)?;
        self.push(value)?;
        let id = self.stack.last().copied().unwrap_or_default();
        self.deepen(id, items)
    }

    fn append(&mut self, at: u64, items: Vec<Id>) -> Result<(), PickleError> {
        let target = self.target(at)?;
        self.count(items.len() as u64)?;
        self.deepen(target, &items)?;
        match self.values.get_mut(target as usize) {
            Some(Value::List(list)) => {
                list.extend(items);
                Ok(())
            }
            _ => Err(PickleError::Malformed {
                at,
                why: "APPEND to something that is not a list",
            }),
        }
    }

    fn set_items(&mut self, at: u64, items: Vec<Id>) -> Result<(), PickleError> {
        if items.len() % 2 != 0 {
            return Err(PickleError::Malformed {
                at,
                why: "a dict's items are not pairs",
            });
        }
        let target = self.target(at)?;
        self.count(items.len() as u64 / 2)?;
        self.deepen(target, &items)?;
        match self.values.get_mut(target as usize) {
            Some(Value::Dict(dict)) => {
                dict.extend(items.chunks_exact(2).map(|p| (p[0], p[1])));
                Ok(())
            }
            _ => Err(PickleError::Malformed {
                at,
                why: "SETITEM to something that is not a dict",
            }),
        }
    }

    fn memo_put(&mut self, at: u64, index: u32) -> Result<(), PickleError> {
        let Some(&top) = self.stack.last() else {
            return Err(PickleError::Malformed {
                at,
                why: "a memo put with an empty stack",
            });
        };
        if self.memo.len() as u64 >= self.limits.values {
            return Err(PickleError::TooManyValues(self.limits.values));
        }
        self.memo.insert(index, top);
        Ok(())
    }

    fn memo_get(&mut self, at: u64, index: u32) -> Result<(), PickleError> {
        let Some(&id) = self.memo.get(&index) else {
            return Err(PickleError::Malformed {
                at,
                why: "a memo get of a value never put",
            });
        };
        self.count(1)?;
        self.stack.push(id);
        Ok(())
    }

    /// A little-endian two's complement int (LONG1, LONG4).
    fn int_le(&mut self, bytes: &[u8]) -> Result<(), PickleError> {
        let value = match bytes.len() {
            0 => Value::Int(0),
            1..=8 => {
                let negative = bytes[bytes.len() - 1] & 0x80 != 0;
                let mut raw = [if negative { 0xff } else { 0 }; 8];
                raw[..bytes.len()].copy_from_slice(bytes);
                Value::Int(i64::from_le_bytes(raw))
            }
            9 if bytes[8] == 0 => {
                let mut raw = [0; 8];
                raw.copy_from_slice(&bytes[..8]);
                Value::UInt(u64::from_le_bytes(raw))
            }
            _ => Value::Big,
        };
        self.push(value)
    }
}

/// The value of an opcode that names a class: `module.name` where it is there to read.
fn class_name(module: &[u8], name: &[u8]) -> String {
    let text = format!(
        "{}.{}",
        String::from_utf8_lossy(module),
        String::from_utf8_lossy(name)
    );
    let cut: String = text.chars().take(80).collect();
    crate::text::clean(&cut).into_owned()
}

/// Decodes one pickle from `input`, within `limits`.
pub(crate) fn decode<R: Read>(input: R, limits: Limits) -> Result<Pickle, PickleError> {
    let mut input = Input::new(input, limits.bytes);
    let mut d = Decoder::new(limits);
    // The first opcode: PROTO 2..=5.
    let first = match input.byte() {
        Ok(b) => b,
        Err(PickleError::Truncated(0)) => return Err(PickleError::Empty),
        Err(e) => return Err(e),
    };
    if first != 0x80 {
        return Err(PickleError::NotPickle(first));
    }
    let proto = input.byte()?;
    if !(2..=5).contains(&proto) {
        return Err(PickleError::Protocol(proto));
    }
    loop {
        let at = input.pos();
        let op = input.byte()?;
        match op {
            b'.' => {
                // STOP: the value on top is the pickle (as Python's unpickler takes it).
                let root = d.stack.last().copied().ok_or(PickleError::Malformed {
                    at,
                    why: "STOP with nothing on the stack",
                })?;
                return Ok(Pickle {
                    values: d.values,
                    root,
                });
            }
            0x80 => {
                let p = input.byte()?;
                if !(2..=5).contains(&p) {
                    return Err(PickleError::Protocol(p));
                }
            }
            0x95 => {
                // FRAME: its length is a hint; reading goes on byte by byte.
                input.array::<8>()?;
            }
            b'(' => {
                if d.marks.len() >= limits.marks {
                    return Err(PickleError::TooManyMarks(limits.marks));
                }
                d.marks.push(d.stack.len());
            }
            b'0' => {
                d.pop(at)?;
            }
            b'1' => {
                d.pop_mark(at)?;
            }
            b'N' => d.push(Value::None)?,
            0x88 => d.push(Value::Bool(true))?,
            0x89 => d.push(Value::Bool(false))?,
            b'J' => {
                let v = i32::from_le_bytes(input.array::<4>()?);
                d.push(Value::Int(v.into()))?;
            }
            b'K' => {
                let v = input.byte()?;
                d.push(Value::Int(v.into()))?;
            }
            b'M' => {
                let v = u16::from_le_bytes(input.array::<2>()?);
                d.push(Value::Int(v.into()))?;
            }
            0x8a | 0x8b => {
                let len: u64 = if op == 0x8a {
                    input.byte()?.into()
                } else {
                    let n = i32::from_le_bytes(input.array::<4>()?);
                    u64::try_from(n).map_err(|_| PickleError::Malformed {
                        at,
                        why: "a negative length",
                    })?
                };
                if len > 64 {
                    return Err(PickleError::LongInt { at, len });
                }
                let mut bytes = std::mem::take(&mut d.scratch);
                input.bytes(len, &mut bytes)?;
                let result = d.int_le(&bytes);
                d.scratch = bytes;
                result?;
            }
            b'G' => {
                let v = f64::from_be_bytes(input.array::<8>()?);
                d.push(Value::Float(v))?;
            }
            0x8c | b'X' | 0x8d => {
                let len: u64 = match op {
                    0x8c => input.byte()?.into(),
                    b'X' => u32::from_le_bytes(input.array::<4>()?).into(),
                    _ => u64::from_le_bytes(input.array::<8>()?),
                };
                if len > limits.string {
                    return Err(PickleError::LongString {
                        at,
                        len,
                        max: limits.string,
                    });
                }
                let mut bytes = std::mem::take(&mut d.scratch);
                input.bytes(len, &mut bytes)?;
                d.scratch = bytes;
                d.push_str(at)?;
            }
            b'C' | b'B' | 0x8e => {
                let len: u64 = match op {
                    b'C' => input.byte()?.into(),
                    b'B' => u32::from_le_bytes(input.array::<4>()?).into(),
                    _ => u64::from_le_bytes(input.array::<8>()?),
                };
                if len > limits.string {
                    return Err(PickleError::LongString {
                        at,
                        len,
                        max: limits.string,
                    });
                }
                input.skip(len)?;
                d.push(Value::Bytes(len))?;
            }
            b'}' => d.new_container(Value::Dict(Vec::new()), &[])?,
            b']' => d.new_container(Value::List(Vec::new()), &[])?,
            b')' => d.new_container(Value::Tuple(Vec::new()), &[])?,
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(d.pop(at)?);
                }
                items.reverse();
                d.new_container(Value::Tuple(items.clone()), &items)?;
            }
            b't' => {
                let items = d.pop_mark(at)?;
                d.new_container(Value::Tuple(items.clone()), &items)?;
            }
            b'l' => {
                let items = d.pop_mark(at)?;
                d.new_container(Value::List(items.clone()), &items)?;
            }
            b'd' => {
                let items = d.pop_mark(at)?;
                if items.len() % 2 != 0 {
                    return Err(PickleError::Malformed {
                        at,
                        why: "a dict's items are not pairs",
                    });
                }
                let pairs = items.chunks_exact(2).map(|p| (p[0], p[1])).collect();
                d.new_container(Value::Dict(pairs), &items)?;
            }
            b'a' => {
                let item = d.pop(at)?;
                d.append(at, vec![item])?;
            }
            b'e' => {
                let items = d.pop_mark(at)?;
                d.append(at, items)?;
            }
            b's' => {
                let value = d.pop(at)?;
                let key = d.pop(at)?;
                d.set_items(at, vec![key, value])?;
            }
            b'u' => {
                let items = d.pop_mark(at)?;
                d.set_items(at, items)?;
            }
            b'q' => {
                let i = input.byte()?;
                d.memo_put(at, i.into())?;
            }
            b'r' => {
                let i = u32::from_le_bytes(input.array::<4>()?);
                d.memo_put(at, i)?;
            }
            0x94 => {
                let i = u32::try_from(d.memo.len()).unwrap_or(u32::MAX);
                d.memo_put(at, i)?;
            }
            b'h' => {
                let i = input.byte()?;
                d.memo_get(at, i.into())?;
            }
            b'j' => {
                let i = u32::from_le_bytes(input.array::<4>()?);
                d.memo_get(at, i)?;
            }
            b'c' => {
                let module = input.line()?;
                let name = input.line()?;
                return Err(PickleError::Class {
                    what: format!("GLOBAL {}", class_name(&module, &name)),
                    at,
                });
            }
            0x93 => {
                let n = d.stack.len();
                let what = match (
                    n.checked_sub(2).and_then(|i| d.stack.get(i)),
                    d.stack.last(),
                ) {
                    (Some(&m), Some(&g)) => {
                        match (d.values.get(m as usize), d.values.get(g as usize)) {
                            (Some(Value::Str(m)), Some(Value::Str(g))) => {
                                format!("STACK_GLOBAL {}", class_name(m.as_bytes(), g.as_bytes()))
                            }
                            _ => "STACK_GLOBAL".into(),
                        }
                    }
                    _ => "STACK_GLOBAL".into(),
                };
                return Err(PickleError::Class { what, at });
            }
            b'R' | b'b' | b'i' | b'o' | 0x81 | 0x92 | b'P' | b'Q' | 0x82..=0x84 | 0x96..=0x98 => {
                let name = match op {
                    b'R' => "REDUCE",
                    b'b' => "BUILD",
                    b'i' => "INST",
                    b'o' => "OBJ",
                    0x81 => "NEWOBJ",
                    0x92 => "NEWOBJ_EX",
                    b'P' | b'Q' => "a persistent id",
                    0x82..=0x84 => "an extension code",
                    0x96 => "BYTEARRAY8",
                    _ => "an out-of-band buffer",
                };
                return Err(PickleError::Class {
                    what: name.into(),
                    at,
                });
            }
            _ => return Err(PickleError::Opcode { op, at }),
        }
    }
}

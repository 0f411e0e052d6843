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

mod decoder;
mod input;

use decoder::Decoder;
use input::Input;
use std::io::Read;

/// A value's place in the arena.
pub(crate) type Id = u32;

/// One value of the pickle, as the arena holds it: 16 bytes, a string or a container by its
/// place in a table of its own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Slot {
    None,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Big,
    Float(f64),
    Str(u32),
    Bytes(u64),
    List(u32),
    Tuple(u32),
    Dict(u32),
}

/// One value of the pickle, as it is read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    None,
    Bool(bool),
    Int(i64),
    /// An int above `i64::MAX` that fits 64 bits (an address).
    UInt(u64),
    /// An int beyond 64 bits: its value is not kept.
    Big,
    Float(f64),
    Str(&'a str),
    /// Bytes: only their length is kept.
    Bytes(u64),
    List(&'a [Id]),
    Tuple(&'a [Id]),
    Dict(&'a [(Id, Id)]),
}

impl Value<'_> {
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

/// What one value weighs against [`Limits::values`]: a scalar or a place on the stack 1, a
/// string 4 (its text's box and its entry in the table of strings), a container 3 (its own
/// vector), each item in a container 1 more.
pub(super) const STRING_WEIGHT: u64 = 4;
pub(super) const CONTAINER_WEIGHT: u64 = 3;

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
    values: Vec<Slot>,
    strings: Vec<Box<str>>,
    lists: Vec<Vec<Id>>,
    dicts: Vec<Vec<(Id, Id)>>,
    pub(crate) root: Id,
}

impl Pickle {
    /// Values held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    pub(crate) fn get(&self, id: Id) -> Value<'_> {
        // Every id handed out is a place in `values`, and every slot's in its table; `None`
        // stands in were one not.
        match self.values.get(id as usize).copied().unwrap_or(Slot::None) {
            Slot::None => Value::None,
            Slot::Bool(b) => Value::Bool(b),
            Slot::Int(i) => Value::Int(i),
            Slot::UInt(u) => Value::UInt(u),
            Slot::Big => Value::Big,
            Slot::Float(f) => Value::Float(f),
            Slot::Bytes(n) => Value::Bytes(n),
            Slot::Str(i) => self
                .strings
                .get(i as usize)
                .map_or(Value::None, |s| Value::Str(s)),
            Slot::List(i) => self
                .lists
                .get(i as usize)
                .map_or(Value::None, |l| Value::List(l)),
            Slot::Tuple(i) => self
                .lists
                .get(i as usize)
                .map_or(Value::None, |l| Value::Tuple(l)),
            Slot::Dict(i) => self
                .dicts
                .get(i as usize)
                .map_or(Value::None, |d| Value::Dict(d)),
        }
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
                    strings: d.texts,
                    lists: d.lists,
                    dicts: d.dicts,
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
            b'N' => d.push(Slot::None)?,
            0x88 => d.push(Slot::Bool(true))?,
            0x89 => d.push(Slot::Bool(false))?,
            b'J' => {
                let v = i32::from_le_bytes(input.array::<4>()?);
                d.push(Slot::Int(v.into()))?;
            }
            b'K' => {
                let v = input.byte()?;
                d.push(Slot::Int(v.into()))?;
            }
            b'M' => {
                let v = u16::from_le_bytes(input.array::<2>()?);
                d.push(Slot::Int(v.into()))?;
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
                d.push(Slot::Float(v))?;
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
                d.push(Slot::Bytes(len))?;
            }
            b'}' => d.new_dict(at, Vec::new())?,
            b']' => d.new_list(Vec::new(), false)?,
            b')' => d.new_list(Vec::new(), true)?,
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(d.pop(at)?);
                }
                items.reverse();
                d.new_list(items, true)?;
            }
            b't' => {
                let items = d.pop_mark(at)?;
                d.new_list(items, true)?;
            }
            b'l' => {
                let items = d.pop_mark(at)?;
                d.new_list(items, false)?;
            }
            b'd' => {
                let items = d.pop_mark(at)?;
                d.new_dict(at, items)?;
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
                    (Some(&m), Some(&g)) => match (d.text_of(m), d.text_of(g)) {
                        (Some(m), Some(g)) => {
                            format!("STACK_GLOBAL {}", class_name(m.as_bytes(), g.as_bytes()))
                        }
                        _ => "STACK_GLOBAL".into(),
                    },
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

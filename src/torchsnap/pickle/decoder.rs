//! The decoder's state and the operations of its opcodes: the arena of values, the stack, the
//! marks, the memo, the strings seen once; each within its bound.

use super::{Id, Limits, PickleError, Value};
use std::hash::BuildHasher;

/// The decoder's state: the arena, the stack, the marks, the memo, the strings seen.
pub(super) struct Decoder {
    pub(super) limits: Limits,
    pub(super) values: Vec<Value>,
    /// Each value's nesting: 0 for a scalar, 1 + its deepest item for a container.
    pub(super) depths: Vec<u8>,
    /// Values and container slots held.
    pub(super) held: u64,
    pub(super) text: u64,
    pub(super) stack: Vec<Id>,
    pub(super) marks: Vec<usize>,
    pub(super) memo: hashbrown::HashMap<u32, Id>,
    /// Distinct strings, by hash of their text.
    pub(super) strings: hashbrown::HashTable<Id>,
    pub(super) hasher: hashbrown::DefaultHashBuilder,
    pub(super) scratch: Vec<u8>,
}

impl Decoder {
    pub(super) fn new(limits: Limits) -> Self {
        Decoder {
            limits,
            values: Vec::new(),
            depths: Vec::new(),
            held: 0,
            text: 0,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: hashbrown::HashMap::new(),
            strings: hashbrown::HashTable::new(),
            hasher: hashbrown::DefaultHashBuilder::default(),
            scratch: Vec::new(),
        }
    }

    pub(super) fn count(&mut self, n: u64) -> Result<(), PickleError> {
        self.held += n;
        if self.held > self.limits.values {
            return Err(PickleError::TooManyValues(self.limits.values));
        }
        Ok(())
    }

    /// A new value in the arena, not on the stack.
    pub(super) fn alloc(&mut self, value: Value) -> Result<Id, PickleError> {
        self.count(1)?;
        let id = Id::try_from(self.values.len())
            .map_err(|_| PickleError::TooManyValues(self.limits.values))?;
        self.values.push(value);
        self.depths.push(0);
        Ok(id)
    }

    pub(super) fn push(&mut self, value: Value) -> Result<(), PickleError> {
        let id = self.alloc(value)?;
        self.stack.push(id);
        Ok(())
    }

    /// A string from `self.scratch`, the one value of its text.
    pub(super) fn push_str(&mut self, at: u64) -> Result<(), PickleError> {
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

    pub(super) fn pop(&mut self, at: u64) -> Result<Id, PickleError> {
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
    pub(super) fn pop_mark(&mut self, at: u64) -> Result<Vec<Id>, PickleError> {
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
    pub(super) fn target(&self, at: u64) -> Result<Id, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        match self.stack.last() {
            Some(&id) if self.stack.len() > floor => Ok(id),
            _ => Err(PickleError::Malformed {
                at,
                why: "items are added to a container the stack does not hold",
            }),
        }
    }

    pub(super) fn deepen(&mut self, container: Id, items: &[Id]) -> Result<(), PickleError> {
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

    pub(super) fn new_container(&mut self, value: Value, items: &[Id]) -> Result<(), PickleError> {
        self.count(items.len() as u64)?;
        self.push(value)?;
        let id = self.stack.last().copied().unwrap_or_default();
        self.deepen(id, items)
    }

    pub(super) fn append(&mut self, at: u64, items: Vec<Id>) -> Result<(), PickleError> {
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

    pub(super) fn set_items(&mut self, at: u64, items: Vec<Id>) -> Result<(), PickleError> {
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

    pub(super) fn memo_put(&mut self, at: u64, index: u32) -> Result<(), PickleError> {
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

    pub(super) fn memo_get(&mut self, at: u64, index: u32) -> Result<(), PickleError> {
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
    pub(super) fn int_le(&mut self, bytes: &[u8]) -> Result<(), PickleError> {
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

//! The decoder's state and the operations of its opcodes: the arena of values, the stack, the
//! marks, the memo, the strings seen once; each within its bound.

use super::{Id, Limits, PickleError, Slot, CONTAINER_WEIGHT, STRING_WEIGHT};
use std::hash::BuildHasher;

/// The decoder's state: the arena, the stack, the marks, the memo, the strings seen.
pub(super) struct Decoder {
    pub(super) limits: Limits,
    pub(super) values: Vec<Slot>,
    pub(super) texts: Vec<Box<str>>,
    pub(super) lists: Vec<Vec<Id>>,
    pub(super) dicts: Vec<Vec<(Id, Id)>>,
    /// Each value's nesting: 0 for a scalar, 1 + its deepest item for a container.
    pub(super) depths: Vec<u8>,
    /// Values and container slots held.
    pub(super) held: u64,
    pub(super) text: u64,
    pub(super) stack: Vec<Id>,
    pub(super) marks: Vec<usize>,
    pub(super) memo: hashbrown::HashMap<u32, Id>,
    /// Distinct strings, by hash of their text: (the value, its place in `texts`).
    pub(super) strings: hashbrown::HashTable<(Id, u32)>,
    pub(super) hasher: hashbrown::DefaultHashBuilder,
    pub(super) scratch: Vec<u8>,
}

impl Decoder {
    pub(super) fn new(limits: Limits) -> Self {
        Decoder {
            limits,
            values: Vec::new(),
            texts: Vec::new(),
            lists: Vec::new(),
            dicts: Vec::new(),
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
    pub(super) fn alloc(&mut self, value: Slot) -> Result<Id, PickleError> {
        self.count(1)?;
        let id = Id::try_from(self.values.len())
            .map_err(|_| PickleError::TooManyValues(self.limits.values))?;
        self.values.push(value);
        self.depths.push(0);
        Ok(id)
    }

    pub(super) fn push(&mut self, value: Slot) -> Result<(), PickleError> {
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
        let texts = &self.texts;
        let found = self
            .strings
            .find(hash, |&(_, t)| {
                texts.get(t as usize).is_some_and(|s| **s == *text)
            })
            .map(|&(id, _)| id);
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
                self.count(STRING_WEIGHT - 1)?;
                let t = u32::try_from(self.texts.len())
                    .map_err(|_| PickleError::TooManyValues(self.limits.values))?;
                self.texts.push(text.into());
                let id = self.alloc(Slot::Str(t))?;
                let (texts, hasher) = (&self.texts, &self.hasher);
                self.strings.insert_unique(hash, (id, t), |&(_, t)| {
                    texts.get(t as usize).map_or(0, |s| hasher.hash_one(&**s))
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

    /// A new list (or tuple) of `items`, on the stack.
    pub(super) fn new_list(&mut self, items: Vec<Id>, tuple: bool) -> Result<(), PickleError> {
        self.count(CONTAINER_WEIGHT - 1 + items.len() as u64)?;
        let i = u32::try_from(self.lists.len())
            .map_err(|_| PickleError::TooManyValues(self.limits.values))?;
        let id = self.alloc(if tuple { Slot::Tuple(i) } else { Slot::List(i) })?;
        self.deepen(id, &items)?;
        self.lists.push(items);
        self.stack.push(id);
        Ok(())
    }

    /// A new dict of `items` (key, value, key, value...), on the stack.
    pub(super) fn new_dict(&mut self, at: u64, items: Vec<Id>) -> Result<(), PickleError> {
        if !items.len().is_multiple_of(2) {
            return Err(PickleError::Malformed {
                at,
                why: "a dict's items are not pairs",
            });
        }
        self.count(CONTAINER_WEIGHT - 1 + items.len() as u64 / 2)?;
        let i = u32::try_from(self.dicts.len())
            .map_err(|_| PickleError::TooManyValues(self.limits.values))?;
        let id = self.alloc(Slot::Dict(i))?;
        self.deepen(id, &items)?;
        self.dicts
            .push(items.chunks_exact(2).map(|p| (p[0], p[1])).collect());
        self.stack.push(id);
        Ok(())
    }

    pub(super) fn append(&mut self, at: u64, items: Vec<Id>) -> Result<(), PickleError> {
        let target = self.target(at)?;
        self.count(items.len() as u64)?;
        self.deepen(target, &items)?;
        let list = match self.values.get(target as usize) {
            Some(Slot::List(i)) => self.lists.get_mut(*i as usize),
            _ => None,
        };
        match list {
            Some(list) => {
                list.extend(items);
                Ok(())
            }
            None => Err(PickleError::Malformed {
                at,
                why: "APPEND to something that is not a list",
            }),
        }
    }

    pub(super) fn set_items(&mut self, at: u64, items: Vec<Id>) -> Result<(), PickleError> {
        if !items.len().is_multiple_of(2) {
            return Err(PickleError::Malformed {
                at,
                why: "a dict's items are not pairs",
            });
        }
        let target = self.target(at)?;
        self.count(items.len() as u64 / 2)?;
        self.deepen(target, &items)?;
        let dict = match self.values.get(target as usize) {
            Some(Slot::Dict(i)) => self.dicts.get_mut(*i as usize),
            _ => None,
        };
        match dict {
            Some(dict) => {
                dict.extend(items.chunks_exact(2).map(|p| (p[0], p[1])));
                Ok(())
            }
            None => Err(PickleError::Malformed {
                at,
                why: "SETITEM to something that is not a dict",
            }),
        }
    }

    /// The text of a value, if it is a string.
    pub(super) fn text_of(&self, id: Id) -> Option<&str> {
        match self.values.get(id as usize) {
            Some(Slot::Str(t)) => self.texts.get(*t as usize).map(|s| &**s),
            _ => None,
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
            0 => Slot::Int(0),
            1..=8 => {
                let negative = bytes[bytes.len() - 1] & 0x80 != 0;
                let mut raw = [if negative { 0xff } else { 0 }; 8];
                raw[..bytes.len()].copy_from_slice(bytes);
                Slot::Int(i64::from_le_bytes(raw))
            }
            9 if bytes[8] == 0 => {
                let mut raw = [0; 8];
                raw.copy_from_slice(&bytes[..8]);
                Slot::UInt(u64::from_le_bytes(raw))
            }
            _ => Slot::Big,
        };
        self.push(value)
    }
}

//! The building blocks of scenario values: an answer or a refusal, a value scripted per poll,
//! and a window of polls.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::codes::code_for_name;

/// A value that a call answers with, or the NVML error code it fails with.
///
/// In JSON: the value itself, or one of the names in `codes::SCENARIO_ERROR_NAMES`
/// (`"NotSupported"`, `"NoPermission"`, ...).
#[derive(Debug, Clone, PartialEq)]
pub enum Answer<T> {
    Value(T),
    Error(u32),
}

impl<T> Answer<T> {
    /// The value, or the error code the call must return.
    pub fn get(&self) -> Result<&T, u32> {
        match self {
            Answer::Value(value) => Ok(value),
            Answer::Error(code) => Err(*code),
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Answer<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        if let Value::String(text) = &value {
            if let Some(code) = code_for_name(text) {
                return Ok(Answer::Error(code));
            }
        }
        T::deserialize(value)
            .map(Answer::Value)
            .map_err(D::Error::custom)
    }
}

/// A value that may change with the poll number: one value, or a non-empty array indexed by
/// poll number (0-based) and clamped to its last element.
#[derive(Debug, Clone, PartialEq)]
pub struct Scripted<T> {
    first: T,
    later: Vec<T>,
}

impl<T: Clone> Scripted<T> {
    /// The same value at every poll.
    pub fn fixed(value: T) -> Self {
        Scripted {
            first: value,
            later: Vec::new(),
        }
    }

    /// The value at `poll`.
    pub fn at(&self, poll: usize) -> T {
        match poll.checked_sub(1) {
            None => self.first.clone(),
            Some(later_index) => self
                .later
                .get(later_index)
                .or(self.later.last())
                .unwrap_or(&self.first)
                .clone(),
        }
    }
}

impl<T: Clone + Default> Default for Scripted<T> {
    fn default() -> Self {
        Scripted::fixed(T::default())
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Scripted<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        match value {
            Value::Array(items) => {
                let mut values = items
                    .into_iter()
                    .map(T::deserialize)
                    .collect::<Result<Vec<T>, _>>()
                    .map_err(D::Error::custom)?
                    .into_iter();
                let first = values.next().ok_or_else(|| {
                    D::Error::custom(
                        "an empty array is not a per-poll script: give one value at least",
                    )
                })?;
                Ok(Scripted {
                    first,
                    later: values.collect(),
                })
            }
            single => T::deserialize(single)
                .map(|first| Scripted {
                    first,
                    later: Vec::new(),
                })
                .map_err(D::Error::custom),
        }
    }
}

/// Polls during which an entry exists: `[from, to)`, `to` = `null` meaning for ever.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct PollWindow(pub usize, pub Option<usize>);

impl PollWindow {
    pub fn contains(&self, poll: usize) -> bool {
        poll >= self.0 && self.1.map_or(true, |to| poll < to)
    }
}

pub fn present(window: &Option<PollWindow>, poll: usize) -> bool {
    window.map_or(true, |w| w.contains(poll))
}

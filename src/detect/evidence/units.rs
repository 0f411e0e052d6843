//! The units of evidence fields. Each field of a finding's evidence has a type that says its
//! unit (bytes, seconds, an instant, a share, a rate, a count, an identifier, text), written to
//! JSON as the bare number or string it holds; the views read the unit from the type
//! ([`Figure`]), never from the field's name.

use serde::{Deserialize, Serialize};

/// One field's value with its unit, as the views format it.
#[derive(Debug, Clone, PartialEq)]
pub enum Figure<'a> {
    /// Not known (`null` in the JSON, or a figure that is not a number).
    Unknown,
    Bytes(u64),
    /// Bytes that may be below zero (a headroom).
    SignedBytes(i64),
    BytesPerSec(f64),
    /// Bytes a training step, below zero where it falls.
    BytesPerStep(i64),
    MibPerMin(f64),
    /// Events a minute.
    PerMin(f64),
    /// A duration.
    Secs(f64),
    /// An instant, unix seconds.
    Time(f64),
    /// Clock ticks since boot: when a process started.
    Ticks(u64),
    /// A fraction, written as a percentage.
    Share(f64),
    /// A percentage already.
    Pct(f64),
    Steps(u64),
    Count(u64),
    /// A PID, a UID, a device index.
    Id(u64),
    Text(&'a str),
    Flag(bool),
    /// Figures of one unit.
    List(Vec<Figure<'a>>),
    /// Records, one line each: each its fields.
    Records(Vec<Fields<'a>>),
    /// The holders of a device file, one line each.
    Holders(&'a [super::Holder]),
    /// A value read back in no typed shape: shown as it was read.
    Json(&'a serde_json::Value),
}

/// Fields by name, in the JSON's order, each with its unit.
pub(crate) type Fields<'a> = Vec<(&'a str, Figure<'a>)>;

/// A type an evidence field can have: its figure, or `None` for a field absent from the JSON
/// (then no row either).
pub(crate) trait Field {
    fn figure(&self) -> Option<Figure<'_>>;
}

/// A type a list in the evidence can hold.
pub(crate) trait Item: Sized {
    fn list(items: &[Self]) -> Figure<'_>;
}

/// A figure, for a unit whose items are figures.
pub(crate) trait Plain {
    fn plain(&self) -> Figure<'_>;
}

impl<T: Field> Field for Option<T> {
    fn figure(&self) -> Option<Figure<'_>> {
        Some(
            self.as_ref()
                .and_then(Field::figure)
                .unwrap_or(Figure::Unknown),
        )
    }
}

impl<T: Item> Field for Vec<T> {
    fn figure(&self) -> Option<Figure<'_>> {
        Some(T::list(self))
    }
}

impl<T: Plain> Item for T {
    fn list(items: &[Self]) -> Figure<'_> {
        Figure::List(items.iter().map(Plain::plain).collect())
    }
}

impl Field for String {
    fn figure(&self) -> Option<Figure<'_>> {
        Some(Figure::Text(self))
    }
}

impl Plain for String {
    fn plain(&self) -> Figure<'_> {
        Figure::Text(self)
    }
}

impl Field for bool {
    fn figure(&self) -> Option<Figure<'_>> {
        Some(Figure::Flag(*self))
    }
}

/// A field written only where it is known: absent from the JSON otherwise, not `null` (the
/// struct gives it `#[serde(default, skip_serializing_if = "IfKnown::is_none")]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct IfKnown<T>(pub(crate) Option<T>);

impl<T> IfKnown<T> {
    pub(crate) fn is_none(&self) -> bool {
        self.0.is_none()
    }
}

impl<T> Default for IfKnown<T> {
    fn default() -> Self {
        IfKnown(None)
    }
}

impl<T> From<Option<T>> for IfKnown<T> {
    fn from(value: Option<T>) -> Self {
        IfKnown(value)
    }
}

impl<T: Field> Field for IfKnown<T> {
    fn figure(&self) -> Option<Figure<'_>> {
        self.0.as_ref().and_then(Field::figure)
    }
}

/// Floats compare as their JSON does: every value that is not finite is `null`.
fn same(a: f64, b: f64) -> bool {
    a == b || (!a.is_finite() && !b.is_finite())
}

/// A unit over an integer: its type, written as the bare number.
macro_rules! whole {
    ($($(#[$meta:meta])* $name:ident($inner:ty) => $figure:ident;)*) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl Plain for $name {
            fn plain(&self) -> Figure<'_> {
                Figure::$figure(self.0.into())
            }
        }

        impl Field for $name {
            fn figure(&self) -> Option<Figure<'_>> {
                Some(self.plain())
            }
        }
    )*};
}

/// A unit over a float: its type, written as the bare number.
macro_rules! real {
    ($($(#[$meta:meta])* $name:ident => $figure:ident;)*) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub f64);

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                same(self.0, other.0)
            }
        }

        impl Field for $name {
            fn figure(&self) -> Option<Figure<'_>> {
                Some(Figure::$figure(self.0))
            }
        }
    )*};
}

whole! {
    /// Bytes.
    Bytes(u64) => Bytes;
    /// Bytes that may be below zero: a headroom.
    SignedBytes(i64) => SignedBytes;
    /// Bytes a training step, below zero where memory falls.
    BytesPerStep(i64) => BytesPerStep;
    /// Training steps.
    Steps(u64) => Steps;
    /// How many of something: lines, retries, OOMs, entries.
    Count(u64) => Count;
    /// Clock ticks since boot: when a process started (`/proc/PID/stat`).
    Ticks(u64) => Ticks;
    /// A process id.
    Pid(u32) => Id;
    /// A user id.
    Uid(u32) => Id;
    /// A framework's device index (`cuda:N`).
    Index(u32) => Id;
}

real! {
    /// A duration in seconds.
    Secs => Secs;
    /// An instant, unix seconds.
    Time => Time;
    /// A fraction of a whole (0.25: a quarter), written as a percentage.
    Share => Share;
    /// Bytes a second.
    BytesPerSec => BytesPerSec;
    /// MiB a minute.
    MibPerMin => MibPerMin;
    /// Events a minute.
    PerMin => PerMin;
}

/// A percentage already (`2`, `0.5`): whole where it is counted, a float where it is a mean.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Pct {
    Whole(u64),
    Mean(f64),
}

impl PartialEq for Pct {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Pct::Whole(a), Pct::Whole(b)) => a == b,
            (Pct::Mean(a), Pct::Mean(b)) => same(*a, *b),
            _ => false,
        }
    }
}

impl Field for Pct {
    fn figure(&self) -> Option<Figure<'_>> {
        Some(Figure::Pct(match *self {
            Pct::Whole(n) => n as f64,
            Pct::Mean(f) => f,
        }))
    }
}

//! What is done to every field of a raw sample's structs, said once per field type rather than
//! once per struct: copying into a sample already read (format 2's reader reuses its
//! buffers), counting the heap it holds (the pause queue's budget), and packing it for a
//! queue that holds each string once (the pause queue).
//!
//! A struct declared through [`schema!`] gets all three field by field from its own
//! declaration, so that a field added to it is copied, counted and packed with no other
//! change: the struct is the one place its fields are listed.

use std::collections::BTreeMap;
use std::mem::size_of;

/// Makes a value equal to another, reusing what it already holds (a string's buffer).
pub(crate) trait Refill {
    fn refill(&mut self, from: &Self);
}

/// Bytes a value owns on the heap, beyond its own `size_of`: capacities as allocated; the
/// allocator's own slack is not counted.
pub(crate) trait Heap {
    fn heap(&self) -> usize;
}

/// A table that holds each distinct string once, for every value packed against it.
pub trait Interner: std::fmt::Debug {
    type Sym: Copy + std::fmt::Debug;
    fn intern(&mut self, text: String) -> Self::Sym;
    fn text(&self, sym: Self::Sym) -> String;
}

/// A field as a queue of many samples keeps it: its strings as symbols of an [`Interner`],
/// a large rarely present part boxed; everything else as it is.
pub trait Pack<I: Interner>: Sized {
    type Packed: std::fmt::Debug;
    fn pack(self, strings: &mut I) -> Self::Packed;
    fn unpack(packed: Self::Packed, strings: &I) -> Self;
    /// Each symbol the packed value names.
    fn symbols(_packed: &Self::Packed, _each: &mut dyn FnMut(I::Sym)) {}
}

/// A B-tree map's bookkeeping per entry (node headers and spare slots, shared out).
const MAP_ENTRY_OVERHEAD: usize = 16;

/// Values that own nothing on the heap: copied, counted as nothing, packed as they are.
macro_rules! plain_fields {
    ($($t:ty),*) => {$(
        impl Refill for $t {
            fn refill(&mut self, from: &Self) {
                *self = *from;
            }
        }
        impl Heap for $t {
            fn heap(&self) -> usize {
                0
            }
        }
        impl<I: Interner> Pack<I> for $t {
            type Packed = $t;
            fn pack(self, _: &mut I) -> $t {
                self
            }
            fn unpack(packed: $t, _: &I) -> $t {
                packed
            }
        }
    )*};
}

plain_fields!(
    bool,
    u32,
    u64,
    i64,
    f64,
    super::ContextKind,
    super::DeviceMemory
);

impl Refill for String {
    fn refill(&mut self, from: &Self) {
        self.clone_from(from);
    }
}

impl Heap for String {
    fn heap(&self) -> usize {
        self.capacity()
    }
}

impl<I: Interner> Pack<I> for String {
    type Packed = I::Sym;
    fn pack(self, strings: &mut I) -> I::Sym {
        strings.intern(self)
    }
    fn unpack(packed: I::Sym, strings: &I) -> String {
        strings.text(packed)
    }
    fn symbols(packed: &I::Sym, each: &mut dyn FnMut(I::Sym)) {
        each(*packed);
    }
}

impl<T: Refill + Clone> Refill for Option<T> {
    fn refill(&mut self, from: &Self) {
        match (self.as_mut(), from) {
            (Some(to), Some(from)) => to.refill(from),
            _ => self.clone_from(from),
        }
    }
}

impl<T: Heap> Heap for Option<T> {
    fn heap(&self) -> usize {
        self.as_ref().map_or(0, Heap::heap)
    }
}

impl<I: Interner, T: Pack<I>> Pack<I> for Option<T> {
    type Packed = Option<T::Packed>;
    fn pack(self, strings: &mut I) -> Self::Packed {
        self.map(|v| v.pack(strings))
    }
    fn unpack(packed: Self::Packed, strings: &I) -> Self {
        packed.map(|p| T::unpack(p, strings))
    }
    fn symbols(packed: &Self::Packed, each: &mut dyn FnMut(I::Sym)) {
        if let Some(p) = packed {
            T::symbols(p, each);
        }
    }
}

impl<T: Refill> Refill for Box<T> {
    fn refill(&mut self, from: &Self) {
        (**self).refill(from);
    }
}

impl<T: Heap> Heap for Box<T> {
    fn heap(&self) -> usize {
        size_of::<T>() + (**self).heap()
    }
}

/// A shared part (a process's owner, its state, its executable) is the same part in every
/// copy: refilled by sharing it.
impl<T: ?Sized> Refill for std::sync::Arc<T> {
    fn refill(&mut self, from: &Self) {
        self.clone_from(from);
    }
}

/// Counted whole by each holder: an upper bound where it is shared.
impl<T: Heap> Heap for std::sync::Arc<T> {
    fn heap(&self) -> usize {
        size_of::<T>() + (**self).heap()
    }
}

/// A shared text: its two counts and its bytes, counted whole by each holder as above.
impl Heap for std::sync::Arc<str> {
    fn heap(&self) -> usize {
        2 * size_of::<usize>() + self.len()
    }
}

/// A shared text is packed as a string is: a symbol, and made again from it.
impl<I: Interner> Pack<I> for std::sync::Arc<str> {
    type Packed = I::Sym;
    fn pack(self, strings: &mut I) -> I::Sym {
        strings.intern(String::from(&*self))
    }
    fn unpack(packed: I::Sym, strings: &I) -> Self {
        std::sync::Arc::from(strings.text(packed))
    }
    fn symbols(packed: &I::Sym, each: &mut dyn FnMut(I::Sym)) {
        each(*packed);
    }
}

impl<I: Interner, T: std::fmt::Debug> Pack<I> for std::sync::Arc<T> {
    type Packed = std::sync::Arc<T>;
    fn pack(self, _: &mut I) -> Self {
        self
    }
    fn unpack(packed: Self, _: &I) -> Self {
        packed
    }
}

impl<T: Clone> Refill for Vec<T> {
    fn refill(&mut self, from: &Self) {
        self.clone_from(from);
    }
}

impl<T: Heap> Heap for Vec<T> {
    fn heap(&self) -> usize {
        self.capacity() * size_of::<T>() + self.iter().map(Heap::heap).sum::<usize>()
    }
}

impl<K: Clone, V: Clone> Refill for BTreeMap<K, V> {
    fn refill(&mut self, from: &Self) {
        self.clone_from(from);
    }
}

impl<K: Heap, V: Heap> Heap for BTreeMap<K, V> {
    fn heap(&self) -> usize {
        self.iter()
            .map(|(k, v)| size_of::<(K, V)>() + MAP_ENTRY_OVERHEAD + k.heap() + v.heap())
            .sum()
    }
}

impl Heap for serde_json::Value {
    fn heap(&self) -> usize {
        use serde_json::Value;
        match self {
            Value::Null | Value::Bool(_) | Value::Number(_) => 0,
            Value::String(s) => s.heap(),
            Value::Array(items) => items.heap(),
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| {
                    size_of::<(String, Value)>() + MAP_ENTRY_OVERHEAD + k.heap() + v.heap()
                })
                .sum(),
        }
    }
}

/// Declares a struct of the raw sample and, from its own field list, how it is refilled
/// ([`Refill`]) and counted ([`Heap`]); with `packed NAME;` before it, also its packed form
/// `NAME<I>` (each field's [`Pack::Packed`]) and [`Pack`] into it. The field list is written
/// once, here: nothing else names every field of the struct.
macro_rules! schema {
    (@struct
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field : $ty ),*
        }

        impl $crate::sample::fields::Refill for $name {
            fn refill(&mut self, from: &Self) {
                $( $crate::sample::fields::Refill::refill(&mut self.$field, &from.$field); )*
            }
        }

        impl $crate::sample::fields::Heap for $name {
            fn heap(&self) -> usize {
                0 $( + $crate::sample::fields::Heap::heap(&self.$field) )*
            }
        }
    };
    (@packed $packed:ident
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        #[doc = concat!("[`", stringify!($name), "`] as a queue keeps it: its strings as symbols.")]
        #[derive(Debug)]
        $vis struct $packed<I: $crate::sample::fields::Interner> {
            $( $fvis $field: <$ty as $crate::sample::fields::Pack<I>>::Packed ),*
        }

        impl<I: $crate::sample::fields::Interner> $crate::sample::fields::Pack<I> for $name {
            type Packed = $packed<I>;
            fn pack(self, strings: &mut I) -> $packed<I> {
                $packed {
                    $( $field: $crate::sample::fields::Pack::pack(self.$field, strings) ),*
                }
            }
            fn unpack(packed: $packed<I>, strings: &I) -> $name {
                $name {
                    $( $field: <$ty as $crate::sample::fields::Pack<I>>::unpack(packed.$field, strings) ),*
                }
            }
            fn symbols(packed: &$packed<I>, each: &mut dyn FnMut(I::Sym)) {
                $( <$ty as $crate::sample::fields::Pack<I>>::symbols(&packed.$field, each); )*
            }
        }
    };
    (packed $packed:ident; $($item:tt)*) => {
        $crate::sample::fields::schema!(@struct $($item)*);
        $crate::sample::fields::schema!(@packed $packed $($item)*);
    };
    ($($item:tt)*) => {
        $crate::sample::fields::schema!(@struct $($item)*);
    };
}

pub(crate) use schema;

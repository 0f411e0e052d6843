//! A series ring's items in shared blocks: a deque whose full blocks a copy shares rather
//! than copies. A replay keeps dozens of copies of the history (its checkpoints), each a
//! few minutes on from the last: copied this way, each costs the blocks written since the
//! one before it, not the whole history again. Only the items after the last full block
//! (the tail) are each copy's own, copied with it and written in place.
//!
//! A block that holds the same items as the one before it (a figure that held still for a
//! whole block: a plateau, a counter at 0, an idle GPU) is that block again, shared, not a
//! copy. After every block the tail, while it goes on repeating that block's items, is
//! kept as a count of them (an echo) with no memory of its own: a still series costs one
//! block and a pointer for each block after it, so its memory stops growing while nothing
//! moves.

use std::collections::VecDeque;
use std::sync::Arc;

/// Items a block holds at most: the ring's capacity over four, a power of two from 4 to 64,
/// so that a ring holds at most a quarter more than its capacity.
fn block_shift(capacity: usize) -> u8 {
    // From 2 to 6.
    (capacity / 4).clamp(4, 64).ilog2() as u8
}

/// Items the first block makes room for at first; it grows by half again up to a block.
pub(super) const FIRST_ROOM: usize = 4;

pub(super) struct Blocks<T: Copy + PartialEq> {
    /// Full blocks, shared by copies; the first's `skip` items are gone. A block equal to the
    /// one before it is that one's memory again (`Arc::ptr_eq`).
    blocks: VecDeque<Arc<[T]>>,
    /// The items after them, up to a full block: this copy's own, written in place, and
    /// made a shared block when the next item comes. Empty, with no room, while `echo`
    /// counts the tail's items instead.
    tail: Vec<T>,
    /// Below a block once a drop is done (a block is at most 64 items).
    skip: u16,
    /// At most a ring's capacity (2^16) and a block.
    len: u32,
    shift: u8,
    /// The tail, where it is not 0: the first `echo` items of the last block, the same
    /// items again, held as that count (see the module's comment). Begins after every
    /// block; the tail is made its own at the first item that differs, at a write that
    /// changes its newest item, and before the last block is let go.
    echo: u16,
    /// [`Blocks::bytes`], kept as the memory changes (a block made or let go, the tail
    /// grown) rather than worked out at each of the history's writes, which ask it before
    /// and after: a block's items and header once for each run of the same block, and a
    /// pointer for every block. A `u32` beside `shift`, where it costs no room: a ring
    /// holds at most 2^16 items of a few bytes.
    bytes: u32,
}

/// What it holds, without [`Blocks::bytes`]: a copy holds the same with less room in its
/// tail, and reads the same.
impl<T: Copy + PartialEq + std::fmt::Debug> std::fmt::Debug for Blocks<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blocks")
            .field("blocks", &self.blocks)
            .field("tail", &self.tail)
            .field("echo", &self.echo)
            .field("skip", &self.skip)
            .field("len", &self.len)
            .field("shift", &self.shift)
            .finish()
    }
}

impl<T: Copy + PartialEq> Clone for Blocks<T> {
    fn clone(&self) -> Self {
        // A copy's tail holds its items and no more room: its own bytes.
        let mut copy = Blocks {
            blocks: self.blocks.clone(),
            tail: self.tail.clone(),
            skip: self.skip,
            len: self.len,
            shift: self.shift,
            echo: self.echo,
            bytes: 0,
        };
        copy.count_bytes();
        copy
    }
}

impl<T: Copy + PartialEq> Blocks<T> {
    /// Blocks for a ring of `capacity` items.
    pub(crate) fn new(capacity: usize) -> Self {
        Blocks {
            blocks: VecDeque::new(),
            tail: Vec::new(),
            skip: 0,
            len: 0,
            shift: block_shift(capacity),
            echo: 0,
            bytes: 0,
        }
    }

    /// Works [`Blocks::bytes`] out again, after the memory changed.
    fn count_bytes(&mut self) {
        let bytes = self.held_bytes();
        self.bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
    }

    /// [`Blocks::bytes`] worked out from what is held: each block's pointer, each run of
    /// the same block's items and header once, and the tail's room.
    fn held_bytes(&self) -> usize {
        let runs = self
            .blocks
            .iter()
            .zip(self.blocks.iter().skip(1))
            .filter(|(a, b)| !Arc::ptr_eq(a, b))
            .count()
            + usize::from(!self.blocks.is_empty());
        self.blocks.len() * BLOCK_POINTER
            + runs * (self.block_bytes() - BLOCK_POINTER)
            + self.tail.capacity() * std::mem::size_of::<T>()
    }

    fn block(&self) -> usize {
        1 << self.shift
    }

    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    pub(crate) fn clear(&mut self) {
        self.blocks.clear();
        self.tail = Vec::new();
        self.skip = 0;
        self.len = 0;
        self.echo = 0;
        self.bytes = 0;
    }

    /// What a full block costs (one that repeats the block before it: [`BLOCK_POINTER`]).
    fn block_bytes(&self) -> usize {
        self.block() * std::mem::size_of::<T>() + BLOCK_OVERHEAD
    }

    /// Appends an item: in place in the tail where it has room short of a block (most
    /// writes, inlined where a ring writes), or through [`Blocks::push_back_growing`].
    #[inline]
    pub(crate) fn push_back(&mut self, value: T) {
        let held = self.tail.len();
        if held < self.tail.capacity() && held < self.block() {
            self.tail.push(value);
            self.len += 1;
            return;
        }
        self.push_back_growing(value);
    }

    /// [`Blocks::push_back`] where the tail is a full block (made a shared one, or the
    /// block before it again where it holds the same items), has no room (grown), or is an
    /// echo (counted on while the item is the last block's at its place).
    #[inline(never)]
    fn push_back_growing(&mut self, value: T) {
        let block = self.block();
        if usize::from(self.echo) == block {
            // A whole block echoed: that block again, and the echo begins anew.
            if let Some(last) = self.blocks.back() {
                let again = Arc::clone(last);
                self.blocks.push_back(again);
            }
            self.echo = 0;
            self.count_bytes();
        } else if self.tail.len() == block {
            let full = match self.blocks.back() {
                Some(last) if **last == *self.tail => Arc::clone(last),
                _ => Arc::from(self.tail.as_slice()),
            };
            self.blocks.push_back(full);
            // The items after it may repeat it (a figure that holds): an echo, with no
            // room, until one differs. A tail that moves is made again then, once a block.
            self.tail = Vec::new();
            self.count_bytes();
        }
        // An empty tail with no room after a block: an echo while the items repeat that
        // block's.
        if self.tail.capacity() == 0 {
            if let Some(last) = self.blocks.back() {
                if last[usize::from(self.echo)] == value {
                    // Made a block again only when the next item comes, as a full tail is.
                    self.echo += 1;
                    self.len += 1;
                    return;
                }
                self.make_tail();
            }
        }
        if self.tail.len() == self.tail.capacity() {
            // The first block grows by half again, as the ring's memory follows what it
            // holds; later ones are made whole.
            let room = if self.blocks.is_empty() {
                (self.tail.len() / 2).max(FIRST_ROOM)
            } else {
                block
            };
            self.tail
                .reserve_exact(room.min(block - self.tail.len()).max(1));
            self.count_bytes();
        }
        self.tail.push(value);
        self.len += 1;
    }

    /// Makes an echo a tail of its own: the last block's first items, copied, with room for
    /// a block.
    fn make_tail(&mut self) {
        let echo = usize::from(std::mem::take(&mut self.echo));
        if let Some(last) = self.blocks.back() {
            let mut tail = Vec::with_capacity(self.block());
            tail.extend_from_slice(&last[..echo]);
            self.tail = tail;
            self.count_bytes();
        }
    }

    /// The tail's items: its own, or the echo's.
    fn tail_items(&self) -> &[T] {
        match self.blocks.back() {
            Some(last) if self.echo > 0 => &last[..usize::from(self.echo)],
            _ => &self.tail,
        }
    }

    /// Lets the oldest `n` items go (all of them, at most): where they are all in the first
    /// block and it keeps some, only counted as gone (most drops, inlined where a ring
    /// writes), or through [`Blocks::drop_front_freeing`].
    #[inline]
    pub(crate) fn drop_front(&mut self, n: usize) {
        if n < self.len() && !self.blocks.is_empty() && usize::from(self.skip) + n < self.block() {
            // Below a block: `n` fits either.
            self.len -= n as u32;
            self.skip += n as u16;
            return;
        }
        self.drop_front_freeing(n);
    }

    /// [`Blocks::drop_front`] where a block or the tail's items go, or all of them.
    #[inline(never)]
    fn drop_front_freeing(&mut self, n: usize) {
        let n = n.min(self.len());
        // At most `len`: it fits.
        self.len -= n as u32;
        if self.len == 0 {
            self.clear();
            return;
        }
        let mut skip = usize::from(self.skip);
        if self.blocks.is_empty() {
            self.tail.drain(skip..skip + n);
            return;
        }
        if self.echo > 0 && (skip + n) >> self.shift >= self.blocks.len() {
            // The block the echo repeats goes: the tail is made its own first.
            self.make_tail();
        }
        skip += n;
        let block = self.block();
        while skip >= block && !self.blocks.is_empty() {
            self.blocks.pop_front();
            skip -= block;
        }
        if self.blocks.is_empty() && skip > 0 {
            self.tail.drain(..skip);
            skip = 0;
        }
        // Below a block now (or 0): it fits.
        self.skip = skip as u16;
        self.count_bytes();
    }

    /// Holds items in blocks of a ring of `capacity` from now on.
    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        let shift = block_shift(capacity);
        if shift != self.shift {
            let items: Vec<T> = self.iter().copied().collect();
            *self = Blocks::new(capacity);
            items.into_iter().for_each(|v| self.push_back(v));
        }
    }

    /// The newest item: always in the tail or its echo (a full tail or a whole block's echo
    /// becomes a block only when the next item comes), so writing it never touches a shared
    /// block.
    pub(crate) fn back(&self) -> Option<&T> {
        self.tail_items().last()
    }

    /// Writes the newest item over (none where there is none): an echo is made a tail of
    /// its own only where the item changes.
    pub(crate) fn set_back(&mut self, value: T) {
        if self.back().is_none_or(|&v| v == value) {
            return;
        }
        if self.echo > 0 {
            self.make_tail();
        }
        if let Some(last) = self.tail.last_mut() {
            *last = value;
        }
    }

    /// Bytes of the items' memory, as allocated (shared blocks counted whole).
    #[inline]
    pub(crate) fn bytes(&self) -> usize {
        debug_assert_eq!(
            self.bytes as usize,
            self.held_bytes(),
            "the bytes kept are the bytes held"
        );
        self.bytes as usize
    }

    /// The most [`Blocks::bytes`] says for a ring of `capacity` items: every item of the
    /// capacity, the first block's items already gone, and each block's own cost.
    #[cfg(test)]
    pub(crate) fn most_bytes(capacity: usize) -> usize {
        let block = 1 << block_shift(capacity);
        let blocks = capacity.div_ceil(block) + 1;
        blocks * (block * std::mem::size_of::<T>() + BLOCK_OVERHEAD)
    }

    /// Bytes of the blocks that `other` does not share with this one: [`Blocks::bytes`]
    /// less what each block `other` also holds costs here (its items and header where it
    /// begins a run of the same block, its pointer where it repeats the one before).
    pub(crate) fn bytes_beside(&self, other: &Blocks<T>) -> usize {
        let mut before: Option<&Arc<[T]>> = None;
        let mut shared = 0;
        for b in &self.blocks {
            if other.blocks.iter().any(|o| Arc::ptr_eq(b, o)) {
                shared += if before.is_some_and(|p| Arc::ptr_eq(p, b)) {
                    BLOCK_POINTER
                } else {
                    self.block_bytes()
                };
            }
            before = Some(b);
        }
        self.bytes() - shared
    }

    pub(crate) fn iter(&self) -> Iter<'_, T> {
        self.range(0..self.len())
    }

    /// The `i`th block, the tail last.
    fn block_at(&self, i: usize) -> &[T] {
        match self.blocks.get(i) {
            Some(b) => b,
            None => self.tail_items(),
        }
    }

    /// Items `range` (indices from the oldest held).
    pub(crate) fn range(&self, range: std::ops::Range<usize>) -> Iter<'_, T> {
        let end = range.end.min(self.len());
        let start = range.start.min(end);
        let skip = usize::from(self.skip);
        let (a, b) = (skip + start, skip + end);
        let empty = Iter {
            blocks: self,
            front: [].iter(),
            middle: 0..0,
            back: [].iter(),
            left: 0,
        };
        if a == b {
            return empty;
        }
        let mask = (1 << self.shift) - 1;
        let (first, last) = (a >> self.shift, (b - 1) >> self.shift);
        let (from, to) = (a & mask, ((b - 1) & mask) + 1);
        if first == last {
            return Iter {
                front: self.block_at(first)[from..to].iter(),
                left: b - a,
                ..empty
            };
        }
        Iter {
            front: self.block_at(first)[from..].iter(),
            middle: first + 1..last,
            back: self.block_at(last)[..to].iter(),
            left: b - a,
            ..empty
        }
    }
}

/// A block's pointer and length in the deque: all a block that repeats the one before it
/// costs.
const BLOCK_POINTER: usize = std::mem::size_of::<Arc<[u8]>>();

/// What a block costs beside its items: the shared counts' header, and its pointer.
pub(super) const BLOCK_OVERHEAD: usize = 16 + BLOCK_POINTER;

/// Items of [`Blocks`]: the first block's part, the whole blocks between, the last's part.
#[derive(Debug, Clone)]
pub(super) struct Iter<'a, T: Copy + PartialEq> {
    blocks: &'a Blocks<T>,
    front: std::slice::Iter<'a, T>,
    middle: std::ops::Range<usize>,
    back: std::slice::Iter<'a, T>,
    left: usize,
}

impl<'a, T: Copy + PartialEq> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        loop {
            if let Some(v) = self.front.next() {
                self.left -= 1;
                return Some(v);
            }
            match self.middle.next() {
                Some(i) => self.front = self.blocks.block_at(i).iter(),
                None => {
                    let v = self.back.next();
                    self.left -= usize::from(v.is_some());
                    return v;
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }

    /// Slice by slice: what `min`, `max`, `sum` and `for_each` go through, as fast as over
    /// one slice.
    fn fold<B, F: FnMut(B, &'a T) -> B>(self, init: B, mut f: F) -> B {
        let mut acc = self.front.fold(init, &mut f);
        for i in self.middle {
            acc = self.blocks.block_at(i).iter().fold(acc, &mut f);
        }
        self.back.fold(acc, f)
    }
}

impl<'a, T: Copy + PartialEq> DoubleEndedIterator for Iter<'a, T> {
    fn rfold<B, F: FnMut(B, &'a T) -> B>(self, init: B, mut f: F) -> B {
        let mut acc = self.back.rfold(init, &mut f);
        for i in self.middle.rev() {
            acc = self.blocks.block_at(i).iter().rfold(acc, &mut f);
        }
        self.front.rfold(acc, f)
    }

    fn next_back(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(v) = self.back.next_back() {
                self.left -= 1;
                return Some(v);
            }
            match self.middle.next_back() {
                Some(i) => self.back = self.blocks.block_at(i).iter(),
                None => {
                    let v = self.front.next_back();
                    self.left -= usize::from(v.is_some());
                    return v;
                }
            }
        }
    }
}

impl<T: Copy + PartialEq> ExactSizeIterator for Iter<'_, T> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Push(u32),
        /// The same value again and again: blocks that repeat the one before.
        Hold(u32, usize),
        DropFront(usize),
        SetBack(u32),
        Copy,
        Capacity(usize),
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => any::<u32>().prop_map(Op::Push),
            2 => (0u32..3, 1usize..300).prop_map(|(v, n)| Op::Hold(v, n)),
            2 => (0usize..80).prop_map(Op::DropFront),
            1 => any::<u32>().prop_map(Op::SetBack),
            1 => Just(Op::Copy),
            1 => (1usize..400).prop_map(Op::Capacity),
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        /// Blocks hold what a plain deque does, through copies that go on apart: a copy's
        /// writes never show in the original, nor the original's in the copy.
        #[test]
        fn blocks_hold_what_a_deque_does(ops in proptest::collection::vec(op(), 0..600),
                                         capacity in 1usize..400) {
            let mut blocks = Blocks::new(capacity);
            let mut deque: VecDeque<u32> = VecDeque::new();
            let mut copies: Vec<(Blocks<u32>, VecDeque<u32>)> = Vec::new();
            for op in ops {
                match op {
                    Op::Push(v) => {
                        blocks.push_back(v);
                        deque.push_back(v);
                    }
                    Op::Hold(v, n) => {
                        for _ in 0..n {
                            blocks.push_back(v);
                            deque.push_back(v);
                        }
                    }
                    Op::DropFront(n) => {
                        blocks.drop_front(n);
                        deque.drain(..n.min(deque.len()));
                    }
                    Op::SetBack(v) => {
                        blocks.set_back(v);
                        if let Some(b) = deque.back_mut() {
                            *b = v;
                        }
                    }
                    Op::Copy => copies.push((blocks.clone(), deque.clone())),
                    Op::Capacity(c) => blocks.set_capacity(c),
                    Op::Clear => {
                        blocks.clear();
                        deque.clear();
                    }
                }
                prop_assert_eq!(blocks.len(), deque.len());
                prop_assert_eq!(blocks.back(), deque.back());
                for b in copies.iter().map(|(b, _)| b).chain(std::iter::once(&blocks)) {
                    // Counted plainly: each distinct block's items and header once, a
                    // pointer for every block, the tail's room.
                    let mut distinct: Vec<&Arc<[u32]>> = Vec::new();
                    for block in &b.blocks {
                        if !distinct.iter().any(|d| Arc::ptr_eq(d, block)) {
                            distinct.push(block);
                        }
                    }
                    prop_assert_eq!(
                        b.bytes as usize,
                        b.blocks.len() * BLOCK_POINTER
                            + distinct.len() * (b.block() * 4 + BLOCK_OVERHEAD - BLOCK_POINTER)
                            + b.tail.capacity() * 4,
                        "the bytes kept are the bytes held"
                    );
                    // An echo has no tail of its own, and repeats a block it is within.
                    if b.echo > 0 {
                        prop_assert!(b.tail.capacity() == 0 && !b.blocks.is_empty());
                        prop_assert!(usize::from(b.echo) <= b.block());
                    }
                    // A block is shared only with one that holds the same items.
                    for pair in b.blocks.iter().zip(b.blocks.iter().skip(1)) {
                        prop_assert_eq!(Arc::ptr_eq(pair.0, pair.1), pair.0 == pair.1);
                    }
                }
            }
            for (b, d) in copies.iter().chain(std::iter::once(&(blocks, deque))) {
                prop_assert_eq!(b.iter().copied().collect::<Vec<_>>(), d.iter().copied().collect::<Vec<_>>());
                prop_assert_eq!(b.iter().rev().copied().collect::<Vec<_>>(), d.iter().rev().copied().collect::<Vec<_>>());
                prop_assert_eq!(b.iter().copied().max(), d.iter().copied().max());
                prop_assert_eq!(
                    b.iter().rfold(Vec::new(), |mut v, x| { v.push(*x); v }),
                    d.iter().rev().copied().collect::<Vec<_>>()
                );
                let mut half = b.iter();
                let taken: Vec<u32> = half.by_ref().take(d.len() / 2).copied().collect();
                let rest: Vec<u32> = half.fold(taken, |mut v, x| { v.push(*x); v });
                prop_assert_eq!(rest, d.iter().copied().collect::<Vec<_>>());
                for start in [0, 1, d.len() / 3, d.len() / 2] {
                    for end in [start, d.len() / 2 + 1, d.len()] {
                        if start <= end && end <= d.len() {
                            prop_assert_eq!(
                                b.range(start..end).copied().collect::<Vec<_>>(),
                                d.range(start..end).copied().collect::<Vec<_>>()
                            );
                            prop_assert_eq!(b.range(start..end).len(), end - start);
                        }
                    }
                }
            }
        }
    }

    /// A ring that holds one value costs one block and a pointer for each block after it,
    /// not a block for every 64 of its items; once it moves, its blocks are its own again.
    #[test]
    fn a_still_ring_holds_one_block() {
        let mut blocks = Blocks::new(900);
        let one = 64 * 4 + BLOCK_OVERHEAD;
        for _ in 0..74 {
            blocks.push_back(7u32);
        }
        // From the first block on: the items after it echo it, with no tail of their own.
        assert_eq!((blocks.blocks.len(), blocks.echo), (1, 10));
        assert_eq!(blocks.bytes(), one);
        for _ in 74..900 {
            blocks.push_back(7u32);
        }
        // Fourteen full blocks of 64 and a tail of 4 that echoes the last: one block's
        // memory, and no tail of its own.
        assert_eq!((blocks.blocks.len(), blocks.echo), (14, 4));
        assert_eq!(blocks.bytes(), one + 13 * BLOCK_POINTER);
        assert_eq!(blocks.len(), 900);
        assert_eq!(blocks.back(), Some(&7));
        // A copy shares all of it, its echo too.
        let copy = blocks.clone();
        assert_eq!(copy.bytes_beside(&blocks), 0);
        // Values that move make blocks of their own, from the echo on.
        for v in 0..128 {
            blocks.push_back(v);
        }
        assert_eq!(blocks.blocks.len(), 16);
        assert_eq!(blocks.bytes(), 3 * one + 13 * BLOCK_POINTER + 64 * 4);
        // Letting the first block go keeps the run's memory while the rest of it is held.
        blocks.drop_front(64);
        assert_eq!(blocks.bytes(), 3 * one + 12 * BLOCK_POINTER + 64 * 4);
        assert!(blocks.iter().take(13 * 64).all(|&v| v == 7));
        assert_eq!(
            blocks.iter().skip(13 * 64 - 60).copied().nth(60 + 4),
            Some(0)
        );
    }

    /// A copy a few values on shares every full block but the ones written since.
    #[test]
    fn a_copy_shares_its_full_blocks() {
        let mut blocks = Blocks::new(900);
        for v in 0..900 {
            blocks.push_back(v);
        }
        let copy = blocks.clone();
        // Its own: the tail, the items after the last full block.
        assert_eq!(copy.bytes_beside(&blocks), (900 % 64) * 4, "the tail alone");
        for v in 900..1000 {
            blocks.push_back(v);
            blocks.drop_front(1);
        }
        // 64-item blocks: the tail its own, the blocks filled since, and the two
        // oldest let go by the original are the copy's alone.
        let alone = copy.bytes_beside(&blocks);
        assert!(
            alone > 0 && alone <= 4 * (64 * 4 + BLOCK_OVERHEAD),
            "{alone}"
        );
        assert!(
            blocks.bytes() <= (900 + 128) * 4 + 17 * BLOCK_OVERHEAD,
            "{}",
            blocks.bytes()
        );
    }
}

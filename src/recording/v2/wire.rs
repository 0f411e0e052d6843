//! The bytes of a format-2 record: LEB128 varints, zigzag signs, bit-packed columns, and the
//! record's frame (tag, length, CRC-32).
//!
//! A sample's numbers are written in two places: a *control* byte stream (what kind of value
//! each one is: the same as before, the last step again, a delta, unknown), which repeats
//! from one sample to the next and so costs almost nothing once compressed, and one
//! bit-packed *column* per field, holding only the deltas that carry information, each at
//! the width of that column's largest value in the sample.

use std::fmt;

/// Why a record could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireError(pub(crate) String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) type Result<T> = std::result::Result<T, WireError>;

pub(crate) fn err<T>(what: impl Into<String>) -> Result<T> {
    Err(WireError(what.into()))
}

pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes read from a slice, in order.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    pub(crate) fn byte(&mut self) -> Result<u8> {
        let b = *self
            .bytes
            .get(self.pos)
            .ok_or_else(|| WireError("the record ends early".into()))?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        err("a number longer than 64 bits")
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| WireError("the record ends early".into()))?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// The next `N` bytes, where that many are left (`None`, reading nothing, where not):
    /// one bounds check for a run of bytes that are each read alone otherwise.
    #[inline(always)]
    pub(crate) fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let end = self.pos.checked_add(N)?;
        let out: [u8; N] = self.bytes.get(self.pos..end)?.try_into().ok()?;
        self.pos = end;
        Some(out)
    }

    /// A varint length, then that many bytes.
    pub(crate) fn chunk(&mut self) -> Result<&'a [u8]> {
        let n = self.varint()?;
        self.take(usize::try_from(n).map_err(|_| WireError("a length too large".into()))?)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos == self.bytes.len()
    }
}

/// Values packed at a fixed number of bits each, least significant bit first.
#[derive(Debug, Default, Clone)]
pub(crate) struct BitWriter {
    bytes: Vec<u8>,
    acc: u128,
    bits: u32,
}

impl BitWriter {
    pub(crate) fn put(&mut self, value: u64, width: u32) {
        if width == 0 {
            return;
        }
        self.acc |= u128::from(value) << self.bits;
        self.bits += width;
        while self.bits >= 8 {
            self.bytes.push(self.acc as u8);
            self.acc >>= 8;
            self.bits -= 8;
        }
    }

    pub(crate) fn finish(mut self) -> Vec<u8> {
        if self.bits > 0 {
            self.bytes.push(self.acc as u8);
        }
        self.bytes
    }
}

#[derive(Debug, Clone)]
pub(crate) struct BitReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    acc: u128,
    bits: u32,
}

impl<'a> BitReader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        BitReader {
            bytes,
            pos: 0,
            acc: 0,
            bits: 0,
        }
    }

    pub(crate) fn get(&mut self, width: u32) -> Result<u64> {
        if width == 0 {
            return Ok(0);
        }
        while self.bits < width {
            let b = *self
                .bytes
                .get(self.pos)
                .ok_or_else(|| WireError("a column ends early".into()))?;
            self.acc |= u128::from(b) << self.bits;
            self.pos += 1;
            self.bits += 8;
        }
        let mask = if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        let v = (self.acc as u64) & mask;
        self.acc >>= width;
        self.bits -= width;
        Ok(v)
    }
}

/// Bits needed for `v` (0 for 0).
pub(crate) fn width(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// The columns of one record being written: each value pushed to its column, packed when
/// the record is finished. A column has two widths: its largest value's, and a narrower one
/// that most of its values fit (chosen for the fewest bits); where they differ, each value
/// is preceded by one bit saying which it takes.
#[derive(Debug)]
pub(crate) struct ColumnsOut {
    columns: Vec<Vec<u64>>,
}

impl ColumnsOut {
    pub(crate) fn new(count: usize) -> Self {
        ColumnsOut {
            columns: vec![Vec::new(); count],
        }
    }

    pub(crate) fn push(&mut self, column: usize, value: u64) {
        self.columns[column].push(value);
    }

    /// The column table (each column's count and width, into `control`) and the packed
    /// columns, one after the other (into `packed`).
    pub(crate) fn finish(self, control: &mut Vec<u8>, packed: &mut Vec<u8>) {
        for values in &self.columns {
            put_varint(control, values.len() as u64);
            if values.is_empty() {
                continue;
            }
            let (narrow, wide) = widths(values);
            control.push(narrow as u8);
            control.push(wide as u8);
            let mut bits = BitWriter::default();
            for &v in values {
                if narrow == wide {
                    bits.put(v, wide);
                } else if width(v) <= narrow {
                    bits.put(0, 1);
                    bits.put(v, narrow);
                } else {
                    bits.put(1, 1);
                    bits.put(v, wide);
                }
            }
            packed.extend(bits.finish());
        }
    }
}

/// The two widths of a column's values (see [`ColumnsOut`]).
fn widths(values: &[u64]) -> (u32, u32) {
    let mut count = [0u64; 65];
    for &v in values {
        count[width(v) as usize] += 1;
    }
    let wide = (0..=64).rev().find(|&w| count[w] > 0).unwrap_or(0) as u32;
    let n = values.len() as u64;
    let mut best = (n * u64::from(wide), wide);
    let mut fit = 0u64;
    for narrow in 0..wide {
        fit += count[narrow as usize];
        let bits = n + fit * u64::from(narrow) + (n - fit) * u64::from(wide);
        if bits < best.0 {
            best = (bits, narrow);
        }
    }
    (best.1, wide)
}

/// The bits a column of `n` values takes, given its widths: an upper bound where they
/// differ (each value may be the wide one).
fn column_bits(n: u64, narrow: u32, wide: u32) -> Option<u64> {
    let per = if narrow == wide { wide } else { wide + 1 };
    n.checked_mul(u64::from(per))
}

/// One column being read: its bits, widths and values left.
#[derive(Debug)]
struct ColumnIn<'a> {
    bits: BitReader<'a>,
    narrow: u32,
    wide: u32,
    left: u64,
}

/// The columns of one record being read.
#[derive(Debug)]
pub(crate) struct ColumnsIn<'a> {
    columns: Vec<ColumnIn<'a>>,
}

impl<'a> ColumnsIn<'a> {
    /// Reads the column table from `control` and cuts `packed` into the columns: `least`
    /// of them, then more up to `most` while the table goes on (a record of an older layout
    /// has fewer columns: the ones it lacks are empty).
    pub(crate) fn read(
        least: usize,
        most: usize,
        control: &mut Reader<'_>,
        packed: &'a [u8],
    ) -> Result<Self> {
        let mut columns = Vec::with_capacity(most);
        let mut at = 0usize;
        for k in 0..most {
            if k >= least && control.is_empty() {
                columns.push(ColumnIn {
                    bits: BitReader::new(&[]),
                    narrow: 0,
                    wide: 0,
                    left: 0,
                });
                continue;
            }
            let n = control.varint()?;
            let (narrow, wide) = if n == 0 {
                (0, 0)
            } else {
                (u32::from(control.byte()?), u32::from(control.byte()?))
            };
            if wide > 64 || narrow > wide {
                return err("a column's widths do not read");
            }
            // Its exact length is known once read: here, where its bits may end at most.
            let most = column_bits(n, narrow, wide)
                .map(|b| b.div_ceil(8))
                .and_then(|b| usize::try_from(b).ok())
                .ok_or_else(|| WireError("a column too long".into()))?;
            let end = at.saturating_add(most).min(packed.len());
            let mut probe = ColumnIn {
                bits: BitReader::new(&packed[at..end]),
                narrow,
                wide,
                left: n,
            };
            let mut used = 0u64;
            for _ in 0..n {
                used += u64::from(probe.skip()?);
            }
            let bytes = usize::try_from(used.div_ceil(8))
                .map_err(|_| WireError("a column too long".into()))?;
            columns.push(ColumnIn {
                bits: BitReader::new(&packed[at..at + bytes]),
                narrow,
                wide,
                left: n,
            });
            at += bytes;
        }
        Ok(ColumnsIn { columns })
    }

    pub(crate) fn get(&mut self, column: usize) -> Result<u64> {
        let c = self
            .columns
            .get_mut(column)
            .ok_or_else(|| WireError("no such column".into()))?;
        if c.left == 0 {
            return err("a column holds fewer values than its record uses");
        }
        c.left -= 1;
        c.value()
    }
}

impl ColumnIn<'_> {
    fn width_next(&mut self) -> Result<u32> {
        if self.narrow == self.wide {
            return Ok(self.wide);
        }
        Ok(if self.bits.get(1)? == 0 {
            self.narrow
        } else {
            self.wide
        })
    }

    fn value(&mut self) -> Result<u64> {
        let w = self.width_next()?;
        self.bits.get(w)
    }

    /// Reads past one value; the bits it took.
    fn skip(&mut self) -> Result<u32> {
        let w = self.width_next()?;
        self.bits.get(w)?;
        Ok(w + u32::from(self.narrow != self.wide))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_zigzag_and_bits_read_back() {
        let mut out = Vec::new();
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            put_varint(&mut out, v);
        }
        let mut r = Reader::new(&out);
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            assert_eq!(r.varint(), Ok(v));
        }
        assert!(r.is_empty());
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -300] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        let mut bits = BitWriter::default();
        let values = [(5u64, 3), (0, 0), (u64::MAX, 64), (1, 1), (1000, 17)];
        for (v, w) in values {
            bits.put(v, w);
        }
        let bytes = bits.finish();
        assert_eq!(bytes.len(), (3 + 64 + 1 + 17usize).div_ceil(8));
        let mut r = BitReader::new(&bytes);
        for (v, w) in values {
            assert_eq!(r.get(w), Ok(v));
        }
        assert!(r.get(8).is_err(), "past the end");
    }

    #[test]
    fn a_run_of_bytes_is_read_whole_or_not_at_all() {
        let bytes = [1u8, 2, 3, 4, 5];
        let mut r = Reader::new(&bytes);
        assert_eq!(r.byte(), Ok(1));
        assert_eq!(r.array::<3>(), Some([2, 3, 4]));
        // One byte left: a run of two reads nothing, and the byte is still there.
        assert_eq!(r.array::<2>(), None);
        assert_eq!(r.byte(), Ok(5));
        assert!(r.is_empty());
        assert_eq!(r.array::<0>(), Some([]));
        assert_eq!(r.array::<1>(), None);
    }
}
